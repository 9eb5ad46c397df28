//! client-go v0.36.5's `tools/cache` tests of the store — `store_test.go`,
//! `thread_safe_store_test.go`, `index_test.go` and `listers_test.go` — ported one for one to
//! kcache's [`ThreadSafeStore`] (client-go's `Store`, `ThreadSafeStore` and `Indexer` in one
//! type) and [`Lister`].
//!
//! Each test is named after the Go test it ports (snake case; a subtest is `<test>__<subtest>`).
//! `README.md` lists every Go test with its Rust counterpart and status, including the
//! Go tests that have no kcache counterpart.

#![allow(non_snake_case)] // `<test>__<subtest>` names

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kcache::store::LabelSelector;
use kcache::store::{
    IndexFunc, Indexers, KeyFunc, Lister, ObjectKey, ThreadSafeStore, Transaction,
    meta_namespace_key_func,
};
use kube_core::{ObjectMeta, Selector};

// ---------------------------------------------------------------------------------------------
// store_test.go
// ---------------------------------------------------------------------------------------------

/// The object of the generic store tests: an id (its key) and a value (what `by_val` indexes).
#[derive(Debug, Clone, PartialEq, Eq)]
struct TestStoreObject {
    id: String,
    val: String,
}

fn mk_obj(id: &str, val: &str) -> TestStoreObject {
    TestStoreObject {
        id: id.to_owned(),
        val: val.to_owned(),
    }
}

/// Keys an object by its id alone.
fn test_store_key_func() -> KeyFunc<TestStoreObject> {
    Arc::new(|obj: &TestStoreObject| Ok(ObjectKey::new(None, &obj.id)))
}

/// One index, `by_val`, on the object's value.
fn test_store_indexers() -> Indexers<TestStoreObject> {
    let by_val: IndexFunc<TestStoreObject> =
        Arc::new(|obj: &TestStoreObject| vec![obj.val.clone()]);
    HashMap::from([("by_val".to_owned(), by_val)])
}

/// The values of every stored object.
fn stored_vals(store: &ThreadSafeStore<TestStoreObject>) -> BTreeSet<String> {
    store.list().iter().map(|obj| obj.val.clone()).collect()
}

/// The store contract every client-go store implementation is run through: add, get, update,
/// delete, list and replace.
fn do_test_store(store: &ThreadSafeStore<TestStoreObject>) {
    store.add(Arc::new(mk_obj("foo", "bar"))).unwrap();
    let item = store
        .get(&mk_obj("foo", ""))
        .unwrap()
        .expect("didn't find inserted item");
    assert_eq!(item.val, "bar");

    store.update(Arc::new(mk_obj("foo", "baz"))).unwrap();
    let item = store
        .get(&mk_obj("foo", ""))
        .unwrap()
        .expect("didn't find inserted item");
    assert_eq!(item.val, "baz");

    store.delete(&mk_obj("foo", "")).unwrap();
    assert!(
        store.get(&mk_obj("foo", "")).unwrap().is_none(),
        "found deleted item"
    );

    // List.
    store.add(Arc::new(mk_obj("a", "b"))).unwrap();
    store.add(Arc::new(mk_obj("c", "d"))).unwrap();
    store.add(Arc::new(mk_obj("e", "e"))).unwrap();
    let found = stored_vals(store);
    for want in ["b", "d", "e"] {
        assert!(found.contains(want), "missing items, found: {found:?}");
    }
    assert_eq!(found.len(), 3, "extra items: {found:?}");

    // Replace.
    store
        .replace(
            vec![
                Arc::new(mk_obj("foo", "foo")),
                Arc::new(mk_obj("bar", "bar")),
            ],
            "0",
        )
        .unwrap();
    let found = stored_vals(store);
    for want in ["foo", "bar"] {
        assert!(found.contains(want), "missing items, found: {found:?}");
    }
    assert_eq!(found.len(), 2, "extra items: {found:?}");
}

