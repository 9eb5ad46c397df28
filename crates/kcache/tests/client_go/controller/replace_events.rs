//! `controller_test.go`: the events a replace delivers, a watch reset, and the store's
//! resourceVersion.

use super::*;

/// One notification as Go's `eventRecorder` writes it down: the store's state for the key is
/// read when the handler runs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EventRecord {
    action: &'static str,
    key: String,
    event_rv: String,
    store_rv: String,
    is_in_initial_list: bool,
}

fn record(action: &'static str, key: &str, event_rv: &str, store_rv: &str) -> EventRecord {
    EventRecord {
        action,
        key: key.to_owned(),
        event_rv: event_rv.to_owned(),
        store_rv: store_rv.to_owned(),
        is_in_initial_list: false,
    }
}

/// Go's `eventRecorder`.
struct EventRecorder {
    history: Mutex<Vec<EventRecord>>,
    store: Reader<Pod>,
    update: Notify,
}

impl EventRecorder {
    fn new(store: Reader<Pod>) -> Arc<Self> {
        Arc::new(Self {
            history: Mutex::new(Vec::new()),
            store,
            update: Notify::new(),
        })
    }

    fn record(&self, action: &'static str, obj: &Pod, is_in_initial_list: bool) {
        let key = key_of(obj);
        let store_rv = self
            .store
            .get_by_key(&key)
            .map(|o| rv_of(&o))
            .unwrap_or_default();
        self.history.lock().push(EventRecord {
            action,
            key: key.to_string(),
            event_rv: rv_of(obj),
            store_rv,
            is_in_initial_list,
        });
        self.update.notify_one();
    }

    fn clear_history(&self) {
        self.history.lock().clear();
    }

    fn history(&self) -> Vec<EventRecord> {
        self.history.lock().clone()
    }

    /// Waits until at least `count` events are recorded, for at most `timeout`.
    async fn wait_for_event_count(&self, count: usize, timeout: Duration) -> Result<(), String> {
        tokio::time::timeout(timeout, async {
            while self.history.lock().len() < count {
                self.update.notified().await;
            }
        })
        .await
        .map_err(|_| {
            format!(
                "timed out waiting for {count} events, currently have {:?}",
                self.history()
            )
        })
    }
}

impl EventHandler<Pod> for EventRecorder {
    fn on_add(&self, obj: &Arc<Pod>, is_in_initial_list: bool) {
        self.record("add", obj, is_in_initial_list);
    }
    fn on_update(&self, _: &Arc<Pod>, new: &Arc<Pod>) {
        self.record("update", new, false);
    }
    fn on_delete(&self, obj: &DeletedObject<Pod>) {
        self.record("delete", obj.object(), false);
    }
}

/// Go's `sortDeleteEventsByKey`: deletes of different keys sorted by key, all else in order.
fn sort_delete_events_by_key(mut events: Vec<EventRecord>) -> Vec<EventRecord> {
    // Go's comparison with `i < j` leaves everything but adjacent deletes in place; sorting each
    // run of consecutive deletes by key is the same.
    let mut i = 0;
    while i < events.len() {
        let mut j = i;
        while j < events.len() && events[j].action == "delete" {
            j += 1;
        }
        events[i..j].sort_by(|a, b| a.key.cmp(&b.key));
        i = j.max(i + 1);
    }
    events
}

/// An informer with an atomic or a non-atomic queue, without resync, and an event recorder.
///
/// Its reflector lists with a plain LIST, as client-go's does in these tests (its fake source
/// cannot stream, so it falls back): a relist then hands the objects over in the source's list
/// order, which is the order Go's tests give their `Replace` (a streaming list's order is the
/// order of its temporary store, in client-go as in kcache).
async fn informer_with_recorder(
    source: &FakeSource<Pod>,
    atomic: bool,
) -> (SharedIndexInformer<Pod>, Arc<EventRecorder>, Running) {
    let queue = if atomic {
        QueueKind::RealFifo
    } else {
        QueueKind::RealFifoNonAtomic
    };
    let config = informer::Config::default()
        .queue(queue)
        .reflector(reflector::Config::default().initial_list(kcache::reflector::InitialList::List));
    let informer = SharedIndexInformer::new(source.clone(), config);
    let recorder = EventRecorder::new(informer.indexer().clone());
    informer
        .add_event_handler_with_config(
            Arc::clone(&recorder),
            HandlerConfig::default().delivery(Delivery::Inline),
        )
        .unwrap();
    let run = Running::start(&informer);
    wait_for_sync(&informer).await;
    (informer, recorder, run)
}

