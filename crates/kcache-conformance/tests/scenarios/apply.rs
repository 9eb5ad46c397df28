//! Server-side apply scenarios: fields a manager clears, and who owns what after each
//! apply.

use serde_json::json;

use crate::script::Script;

const STRATEGIC: &str = "application/strategic-merge-patch+json";

/// kube-lease-manager's takeover of an expired Lease: replica A holds it (apply, then
/// strategic patches of `leaseTransitions` and `renewTime`), replica B clears the holder's
/// fields with a strategic patch of nulls and then applies its own holder - which must not
/// conflict: the fields A applied are gone, so A owns nothing B applies.
pub(crate) async fn server_side_apply_after_fields_cleared(
    s: &mut Script<'_>,
) -> anyhow::Result<()> {
    let leases = s
        .core("leases")
        .replace("/api/v1/", "/apis/coordination.k8s.io/v1/");
    let lease = format!("{leases}/lock");
    let apply_ct = "application/apply-patch+yaml";
    let created = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                         "metadata": {"name": "lock"}, "spec": {}});
    s.req(
        "create",
        "POST",
        &format!("{leases}?fieldManager=lm-a"),
        Some(created),
    )
    .await?;
    let hold = |who: &str, at: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "spec": {"acquireTime": at, "renewTime": at, "holderIdentity": who,
                        "leaseDurationSeconds": 15}})
        .to_string()
    };
    let at = "2026-12-03T10:00:00.000000Z";
    s.raw(
        "a applies its hold",
        "PATCH",
        &format!("{lease}?fieldManager=lm-a"),
        apply_ct,
        &hold("a", at),
    )
    .await?;
    let transitions =
        r#"{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","spec":{"leaseTransitions":1}}"#;
    s.raw(
        "a counts the transition",
        "PATCH",
        &format!("{lease}?fieldManager=lm-a"),
        STRATEGIC,
        transitions,
    )
    .await?;
    let renew = r#"{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","spec":{"renewTime":"2026-12-03T10:00:02.000000Z","leaseDurationSeconds":15}}"#;
    s.raw(
        "a renews",
        "PATCH",
        &format!("{lease}?fieldManager=lm-a"),
        STRATEGIC,
        renew,
    )
    .await?;
    let release = r#"{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","spec":{"acquireTime":null,"renewTime":null,"holderIdentity":null,"leaseDurationSeconds":null}}"#;
    let r = s
        .raw(
            "b clears the expired hold",
            "PATCH",
            &format!("{lease}?fieldManager=lm-b"),
            STRATEGIC,
            release,
        )
        .await?;
    s.field("spec after clearing", &r.body, "/spec");
    let r = s
        .raw(
            "b applies its hold",
            "PATCH",
            &format!("{lease}?fieldManager=lm-b"),
            apply_ct,
            &hold("b", "2026-12-03T10:00:30.000000Z"),
        )
        .await?;
    s.field("holder", &r.body, "/spec/holderIdentity");
    let mut managers: Vec<String> = r
        .body
        .pointer("/metadata/managedFields")
        .and_then(|m| m.as_array())
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "{}/{} {}",
                e["manager"].as_str().unwrap_or(""),
                e["operation"].as_str().unwrap_or(""),
                e["fieldsV1"]
            )
        })
        .collect();
    managers.sort();
    for m in managers {
        s.note(format!("managed: {m}"));
    }
    Ok(())
}

