//! Unit tests of [`FakeSource`](super::FakeSource).

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;

use super::*;
use crate::{
    lister_watcher::{ListParams, ListerWatcher, ObjectList, WatchParams},
    testing::config_map as cm,
};

fn names(list: &ObjectList<ConfigMap>) -> Vec<String> {
    list.items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect()
}

#[tokio::test]
async fn paged_list_is_a_consistent_snapshot() {
    let src = FakeSource::new();
    for n in ["a", "b", "c", "d"] {
        src.upsert(cm(n));
    }
    let p = ListParams {
        limit: Some(2),
        ..ListParams::default()
    };
    let first = src.list(&p).await.unwrap();
    assert_eq!(names(&first), ["a", "b"]);
    assert_eq!(first.metadata.remaining_item_count, Some(2));
    src.delete(&ObjectKey::new(Some("ns"), "c"));
    src.upsert(cm("e"));
    let p2 = ListParams {
        continue_token: first.metadata.continue_.clone(),
        ..p
    };
    let second = src.list(&p2).await.unwrap();
    assert_eq!(
        names(&second),
        ["c", "d"],
        "the page sees the snapshot, not the later writes"
    );
    assert_eq!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );
    assert!(second.metadata.continue_.is_none());
}

#[tokio::test]
async fn compaction_expires_continue_tokens_and_old_watches() {
    let src = FakeSource::new();
    for n in ["a", "b", "c"] {
        src.upsert(cm(n));
    }
    let old_rv = src.resource_version();
    let first = src
        .list(&ListParams {
            limit: Some(1),
            ..ListParams::default()
        })
        .await
        .unwrap();
    src.upsert(cm("d"));
    src.compact();
    let err = src
        .list(&ListParams {
            limit: Some(1),
            continue_token: first.metadata.continue_,
            ..ListParams::default()
        })
        .await
        .unwrap_err();
    assert!(err.is_expired(), "{err}");
    let mut w = src
        .watch(
            &WatchParams::default(),
            &(old_rv.parse::<u64>().unwrap() - 1).to_string(),
        )
        .await
        .unwrap();
    match w.next().await {
        Some(Ok(WatchEvent::Error(s))) => {
            assert_eq!(s.code, 410);
            assert!(
                s.message.starts_with("too old resource version: "),
                "{}",
                s.message
            );
        }
        other => panic!("expected an ERROR event, got {other:?}"),
    }
}

#[tokio::test]
async fn watch_replays_history_after_rv_then_streams_live() {
    let src = FakeSource::new();
    let rv = src.upsert(cm("a"));
    src.upsert(cm("b"));
    let mut w = src.watch(&WatchParams::default(), &rv).await.unwrap();
    src.delete(&ObjectKey::new(Some("ns"), "a"));
    assert!(
        matches!(w.next().await, Some(Ok(WatchEvent::Added(c))) if c.metadata.name.as_deref() == Some("b"))
    );
    assert!(
        matches!(w.next().await, Some(Ok(WatchEvent::Deleted(c))) if c.metadata.name.as_deref() == Some("a"))
    );
    src.drop_watches();
    assert!(w.next().await.is_none());
}

#[tokio::test]
async fn future_resource_version_is_too_large() {
    let src = FakeSource::<ConfigMap>::new();
    let p = ListParams {
        resource_version: Some("999".into()),
        ..ListParams::default()
    };
    assert!(
        src.list(&p)
            .await
            .unwrap_err()
            .is_too_large_resource_version()
    );
}
