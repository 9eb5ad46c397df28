//! Admission webhooks in the test environment: a Rust function served by `WebhookServer`,
//! registered with `install_webhook` or a configuration naming a Service, called by the
//! embedded server for kube-rs writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_testenv::{TestEnv, Webhook, WebhookServer};
use kube_client::Api;
use kube_client::api::{ObjectMeta, PostParams};
use kube_core::admission::AdmissionResponse;
use serde_json::json;

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
async fn a_validating_webhook_denies_with_its_message() -> anyhow::Result<()> {
    let env = TestEnv::start(kcache_testenv::Config::default()).await?;
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let hook = WebhookServer::start(move |req| {
        seen.fetch_add(1, Ordering::SeqCst);
        let res = AdmissionResponse::from(req);
        if req.name == "forbidden" {
            res.deny("not this one")
        } else {
            res
        }
    })
    .await?;
    let deny = Webhook::validating("deny.example.com")
        .operations(["CREATE"])
        .resources(["configmaps"]);
    env.install_webhook(&hook, &deny)?;
    let cms: Api<ConfigMap> = Api::namespaced(env.kube_client(), "default");
    cms.create(&PostParams::default(), &config_map("fine"))
        .await?;
    let err = cms
        .create(&PostParams::default(), &config_map("forbidden"))
        .await
        .expect_err("the webhook denies it");
    assert!(
        err.to_string()
            .contains("admission webhook \"deny.example.com\" denied the request: not this one"),
        "{err}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert!(cms.get_opt("forbidden").await?.is_none());
    env.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_mutating_webhook_patches_through_a_service_reference() -> anyhow::Result<()> {
    let env = TestEnv::start(kcache_testenv::Config::default()).await?;
    let hook = WebhookServer::start_with_names(&["hook.default.svc"], |req| {
        let op = format!("{:?}", req.operation);
        let patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "add", "path": "/metadata/annotations", "value": {"hooked": op}}]))
        .unwrap_or_else(|_| json_patch::Patch(Vec::new()));
        AdmissionResponse::from(req)
            .with_patch(patch)
            .unwrap_or_else(|e| AdmissionResponse::invalid(e.to_string()))
    })
    .await?;
    let h = env.handle();
    h.create(
        "/api/v1/namespaces/default/services",
        json!({"metadata": {"name": "hook"},
               "spec": {"ports": [{"port": 443, "targetPort": hook.port()}]}}),
    )?;
    let ca = hook.client_config("/")["caBundle"].clone();
    let cfg = json!({"metadata": {"name": "svc"}, "webhooks": [{"name": "svc.example.com",
        "clientConfig": {"service": {"name": "hook", "namespace": "default", "path": "/mutate"},
                         "caBundle": ca},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["configmaps"]}],
        "sideEffects": "None", "admissionReviewVersions": ["v1"]}]});
    h.create(
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        cfg,
    )?;
    let cms: Api<ConfigMap> = Api::namespaced(env.kube_client(), "default");
    let made = cms.create(&PostParams::default(), &config_map("a")).await?;
    let annotations = made.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations.get("hooked").map(String::as_str),
        Some("Create")
    );

    // The Service gone, the call fails and failurePolicy Fail refuses the write.
    h.delete("/api/v1/namespaces/default/services/hook")?;
    let err = cms
        .create(&PostParams::default(), &config_map("b"))
        .await
        .expect_err("the webhook cannot be called");
    assert!(
        err.to_string()
            .contains("failed calling webhook \"svc.example.com\""),
        "{err}"
    );
    env.stop().await;
    Ok(())
}
