//! Model-based property tests of `ThreadSafeStore` and its indexes against a `BTreeMap`
//! reference: random adds, updates, deletes, replaces, batches and late indexers; after every
//! step the store's content and every index query must match what the model computes by brute
//! force. Case count: `PROPTEST_CASES` (CI: 1000).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
};

use kcache::store::{
    IndexError, IndexFunc, KeyError, KeyFunc, ObjectKey, ThreadSafeStore, Transaction,
};
use proptest::prelude::*;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Obj {
    ns: String,
    name: String,
    labels: BTreeSet<String>,
}

const NS_INDEX: &str = "ns";
const LABELS_INDEX: &str = "labels";

fn key_func() -> KeyFunc<Obj> {
    Arc::new(|o: &Obj| {
        if o.name.is_empty() {
            Err(KeyError::MissingName)
        } else {
            Ok(ObjectKey::new(Some(&o.ns), &o.name))
        }
    })
}

fn ns_values(o: &Obj) -> Vec<String> {
    vec![o.ns.clone()]
}

fn label_values(o: &Obj) -> Vec<String> {
    o.labels.iter().cloned().collect()
}

fn indexer(name: &str) -> (String, IndexFunc<Obj>) {
    let func: IndexFunc<Obj> = match name {
        NS_INDEX => Arc::new(ns_values),
        _ => Arc::new(label_values),
    };
    (name.to_owned(), func)
}

fn values_of(index: &str, o: &Obj) -> Vec<String> {
    if index == NS_INDEX {
        ns_values(o)
    } else {
        label_values(o)
    }
}

fn arb_obj() -> impl Strategy<Value = Obj> {
    (
        prop_oneof![Just(""), Just("a"), Just("b")],
        0u8..5,
        proptest::collection::btree_set(prop_oneof![Just("x"), Just("y"), Just("z")], 0..3),
    )
        .prop_map(|(ns, name, labels)| Obj {
            ns: ns.to_owned(),
            name: format!("o{name}"),
            labels: labels.into_iter().map(str::to_owned).collect(),
        })
}

#[derive(Debug, Clone)]
enum Op {
    Upsert(Obj),
    Delete(Obj),
    Replace(Vec<Obj>),
    Batch(Vec<(bool, Obj)>),
    AddLabelIndexer,
    BadAdd,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => arb_obj().prop_map(Op::Upsert),
        3 => arb_obj().prop_map(Op::Delete),
        1 => proptest::collection::vec(arb_obj(), 0..8).prop_map(Op::Replace),
        2 => proptest::collection::vec((any::<bool>(), arb_obj()), 0..6).prop_map(Op::Batch),
        1 => Just(Op::AddLabelIndexer),
        1 => Just(Op::BadAdd),
    ]
}

fn key(o: &Obj) -> ObjectKey {
    key_func()(o).unwrap()
}

