//! Compact storage over protobuf (feature `protobuf`): `Compact<K>` keeps a built-in object's
//! protobuf message plus its parsed metadata.
//!
//! - every recorded protobuf body of kube-apiserver v1.36
//!   (`testdata/kube-apiserver-v1.36/protobuf.json`) decodes to compact objects whose metadata and typed view equal the JSON twin's;
//! - stripping `managedFields` changes nothing else;
//! - truncated or garbage protobuf is an error, never a panic;
//! - a compact reflector of Pods travels protobuf against the upstream kube-apiserver and the
//!   embedded server, and converges on both.
#![cfg(feature = "protobuf")]

mod common;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use anyhow::{Context, Result, bail, ensure};
use bytes::Bytes;
use common::TestServer;
use common::protobuf_fixture::{Placeholders, body, fixture, step};
use k8s_openapi::api::core::v1::Pod;
use kcache::{
    reflector::{Config, Reflector},
    store::ObjectKey,
    testing::RecordingStore,
};
use kcache_client::{
    HttpListerWatcher,
    compact::{Compact, CompactDecoder, Format},
    decode::ItemDecoder,
};
use kcache_proto::{Envelope, WatchDecoder, list::RawList};
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A recorded JSON object without `apiVersion`/`kind` (and optionally `managedFields`).
fn json_twin(v: &Value, strip: bool) -> Value {
    let mut v = v.clone();
    let o = v.as_object_mut().unwrap();
    o.remove("apiVersion");
    o.remove("kind");
    if strip {
        o["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
    }
    v
}

fn pod_json(p: &Pod) -> Value {
    json_twin(&serde_json::to_value(p).unwrap(), false)
}

fn decoder(strip: bool) -> CompactDecoder {
    CompactDecoder::new().strip_managed_fields(strip)
}

/// One object's envelope through the compact decoder's protobuf path.
fn compact(env: Envelope, strip: bool) -> Result<Compact<Pod>, kcache_proto::DecodeError> {
    ItemDecoder::<Compact<Pod>>::decode_protobuf(&decoder(strip), env).expect("takes protobuf")
}

/// The items of a recorded protobuf list body as compact Pods.
fn compact_list(body: Bytes, strip: bool) -> Vec<Compact<Pod>> {
    let env = Envelope::decode(body).unwrap();
    assert_eq!(env.kind, "PodList");
    RawList::decode_raw(env.raw)
        .unwrap()
        .items
        .into_iter()
        .map(|raw| {
            compact(
                Envelope {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    raw,
                    content_type: String::new(),
                },
                strip,
            )
            .unwrap()
        })
        .collect()
}

/// The checks every compact object from a fixture goes through, against its recorded JSON.
fn check_against_twin(
    ph: &mut Placeholders,
    c: &Compact<Pod>,
    twin: &Value,
    strip: bool,
    at: &str,
) {
    assert_eq!(c.format(), Format::Protobuf, "{at}");
    assert!(
        c.json().is_none() && c.protobuf() == Some(c.bytes()),
        "{at}"
    );
    // The typed view is the recorded object (minus managedFields when stripped).
    let typed = c.typed().unwrap();
    ph.check(&json_twin(twin, strip), &pod_json(&typed), at);
    // The metadata is the recorded metadata without managedFields, stripped or not.
    let mut meta = twin["metadata"].clone();
    meta.as_object_mut().unwrap().remove("managedFields");
    ph.check(
        &meta,
        &serde_json::to_value(c.metadata()).unwrap(),
        &format!("{at}.metadata"),
    );
    // The same object compacted from its JSON form has the same metadata and typed view.
    let from_json =
        Compact::<Pod>::from_json(&serde_json::to_vec(&c.typed().unwrap()).unwrap(), strip)
            .unwrap();
    assert_eq!(from_json.format(), Format::Json);
    assert_eq!(from_json.metadata(), c.metadata(), "{at}");
    assert_eq!(from_json.typed().unwrap(), typed, "{at}");
}

#[test]
fn protobuf_list_items_become_compact_pods_equal_to_the_json_twin() {
    let f = fixture();
    let json = &step(&f, "same list as JSON")["response"]["body"]["items"];
    for strip in [false, true] {
        let mut ph = Placeholders::default();
        let items = compact_list(body(step(&f, "list 3 pods as protobuf")), strip);
        let twins = json.as_array().unwrap();
        assert_eq!(items.len(), twins.len());
        for (i, (c, twin)) in items.iter().zip(twins).enumerate() {
            check_against_twin(
                &mut ph,
                c,
                twin,
                strip,
                &format!("strip={strip} items[{i}]"),
            );
        }
    }
}

#[test]
fn protobuf_get_becomes_a_compact_pod_equal_to_the_json_twin() {
    let f = fixture();
    let twin = &step(&f, "create pod pb-1 (JSON)")["response"]["body"];
    for strip in [false, true] {
        let env = Envelope::decode(body(step(&f, "get one pod as protobuf"))).unwrap();
        let c = compact(env, strip).unwrap();
        check_against_twin(&mut Placeholders::default(), &c, twin, strip, "pod");
    }
}

#[test]
fn protobuf_watch_objects_become_compact_pods_equal_to_the_json_events() {
    let f = fixture();
    let b = body(step(&f, "live protobuf watch"));
    let twins = step(&f, "the same live events replayed as JSON")["response"]["events"]
        .as_array()
        .unwrap()
        .clone();
    for strip in [false, true] {
        let mut ph = Placeholders::default();
        let mut frames = WatchDecoder::default();
        frames.push(&b);
        let mut n = 0;
        while let Some(ev) = frames.next_event().unwrap() {
            let twin = &twins[n];
            assert_eq!(ev.event_type.as_wire(), twin["type"].as_str().unwrap());
            let c = compact(ev.object, strip).unwrap();
            check_against_twin(&mut ph, &c, &twin["object"], strip, &format!("events[{n}]"));
            n += 1;
        }
        assert_eq!(n, 4);
    }
}

#[test]
fn stripped_protobuf_is_smaller_and_its_typed_view_only_lacks_managed_fields() {
    let f = fixture();
    let full = compact_list(body(step(&f, "list 3 pods as protobuf")), false);
    let stripped = compact_list(body(step(&f, "list 3 pods as protobuf")), true);
    for (a, b) in full.iter().zip(&stripped) {
        assert!(b.bytes().len() < a.bytes().len());
        assert_eq!(a.metadata(), b.metadata());
        let mut expected = a.typed().unwrap();
        assert!(expected.metadata.managed_fields.is_some());
        expected.metadata.managed_fields = None;
        assert_eq!(b.typed().unwrap(), expected);
    }
}

#[test]
fn protobuf_bytes_are_smaller_than_the_json() {
    let f = fixture();
    let json = &step(&f, "same list as JSON")["response"]["body"]["items"];
    let items = compact_list(body(step(&f, "list 3 pods as protobuf")), false);
    let pb: usize = items.iter().map(|c| c.bytes().len()).sum();
    let js: usize = json
        .as_array()
        .unwrap()
        .iter()
        .map(|v| serde_json::to_vec(&json_twin(v, false)).unwrap().len())
        .sum();
    // Not a tight bound: the placeholders make the JSON a little shorter than the real one.
    assert!(pb < js, "protobuf {pb} B vs JSON {js} B");
}

#[test]
fn compact_decoder_asks_for_protobuf_for_built_in_kinds_only() {
    let d = CompactDecoder::new();
    assert!(ItemDecoder::<Compact<Pod>>::accepts_protobuf(&d));
    assert!(!ItemDecoder::<Compact<kube_core::DynamicObject>>::accepts_protobuf(&d));
}

#[test]
fn envelope_of_another_kind_or_a_status_is_an_error() {
    let f = fixture();
    let mut env = Envelope::decode(body(step(&f, "get one pod as protobuf"))).unwrap();
    env.kind = "ConfigMap".into();
    assert!(matches!(
        compact(env, false),
        Err(kcache_proto::DecodeError::UnknownKind { .. })
    ));
    let status = Envelope::decode(body(step(&f, "404 with protobuf Accept"))).unwrap();
    match compact(status, true) {
        Err(kcache_proto::DecodeError::Status(s)) => assert_eq!(s.code, Some(404)),
        other => panic!("expected a Status error, got {other:?}"),
    }
}

#[test]
fn meta_mut_edits_show_in_the_typed_view_of_protobuf_objects() {
    use kube_core::Resource as _;
    let f = fixture();
    let env = Envelope::decode(body(step(&f, "get one pod as protobuf"))).unwrap();
    let mut c = compact(env, false).unwrap();
    c.meta_mut().labels = None;
    c.meta_mut()
        .annotations
        .get_or_insert_default()
        .insert("added".into(), "by a transform".into());
    let typed = c.typed().unwrap();
    assert!(typed.metadata.labels.is_none());
    assert_eq!(
        typed.metadata.annotations.unwrap()["added"],
        "by a transform"
    );
    // The bytes' managedFields are kept in the typed view, as for JSON.
    assert!(typed.metadata.managed_fields.is_some());
}

#[test]
fn typed_view_of_protobuf_bytes_needs_a_built_in_type() {
    let raw = recorded_pod();
    let c = Compact::<kube_core::DynamicObject>::from_protobuf(&raw, true).unwrap();
    assert_eq!(c.metadata().name.as_deref(), Some("pb-1"));
    let err = c.typed().unwrap_err();
    assert!(
        matches!(err, kcache_client::compact::CompactError::NotBuiltIn(_)),
        "{err}"
    );
}

fn recorded_pod() -> Bytes {
    Envelope::decode(body(step(&fixture(), "get one pod as protobuf")))
        .unwrap()
        .raw
}

#[test]
fn truncated_protobuf_is_an_error() {
    let raw = recorded_pod();
    // Cut inside the metadata record (field 1, the first one).
    for cut in [1, 2, 10, 100] {
        for strip in [false, true] {
            let err = Compact::<Pod>::from_protobuf(&raw[..cut], strip).unwrap_err();
            assert!(matches!(err, kcache_proto::DecodeError::Layout(_)), "{err}");
        }
    }
}

proptest! {
    #[test]
    fn garbage_protobuf_is_an_error_or_a_value_never_a_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
        strip in any::<bool>(),
    ) {
        if let Ok(c) = Compact::<Pod>::from_protobuf(&bytes, strip) {
            let _ = c.typed();
        }
    }

    #[test]
    fn cut_or_corrupted_pods_are_an_error_or_a_value_never_a_panic(
        cut in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        strip in any::<bool>(),
    ) {
        let mut raw = recorded_pod().to_vec();
        let i = flip.index(raw.len());
        raw[i] = byte;
        raw.truncate(cut.index(raw.len() + 1));
        if let Ok(c) = Compact::<Pod>::from_protobuf(&raw, strip) {
            // Whatever is accepted has walkable metadata and a typed view or a clean error.
            prop_assert_eq!(c.format(), Format::Protobuf);
            let _ = c.typed();
        }
    }
}

