//! Namespace sets: which namespaces a cache lists and watches ([`Config::namespaces`],
//! [`Cache::namespaces`]), and the factories of the informers of a set.
//!
//! As controller-runtime's `multiNamespaceCache`, a cache of a set of two or more namespaces
//! is one informer per namespace, with the same settings: the manager's main
//! [`SharedInformerFactory`] holds one informer per type, so each namespace of a set has a
//! factory of its own, started, synced and shut down with the main one. A cache of one
//! namespace, or of every namespace, is one informer of the main factory.
//!
//! [`Config::namespaces`]: super::Config::namespaces
//! [`Cache::namespaces`]: super::Cache::namespaces

use std::{collections::BTreeSet, sync::Arc};

use kcache::{SharedInformerFactory, factory};

/// Which namespaces a cache lists and watches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every namespace: one informer.
    All,
    /// These namespaces, sorted and distinct, at least one: one informer each.
    Set(Vec<String>),
}

impl Scope {
    /// The scope of these namespaces: [`All`](Self::All) when there is none.
    pub(crate) fn of(namespaces: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let set: BTreeSet<String> = namespaces.into_iter().map(Into::into).collect();
        if set.is_empty() {
            Self::All
        } else {
            Self::Set(set.into_iter().collect())
        }
    }

    /// The namespaces of a set of two or more (one informer each); `None` for one namespace
    /// or every namespace (one informer).
    pub(crate) fn several(&self) -> Option<&[String]> {
        match self {
            Self::Set(set) if set.len() > 1 => Some(set),
            _ => None,
        }
    }

    /// `all namespaces`, `namespace "a"` or `namespaces ["a", "b"]`: for messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::All => "all namespaces".to_owned(),
            Self::Set(set) if set.len() == 1 => format!("namespace {:?}", set[0]),
            Self::Set(set) => format!("namespaces {set:?}"),
        }
    }
}

/// The factories of the namespaces of sets: one per namespace, made on first use.
#[derive(Debug)]
pub(crate) struct SetFactories {
    config: factory::Config,
    factories: parking_lot::Mutex<std::collections::BTreeMap<String, Arc<SharedInformerFactory>>>,
}

impl SetFactories {
    /// Factories with the settings of `config` (the main factory's), each in its namespace.
    pub(crate) fn new(config: factory::Config) -> Self {
        Self {
            config,
            factories: parking_lot::Mutex::default(),
        }
    }

    /// The factory of `namespace`.
    pub(crate) fn of(&self, namespace: &str) -> Arc<SharedInformerFactory> {
        let mut factories = self.factories.lock();
        let factory = factories.entry(namespace.to_owned()).or_insert_with(|| {
            Arc::new(SharedInformerFactory::new(
                self.config.clone().namespace(namespace),
            ))
        });
        Arc::clone(factory)
    }

    /// Every factory made so far.
    pub(crate) fn all(&self) -> Vec<Arc<SharedInformerFactory>> {
        self.factories.lock().values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Scope;

    #[test]
    fn a_set_is_sorted_and_distinct_and_an_empty_one_is_every_namespace() {
        assert_eq!(
            Scope::of(["b", "a", "b"]),
            Scope::Set(vec!["a".into(), "b".into()])
        );
        assert_eq!(Scope::of(Vec::<String>::new()), Scope::All);
    }

    #[test]
    fn only_a_set_of_two_or_more_is_several_informers() {
        assert_eq!(Scope::All.several(), None);
        assert_eq!(Scope::of(["a"]).several(), None);
        assert_eq!(
            Scope::of(["a", "b"]).several(),
            Some(&["a".to_owned(), "b".to_owned()][..])
        );
    }

    #[test]
    fn a_scope_describes_itself_for_messages() {
        assert_eq!(Scope::All.describe(), "all namespaces");
        assert_eq!(Scope::of(["a"]).describe(), r#"namespace "a""#);
        assert_eq!(Scope::of(["b", "a"]).describe(), r#"namespaces ["a", "b"]"#);
    }
}
