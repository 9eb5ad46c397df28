//! Model-based property test of `DelayingQueue` in paused tokio time: random sequences of
//! add / add_after / time passing / get / done are run against the queue (with its driver
//! spawned) and against a reference model that keeps, for each waiting item, the earliest
//! requested time. Everything a worker can observe must agree after every step.
//!
//! The number of cases follows `PROPTEST_CASES` (CI sets 1000).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::FutureExt;
use kcache::workqueue::DelayingQueue;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Add(u8),
    AddAfter(u8, u64),
    /// Let this many milliseconds pass.
    Sleep(u64),
    Get,
    DoneHeld(usize),
    Shutdown,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0u8..5).prop_map(Op::Add),
        6 => ((0u8..5), (0u64..40)).prop_map(|(i, d)| Op::AddAfter(i, d)),
        4 => (0u64..30).prop_map(Op::Sleep),
        5 => Just(Op::Get),
        4 => any::<usize>().prop_map(Op::DoneHeld),
        1 => Just(Op::Shutdown),
    ]
}

#[derive(Debug, Default)]
struct Model {
    now: u64,
    seq: u64,
    /// Waiting items: item -> (ready at, sequence number of the request that set it).
    timers: BTreeMap<u8, (u64, u64)>,
    waiting: Vec<u8>,
    held: BTreeSet<u8>,
    again: BTreeSet<u8>,
    shut: bool,
}

impl Model {
    fn add(&mut self, item: u8) -> Result<(), u8> {
        if self.shut {
            return Err(item);
        }
        if self.held.contains(&item) {
            self.again.insert(item);
        } else if !self.waiting.contains(&item) {
            self.waiting.push(item);
        }
        Ok(())
    }

    fn add_after(&mut self, item: u8, delay: u64) -> Result<(), u8> {
        if self.shut {
            return Err(item);
        }
        if delay == 0 {
            return self.add(item);
        }
        let at = self.now + delay;
        if self.timers.get(&item).is_none_or(|&(old, _)| at < old) {
            self.seq += 1;
            self.timers.insert(item, (at, self.seq));
        }
        Ok(())
    }

    fn sleep(&mut self, ms: u64) {
        self.now += ms;
        let mut due: Vec<_> = self
            .timers
            .iter()
            .filter(|(_, (at, _))| *at <= self.now)
            .map(|(&item, &(at, seq))| (at, seq, item))
            .collect();
        due.sort_unstable();
        for (_, _, item) in due {
            self.timers.remove(&item);
            if !self.shut {
                let _ = self.add(item);
            }
        }
    }

    fn get(&mut self) -> Option<Option<u8>> {
        if self.waiting.is_empty() {
            return self.shut.then_some(None);
        }
        let item = self.waiting.remove(0);
        self.held.insert(item);
        Some(Some(item))
    }

    fn done(&mut self, item: u8) {
        if self.held.remove(&item) && self.again.remove(&item) {
            self.waiting.push(item);
        }
    }
}

fn check(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let (queue, driver) = DelayingQueue::new();
        tokio::spawn(driver);
        let mut model = Model::default();
        for (step, op) in ops.into_iter().enumerate() {
            match op {
                Op::Add(item) => {
                    let got = queue.add(item).map_err(|e| e.0);
                    prop_assert_eq!(got, model.add(item), "step {}: add", step);
                }
                Op::AddAfter(item, ms) => {
                    let got = queue
                        .add_after(item, Duration::from_millis(ms))
                        .map_err(|e| e.0);
                    prop_assert_eq!(got, model.add_after(item, ms), "step {}: add_after", step);
                }
                Op::Sleep(ms) => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    // Let the driver run for timers that fired at the very end of the sleep.
                    for _ in 0..3 {
                        tokio::task::yield_now().await;
                    }
                    model.sleep(ms);
                }
                Op::Get => {
                    let got = queue.get().now_or_never();
                    prop_assert_eq!(got, model.get(), "step {}: get", step);
                }
                Op::DoneHeld(n) => {
                    if !model.held.is_empty() {
                        let item = *model.held.iter().nth(n % model.held.len()).unwrap();
                        queue.done(&item);
                        model.done(item);
                    }
                }
                Op::Shutdown => {
                    queue.shutdown();
                    model.shut = true;
                    model.timers.clear();
                }
            }
            prop_assert_eq!(queue.len(), model.waiting.len(), "step {}: len", step);
            if !model.shut {
                prop_assert_eq!(queue.waiting_len(), model.timers.len(), "step {}", step);
            }
        }
        Ok(())
    })
}

proptest! {
    #[test]
    fn delaying_queue_behaves_like_the_model(ops in prop::collection::vec(op(), 1..60)) {
        check(ops)?;
    }
}
