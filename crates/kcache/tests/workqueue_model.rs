//! Model-based property test of `Queue`: random sequences of add / get / done / shutdown are
//! run against the queue and against a tiny reference model; every observable result (what
//! `get` returns or whether it would wait, `add` refusals, `len`, the drain's readiness) must
//! agree after every step.
//!
//! The number of cases follows `PROPTEST_CASES` (CI sets 1000).

use std::collections::BTreeSet;

use futures::FutureExt;
use kcache::workqueue::Queue;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Add(u8),
    Get,
    /// `done` for the n-th item currently held (modulo how many are held).
    DoneHeld(usize),
    /// `done` for any item, held or not.
    Done(u8),
    Shutdown,
    /// Polls `shutdown_with_drain` once, then drops it.
    ShutdownWithDrain,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..6).prop_map(Op::Add),
        6 => Just(Op::Get),
        4 => any::<usize>().prop_map(Op::DoneHeld),
        1 => (0u8..6).prop_map(Op::Done),
        1 => Just(Op::Shutdown),
        1 => Just(Op::ShutdownWithDrain),
    ]
}

/// The reference: what a worker can observe, written as plainly as possible.
#[derive(Debug, Default)]
struct Model {
    /// Waiting items, oldest first.
    waiting: Vec<u8>,
    /// Items being processed.
    held: BTreeSet<u8>,
    /// Held items that were added again and must come back after `done`.
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

    /// `None`: would wait. `Some(None)`: shut down and empty.
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

proptest! {
    #[test]
    fn queue_behaves_like_the_model(ops in prop::collection::vec(op(), 1..80)) {
        let queue = Queue::new();
        let mut model = Model::default();
        for (step, op) in ops.into_iter().enumerate() {
            match op {
                Op::Add(item) => {
                    let got = queue.add(item).map_err(|e| e.0);
                    prop_assert_eq!(got, model.add(item), "step {}: add({})", step, item);
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
                Op::Done(item) => {
                    queue.done(&item);
                    model.done(item);
                }
                Op::Shutdown => {
                    queue.shutdown();
                    model.shut = true;
                }
                Op::ShutdownWithDrain => {
                    let ready = queue.shutdown_with_drain().now_or_never().is_some();
                    model.shut = true;
                    prop_assert_eq!(ready, model.held.is_empty(), "step {}: drain", step);
                }
            }
            prop_assert_eq!(queue.len(), model.waiting.len(), "step {}: len", step);
            prop_assert_eq!(queue.is_shutting_down(), model.shut);
        }
    }
}