/// client-go's relist: the source's watches are dropped and its history compacted, with
/// `change` made in between, so the reflector must list again to see it.
fn relist_after(source: &FakeSource<Pod>, change: impl FnOnce()) {
    source.drop_watches();
    change();
    source.compact();
}

fn default_pod(name: &str, labels: &[(&str, &str)]) -> Pod {
    let mut p = pod(Some("default"), name);
    if !labels.is_empty() {
        p.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
    }
    p
}

/// Go's `testReplaceEvents`, up to and including case `last` (0-based): the cases share one
/// informer and run in order, as in Go, so a later case is set up by the earlier ones.
///
/// A case's initial objects are written to the source (Go adds them to the FIFO); its replace is
/// a relist of a source whose content is then exactly the replaced items (Go's
/// `fifo.Replace`). The source numbers resourceVersions itself, so the expected ones are those
/// it handed out. Go gives the replace's events 5 s, for a FIFO it feeds itself; here they come
/// through the reflector, whose relists wait out its backoff (client-go's: 800 ms, doubling),
/// so the wait for them is [`WAIT`].
async fn replace_events(atomic: bool, last: usize) {
    let source = FakeSource::<Pod>::new();
    let (informer, m, run) = informer_with_recorder(&source, atomic).await;
    let wait = Duration::from_secs(5);

    for case in 0..=last {
        m.clear_history();
        // (name, labels) of the initial objects, written in order.
        let initial: &[(&str, &[(&str, &str)])] = match case {
            0 => &[],
            1 => &[("pod-1", &[]), ("pod-3", &[])],
            _ => &[("pod-1", &[]), ("pod-2", &[("ver", "1")]), ("pod-3", &[])],
        };
        let mut rvs = BTreeMap::new();
        for (name, labels) in initial {
            rvs.insert(*name, source.upsert(default_pod(name, labels)));
        }
        m.wait_for_event_count(initial.len(), wait)
            .await
            .unwrap_or_else(|e| panic!("case {case}: the initial events never came: {e}"));
        m.clear_history();

        // The replace, and what it must produce.
        let mut new = BTreeMap::new();
        let expected_history: Vec<EventRecord> = match case {
            0 => {
                relist_after(&source, || {
                    new.insert("pod-1", source.upsert(default_pod("pod-1", &[])));
                });
                vec![record("add", "default/pod-1", &new["pod-1"], &new["pod-1"])]
            }
            1 => {
                relist_after(&source, || {
                    for name in ["pod-1", "pod-3"] {
                        source.delete(&ObjectKey::new(Some("default"), name));
                    }
                });
                vec![
                    record("delete", "default/pod-1", &rvs["pod-1"], ""),
                    record("delete", "default/pod-3", &rvs["pod-3"], ""),
                ]
            }
            _ => {
                relist_after(&source, || {
                    new.insert("pod-1", source.upsert(default_pod("pod-1", &[])));
                    new.insert(
                        "pod-2",
                        source.upsert(default_pod("pod-2", &[("ver", "2")])),
                    );
                    new.insert("pod-4", source.upsert(default_pod("pod-4", &[])));
                    source.delete(&ObjectKey::new(Some("default"), "pod-3"));
                });
                vec![
                    record("delete", "default/pod-3", &rvs["pod-3"], ""),
                    record("update", "default/pod-1", &new["pod-1"], &new["pod-1"]),
                    record("update", "default/pod-2", &new["pod-2"], &new["pod-2"]),
                    record("add", "default/pod-4", &new["pod-4"], &new["pod-4"]),
                ]
            }
        };
        m.wait_for_event_count(expected_history.len(), WAIT)
            .await
            .unwrap_or_else(|e| panic!("case {case}: the replace's events never came: {e}"));

        let mut items: Vec<Pod> = informer
            .indexer()
            .list()
            .iter()
            .map(|p| (**p).clone())
            .collect();
        items.sort_by_key(key_of);
        assert_eq!(
            items,
            source.objects(),
            "case {case}: the store after the replace"
        );
        let history = sort_delete_events_by_key(m.history());
        assert_eq!(history, expected_history, "case {case} (atomic: {atomic})");
    }
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn test_replace_events__create_with_no_initial_objects_atomic_false() {
    replace_events(false, 0).await;
}

#[tokio::test(start_paused = true)]
async fn test_replace_events__delete_all_objects_atomic_false() {
    replace_events(false, 1).await;
}

#[tokio::test(start_paused = true)]
async fn test_replace_events__create_update_delete_atomic_false() {
    replace_events(false, 2).await;
}

#[tokio::test(start_paused = true)]
async fn test_replace_events__create_with_no_initial_objects_atomic_true() {
    replace_events(true, 0).await;
}

#[tokio::test(start_paused = true)]
async fn test_replace_events__delete_all_objects_atomic_true() {
    replace_events(true, 1).await;
}

#[tokio::test(start_paused = true)]
async fn test_replace_events__create_update_delete_atomic_true() {
    replace_events(true, 2).await;
}

/// Go's `testResetWatch`: a change to pod-1 and a new pod-2 that no watch saw arrive with the
/// relist, neither as part of the initial list.
async fn reset_watch(atomic: bool) {
    let source = FakeSource::<Pod>::new();
    source.upsert(default_pod("pod-1", &[]));
    let (_informer, recorder, run) = informer_with_recorder(&source, atomic).await;
    let wait = Duration::from_secs(5);

    recorder.wait_for_event_count(1, wait).await.unwrap();
    let history = recorder.history();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].action, "add");
    assert_eq!(history[0].key, "default/pod-1");
    assert!(history[0].is_in_initial_list);

    recorder.clear_history();
    relist_after(&source, || {
        source.upsert(default_pod("pod-1", &[]));
        source.upsert(default_pod("pod-2", &[]));
    });
    // Through the reflector's relist backoff (see `replace_events`).
    recorder.wait_for_event_count(2, WAIT).await.unwrap();
    let history = recorder.history();
    assert_eq!(history.len(), 2, "{history:?}");
    let update = history
        .iter()
        .find(|e| e.action == "update")
        .expect("no update");
    let add = history.iter().find(|e| e.action == "add").expect("no add");
    assert_eq!(update.key, "default/pod-1");
    assert!(!update.is_in_initial_list);
    assert_eq!(add.key, "default/pod-2");
    assert!(!add.is_in_initial_list);
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn test_reset_watch__atomic_false() {
    reset_watch(false).await;
}

