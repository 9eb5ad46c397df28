//! A server that stalls or a reflector that panics: early-ended streaming lists, silent watches,
//! stalled lists, panicking code and transforms.

use super::*;

/// client-go gives a failed streaming list up for the round and lists: the cache syncs from
/// the LIST although no stream ever sends the initial-events-end bookmark.
#[tokio::test(start_paused = true)]
async fn a_streaming_list_that_ends_before_its_bookmark_falls_back_to_a_list() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let s = Scripted::new(&src);
    let rv = src.resource_version();
    s.script_watches(move || {
        let mut a = cm("a");
        a.metadata.resource_version = Some(rv.clone());
        Ok(vec![Ok(WatchEvent::Added(a))])
    });
    let run = start(&s, Config::default().initial_list(InitialList::Stream));
    let n = requests_in_a_minute(&s).await;
    assert!(n <= STORM_BOUND, "{n} requests in a minute");
    assert!(
        run.has_error("before the initial-events-end bookmark"),
        "{:?}",
        run.errors.lock()
    );
    assert!(
        run.store
            .ops()
            .iter()
            .any(|o| matches!(o, StoreOp::Replace(..))),
        "the fallback LIST replaced the store"
    );
    assert!(
        run.handle.health().synced_once,
        "synced by the fallback LIST"
    );
    s.heal();
    settle().await;
    assert_eq!(run.names(), ["a"]);
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_silent_watch_is_cut_after_the_idle_timeout_and_rewatched() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let s = Scripted::new(&src);
    let run = start(
        &s,
        list_config().watch_idle_timeout(Duration::from_secs(90)),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let watches = s.watch_calls.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(89)).await;
    assert_eq!(
        s.watch_calls.load(Ordering::SeqCst),
        watches,
        "not cut before 90 s"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        s.watch_calls.load(Ordering::SeqCst),
        watches + 1,
        "cut and re-watched at 90 s"
    );
    assert!(run.has_error("idle for 90s"), "{:?}", run.errors.lock());
    assert_eq!(s.list_calls.load(Ordering::SeqCst), 1, "no relist");
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stalled_list_hits_its_deadline_and_is_retried() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    src.stall_lists(true);
    let s = Scripted::new(&src);
    let run = start(&s, list_config().list_timeout(Duration::from_secs(10)));
    tokio::time::sleep(Duration::from_secs(35)).await;
    assert!(
        s.list_calls.load(Ordering::SeqCst) >= 2,
        "retried after the deadline"
    );
    assert!(
        run.has_error("list of configmaps in namespace ns not answered within 10s"),
        "{:?}",
        run.errors.lock()
    );
    src.stall_lists(false);
    settle().await;
    assert_eq!(run.names(), ["a"]);
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_panic_inside_the_reflector_is_caught_reported_and_recovered_from() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let s = Scripted::new(&src);
    s.panic_lists.store(2, Ordering::SeqCst);
    let run = start(&s, list_config());
    settle().await;
    assert!(
        run.has_error("panicked: the lister-watcher blew up"),
        "{:?}",
        run.errors.lock()
    );
    assert_eq!(run.handle.metrics().panics, 2);
    assert_eq!(run.names(), ["a"]);
    assert!(!run.task.is_finished());
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_panicking_transform_is_caught_and_the_reflector_restarts() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let s = Scripted::new(&src);
    let fuse = Arc::new(AtomicUsize::new(1));
    let f = Arc::clone(&fuse);
    let run = start_with(&s, list_config(), move |r| {
        r.with_transform(Arc::new(move |o: ConfigMap| {
            if f.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                panic!("transform bug");
            }
            o
        }))
    });
    settle().await;
    assert!(run.has_error("transform bug"), "{:?}", run.errors.lock());
    assert_eq!(run.names(), ["a"]);
    run.stop().await;
}
