//! The kube-runtime operator on kcache's embedded API server (`kcache_testenv::TestEnv`, the
//! CRD from the Rust type): a Website gets its ConfigMap and Deployment (owned), the
//! finalizer, its status and one `Created` Event; the Deployment's readiness reaches the
//! status through `owns`; deleting the Website runs the cleanup; shutdown releases the lease.
//! A standby (the lease held by another replica) reconciles nothing; once that lease has
//! expired the operator takes it over (kube-lease-manager releases it with a strategic merge
//! patch of nulls, then applies its hold) and reconciles.

#[allow(dead_code, reason = "the operator's main and CLI are not used here")]
#[path = "../src/main.rs"]
mod operator;

use std::{net::SocketAddr, time::Duration};

use anyhow::{Context as _, Result, anyhow};
use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kcache_apiserver::ServerHandle;
use kcache_testenv::TestEnv;
use kube::{Api, api::PostParams};
use operator::{FINALIZER, Website, WebsiteSpec};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
    task::JoinHandle,
};
use tokio_util::sync::CancellationToken;

const NS: &str = "mon";
const WEBSITES: &str = "/apis/demo.kcache.dev/v1/namespaces/mon/websites";
const SITE: &str = "/apis/demo.kcache.dev/v1/namespaces/mon/websites/web";
const DEPLOYMENT: &str = "/apis/apps/v1/namespaces/mon/deployments/web";
const PAGE: &str = "/api/v1/namespaces/mon/configmaps/web";
const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/mon/leases/website-operator";

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

/// The embedded server with the namespace and the Website CRD.
async fn env() -> Result<TestEnv> {
    let env = TestEnv::start(kcache_testenv::Config::default().namespace(NS)).await?;
    env.install::<Website>().await?;
    Ok(env)
}

/// The operator running with client-go's 15 s lease: its metrics address and shutdown.
async fn start(env: &TestEnv) -> Result<(SocketAddr, CancellationToken, JoinHandle<Result<()>>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let run = operator::run(env.kube_client(), NS, listener, 15, shutdown.clone());
    Ok((addr, shutdown, tokio::spawn(run)))
}

