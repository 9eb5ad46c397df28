//! Unit tests of the store, its indexes and the lister.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use k8s_openapi::api::core::v1::ConfigMap;

use super::*;
use crate::store::{ReflectorStore, StoreError};

const LABEL_INDEX: &str = "by-app";

fn cm(ns: Option<&str>, name: &str, app: &str) -> Arc<ConfigMap> {
    let mut cm = ConfigMap::default();
    cm.metadata.namespace = ns.map(str::to_owned);
    cm.metadata.name = Some(name.to_owned());
    if !app.is_empty() {
        cm.metadata.labels = Some(BTreeMap::from([("app".to_owned(), app.to_owned())]));
    }
    Arc::new(cm)
}

fn app_index() -> IndexFunc<ConfigMap> {
    Arc::new(|cm: &ConfigMap| {
        cm.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app").cloned())
            .into_iter()
            .collect()
    })
}

fn store() -> ThreadSafeStore<ConfigMap> {
    let store = ThreadSafeStore::for_resource();
    store
        .add_indexers(HashMap::from([(LABEL_INDEX.to_owned(), app_index())]))
        .unwrap();
    store
}

fn names(mut objs: Vec<Arc<ConfigMap>>) -> Vec<String> {
    objs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    objs.iter()
        .map(|o| o.metadata.name.clone().unwrap_or_default())
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn stored_objects_are_shared_not_copied() {
    let store = store();
    let obj = cm(Some("ns"), "a", "web");
    store.add(Arc::clone(&obj)).unwrap();
    let got = store.get_by_key("ns/a").unwrap();
    assert!(Arc::ptr_eq(&obj, &got));
    assert!(Arc::ptr_eq(&obj, &store.list()[0]));
    assert!(Arc::ptr_eq(&obj, &store.get(&obj).unwrap().unwrap()));
}

#[test]
fn add_returns_previous_object_and_update_moves_index_entries() {
    let store = store();
    assert!(store.add(cm(Some("ns"), "a", "web")).unwrap().is_none());
    let old = store.update(cm(Some("ns"), "a", "db")).unwrap().unwrap();
    assert_eq!(old.metadata.labels.as_ref().unwrap()["app"], "web");
    assert!(store.by_index(LABEL_INDEX, "web").unwrap().is_empty());
    assert_eq!(names(store.by_index(LABEL_INDEX, "db").unwrap()), ["a"]);
    assert_eq!(store.list_index_func_values(LABEL_INDEX), ["db"]);
    assert_eq!(store.len(), 1);
}

#[test]
fn delete_removes_object_and_its_index_entries() {
    let store = store();
    store.add(cm(Some("ns"), "a", "web")).unwrap();
    store.add(cm(Some("ns"), "b", "web")).unwrap();
    let removed = store.delete(&cm(Some("ns"), "a", "")).unwrap().unwrap();
    assert_eq!(removed.metadata.name.as_deref(), Some("a"));
    assert_eq!(names(store.by_index(LABEL_INDEX, "web").unwrap()), ["b"]);
    assert!(store.delete_by_key("ns/b").is_some());
    assert!(store.delete_by_key("ns/b").is_none());
    assert!(store.is_empty());
    assert!(store.list_index_func_values(LABEL_INDEX).is_empty());
    assert!(store.list_index_func_values(NAMESPACE_INDEX).is_empty());
}

#[test]
fn replace_makes_content_exactly_the_list_and_reindexes() {
    let store = store();
    store.add(cm(Some("ns"), "gone", "old")).unwrap();
    store.add(cm(Some("ns"), "kept", "old")).unwrap();
    let previous = store
        .replace(
            vec![
                cm(Some("ns"), "kept", "new"),
                cm(Some("other"), "fresh", "new"),
            ],
            "42",
        )
        .unwrap();
    assert_eq!(
        sorted(previous.keys().map(|k| k.to_string()).collect()),
        ["ns/gone", "ns/kept"]
    );
    assert_eq!(
        sorted(store.list_keys().iter().map(|k| k.to_string()).collect()),
        ["ns/kept", "other/fresh"]
    );
    assert!(store.by_index(LABEL_INDEX, "old").unwrap().is_empty());
    assert_eq!(
        names(store.by_index(LABEL_INDEX, "new").unwrap()),
        ["fresh", "kept"]
    );
    assert_eq!(
        sorted(store.list_index_func_values(NAMESPACE_INDEX)),
        ["ns", "other"]
    );
    assert_eq!(store.last_sync_resource_version(), "42");
}

#[test]
fn replace_with_a_duplicate_key_keeps_the_later_object() {
    let store = store();
    store
        .replace(
            vec![cm(Some("ns"), "a", "first"), cm(Some("ns"), "a", "second")],
            "1",
        )
        .unwrap();
    assert_eq!(store.len(), 1);
    assert!(store.by_index(LABEL_INDEX, "first").unwrap().is_empty());
    assert_eq!(names(store.by_index(LABEL_INDEX, "second").unwrap()), ["a"]);
}

#[test]
fn replace_reindexes_when_indexers_are_added_while_it_builds() {
    // The replace builds its indexes outside the lock. This index function registers another
    // indexer the first time it runs — which is during that build — so the replace must notice
    // and index with both.
    let store = ThreadSafeStore::<ConfigMap>::for_resource();
    let fired = Arc::new(AtomicBool::new(false));
    let hook: IndexFunc<ConfigMap> = {
        let store = store.clone();
        let fired = Arc::clone(&fired);
        Arc::new(move |_: &ConfigMap| {
            if !fired.swap(true, Ordering::SeqCst) {
                store
                    .add_indexers(HashMap::from([(LABEL_INDEX.to_owned(), app_index())]))
                    .unwrap();
            }
            vec!["x".to_owned()]
        })
    };
    // Register the hook with data absent so that it first runs inside the replace.
    store
        .add_indexers(HashMap::from([("hook".to_owned(), hook)]))
        .unwrap();
    store
        .replace(vec![cm(Some("ns"), "a", "web")], "1")
        .unwrap();
    assert!(fired.load(Ordering::SeqCst));
    assert_eq!(names(store.by_index(LABEL_INDEX, "web").unwrap()), ["a"]);
    assert_eq!(names(store.by_index("hook", "x").unwrap()), ["a"]);
}

#[test]
fn add_indexers_before_data_indexes_objects_added_later() {
    let store = ThreadSafeStore::<ConfigMap>::new(meta_namespace_key_func());
    store
        .add_indexers(HashMap::from([(LABEL_INDEX.to_owned(), app_index())]))
        .unwrap();
    store.add(cm(Some("ns"), "a", "web")).unwrap();
    assert_eq!(names(store.by_index(LABEL_INDEX, "web").unwrap()), ["a"]);
}

#[test]
fn add_indexers_after_data_indexes_existing_objects() {
    let store = ThreadSafeStore::<ConfigMap>::new(meta_namespace_key_func());
    store.add(cm(Some("ns"), "a", "web")).unwrap();
    store.add(cm(None, "b", "web")).unwrap();
    store.add_indexers(namespace_indexers()).unwrap();
    store
        .add_indexers(HashMap::from([(LABEL_INDEX.to_owned(), app_index())]))
        .unwrap();
    assert_eq!(
        names(store.by_index(LABEL_INDEX, "web").unwrap()),
        ["a", "b"]
    );
    assert_eq!(names(store.by_index(NAMESPACE_INDEX, "").unwrap()), ["b"]);
    assert_eq!(store.indexer_names(), [LABEL_INDEX, NAMESPACE_INDEX]);
}

#[test]
fn add_indexers_with_a_taken_name_is_a_conflict_and_adds_nothing() {
    let store = store();
    let err = store
        .add_indexers(HashMap::from([
            (LABEL_INDEX.to_owned(), app_index()),
            ("fresh".to_owned(), app_index()),
        ]))
        .unwrap_err();
    assert_eq!(err, IndexError::Conflict(vec![LABEL_INDEX.to_owned()]));
    assert_eq!(store.indexer_names(), [LABEL_INDEX, NAMESPACE_INDEX]);
}

#[test]
fn namespace_index_ships_ready_made() {
    let store = ThreadSafeStore::<ConfigMap>::for_resource();
    store.add(cm(Some("a"), "x", "")).unwrap();
    store.add(cm(Some("b"), "y", "")).unwrap();
    store.add(cm(Some("a"), "z", "")).unwrap();
    assert_eq!(
        names(store.by_index(NAMESPACE_INDEX, "a").unwrap()),
        ["x", "z"]
    );
    assert_eq!(
        store.index_keys(NAMESPACE_INDEX, "a").unwrap(),
        [
            ObjectKey::new(Some("a"), "x"),
            ObjectKey::new(Some("a"), "z")
        ]
    );
}

#[test]
fn unknown_index_names_are_errors() {
    let store = store();
    let unknown = IndexError::UnknownIndex("nope".to_owned());
    assert_eq!(store.by_index("nope", "v").unwrap_err(), unknown);
    assert_eq!(store.index_keys("nope", "v").unwrap_err(), unknown);
    assert_eq!(
        store.index("nope", &cm(None, "a", "")).unwrap_err(),
        unknown
    );
    assert!(store.list_index_func_values("nope").is_empty());
    // A known index with an absent value is just empty.
    assert!(store.by_index(LABEL_INDEX, "absent").unwrap().is_empty());
}

#[test]
fn index_returns_stored_objects_sharing_any_value_with_the_probe() {
    let multi: IndexFunc<ConfigMap> = Arc::new(|cm: &ConfigMap| {
        cm.metadata
            .labels
            .iter()
            .flatten()
            .map(|(k, _)| k.clone())
            .collect()
    });
    let store = ThreadSafeStore::<ConfigMap>::with_indexers(
        meta_namespace_key_func(),
        HashMap::from([("label-keys".to_owned(), multi)]),
    );
    let with = |name: &str, keys: &[&str]| {
        let mut obj = (*cm(Some("ns"), name, "")).clone();
        obj.metadata.labels = Some(
            keys.iter()
                .map(|k| (k.to_string(), String::new()))
                .collect(),
        );
        Arc::new(obj)
    };
    store.add(with("a", &["x"])).unwrap();
    store.add(with("b", &["x", "y"])).unwrap();
    store.add(with("c", &["z"])).unwrap();
    // The probe is not stored; objects matching several of its values come back once.
    let found = store
        .index("label-keys", &with("probe", &["x", "y"]))
        .unwrap();
    assert_eq!(names(found), ["a", "b"]);
}

#[test]
fn apply_batch_runs_in_order_and_returns_previous_values() {
    let store = store();
    store.add(cm(Some("ns"), "a", "v1")).unwrap();
    let key = |n: &str| ObjectKey::new(Some("ns"), n);
    let previous = store.apply(vec![
        Transaction::Upsert(key("a"), cm(Some("ns"), "a", "v2")),
        Transaction::Upsert(key("b"), cm(Some("ns"), "b", "v1")),
        Transaction::Delete(key("a")),
        Transaction::Delete(key("missing")),
    ]);
    let apps: Vec<Option<String>> = previous
        .iter()
        .map(|p| {
            p.as_ref()
                .map(|o| o.metadata.labels.as_ref().unwrap()["app"].clone())
        })
        .collect();
    assert_eq!(apps, [Some("v1".into()), None, Some("v2".into()), None]);
    assert_eq!(store.list_keys(), [key("b")]);
    assert_eq!(store.list_index_func_values(LABEL_INDEX), ["v1"]);
}

#[test]
fn failing_key_func_returns_an_error_and_changes_nothing() {
    let store = store();
    store.add(cm(Some("ns"), "a", "web")).unwrap();
    let nameless = Arc::new(ConfigMap::default());
    assert_eq!(
        store.add(Arc::clone(&nameless)).unwrap_err(),
        KeyError::MissingName
    );
    assert_eq!(store.delete(&nameless).unwrap_err(), KeyError::MissingName);
    assert_eq!(store.get(&nameless).unwrap_err(), KeyError::MissingName);
    let err = store
        .replace(vec![cm(Some("ns"), "b", "web"), nameless], "9")
        .unwrap_err();
    assert_eq!(err, KeyError::MissingName);
    assert_eq!(store.list_keys(), [ObjectKey::new(Some("ns"), "a")]);
    assert_eq!(store.last_sync_resource_version(), "");
    assert_eq!(names(store.by_index(LABEL_INDEX, "web").unwrap()), ["a"]);
}

#[test]
fn store_works_as_a_reflector_sink() {
    let store = store();
    let sink: &dyn ReflectorStore<ConfigMap> = &store;
    sink.add(cm(Some("ns"), "a", "web")).unwrap();
    sink.update(cm(Some("ns"), "a", "db")).unwrap();
    sink.add(cm(Some("ns"), "b", "web")).unwrap();
    sink.delete(cm(Some("ns"), "b", "")).unwrap();
    sink.resync().unwrap();
    assert_eq!(names(store.by_index(LABEL_INDEX, "db").unwrap()), ["a"]);
    sink.replace(vec![cm(None, "c", "")], "7".into()).unwrap();
    assert_eq!(store.list_keys(), [ObjectKey::new(None, "c")]);
    sink.bookmark("8").unwrap();
    assert_eq!(store.last_sync_resource_version(), "8");
    assert!(matches!(
        sink.add(Arc::new(ConfigMap::default())),
        Err(StoreError::Key(KeyError::MissingName))
    ));
}

#[test]
fn known_objects_view_lists_keys_and_a_consistent_snapshot() {
    let store = store();
    store.add(cm(Some("ns"), "a", "")).unwrap();
    store.add(cm(None, "b", "")).unwrap();
    let known: &dyn KeyListerGetter<ConfigMap> = &store;
    let mut keys = known.list_keys();
    keys.sort();
    assert_eq!(
        keys,
        [ObjectKey::new(None, "b"), ObjectKey::new(Some("ns"), "a")]
    );
    assert!(known.get_by_key("ns/a").is_some());
    assert!(known.get_by_key("ns/zzz").is_none());
    let mut snapshot: Vec<String> = known
        .list_keyed()
        .iter()
        .map(|(k, _)| k.to_string())
        .collect();
    snapshot.sort();
    assert_eq!(snapshot, ["b", "ns/a"]);
}

#[test]
fn lister_filters_by_label_selector_and_namespace() {
    let store = store();
    store.add(cm(Some("prod"), "web", "web")).unwrap();
    store.add(cm(Some("prod"), "db", "db")).unwrap();
    store.add(cm(Some("dev"), "web", "web")).unwrap();
    store.add(cm(None, "global", "web")).unwrap();
    let lister = Lister::new(store.clone());
    let all = parse_label_selector("").unwrap();
    let web = parse_label_selector("app=web").unwrap();
    assert_eq!(lister.list(&all).len(), 4);
    assert_eq!(names(lister.list(&web)), ["global", "web", "web"]);
    assert_eq!(names(lister.namespaced("prod").list(&web)), ["web"]);
    assert_eq!(names(lister.namespaced("prod").list(&all)), ["db", "web"]);
    assert_eq!(lister.namespaced("").list(&web).len(), 3);
    assert!(lister.namespaced("prod").get("db").is_some());
    assert!(lister.namespaced("dev").get("db").is_none());
    assert!(lister.get("global").is_some());
    // Objects added later are visible: the lister reads the live store.
    store.add(cm(Some("prod"), "web2", "web")).unwrap();
    assert_eq!(names(lister.namespaced("prod").list(&web)), ["web", "web2"]);
}

#[test]
fn namespaced_lister_scans_when_the_store_has_no_namespace_index() {
    let store = ThreadSafeStore::<ConfigMap>::new(meta_namespace_key_func());
    store.add(cm(Some("prod"), "a", "web")).unwrap();
    store.add(cm(Some("dev"), "b", "web")).unwrap();
    let lister = Lister::new(store);
    let web = parse_label_selector("app in (web)").unwrap();
    assert_eq!(names(lister.namespaced("prod").list(&web)), ["a"]);
}

#[test]
fn store_handles_are_send_sync_and_clone_shares_state() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<ThreadSafeStore<ConfigMap>>();
    assert_send_sync::<Lister<ConfigMap>>();
    assert_send_sync::<NamespaceLister<ConfigMap>>();
    let store = store();
    let clone = store.clone();
    clone.add(cm(None, "a", "")).unwrap();
    assert!(store.contains_key("a"));
}