/// The index contract: `index` finds every stored object that shares the probe's value.
fn do_test_index(indexer: &ThreadSafeStore<TestStoreObject>) {
    let expected: [(&str, &[&str]); 3] = [("b", &["a", "c"]), ("f", &["e"]), ("h", &["g"])];
    indexer.add(Arc::new(mk_obj("a", "b"))).unwrap();
    indexer.add(Arc::new(mk_obj("c", "b"))).unwrap();
    indexer.add(Arc::new(mk_obj("e", "f"))).unwrap();
    indexer.add(Arc::new(mk_obj("g", "h"))).unwrap();
    for (value, ids) in expected {
        let found: BTreeSet<String> = indexer
            .index("by_val", &mk_obj("", value))
            .expect("unexpected error")
            .iter()
            .map(|obj| obj.id.clone())
            .collect();
        for id in ids {
            assert!(
                found.contains(*id),
                "missing items, index {value}, expected {ids:?} but found {found:?}"
            );
        }
    }
}

#[test]
fn test_cache() {
    do_test_store(&ThreadSafeStore::without_resource_versions(
        test_store_key_func(),
        Indexers::new(),
    ));
}

#[test]
fn test_index() {
    do_test_index(&ThreadSafeStore::without_resource_versions(
        test_store_key_func(),
        test_store_indexers(),
    ));
}

// ---------------------------------------------------------------------------------------------
// thread_safe_store_test.go
// ---------------------------------------------------------------------------------------------

/// A store of plain strings written with explicit keys (client-go's `ThreadSafeStore` takes the
/// key with each write), with one index `testIndexer` computed by `index_func`.
fn string_store(index_func: fn(&String) -> Vec<String>) -> ThreadSafeStore<String> {
    let key_func: KeyFunc<String> = Arc::new(|s: &String| Ok(ObjectKey::new(None, s)));
    let index: IndexFunc<String> = Arc::new(index_func);
    ThreadSafeStore::without_resource_versions(
        key_func,
        HashMap::from([("testIndexer".to_owned(), index)]),
    )
}

fn key(key: &str) -> ObjectKey {
    ObjectKey::parse(key).expect("a valid key")
}

fn put(store: &ThreadSafeStore<String>, k: &str, obj: &str) {
    store.upsert_keyed(key(k), Arc::new(obj.to_owned()));
}

/// The keys indexed under `value` in `testIndexer`, sorted (empty when the value is absent).
fn indexed(store: &ThreadSafeStore<String>, value: &str) -> Vec<String> {
    store
        .index_keys("testIndexer", value)
        .expect("testIndexer exists")
        .iter()
        .map(|k| k.as_str().to_owned())
        .collect()
}

/// Whether `value` has an entry of its own in `testIndexer` (client-go reads
/// `index.indices[testIndexer][value]` directly; kcache exposes the present values through
/// `list_index_func_values`).
fn index_has_value(store: &ThreadSafeStore<String>, value: &str) -> bool {
    store
        .list_index_func_values("testIndexer")
        .iter()
        .any(|v| v == value)
}

#[test]
fn test_thread_safe_store_delete_removes_empty_sets_from_index() {
    let store = string_store(|obj| vec![obj.clone()]);
    put(&store, "testKey", "testKey");

    // Assumption check: the value `testKey` has a set with one key.
    assert_eq!(
        indexed(&store, "testKey").len(),
        1,
        "initial assumption of the index set having 1 element failed"
    );

    store.delete_by_key("testKey");
    assert!(
        !index_has_value(&store, "testKey"),
        "index set not deleted from index: {:?}",
        indexed(&store, "testKey")
    );
}

#[test]
fn test_thread_safe_store_add_keeps_non_empty_set_post_delete_from_index() {
    let store = string_store(|_| vec!["testIndex".to_owned()]);
    put(&store, "retain", "retain");
    put(&store, "delete", "delete");

    // Assumption check: the value `testIndex` has a set with two keys.
    assert_eq!(
        indexed(&store, "testIndex").len(),
        2,
        "initial assumption of the index set having 2 elements failed"
    );

    store.delete_by_key("delete");
    assert!(
        index_has_value(&store, "testIndex"),
        "index set erroneously deleted from index"
    );
    assert_eq!(indexed(&store, "testIndex").len(), 1);
}

