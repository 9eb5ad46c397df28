//! Model-based property test of `PriorityQueue` in paused tokio time: random sequences of
//! add (with a priority) / add_after / add_rate_limited / time passing / get / done / forget /
//! shutdown are run against the queue (with its driver spawned) and against a reference model
//! that keeps one entry per item with the highest priority and the earliest ready time. The
//! items handed out (and their priorities), the queue's length, the waiting items and the
//! rate limiter's counts must agree after every step.
//!
//! The number of cases follows `PROPTEST_CASES` (CI sets 1000).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::FutureExt;
use kcache::workqueue::priority::{self, AddConfig};
use kcache::workqueue::{ItemExponentialFailureRateLimiter, PriorityQueue};
use proptest::prelude::*;

/// The rate limiter of the queue under test: always 10 ms, so the model can predict it.
const RATE_LIMIT_MS: u64 = 10;

#[derive(Debug, Clone)]
enum Op {
    Add(u8, i32),
    AddAfter(u8, i32, u64),
    AddRateLimited(u8, i32),
    /// Let this many milliseconds pass.
    Sleep(u64),
    Get,
    DoneHeld(usize),
    Forget(u8),
    Shutdown,
}

fn prio() -> impl Strategy<Value = i32> {
    prop_oneof![
        Just(priority::LOW),
        Just(priority::NORMAL),
        Just(5),
        Just(-3)
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => ((0u8..6), prio()).prop_map(|(i, p)| Op::Add(i, p)),
        4 => ((0u8..6), prio(), (0u64..40)).prop_map(|(i, p, d)| Op::AddAfter(i, p, d)),
        2 => ((0u8..6), prio()).prop_map(|(i, p)| Op::AddRateLimited(i, p)),
        3 => (0u64..30).prop_map(Op::Sleep),
        6 => Just(Op::Get),
        5 => any::<usize>().prop_map(Op::DoneHeld),
        1 => (0u8..6).prop_map(Op::Forget),
        1 => Just(Op::Shutdown),
    ]
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    priority: i32,
    /// Order among ready entries of one priority (given when the entry became ready), or among
    /// waiting entries with the same deadline.
    seq: u64,
    /// `None`: ready; `Some(t)`: waiting until `t` (ms).
    due: Option<u64>,
}

#[derive(Debug, Default)]
struct Model {
    now: u64,
    seq: u64,
    entries: BTreeMap<u8, Entry>,
    held: BTreeSet<u8>,
    requeues: BTreeMap<u8, usize>,
    shut: bool,
}

impl Model {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Entries whose time has come become ready, earliest deadline first.
    fn promote(&mut self) {
        let mut due: Vec<_> = self
            .entries
            .iter()
            .filter_map(|(&item, e)| {
                e.due
                    .filter(|&at| at <= self.now)
                    .map(|at| (at, e.seq, item))
            })
            .collect();
        due.sort_unstable();
        for (_, _, item) in due {
            let seq = self.next_seq();
            let e = self.entries.get_mut(&item).unwrap();
            e.due = None;
            e.seq = seq;
        }
    }

