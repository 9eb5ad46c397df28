//! The store's snapshots, pages and history window.

use super::snapshot::ListPage;
use super::*;
use serde_json::json;

fn id() -> ResourceId {
    ResourceId {
        group: String::new(),
        version: "v1".into(),
        plural: "configmaps".into(),
    }
}

fn put(s: &Store, name: &str, v: &str) -> u64 {
    let out = s
        .mutate::<()>(&id(), &format!("ns/{name}"), |_, _| {
            Ok(Mutation::Put(
                json!({"metadata": {"name": name, "namespace": "ns"}, "data": {"v": v}}),
            ))
        })
        .unwrap();
    out.object.unwrap().rv()
}

fn all(_: &crate::object::StoredObject) -> bool {
    true
}

fn names(p: &ListPage) -> Vec<String> {
    p.items.iter().map(|o| o.name().to_owned()).collect()
}

#[test]
fn exact_read_rebuilds_the_historical_snapshot() {
    let s = Store::new(HistoryConfig::default());
    put(&s, "a", "1");
    let rv_b = put(&s, "b", "1");
    put(&s, "c", "1");
    put(&s, "a", "2");
    s.mutate::<()>(&id(), "ns/b", |_, _| Ok(Mutation::Delete))
        .unwrap();
    let q = ListQuery {
        namespace: Some("ns"),
        at: ReadAt::Exact(rv_b),
        start_after: None,
        limit: None,
        filter: &all,
        count_remaining: true,
    };
    let page = s.list(&id(), &q).unwrap();
    assert_eq!(names(&page), ["a", "b"]);
    assert_eq!(page.items[0].value()["data"]["v"], "1");
    let latest = s
        .list(
            &id(),
            &ListQuery {
                at: ReadAt::Latest,
                ..q
            },
        )
        .unwrap();
    assert_eq!(names(&latest), ["a", "c"]);
}

#[test]
fn pages_continue_strictly_after_the_last_key_and_count_the_rest() {
    let s = Store::new(HistoryConfig::default());
    for n in ["a", "b", "c", "d", "e"] {
        put(&s, n, "1");
    }
    let q = ListQuery {
        namespace: Some("ns"),
        at: ReadAt::Latest,
        start_after: None,
        limit: Some(2),
        filter: &all,
        count_remaining: true,
    };
    let p1 = s.list(&id(), &q).unwrap();
    assert_eq!(names(&p1), ["a", "b"]);
    assert_eq!(p1.remaining, Some(3));
    let after = p1.continue_after.clone().unwrap();
    let p2 = s
        .list(
            &id(),
            &ListQuery {
                start_after: Some(&after),
                at: ReadAt::Exact(p1.rv),
                ..q
            },
        )
        .unwrap();
    assert_eq!(names(&p2), ["c", "d"]);
    assert_eq!(p2.remaining, Some(1));
}

#[test]
fn history_window_by_count_expires_old_rvs() {
    let s = Store::new(HistoryConfig {
        max_events: 2,
        max_age: None,
    });
    let first = put(&s, "a", "1");
    put(&s, "a", "2");
    put(&s, "a", "3");
    let err = s.events_since(&id(), first - 1, 10).unwrap_err();
    assert!(matches!(err, StoreError::TooOld { .. }));
    assert_eq!(s.events_since(&id(), first, 10).unwrap().len(), 2);
    s.compact_now();
    assert!(s.events_since(&id(), first, 10).is_err());
    assert!(
        s.events_since(&id(), s.current_rv(), 10)
            .unwrap()
            .is_empty()
    );
}
