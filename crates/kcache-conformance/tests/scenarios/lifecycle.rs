//! Object lifecycle: finalizers, generateName, preconditions, dryRun, unconditional updates,
//! name checks, namespaces, DELETE answers, the status subresource.

use serde_json::json;

use crate::script::{Script, config_map};

pub(crate) async fn finalizers_hold_a_deletion(s: &mut Script<'_>) -> anyhow::Result<()> {
    let secrets = s.core("secrets");
    let body = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]}, "data": {"k": "dg=="}});
    s.req("create", "POST", &secrets, Some(body)).await?;
    let r = s
        .req("delete", "DELETE", &format!("{secrets}/held"), None)
        .await?;
    s.present(
        "deletionTimestamp set",
        &r.body,
        "/metadata/deletionTimestamp",
    );
    s.field("finalizers", &r.body, "/metadata/finalizers");
    let r = s
        .req("get while held", "GET", &format!("{secrets}/held"), None)
        .await?;
    s.field(
        "deletionGracePeriodSeconds",
        &r.body,
        "/metadata/deletionGracePeriodSeconds",
    );
    let r = s
        .req("delete again", "DELETE", &format!("{secrets}/held"), None)
        .await?;
    s.field("still held", &r.body, "/metadata/finalizers");
    let patch = json!({"metadata": {"finalizers": null}});
    let r = s
        .req(
            "remove finalizers",
            "PATCH",
            &format!("{secrets}/held"),
            Some(patch),
        )
        .await?;
    s.field("answer finalizers", &r.body, "/metadata/finalizers");
    s.req("get after", "GET", &format!("{secrets}/held"), None)
        .await?;
    Ok(())
}

pub(crate) async fn finalizers_cannot_be_added_while_deleting(
    s: &mut Script<'_>,
) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    let mut body = config_map("a", json!({"k": "v"}));
    body["metadata"]["finalizers"] = json!(["example.com/one"]);
    s.req("create", "POST", &cms, Some(body)).await?;
    s.req("delete", "DELETE", &format!("{cms}/a"), None).await?;
    let patch = json!({"metadata": {"finalizers": ["example.com/one", "example.com/two"]}});
    s.req("add a finalizer", "PATCH", &format!("{cms}/a"), Some(patch))
        .await?;
    let patch = json!({"data": {"k": "changed"}});
    let r = s
        .req("change data", "PATCH", &format!("{cms}/a"), Some(patch))
        .await?;
    s.field("data", &r.body, "/data/k");
    let patch = json!({"metadata": {"finalizers": []}});
    s.req(
        "clear finalizers",
        "PATCH",
        &format!("{cms}/a"),
        Some(patch),
    )
    .await?;
    s.req("get after", "GET", &format!("{cms}/a"), None).await?;
    Ok(())
}

pub(crate) async fn generate_name(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    let body =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "web-"}});
    let r = s.req("generateName", "POST", &cms, Some(body)).await?;
    let name = r
        .body
        .pointer("/metadata/name")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    s.note(format!(
        "name: prefix kept {}, length {}, suffix alphanumeric {}",
        name.starts_with("web-"),
        name.len(),
        name.get(4..).is_some_and(|t| t
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
    ));
    s.field("generateName kept", &r.body, "/metadata/generateName");
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fixed", "generateName": "web-"}});
    let r = s
        .req("name and generateName", "POST", &cms, Some(body))
        .await?;
    s.field("name wins", &r.body, "/metadata/name");
    let long = "a".repeat(70);
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": format!("{long}-")}});
    let r = s.req("long prefix", "POST", &cms, Some(body)).await?;
    let name = r
        .body
        .pointer("/metadata/name")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    s.note(format!("long prefix name length {}", name.len()));
    Ok(())
}

