//! TestEnv end to end: CRDs from Rust types and manifest directories Established and served,
//! both clients over plain HTTP and HTTPS, the kubeconfig for other processes, the garbage
//! collector switch, a clean stop; and its start time (printed, not asserted).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_testenv::TestEnv;
use kube::{CustomResource, CustomResourceExt};
use kube_client::Api;
use kube_client::api::{DeleteParams, ObjectMeta, PostParams};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A custom resource with a generated schema.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "testenv.kcache.dev",
    version = "v1",
    kind = "Gadget",
    namespaced
)]
struct GadgetSpec {
    size: i32,
}

fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn a_rust_types_crd_is_established_and_served_to_both_clients() -> anyhow::Result<()> {
    let env = TestEnv::start(kcache_testenv::Config::default().crd::<Gadget>()?).await?;
    let crd = env.handle().get(&format!(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{}",
        Gadget::crd_name()
    ));
    let crd = crd.map_err(|e| anyhow::anyhow!("{e}"))?;
    let established = crd["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == "True");
    assert!(established, "{crd}");
    let gadgets: Api<Gadget> = Api::namespaced(env.kube_client(), "default");
    let g = Gadget::new("g", GadgetSpec { size: 3 });
    let created = gadgets.create(&PostParams::default(), &g).await?;
    assert_eq!(created.spec.size, 3);
    // The kcache client reaches the same server (its kube-rs transport).
    let via_kcache: Api<Gadget> = Api::namespaced(env.client().kube().clone(), "default");
    assert_eq!(via_kcache.get("g").await?.spec.size, 3);
    env.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_manifest_directory_is_loaded_crds_first() -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("kcache-testenv-manifests-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let crd = serde_json::to_value(Gadget::crd())?;
    std::fs::write(dir.join("b-crd.json"), serde_json::to_vec(&crd)?)?;
    std::fs::write(
        dir.join("a-objects.yaml"),
        "apiVersion: testenv.kcache.dev/v1\nkind: Gadget\nmetadata:\n  name: from-yaml\n  namespace: team\nspec:\n  size: 7\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n",
    )?;
    let env = TestEnv::start(kcache_testenv::Config::default().manifests(&dir)).await;
    std::fs::remove_dir_all(&dir)?;
    let env = env?;
    let gadgets: Api<Gadget> = Api::namespaced(env.kube_client(), "team");
    assert_eq!(gadgets.get("from-yaml").await?.spec.size, 7);
    Ok(())
}

#[tokio::test]
async fn the_kubeconfig_serves_other_clients_over_https_and_goes_with_the_env() -> anyhow::Result<()>
{
    let env = TestEnv::start(
        kcache_testenv::Config::default()
            .https(true)
            .namespace("extra"),
    )
    .await?;
    assert!(env.url().starts_with("https://"), "{}", env.url());
    let path = env.kubeconfig_path().to_owned();
    // Another client, built from the file alone, verifies the server with the CA in it.
    let other = kcache_client::Client::from_kubeconfig(&path).await?;
    let cms: Api<ConfigMap> = Api::namespaced(other.kube().clone(), "extra");
    cms.create(&PostParams::default(), &config_map("c")).await?;
    let mine: Api<ConfigMap> = Api::namespaced(env.kube_client(), "extra");
    assert!(mine.get("c").await?.metadata.uid.is_some());
    let addr = env.server().addr();
    drop(env);
    assert!(!path.exists(), "{} left behind", path.display());
    // Stopped: nothing accepts connections there any more.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    Ok(())
}

#[tokio::test]
async fn the_garbage_collector_is_on_unless_turned_off() -> anyhow::Result<()> {
    for gc in [true, false] {
        let env = TestEnv::start(kcache_testenv::Config::default().garbage_collector(gc)).await?;
        let cms: Api<ConfigMap> = Api::namespaced(env.kube_client(), "default");
        let owner = cms
            .create(&PostParams::default(), &config_map("owner"))
            .await?;
        let mut dep = config_map("dep");
        dep.metadata.owner_references = Some(vec![serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
            "uid": owner.metadata.uid.clone().unwrap_or_default()}))?]);
        cms.create(&PostParams::default(), &dep).await?;
        cms.delete("owner", &DeleteParams::default()).await?;
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut collected = false;
        while Instant::now() < deadline {
            if cms.get_opt("dep").await?.is_none() {
                collected = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(collected, gc, "garbage collector {gc}");
        env.stop().await;
    }
    Ok(())
}

/// TestEnv's start time: the median of 20 starts (server, one CRD Established, both clients,
/// kubeconfig written), then stop. Printed for the record; no timing assertion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_time_median_of_20() -> anyhow::Result<()> {
    let mut times = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let env = TestEnv::start(kcache_testenv::Config::default().crd::<Gadget>()?).await?;
        times.push(t.elapsed());
        env.stop().await;
    }
    report("TestEnv start (one CRD, both clients, kubeconfig)", times);
    // Its parts: the bare server, and the clients built from a kubeconfig (the kcache client,
    // whose kube-rs client TestEnv hands out too).
    let mut server_times = Vec::new();
    let mut client_times = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let server = kcache_apiserver::ApiServer::builder()
            .build()
            .start()
            .await?;
        server_times.push(t.elapsed());
        let t = Instant::now();
        let kc = kube_client::config::Kubeconfig::from_yaml(&server.kubeconfig())?;
        let config = kube_client::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
        let _kcache = kcache_client::Client::from_config(config)?;
        client_times.push(t.elapsed());
        server.shutdown().await;
    }
    report("  of which the embedded server's start", server_times);
    report("  of which building the clients", client_times);
    Ok(())
}

