//! Admission webhook configurations (admissionregistration.k8s.io/v1): their defaults and
//! validation.

use serde_json::{Value, json};

use crate::script::Script;

/// `/apis/admissionregistration.k8s.io/v1/{plural}`.
pub(crate) fn configs(plural: &str) -> String {
    format!("/apis/admissionregistration.k8s.io/v1/{plural}")
}

/// One webhook calling `url` for `operations` on ConfigMaps.
pub(crate) fn hook(name: &str, url: &str, operations: &[&str]) -> Value {
    json!({"name": name, "clientConfig": {"url": url},
        "rules": [{"operations": operations, "apiGroups": [""], "apiVersions": ["v1"],
            "resources": ["configmaps"]}],
        "sideEffects": "None", "admissionReviewVersions": ["v1"]})
}

/// A configuration of `kind` named `name` holding `hooks`.
pub(crate) fn config(kind: &str, name: &str, hooks: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": name}, "webhooks": hooks})
}

pub(crate) async fn webhook_configuration_defaults_and_validation(
    s: &mut Script<'_>,
) -> anyhow::Result<()> {
    let url = "https://127.0.0.1:9/unused";
    for (kind, plural) in [
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
        (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        ),
    ] {
        let name = format!("{}-defaults", s.ns);
        // Never called: no rule matches anything this scenario writes.
        let mut h = hook("d.example.com", url, &["CONNECT"]);
        h["rules"][0]["resources"] = json!(["nosuchthings"]);
        let r = s
            .req(
                &format!("create {kind}"),
                "POST",
                &configs(plural),
                Some(config(kind, &name, json!([h]))),
            )
            .await?;
        for f in [
            "failurePolicy",
            "matchPolicy",
            "namespaceSelector",
            "objectSelector",
            "timeoutSeconds",
            "reinvocationPolicy",
            "rules/0/scope",
            "sideEffects",
        ] {
            s.field(f, &r.body, &format!("/webhooks/0/{f}"));
        }
        s.req("get", "GET", &format!("{}/{name}", configs(plural)), None)
            .await?;
        let bad = json!([
            {"name": "short", "clientConfig": {"url": "http://127.0.0.1/x?a=b"},
             "rules": [{"operations": ["CREATE", "*"], "apiGroups": [], "apiVersions": ["v1"],
                        "resources": ["*", "pods"], "scope": "Somewhere"}],
             "timeoutSeconds": 31, "failurePolicy": "Maybe", "admissionReviewVersions": []},
            {"name": "a.b.c", "clientConfig": {}, "sideEffects": "Some",
             "admissionReviewVersions": ["v2"]},
            {"name": "a.b.c", "clientConfig": {"service": {"name": "", "namespace": "n", "port": 0}},
             "sideEffects": "None", "admissionReviewVersions": ["v1", "v1"]}
        ]);
        s.req(
            "create invalid",
            "POST",
            &configs(plural),
            Some(config(kind, &format!("{}-bad", s.ns), bad)),
        )
        .await?;
        s.req(
            "update to a timeout of 0",
            "PATCH",
            &format!("{}/{name}", configs(plural)),
            Some(
                json!({"webhooks": [{"name": "d.example.com", "timeoutSeconds": 0,
                "clientConfig": {"url": url}, "sideEffects": "None",
                "admissionReviewVersions": ["v1"]}]}),
            ),
        )
        .await?;
        s.req(
            "delete",
            "DELETE",
            &format!("{}/{name}", configs(plural)),
            None,
        )
        .await?;
    }
    Ok(())
}