#[tokio::test(start_paused = true)]
async fn test_reset_watch__atomic_true() {
    reset_watch(true).await;
}

#[tokio::test(start_paused = true)]
async fn test_store_resource_version() {
    let source = FakeSource::<Pod>::new();
    source.upsert(default_pod("pod-1", &[]));
    let (informer, recorder, run) = informer_with_recorder(&source, true).await;
    let store = informer.indexer();
    let wait = Duration::from_secs(5);

    recorder.wait_for_event_count(1, wait).await.unwrap();
    let history = recorder.history();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].action, "add");
    assert_eq!(history[0].key, "default/pod-1");
    assert!(history[0].is_in_initial_list);

    recorder.clear_history();
    // A label change bumps the resourceVersion.
    source.upsert(default_pod("pod-1", &[("foo", "bar")]));
    recorder.wait_for_event_count(1, wait).await.unwrap();
    let history = recorder.history();
    assert_eq!(
        history[0].event_rv,
        store.last_sync_resource_version(),
        "after the update"
    );

    recorder.clear_history();
    source.delete(&ObjectKey::new(Some("default"), "pod-1"));
    recorder.wait_for_event_count(1, wait).await.unwrap();
    let history = recorder.history();
    assert_eq!(
        history[0].event_rv,
        store.last_sync_resource_version(),
        "after the delete"
    );
    run.stop().await;
}