/// Server-side apply with managed fields: a field the manager stops applying is removed
/// (unless another manager owns it), fields of other managers are kept, lists merged by key
/// keep other managers' items.
pub(crate) async fn server_side_apply_ownership(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cm = format!("{}/cfg", s.core("configmaps"));
    let apply = |labels: serde_json::Value, data: serde_json::Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "cfg", "labels": labels}, "data": data})
        .to_string()
    };
    let ct = "application/apply-patch+yaml";
    let r = s
        .raw(
            "apply 1",
            "PATCH",
            &format!("{cm}?fieldManager=one"),
            ct,
            &apply(json!({"a": "1", "b": "2"}), json!({"x": "1", "y": "2"})),
        )
        .await?;
    s.field("labels", &r.body, "/metadata/labels");
    let r = s
        .req(
            "other manager adds",
            "PATCH",
            &format!("{cm}?fieldManager=two"),
            Some(json!({"metadata": {"labels": {"c": "3"}}, "data": {"z": "3"}})),
        )
        .await?;
    s.field("labels", &r.body, "/metadata/labels");
    let r = s
        .raw(
            "apply 2 drops b and y",
            "PATCH",
            &format!("{cm}?fieldManager=one"),
            ct,
            &apply(json!({"a": "1"}), json!({"x": "1"})),
        )
        .await?;
    s.field("labels", &r.body, "/metadata/labels");
    s.field("data", &r.body, "/data");
    let mut managers: Vec<String> = r
        .body
        .pointer("/metadata/managedFields")
        .and_then(|m| m.as_array())
        .map(|a| {
            a.iter()
                .map(|e| {
                    format!(
                        "{}/{}",
                        e["manager"].as_str().unwrap_or(""),
                        e["operation"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    managers.sort();
    s.note(format!("managers {managers:?}"));
    // Another manager applying a field "one" owns, to another value: a conflict, unless forced.
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
                       "data": {"x": "other", "w": "4"}})
    .to_string();
    s.raw(
        "conflicting apply",
        "PATCH",
        &format!("{cm}?fieldManager=three"),
        ct,
        &other,
    )
    .await?;
    let same = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
                      "data": {"x": "1"}})
    .to_string();
    s.raw(
        "same value is no conflict",
        "PATCH",
        &format!("{cm}?fieldManager=four"),
        ct,
        &same,
    )
    .await?;
    let updated = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg",
                         "labels": {"c": "changed"}}})
    .to_string();
    s.raw(
        "conflict with an updater",
        "PATCH",
        &format!("{cm}?fieldManager=five"),
        ct,
        &updated,
    )
    .await?;
    let r = s
        .raw(
            "forced apply",
            "PATCH",
            &format!("{cm}?fieldManager=three&force=true"),
            ct,
            &other,
        )
        .await?;
    s.field("data after force", &r.body, "/data");

    let deploys = format!("/apis/apps/v1/namespaces/{}/deployments", s.ns);
    let d = |image: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
               "spec": {"selector": {"matchLabels": {"app": "w"}},
                        "template": {"metadata": {"labels": {"app": "w"}},
                                     "spec": {"containers": [{"name": "a", "image": image}]}}}})
        .to_string()
    };
    s.raw(
        "apply deployment",
        "PATCH",
        &format!("{deploys}/d?fieldManager=one"),
        ct,
        &d("i:1"),
    )
    .await?;
    let sidecar = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                         "spec": {"template": {"spec": {"containers": [{"name": "b", "image": "s:1"}]}}}});
    let r = s
        .raw(
            "apply sidecar",
            "PATCH",
            &format!("{deploys}/d?fieldManager=two"),
            ct,
            &sidecar.to_string(),
        )
        .await?;
    s.note(format!("containers {:?}", container_images(&r.body)));
    let r = s
        .raw(
            "reapply image",
            "PATCH",
            &format!("{deploys}/d?fieldManager=one"),
            ct,
            &d("i:2"),
        )
        .await?;
    s.note(format!("containers {:?}", container_images(&r.body)));
    Ok(())
}

/// `name=image` of a workload's containers, in order.
fn container_images(body: &serde_json::Value) -> Vec<String> {
    body.pointer("/spec/template/spec/containers")
        .and_then(|c| c.as_array())
        .map(|a| {
            a.iter()
                .map(|c| {
                    format!(
                        "{}={}",
                        c["name"].as_str().unwrap_or(""),
                        c["image"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}
