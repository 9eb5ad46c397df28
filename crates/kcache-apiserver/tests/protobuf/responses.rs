//! Protobuf answers: objects, writes, errors, custom resources, paginated lists and watches.

use super::*;

#[tokio::test]
async fn every_served_built_in_kind_decodes_from_protobuf_as_from_json() {
    let s = server().await;
    for (collection, obj) in samples() {
        let r = post(s.addr(), collection, &obj).await;
        assert_eq!(
            r.status,
            201,
            "{collection}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    let ns = "/api/v1/namespaces/default";
    same_as_json::<Namespace>(&s, "/api/v1/namespaces", "team-a").await;
    same_as_json::<Pod>(&s, &format!("{ns}/pods"), "p").await;
    same_as_json::<ConfigMap>(&s, &format!("{ns}/configmaps"), "cm").await;
    same_as_json::<Secret>(&s, &format!("{ns}/secrets"), "s").await;
    same_as_json::<Service>(&s, &format!("{ns}/services"), "svc").await;
    same_as_json::<Event>(&s, &format!("{ns}/events"), "e").await;
    same_as_json::<Lease>(
        &s,
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        "l",
    )
    .await;
}

#[tokio::test]
async fn writes_answer_in_protobuf_too() {
    let s = server().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let body = serde_json::to_vec(&json!({"metadata": {"name": "w"}, "data": {"a": "1"}})).unwrap();
    let headers = [("accept", PB), ("content-type", "application/json")];
    let r = request(s.addr(), Method::POST, cms, &headers, Some(body))
        .await
        .unwrap();
    assert_eq!(r.status, 201);
    assert_eq!(r.header("content-type").as_deref(), Some(PB));
    let cm: ConfigMap = decode_object(envelope(&r.body)).unwrap();
    assert_eq!(cm.data.unwrap()["a"], "1");
    // A delete that is gone at once answers a success Status.
    let r = request(
        s.addr(),
        Method::DELETE,
        &format!("{cms}/w"),
        &[("accept", PB)],
        None,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(pb::outline(&r.body), "v1/Status 0  \"\"");
}

#[tokio::test]
async fn errors_are_protobuf_status_when_protobuf_was_accepted() {
    let s = server().await;
    let path = "/api/v1/namespaces/default/pods/nope";
    let r = get_as(&s, path, PB).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.header("content-type").as_deref(), Some(PB));
    let st = decode_status(envelope(&r.body)).unwrap();
    assert_eq!(st.reason.as_deref(), Some("NotFound"));
    assert_eq!(st.code, Some(404));
    assert_eq!(st.message.as_deref(), Some("pods \"nope\" not found"));
    // JSON was asked for: JSON.
    let r = get(s.addr(), path).await;
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/json")
    );
    // Nothing acceptable: 406 in JSON.
    let r = get_as(&s, path, "application/xml").await;
    assert_eq!(r.status, 406);
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/json")
    );
}

#[tokio::test]
async fn custom_resources_answer_json_when_allowed_and_406_otherwise() {
    let s = ApiServer::builder()
        .resource(kcache_apiserver::ResourceInfo::namespaced(
            "example.com",
            "v1",
            "widgets",
            "Widget",
        ))
        .build()
        .start()
        .await
        .unwrap();
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    assert_eq!(
        post(s.addr(), path, &json!({"metadata": {"name": "w"}}))
            .await
            .status,
        201
    );
    let r = get_as(&s, path, PB_JSON).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(r.json()["items"][0]["metadata"]["name"], "w");
    let r = get_as(&s, &format!("{path}/w"), PB).await;
    assert_eq!(r.status, 406);
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/json")
    );
    let r = get_as(&s, &format!("{path}?watch=1"), PB_WATCH).await;
    assert_eq!(r.status, 406);
}