fn report(what: &str, mut times: Vec<Duration>) {
    times.sort();
    println!(
        "{what}: median {:?}, min {:?}, max {:?} over {} runs",
        times[times.len() / 2],
        times[0],
        times[times.len() - 1],
        times.len()
    );
}

#[tokio::test]
async fn added_users_may_do_what_rbac_grants_them() -> Result<(), Box<dyn std::error::Error>> {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};

    let env = TestEnv::start(kcache_testenv::Config::default()).await?;
    let alice = env.add_user("alice", ["dev"]).await?;
    assert_eq!(alice.groups(), ["dev", "system:authenticated"]);
    let cms: Api<ConfigMap> = Api::namespaced(alice.kube_client(), "default");
    let err = cms.list(&Default::default()).await.unwrap_err();
    assert!(
        err.to_string().contains(
            "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
        ),
        "{err}"
    );
    // The admin grants the group `dev` reading configmaps in `default`.
    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "cm-reader"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}))?;
    Api::<Role>::namespaced(env.kube_client(), "default")
        .create(&Default::default(), &role)
        .await?;
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "dev-cm-reader"},
        "subjects": [{"kind": "Group", "name": "dev", "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "Role", "name": "cm-reader", "apiGroup": "rbac.authorization.k8s.io"}}))?;
    Api::<RoleBinding>::namespaced(env.kube_client(), "default")
        .create(&Default::default(), &binding)
        .await?;
    assert!(cms.list(&Default::default()).await.is_ok());
    let other: Api<ConfigMap> = Api::namespaced(alice.kube_client(), "kube-system");
    assert!(other.list(&Default::default()).await.is_err());
    assert!(alice.kubeconfig_path().exists());
    env.stop().await;

    // Authorization off: every authenticated user may do everything.
    let open = TestEnv::start(kcache_testenv::Config::default().authorization(false)).await?;
    let bob = open.add_user("bob", Vec::<String>::new()).await?;
    let cms: Api<ConfigMap> = Api::namespaced(bob.kube_client(), "kube-system");
    assert!(cms.list(&Default::default()).await.is_ok());
    open.stop().await;
    Ok(())
}