#[test]
fn test_thread_safe_store_indexing_functions_with_multiple_values() {
    let store = string_store(|obj| obj.split(',').map(str::to_owned).collect());
    put(&store, "key1", "foo");
    put(&store, "key2", "bar");

    let check = |store: &ThreadSafeStore<String>, value: &str, want: &[&str]| {
        assert_eq!(
            indexed(store, value),
            want,
            "unexpected index for key {value}"
        );
    };

    check(&store, "foo", &["key1"]);
    check(&store, "bar", &["key2"]);

    put(&store, "key2", "foo,bar");
    check(&store, "foo", &["key1", "key2"]);
    check(&store, "bar", &["key2"]);

    put(&store, "key1", "foo,bar");
    check(&store, "foo", &["key1", "key2"]);
    check(&store, "bar", &["key1", "key2"]);

    put(&store, "key3", "foo,bar,baz");
    check(&store, "foo", &["key1", "key2", "key3"]);
    check(&store, "bar", &["key1", "key2", "key3"]);
    check(&store, "baz", &["key3"]);

    put(&store, "key1", "foo");
    check(&store, "foo", &["key1", "key2", "key3"]);
    check(&store, "bar", &["key2", "key3"]);
    check(&store, "baz", &["key3"]);

    put(&store, "key2", "bar");
    check(&store, "foo", &["key1", "key3"]);
    check(&store, "bar", &["key2", "key3"]);
    check(&store, "baz", &["key3"]);

    store.delete_by_key("key1");
    check(&store, "foo", &["key3"]);
    check(&store, "bar", &["key2", "key3"]);
    check(&store, "baz", &["key3"]);

    store.delete_by_key("key3");
    check(&store, "foo", &[]);
    check(&store, "bar", &["key2"]);
    check(&store, "baz", &[]);
}

/// A plain store of Kubernetes objects, as client-go's `NewThreadSafeStore(Indexers{},
/// Indices{})`: it reads each written object's resourceVersion (client-go reads it from any
/// object that has metadata).
fn rv_store() -> ThreadSafeStore<ConfigMap> {
    ThreadSafeStore::new(meta_namespace_key_func())
}

/// A cluster-scoped object `name` (so its key is `name`) carrying `rv`, if any.
fn rv_obj(name: &str, rv: Option<&str>) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            resource_version: rv.map(str::to_owned),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

fn add_rv(store: &ThreadSafeStore<ConfigMap>, name: &str, rv: Option<&str>) {
    store.add(Arc::new(rv_obj(name, rv))).unwrap();
}

#[test]
fn test_thread_safe_store_rv__initial_state() {
    let store = rv_store();
    assert_eq!(store.last_sync_resource_version(), "");
}

#[test]
fn test_thread_safe_store_rv__add_update_and_delete() {
    let store = rv_store();

    add_rv(&store, "key1", Some("10"));
    assert_eq!(store.last_sync_resource_version(), "10");

    // The same resourceVersion again.
    add_rv(&store, "key3", Some("10"));
    assert_eq!(store.last_sync_resource_version(), "10");

    add_rv(&store, "key4", Some("20"));
    assert_eq!(store.last_sync_resource_version(), "20");

    // Deleting with the object's final state records that state's (newer) resourceVersion.
    store.delete(&rv_obj("key4", Some("30"))).unwrap();
    assert_eq!(store.last_sync_resource_version(), "30");

    // client-go adds a plain string, which has no metadata and so no resourceVersion. A typed
    // kcache store holds only objects with metadata: the nearest is an object without a
    // resourceVersion, which kcache documents as leaving the recorded one as it is.
    add_rv(&store, "key5", None);
    assert_eq!(store.last_sync_resource_version(), "30");

    add_rv(&store, "key6", Some("40"));
    assert_eq!(store.last_sync_resource_version(), "40");

    // A delete by key has no object to read a resourceVersion from.
    store.delete_by_key("key6");
    assert_eq!(store.last_sync_resource_version(), "40");

    // A transaction records the resourceVersion of its last object, whatever the order.
    store.apply(vec![
        Transaction::Upsert(key("key9"), Arc::new(rv_obj("key9", Some("40")))),
        Transaction::Upsert(key("key10"), Arc::new(rv_obj("key10", Some("30")))),
        Transaction::Upsert(key("key11"), Arc::new(rv_obj("key11", Some("50")))),
    ]);
    assert_eq!(store.last_sync_resource_version(), "50");
}