pub(crate) async fn generate_name_invalid(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    for prefix in ["Web_", "-web-", "web.", "WEB"] {
        let body =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": prefix}});
        let r = s.t.send("POST", &cms, Some(body)).await?;
        // The random name is in the message: replaced by <generated>.
        let generated = r
            .body
            .pointer("/details/name")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_owned();
        let message = r.body["message"].as_str().unwrap_or("");
        let message = if generated.is_empty() {
            message.to_owned()
        } else {
            message.replace(&generated, "<generated>")
        };
        s.note(format!(
            "generateName {prefix:?}: {} {}",
            r.status,
            kcache_conformance::normalise(&message)
        ));
    }
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}});
    s.req("neither name nor generateName", "POST", &cms, Some(body))
        .await?;
    Ok(())
}

pub(crate) async fn delete_preconditions(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    let r = s
        .req("create", "POST", &cms, Some(config_map("a", json!({}))))
        .await?;
    let uid = r
        .body
        .pointer("/metadata/uid")
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_owned();
    let rv = r
        .body
        .pointer("/metadata/resourceVersion")
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_owned();
    let opts = |pre: serde_json::Value| json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": pre});
    s.req(
        "delete wrong uid",
        "DELETE",
        &format!("{cms}/a"),
        Some(opts(json!({"uid": "00000000-0000-0000-0000-000000000000"}))),
    )
    .await?;
    s.req(
        "delete wrong rv",
        "DELETE",
        &format!("{cms}/a"),
        Some(opts(json!({"resourceVersion": "1"}))),
    )
    .await?;
    s.req(
        "delete right uid and rv",
        "DELETE",
        &format!("{cms}/a"),
        Some(opts(json!({"uid": uid, "resourceVersion": rv}))),
    )
    .await?;
    s.req("get after", "GET", &format!("{cms}/a"), None).await?;
    Ok(())
}

pub(crate) async fn dry_run(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    let r = s
        .req(
            "create dryRun",
            "POST",
            &format!("{cms}?dryRun=All"),
            Some(config_map("a", json!({"k": "v"}))),
        )
        .await?;
    s.present("dry-run answer has a uid", &r.body, "/metadata/uid");
    s.req("get after dry create", "GET", &format!("{cms}/a"), None)
        .await?;
    s.req(
        "create",
        "POST",
        &cms,
        Some(config_map("a", json!({"k": "v"}))),
    )
    .await?;
    let r = s
        .req(
            "patch dryRun",
            "PATCH",
            &format!("{cms}/a?dryRun=All"),
            Some(json!({"data": {"k": "dry"}})),
        )
        .await?;
    s.field("dry patch answer", &r.body, "/data/k");
    let r = s.req("get", "GET", &format!("{cms}/a"), None).await?;
    s.field("stored", &r.body, "/data/k");
    s.req(
        "delete dryRun",
        "DELETE",
        &format!("{cms}/a?dryRun=All"),
        None,
    )
    .await?;
    s.req("get after dry delete", "GET", &format!("{cms}/a"), None)
        .await?;
    s.req(
        "dryRun=Bogus",
        "DELETE",
        &format!("{cms}/a?dryRun=Bogus"),
        None,
    )
    .await?;
    Ok(())
}

pub(crate) async fn unconditional_update(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    s.req(
        "create cm",
        "POST",
        &cms,
        Some(config_map("a", json!({"k": "v"}))),
    )
    .await?;
    let r = s
        .req(
            "put cm without rv",
            "PUT",
            &format!("{cms}/a"),
            Some(config_map("a", json!({"k": "w"}))),
        )
        .await?;
    s.field("data", &r.body, "/data/k");
    let leases = format!("/apis/coordination.k8s.io/v1/namespaces/{}/leases", s.ns);
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}});
    s.req("create lease", "POST", &leases, Some(lease.clone()))
        .await?;
    s.req(
        "put lease without rv",
        "PUT",
        &format!("{leases}/l"),
        Some(lease),
    )
    .await?;
    s.req(
        "put missing cm",
        "PUT",
        &format!("{cms}/missing"),
        Some(config_map("missing", json!({}))),
    )
    .await?;
    Ok(())
}

