//! The initial list and relists: resourceVersions, pagination, expired and too-large
//! resourceVersions.

use super::*;

#[tokio::test(start_paused = true)]
async fn first_list_is_at_rv_0_with_page_size_500() {
    let src = FakeSource::new();
    for i in 0..3 {
        src.upsert(cm(&format!("c{i}")));
    }
    let h = Harness::start(&src, list_config());
    h.store
        .wait_for(|ops| ops.iter().any(|o| matches!(o, StoreOp::Replace(3, _))))
        .await;
    let calls = src.calls();
    assert_eq!(
        calls[0],
        Call::List {
            resource_version: Some("0".into()),
            version_match: None,
            limit: Some(500),
            continue_token: None
        }
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn paginated_list_follows_continue_tokens_and_replaces_once() {
    let src = FakeSource::new();
    src.set_paginate_at_rv0(true);
    for i in 0..1200 {
        src.upsert(cm(&format!("c{i:04}")));
    }
    let rv = src.resource_version();
    let h = Harness::start(&src, list_config());
    h.store.wait_for(|ops| !ops.is_empty()).await;
    assert_eq!(h.store.ops()[0], StoreOp::Replace(1200, rv.clone()));
    let calls = lists(&src.calls()).into_iter().cloned().collect::<Vec<_>>();
    assert_eq!(calls.len(), 3, "1200 objects in pages of 500: {calls:?}");
    for c in &calls[1..] {
        match c {
            Call::List {
                resource_version,
                continue_token,
                limit,
                ..
            } => {
                assert!(continue_token.is_some());
                assert_eq!(*limit, Some(500));
                assert_eq!(*resource_version, None, "continue requests carry no RV");
            }
            Call::Watch { .. } => unreachable!(),
        }
    }
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn relist_at_a_specific_rv_is_not_paged() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    let h = Harness::start(&src, list_config());
    h.wait_watching().await;
    let synced = h.handle.last_sync_resource_version();
    src.inject_watch_error(status(410, "Expired", "too old resource version: 1 (2)"));
    let calls = h.wait_calls(|c| lists(c).len() >= 2).await;
    assert_eq!(
        *lists(&calls)[1],
        Call::List {
            resource_version: Some(synced),
            version_match: None,
            limit: None,
            continue_token: None
        }
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn expired_list_retries_at_once_with_empty_rv() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    src.fail_lists(
        1,
        status(
            410,
            "Expired",
            "The resourceVersion for the provided list is too old.",
        ),
    );
    let h = Harness::start(&src, list_config());
    h.store.wait_for(|ops| !ops.is_empty()).await;
    let calls = src.calls();
    let l = lists(&calls);
    assert!(matches!(l[0], Call::List { resource_version: Some(rv), .. } if rv == "0"));
    assert!(matches!(l[1], Call::List { resource_version: Some(rv), .. } if rv.is_empty()));
    assert!(
        h.errors.lock().is_empty(),
        "the retry is silent: {:?}",
        h.errors.lock()
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn too_large_resource_version_list_retries_with_empty_rv() {
    let src = FakeSource::new();
    src.upsert(cm("a"));
    h_too_large(&src).await;
}

async fn h_too_large(src: &FakeSource<ConfigMap>) {
    let too_large: lister_watcher::Status = serde_json::from_value(serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Timeout: Too large resource version: 99, current: 2", "reason": "Timeout",
        "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1},
        "code": 504
    }))
    .unwrap();
    src.fail_lists(1, too_large);
    let h = Harness::start(src, list_config());
    h.store.wait_for(|ops| !ops.is_empty()).await;
    let calls = src.calls();
    assert!(
        matches!(lists(&calls)[1], Call::List { resource_version: Some(rv), .. } if rv.is_empty())
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn expired_continue_token_falls_back_to_a_full_list() {
    let src = FakeSource::new();
    src.set_paginate_at_rv0(true);
    for i in 0..700 {
        src.upsert(cm(&format!("c{i:04}")));
    }
    src.compact_after_lists(1);
    let h = Harness::start(&src, list_config());
    h.store.wait_for(|ops| !ops.is_empty()).await;
    assert!(matches!(h.store.ops()[0], StoreOp::Replace(700, _)));
    let calls = src.calls();
    let l = lists(&calls);
    assert_eq!(l.len(), 3, "page 1, expired page 2, full list: {l:?}");
    assert!(matches!(
        l[2],
        Call::List {
            limit: None,
            continue_token: None,
            ..
        }
    ));
    h.stop().await;
}