#[tokio::test]
async fn paginated_protobuf_lists_carry_continue_and_remaining_item_count() {
    let s = server().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    for i in 0..5 {
        post(
            s.addr(),
            cms,
            &json!({"metadata": {"name": format!("c{i}")}}),
        )
        .await;
    }
    let r = get_as(&s, &format!("{cms}?limit=2"), PB).await;
    let (meta, items) = decode_list::<ConfigMap>(envelope(&r.body)).unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(meta.remaining_item_count, Some(3));
    let token = meta.continue_.expect("a continue token");
    let r = get_as(&s, &format!("{cms}?limit=2&continue={token}"), PB).await;
    let (meta, items) = decode_list::<ConfigMap>(envelope(&r.body)).unwrap();
    let names: Vec<_> = items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["c2", "c3"]);
    assert_eq!(meta.remaining_item_count, Some(1));
    // As kube-apiserver's Table negotiation: tables stay JSON.
    let r = get_as(
        &s,
        cms,
        "application/json;as=Table;v=v1;g=meta.k8s.io, application/json",
    )
    .await;
    assert_eq!(r.json()["kind"], "Table");
}

#[tokio::test(start_paused = true)]
async fn protobuf_watch_is_length_prefixed_watch_events_with_bookmarks() {
    let s = server().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    post(
        s.addr(),
        cms,
        &json!({"metadata": {"name": "a"}, "data": {"k": "v"}}),
    )
    .await;
    // A streaming list: ADDED for what exists, then the initial-events-end bookmark.
    let path = format!(
        "{cms}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan\
         &allowWatchBookmarks=true&timeoutSeconds=1"
    );
    let mut w = common::Watch::open(s.addr(), &path, &[("accept", PB_WATCH)])
        .await
        .unwrap();
    assert_eq!(w.status, 200);
    assert_eq!(
        w.headers.get("content-type").unwrap(),
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let stream = w.collect_bytes().await;
    assert_eq!(
        pb::watch_outline(&stream),
        ["ADDED v1/ConfigMap a", "BOOKMARK v1/ConfigMap "]
    );
    // Decoded by the client's watch decoder: the bookmark carries the annotation.
    let mut dec = kcache_proto::WatchDecoder::new(1 << 20);
    dec.push(&stream);
    let mut events = Vec::new();
    while let Some(ev) = dec.next_event().unwrap() {
        events.push(ev);
    }
    assert_eq!(events.len(), 2);
    let cm: ConfigMap = decode_object(events[0].object.clone()).unwrap();
    assert_eq!(cm.data.unwrap()["k"], "v");
    let bm: ConfigMap = decode_object(events[1].object.clone()).unwrap();
    assert_eq!(
        bm.metadata.annotations.unwrap()["k8s.io/initial-events-end"],
        "true"
    );
    assert!(bm.metadata.resource_version.is_some());

    // A plain watch with the client-go Accept header: MODIFIED and DELETED frames.
    let rv = get(s.addr(), cms).await.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut w = common::Watch::open(
        s.addr(),
        &format!("{cms}?watch=1&resourceVersion={rv}&timeoutSeconds=1"),
        &[("accept", PB_JSON)],
    )
    .await
    .unwrap();
    let mut a = get(s.addr(), &format!("{cms}/a")).await.json();
    a["data"]["k"] = json!("w");
    common::put(s.addr(), &format!("{cms}/a"), &a).await;
    common::delete(s.addr(), &format!("{cms}/a")).await;
    let stream = w.collect_bytes().await;
    assert_eq!(
        pb::watch_outline(&stream),
        ["MODIFIED v1/ConfigMap a", "DELETED v1/ConfigMap a"]
    );
}

#[tokio::test]
async fn a_watch_from_a_compacted_rv_is_a_protobuf_error_event() {
    let s = server().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    for i in 0..3 {
        post(
            s.addr(),
            cms,
            &json!({"metadata": {"name": format!("c{i}")}}),
        )
        .await;
    }
    s.faults().compact();
    let r = get_as(&s, &format!("{cms}?watch=1&resourceVersion=1"), PB_WATCH).await;
    assert_eq!(r.status, 200);
    let frames = pb::watch_outline(&r.body);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert!(
        frames[0].starts_with("ERROR v1/Status 410 Expired"),
        "{frames:?}"
    );
}
