//! Removing a handler and waiting until it has returned.

use super::*;

/// A handler whose `on_add` tells the test it has been entered, then blocks until the test
/// lets it go; it counts its calls and whether one is in progress.
struct Gate {
    calls: AtomicUsize,
    in_call: std::sync::atomic::AtomicBool,
    entered: tokio::sync::mpsc::UnboundedSender<String>,
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl Gate {
    fn new() -> (
        Arc<Self>,
        tokio::sync::mpsc::UnboundedReceiver<String>,
        std::sync::mpsc::Sender<()>,
    ) {
        let (entered, entered_rx) = tokio::sync::mpsc::unbounded_channel();
        let (release_tx, release) = std::sync::mpsc::channel();
        let gate = Arc::new(Self {
            calls: AtomicUsize::new(0),
            in_call: std::sync::atomic::AtomicBool::new(false),
            entered,
            release: std::sync::Mutex::new(release),
        });
        (gate, entered_rx, release_tx)
    }
}

impl EventHandler<ConfigMap> for Gate {
    fn on_add(&self, obj: &Arc<ConfigMap>, _: bool) {
        self.in_call.store(true, Ordering::SeqCst);
        self.calls.fetch_add(1, Ordering::SeqCst);
        let _ = self
            .entered
            .send(obj.metadata.name.clone().unwrap_or_default());
        // Blocks until released (or until the test has gone: the sender is dropped).
        let _ = self.release.lock().unwrap().recv();
        self.in_call.store(false, Ordering::SeqCst);
    }
}

const WAIT: Duration = Duration::from_secs(60);

/// client-go 1.37's `ShutDownEventHandler`: the blocking removal returns only once the handler
/// has returned from the call it was in and will be called no more — the two adds still
/// buffered for it are never delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_and_wait_returns_only_once_the_handler_has_returned_and_is_called_no_more() {
    for delivery in [Delivery::BlockingPool, Delivery::Adaptive] {
        let src = FakeSource::new();
        for name in ["a", "b", "c"] {
            src.upsert(cm(name));
        }
        let informer = SharedIndexInformer::new(src.clone(), config());
        let (gate, mut entered, release) = Gate::new();
        let reg = informer
            .add_event_handler_with_config(
                Arc::clone(&gate),
                HandlerConfig::default().delivery(delivery),
            )
            .unwrap();
        let other = Arc::new(Recorder::default());
        informer.add_event_handler(Arc::clone(&other)).unwrap();
        let run = Running::start(&informer);
        let first = tokio::time::timeout(WAIT, entered.recv())
            .await
            .expect("the handler was never called")
            .unwrap();

        let removal = reg.remove_and_wait();
        tokio::pin!(removal);
        for _ in 0..50 {
            assert!(
                futures::poll!(removal.as_mut()).is_pending(),
                "{delivery:?}: the removal returned while the handler was still in its call \
                 on {first}"
            );
            tokio::task::yield_now().await;
        }
        assert!(gate.in_call.load(Ordering::SeqCst));
        release.send(()).unwrap();
        let removed = tokio::time::timeout(WAIT, removal)
            .await
            .expect("the removal never returned");
        assert!(removed, "{delivery:?}: this call removed the handler");
        assert!(!gate.in_call.load(Ordering::SeqCst), "{delivery:?}");
        assert_eq!(gate.calls.load(Ordering::SeqCst), 1, "{delivery:?}");

        // Later changes reach the other handler, never the removed one.
        src.upsert(cm("d"));
        tokio::time::timeout(WAIT, async {
            while !other.state.lock().contains_key(&key("d")) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the other handler never saw d");
        assert_eq!(gate.calls.load(Ordering::SeqCst), 1, "{delivery:?}");
        assert!(
            !reg.remove_and_wait().await,
            "{delivery:?}: a second removal is a no-op"
        );
        drop(release);
        run.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn remove_and_wait_before_start_and_after_stop_returns_at_once() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let informer = SharedIndexInformer::new(src.clone(), config());
    let never = Arc::new(Recorder::default());
    let reg = informer.add_event_handler(Arc::clone(&never)).unwrap();
    let kept = Arc::new(Recorder::default());
    let kept_reg = informer.add_event_handler(Arc::clone(&kept)).unwrap();
    assert!(reg.remove_and_wait().await);
    assert!(reg.is_removed());
    let run = Running::start(&informer);
    assert!(kept_reg.synced().await);
    run.stop().await;
    assert!(never.log.lock().is_empty(), "{:?}", never.log.lock());
    assert!(
        kept_reg.remove_and_wait().await,
        "the registration was still listed"
    );
}