// ---- end to end over HTTP ----

/// Serves the recorded protobuf list and watch bodies on 127.0.0.1:0 to any Accept that
/// mentions protobuf (a 406 otherwise); returns the URL and the Accept headers seen.
async fn replay_server() -> Result<(String, Arc<std::sync::Mutex<Vec<String>>>)> {
    use axum::{
        Router,
        body::Body,
        extract::{RawQuery, State},
        http::{HeaderMap, StatusCode},
        response::Response,
        routing::get,
    };
    type Seen = Arc<std::sync::Mutex<Vec<String>>>;
    async fn pods(
        State((seen, list, watch)): State<(Seen, Bytes, Bytes)>,
        RawQuery(q): RawQuery,
        headers: HeaderMap,
    ) -> Response {
        let accept = headers
            .get("accept")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        seen.lock().unwrap().push(accept.clone());
        let r = Response::builder();
        if !accept.contains("application/vnd.kubernetes.protobuf") {
            return r
                .status(StatusCode::NOT_ACCEPTABLE)
                .body(Body::empty())
                .unwrap();
        }
        if q.unwrap_or_default().contains("watch=") {
            r.header(
                "content-type",
                "application/vnd.kubernetes.protobuf;stream=watch",
            )
            .body(Body::from(watch))
            .unwrap()
        } else {
            r.header("content-type", "application/vnd.kubernetes.protobuf")
                .body(Body::from(list))
                .unwrap()
        }
    }
    let f = fixture();
    let seen: Seen = Arc::default();
    let state = (
        seen.clone(),
        body(step(&f, "list 3 pods as protobuf")),
        body(step(&f, "live protobuf watch")),
    );
    let app = Router::new()
        .route("/api/v1/namespaces/fx-proto/pods", get(pods))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((format!("http://{addr}"), seen))
}