#[test]
fn test_thread_safe_store_rv__replace() {
    let store = rv_store();
    add_rv(&store, "key1", Some("10"));
    assert_eq!(
        store.last_sync_resource_version(),
        "10",
        "setup failed: the add's resourceVersion was not recorded"
    );

    store
        .replace(
            vec![
                Arc::new(rv_obj("key3", Some("40"))),
                Arc::new(rv_obj("key2", Some("30"))),
            ],
            "50",
        )
        .unwrap();
    assert_eq!(store.last_sync_resource_version(), "50");
}

#[test]
fn test_thread_safe_store_rv__delete() {
    let store = rv_store();
    add_rv(&store, "key1", Some("10"));
    assert_eq!(
        store.last_sync_resource_version(),
        "10",
        "setup failed: the add's resourceVersion was not recorded"
    );

    store.delete(&rv_obj("key1", Some("20"))).unwrap();
    assert_eq!(store.last_sync_resource_version(), "20");
}

// ---------------------------------------------------------------------------------------------
// index_test.go
// ---------------------------------------------------------------------------------------------

/// A cluster-scoped pod `name` with the given labels and annotations.
fn pod(name: &str, labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> Pod {
    let map = |pairs: &[(&str, &str)]| {
        (!pairs.is_empty()).then(|| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        })
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: map(labels),
            annotations: map(annotations),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

/// Indexes a pod by its `foo` label (`""` when it has none, as a Go map lookup gives).
fn test_index_func() -> IndexFunc<Pod> {
    Arc::new(|pod: &Pod| {
        let label = pod.metadata.labels.as_ref().and_then(|l| l.get("foo"));
        vec![label.cloned().unwrap_or_default()]
    })
}

/// Indexes a pod by each user of its comma-separated `users` annotation.
fn test_users_index_func() -> IndexFunc<Pod> {
    Arc::new(|pod: &Pod| {
        let users = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("users"));
        let users = users.map(String::as_str).unwrap_or_default();
        users.split(',').map(str::to_owned).collect()
    })
}

fn pod_names(pods: &[Arc<Pod>]) -> BTreeSet<String> {
    pods.iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect()
}

#[test]
fn test_get_index_func_values() {
    let index = ThreadSafeStore::with_indexers(
        meta_namespace_key_func::<Pod>(),
        HashMap::from([("testmodes".to_owned(), test_index_func())]),
    );
    index
        .add(Arc::new(pod("one", &[("foo", "bar")], &[])))
        .unwrap();
    index
        .add(Arc::new(pod("two", &[("foo", "bar")], &[])))
        .unwrap();
    index
        .add(Arc::new(pod("tre", &[("foo", "biz")], &[])))
        .unwrap();

    let keys = index.list_index_func_values("testmodes");
    assert_eq!(keys.len(), 2, "expected 2 keys but got {keys:?}");
    for key in &keys {
        assert!(
            key == "bar" || key == "biz",
            "expected only 'bar' or 'biz' but got {key}"
        );
    }
}

#[test]
fn test_multi_index_keys() {
    let index = ThreadSafeStore::with_indexers(
        meta_namespace_key_func::<Pod>(),
        HashMap::from([("byUser".to_owned(), test_users_index_func())]),
    );
    let pod1 = pod("one", &[], &[("users", "ernie,bert")]);
    let pod2 = pod("two", &[], &[("users", "bert,oscar")]);
    let pod3 = pod("tre", &[], &[("users", "ernie,elmo")]);
    index.add(Arc::new(pod1)).unwrap();
    index.add(Arc::new(pod2.clone())).unwrap();
    index.add(Arc::new(pod3.clone())).unwrap();

    let expected: [(&str, &[&str]); 5] = [
        ("ernie", &["one", "tre"]),
        ("bert", &["one", "two"]),
        ("elmo", &["tre"]),
        ("oscar", &["two"]),
        ("elmo1", &[]),
    ];
    for (user, want) in expected {
        let found = pod_names(&index.by_index("byUser", user).expect("unexpected error"));
        let want: BTreeSet<String> = want.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(found, want, "index {user}");
    }

    index.delete(&pod3).unwrap();
    let ernie_pods = index.by_index("byUser", "ernie").expect("unexpected error");
    assert_eq!(ernie_pods.len(), 1, "expected 1 pod");
    for p in &ernie_pods {
        assert_eq!(p.metadata.name.as_deref(), Some("one"));
    }

    let elmo_pods = index.by_index("byUser", "elmo").expect("unexpected error");
    assert_eq!(elmo_pods.len(), 0, "expected 0 pods");

    let mut copy_of_pod2 = pod2;
    copy_of_pod2
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("users".to_owned(), "oscar".to_owned());
    index.update(Arc::new(copy_of_pod2)).unwrap();
    let bert_pods = index.by_index("byUser", "bert").expect("unexpected error");
    assert_eq!(bert_pods.len(), 1, "expected 1 pod");
    for p in &bert_pods {
        assert_eq!(p.metadata.name.as_deref(), Some("one"));
    }
}

// ---------------------------------------------------------------------------------------------
// listers_test.go
// ---------------------------------------------------------------------------------------------

/// A store keyed by name holding `num_objects` objects, the first `num_matching` of which carry
/// `labels` (the others carry an empty label map).
fn must_create_store(
    num_objects: usize,
    num_matching: usize,
    labels: &BTreeMap<String, String>,
) -> ThreadSafeStore<ConfigMap> {
    assert!(
        num_matching <= num_objects,
        "there can not be more matches than objects"
    );
    let key_func: KeyFunc<ConfigMap> = Arc::new(|obj: &ConfigMap| {
        let name = obj.metadata.name.as_deref().unwrap_or_default();
        Ok(ObjectKey::new(None, name))
    });
    let store = ThreadSafeStore::new(key_func);
    for i in 0..num_objects {
        let labels = if i < num_matching {
            labels.clone()
        } else {
            BTreeMap::new()
        };
        let obj = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("obj-{i}")),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        store.add(Arc::new(obj)).expect("unexpected error");
    }
    store
}

fn list_all(
    num_objects: usize,
    num_matching: usize,
    matching_labels: &[(&str, &str)],
    selector: &LabelSelector,
    expected_count: usize,
) {
    let labels = matching_labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let store = must_create_store(num_objects, num_matching, &labels);
    let matching_objects = Lister::new(store).list(selector).len();
    assert_eq!(
        matching_objects, expected_count,
        "listed {matching_objects} objects, expected {expected_count}"
    );
}

#[test]
fn test_list_all__subset_match() {
    let selector = Selector::from_iter([("match", "true")]);
    list_all(
        100_000,
        10_000,
        &[("match", "true")],
        &selector.into(),
        10_000,
    );
}

#[test]
fn test_list_all__all_match() {
    // labels.Everything(): the empty selector.
    list_all(1_000_000, 0, &[], &LabelSelector::default(), 1_000_000);
}

#[test]
fn test_list_all__no_match() {
    let selector = Selector::from_iter([("match", "true")]);
    list_all(1_000_000, 0, &[("nomatch", "true")], &selector.into(), 0);
}