fn cm_at(name: &str, resource_version: Option<&str>) -> Arc<ConfigMap> {
    let mut cm = ConfigMap::default();
    cm.metadata.namespace = Some("ns".to_owned());
    cm.metadata.name = Some(name.to_owned());
    cm.metadata.resource_version = resource_version.map(str::to_owned);
    Arc::new(cm)
}

/// client-go's `TestThreadSafeStoreRV`: the store's last-seen resourceVersion follows every
/// object added, updated or deleted, not only relists.
#[test]
fn last_sync_resource_version_follows_adds_updates_and_deletes() {
    let store = ThreadSafeStore::<ConfigMap>::for_resource();
    assert_eq!(store.last_sync_resource_version(), "");

    store.add(cm_at("a", Some("10"))).unwrap();
    assert_eq!(store.last_sync_resource_version(), "10");
    store.add(cm_at("c", Some("10"))).unwrap();
    assert_eq!(store.last_sync_resource_version(), "10");
    store.update(cm_at("d", Some("20"))).unwrap();
    assert_eq!(store.last_sync_resource_version(), "20");
    // The deleted object's final state carries a newer resourceVersion than the stored one.
    store.delete(&cm_at("d", Some("30"))).unwrap();
    assert_eq!(store.last_sync_resource_version(), "30");
    // An object without a resourceVersion says nothing about where the store is.
    store.add(cm_at("e", None)).unwrap();
    assert_eq!(store.last_sync_resource_version(), "30");
    store.add(cm_at("f", Some("40"))).unwrap();
    assert_eq!(store.last_sync_resource_version(), "40");
    // A deletion by key alone has no object to read a resourceVersion from.
    store.delete_by_key("ns/f");
    assert_eq!(store.last_sync_resource_version(), "40");
    // A batch ends where its last object is, whatever the order inside it.
    store.apply(vec![
        Transaction::Upsert(ObjectKey::new(Some("ns"), "g"), cm_at("g", Some("40"))),
        Transaction::Upsert(ObjectKey::new(Some("ns"), "h"), cm_at("h", Some("30"))),
        Transaction::Upsert(ObjectKey::new(Some("ns"), "i"), cm_at("i", Some("50"))),
        Transaction::Delete(ObjectKey::new(Some("ns"), "a")),
    ]);
    assert_eq!(store.last_sync_resource_version(), "50");

    store
        .replace(vec![cm_at("j", Some("40")), cm_at("k", Some("30"))], "60")
        .unwrap();
    assert_eq!(store.last_sync_resource_version(), "60");
}

