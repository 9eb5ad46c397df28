//! Where handlers are called ([`Delivery`]): on the runtime while quick, on the blocking pool
//! once slow, again on the pool after blocking inside the runtime, and by the writer itself
//! for inline handlers — always in order, nothing lost.

use std::thread::ThreadId;

use super::*;

/// Records each added object's name with the thread it was delivered on; `on_first` runs on
/// the first call only.
struct Threads {
    seen: Mutex<Vec<(String, ThreadId)>>,
    on_first: Box<dyn Fn() + Send + Sync>,
}

impl Threads {
    fn new(on_first: impl Fn() + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(Self {
            seen: Mutex::new(Vec::new()),
            on_first: Box::new(on_first),
        })
    }

    fn names(&self) -> Vec<String> {
        self.seen.lock().iter().map(|(n, _)| n.clone()).collect()
    }
}

impl EventHandler<ConfigMap> for Threads {
    fn on_add(&self, obj: &Arc<ConfigMap>, _initial: bool) {
        if self.seen.lock().is_empty() {
            (self.on_first)();
        }
        let name = obj.metadata.name.clone().unwrap_or_default();
        self.seen.lock().push((name, std::thread::current().id()));
    }
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("c{i:03}")).collect()
}

async fn add_all(src: &FakeSource<ConfigMap>, names: &[String]) {
    for name in names {
        src.upsert(cm(name));
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn an_adaptive_handler_that_stays_quick_is_called_on_the_runtime_s_thread() {
    let src = FakeSource::new();
    let informer = SharedIndexInformer::new(src.clone(), config());
    let handler = Threads::new(|| {});
    informer.add_event_handler(Arc::clone(&handler)).unwrap();
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    let want = names(100);
    add_all(&src, &want).await;
    eventually(|| handler.seen.lock().len() == want.len()).await;
    assert_eq!(handler.names(), want);
    let runtime_thread = std::thread::current().id();
    assert!(
        handler
            .seen
            .lock()
            .iter()
            .all(|(_, t)| *t == runtime_thread),
        "a quick handler never went to the blocking pool"
    );
    run.stop().await;
}

#[tokio::test]
async fn an_adaptive_handler_moves_to_the_blocking_pool_after_a_slow_call_and_loses_nothing() {
    let src = FakeSource::new();
    let informer = SharedIndexInformer::new(src.clone(), config());
    let handler = Threads::new(|| std::thread::sleep(SLOW_CALL * 5));
    informer.add_event_handler(Arc::clone(&handler)).unwrap();
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    let want = names(50);
    add_all(&src, &want).await;
    eventually(|| handler.seen.lock().len() == want.len()).await;
    assert_eq!(handler.names(), want, "in order, once each");
    let runtime_thread = std::thread::current().id();
    let seen = handler.seen.lock().clone();
    assert_eq!(seen[0].1, runtime_thread, "the first call, on the runtime");
    assert_ne!(
        seen[want.len() - 1].1,
        runtime_thread,
        "after a slow call, the pool"
    );
    run.stop().await;
}

#[tokio::test]
async fn an_adaptive_handler_that_blocks_inside_the_runtime_gets_the_event_again_on_the_pool() {
    let src = FakeSource::new();
    let informer = SharedIndexInformer::new(src.clone(), config());
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(1000);
    informer
        .add_event_handler(HandlerFns::new().on_add(move |o: &Arc<ConfigMap>, _| {
            // Panics on a runtime thread; fine on the blocking pool.
            tx.blocking_send(o.metadata.name.clone().unwrap_or_default())
                .unwrap();
        }))
        .unwrap();
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    let want = names(20);
    add_all(&src, &want).await;
    let mut got = Vec::new();
    while got.len() < want.len() {
        let next = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("an event was lost")
            .unwrap();
        got.push(next);
    }
    assert_eq!(got, want, "in order, none lost, none twice");
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inline_handler_added_during_churn_sees_every_key_added_first_and_ends_equal() {
    let src = FakeSource::new();
    for name in names(100) {
        src.upsert(cm(&name));
    }
    let informer = SharedIndexInformer::new(src.clone(), config());
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    let churn = tokio::spawn({
        let src = src.clone();
        async move {
            for round in 0..20 {
                for name in names(100).iter().skip(round % 3).step_by(3) {
                    src.upsert(cm(name));
                }
                tokio::task::yield_now().await;
            }
        }
    });
    let rec = Arc::new(Recorder::default());
    informer
        .add_event_handler_with_options(
            Arc::clone(&rec),
            HandlerConfig::default().delivery(Delivery::Inline),
        )
        .unwrap();
    churn.await.unwrap();
    let want = source_state(&src);
    eventually(|| cache_state(&informer) == want && *rec.state.lock() == want).await;
    let log = rec.log.lock().clone();
    for name in names(100) {
        let first = log
            .iter()
            .find(|l| l.contains(&format!(" ns/{name} ")))
            .unwrap_or_else(|| panic!("no notification for {name}"));
        assert!(first.starts_with("add "), "{name}: {first}");
    }
    run.stop().await;
}
