//! [`Cache`]: the settings of the manager's cache of one type (controller-runtime's
//! `cache.ByObject`), given to [`Manager::cache`](super::Manager::cache).

use std::{fmt, sync::Arc};

/// How the manager caches one type `C`: label and field selectors (only matching objects
/// are listed, watched and cached), managed-fields stripping, a transform applied before
/// storing. Types without one are cached whole, in the manager's namespace, with the
/// manager's [`strip_managed_fields`](super::Config::strip_managed_fields).
///
/// A selected cache holds only what its selectors match: a reconcile reading an object
/// outside them finds nothing. [`Context::read`](crate::Context::read) says so in its error,
/// naming the selectors.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_runtime::{Manager, manager};
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = kcache_client::Client::infer().await?;
/// let manager = Manager::new(client, manager::Config::new("demo").namespace("apps"))?;
/// // Only the ConfigMaps this operator labels, without their annotations.
/// manager.cache::<ConfigMap>(
///     manager::Cache::new()
///         .label_selector("app.kubernetes.io/managed-by=demo")
///         .transform(|mut cm: ConfigMap| {
///             cm.metadata.annotations = None;
///             cm
///         }),
/// )?;
/// # Ok(()) }
/// ```
pub struct Cache<C> {
    pub(crate) label_selector: Option<String>,
    pub(crate) field_selector: Option<String>,
    pub(crate) strip_managed_fields: Option<bool>,
    pub(crate) transform: Option<Arc<dyn Fn(C) -> C + Send + Sync>>,
}

impl<C> Default for Cache<C> {
    fn default() -> Self {
        Self {
            label_selector: None,
            field_selector: None,
            strip_managed_fields: None,
            transform: None,
        }
    }
}

impl<C> fmt::Debug for Cache<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
            .field("strip_managed_fields", &self.strip_managed_fields)
            .field("transform", &self.transform.is_some())
            .finish()
    }
}

impl<C> Cache<C> {
    /// Every object of the type in the manager's namespace, as the manager's defaults say.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lists, watches and caches only the objects matching this label selector
    /// (`app=web,tier!=db`).
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Lists, watches and caches only the objects matching this field selector
    /// (`spec.nodeName=node-a`).
    #[must_use]
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Drops `metadata.managedFields` before storing (default: the manager's
    /// [`strip_managed_fields`](super::Config::strip_managed_fields)).
    #[must_use]
    pub fn strip_managed_fields(mut self, on: bool) -> Self {
        self.strip_managed_fields = Some(on);
        self
    }

    /// Applies `transform` to every object before it is stored (after managed fields are
    /// stripped): drop what the controller never reads. Reconciles read the transformed
    /// objects.
    #[must_use]
    pub fn transform(mut self, transform: impl Fn(C) -> C + Send + Sync + 'static) -> Self {
        self.transform = Some(Arc::new(transform));
        self
    }

    /// `label selector "a=b", field selector "c=d"`, or `no selector`: for messages.
    pub(crate) fn describe(&self) -> String {
        let parts: Vec<String> = [
            ("label selector", &self.label_selector),
            ("field selector", &self.field_selector),
        ]
        .into_iter()
        .filter_map(|(what, s)| s.as_ref().map(|s| format!("{what} {s:?}")))
        .collect();
        if parts.is_empty() {
            "no selector".to_owned()
        } else {
            parts.join(", ")
        }
    }
}
