//! Unit tests of the factory and its informer builder.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube_core::ObjectMeta;

use super::*;
use crate::{
    ListerWatcher,
    testing::{Call, FakeSource},
};

fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            managed_fields: Some(vec![Default::default()]),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

#[tokio::test(start_paused = true)]
async fn factory_returns_one_informer_per_type_and_starts_each_once() {
    let factory = SharedInformerFactory::new(Config::default());
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let made = std::cell::Cell::new(0);
    let source = |_: Option<&str>| {
        made.set(made.get() + 1);
        src.clone()
    };
    let a = factory.informer::<ConfigMap>(&source);
    let b = factory.informer::<ConfigMap>(&source);
    assert_eq!(made.get(), 1, "the second request reuses the informer");
    assert_eq!(factory.start(), 1);
    assert_eq!(factory.start(), 0, "start is idempotent");
    let synced = factory.wait_for_cache_sync().await;
    assert_eq!(synced.len(), 1);
    assert!(a.has_synced() && b.has_synced());
    assert_eq!(b.indexer().len(), 1, "both handles share one cache");
    let initial_lists = src
        .calls()
        .iter()
        .filter(|c| matches!(c, Call::List { .. }))
        .count();
    assert_eq!(initial_lists, 1, "one reflector, one initial list");
    factory.shutdown().await;
    assert!(a.is_stopped());
}

#[tokio::test(start_paused = true)]
async fn informer_requested_after_start_starts_on_the_next_start() {
    let factory = SharedInformerFactory::new(Config::default());
    factory.informer::<ConfigMap>(&|_: Option<&str>| FakeSource::<ConfigMap>::new());
    assert_eq!(factory.start(), 1);
    let secrets = factory.informer::<Secret>(&|_: Option<&str>| FakeSource::<Secret>::new());
    assert!(!secrets.has_started());
    assert_eq!(factory.start(), 1);
    let synced = factory.wait_for_cache_sync().await;
    assert_eq!(synced.len(), 2, "{synced:?}");
    assert!(synced.values().all(|s| *s));
    factory.shutdown().await;
    assert!(secrets.is_stopped());
    assert_eq!(factory.start(), 0, "no start after shutdown");
}

#[tokio::test(start_paused = true)]
async fn wait_for_cache_sync_reports_unsynced_types_after_shutdown() {
    let factory = Arc::new(SharedInformerFactory::new(Config::default()));
    let src = FakeSource::<ConfigMap>::new();
    src.stall_lists(true);
    src.set_supports_watch_list(false);
    factory.informer::<ConfigMap>(&|_: Option<&str>| src.clone());
    factory.start();
    let f = Arc::clone(&factory);
    let waiter = tokio::spawn(async move { f.wait_for_cache_sync().await });
    tokio::time::sleep(Duration::from_secs(5)).await;
    factory.shutdown().await;
    let synced = waiter.await.unwrap();
    assert_eq!(synced.values().copied().collect::<Vec<_>>(), [false]);
}

/// Records the namespace each lister-watcher was made for.
struct Recording(FakeSource<ConfigMap>, std::sync::Mutex<Vec<Option<String>>>);

impl Source<ConfigMap> for Recording {
    type Object = ConfigMap;
    type ListerWatcher = FakeSource<ConfigMap>;
    fn lister_watcher(&self, namespace: Option<&str>) -> FakeSource<ConfigMap> {
        self.1.lock().unwrap().push(namespace.map(str::to_owned));
        self.0.clone()
    }
}