fn check(
    store: &ThreadSafeStore<Obj>,
    model: &BTreeMap<ObjectKey, Obj>,
    indexes: &[&str],
) -> Result<(), TestCaseError> {
    let mut listed: Vec<Obj> = store.list().iter().map(|o| (**o).clone()).collect();
    listed.sort_by_key(key);
    prop_assert_eq!(listed, model.values().cloned().collect::<Vec<_>>());
    let mut keys = store.list_keys();
    keys.sort();
    prop_assert_eq!(keys, model.keys().cloned().collect::<Vec<_>>());
    for &index in indexes {
        let all_values: BTreeSet<String> =
            model.values().flat_map(|o| values_of(index, o)).collect();
        let got: BTreeSet<String> = store.list_index_func_values(index).into_iter().collect();
        prop_assert_eq!(&got, &all_values);
        for value in ["", "a", "b", "x", "y", "z"] {
            let expected: Vec<ObjectKey> = model
                .iter()
                .filter(|(_, o)| values_of(index, o).iter().any(|v| v == value))
                .map(|(k, _)| k.clone())
                .collect();
            prop_assert_eq!(store.index_keys(index, value).unwrap(), expected.clone());
            let mut by_index: Vec<ObjectKey> = store
                .by_index(index, value)
                .unwrap()
                .iter()
                .map(|o| key(o))
                .collect();
            by_index.sort();
            prop_assert_eq!(by_index, expected);
        }
        // `index(obj)`: everything sharing a value with a probe.
        let probe = Obj {
            ns: "a".into(),
            name: "probe".into(),
            labels: ["x".to_owned(), "y".to_owned()].into(),
        };
        let probe_values = values_of(index, &probe);
        let expected: Vec<ObjectKey> = model
            .iter()
            .filter(|(_, o)| values_of(index, o).iter().any(|v| probe_values.contains(v)))
            .map(|(k, _)| k.clone())
            .collect();
        let mut got: Vec<ObjectKey> = store
            .index(index, &probe)
            .unwrap()
            .iter()
            .map(|o| key(o))
            .collect();
        got.sort();
        prop_assert_eq!(got, expected);
    }
    if !indexes.contains(&LABELS_INDEX) {
        prop_assert_eq!(
            store.by_index(LABELS_INDEX, "x").unwrap_err(),
            IndexError::UnknownIndex(LABELS_INDEX.into())
        );
    }
    Ok(())
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let store =
        ThreadSafeStore::without_resource_versions(key_func(), HashMap::from([indexer(NS_INDEX)]));
    let mut indexes = vec![NS_INDEX];
    let mut model: BTreeMap<ObjectKey, Obj> = BTreeMap::new();
    for op in ops {
        match op {
            Op::Upsert(o) => {
                let previous = store
                    .add(Arc::new(o.clone()))
                    .unwrap()
                    .map(|p| (*p).clone());
                prop_assert_eq!(previous, model.insert(key(o), o.clone()));
            }
            Op::Delete(o) => {
                let previous = store.delete(o).unwrap().map(|p| (*p).clone());
                prop_assert_eq!(previous, model.remove(&key(o)));
            }
            Op::Replace(list) => {
                store
                    .replace(list.iter().cloned().map(Arc::new).collect(), "1")
                    .unwrap();
                model = list.iter().map(|o| (key(o), o.clone())).collect();
            }
            Op::Batch(changes) => {
                let txns = changes
                    .iter()
                    .map(|(upsert, o)| {
                        if *upsert {
                            Transaction::Upsert(key(o), Arc::new(o.clone()))
                        } else {
                            Transaction::Delete(key(o))
                        }
                    })
                    .collect();
                let previous: Vec<Option<Obj>> = store
                    .apply(txns)
                    .into_iter()
                    .map(|p| p.map(|p| (*p).clone()))
                    .collect();
                let expected: Vec<Option<Obj>> = changes
                    .iter()
                    .map(|(upsert, o)| {
                        if *upsert {
                            model.insert(key(o), o.clone())
                        } else {
                            model.remove(&key(o))
                        }
                    })
                    .collect();
                prop_assert_eq!(previous, expected);
            }
            Op::AddLabelIndexer => {
                let result = store.add_indexers(HashMap::from([indexer(LABELS_INDEX)]));
                if indexes.contains(&LABELS_INDEX) {
                    prop_assert!(matches!(result, Err(IndexError::Conflict(_))));
                } else {
                    prop_assert!(result.is_ok());
                    indexes.push(LABELS_INDEX);
                }
            }
            Op::BadAdd => {
                let nameless = Obj {
                    ns: "a".into(),
                    name: String::new(),
                    labels: BTreeSet::new(),
                };
                prop_assert!(store.add(Arc::new(nameless)).is_err());
            }
        }
        check(&store, &model, &indexes)?;
    }
    Ok(())
}

proptest! {
    #[test]
    fn store_and_indexes_match_the_reference_model(ops in proptest::collection::vec(op(), 0..40)) {
        run(&ops)?;
    }
}
