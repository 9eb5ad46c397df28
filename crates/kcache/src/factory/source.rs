//! [`Source`]: what the factory needs from a client to make an informer of `K` (its
//! lister-watcher, and the form its cache stores), and [`InformerFrom`], which gives the
//! factory `informer::<K>(&source)`.

use kube_core::Resource;

use super::{FromSource, SharedInformerFactory, Stored};
use crate::{
    informer::{self, SharedIndexInformer},
    lister_watcher::ListerWatcher,
};

/// Makes the [`ListerWatcher`] of a `K` informer for one namespace or all of them, and chooses
/// the form the informer stores its objects in ([`Source::Object`]): what
/// [`InformerFrom`] needs from a client. `kcache_client::Client`
/// implements it for every typed resource with lean storage (`kcache_client::Compact<K>`), and
/// `client.typed()` with typed storage (a namespace is ignored for cluster-scoped kinds).
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::{InformerFrom, SharedInformerFactory, factory, testing::FakeSource};
///
/// /// Hands out clones of one fake collection, whatever the namespace.
/// struct Fake(FakeSource<ConfigMap>);
/// impl factory::Source<ConfigMap> for Fake {
///     type Object = ConfigMap; // typed storage
///     type ListerWatcher = FakeSource<ConfigMap>;
///     fn lister_watcher(&self, _namespace: Option<&str>) -> FakeSource<ConfigMap> {
///         self.0.clone()
///     }
/// }
///
/// let factory = SharedInformerFactory::new(factory::Config::default());
/// let cms = factory.informer::<ConfigMap>(&Fake(FakeSource::new()));
/// assert!(!cms.has_started());
/// ```
///
/// A closure from the namespace to a lister-watcher is a `Source` too (with typed storage):
/// `factory.informer::<ConfigMap>(&|_ns: Option<&str>| FakeSource::new())`.
pub trait Source<K> {
    /// What the informer stores: `K` (typed storage) or a lean form of it.
    type Object: Stored<K>;
    /// The lister-watcher it makes.
    type ListerWatcher: ListerWatcher<Self::Object>;

    /// A lister-watcher of `K` in `namespace` (`None`: all namespaces).
    fn lister_watcher(&self, namespace: Option<&str>) -> Self::ListerWatcher;
}

impl<K, F, L> Source<K> for F
where
    K: Resource + Clone + Send + Sync + 'static,
    F: Fn(Option<&str>) -> L,
    L: ListerWatcher<K>,
{
    type Object = K;
    type ListerWatcher = L;

    fn lister_watcher(&self, namespace: Option<&str>) -> L {
        self(namespace)
    }
}

/// `factory.informer_builder::<K>(&source)` and `factory.informer::<K>(&source)`: the factory's
/// shared informer of `K` from a [`Source`], storing what the source chooses
/// ([`Source::Object`]). A trait rather than inherent methods so that the return type can name
/// the source's stored form while the call names only `K`; import it with
/// `use kcache::InformerFrom` (or `kcache::factory::InformerFrom`).
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache::{InformerFrom, SharedInformerFactory, SharedIndexInformer, factory};
/// use kcache::testing::FakeSource;
///
/// let factory = SharedInformerFactory::new(factory::Config::default());
/// let source = |_namespace: Option<&str>| FakeSource::<ConfigMap>::new();
/// let cms: SharedIndexInformer<ConfigMap> = factory
///     .informer_builder::<ConfigMap>(&source)
///     .label_selector("app=web")
///     .build()?;
/// // The shorthand returns the existing informer, whatever it was made with.
/// let same = factory.informer::<ConfigMap>(&source);
/// assert!(std::ptr::eq(cms.indexer(), same.indexer()));
/// # Ok::<(), factory::Error>(())
/// ```
pub trait InformerFrom<S> {
    /// The [`informer::Builder`] of the factory's informer for `K` from `source`, starting from
    /// the factory's settings (namespace, informer configuration with the selectors and
    /// resync period, managed fields stripped or not) and the namespace index; see
    /// [`FromSource`] for what its `build` returns and refuses.
    ///
    /// The factory keeps one informer per stored type, so a lean (`kcache_client::Client`)
    /// and a typed (`client.typed()`) informer of the same kind are two informers, with two
    /// watches.
    fn informer_builder<'f, K>(&'f self, source: &'f S) -> informer::Builder<K, FromSource<'f, S>>
    where
        K: Resource + Clone + Send + Sync + 'static,
        S: Source<K>;

    /// client-go's `InformerFor`, as a shorthand: the shared informer for `K`, created on first
    /// request from `source` with the factory's settings. Exactly
    /// `self.informer_builder::<K>(source).build()`, except that an existing informer is
    /// returned as it is, whatever it was made with (`build` would refuse other settings).
    fn informer<K>(&self, source: &S) -> SharedIndexInformer<<S as Source<K>>::Object>
    where
        K: Resource + Clone + Send + Sync + 'static,
        S: Source<K>;
}

impl<S> InformerFrom<S> for SharedInformerFactory {
    fn informer_builder<'f, K>(&'f self, source: &'f S) -> informer::Builder<K, FromSource<'f, S>>
    where
        K: Resource + Clone + Send + Sync + 'static,
        S: Source<K>,
    {
        super::builder::builder(self, source)
    }

    fn informer<K>(&self, source: &S) -> SharedIndexInformer<<S as Source<K>>::Object>
    where
        K: Resource + Clone + Send + Sync + 'static,
        S: Source<K>,
    {
        match self.informer_builder::<K>(source).build_or_existing() {
            Ok(informer) | Err((_, Some(informer))) => informer,
            // Only a transform is refused without an existing informer, and none is set.
            Err((err, None)) => unreachable!("a request with the factory's settings: {err}"),
        }
    }
}
