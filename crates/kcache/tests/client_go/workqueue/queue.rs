//! `queue_test.go`: adds, reinserts, collapsing, draining and shutdown of the plain queue.

use super::*;

/// What a producer adds once the queue is shutting down; no worker may ever receive it.
const ADDED_AFTER_SHUTDOWN: &str = "added after shutdown!";

async fn basic(drain: bool) {
    let queue: Queue<String> = Queue::new();

    const PRODUCERS: usize = 50;
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|i| {
            let queue = queue.clone();
            tokio::spawn(async move {
                for _ in 0..50 {
                    queue
                        .add(i.to_string())
                        .expect("the queue is not shutting down yet");
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
        })
        .collect();

    const CONSUMERS: usize = 10;
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move {
                while let Some(item) = queue.get().await {
                    assert_ne!(
                        item, ADDED_AFTER_SHUTDOWN,
                        "got an item added after shutdown"
                    );
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    queue.done(&item);
                }
            })
        })
        .collect();

    for producer in producers {
        join("a producer", producer).await;
    }
    if drain {
        within("shutdown_with_drain", queue.shutdown_with_drain()).await;
    } else {
        queue.shutdown();
    }
    // client-go drops it silently; kcache hands it back.
    let refused = queue.add(ADDED_AFTER_SHUTDOWN.to_owned());
    assert_eq!(
        refused.map_err(|e| e.into_inner()),
        Err(ADDED_AFTER_SHUTDOWN.to_owned())
    );
    for consumer in consumers {
        join("a consumer", consumer).await;
    }
    assert_eq!(queue.len(), 0, "expected the queue to be empty");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_basic() {
    // client-go runs the same scenario once with ShutDown and once with ShutDownWithDrain.
    basic(false).await;
    basic(true).await;
}

async fn add_while_processing(drain: bool) {
    let queue: Queue<usize> = Queue::new();

    const PRODUCERS: usize = 50;
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|i| {
            let queue = queue.clone();
            tokio::spawn(async move {
                queue.add(i).expect("the queue is not shutting down yet");
            })
        })
        .collect();

    const CONSUMERS: usize = 10;
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move {
                // Every worker adds every item it gets back once more while still holding it:
                // the dirty-while-processing case.
                let mut counters: HashMap<usize, usize> = HashMap::new();
                while let Some(item) = queue.get().await {
                    let count = counters.entry(item).or_default();
                    *count += 1;
                    if *count < 2 {
                        // Refused only once the queue is shutting down (client-go drops it then).
                        let _ = queue.add(item);
                    }
                    queue.done(&item);
                }
            })
        })
        .collect();

    for producer in producers {
        join("a producer", producer).await;
    }
    if drain {
        within("shutdown_with_drain", queue.shutdown_with_drain()).await;
    } else {
        queue.shutdown();
    }
    for consumer in consumers {
        join("a consumer", consumer).await;
    }
    assert_eq!(queue.len(), 0, "expected the queue to be empty");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_add_while_processing() {
    // client-go runs the same scenario once with ShutDown and once with ShutDownWithDrain.
    add_while_processing(false).await;
    add_while_processing(true).await;
}

#[test]
fn test_len() {
    let q = Queue::new();
    q.add("foo").unwrap();
    assert_eq!(q.len(), 1);
    q.add("bar").unwrap();
    assert_eq!(q.len(), 2);
    q.add("foo").unwrap(); // already queued: the length stays
    assert_eq!(q.len(), 2);
}

#[tokio::test]
async fn test_reinsert() {
    let q = Queue::new();
    q.add("foo").unwrap();

    // Start processing.
    let i = within("get", q.get()).await;
    assert_eq!(i, Some("foo"));
    let i = i.unwrap();

    // Add it back while processing, then finish.
    q.add(i).unwrap();
    q.done(&i);

    // It is back on the queue.
    let i = within("get", q.get()).await;
    assert_eq!(i, Some("foo"));
    q.done(&i.unwrap());

    assert_eq!(q.len(), 0, "expected the queue to be empty");
}

#[tokio::test]
async fn test_collapse() {
    // client-go plugs a tracing queue in underneath to also check that the second add only
    // "touched" the item; kcache's queue storage is not pluggable, so that check has no
    // counterpart. The observable behaviour is ported in full.
    let q = Queue::new();
    q.add("bar").unwrap();
    q.add("bar").unwrap();

    let i = within("get", q.get()).await;
    assert_eq!(i, Some("bar"));
    q.done(&i.unwrap());

    assert_eq!(q.len(), 0, "expected the queue to be empty");
}