fn create_website(h: &ServerHandle) -> Result<()> {
    let spec = WebsiteSpec {
        image: "nginx:1.27".into(),
        replicas: 2,
        content: "<h1>hi</h1>".into(),
    };
    let site = serde_json::to_value(Website::new("web", spec))?;
    h.create(WEBSITES, site).map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

fn metric(text: &str, prefix: &str) -> Result<f64> {
    let line = text
        .lines()
        .find(|l| l.starts_with(prefix))
        .with_context(|| format!("no {prefix} in:\n{text}"))?;
    Ok(line.rsplit(' ').next().unwrap_or_default().parse()?)
}

fn owner_of(object: &Value) -> (&Value, &Value, &Value) {
    let owner = &object["metadata"]["ownerReferences"][0];
    (&owner["kind"], &owner["name"], &owner["controller"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_creates_reports_and_cleans_up_a_website() -> Result<()> {
    let env = env().await?;
    let (addr, shutdown, run) = start(&env).await?;
    let h = env.handle().clone();
    create_website(&h)?;

    // Owned objects, the finalizer and the status.
    eventually("the website's status", || {
        object(&h, SITE).is_some_and(|s| s["status"]["observedGeneration"] == 1)
    })
    .await?;
    let site = object(&h, SITE).context("the website")?;
    assert_eq!(site["metadata"]["finalizers"], json!([FINALIZER]), "{site}");
    assert_eq!(site["status"]["readyReplicas"], 0, "{site}");
    let ours = (&json!("Website"), &json!("web"), &json!(true));
    let deployment = object(&h, DEPLOYMENT).context("the deployment")?;
    assert_eq!(owner_of(&deployment), ours, "{deployment}");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let page = object(&h, PAGE).context("the page")?;
    assert_eq!(owner_of(&page), ours, "{page}");
    assert_eq!(page["data"]["index.html"], "<h1>hi</h1>");

    // No kubelet here: the test makes the Deployment ready; `owns` brings it to the status.
    let mut ready = deployment.clone();
    ready["status"] = json!({"replicas": 2, "readyReplicas": 2});
    h.update(&format!("{DEPLOYMENT}/status"), ready)
        .map_err(|e| anyhow!("{e}"))?;
    eventually("readyReplicas 2 in the website's status", || {
        object(&h, SITE).is_some_and(|s| s["status"]["readyReplicas"] == 2)
    })
    .await?;

    // Several reconciles ran: one Created Event, never repeated (the recorder would have
    // turned a repeat into a series on the same Event).
    let created = events(&h, "Created");
    assert_eq!(created.len(), 1, "{created:?}");
    assert_eq!(created[0]["series"], Value::Null, "{created:?}");
    assert_eq!(created[0]["reportingController"], "website-operator");
    assert_eq!(created[0]["regarding"]["kind"], "Website");

    for probe in ["/healthz", "/readyz"] {
        let (code, body) = get(addr, probe).await?;
        assert_eq!(code, 200, "{probe}: {body}");
    }
    let (code, text) = get(addr, "/metrics").await?;
    assert_eq!(code, 200);
    let successes = r#"controller_runtime_reconcile_total{result="success"}"#;
    assert!(metric(&text, successes)? >= 2.0, "{text}");
    metric(&text, "controller_runtime_reconcile_time_seconds_count")?;
    metric(&text, "controller_runtime_reconcile_errors_total")?;
    assert_eq!(metric(&text, "leader_election_master_status")?, 1.0);
    let lease = object(&h, LEASE).context("the lease")?;
    assert!(lease["spec"]["holderIdentity"].is_string(), "{lease}");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 15, "{lease}");

    // Deletion: the cleanup deletes the Deployment and the ConfigMap, the finalizer goes,
    // and so does the Website.
    h.delete(SITE).map_err(|e| anyhow!("{e}"))?;
    eventually("the website gone", || object(&h, SITE).is_none()).await?;
    assert!(object(&h, DEPLOYMENT).is_none());
    assert!(object(&h, PAGE).is_none());
    assert_eq!(events(&h, "Deleted").len(), 1);

    // Shutdown: the operator ends without error and releases the lease.
    shutdown.cancel();
    tokio::time::timeout(HANG_GUARD, run).await???;
    let lease = object(&h, LEASE).context("the lease")?;
    assert!(lease["spec"]["holderIdentity"].is_null(), "{lease}");
    env.stop().await;
    Ok(())
}

/// Creates the operator's Lease, held by "another-replica" for 15 s from `renewed`.
async fn another_replica_holds_the_lease(env: &TestEnv, renewed: Timestamp) -> Result<()> {
    let lease = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some("website-operator".into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("another-replica".into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(renewed)),
            ..Default::default()
        }),
    };
    let leases: Api<Lease> = Api::namespaced(env.kube_client(), NS);
    leases.create(&PostParams::default(), &lease).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_reconciles_nothing() -> Result<()> {
    let env = env().await?;
    let h = env.handle().clone();
    // Another replica holds the lease (renewed now, for 15 s) when the operator starts.
    another_replica_holds_the_lease(&env, Timestamp::now()).await?;
    let (addr, shutdown, run) = start(&env).await?;
    create_website(&h)?;

    // Well before the other replica's lease expires: nothing reconciled.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let site = object(&h, SITE).context("the website")?;
    assert!(site["metadata"]["finalizers"].is_null(), "{site}");
    assert!(site["status"].is_null(), "{site}");
    assert!(object(&h, PAGE).is_none());
    assert!(object(&h, DEPLOYMENT).is_none());
    let (code, text) = get(addr, "/metrics").await?;
    assert_eq!(code, 200);
    assert_eq!(metric(&text, "leader_election_master_status")?, 0.0);
    assert!(
        metric(&text, "controller_runtime_reconcile_total").is_err(),
        "{text}"
    );
    let (code, body) = get(addr, "/readyz").await?;
    assert_eq!(code, 200, "a standby is ready: {body}");

    // Shutdown of the standby: it ends without error and leaves the other replica's lease.
    shutdown.cancel();
    tokio::time::timeout(HANG_GUARD, run).await???;
    let lease = object(&h, LEASE).context("the lease")?;
    assert_eq!(
        lease["spec"]["holderIdentity"], "another-replica",
        "{lease}"
    );
    env.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_taken_over() -> Result<()> {
    let env = env().await?;
    let h = env.handle().clone();
    // Another replica held the lease and stopped renewing it a minute ago.
    let minute_ago = Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(60);
    another_replica_holds_the_lease(&env, minute_ago).await?;
    let (addr, shutdown, run) = start(&env).await?;
    create_website(&h)?;

    // kube-lease-manager releases the expired lease (a strategic merge patch of nulls), then
    // applies its own hold; the operator then reconciles.
    eventually("the website's status after the takeover", || {
        object(&h, SITE).is_some_and(|s| s["status"]["observedGeneration"] == 1)
    })
    .await?;
    let lease = object(&h, LEASE).context("the lease")?;
    let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or_default();
    assert!(!holder.is_empty() && holder != "another-replica", "{lease}");
    let (code, text) = get(addr, "/metrics").await?;
    assert_eq!(code, 200);
    assert_eq!(metric(&text, "leader_election_master_status")?, 1.0);

    shutdown.cancel();
    tokio::time::timeout(HANG_GUARD, run).await???;
    env.stop().await;
    Ok(())
}
