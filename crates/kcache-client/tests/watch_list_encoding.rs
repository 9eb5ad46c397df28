//! How the upstream kube-apiserver encodes a streaming list (`sendInitialEvents=true`), on
//! whichever release `scripts/kube-up.sh` started (`scripts/compat.sh` runs this on each).
//!
//! kcache-client asks for gzip on streaming lists only. kube-apiserver 1.37 compresses them
//! (the `WatchListCompression` gate, beta and on by default from 1.37; `k8s.io/apiserver`
//! `pkg/endpoints/handlers/watch.go`); 1.34 to 1.36 have no such gate and answer
//! uncompressed; an ordinary watch is uncompressed on every release. That difference is what
//! `InitialList::Auto` decides on (it streams from 1.37), so it is checked on the real server
//! rather than assumed: the encoding the server chose, and that the stream decodes to every
//! object either way.
//!
//! Upstream only: fails without `KCACHE_UPSTREAM_*` unless `KCACHE_UPSTREAM=skip`.

#[path = "common/mod.rs"]
mod common;

use std::sync::{Arc, Mutex};

use anyhow::{Context as _, Result, ensure};
use common::TestServer;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache::{
    ListerWatcher as _,
    lister_watcher::{INITIAL_EVENTS_END_ANNOTATION, WatchEvent, WatchParams},
    reflector::FIRST_COMPRESSED_WATCH_LIST_MINOR,
};
use kcache_client::{Client, HttpListerWatcher};

/// A client on the upstream server that records the `Content-Encoding` of every response
/// (`identity` when absent).
async fn observed_client(s: &TestServer) -> Result<(Client, Arc<Mutex<Vec<String>>>)> {
    let up = s.upstream_info().context("upstream")?;
    let kubeconfig = kube_client::config::Kubeconfig::read_from(&up.kubeconfig)?;
    let config =
        kube_client::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = Arc::clone(&seen);
    let client = Client::from_config_observed(
        config,
        Arc::new(move |_status, headers| {
            let enc = headers
                .get(http::header::CONTENT_ENCODING)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("identity");
            record.lock().unwrap().push(enc.to_owned());
        }),
    )?;
    Ok((client, seen))
}

/// Opens a watch with `params` and reads it up to the initial-events-end bookmark (streaming
/// list) or for a moment (plain watch); returns the names of the objects it added.
async fn added_names(
    lw: &HttpListerWatcher<ConfigMap>,
    params: &WatchParams,
    resource_version: &str,
) -> Result<Vec<String>> {
    let mut stream = lw.watch(params, resource_version).await?;
    let mut names = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next()).await;
        match next {
            Ok(Some(Ok(WatchEvent::Added(cm)))) => names.push(cm.metadata.name.unwrap_or_default()),
            Ok(Some(Ok(WatchEvent::Bookmark(b))))
                if b.metadata
                    .annotations
                    .contains_key(INITIAL_EVENTS_END_ANNOTATION) =>
            {
                return Ok(names);
            }
            Ok(Some(Ok(WatchEvent::Error(e)))) => anyhow::bail!("watch error event: {e:?}"),
            Ok(Some(Ok(_))) => {}
            Ok(Some(Err(e))) => return Err(e).context("watch stream"),
            Ok(None) if !params.send_initial_events => return Ok(names),
            Ok(None) => anyhow::bail!("the streaming list ended before its end bookmark"),
            Err(_) if !params.send_initial_events => return Ok(names),
            Err(_) => anyhow::bail!("no initial-events-end bookmark within 30 s"),
        }
    }
}

#[tokio::test]
async fn a_streaming_list_is_gzip_from_kube_apiserver_1_37_and_plain_before() -> Result<()> {
    let Some(s) = TestServer::upstream().await? else {
        return common::upstream_missing();
    };
    let (client, seen) = observed_client(&s).await?;
    let version = client.server_version().await.context("/version")?;
    let built = std::env::var("KCACHE_UPSTREAM_VERSION").unwrap_or_default();
    ensure!(
        built.starts_with(&format!("v{version}.")),
        "upstream /version says {version}, the harness built {built}"
    );
    let mut created = Vec::new();
    for i in 0..5 {
        let name = format!("enc-{i}");
        let cm = s
            .create_cm(&name, serde_json::json!({}), serde_json::json!({"k": "v"}))
            .await?;
        created.push((name, cm));
    }
    let want: Vec<String> = created.iter().map(|(n, _)| n.clone()).collect();
    let lw = HttpListerWatcher::<ConfigMap>::namespaced(client, &s.ns);

    let before = seen.lock().unwrap().len();
    let mut names = added_names(&lw, &WatchParams::streaming_lists(), "").await?;
    names.sort();
    ensure!(
        names == want,
        "{version}: the streaming list added {names:?}"
    );
    let streamed: Vec<String> = seen.lock().unwrap()[before..].to_vec();
    let compressed = version.major == 1 && version.minor >= FIRST_COMPRESSED_WATCH_LIST_MINOR;
    let want_encoding = if compressed { "gzip" } else { "identity" };
    ensure!(
        streamed == [want_encoding],
        "kube-apiserver {built}: the streaming list's Content-Encoding was {streamed:?}, \
         expected {want_encoding}"
    );

    // An ordinary watch (from the last object's resourceVersion) stays uncompressed everywhere.
    let last_rv = created
        .last()
        .and_then(|(_, cm)| cm.pointer("/metadata/resourceVersion"))
        .and_then(serde_json::Value::as_str)
        .context("created object without resourceVersion")?
        .to_owned();
    let before = seen.lock().unwrap().len();
    let params = WatchParams::default().timeout(1);
    added_names(&lw, &params, &last_rv).await?;
    let watched: Vec<String> = seen.lock().unwrap()[before..].to_vec();
    ensure!(
        watched == ["identity"],
        "kube-apiserver {built}: a plain watch's Content-Encoding was {watched:?}"
    );
    Ok(())
}
