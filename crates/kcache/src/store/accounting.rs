//! What a store entry costs in memory when a sizer is set ([`crate::memory`]).

use std::sync::Arc;

use super::{ObjectKey, Transaction};
use crate::memory::Sizer;

/// The bytes a store entry holds beside its object's own size: the object's `Arc` counts, the
/// key's allocation (`Arc<str>`: counts and bytes, rounded up to 8) and the hash table slot
/// (key and `Arc` pointer, and one control byte).
pub fn entry_overhead<K>(key: &ObjectKey) -> usize {
    let arc_counts = 2 * size_of::<usize>();
    let key_alloc = (arc_counts + key.as_str().len()).next_multiple_of(size_of::<usize>());
    let slot = size_of::<(ObjectKey, Arc<K>)>() + 1;
    arc_counts + key_alloc + slot
}

/// The bytes one entry holds: the object by the sizer, plus the store's own per entry.
pub(super) fn entry_size<K>(sizer: &Sizer<K>, key: &ObjectKey, obj: &K) -> usize {
    sizer(obj) + entry_overhead::<K>(key)
}

/// The size of each upsert's new entry (`None` for deletes), or nothing without a sizer.
pub(super) fn upsert_sizes<K>(
    sizer: Option<&Sizer<K>>,
    txns: &[Transaction<K>],
) -> Vec<Option<usize>> {
    let Some(sizer) = sizer else {
        return Vec::new();
    };
    txns.iter()
        .map(|txn| match txn {
            Transaction::Upsert(key, obj) => Some(entry_size(sizer, key, obj)),
            Transaction::Delete(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::{collections::BTreeMap, sync::Arc};

    use k8s_openapi::api::core::v1::ConfigMap;

    use crate::{
        memory::{self, MemoryUsage, estimate},
        store::entry_overhead,
        store::{KeyListerGetter, ObjectKey, ThreadSafeStore, Transaction},
        testing::config_map,
    };

    fn cm(name: &str, data: &[(&str, &str)]) -> Arc<ConfigMap> {
        let mut cm = config_map(name);
        cm.data = Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        );
        Arc::new(cm)
    }

    /// What the store holds, summed over its content.
    fn from_scratch(store: &ThreadSafeStore<ConfigMap>) -> MemoryUsage {
        let all = store.list_keyed();
        MemoryUsage {
            objects: all.len(),
            bytes: all
                .iter()
                .map(|(k, o)| estimate(&**o) + entry_overhead::<ConfigMap>(k))
                .sum(),
        }
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new(Some("ns"), name)
    }

    #[test]
    fn the_running_total_equals_a_sum_from_scratch_after_every_kind_of_write() {
        let store = ThreadSafeStore::<ConfigMap>::for_resource();
        assert_eq!(store.memory(), None, "off until a sizer is set");
        assert!(store.set_sizer(memory::estimator()));
        let check = |step: &str| {
            let usage = store.memory().expect("accounted");
            assert_eq!(usage, from_scratch(&store), "after {step}");
        };
        store.add(cm("a", &[("k", "v")])).unwrap();
        store.add(cm("b", &[])).unwrap();
        store.add(cm("c", &[("x", "yyyyyyyy")])).unwrap();
        check("adds");
        let before = store.memory().unwrap().bytes;
        store
            .update(cm("b", &[("big", &"z".repeat(1000))]))
            .unwrap();
        assert!(store.memory().unwrap().bytes >= before + 1000);
        check("an update");
        store.delete_by_key("ns/a");
        store.delete_by_key("ns/missing");
        check("deletes");
        store.apply_at(
            vec![
                Transaction::Upsert(key("d"), cm("d", &[("1", "2")])),
                Transaction::Delete(key("c")),
                Transaction::Upsert(key("b"), cm("b", &[])),
                Transaction::Upsert(key("d"), cm("d", &[("3", "4"), ("5", "6")])),
            ],
            Some("7".into()),
        );
        check("a batch");
        store.replace_keyed(
            vec![
                (key("e"), cm("e", &[("a", "b")])),
                (key("b"), cm("b", &[("q", "r")])),
                (key("e"), cm("e", &[])),
            ],
            "8",
        );
        check("a replace with a duplicate key");
        assert_eq!(store.memory().unwrap().objects, 2);
        store.delete_by_key("ns/b");
        store.delete_by_key("ns/e");
        assert_eq!(store.memory(), Some(MemoryUsage::default()), "back to zero");
    }

    #[test]
    fn a_sizer_set_on_a_full_store_sizes_what_is_there_and_only_one_is_kept() {
        let store = ThreadSafeStore::<ConfigMap>::for_resource();
        store.add(cm("a", &[("k", "v")])).unwrap();
        store.add(cm("b", &[])).unwrap();
        assert!(store.set_sizer(memory::estimator()));
        assert_eq!(store.memory().unwrap(), from_scratch(&store));
        assert!(
            !store.set_sizer(Arc::new(|_: &ConfigMap| 1)),
            "a second is refused"
        );
        assert_eq!(store.memory().unwrap(), from_scratch(&store));
    }

    #[test]
    fn the_entry_overhead_is_the_arc_counts_the_key_allocation_and_the_slot() {
        let key = ObjectKey::new(Some("prod"), "web-0");
        // Arc<K> counts 16; Arc<str> 16 + 10 bytes rounded to 32; slot 8 + 16 + 1.
        assert_eq!(
            entry_overhead::<k8s_openapi::api::core::v1::Pod>(&key),
            16 + 32 + 25
        );
    }
}