#[tokio::test(start_paused = true)]
async fn informer_from_a_source_gets_the_factory_namespace_once() {
    let factory = SharedInformerFactory::new(Config::default().namespace("ns"));
    let src = Recording(FakeSource::new(), Default::default());
    src.0.upsert(cm("a"));
    let a = factory.informer::<ConfigMap>(&src);
    let b = factory.informer::<ConfigMap>(&src);
    assert_eq!(*src.1.lock().unwrap(), [Some("ns".to_owned())]);
    factory.start();
    factory.wait_for_cache_sync().await;
    assert_eq!(b.indexer().len(), 1);
    assert!(a.indexer().get_by_key("ns/a").is_some());
    factory.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn strip_managed_fields_applies_to_every_informer() {
    let factory = SharedInformerFactory::new(Config::default().strip_managed_fields(true));
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let informer = factory.informer::<ConfigMap>(&|_: Option<&str>| src.clone());
    factory.start();
    factory.wait_for_cache_sync().await;
    assert!(
        informer
            .indexer()
            .list()
            .iter()
            .all(|o| o.metadata.managed_fields.is_none())
    );
    factory.shutdown().await;
}

/// A lister-watcher over a [`FakeSource`] that records the label selector of every list.
#[derive(Clone)]
struct Selectors(
    FakeSource<ConfigMap>,
    Arc<std::sync::Mutex<Vec<Option<String>>>>,
);

impl ListerWatcher<ConfigMap> for Selectors {
    async fn list(
        &self,
        params: &crate::lister_watcher::ListParams,
    ) -> Result<crate::lister_watcher::ObjectList<ConfigMap>, crate::lister_watcher::Error> {
        self.1.lock().unwrap().push(params.label_selector.clone());
        self.0.list(params).await
    }

    async fn watch(
        &self,
        params: &crate::lister_watcher::WatchParams,
        resource_version: &str,
    ) -> Result<crate::lister_watcher::WatchStream<ConfigMap>, crate::lister_watcher::Error> {
        self.0.watch(params, resource_version).await
    }
}

#[tokio::test(start_paused = true)]
async fn builder_overrides_the_factory_defaults_it_is_given() {
    let factory = SharedInformerFactory::new(
        Config::default()
            .namespace("ns")
            .label_selector("team=a")
            .resync_period(Duration::from_secs(60)),
    );
    let fake = FakeSource::new();
    fake.set_supports_watch_list(false);
    fake.upsert(cm("a"));
    let lists = Arc::new(std::sync::Mutex::new(Vec::new()));
    let namespaces = std::sync::Mutex::new(Vec::new());
    let source = |ns: Option<&str>| {
        namespaces.lock().unwrap().push(ns.map(str::to_owned));
        Selectors(fake.clone(), Arc::clone(&lists))
    };
    let informer = factory
        .informer_builder::<ConfigMap>(&source)
        .namespace("other")
        .label_selector("app=web")
        .resync_period(Duration::ZERO)
        .indexer("by-name", |c: &ConfigMap| {
            c.metadata.name.iter().cloned().collect()
        })
        .transform(|mut c: ConfigMap| {
            c.data = Some([("seen".to_owned(), "yes".to_owned())].into());
            c
        })
        .build()
        .unwrap();
    assert_eq!(*namespaces.lock().unwrap(), [Some("other".to_owned())]);
    factory.start();
    factory.wait_for_cache_sync().await;
    assert_eq!(
        lists.lock().unwrap().first(),
        Some(&Some("app=web".to_owned())),
        "the builder's selector replaces the factory's"
    );
    let cached = informer.indexer().get_by_key("ns/a").unwrap();
    assert_eq!(
        cached.data.as_ref().unwrap()["seen"],
        "yes",
        "transform applied"
    );
    assert!(
        informer.indexer().by_index("by-name", "a").unwrap().len() == 1,
        "the builder's index is there"
    );
    assert!(
        informer.indexer().by_index("namespace", "ns").is_ok(),
        "the namespace index is always there"
    );
    factory.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn builder_returns_the_informer_made_with_the_same_settings_and_refuses_others() {
    let factory = SharedInformerFactory::new(Config::default().namespace("ns"));
    let made = std::sync::atomic::AtomicUsize::new(0);
    let source = |_: Option<&str>| {
        made.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        FakeSource::<ConfigMap>::new()
    };
    let first = factory
        .informer_builder::<ConfigMap>(&source)
        .label_selector("app=web")
        .build()
        .unwrap();
    let again = factory
        .informer_builder::<ConfigMap>(&source)
        .label_selector("app=web")
        .build()
        .unwrap();
    assert_eq!(made.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(
        std::ptr::eq(first.indexer(), again.indexer()),
        "one shared informer"
    );

    fn conflict<S: Source<ConfigMap>>(
        builder: informer::Builder<ConfigMap, FromSource<'_, S>>,
    ) -> &'static str {
        match builder.build() {
            Err(Error::Conflict { setting, .. }) => setting,
            Err(other) => panic!("not a conflict: {other}"),
            Ok(_) => panic!("a request with other settings was given the existing informer"),
        }
    }
    let b = || {
        factory
            .informer_builder::<ConfigMap>(&source)
            .label_selector("app=web")
    };
    assert_eq!(conflict(b().label_selector("app=db")), "label selector");
    assert_eq!(conflict(b().namespace("other")), "namespace");
    assert_eq!(conflict(b().all_namespaces()), "namespace");
    assert_eq!(
        conflict(b().field_selector("metadata.name=a")),
        "field selector"
    );
    assert_eq!(
        conflict(b().resync_period(Duration::from_secs(5))),
        "resync period"
    );
    assert_eq!(
        conflict(b().queue(crate::fifo::QueueKind::DeltaFifo)),
        "queue"
    );
    assert_eq!(
        conflict(b().indexer("x", |_: &ConfigMap| Vec::new())),
        "indexers"
    );
    assert_eq!(
        conflict(b().strip_managed_fields(true)),
        "strip managed fields"
    );
    assert_eq!(conflict(b().transform(|c: ConfigMap| c)), "transform");
    assert_eq!(
        conflict(b().watch_error_handler(|_| {})),
        "watch error handler"
    );
    assert_eq!(
        conflict(
            b().reflector(
                crate::reflector::Config::default()
                    .label_selector("app=web")
                    .page_size(7)
            )
        ),
        "informer settings"
    );
    let err = b().label_selector("app=db").build().unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("\"app=web\"") && text.contains("\"app=db\"") && text.contains("ConfigMap"),
        "{text}"
    );
    assert_eq!(
        made.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "no conflict made one"
    );

    // The plain request shares whatever exists, as client-go's InformerFor does.
    let shared = factory.informer::<ConfigMap>(&source);
    assert!(std::ptr::eq(first.indexer(), shared.indexer()));
}

#[tokio::test(start_paused = true)]
async fn builder_sees_an_informer_made_with_the_factory_defaults() {
    let factory = SharedInformerFactory::new(Config::default().namespace("ns"));
    let source = |_: Option<&str>| FakeSource::<ConfigMap>::new();
    let plain = factory.informer::<ConfigMap>(&source);
    let same = factory
        .informer_builder::<ConfigMap>(&source)
        .build()
        .unwrap();
    assert!(std::ptr::eq(plain.indexer(), same.indexer()));
    assert!(matches!(
        factory
            .informer_builder::<ConfigMap>(&source)
            .namespace("x")
            .build(),
        Err(Error::Conflict {
            setting: "namespace",
            ..
        })
    ));
}

#[tokio::test(start_paused = true)]
async fn builder_memory_accounting_is_set_on_the_informer_and_compared_on_later_requests() {
    let factory = SharedInformerFactory::new(Config::default());
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let source = |_: Option<&str>| src.clone();
    let cms = factory
        .informer_builder::<ConfigMap>(&source)
        .memory_sizer(|_: &ConfigMap| 1000)
        .memory_budget_bytes(100)
        .build()
        .unwrap();
    assert_eq!(cms.memory(), Some(crate::memory::MemoryUsage::default()));
    factory.start();
    factory.wait_for_cache_sync().await;
    let usage = cms.memory().unwrap();
    assert_eq!(usage.objects, 1);
    let key = crate::store::ObjectKey::new(Some("ns"), "a");
    assert_eq!(
        usage.bytes,
        1000 + crate::store::entry_overhead::<ConfigMap>(&key)
    );
    assert!(cms.over_memory_budget());
    fn setting<S: Source<ConfigMap>>(
        b: informer::Builder<ConfigMap, FromSource<'_, S>>,
    ) -> &'static str {
        match b.build() {
            Err(Error::Conflict { setting, .. }) => setting,
            other => panic!("expected a conflict, got {other:?}"),
        }
    }
    let again = factory
        .informer_builder::<ConfigMap>(&source)
        .memory_sizer(|_: &ConfigMap| 1000)
        .memory_budget_bytes(100);
    assert_eq!(
        setting(again),
        "memory accounting",
        "sizers cannot be compared"
    );
    let estimated = factory
        .informer_builder::<ConfigMap>(&source)
        .account_memory()
        .memory_budget_bytes(100);
    assert_eq!(setting(estimated), "memory accounting");
    let secrets = factory
        .informer_builder::<Secret>(&|_: Option<&str>| FakeSource::<Secret>::new())
        .account_memory()
        .build()
        .unwrap();
    assert_eq!(secrets.memory_budget(), None);
    let same = factory
        .informer_builder::<Secret>(&|_: Option<&str>| FakeSource::<Secret>::new())
        .account_memory()
        .build()
        .unwrap();
    assert!(
        same.memory().is_some(),
        "the same settings share the informer"
    );
    let budget = factory
        .informer_builder::<Secret>(&|_: Option<&str>| FakeSource::<Secret>::new())
        .account_memory()
        .memory_budget_bytes(1)
        .build();
    assert!(
        matches!(
            budget,
            Err(Error::Conflict {
                setting: "memory budget",
                ..
            })
        ),
        "{budget:?}"
    );
    factory.shutdown().await;
}
