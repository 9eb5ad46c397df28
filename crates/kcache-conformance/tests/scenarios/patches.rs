//! Patches: JSON merge patch nulls and `stringData`, JSON patch atomicity, strategic merge
//! patch directives.

use serde_json::json;

use crate::script::{Script, config_map};

const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";

pub(crate) async fn merge_patch_nulls(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    let mut body = config_map("a", json!({"k": "v", "drop": "x"}));
    body["metadata"]["labels"] = json!({"app": "web", "tier": "front"});
    body["metadata"]["annotations"] = json!({"note": "n"});
    s.req("create", "POST", &cms, Some(body)).await?;
    let patch = r#"{"data":{"drop":null},"metadata":{"labels":{"tier":null},"annotations":null}}"#;
    let r = s
        .raw(
            "null keys and a whole map",
            "PATCH",
            &format!("{cms}/a"),
            MERGE,
            patch,
        )
        .await?;
    s.field("data", &r.body, "/data");
    s.field("labels", &r.body, "/metadata/labels");
    s.field("annotations", &r.body, "/metadata/annotations");
    let r = s
        .raw(
            "data null",
            "PATCH",
            &format!("{cms}/a"),
            MERGE,
            r#"{"data":null}"#,
        )
        .await?;
    s.field("data after null", &r.body, "/data");
    s.raw(
        "not an object",
        "PATCH",
        &format!("{cms}/a"),
        MERGE,
        "[1,2]",
    )
    .await?;
    s.raw("not json", "PATCH", &format!("{cms}/a"), MERGE, "{oops")
        .await?;
    Ok(())
}

pub(crate) async fn merge_patch_secret_string_data(s: &mut Script<'_>) -> anyhow::Result<()> {
    let secrets = s.core("secrets");
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"user": "admin"}});
    let r = s
        .req("create with stringData", "POST", &secrets, Some(body))
        .await?;
    s.field("data", &r.body, "/data");
    s.present("stringData kept", &r.body, "/stringData");
    s.field("type", &r.body, "/type");
    let patch = r#"{"stringData":{"pass":"hunter2"},"data":{"user":null}}"#;
    let r = s
        .raw(
            "patch stringData",
            "PATCH",
            &format!("{secrets}/s"),
            MERGE,
            patch,
        )
        .await?;
    s.field("data after", &r.body, "/data");
    Ok(())
}

/// JSON patch operations on paths that do not exist, as kube-apiserver's evanphx/json-patch v4
/// judges them: `replace` of a missing key of an existing object adds it, `replace` under a
/// missing parent, `remove` of a missing key and a `replace` past an array's end fail; a
/// `null` in a string map is decoded as the empty string.
pub(crate) async fn json_patch_missing_paths(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    let mut body = config_map("a", json!({"k": "v"}));
    body["metadata"]["finalizers"] = json!(["example.com/f"]);
    s.req("create", "POST", &cms, Some(body)).await?;
    let a = format!("{cms}/a");
    let cases = [
        (
            "replace a missing key",
            r#"[{"op":"replace","path":"/data/new","value":"1"}]"#,
        ),
        (
            "replace under a missing parent",
            r#"[{"op":"replace","path":"/metadata/labels/x","value":"1"}]"#,
        ),
        (
            "remove a missing key",
            r#"[{"op":"remove","path":"/data/absent"}]"#,
        ),
        (
            "replace past the array end",
            r#"[{"op":"replace","path":"/metadata/finalizers/1","value":"x"}]"#,
        ),
        (
            "replace the last item",
            r#"[{"op":"replace","path":"/metadata/finalizers/0","value":"example.com/g"}]"#,
        ),
        (
            "copy from a missing key",
            r#"[{"op":"copy","from":"/data/absent","path":"/data/c"}]"#,
        ),
        (
            "move from a missing key",
            r#"[{"op":"move","from":"/data/absent","path":"/data/m"}]"#,
        ),
        (
            "a null label",
            r#"[{"op":"add","path":"/metadata/labels","value":{"x":null}}]"#,
        ),
    ];
    for (what, patch) in cases {
        s.raw(what, "PATCH", &a, JSON_PATCH, patch).await?;
    }
    let r = s.req("get", "GET", &a, None).await?;
    s.field("data", &r.body, "/data");
    s.field("finalizers", &r.body, "/metadata/finalizers");
    s.field("labels", &r.body, "/metadata/labels");
    s.raw(
        "clear finalizers",
        "PATCH",
        &a,
        JSON_PATCH,
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    )
    .await?;
    Ok(())
}