#[tokio::test]
async fn compact_lister_watcher_asks_for_protobuf_and_keeps_the_messages() -> Result<()> {
    use futures::StreamExt;
    use kcache::{
        ListerWatcher,
        lister_watcher::{ListParams, WatchParams},
    };
    use kube_core::WatchEvent;

    let (url, seen) = replay_server().await?;
    let lw = HttpListerWatcher::<Compact<Pod>>::namespaced(
        kcache_client::Client::from_url(&url)?,
        "fx-proto",
    )
    .with_decoder(CompactDecoder::new().strip_managed_fields(true));
    let list = lw.list(&ListParams::default()).await?;
    let names: Vec<_> = list
        .items
        .iter()
        .map(|c| c.metadata().name.clone().unwrap_or_default())
        .collect();
    ensure!(names == ["pb-1", "pb-2", "pb-3"], "{names:?}");
    for c in &list.items {
        ensure!(c.format() == Format::Protobuf, "{c:?}");
        ensure!(c.typed()?.metadata.managed_fields.is_none());
    }
    let events: Vec<_> = lw
        .watch(&WatchParams::default(), "1")
        .await?
        .collect()
        .await;
    let mut kinds = Vec::new();
    for e in events {
        let (kind, c) = match e? {
            WatchEvent::Added(c) => ("ADDED", c),
            WatchEvent::Modified(c) => ("MODIFIED", c),
            WatchEvent::Deleted(c) => ("DELETED", c),
            other => bail!("unexpected {other:?}"),
        };
        ensure!(c.format() == Format::Protobuf, "{c:?}");
        kinds.push(kind);
    }
    ensure!(
        kinds == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"],
        "{kinds:?}"
    );
    let seen = seen.lock().unwrap().clone();
    ensure!(
        seen == [
            kcache_client::protobuf::ACCEPT_LIST,
            kcache_client::protobuf::ACCEPT_WATCH
        ],
        "{seen:?}"
    );
    Ok(())
}