/// The same through the [`ReflectorStore`] face, as when a reflector feeds a bare store.
#[test]
fn a_store_fed_by_a_reflector_follows_each_watch_event() {
    let store = ThreadSafeStore::<ConfigMap>::for_resource();
    let sink: &dyn ReflectorStore<ConfigMap> = &store;
    sink.replace(vec![cm_at("a", Some("5"))], "7".into())
        .unwrap();
    assert_eq!(store.last_sync_resource_version(), "7");
    sink.add(cm_at("b", Some("8"))).unwrap();
    assert_eq!(store.last_sync_resource_version(), "8");
    sink.update(cm_at("a", Some("9"))).unwrap();
    assert_eq!(store.last_sync_resource_version(), "9");
    sink.delete(cm_at("b", Some("11"))).unwrap();
    assert_eq!(store.last_sync_resource_version(), "11");
}

/// client-go's `NewStore` and `NewIndexer` read the resourceVersion of every object written:
/// so do [`ThreadSafeStore::new`] and [`ThreadSafeStore::with_indexers`], not only
/// [`ThreadSafeStore::for_resource`].
#[test]
fn new_and_with_indexers_stores_follow_resource_versions() {
    let plain = ThreadSafeStore::<ConfigMap>::new(meta_namespace_key_func());
    let indexed = ThreadSafeStore::<ConfigMap>::with_indexers(
        meta_namespace_key_func(),
        namespace_indexers(),
    );
    for store in [plain, indexed] {
        store.add(cm_at("a", Some("10"))).unwrap();
        assert_eq!(store.last_sync_resource_version(), "10");
        store.delete(&cm_at("a", Some("12"))).unwrap();
        assert_eq!(store.last_sync_resource_version(), "12");
        // It reads them already: a second function is refused.
        assert!(!store.set_resource_version_func(resource_version_func::<ConfigMap>()));
    }
}
