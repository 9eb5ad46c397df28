//! Each failure a user can hit is one sentence they can act on, and never shows a credential.

mod common;

use anyhow::{Context, Result, ensure};
use common::TestServer;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcache::{ListerWatcher, lister_watcher::ListParams};
use kcache_apiserver::ApiServer;
use kcache_client::{Client, Error, HttpListerWatcher};
use kube_core::{DynamicObject, GroupVersionKind, discovery::ApiResource};

const SECRET: &str = "s3cr3t-t0ken-value";

#[tokio::test]
async fn missing_kubeconfig_names_the_file_and_the_fix() -> Result<()> {
    let err = Client::from_kubeconfig("/nonexistent/kcache/kubeconfig")
        .await
        .unwrap_err();
    let msg = err.to_string();
    ensure!(matches!(err, Error::UnreadableKubeconfig { .. }), "{err:?}");
    ensure!(
        msg.contains("/nonexistent/kcache/kubeconfig") && msg.contains("KUBECONFIG"),
        "{msg}"
    );
    Ok(())
}

#[tokio::test]
async fn invalid_kubeconfig_is_reported_without_its_secrets() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("kcache-bad-kubeconfig-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    for (i, body) in [
        // Not YAML at all.
        format!("token: [\"{SECRET}\"\n  - : :"),
        // YAML of the wrong shape: the token sits where a list is expected.
        format!("apiVersion: v1\nkind: Config\nusers: \"{SECRET}\"\n"),
        // A context pointing to nothing.
        format!("apiVersion: v1\nkind: Config\ncurrent-context: nope\nusers:\n- name: u\n  user:\n    token: {SECRET}\n"),
    ]
    .iter()
    .enumerate()
    {
        let path = dir.join(format!("config-{i}"));
        std::fs::write(&path, body)?;
        let err = Client::from_kubeconfig(&path).await.unwrap_err();
        let msg = err.to_string();
        ensure!(!msg.contains(SECRET), "secret leaked: {msg}");
        ensure!(!format!("{err:?}").contains(SECRET), "secret leaked in Debug: {err:?}");
        ensure!(msg.contains("kubeconfig"), "{msg}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::test]
async fn unreachable_server_says_connection_refused_and_where() -> Result<()> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    drop(listener);
    let client = Client::from_url(&format!("http://{addr}"))?;
    let err = HttpListerWatcher::<ConfigMap>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap_err();
    ensure!(err.is_transport(), "{err}");
    let msg = err.to_string();
    ensure!(
        msg.contains("connection refused") && msg.contains(&addr.to_string()),
        "{msg}"
    );
    Ok(())
}

#[tokio::test]
async fn unauthorized_401_says_to_check_the_credentials() -> Result<()> {
    // Without anonymous auth a request without credentials is a 401, as kube-apiserver's
    // `--anonymous-auth=false` (with it on, the anonymous user gets RBAC's 403).
    let server = ApiServer::builder()
        .token(SECRET)
        .anonymous_auth(false)
        .build()
        .start()
        .await?;
    let client = Client::from_url(&server.url())?;
    let err = HttpListerWatcher::<ConfigMap>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap_err();
    ensure!(err.code() == Some(401), "{err}");
    let msg = err.to_string();
    ensure!(
        msg.contains("credentials") && !msg.contains(SECRET),
        "{msg}"
    );
    Ok(())
}

#[tokio::test]
async fn unknown_resource_404_names_the_resource() -> Result<()> {
    for s in TestServer::all().await? {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("nope.example.com", "v1", "Widget"),
            "widgets",
        );
        let err = HttpListerWatcher::<DynamicObject>::all_with(s.client.clone(), &resource)
            .list(&ListParams::default())
            .await
            .unwrap_err();
        ensure!(err.code() == Some(404), "{}: {err}", s.name);
        ensure!(err.to_string().contains("widgets"), "{}: {err}", s.name);
        // Discovery says the same in its own words.
        let gvk = GroupVersionKind::gvk("nope.example.com", "v1", "Widget");
        let derr = kcache_client::dynamic::discover(&s.client, &gvk)
            .await
            .unwrap_err();
        ensure!(
            matches!(derr, Error::UnknownResource(_)),
            "{}: {derr:?}",
            s.name
        );
        ensure!(derr.to_string().contains("Widget"), "{derr}");
    }
    Ok(())
}

#[tokio::test]
async fn forbidden_403_names_the_verb_and_the_resource() -> Result<()> {
    // Needs an authenticated user without RBAC bindings: the upstream server's alice.
    let Some(up) = common::upstream_env()? else {
        return common::upstream_missing();
    };
    let alice = up
        .alice_kubeconfig
        .context("KCACHE_UPSTREAM_ALICE_KUBECONFIG")?;
    let client = Client::from_kubeconfig(&alice).await?;
    let err = HttpListerWatcher::<Secret>::namespaced(client, "default")
        .list(&ListParams::default())
        .await
        .unwrap_err();
    ensure!(err.code() == Some(403), "{err}");
    let msg = err.to_string();
    ensure!(msg.contains("list") && msg.contains("secrets"), "{msg}");
    Ok(())
}

#[tokio::test]
async fn tls_failure_names_the_certificate_problem() -> Result<()> {
    // The upstream server's certificate is signed by its own CA: a client that does not know
    // that CA must refuse it (verification is on) and say why.
    let Some(up) = common::upstream_env()? else {
        return common::upstream_missing();
    };
    ensure!(
        up.url.starts_with("https://"),
        "KCACHE_UPSTREAM_URL {}",
        up.url
    );
    let client = Client::from_url(&up.url)?;
    let err = HttpListerWatcher::<ConfigMap>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap_err();
    ensure!(err.is_transport(), "{err}");
    let msg = err.to_string();
    ensure!(msg.contains("TLS") && msg.contains("certificate"), "{msg}");
    Ok(())
}
