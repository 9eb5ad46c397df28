//! Event filters for a controller's primary updates (controller-runtime's predicates), given
//! to [`ControllerBuilder::with_event_filter`](crate::ControllerBuilder::with_event_filter).
//!
//! A filter sees an update as `(old, new)` and returns whether it queues the key. Adds and
//! deletes always queue, and so do the keys queued when a replica starts leading.
//!
//! ```
//! use k8s_openapi::api::apps::v1::Deployment;
//! use kcache_runtime::filter;
//!
//! let mut old = Deployment::default();
//! old.metadata.generation = Some(1);
//! let mut new = old.clone();
//! new.metadata.resource_version = Some("8".into()); // a status update: same generation
//! assert!(!filter::generation_changed(&old, &new));
//!
//! type Filter = fn(&Deployment, &Deployment) -> bool;
//! let spec_or_labels = filter::any_of([filter::generation_changed as Filter, filter::labels_changed]);
//! assert!(!spec_or_labels(&old, &new));
//! new.metadata.labels = Some([("tier".to_owned(), "web".to_owned())].into());
//! assert!(spec_or_labels(&old, &new));
//! ```

use kube_core::Resource;

/// The spec changed: `metadata.generation` differs (controller-runtime's
/// `GenerationChangedPredicate`). Status-only updates, and updates of kinds without a
/// generation (ConfigMaps, Secrets), do not pass.
pub fn generation_changed<K: Resource>(old: &K, new: &K) -> bool {
    old.meta().generation != new.meta().generation
}

/// The labels changed (controller-runtime's `LabelChangedPredicate`).
pub fn labels_changed<K: Resource>(old: &K, new: &K) -> bool {
    old.meta().labels != new.meta().labels
}

/// The annotations changed (controller-runtime's `AnnotationChangedPredicate`).
pub fn annotations_changed<K: Resource>(old: &K, new: &K) -> bool {
    old.meta().annotations != new.meta().annotations
}

/// Passes an update when any of `filters` does (controller-runtime's `predicate.Or`).
/// Several [`with_event_filter`](crate::ControllerBuilder::with_event_filter) calls combine
/// with *and*.
pub fn any_of<K, F, I>(filters: I) -> impl Fn(&K, &K) -> bool + Send + Sync + 'static
where
    I: IntoIterator<Item = F>,
    F: Fn(&K, &K) -> bool + Send + Sync + 'static,
{
    let filters: Vec<F> = filters.into_iter().collect();
    move |old, new| filters.iter().any(|f| f(old, new))
}
