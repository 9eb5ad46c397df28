//! Reconcile latency of an object created right after a 10,000-object initial list, with the
//! default rate-limiting queue and with the priority queue (in memory, `FakeSource`, one
//! worker, each reconcile busy for 20 µs).
//!
//! ```sh
//! cargo run --release -p kcache --example priority_relist
//! ```

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::ConfigMap;
use kcache::{
    SharedIndexInformer,
    controller::{self, Action, Controller, WorkQueueKind},
    informer,
    testing::{FakeSource, config_map},
};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

const OBJECTS: usize = 10_000;
const WORK: Duration = Duration::from_micros(20);

/// What one run measured.
struct Measured {
    latency: Duration,
    reconciled_before: usize,
}

async fn run(kind: WorkQueueKind) -> Measured {
    let src = FakeSource::<ConfigMap>::new();
    for i in 0..OBJECTS {
        src.upsert(config_map(&format!("old-{i:05}")));
    }
    let informer = SharedIndexInformer::new(src.clone(), informer::Config::default());
    // (reconciles so far, when "new" was reconciled and after how many others)
    let state = Arc::new(Mutex::new((0usize, None::<(Instant, usize)>)));
    let controller = Controller::new(informer.clone(), controller::Config::default().queue(kind));
    // Started after the handlers are registered, as a factory's start() usually is.
    let cancel = CancellationToken::new();
    tokio::spawn({
        let (i, c) = (informer.clone(), cancel.clone());
        async move { i.run(c).await }
    });

    let first = Arc::new(tokio::sync::Notify::new());
    let task = tokio::spawn(controller.run(
        {
            let (state, first) = (Arc::clone(&state), Arc::clone(&first));
            move |key: kcache::store::ObjectKey, _obj: Option<Arc<ConfigMap>>| {
                let (state, first) = (Arc::clone(&state), Arc::clone(&first));
                async move {
                    let start = Instant::now();
                    while start.elapsed() < WORK {
                        std::hint::spin_loop();
                    }
                    let mut s = state.lock();
                    if key.name() == "new" {
                        s.1 = Some((Instant::now(), s.0));
                    }
                    s.0 += 1;
                    if s.0 == 1 {
                        first.notify_one();
                    }
                    Ok::<_, std::convert::Infallible>(Action::Done)
                }
            }
        },
        cancel.clone(),
    ));
    first.notified().await;
    let created = Instant::now();
    src.upsert(config_map("new"));
    let (at, before) = loop {
        if let Some(done) = state.lock().1 {
            break done;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    cancel.cancel();
    let _ = task.await;
    Measured {
        latency: at.saturating_duration_since(created),
        reconciled_before: before,
    }
}

#[tokio::main]
async fn main() {
    for kind in [WorkQueueKind::RateLimiting, WorkQueueKind::Priority] {
        let mut runs = Vec::new();
        for _ in 0..5 {
            runs.push(run(kind).await);
        }
        runs.sort_by_key(|m| m.latency);
        let median = &runs[runs.len() / 2];
        println!(
            "{kind:?}: new object reconciled {:.1} ms after creation (median of 5), \
             after {} other reconciles",
            median.latency.as_secs_f64() * 1e3,
            median.reconciled_before
        );
    }
}
