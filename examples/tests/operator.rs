//! The operator example on the embedded server: a Website gets its ConfigMap and Deployment
//! (owned), a finalizer, its status and one `Created` Event however many reconciles run;
//! the Deployment's readiness reaches the status through `owns`; every family is on
//! `/metrics`; deleting the Website runs the cleanup, and it is gone. The server, the
//! namespace, the CRD (waited for until Established) and the client come from
//! `kcache_testenv::TestEnv`.

#[allow(dead_code, reason = "the example's main and CLI are not used here")]
#[path = "../operator.rs"]
mod operator;

use std::{net::SocketAddr, time::Duration};

use anyhow::{Context as _, Result, anyhow};
use kcache_apiserver::ServerHandle;
use kcache_apiserver::auth::permissions;
use kcache_testenv::TestEnv;
use operator::{FINALIZER, Website, WebsiteSpec};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

const NS: &str = "mon";

/// The RBAC manifest shipped with the example.
const RBAC: &str = include_str!("../operator-rbac.yaml");
/// Who the operator runs as (its ServiceAccount in the namespace).
const SERVICE_ACCOUNT: &str = "system:serviceaccount:mon:website-operator";

/// A fresh scratch directory.
fn tempdir() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("kcache-operator-rbac-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// A guard against a hung wait; not a performance assertion.
const HANG_GUARD: Duration = Duration::from_secs(60);

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) -> Result<()> {
    tokio::time::timeout(HANG_GUARD, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .with_context(|| format!("waiting for {what}"))
}

async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).await?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).await?;
    let (head, body) = raw.split_once("\r\n\r\n").context("an HTTP response")?;
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok());
    Ok((code.context("a status code")?, body.to_owned()))
}

/// The object at `path`, if it exists.
fn object(h: &ServerHandle, path: &str) -> Option<Value> {
    h.get(path).ok()
}

