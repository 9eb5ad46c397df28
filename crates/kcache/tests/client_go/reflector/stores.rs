//! Watch timeouts, the last-synced resourceVersion, list extraction and store transforms
//! (`reflector_test.go`'s store-facing tests).

use super::*;

/// TestWatchTimeout: watches ask for a random timeout in `[min, 2·min]`, with `min` at least
/// 5 minutes.
mod watch_timeout {
    use super::*;

    async fn run_case(min_watch_timeout: Duration, expected_min_timeout_seconds: u32) {
        let cancel = CancellationToken::new();
        let got: Arc<Mutex<Option<u32>>> = Arc::default();
        let (g, c) = (got.clone(), cancel.clone());
        let lw = Lw::new(
            |_| Ok(pod_list("10", vec![])),
            move |opts| {
                *g.lock() = opts.timeout_seconds;
                c.cancel();
                Ok(pending())
            },
        );
        let config = base().min_watch_timeout(min_watch_timeout);
        let run = start(lw, Arc::new(RecordingStore::new()), config, &cancel, never);
        run.finished().await;
        let got = got.lock().expect("the watch asks for a timeout");
        let (min, max) = (
            expected_min_timeout_seconds,
            2 * expected_min_timeout_seconds,
        );
        assert!(
            (min..=max).contains(&got),
            "unexpected timeoutSeconds {got}, expected in [{min}, {max}]"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_timeout() {
        run_case(Duration::ZERO, 5 * 60).await;
    }

    #[tokio::test(start_paused = true)]
    async fn small_timeout_not_honored() {
        run_case(Duration::from_secs(1), 5 * 60).await;
    }

    #[tokio::test(start_paused = true)]
    async fn timeout_30m() {
        run_case(Duration::from_secs(30 * 60), 30 * 60).await;
    }
}

/// A store that records every resourceVersion the watch hands it: each event's object's, and
/// each bookmark's (client-go's `storeWithRV`, a `ResourceVersionUpdater`). Objects are not
/// keyed, as client-go's key function accepts the test's nameless pods.
#[derive(Default)]
struct RvStore {
    resource_versions: Mutex<Vec<String>>,
}

impl RvStore {
    fn record(&self, obj: &Pod) -> Result<(), StoreError> {
        self.resource_versions.lock().push(rv(obj));
        Ok(())
    }
}

impl ReflectorStore<Pod> for RvStore {
    fn add(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.record(&obj)
    }
    fn update(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.record(&obj)
    }
    fn delete(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.record(&obj)
    }
    fn replace(&self, _: Vec<Arc<Pod>>, _: String) -> Result<(), StoreError> {
        Ok(())
    }
    fn resync(&self) -> Result<(), StoreError> {
        Ok(())
    }
    fn bookmark(&self, resource_version: &str) -> Result<(), StoreError> {
        self.resource_versions
            .lock()
            .push(resource_version.to_owned());
        Ok(())
    }
}

/// TestReflectorResourceVersionUpdate: the store learns the resourceVersion of every watch
/// event, bookmarks included, in order. kcache has no `ResourceVersionUpdater`: the RVs reach
/// the store in the objects of add/update/delete and through `bookmark`.
#[tokio::test(start_paused = true)]
async fn reflector_resource_version_update() {
    let cancel = CancellationToken::new();
    let (fw, stream) = fake_watch();
    let mut first = Some(stream);
    let store = Arc::new(RvStore::default());
    let lw = Lw::new(
        |_| Ok(pod_list("10", vec![])),
        move |_| Ok(first.take().unwrap_or_else(pending)),
    );
    let run = start(lw, store.clone(), list_mode(), &cancel, never);
    let nameless = |rv: &str| pod("", rv);
    fw.send(added(nameless("10"))).await;
    fw.send(modified(nameless("20"))).await;
    fw.send(bookmark("30", None)).await;
    fw.send(deleted(nameless("40"))).await;
    run.stop().await;
    assert_eq!(*store.resource_versions.lock(), ["10", "20", "30", "40"]);
}

/// TestReflectorListExtract: after a paginated list, objects deleted from the store are
/// freed, even when another object of the same page is kept (client-go checks that the
/// store does not pin each page's backing array, with finalizers; here with `Weak`s).
///
/// client-go's fake lister answers every page with the continue token `"true"`; kcache's
/// pager refuses a repeated token as a protocol error (recovery table, "list | a `continue`
/// token repeated"), so the pages carry distinct tokens.
#[tokio::test(start_paused = true)]
async fn reflector_list_extract() {
    const ITEMS: usize = 100;
    const EXEMPT: usize = ITEMS / 4;
    const PAGES: usize = 5;
    let cancel = CancellationToken::new();
    let mut fetched = 0;
    let lw = Lw::new(
        move |_| {
            let start = fetched * ITEMS;
            let pods: Vec<Pod> = (start..start + ITEMS)
                .map(|i| {
                    let mut p = pod(&format!("pod-{i}"), "");
                    p.metadata.namespace = Some("default".into());
                    p
                })
                .collect();
            fetched += 1;
            let next = if fetched >= PAGES {
                String::new()
            } else {
                format!("true-{fetched}")
            };
            Ok(page("1", &next, pods))
        },
        watch_closing_then_cancel(0, &cancel),
    );
    let store = ThreadSafeStore::<Pod>::for_resource();
    let config = list_mode().page_size(ITEMS as u32);
    let run = start(lw, Arc::new(store.clone()), config, &cancel, never);
    run.finished().await;

    let page_key = |p: usize, i: usize| format!("default/pod-{}", p * ITEMS + i);
    for p in 0..PAGES {
        assert!(store.contains_key(page_key(p, EXEMPT).as_str()));
    }
    let firsts: Vec<std::sync::Weak<Pod>> = (0..PAGES)
        .map(|p| {
            let first = store
                .get_by_key(page_key(p, 0).as_str())
                .unwrap_or_else(|| panic!("{} should exist in the store", page_key(p, 0)));
            Arc::downgrade(&first)
        })
        .collect();
    for k in store.list_keys() {
        if (0..PAGES).any(|p| k.as_str() == page_key(p, EXEMPT)) {
            continue;
        }
        assert!(
            store.delete_by_key(k.as_str()).is_some(),
            "{k} should exist"
        );
    }
    for (p, first) in firsts.iter().enumerate() {
        assert!(
            first.upgrade().is_none(),
            "the first pod of page {p} is still alive"
        );
        assert!(store.contains_key(page_key(p, EXEMPT).as_str()));
    }
}

/// A store that checks, around the replace at `last_rv`, that the corrupt object is there
/// before and gone after, while a pre-existing one stays (client-go's `fakeStore` hooks).
struct UnsafeDeleteStore {
    inner: RecordingStore<Pod>,
    last_rv: &'static str,
    replace_invoked: AtomicUsize,
    violations: Mutex<Vec<String>>,
}

impl UnsafeDeleteStore {
    fn check(&self, name: &str, want: bool, when: &str) {
        let exists = self
            .inner
            .snapshot()
            .contains_key(&ObjectKey::new(Some("ns"), name));
        if exists != want {
            self.violations
                .lock()
                .push(format!("{when} the replace: {name} exists: {exists}"));
        }
    }
}

impl ReflectorStore<Pod> for UnsafeDeleteStore {
    fn add(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.inner.add(obj)
    }
    fn update(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.inner.update(obj)
    }
    fn delete(&self, obj: Arc<Pod>) -> Result<(), StoreError> {
        self.inner.delete(obj)
    }
    fn replace(&self, list: Vec<Arc<Pod>>, resource_version: String) -> Result<(), StoreError> {
        let watched = resource_version == self.last_rv;
        if watched {
            self.replace_invoked.fetch_add(1, Ordering::SeqCst);
            self.check("foo", true, "before");
            self.check("foo-1", true, "before");
        }
        let result = self.inner.replace(list, resource_version);
        if watched {
            self.replace_invoked.fetch_add(1, Ordering::SeqCst);
            if let Err(e) = &result {
                self.violations
                    .lock()
                    .push(format!("the replace failed: {e}"));
            }
            self.check("foo", false, "after");
            self.check("foo-1", true, "after");
        }
        result
    }
    fn resync(&self) -> Result<(), StoreError> {
        self.inner.resync()
    }
}

/// TestReflectorReplacesStoreOnUnsafeDelete: a corrupt object is unsafe-deleted on the
/// server, whose watch then sends an ERROR event 500 `StorageReadError`; the reflector
/// relists, and the relist's replace removes the object from the store.
#[tokio::test(start_paused = true)]
async fn reflector_replaces_store_on_unsafe_delete() {
    let ns_pod = |name: &str, rv: &str| {
        let mut p = pod(name, rv);
        p.metadata.namespace = Some("ns".into());
        p
    };
    // These pods exist from the start and never change.
    let pods = vec![
        ns_pod("foo-1", "1"),
        ns_pod("foo-2", "2"),
        ns_pod("foo-3", "3"),
    ];
    let last_expected_rv = "5";
    let mut lists = vec![
        // The initial list.
        pod_list("3", pods.clone()),
        // The relist after the watch error.
        pod_list(last_expected_rv, pods.clone()),
    ]
    .into_iter();
    let corrupt = ns_pod("foo", "4");
    let mut once = Some(vec![
        WatchEvent::Added(corrupt),
        // The object became corrupt and was unsafe-deleted; the delete moved the storage's
        // RV to 5.
        WatchEvent::Error(Box::new(status(
            500,
            "StorageReadError",
            "failed to prepare current and previous objects: corrupt object has been deleted",
        ))),
    ]);
    let lw = Lw::new(
        move |_| {
            lists
                .next()
                .ok_or_else(|| plain_error("no list left in the script"))
        },
        move |_| Ok(once.take().map_or_else(pending, events_then_hold)),
    );
    let store = Arc::new(UnsafeDeleteStore {
        inner: RecordingStore::new(),
        last_rv: last_expected_rv,
        replace_invoked: AtomicUsize::new(0),
        violations: Mutex::default(),
    });
    let cancel = CancellationToken::new();
    let run = start(lw, store.clone(), list_mode(), &cancel, never);
    let handle = run.handle.clone();
    eventually("the reflector to catch up with RV 5", || {
        handle.last_sync_resource_version() == last_expected_rv
    })
    .await;
    assert_eq!(handle.last_sync_resource_version(), last_expected_rv);
    assert_eq!(
        store.replace_invoked.load(Ordering::SeqCst),
        2,
        "the replace hooks ran once each"
    );
    assert!(
        store.violations.lock().is_empty(),
        "{:?}",
        store.violations.lock()
    );
    assert_eq!(store.inner.snapshot().len(), pods.len());
    run.stop().await;
}

/// TestReflectorRespectStoreTransformer: objects of a streaming initial list and of the
/// watch after it reach the queue transformed.
///
/// client-go's transformer belongs to the queue (`RealFIFO` / `DeltaFIFO` options) and the
/// reflector applies it to its temporary store too: 2 objects twice (temporary store, then
/// `Replace`) and 1 once, 5 calls. kcache's transform belongs to the reflector
/// ([`kcache::reflector::TransformFunc`]: "applied exactly once per received object") and its
/// queues have none: 3 calls.
mod reflector_respect_store_transformer {
    use super::*;

    fn transformed(counter: &Arc<AtomicUsize>) -> kcache::reflector::TransformFunc<Pod> {
        let counter = counter.clone();
        Arc::new(move |mut p: Pod| {
            counter.fetch_add(1, Ordering::SeqCst);
            p.spec.get_or_insert_with(PodSpec::default).hostname = Some("transformed".into());
            p
        })
    }

    fn mk_pod(name: &str, rv: &str) -> Pod {
        let mut p = pod(name, rv);
        p.metadata.namespace = Some("ns".into());
        p.spec = Some(PodSpec {
            hostname: Some("test".into()),
            ..PodSpec::default()
        });
        p
    }

    /// Runs the scenario into `queue`; returns how often the transform ran.
    async fn run_case(queue: Arc<dyn ReflectorStore<Pod>>) -> usize {
        let last_expected_rv = "3";
        let events = vec![
            added(mk_pod("foo-1", "1")),
            added(mk_pod("foo-2", "2")),
            bookmark(last_expected_rv, Some("true")),
            added(mk_pod("foo-3", "3")),
        ];
        let (fw, stream) = fake_watch();
        let mut first = Some(stream);
        let lw = Lw::new(
            // Never used in streaming mode.
            |_| Err(plain_error("list call not expected in WatchList mode")),
            move |_| Ok(first.take().unwrap_or_else(pending)),
        );
        let invoked = Arc::new(AtomicUsize::new(0));
        let cancel = CancellationToken::new();
        let transform = transformed(&invoked);
        let run = start_with(lw, queue, base(), &cancel, never, |r| {
            r.with_transform(transform)
        });
        let handle = run.handle.clone();
        for e in events {
            fw.send(e).await;
        }
        eventually("the reflector to catch up with RV 3", || {
            handle.last_sync_resource_version() == last_expected_rv
        })
        .await;
        run.stop().await;
        invoked.load(Ordering::SeqCst)
    }

    fn assert_all_transformed(items: &BTreeMap<ObjectKey, Arc<Pod>>) {
        assert_eq!(items.len(), 3, "{:?}", items.keys().collect::<Vec<_>>());
        for (k, p) in items {
            assert_eq!(
                p.spec.as_ref().and_then(|s| s.hostname.as_deref()),
                Some("transformed"),
                "{k} was not transformed before it was queued"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn real_fifo() {
        let fifo = Arc::new(RealFifo::atomic(meta_namespace_key_func::<Pod>()));
        let invoked = run_case(fifo.clone()).await;
        // The queue's content: replay its deltas.
        fifo.close();
        let mut items = BTreeMap::new();
        while let Ok(deltas) = tokio::time::timeout(PATIENCE, fifo.pop_batch(|d, _| d))
            .await
            .expect("the closed queue did not drain")
        {
            for d in deltas {
                let kind = d.kind;
                match d.object {
                    DeltaObject::ReplacedAll { objects, .. } => {
                        items = objects.into_iter().collect();
                    }
                    DeltaObject::Object { key, obj } if kind != DeltaType::Deleted => {
                        items.insert(key, obj);
                    }
                    DeltaObject::Object { key, .. }
                    | DeltaObject::DeletedFinalStateUnknown { key, .. } => {
                        items.remove(&key);
                    }
                    DeltaObject::SyncAll | DeltaObject::Bookmark { .. } => {}
                }
            }
        }
        assert_all_transformed(&items);
        assert_eq!(invoked, 3, "the transform runs once per received object");
    }

    #[tokio::test(start_paused = true)]
    async fn delta_fifo() {
        let fifo = Arc::new(DeltaFifo::new(
            meta_namespace_key_func::<Pod>(),
            DeltaFifoConfig::default(),
        ));
        let invoked = run_case(fifo.clone()).await;
        // The queue's content: each key's latest object.
        fifo.close();
        let mut items = BTreeMap::new();
        while let Ok(latest) = tokio::time::timeout(
            PATIENCE,
            fifo.pop_batch(|deltas, _| {
                deltas
                    .last()
                    .filter(|d| d.kind != DeltaType::Deleted)
                    .and_then(|d| Some((d.key()?.clone(), d.object()?.clone())))
            }),
        )
        .await
        .expect("the closed queue did not drain")
        {
            if let Some((k, obj)) = latest {
                items.insert(k, obj);
            }
        }
        assert_all_transformed(&items);
        assert_eq!(invoked, 3, "the transform runs once per received object");
    }
}
