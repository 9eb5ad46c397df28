//! Model-based property tests of `RealFifo`: random reflector writes and partial pops, with the
//! consumer applying every batch to a store as the informer does. Both modes (atomic and
//! non-atomic) must leave handlers with the same observable result — the server's state —
//! and every batch must respect the batching rules. Case count: `PROPTEST_CASES` (CI: 1000).

use std::{
    collections::{BTreeMap, HashSet},
    sync::Arc,
};

use futures::executor::block_on;
use kcache::{
    fifo::{DeltaObject, DeltaType, Deltas, Fifo, RealFifo, RealFifoConfig},
    reflector::ReflectorStore,
    store::{KeyError, KeyFunc, ObjectKey, ThreadSafeStore, Transaction},
    testing::replace_keyed,
};
use proptest::prelude::*;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Obj {
    name: String,
    version: u32,
}

fn key_func() -> KeyFunc<Obj> {
    Arc::new(|o: &Obj| {
        if o.name.is_empty() {
            Err(KeyError::MissingName)
        } else {
            Ok(ObjectKey::new(None, &o.name))
        }
    })
}

fn obj(name: &str, version: u32) -> Arc<Obj> {
    Arc::new(Obj {
        name: name.to_owned(),
        version,
    })
}

#[derive(Debug, Clone)]
enum Op {
    Add(u8, u32),
    Update(u8, u32),
    Delete(u8),
    Replace(Vec<(u8, u32)>),
    Resync,
    Bookmark(u32),
    PopBatch,
    Drain,
    BadAdd,
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..6;
    prop_oneof![
        4 => (key.clone(), 0u32..100).prop_map(|(k, v)| Op::Add(k, v)),
        4 => (key.clone(), 0u32..100).prop_map(|(k, v)| Op::Update(k, v)),
        3 => key.clone().prop_map(Op::Delete),
        2 => proptest::collection::vec((key, 0u32..100), 0..6).prop_map(Op::Replace),
        1 => Just(Op::Resync),
        1 => (0u32..100).prop_map(Op::Bookmark),
        4 => Just(Op::PopBatch),
        1 => Just(Op::Drain),
        1 => Just(Op::BadAdd),
    ]
}

fn name(k: u8) -> String {
    format!("k{k}")
}

/// The consumer: applies popped deltas to its store as the informer does, and keeps what the
/// handlers observed (key → last object notified as added/updated, removed on delete).
struct Consumer {
    store: ThreadSafeStore<Obj>,
    observed: BTreeMap<String, u32>,
    initial_deltas: usize,
    popped: usize,
    saw_non_initial: bool,
    batch_size: usize,
}

impl Consumer {
    fn new(batch_size: usize) -> Self {
        Self {
            store: ThreadSafeStore::without_resource_versions(key_func(), Default::default()),
            observed: BTreeMap::new(),
            initial_deltas: 0,
            popped: 0,
            saw_non_initial: false,
            batch_size,
        }
    }

    fn process(&mut self, deltas: Deltas<Obj>, initial: bool) {
        assert!(!deltas.is_empty());
        assert!(
            deltas.len() <= self.batch_size,
            "batch larger than the batch size"
        );
        self.popped += deltas.len();
        if initial {
            assert!(
                !self.saw_non_initial,
                "an initial-list batch after a later one"
            );
            self.initial_deltas += deltas.len();
        } else {
            self.saw_non_initial = true;
        }
        if deltas.len() > 1 {
            let mut keys = HashSet::new();
            for d in &deltas {
                assert!(d.kind.is_batchable(), "{:?} batched with others", d.kind);
                assert!(
                    keys.insert(d.key().unwrap().clone()),
                    "repeated key in a batch"
                );
            }
        }
        let mut txns = Vec::new();
        for delta in deltas {
            match (delta.kind, delta.object) {
                (
                    DeltaType::Added | DeltaType::Updated | DeltaType::Replaced | DeltaType::Sync,
                    DeltaObject::Object { key, obj },
                ) => {
                    self.observed.insert(key.to_string(), obj.version);
                    txns.push(Transaction::Upsert(key, obj));
                }
                (
                    DeltaType::Deleted,
                    DeltaObject::Object { key, .. }
                    | DeltaObject::DeletedFinalStateUnknown { key, .. },
                ) => {
                    self.observed.remove(key.as_str());
                    txns.push(Transaction::Delete(key));
                }
                (
                    DeltaType::ReplacedAll,
                    DeltaObject::ReplacedAll {
                        objects,
                        resource_version,
                    },
                ) => {
                    let listed: HashSet<ObjectKey> =
                        objects.iter().map(|(k, _)| k.clone()).collect();
                    let previous = replace_keyed(&self.store, objects.clone(), resource_version);
                    for key in previous.keys().filter(|k| !listed.contains(*k)) {
                        self.observed.remove(key.as_str());
                    }
                    for (key, obj) in objects {
                        self.observed.insert(key.to_string(), obj.version);
                    }
                }
                (DeltaType::SyncAll, DeltaObject::SyncAll) => {
                    for obj in self.store.list() {
                        self.observed.insert(obj.name.clone(), obj.version);
                    }
                }
                (DeltaType::Bookmark, DeltaObject::Bookmark { resource_version }) => {
                    self.store.set_resource_version(resource_version);
                }
                (kind, object) => panic!("inconsistent delta {kind:?} / {object:?}"),
            }
        }
        self.store.apply(txns);
    }

