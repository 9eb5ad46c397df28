//! Seeded stress tests: several reflector threads write into a FIFO while one consumer pops
//! (with the lock released during processing). Nothing may be lost, duplicated or reordered
//! per key; the run ends when the queue is closed and drained.

use std::{collections::HashMap, sync::Arc, thread};

use futures::{FutureExt, executor::block_on};
use kcache::{
    fifo::{self, DeltaFifo, DeltaFifoConfig, Fifo, RealFifo, RealFifoConfig},
    reflector::ReflectorStore,
    store::{KeyFunc, ObjectKey},
};

const PRODUCERS: usize = 4;
const PER_PRODUCER: u32 = 5_000;
const KEYS_PER_PRODUCER: u32 = 7;

/// (key name, sequence number)
type Obj = (String, u32);

fn key_func() -> KeyFunc<Obj> {
    Arc::new(|o: &Obj| Ok(ObjectKey::new(None, &o.0)))
}

fn produce<Q: ReflectorStore<Obj> + Clone + Send + 'static>(
    queue: &Q,
) -> Vec<thread::JoinHandle<()>> {
    (0..PRODUCERS)
        .map(|p| {
            let queue = queue.clone();
            thread::spawn(move || {
                for seq in 0..PER_PRODUCER {
                    let key = format!("p{p}-k{}", seq % KEYS_PER_PRODUCER);
                    queue.add(Arc::new((key, seq))).unwrap();
                }
            })
        })
        .collect()
}

/// Pops until closed and drained; returns every (key, seq) in delivery order.
fn consume<Q: Fifo<Obj>>(queue: &Q) -> Vec<Obj> {
    let mut seen = Vec::new();
    loop {
        let result = block_on(queue.pop_batch(|deltas, _| {
            deltas
                .iter()
                .map(|d| (**d.object().unwrap()).clone())
                .collect::<Vec<_>>()
        }));
        match result {
            Ok(batch) => seen.extend(batch),
            Err(fifo::Error::Closed) => return seen,
        }
    }
}

#[test]
fn real_fifo_loses_nothing_and_keeps_per_key_order_under_concurrent_writers() {
    let fifo = RealFifo::new(key_func(), RealFifoConfig::default().batch_size(64));
    let producers = produce(&fifo);
    let consumer = {
        let fifo = fifo.clone();
        thread::spawn(move || consume(&fifo))
    };
    for p in producers {
        p.join().unwrap();
    }
    fifo.close();
    let seen = consumer.join().unwrap();
    assert_eq!(seen.len(), PRODUCERS * PER_PRODUCER as usize);
    let mut last: HashMap<String, u32> = HashMap::new();
    for (key, seq) in seen {
        if let Some(prev) = last.insert(key.clone(), seq) {
            assert!(seq > prev, "{key}: {seq} after {prev}");
        }
    }
}

#[test]
fn delta_fifo_delivers_every_write_once_under_concurrent_writers() {
    let fifo = DeltaFifo::new(key_func(), DeltaFifoConfig::default());
    let producers = produce(&fifo);
    let consumer = {
        let fifo = fifo.clone();
        thread::spawn(move || consume(&fifo))
    };
    for p in producers {
        p.join().unwrap();
    }
    fifo.close();
    let seen = consumer.join().unwrap();
    assert_eq!(seen.len(), PRODUCERS * PER_PRODUCER as usize);
    let mut last: HashMap<String, u32> = HashMap::new();
    for (key, seq) in seen {
        if let Some(prev) = last.insert(key.clone(), seq) {
            assert!(seq > prev, "{key}: {seq} after {prev}");
        }
    }
}

#[test]
fn a_dropped_pending_pop_takes_nothing() {
    let fifo = RealFifo::atomic(key_func());
    // Polled once while empty, then dropped: cancel safety.
    assert!(fifo.pop_batch(|_, _| ()).now_or_never().is_none());
    fifo.add(Arc::new(("a".to_owned(), 1))).unwrap();
    assert_eq!(fifo.len(), 1);
    let got = block_on(fifo.pop_batch(|d, _| d.len())).unwrap();
    assert_eq!(got, 1);
}
