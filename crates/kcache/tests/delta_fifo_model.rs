//! Model-based property tests of `DeltaFifo` against a tiny reference model written from the
//! spec (per-key deltas in FIFO order, deletion dedup, replace/resync rules, initial-list flag).
//! The consumer applies popped deltas to the store that is also the queue's known objects.
//! Case count: `PROPTEST_CASES` (CI: 1000).

use std::{collections::BTreeMap, sync::Arc};

use futures::executor::block_on;
use kcache::{
    fifo::{DeltaFifo, DeltaFifoConfig, DeltaType, Deltas, Fifo},
    reflector::ReflectorStore,
    store::{KeyError, KeyFunc, ObjectKey, ThreadSafeStore},
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

fn name(k: u8) -> String {
    format!("k{k}")
}

#[derive(Debug, Clone)]
enum Op {
    Add(u8, u32),
    Update(u8, u32),
    Delete(u8, u32),
    Replace(Vec<(u8, u32)>),
    Resync,
    Pop,
    BadDelete,
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..6;
    prop_oneof![
        4 => (key.clone(), 0u32..100).prop_map(|(k, v)| Op::Add(k, v)),
        3 => (key.clone(), 0u32..100).prop_map(|(k, v)| Op::Update(k, v)),
        3 => (key.clone(), 0u32..100).prop_map(|(k, v)| Op::Delete(k, v)),
        2 => proptest::collection::vec((key, 0u32..100), 0..6).prop_map(Op::Replace),
        1 => Just(Op::Resync),
        5 => Just(Op::Pop),
        1 => Just(Op::BadDelete),
    ]
}

/// (kind, version, is tombstone)
type MDelta = (DeltaType, u32, bool);

/// The reference model: a plain list of (key, deltas) in queue order.
#[derive(Default)]
struct Model {
    queue: Vec<(String, Vec<MDelta>)>,
    populated: bool,
    initial_remaining: usize,
    emit_replaced: bool,
}

impl Model {
    fn entry(&mut self, key: &str) -> &mut Vec<MDelta> {
        let i = match self.queue.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                self.queue.push((key.to_owned(), Vec::new()));
                self.queue.len() - 1
            }
        };
        &mut self.queue[i].1
    }

    fn push(&mut self, key: &str, delta: MDelta) {
        let deltas = self.entry(key);
        deltas.push(delta);
        let n = deltas.len();
        if n >= 2 && deltas[n - 1].0 == DeltaType::Deleted && deltas[n - 2].0 == DeltaType::Deleted
        {
            let newer = deltas.pop().unwrap();
            if deltas[n - 2].2 {
                deltas[n - 2] = newer;
            }
        }
    }

    fn queued(&self, key: &str) -> bool {
        self.queue.iter().any(|(k, _)| k == key)
    }

    fn apply(&mut self, op: &Op, known: &BTreeMap<String, u32>) {
        match op {
            Op::Add(k, v) => {
                self.populated = true;
                self.push(&name(*k), (DeltaType::Added, *v, false));
            }
            Op::Update(k, v) => {
                self.populated = true;
                self.push(&name(*k), (DeltaType::Updated, *v, false));
            }
            Op::Delete(k, v) => {
                self.populated = true;
                let key = name(*k);
                if self.queued(&key) || known.contains_key(&key) {
                    self.push(&key, (DeltaType::Deleted, *v, false));
                }
            }
            Op::Replace(list) => {
                let kind = if self.emit_replaced {
                    DeltaType::Replaced
                } else {
                    DeltaType::Sync
                };
                let listed: Vec<String> = list.iter().map(|(k, _)| name(*k)).collect();
                for (k, v) in list {
                    self.push(&name(*k), (kind, *v, false));
                }
                let vanished: Vec<(String, u32)> = self
                    .queue
                    .iter()
                    .filter(|(k, _)| !listed.contains(k))
                    .map(|(k, deltas)| (k.clone(), deltas.last().unwrap().1))
                    .collect();
                for (k, v) in vanished {
                    self.push(&k, (DeltaType::Deleted, v, true));
                }
                for (k, v) in known {
                    if !listed.contains(k) && !self.queued(k) {
                        self.push(k, (DeltaType::Deleted, *v, true));
                    }
                }
                if !self.populated {
                    self.populated = true;
                    self.initial_remaining = self.queue.len();
                }
            }
            Op::Resync => {
                for (k, v) in known {
                    if !self.queued(k) {
                        self.push(k, (DeltaType::Sync, *v, false));
                    }
                }
            }
            Op::Pop | Op::BadDelete => {}
        }
    }

    fn pop(&mut self) -> Option<(String, Vec<MDelta>, bool)> {
        if self.queue.is_empty() {
            return None;
        }
        let initial = !(self.populated && self.initial_remaining == 0);
        let (key, deltas) = self.queue.remove(0);
        self.initial_remaining = self.initial_remaining.saturating_sub(1);
        Some((key, deltas, initial))
    }
}