/// The Events of the namespace with this reason.
fn events(h: &ServerHandle, reason: &str) -> Vec<Value> {
    let (events, _) = h
        .list(&format!("/apis/events.k8s.io/v1/namespaces/{NS}/events"))
        .unwrap_or_default();
    events
        .into_iter()
        .filter(|e| e["reason"] == reason)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_creates_reports_and_cleans_up_a_website() -> Result<()> {
    let env = TestEnv::start(
        kcache_testenv::Config::default()
            .namespace(NS)
            .crd_value(operator::crd()),
    )
    .await?;
    let h = env.handle().clone();
    // The operator runs as its ServiceAccount, with the rights of the shipped RBAC manifest.
    let rbac_dir = tempdir()?;
    std::fs::write(rbac_dir.join("rbac.yaml"), RBAC)?;
    kcache_apiserver::manifests::load_dir(&h, &rbac_dir)?;
    std::fs::remove_dir_all(&rbac_dir)?;
    let sa = env
        .add_user(
            SERVICE_ACCOUNT,
            ["system:serviceaccounts", "system:serviceaccounts:mon"],
        )
        .await?;
    let client = kcache_client::Client::from_kubeconfig(sa.kubeconfig_path()).await?;
    let manager = operator::operator(client, NS, "127.0.0.1:0".parse()?)?;
    let addr = manager.metrics_addr().context("bound")?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));

    let spec = WebsiteSpec {
        image: "nginx:1.27".into(),
        replicas: 2,
        content: "<h1>hi</h1>".into(),
    };
    let site = serde_json::to_value(Website::new("web", spec))?;
    let websites = format!("/apis/demo.kcache.dev/v1/namespaces/{NS}/websites");
    h.create(&websites, site).map_err(|e| anyhow!("{e}"))?;
    let site_path = format!("{websites}/web");
    let deployment_path = format!("/apis/apps/v1/namespaces/{NS}/deployments/web");
    let page_path = format!("/api/v1/namespaces/{NS}/configmaps/web");

    // Owned objects, the finalizer and the status.
    eventually("the website's status", || {
        object(&h, &site_path).is_some_and(|s| s["status"]["observedGeneration"] == 1)
    })
    .await?;
    let site = object(&h, &site_path).context("the website")?;
    assert_eq!(site["metadata"]["finalizers"], json!([FINALIZER]), "{site}");
    assert_eq!(site["status"]["readyReplicas"], 0, "{site}");
    let deployment = object(&h, &deployment_path).context("the deployment")?;
    let owner = &deployment["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["kind"], &owner["name"], &owner["controller"]),
        (&json!("Website"), &json!("web"), &json!(true)),
        "{deployment}"
    );
    assert_eq!(deployment["spec"]["replicas"], 2);
    let page = object(&h, &page_path).context("the page")?;
    assert_eq!(page["data"]["index.html"], "<h1>hi</h1>");

    // No kubelet here: the test makes the Deployment ready; `owns` brings it to the status.
    let mut ready = deployment.clone();
    ready["status"] = json!({"replicas": 2, "readyReplicas": 2});
    h.update(&format!("{deployment_path}/status"), ready)
        .map_err(|e| anyhow!("{e}"))?;
    eventually("readyReplicas 2 in the website's status", || {
        object(&h, &site_path).is_some_and(|s| s["status"]["readyReplicas"] == 2)
    })
    .await?;

    // Several reconciles ran (the website, its two owned objects, the readiness): one
    // Created Event, from the operator's controller.
    let created = events(&h, "Created");
    assert_eq!(created.len(), 1, "{created:?}");
    assert_eq!(
        created[0]["reportingController"],
        "website-operator/websites"
    );
    assert_eq!(created[0]["regarding"]["kind"], "Website");

    let (code, body) = get(addr, "/readyz").await?;
    assert_eq!(code, 200, "{body}");
    let (code, text) = get(addr, "/metrics").await?;
    assert_eq!(code, 200);
    let value = |prefix: &str| -> Result<f64> {
        let line = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .with_context(|| format!("no {prefix} in:\n{text}"))?;
        Ok(line.rsplit(' ').next().unwrap_or_default().parse()?)
    };
    assert!(
        value(r#"controller_runtime_reconcile_total{controller="websites",result="success"}"#)?
            >= 2.0
    );
    assert!(value(r#"workqueue_adds_total{name="websites",controller="websites"}"#)? >= 2.0);
    value(r#"workqueue_work_duration_seconds_count{name="websites",controller="websites"}"#)?;
    let objects =
        r#"kcache_informer_objects{resource="websites",group="demo.kcache.dev",namespace="mon"}"#;
    assert_eq!(value(objects)?, 1.0);
    // The operator caches only the Deployments it labels.
    let deployments = r#"kcache_informer_objects{resource="deployments",group="apps",namespace="mon",selector="app.kubernetes.io/instance"}"#;
    assert_eq!(value(deployments)?, 1.0);
    // Stored lean, with their memory accounted.
    let bytes = r#"kcache_informer_cache_bytes{resource="deployments",group="apps",namespace="mon",selector="app.kubernetes.io/instance"}"#;
    assert!(value(bytes)? > 0.0);
    assert_eq!(
        value(r#"leader_election_master_status{name="website-operator"}"#)?,
        1.0
    );
    let applies = r#"kcache_controller_writes_total{controller="websites",verb="apply",resource="deployments"}"#;
    assert!(value(applies)? >= 2.0);
    value(r#"kcache_controller_cache_waits_total{controller="websites"}"#)?;

    // Deletion: the cleanup deletes the Deployment and the ConfigMap, the finalizer goes,
    // and so does the Website.
    h.delete(&site_path).map_err(|e| anyhow!("{e}"))?;
    eventually("the website gone", || object(&h, &site_path).is_none()).await?;
    assert!(object(&h, &deployment_path).is_none());
    assert!(object(&h, &page_path).is_none());
    assert_eq!(events(&h, "Deleted").len(), 1);
    // The last write deleted the Website: the controller waits for no write any more.
    let pending = r#"kcache_controller_pending_writes{controller="websites"} 0"#;
    tokio::time::timeout(HANG_GUARD, async {
        while !get(addr, "/metrics")
            .await
            .is_ok_and(|(_, t)| t.lines().any(|l| l == pending))
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .context("no pending write left")?;

    cancel.cancel();
    run.await??;
    // The shipped RBAC is sufficient: nothing the operator did was refused, and the
    // manifest allows all of it (the bootstrap roles aside: /version, discovery).
    let record = env.permissions();
    let did = record
        .user(SERVICE_ACCOUNT)
        .context("the operator's record")?;
    let refused: Vec<_> = did.accesses.iter().filter(|a| a.denied).collect();
    assert!(refused.is_empty(), "refused: {refused:#?}");
    let report = permissions::check(RBAC, SERVICE_ACCOUNT, did)?;
    assert!(report.missing.is_empty(), "{:#?}", report.missing);
    // And minimal: nothing granted that the operator did not use, and the Role is the one
    // written from the record.
    assert!(report.excess.is_empty(), "{:#?}", report.excess);
    let least = permissions::least_privilege(
        SERVICE_ACCOUNT,
        did,
        &permissions::Options::default().name("website-operator"),
    );
    let kinds: Vec<_> = least.iter().map(|o| o["kind"].clone()).collect();
    assert_eq!(kinds, [json!("Role"), json!("RoleBinding")]);
    let generated = permissions::check(&permissions::to_yaml(&least)?, SERVICE_ACCOUNT, did)?;
    assert!(generated.missing.is_empty() && generated.excess.is_empty());
    env.stop().await;
    Ok(())
}
