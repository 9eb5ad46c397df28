//! Seeded stress test of `Queue` on a multi-thread runtime: producers add random items while
//! workers get / process / done them, some items being re-added while in flight.
//!
//! Checked:
//! - **stingy**: no item is ever held by two workers at once;
//! - **nothing lost**: every add is followed by a processing that started after it (each add
//!   bumps the item's generation *before* calling `add`; a worker reads the generation right
//!   after `get`; at the end, the last generation seen for each item must be the last one
//!   added);
//! - every worker sees `None` after shutdown, and nothing is processed more often than added.
//!
//! The operation mix comes from a seeded RNG (`WORKQUEUE_STRESS_SEED` picks one seed; by
//! default a fixed set runs). Thread interleavings are up to the scheduler, as in real use.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};

use kcache::workqueue::Queue;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const ITEMS: usize = 48;
const PRODUCERS: u64 = 4;
const WORKERS: u64 = 8;
const ADDS_PER_PRODUCER: usize = 4_000;

struct Books {
    /// Bumped before every add of the item.
    added_generation: Vec<AtomicU64>,
    /// The highest generation a worker saw right after getting the item.
    seen_generation: Vec<AtomicU64>,
    /// Whether a worker holds the item.
    held: Vec<AtomicBool>,
    adds: AtomicUsize,
    processed: AtomicUsize,
}

fn run(seed: u64) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let queue = Queue::<usize>::new();
        let books = Arc::new(Books {
            added_generation: (0..ITEMS).map(|_| AtomicU64::new(0)).collect(),
            seen_generation: (0..ITEMS).map(|_| AtomicU64::new(0)).collect(),
            held: (0..ITEMS).map(|_| AtomicBool::new(false)).collect(),
            adds: AtomicUsize::new(0),
            processed: AtomicUsize::new(0),
        });

        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let queue = queue.clone();
                let books = Arc::clone(&books);
                let mut rng = StdRng::seed_from_u64(seed ^ (0xABCD_0000 + w));
                tokio::spawn(async move {
                    while let Some(item) = queue.get().await {
                        let was_held = books.held[item].swap(true, SeqCst);
                        assert!(!was_held, "seed {seed}: item {item} handed to two workers");
                        let generation = books.added_generation[item].load(SeqCst);
                        books.seen_generation[item].fetch_max(generation, SeqCst);
                        if rng.random_bool(0.3) {
                            tokio::task::yield_now().await;
                        }
                        books.processed.fetch_add(1, SeqCst);
                        books.held[item].store(false, SeqCst);
                        queue.done(&item);
                    }
                })
            })
            .collect();

        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let queue = queue.clone();
                let books = Arc::clone(&books);
                let mut rng = StdRng::seed_from_u64(seed ^ (0x1234_0000 + p));
                tokio::spawn(async move {
                    for _ in 0..ADDS_PER_PRODUCER {
                        let item = rng.random_range(0..ITEMS);
                        books.added_generation[item].fetch_add(1, SeqCst);
                        books.adds.fetch_add(1, SeqCst);
                        queue.add(item).expect("not shut down yet");
                        if rng.random_bool(0.1) {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();

        for producer in producers {
            producer.await.expect("producer");
        }
        queue.shutdown();
        for worker in workers {
            worker.await.expect("worker (an assertion failed inside)");
        }

        for item in 0..ITEMS {
            let added = books.added_generation[item].load(SeqCst);
            let seen = books.seen_generation[item].load(SeqCst);
            assert_eq!(
                seen, added,
                "seed {seed}: item {item}: last add never processed"
            );
            assert!(!books.held[item].load(SeqCst));
        }
        let adds = books.adds.load(SeqCst);
        let processed = books.processed.load(SeqCst);
        assert!(
            processed <= adds,
            "seed {seed}: {processed} processings for {adds} adds"
        );
        assert_eq!(queue.len(), 0);
    });
}

#[test]
fn concurrent_workers_never_share_an_item_and_lose_nothing() {
    let seeds: Vec<u64> = match std::env::var("WORKQUEUE_STRESS_SEED") {
        Ok(seed) => vec![seed.parse().expect("WORKQUEUE_STRESS_SEED must be a u64")],
        Err(_) => (1..=6).collect(),
    };
    for seed in seeds {
        run(seed);
    }
}