/// Applies deltas as the informer does; returns them in the model's form.
fn consume(store: &ThreadSafeStore<Obj>, deltas: Deltas<Obj>) -> (String, Vec<MDelta>) {
    let key = deltas[0].key().unwrap().to_string();
    let mut out = Vec::new();
    for delta in &deltas {
        assert_eq!(delta.key().unwrap().as_str(), key, "one key per pop");
        let obj = delta.object().unwrap();
        out.push((delta.kind, obj.version, delta.is_tombstone()));
        match delta.kind {
            DeltaType::Deleted => {
                store.delete_by_key(key.as_str());
            }
            _ => {
                store.upsert_keyed(delta.key().unwrap().clone(), Arc::clone(obj));
            }
        }
    }
    (key, out)
}

fn state(store: &ThreadSafeStore<Obj>) -> BTreeMap<String, u32> {
    store
        .list()
        .into_iter()
        .map(|o| (o.name.clone(), o.version))
        .collect()
}

fn run(ops: &[Op], emit_replaced: bool) -> Result<(), TestCaseError> {
    let store = ThreadSafeStore::without_resource_versions(key_func(), Default::default());
    let fifo = DeltaFifo::new(
        key_func(),
        DeltaFifoConfig::default()
            .known_objects(Arc::new(store.clone()))
            .emit_replaced(emit_replaced),
    );
    let mut model = Model {
        emit_replaced,
        ..Model::default()
    };
    let mut truth: BTreeMap<String, u32> = BTreeMap::new();
    let pop_both = |model: &mut Model| -> Result<(), TestCaseError> {
        let expected = model.pop();
        if expected.is_none() {
            prop_assert!(fifo.is_empty());
            return Ok(());
        }
        let store = store.clone();
        let got = block_on(fifo.pop_batch(move |deltas, initial| {
            let (key, out) = consume(&store, deltas);
            (key, out, initial)
        }))
        .unwrap();
        prop_assert_eq!(Some(got), expected);
        Ok(())
    };
    for op in ops {
        let known = state(&store);
        model.apply(op, &known);
        match op {
            Op::Add(k, v) => fifo.add(obj(&name(*k), *v)).unwrap(),
            Op::Update(k, v) => fifo.update(obj(&name(*k), *v)).unwrap(),
            Op::Delete(k, v) => fifo.delete(obj(&name(*k), *v)).unwrap(),
            Op::Replace(list) => fifo
                .replace(
                    list.iter().map(|(k, v)| obj(&name(*k), *v)).collect(),
                    "1".into(),
                )
                .unwrap(),
            Op::Resync => fifo.resync().unwrap(),
            Op::Pop => pop_both(&mut model)?,
            Op::BadDelete => prop_assert!(fifo.delete(obj("", 1)).is_err()),
        }
        match op {
            Op::Add(k, v) | Op::Update(k, v) => {
                truth.insert(name(*k), *v);
            }
            Op::Delete(k, _) => {
                truth.remove(&name(*k));
            }
            Op::Replace(list) => truth = list.iter().map(|(k, v)| (name(*k), *v)).collect(),
            _ => {}
        }
        prop_assert_eq!(fifo.len(), model.queue.len());
        let keys: Vec<String> = fifo.list_keys().iter().map(|k| k.to_string()).collect();
        let model_keys: Vec<String> = model.queue.iter().map(|(k, _)| k.clone()).collect();
        prop_assert_eq!(keys, model_keys);
    }
    while !model.queue.is_empty() {
        pop_both(&mut model)?;
    }
    prop_assert!(fifo.is_empty());
    prop_assert_eq!(state(&store), truth);
    prop_assert_eq!(fifo.has_synced(), model.populated);
    Ok(())
}

proptest! {
    #[test]
    fn delta_fifo_matches_the_reference_model(
        ops in proptest::collection::vec(op(), 0..60),
        emit_replaced in any::<bool>(),
    ) {
        run(&ops, emit_replaced)?;
    }
}
