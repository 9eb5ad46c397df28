//! Active workers and reconcile time, exact under paused time.

use super::*;
use crate::histogram::RECONCILE_TIME_BUCKETS;

#[tokio::test(start_paused = true)]
async fn active_workers_count_the_reconciles_in_flight() {
    let s = setup();
    for n in ["a", "b", "c"] {
        s.src.upsert(cm(n));
    }
    let controller = Controller::new(s.informer.clone(), Config::default().workers(2));
    let metrics = controller.metrics().clone();
    assert_eq!(metrics.active_workers(), 0);
    let (open, gate) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(controller.run(
        move |_key, _obj: Option<Arc<ConfigMap>>| {
            let mut gate = gate.clone();
            async move {
                let _ = gate.wait_for(|open| *open).await;
                Ok::<_, String>(Action::Done)
            }
        },
        s.cancel.clone(),
    ));
    eventually(|| metrics.active_workers() == 2).await;
    // Two workers, three keys: the third waits in the queue, not in a worker.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(metrics.active_workers(), 2);
    assert_eq!(metrics.reconciles(), 2);
    open.send_replace(true);
    eventually(|| metrics.succeeded() == 3).await;
    assert_eq!(metrics.active_workers(), 0);
    s.cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn reconcile_time_observes_every_reconcile_in_controller_runtime_buckets() {
    let s = setup();
    for n in ["ok", "fails"] {
        s.src.upsert(cm(n));
    }
    let controller = Controller::new(
        s.informer.clone(),
        Config::default().workers(1).max_retries(0),
    );
    let metrics = controller.metrics().clone();
    let run = tokio::spawn(controller.run(
        move |key: ObjectKey, _obj: Option<Arc<ConfigMap>>| async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            if key.name() == "fails" {
                Err("no".to_owned())
            } else {
                Ok(Action::Done)
            }
        },
        s.cancel.clone(),
    ));
    eventually(|| metrics.succeeded() + metrics.failed() == 2).await;
    let t = metrics.reconcile_time();
    assert_eq!(t.bounds, RECONCILE_TIME_BUCKETS);
    assert_eq!(t.count(), 2, "a failed reconcile is observed too");
    assert_eq!(t.sum, 0.6);
    let le = |bound: f64| {
        t.cumulative()
            .into_iter()
            .find(|(b, _)| *b == bound)
            .unwrap()
            .1
    };
    assert_eq!((le(0.25), le(0.3)), (0, 2));
    s.cancel.cancel();
    run.await.unwrap().unwrap();
}

/// Counts the adds and retries a queue reports, by queue name.
#[derive(Default)]
struct CountingProvider {
    adds: Arc<Mutex<HashMap<String, Arc<AtomicUsize>>>>,
}

struct Count(Arc<AtomicUsize>);

impl crate::workqueue::metrics::CounterMetric for Count {
    fn inc(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl crate::workqueue::MetricsProvider for CountingProvider {
    fn new_adds_metric(&self, name: &str) -> Box<dyn crate::workqueue::metrics::CounterMetric> {
        let counter = Arc::clone(self.adds.lock().entry(name.to_owned()).or_default());
        Box::new(Count(counter))
    }
}

#[tokio::test(start_paused = true)]
async fn the_work_queue_reports_to_the_configured_metrics_provider_under_the_controller_name() {
    for kind in [WorkQueueKind::RateLimiting, WorkQueueKind::Priority] {
        let s = setup();
        for n in ["a", "b"] {
            s.src.upsert(cm(n));
        }
        let provider = Arc::new(CountingProvider::default());
        let adds = Arc::clone(&provider.adds);
        let controller = Controller::new(
            s.informer.clone(),
            Config::default()
                .name("configmaps")
                .queue(kind)
                .metrics_provider(provider),
        );
        let metrics = controller.metrics().clone();
        let run = tokio::spawn(controller.run(
            |_key, _obj: Option<Arc<ConfigMap>>| async { Ok::<_, String>(Action::Done) },
            s.cancel.clone(),
        ));
        eventually(|| metrics.succeeded() == 2).await;
        let names: Vec<String> = adds.lock().keys().cloned().collect();
        assert_eq!(names, ["configmaps"], "{kind:?}");
        assert_eq!(
            adds.lock()["configmaps"].load(Ordering::SeqCst),
            2,
            "{kind:?}"
        );
        s.cancel.cancel();
        run.await.unwrap().unwrap();
    }
}