#[tokio::test(start_paused = true)]
async fn test_collapse_while_processing() {
    // client-go also checks, through a tracing queue underneath, that nothing was "touched";
    // kcache's queue storage is not pluggable, so that check has no counterpart.
    let q = Queue::new();
    q.add("foo").unwrap();

    // Start processing.
    let i = within("get", q.get()).await;
    assert_eq!(i, Some("foo"));

    // Add the same item twice while it is being processed.
    q.add("foo").unwrap();
    q.add("foo").unwrap();

    // Another worker waits for it.
    let worker = {
        let q = q.clone();
        tokio::spawn(async move {
            let i = q.get().await;
            assert_eq!(i, Some("foo"));
            q.done(&i.unwrap());
        })
    };

    // Give the worker a head start (paused clock: this is instant, after the worker waits).
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !worker.is_finished(),
        "the worker should be blocked until we are done"
    );
    q.done(&"foo");

    // The worker takes the re-added item; then nothing is left.
    join("the worker", worker).await;
    assert_eq!(q.len(), 0, "expected the queue to be empty");
}

/// Calls `get` until it reports that the queue is shut down, dropping whatever it returns.
async fn get_until_shut_down<T>(q: &Queue<T>)
where
    T: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
{
    within("get to report the shutdown", async {
        while q.get().await.is_some() {}
    })
    .await;
}

#[tokio::test]
async fn test_queue_drainage_using_shut_down_with_drain() {
    let q = Queue::new();
    q.add("foo").unwrap();
    q.add("bar").unwrap();
    let first_item = within("get", q.get()).await.unwrap();
    let second_item = within("get", q.get()).await.unwrap();

    let finished = {
        let q = q.clone();
        tokio::spawn(async move { q.shutdown_with_drain().await })
    };

    // The drain has started before the items are done: it waits for them.
    get_until_shut_down(&q).await;

    q.done(&first_item);
    q.done(&second_item);

    join("shutdown_with_drain", finished).await;
}

#[tokio::test]
async fn test_no_queue_drainage_using_shut_down() {
    let q = Queue::new();
    q.add("foo").unwrap();
    q.add("bar").unwrap();
    within("get", q.get()).await.unwrap();
    within("get", q.get()).await.unwrap();

    // ShutDown does not wait for the two items in flight.
    let finished = {
        let q = q.clone();
        tokio::spawn(async move { q.shutdown() })
    };
    join("shutdown", finished).await;
}

#[tokio::test]
async fn test_force_queue_shutdown_using_shut_down() {
    let q = Queue::new();
    q.add("foo").unwrap();
    q.add("bar").unwrap();
    within("get", q.get()).await.unwrap();
    within("get", q.get()).await.unwrap();

    let finished = {
        let q = q.clone();
        tokio::spawn(async move { q.shutdown_with_drain().await })
    };

    // The drain has started before ShutDown is called.
    get_until_shut_down(&q).await;

    // A second, forceful shutdown (e.g. a second SIGTERM) ends the drain although neither item
    // is done.
    q.shutdown();

    join("shutdown_with_drain", finished).await;
}

#[tokio::test]
async fn test_queue_drainage_using_shut_down_with_drain_with_dirty_item() {
    let q = Queue::new();
    q.add("foo").unwrap();
    let gotten = within("get", q.get()).await.unwrap();
    q.add("foo").unwrap();

    let finished = {
        let q = q.clone();
        tokio::spawn(async move { q.shutdown_with_drain().await })
    };

    // The drain has started (and waits).
    get_until_shut_down(&q).await;

    // Finishing the work puts the dirty item back into the queue...
    q.done(&gotten);
    let again = within("get", q.get()).await;
    assert!(again.is_some(), "should not have been done");
    q.done(&again.unwrap());

    // ...and now the queue is really done.
    assert!(
        within("get", q.get()).await.is_none(),
        "should have been done"
    );

    join("shutdown_with_drain", finished).await;
}

#[tokio::test]
async fn test_garbage_collection() {
    #[derive(Debug, PartialEq, Eq, Hash)]
    struct BigObject {
        data: Vec<u8>,
    }
    let leak_queue: Queue<Arc<BigObject>> = Queue::new();
    let c = Arc::new(BigObject {
        data: b"hello".to_vec(),
    });
    let collected = Arc::downgrade(&c);

    leak_queue.add(c).unwrap();
    let o = within("get", leak_queue.get()).await.unwrap();
    leak_queue.done(&o);
    drop(o);

    // The queue is still alive, but must hold on to nothing once the item is done.
    assert!(
        collected.upgrade().is_none(),
        "object was not released by the queue"
    );
    drop(leak_queue);
}