/// A guard against a hung reflector; not a performance assertion.
const HANG_GUARD: Duration = Duration::from_secs(90);

fn pods_path(s: &TestServer) -> String {
    format!("/api/v1/namespaces/{}/pods", s.ns)
}

async fn create_pod(s: &TestServer, name: &str) -> Result<()> {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "compact"}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}});
    s.request("POST", &pods_path(s), Some(pod)).await?;
    Ok(())
}

/// The server's Pods as JSON (the twin of what the reflector holds).
async fn server_pods(s: &TestServer) -> Result<BTreeMap<ObjectKey, Pod>> {
    let list = s.request("GET", &pods_path(s), None).await?;
    let items: Vec<Pod> = serde_json::from_value(list["items"].clone())?;
    Ok(items
        .into_iter()
        .map(|p| {
            let key = ObjectKey::new(
                p.metadata.namespace.as_deref(),
                p.metadata.name.as_deref().unwrap_or_default(),
            );
            (key, p)
        })
        .collect())
}

/// Waits until the store holds exactly the server's Pods at their RVs.
async fn converge(s: &TestServer, store: &RecordingStore<Compact<Pod>>) -> Result<()> {
    let want: BTreeMap<ObjectKey, String> = server_pods(s)
        .await?
        .into_iter()
        .map(|(k, p)| (k, p.metadata.resource_version.unwrap_or_default()))
        .collect();
    tokio::time::timeout(HANG_GUARD, async {
        loop {
            let seen = store.ops().len();
            if store.snapshot() == want {
                return;
            }
            store.wait_for(|ops| ops.len() > seen).await;
        }
    })
    .await
    .with_context(|| {
        format!(
            "{}: store {:?} != server {want:?}",
            s.name,
            store.snapshot()
        )
    })
}