pub(crate) async fn json_patch_test_is_atomic(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    s.req(
        "create",
        "POST",
        &cms,
        Some(config_map("a", json!({"k": "v"}))),
    )
    .await?;
    let patch = r#"[{"op":"add","path":"/data/new","value":"1"},{"op":"test","path":"/data/k","value":"wrong"}]"#;
    s.raw(
        "failing test",
        "PATCH",
        &format!("{cms}/a"),
        JSON_PATCH,
        patch,
    )
    .await?;
    let r = s.req("get", "GET", &format!("{cms}/a"), None).await?;
    s.field("data unchanged", &r.body, "/data");
    let patch = r#"[{"op":"test","path":"/data/k","value":"v"},{"op":"replace","path":"/data/k","value":"w"},{"op":"remove","path":"/data/k"}]"#;
    let r = s
        .raw(
            "passing test",
            "PATCH",
            &format!("{cms}/a"),
            JSON_PATCH,
            patch,
        )
        .await?;
    s.field("data", &r.body, "/data");
    let patch = r#"[{"op":"remove","path":"/data/missing"}]"#;
    s.raw(
        "remove missing",
        "PATCH",
        &format!("{cms}/a"),
        JSON_PATCH,
        patch,
    )
    .await?;
    let patch = r#"[{"op":"frobnicate","path":"/data"}]"#;
    s.raw(
        "unknown op",
        "PATCH",
        &format!("{cms}/a"),
        JSON_PATCH,
        patch,
    )
    .await?;
    Ok(())
}