    fn store_state(&self) -> BTreeMap<String, u32> {
        self.store
            .list()
            .into_iter()
            .map(|o| (o.name.clone(), o.version))
            .collect()
    }
}

struct Run {
    fifo: RealFifo<Obj>,
    consumer: Consumer,
    /// Deltas popped before the first replace or write, and the queue length right after
    /// that first replace (`None` when a write came first).
    populated: Option<(usize, Option<usize>)>,
}

impl Run {
    fn pop(&mut self) {
        let consumer = &mut self.consumer;
        block_on(
            self.fifo
                .pop_batch(|deltas, initial| consumer.process(deltas, initial)),
        )
        .unwrap();
    }

    fn drain(&mut self) {
        while !self.fifo.is_empty() {
            self.pop();
        }
    }
}

fn run_ops(ops: &[Op], batch_size: usize) -> Result<(), TestCaseError> {
    let atomic_consumer = Consumer::new(batch_size);
    let legacy_consumer = Consumer::new(batch_size);
    let known = Arc::new(legacy_consumer.store.clone());
    let mut runs = [
        Run {
            fifo: RealFifo::new(key_func(), RealFifoConfig::default().batch_size(batch_size)),
            consumer: atomic_consumer,
            populated: None,
        },
        Run {
            fifo: RealFifo::new(
                key_func(),
                RealFifoConfig::non_atomic(known).batch_size(batch_size),
            ),
            consumer: legacy_consumer,
            populated: None,
        },
    ];
    let mut truth: BTreeMap<String, u32> = BTreeMap::new();
    for op in ops {
        match op {
            Op::Add(k, v) | Op::Update(k, v) => {
                truth.insert(name(*k), *v);
            }
            Op::Delete(k) => {
                truth.remove(&name(*k));
            }
            Op::Replace(list) => {
                truth = list.iter().map(|(k, v)| (name(*k), *v)).collect();
            }
            _ => {}
        }
        for run in &mut runs {
            let fifo = &run.fifo;
            match op {
                Op::Add(k, v) => fifo.add(obj(&name(*k), *v)).unwrap(),
                Op::Update(k, v) => fifo.update(obj(&name(*k), *v)).unwrap(),
                Op::Delete(k) => fifo.delete(obj(&name(*k), 0)).unwrap(),
                Op::Replace(list) => {
                    let objs = list.iter().map(|(k, v)| obj(&name(*k), *v)).collect();
                    fifo.replace(objs, "rv".into()).unwrap();
                    if run.populated.is_none() {
                        run.populated = Some((run.consumer.popped, Some(fifo.len())));
                    }
                }
                Op::Resync => fifo.resync().unwrap(),
                Op::Bookmark(rv) => fifo.bookmark(&rv.to_string()).unwrap(),
                Op::PopBatch => {
                    if !fifo.is_empty() {
                        run.pop();
                    }
                }
                Op::Drain => run.drain(),
                Op::BadAdd => {
                    let before = fifo.len();
                    prop_assert!(fifo.add(obj("", 1)).is_err());
                    prop_assert_eq!(fifo.len(), before);
                }
            }
            if matches!(op, Op::Add(..) | Op::Update(..) | Op::Delete(..))
                && run.populated.is_none()
            {
                run.populated = Some((run.consumer.popped, None));
            }
            if matches!(op, Op::Drain) {
                prop_assert_eq!(&run.consumer.store_state(), &truth);
                prop_assert_eq!(&run.consumer.observed, &truth);
            }
        }
    }
    for run in &mut runs {
        run.drain();
        prop_assert_eq!(&run.consumer.store_state(), &truth);
        prop_assert_eq!(&run.consumer.observed, &truth);
        // Everything popped before the queue was populated, plus exactly the first replace's
        // deltas, is flagged as the initial list; nothing after.
        match run.populated {
            Some((before, initial_len)) => {
                prop_assert_eq!(
                    run.consumer.initial_deltas,
                    before + initial_len.unwrap_or(0)
                );
                prop_assert!(run.fifo.has_synced());
            }
            None => {
                prop_assert_eq!(run.consumer.initial_deltas, run.consumer.popped);
                prop_assert!(!run.fifo.has_synced());
            }
        }
        run.fifo.close();
        prop_assert!(block_on(run.fifo.pop_batch(|_, _| ())).is_err());
    }
    Ok(())
}

proptest! {
    #[test]
    fn both_modes_leave_handlers_with_the_server_state(
        ops in proptest::collection::vec(op(), 0..60),
        batch_size in 1usize..5,
    ) {
        run_ops(&ops, batch_size)?;
    }
}