/// A compact (managedFields stripped) reflector of Pods through list, watch (add, update,
/// delete): converges, holds `format` objects, and their typed views are the server's JSON.
async fn compact_reflector_round(s: &TestServer, format: Format) -> Result<()> {
    create_pod(s, "a").await?;
    create_pod(s, "b").await?;
    let lw = HttpListerWatcher::<Compact<Pod>>::namespaced(s.client.clone(), &s.ns)
        .with_decoder(CompactDecoder::new().strip_managed_fields(true));
    let store = Arc::new(RecordingStore::<Compact<Pod>>::new());
    let cancel = CancellationToken::new();
    let task =
        tokio::spawn(Reflector::new(lw, store.clone(), Config::default()).run(cancel.clone()));
    converge(s, &store).await?;

    // Through the watch: an add, an update, a delete.
    create_pod(s, "c").await?;
    let path = format!("{}/a", pods_path(s));
    let mut a = s.request("GET", &path, None).await?;
    a["metadata"]["labels"]["step"] = json!("updated");
    s.request("PUT", &path, Some(a)).await?;
    s.request(
        "DELETE",
        &format!("{}/b?gracePeriodSeconds=0", pods_path(s)),
        None,
    )
    .await?;
    converge(s, &store).await?;

    let server = server_pods(s).await?;
    let held = store.objects();
    ensure!(held.len() == 2, "{}: {held:?}", s.name);
    for c in &held {
        ensure!(c.format() == format, "{}: {c:?} is not {format:?}", s.name);
        let key = ObjectKey::new(
            c.metadata().namespace.as_deref(),
            c.metadata().name.as_deref().unwrap_or_default(),
        );
        let mut expected = server
            .get(&key)
            .context("held but not on the server")?
            .clone();
        expected.metadata.managed_fields = None;
        ensure!(
            c.typed()? == expected,
            "{}: {key:?} differs from the server's JSON",
            s.name
        );
    }
    let a = held
        .iter()
        .find(|c| c.metadata().name.as_deref() == Some("a"))
        .context("a")?;
    ensure!(a.metadata().labels.as_ref().context("labels")?["step"] == "updated");
    cancel.cancel();
    task.await?;
    Ok(())
}

#[tokio::test]
async fn compact_pod_reflector_travels_protobuf_against_the_upstream_server_and_converges()
-> Result<()> {
    // Upstream-only: without the upstream server this test fails (never a silent pass),
    // unless KCACHE_UPSTREAM=skip skips it on purpose, saying so.
    let Some(s) = TestServer::upstream().await? else {
        return common::upstream_missing();
    };
    compact_reflector_round(&s, Format::Protobuf).await
}

#[tokio::test]
async fn compact_pod_reflector_travels_protobuf_against_the_embedded_server_and_converges()
-> Result<()> {
    let s = TestServer::embedded().await?;
    compact_reflector_round(&s, Format::Protobuf).await
}