pub(crate) async fn strategic_merge_directives(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    let mut body = config_map("a", json!({"k": "v", "j": "w"}));
    body["metadata"]["finalizers"] = json!(["a.io/x", "a.io/y"]);
    body["metadata"]["labels"] = json!({"app": "web", "tier": "front"});
    s.req("create", "POST", &cms, Some(body)).await?;
    let patch = r#"{"metadata":{"finalizers":["a.io/z"]}}"#;
    let r = s
        .raw(
            "finalizers merge",
            "PATCH",
            &format!("{cms}/a"),
            STRATEGIC,
            patch,
        )
        .await?;
    s.field("finalizers", &r.body, "/metadata/finalizers");
    let patch = r#"{"metadata":{"$deleteFromPrimitiveList/finalizers":["a.io/x"]}}"#;
    let r = s
        .raw(
            "delete from list",
            "PATCH",
            &format!("{cms}/a"),
            STRATEGIC,
            patch,
        )
        .await?;
    s.field("finalizers after delete", &r.body, "/metadata/finalizers");
    let patch = r#"{"metadata":{"labels":{"$patch":"replace","only":"this"}}}"#;
    let r = s
        .raw(
            "replace a map",
            "PATCH",
            &format!("{cms}/a"),
            STRATEGIC,
            patch,
        )
        .await?;
    s.field("labels", &r.body, "/metadata/labels");
    let patch = r#"{"data":{"$patch":"delete"}}"#;
    let r = s
        .raw(
            "delete a map",
            "PATCH",
            &format!("{cms}/a"),
            STRATEGIC,
            patch,
        )
        .await?;
    s.field("data", &r.body, "/data");
    let patch = r#"{"metadata":{"finalizers":null}}"#;
    s.raw(
        "clear finalizers",
        "PATCH",
        &format!("{cms}/a"),
        STRATEGIC,
        patch,
    )
    .await?;
    let pods = s.core("pods");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a", "image": "one"}, {"name": "b", "image": "two"}]}});
    s.req("create pod", "POST", &pods, Some(pod)).await?;
    let patch = r#"{"spec":{"containers":[{"name":"b","image":"three"}]}}"#;
    let r = s
        .raw(
            "containers merge by name",
            "PATCH",
            &format!("{pods}/p"),
            STRATEGIC,
            patch,
        )
        .await?;
    let containers: Vec<String> = r
        .body
        .pointer("/spec/containers")
        .and_then(|c| c.as_array())
        .map(|c| {
            c.iter()
                .map(|c| {
                    format!(
                        "{}={}",
                        c["name"].as_str().unwrap_or("?"),
                        c["image"].as_str().unwrap_or("?")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    s.note(format!("containers {}", containers.join(",")));
    let patch = r#"{"spec":{"containers":[{"name":"a","$patch":"delete"}]}}"#;
    s.raw(
        "delete a container",
        "PATCH",
        &format!("{pods}/p"),
        STRATEGIC,
        patch,
    )
    .await?;
    Ok(())
}

/// What a status write keeps of the metadata it carries, per kind (pods keep it all,
/// Deployments not their labels, custom resources nothing: see crds.rs), the
/// resourceVersion of a dry-run update, and a JSON patch `test` of a missing path against
/// null (what kube-rs's finalizer helper sends).
pub(crate) async fn status_metadata_and_json_patch_test_null(
    s: &mut Script<'_>,
) -> anyhow::Result<()> {
    let pods = s.core("pods");
    let p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
                   "spec": {"containers": [{"name": "c", "image": "i"}]}});
    s.req("create pod", "POST", &pods, Some(p)).await?;
    let change = json!({"metadata": {"labels": {"b": "2"}, "annotations": {"x": "y"},
                                     "finalizers": ["example.com/f"]},
                        "spec": {"containers": [{"name": "c", "image": "other"}]},
                        "status": {"message": "hi"}});
    let r = s
        .req(
            "pod status",
            "PATCH",
            &format!("{pods}/p/status"),
            Some(change),
        )
        .await?;
    for ptr in [
        "/metadata/labels",
        "/metadata/annotations",
        "/metadata/finalizers",
        "/spec/containers/0/image",
        "/status/message",
        "/metadata/generation",
    ] {
        s.field(ptr, &r.body, ptr);
    }
    s.req(
        "release",
        "PATCH",
        &format!("{pods}/p"),
        Some(json!({"metadata": {"finalizers": null}})),
    )
    .await?;
    let deploys = format!("/apis/apps/v1/namespaces/{}/deployments", s.ns);
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "d", "labels": {"a": "1"}},
                   "spec": {"selector": {"matchLabels": {"app": "w"}},
                            "template": {"metadata": {"labels": {"app": "w"}},
                                         "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    s.req("create deployment", "POST", &deploys, Some(d))
        .await?;
    let change = json!({"metadata": {"labels": {"b": "2"}, "annotations": {"x": "y"}},
                        "status": {"replicas": 2}});
    let r = s
        .req(
            "deployment status",
            "PATCH",
            &format!("{deploys}/d/status"),
            Some(change),
        )
        .await?;
    for ptr in [
        "/metadata/labels",
        "/metadata/annotations",
        "/status/replicas",
    ] {
        s.field(ptr, &r.body, ptr);
    }

    let cms = s.core("configmaps");
    let r = s
        .req(
            "create cm",
            "POST",
            &cms,
            Some(config_map("a", json!({"k": "v"}))),
        )
        .await?;
    let rv = r.body.pointer("/metadata/resourceVersion").cloned();
    let r = s
        .req(
            "dry-run update",
            "PUT",
            &format!("{cms}/a?dryRun=All"),
            Some(config_map("a", json!({"k": "w"}))),
        )
        .await?;
    s.note(format!(
        "dry-run update keeps the resourceVersion: {}",
        r.body.pointer("/metadata/resourceVersion").cloned() == rv
    ));
    s.field("dry-run data", &r.body, "/data/k");
    let ops = r#"[{"op": "test", "path": "/metadata/finalizers", "value": null},
                  {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/f"]}]"#;
    let r = s
        .raw(
            "test null then add",
            "PATCH",
            &format!("{cms}/a"),
            "application/json-patch+json",
            ops,
        )
        .await?;
    s.field("finalizers", &r.body, "/metadata/finalizers");
    s.raw(
        "test null of a present path",
        "PATCH",
        &format!("{cms}/a"),
        "application/json-patch+json",
        r#"[{"op": "test", "path": "/metadata/finalizers", "value": null}]"#,
    )
    .await?;
    s.raw(
        "remove",
        "PATCH",
        &format!("{cms}/a"),
        "application/json-patch+json",
        r#"[{"op": "remove", "path": "/metadata/finalizers"}]"#,
    )
    .await?;
    Ok(())
}