    fn add(&mut self, item: u8, priority: i32, delay: Option<u64>) -> Result<(), u8> {
        if self.shut {
            return Err(item);
        }
        self.promote();
        let due = delay.filter(|&d| d > 0).map(|d| self.now + d);
        match self.entries.get(&item).copied() {
            None => {
                let seq = self.next_seq();
                self.entries.insert(item, Entry { priority, seq, due });
            }
            Some(old) => {
                let due = match (old.due, due) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    _ => None,
                };
                let seq = if old.due.is_some() && due.is_none() {
                    self.next_seq()
                } else {
                    old.seq
                };
                self.entries.insert(
                    item,
                    Entry {
                        priority: old.priority.max(priority),
                        seq,
                        due,
                    },
                );
            }
        }
        Ok(())
    }

    fn add_rate_limited(&mut self, item: u8, priority: i32) -> Result<(), u8> {
        if self.shut {
            return Err(item);
        }
        *self.requeues.entry(item).or_default() += 1;
        self.add(item, priority, Some(RATE_LIMIT_MS))
    }

    fn ready(&self) -> impl Iterator<Item = (u8, Entry)> + '_ {
        self.entries
            .iter()
            .filter(|(item, e)| e.due.is_none() && !self.held.contains(item))
            .map(|(&item, &e)| (item, e))
    }

    fn get(&mut self) -> Option<Option<(u8, i32)>> {
        self.promote();
        let best = self
            .ready()
            .min_by_key(|(_, e)| (std::cmp::Reverse(e.priority), e.seq));
        let Some((item, e)) = best else {
            return self.shut.then_some(None);
        };
        self.entries.remove(&item);
        self.held.insert(item);
        Some(Some((item, e.priority)))
    }

    fn len(&mut self) -> usize {
        self.promote();
        self.ready().count()
    }

    fn waiting(&self) -> usize {
        self.entries.values().filter(|e| e.due.is_some()).count()
    }

    fn shutdown(&mut self) {
        self.promote();
        self.shut = true;
        self.entries.retain(|_, e| e.due.is_none());
    }
}

fn check(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let limit = Duration::from_millis(RATE_LIMIT_MS);
        let config = priority::Config::default()
            .rate_limiter(ItemExponentialFailureRateLimiter::new(limit, limit));
        let (queue, driver) = PriorityQueue::with_config(config);
        tokio::spawn(driver);
        let mut model = Model::default();
        for (step, op) in ops.into_iter().enumerate() {
            match op {
                Op::Add(item, p) => {
                    let got = queue.add_with_priority(item, p).map_err(|e| e.0);
                    prop_assert_eq!(got, model.add(item, p, None), "step {}: add", step);
                }
                Op::AddAfter(item, p, ms) => {
                    let opts = AddConfig::default()
                        .priority(p)
                        .after(Duration::from_millis(ms));
                    let got = queue.add_with_config(item, opts).map_err(|e| e.0);
                    prop_assert_eq!(
                        got,
                        model.add(item, p, Some(ms)),
                        "step {}: add_after",
                        step
                    );
                }
                Op::AddRateLimited(item, p) => {
                    let got = queue
                        .add_rate_limited_with_priority(item, p)
                        .map_err(|e| e.0);
                    prop_assert_eq!(got, model.add_rate_limited(item, p), "step {}", step);
                }
                Op::Sleep(ms) => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    for _ in 0..3 {
                        tokio::task::yield_now().await;
                    }
                    model.now += ms;
                }
                Op::Get => {
                    let got = queue.get_with_priority().now_or_never();
                    prop_assert_eq!(got, model.get(), "step {}: get", step);
                }
                Op::DoneHeld(n) => {
                    if !model.held.is_empty() {
                        let item = *model.held.iter().nth(n % model.held.len()).unwrap();
                        queue.done(&item);
                        model.held.remove(&item);
                    }
                }
                Op::Forget(item) => {
                    queue.forget(&item);
                    model.requeues.remove(&item);
                }
                Op::Shutdown => {
                    queue.shutdown();
                    model.shutdown();
                }
            }
            prop_assert_eq!(queue.len(), model.len(), "step {}: len", step);
            prop_assert_eq!(
                queue.waiting_len(),
                model.waiting(),
                "step {}: waiting",
                step
            );
            for item in 0u8..6 {
                let expected = model.requeues.get(&item).copied().unwrap_or(0);
                prop_assert_eq!(queue.num_requeues(&item), expected, "step {}", step);
            }
        }
        Ok(())
    })
}

proptest! {
    #[test]
    fn priority_queue_behaves_like_the_model(ops in prop::collection::vec(op(), 1..80)) {
        check(ops)?;
    }
}