pub(crate) async fn update_name_mismatch(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    s.req("create", "POST", &cms, Some(config_map("a", json!({}))))
        .await?;
    s.req(
        "put with another name",
        "PUT",
        &format!("{cms}/a"),
        Some(config_map("b", json!({}))),
    )
    .await?;
    let mut body = config_map("a", json!({}));
    body["metadata"]["namespace"] = json!("elsewhere");
    s.req(
        "put with another namespace",
        "PUT",
        &format!("{cms}/a"),
        Some(body.clone()),
    )
    .await?;
    s.req("post with another namespace", "POST", &cms, Some(body))
        .await?;
    Ok(())
}

pub(crate) async fn namespace_label_and_termination(s: &mut Script<'_>) -> anyhow::Result<()> {
    let name = format!("{}-t", s.ns);
    let r = s
        .req(
            "create namespace",
            "POST",
            "/api/v1/namespaces",
            Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})),
        )
        .await?;
    s.field(
        "name label",
        &r.body,
        "/metadata/labels/kubernetes.io~1metadata.name",
    );
    s.field("spec.finalizers", &r.body, "/spec/finalizers");
    let patch = json!({"metadata": {"labels": {"kubernetes.io/metadata.name": "other"}}});
    let r = s
        .req(
            "relabel",
            "PATCH",
            &format!("/api/v1/namespaces/{name}"),
            Some(patch),
        )
        .await?;
    s.field(
        "label after relabel",
        &r.body,
        "/metadata/labels/kubernetes.io~1metadata.name",
    );
    let r = s
        .req(
            "delete namespace",
            "DELETE",
            &format!("/api/v1/namespaces/{name}"),
            None,
        )
        .await?;
    s.field("phase", &r.body, "/status/phase");
    let cms = format!("/api/v1/namespaces/{name}/configmaps");
    s.req(
        "create in terminating",
        "POST",
        &cms,
        Some(config_map("a", json!({}))),
    )
    .await?;
    Ok(())
}

pub(crate) async fn delete_response_bodies(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    s.req("create cm", "POST", &cms, Some(config_map("a", json!({}))))
        .await?;
    let r = s
        .req("delete cm", "DELETE", &format!("{cms}/a"), None)
        .await?;
    s.field("status", &r.body, "/status");
    let secrets = s.core("secrets");
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
    s.req("create secret", "POST", &secrets, Some(body)).await?;
    s.req("delete secret", "DELETE", &format!("{secrets}/s"), None)
        .await?;
    s.req("delete missing", "DELETE", &format!("{secrets}/s"), None)
        .await?;
    s.req("create two", "POST", &cms, Some(config_map("b", json!({}))))
        .await?;
    let r = s.req("delete collection", "DELETE", &cms, None).await?;
    s.note(format!(
        "deleted items {}",
        kcache_conformance::item_names(&r.body).join(",")
    ));
    Ok(())
}

pub(crate) async fn status_subresource_rules(s: &mut Script<'_>) -> anyhow::Result<()> {
    let pods = s.core("pods");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let r = s.req("create pod", "POST", &pods, Some(pod)).await?;
    s.field("generation", &r.body, "/metadata/generation");
    let r = s
        .req(
            "label change",
            "PATCH",
            &format!("{pods}/p"),
            Some(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await?;
    s.field("generation after label", &r.body, "/metadata/generation");
    let r = s
        .req(
            "spec change",
            "PATCH",
            &format!("{pods}/p"),
            Some(json!({"spec": {"activeDeadlineSeconds": 30}})),
        )
        .await?;
    s.field("generation after spec", &r.body, "/metadata/generation");
    let r = s
        .req(
            "status via main resource",
            "PATCH",
            &format!("{pods}/p"),
            Some(json!({"status": {"message": "main"}})),
        )
        .await?;
    s.field(
        "status.message after main write",
        &r.body,
        "/status/message",
    );
    let r = s
        .req(
            "status subresource",
            "PATCH",
            &format!("{pods}/p/status"),
            Some(json!({"status": {"message": "sub"}, "spec": {"activeDeadlineSeconds": 60}})),
        )
        .await?;
    s.field("status.message after /status", &r.body, "/status/message");
    s.field("spec after /status", &r.body, "/spec/activeDeadlineSeconds");
    s.field("generation after /status", &r.body, "/metadata/generation");
    Ok(())
}
