//! Throughput of the work queues: `cargo bench -p kcache --bench workqueue`.
//!
//! - `queue/add_get_done_8_workers`: one producer adds 10k distinct keys while 8 worker tasks
//!   (multi-thread runtime) get and `done` them until shutdown.
//! - `queue/readd_while_processing_8_workers`: the same, but 8 producers hammer 64 keys, so
//!   most adds collapse into dirty items or re-queues after `done`.
//! - `rate_limiting/add_rate_limited`: 10k distinct keys through the default controller rate
//!   limiter (exponential + token bucket) into the delay heap.

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kcache::workqueue::{Queue, RateLimitingQueue};
use tokio::runtime::Runtime;

const ITEMS: u64 = 10_000;
const WORKERS: usize = 8;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .expect("runtime")
}

/// Runs `WORKERS` get/done workers until shutdown; returns how many items they processed.
async fn drain_with_workers(queue: &Queue<u64>, produce: impl AsyncFnOnce(&Queue<u64>)) -> u64 {
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move {
                let mut n = 0u64;
                while let Some(item) = queue.get().await {
                    std::hint::black_box(item);
                    queue.done(&item);
                    n += 1;
                }
                n
            })
        })
        .collect();
    produce(queue).await;
    queue.shutdown();
    let mut processed = 0;
    for worker in workers {
        processed += worker.await.expect("worker");
    }
    processed
}

fn queue_benches(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("queue");
    group.throughput(Throughput::Elements(ITEMS));
    group.bench_function("add_get_done_8_workers", |b| {
        b.iter(|| {
            rt.block_on(async {
                let queue = Queue::new();
                let processed = drain_with_workers(&queue, async |queue| {
                    for item in 0..ITEMS {
                        queue.add(item).expect("open");
                    }
                })
                .await;
                assert_eq!(processed, ITEMS);
            })
        })
    });
    group.bench_function("readd_while_processing_8_workers", |b| {
        b.iter(|| {
            rt.block_on(async {
                let queue = Queue::new();
                drain_with_workers(&queue, async |queue| {
                    let producers: Vec<_> = (0..8u64)
                        .map(|p| {
                            let queue = queue.clone();
                            tokio::spawn(async move {
                                for i in 0..ITEMS / 8 {
                                    queue.add((i * 7 + p) % 64).expect("open");
                                }
                            })
                        })
                        .collect();
                    for producer in producers {
                        producer.await.expect("producer");
                    }
                })
                .await
            })
        })
    });
    group.finish();
}

fn rate_limiting_benches(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("rate_limiting");
    group.throughput(Throughput::Elements(ITEMS));
    group.bench_function("add_rate_limited", |b| {
        b.iter(|| {
            rt.block_on(async {
                let (queue, driver) = RateLimitingQueue::<u64>::new();
                let driver = tokio::spawn(driver);
                for item in 0..ITEMS {
                    queue.add_rate_limited(item).expect("open");
                }
                assert!(queue.waiting_len() + queue.len() > 0);
                queue.shutdown();
                driver.await.expect("driver");
            })
        })
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = queue_benches, rate_limiting_benches
}
criterion_main!(benches);