/// Objects from which no resourceVersion can be read leave the store's where the last relist put
/// it; the next relist moves it.
///
/// client-go's transform turns the pods into strings, which have no metadata, and keys them
/// all `pod-1`. A kcache transform keeps the object's type and the informer keys objects by
/// `namespace/name`, so here the transform clears the resourceVersion, and the key is
/// `default/pod-1`. The relist's update of pod-1 then has the same (empty) resourceVersion on
/// both sides, which kcache treats as a resync: a handler without a resync period is not
/// given it (documented), where client-go's `processDeltas` calls it. The port asserts that,
/// and waits for the store to reach the relist's resourceVersion.
#[tokio::test(start_paused = true)]
async fn test_store_resource_version_with_non_meta_transform() {
    let source = FakeSource::<Pod>::new();
    source.upsert(default_pod("pod-1", &[]));
    let informer = SharedIndexInformer::builder(source.clone())
        .config(informer::Config::default().queue(QueueKind::RealFifo))
        .transform(|mut pod: Pod| {
            pod.metadata.resource_version = None;
            pod
        })
        .build();
    let recorder = EventRecorder::new(informer.indexer().clone());
    informer
        .add_event_handler_with_config(
            Arc::clone(&recorder),
            HandlerConfig::default().delivery(Delivery::Inline),
        )
        .unwrap();
    let run = Running::start(&informer);
    wait_for_sync(&informer).await;
    let store = informer.indexer();
    let wait = Duration::from_secs(5);

    recorder.wait_for_event_count(1, wait).await.unwrap();
    let history = recorder.history();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].action, "add");
    assert_eq!(history[0].key, "default/pod-1");
    assert!(history[0].is_in_initial_list);

    // The store stays at the initial list's resourceVersion: the update carries none. (Go waits
    // for the handler's update; to kcache it is a resync, not given to this handler, so the
    // port waits for the store to hold the update.)
    let replace_rv = store.last_sync_resource_version();
    recorder.clear_history();
    source.upsert(default_pod("pod-1", &[("foo", "bar")]));
    eventually("the update never reached the store", || {
        labels_of(store, "default/pod-1") == Some([("foo".to_owned(), "bar".to_owned())].into())
    })
    .await;
    assert_eq!(replace_rv, store.last_sync_resource_version());
    assert_eq!(
        recorder.history(),
        [],
        "kcache delivers no resync to this handler"
    );

    recorder.clear_history();
    let mut relist_rv = String::new();
    relist_after(&source, || {
        source.upsert(default_pod("pod-1", &[("foo", "bar2")]));
    });
    relist_rv.push_str(&source.resource_version());
    eventually(
        "the store never reached the relist's resourceVersion",
        || store.last_sync_resource_version() == relist_rv,
    )
    .await;
    // kcache: the relist's same-resourceVersion update is a resync, not delivered (see above).
    tokio::task::yield_now().await;
    assert_eq!(
        recorder.history(),
        [],
        "kcache delivers no resync to this handler"
    );
    assert_eq!(
        labels_of(store, "default/pod-1"),
        Some([("foo".to_owned(), "bar2".to_owned())].into()),
        "the relist's state is stored"
    );
    run.stop().await;
}

fn labels_of(store: &Reader<Pod>, key: &str) -> Option<BTreeMap<String, String>> {
    store
        .get_by_key(key)
        .and_then(|p| p.metadata.labels.clone())
}
