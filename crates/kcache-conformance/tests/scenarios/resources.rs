//! Resources beyond plain storage that controller test suites use: nodes, service accounts
//! and their tokens, pod eviction and binding, RBAC, CertificateSigningRequests and their
//! approval, the review kinds, verbs a resource does not serve, the `default/kubernetes`
//! Service.

use serde_json::{Value, json};

use crate::script::Script;

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "a"}},
           "spec": {"containers": [{"name": "c", "image": "i"}]}})
}

pub(crate) async fn nodes(s: &mut Script<'_>) -> anyhow::Result<()> {
    let name = format!("{}-node", s.ns);
    let node = json!({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": name, "labels": {"kcache-scenario": s.ns}},
                      "spec": {"unschedulable": true}});
    let r = s
        .req("create node", "POST", "/api/v1/nodes", Some(node))
        .await?;
    s.present("namespace", &r.body, "/metadata/namespace");
    s.field("generation", &r.body, "/metadata/generation");
    let url = format!("/api/v1/nodes/{name}");
    let mut n = r.body.clone();
    n["status"] =
        json!({"conditions": [{"type": "Ready", "status": "True", "reason": "R", "message": "m"}]});
    let r = s
        .req("status", "PUT", &format!("{url}/status"), Some(n))
        .await?;
    s.field("condition", &r.body, "/status/conditions/0/type");
    let r = s
        .req(
            "list by field",
            "GET",
            &format!("/api/v1/nodes?labelSelector=kcache-scenario%3D{}&fieldSelector=spec.unschedulable%3Dtrue", s.ns),
            None,
        )
        .await?;
    s.note(format!(
        "items {}",
        r.body["items"].as_array().map_or(0, Vec::len)
    ));
    s.req("delete node", "DELETE", &url, None).await?;
    s.req("get after", "GET", &url, None).await?;
    Ok(())
}

pub(crate) async fn service_account_token(s: &mut Script<'_>) -> anyhow::Result<()> {
    let sas = s.core("serviceaccounts");
    s.req(
        "create",
        "POST",
        &sas,
        Some(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}})),
    )
    .await?;
    let tr = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"audiences": ["a"], "expirationSeconds": 3600}});
    let r = s
        .req("token", "POST", &format!("{sas}/robot/token"), Some(tr))
        .await?;
    s.field("name", &r.body, "/metadata/name");
    s.field("audiences", &r.body, "/spec/audiences");
    s.field("expirationSeconds", &r.body, "/spec/expirationSeconds");
    s.present("token", &r.body, "/status/token");
    s.present(
        "expirationTimestamp",
        &r.body,
        "/status/expirationTimestamp",
    );
    let token = r
        .body
        .pointer("/status/token")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    s.note(format!("token parts {}", token.split('.').count()));
    let r = s
        .req(
            "defaults",
            "POST",
            &format!("{sas}/robot/token"),
            Some(json!({})),
        )
        .await?;
    s.field("default audiences", &r.body, "/spec/audiences");
    s.field("default expiration", &r.body, "/spec/expirationSeconds");
    s.req(
        "too short",
        "POST",
        &format!("{sas}/robot/token"),
        Some(json!({"spec": {"expirationSeconds": 60}})),
    )
    .await?;
    s.req(
        "missing account",
        "POST",
        &format!("{sas}/nope/token"),
        Some(json!({})),
    )
    .await?;
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                        "spec": {"token": token, "audiences": ["a"]}});
    let r = s
        .req(
            "token review",
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            Some(review),
        )
        .await?;
    s.field("authenticated", &r.body, "/status/authenticated");
    let user = r
        .body
        .pointer("/status/user/username")
        .and_then(Value::as_str)
        .unwrap_or("")
        .replace(&s.ns, "NS");
    s.note(format!("user {user}"));
    Ok(())
}

pub(crate) async fn eviction_and_binding(s: &mut Script<'_>) -> anyhow::Result<()> {
    let pods = s.core("pods");
    s.req("create p1", "POST", &pods, Some(pod("p1"))).await?;
    let ev = |name: &str| json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}});
    s.req(
        "evict dry run",
        "POST",
        &format!("{pods}/p1/eviction?dryRun=All"),
        Some(ev("p1")),
    )
    .await?;
    s.req("get after dry run", "GET", &format!("{pods}/p1"), None)
        .await?;
    s.req(
        "evict wrong name",
        "POST",
        &format!("{pods}/p1/eviction"),
        Some(ev("p2")),
    )
    .await?;
    let bad = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p1"},
                     "deleteOptions": {"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}});
    s.req(
        "evict precondition",
        "POST",
        &format!("{pods}/p1/eviction"),
        Some(bad),
    )
    .await?;
    s.req(
        "evict",
        "POST",
        &format!("{pods}/p1/eviction"),
        Some(ev("p1")),
    )
    .await?;
    s.req("get after", "GET", &format!("{pods}/p1"), None)
        .await?;
    s.req(
        "evict missing",
        "POST",
        &format!("{pods}/nope/eviction"),
        Some(ev("nope")),
    )
    .await?;

    s.req("create p2", "POST", &pods, Some(pod("p2"))).await?;
    let b = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p2"},
                   "target": {"kind": "Node", "name": "n1"}});
    s.req(
        "bind",
        "POST",
        &format!("{pods}/p2/binding"),
        Some(b.clone()),
    )
    .await?;
    let r = s
        .req("get bound", "GET", &format!("{pods}/p2"), None)
        .await?;
    s.field("nodeName", &r.body, "/spec/nodeName");
    s.field("condition", &r.body, "/status/conditions/0/type");
    s.field("condition status", &r.body, "/status/conditions/0/status");
    s.field("generation", &r.body, "/metadata/generation");
    s.req("bind again", "POST", &format!("{pods}/p2/binding"), Some(b))
        .await?;
    s.req("create p3", "POST", &pods, Some(pod("p3"))).await?;
    let b3 = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p3"},
                    "target": {"kind": "Node", "name": "n3"}});
    s.req("bindings", "POST", &s.core("bindings"), Some(b3))
        .await?;
    let r = s.req("get p3", "GET", &format!("{pods}/p3"), None).await?;
    s.field("nodeName", &r.body, "/spec/nodeName");
    s.req("list bindings", "GET", &s.core("bindings"), None)
        .await?;

    // A running pod under a budget the (absent) disruption controller has not processed.
    s.req("create p4", "POST", &pods, Some(pod("p4"))).await?;
    let r = s.t.send("GET", &format!("{pods}/p4"), None).await?;
    let mut p4 = r.body;
    p4["status"]["phase"] = json!("Running");
    s.req("running", "PUT", &format!("{pods}/p4/status"), Some(p4))
        .await?;
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                     "metadata": {"name": "budget"},
                     "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}}});
    let pdbs = format!("/apis/policy/v1/namespaces/{}/poddisruptionbudgets", s.ns);
    let r = s.req("create budget", "POST", &pdbs, Some(pdb)).await?;
    s.field("budget generation", &r.body, "/metadata/generation");
    s.req(
        "evict p4",
        "POST",
        &format!("{pods}/p4/eviction"),
        Some(ev("p4")),
    )
    .await?;
    s.req("get p4", "GET", &format!("{pods}/p4"), None).await?;
    Ok(())
}

pub(crate) async fn rbac(s: &mut Script<'_>) -> anyhow::Result<()> {
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let role_name = format!("{}-reader", s.ns);
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                      "metadata": {"name": role_name},
                      "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
    let r = s
        .req(
            "clusterrole",
            "POST",
            &format!("{rbac}/clusterroles"),
            Some(role),
        )
        .await?;
    s.field("rules", &r.body, "/rules");
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                      "metadata": {"name": "r"},
                      "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list", "watch"]}]});
    s.req(
        "role",
        "POST",
        &format!("{rbac}/namespaces/{}/roles", s.ns),
        Some(role),
    )
    .await?;
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                         "metadata": {"name": "rb"},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                         "subjects": [{"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}]});
    let url = format!("{rbac}/namespaces/{}/rolebindings", s.ns);
    let r = s.req("rolebinding", "POST", &url, Some(binding)).await?;
    s.field("subjects", &r.body, "/subjects");
    let r = s
        .req(
            "list roles",
            "GET",
            &format!("{rbac}/namespaces/{}/roles", s.ns),
            None,
        )
        .await?;
    s.note(format!(
        "roles {}",
        r.body["items"].as_array().map_or(0, Vec::len)
    ));
    s.req(
        "delete clusterrole",
        "DELETE",
        &format!("{rbac}/clusterroles/{role_name}"),
        None,
    )
    .await?;
    Ok(())
}

pub(crate) async fn certificate_signing_requests(s: &mut Script<'_>) -> anyhow::Result<()> {
    let csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let name = format!("{}-csr", s.ns);
    // A PKCS#10 request for CN=kcache made by openssl (the server checks the PEM block type).
    let request = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlITE1ITUNBUUF3RVRFUE1BMEdBMVVFQXd3R2EyTmhZMmhsTUZrd0V3WUhLb1pJemowQ0FRWUlLb1pJemowRApBUWNEUWdBRXIxbFBnV2ZtSW54UHdOSER4L1l6aXRFQUVIMURIQjdpbnJhQ1A0MkpZNU9LWkhWY0o1eERkUXI3CkcrNUpSa3huNXVmQzFJcFN2RFFiM3lMT0p4TzhpYUFBTUFvR0NDcUdTTTQ5QkFNQ0EwZ0FNRVVDSUdwa3l2NEEKS0ZQUGUvYm9pZ01JV25idlp4aGVMNnhUZmwzdnJ2YW5DalppQWlFQTNXMVh2RWJkVElzcGxXZHQwZXRmRWlqeApsTlVhTjJ1NWZPYVluL3NYVmYwPQotLS0tLUVORCBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K";
    let csr = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                     "metadata": {"name": name},
                     "spec": {"request": request, "signerName": "example.com/s", "usages": ["client auth"]},
                     "status": {"conditions": [{"type": "Approved", "status": "True"}]}});
    let r = s.req("create", "POST", csrs, Some(csr)).await?;
    s.field("status", &r.body, "/status");
    s.field("username", &r.body, "/spec/username");
    s.field("groups", &r.body, "/spec/groups");
    let mut c = r.body.clone();
    c["status"] = json!({"conditions": [{"type": "Approved", "status": "True", "reason": "R", "message": "m"}]});
    c["spec"]["signerName"] = json!("example.com/other");
    c["metadata"]["labels"] = json!({"x": "y"});
    let r = s
        .req(
            "approve",
            "PUT",
            &format!("{csrs}/{name}/approval"),
            Some(c),
        )
        .await?;
    s.field("condition", &r.body, "/status/conditions/0/type");
    s.present(
        "lastUpdateTime",
        &r.body,
        "/status/conditions/0/lastUpdateTime",
    );
    s.field("signerName kept", &r.body, "/spec/signerName");
    s.field("label", &r.body, "/metadata/labels");
    let bad = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                     "metadata": {"name": format!("{name}-bad")},
                     "spec": {"request": "aGVsbG8=", "usages": []}});
    s.req("invalid", "POST", csrs, Some(bad)).await?;
    s.req("delete", "DELETE", &format!("{csrs}/{name}"), None)
        .await?;
    Ok(())
}

pub(crate) async fn reviews_and_verbs(s: &mut Script<'_>) -> anyhow::Result<()> {
    let ssar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                      "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}});
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let r = s.req("ssar", "POST", path, Some(ssar)).await?;
    s.field("allowed", &r.body, "/status/allowed");
    s.req("list ssar", "GET", path, None).await?;
    s.req("get ssar", "GET", &format!("{path}/x"), None).await?;
    let r = s
        .req(
            "selfsubjectreview",
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})),
        )
        .await?;
    s.field("username", &r.body, "/status/userInfo/username");
    s.field("groups", &r.body, "/status/userInfo/groups");
    s.req(
        "deletecollection namespaces",
        "DELETE",
        "/api/v1/namespaces",
        None,
    )
    .await?;
    let r = s
        .req(
            "kubernetes service",
            "GET",
            "/api/v1/namespaces/default/services/kubernetes",
            None,
        )
        .await?;
    s.field("port", &r.body, "/spec/ports/0/port");
    s.field("port name", &r.body, "/spec/ports/0/name");
    s.field("labels", &r.body, "/metadata/labels");
    Ok(())
}

/// The pod subresources that write one part of the spec: `ephemeralcontainers` and `resize`.
pub(crate) async fn pod_spec_subresources(s: &mut Script<'_>) -> anyhow::Result<()> {
    let pods = s.core("pods");
    let p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
                   "spec": {"containers": [{"name": "c", "image": "i",
                            "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}}]}});
    s.req("create", "POST", &pods, Some(p)).await?;
    let r = s
        .req(
            "get ephemeralcontainers",
            "GET",
            &format!("{pods}/p/ephemeralcontainers"),
            None,
        )
        .await?;
    let mut pod = r.body.clone();
    pod["spec"]["ephemeralContainers"] =
        json!([{"name": "debug", "image": "busybox", "targetContainerName": "c"}]);
    pod["metadata"]["labels"]["b"] = json!("2");
    pod["spec"]["activeDeadlineSeconds"] = json!(30);
    let r = s
        .req(
            "add ephemeral container",
            "PUT",
            &format!("{pods}/p/ephemeralcontainers"),
            Some(pod),
        )
        .await?;
    s.field("ephemeral", &r.body, "/spec/ephemeralContainers/0/name");
    s.field("labels", &r.body, "/metadata/labels");
    s.field(
        "activeDeadlineSeconds",
        &r.body,
        "/spec/activeDeadlineSeconds",
    );
    s.field("generation", &r.body, "/metadata/generation");
    let patch = json!({"spec": {"containers": [{"name": "c",
                        "resources": {"requests": {"cpu": "150m"}, "limits": {"cpu": "200m"}}}]}});
    let r = s
        .raw(
            "resize",
            "PATCH",
            &format!("{pods}/p/resize"),
            "application/strategic-merge-patch+json",
            &patch.to_string(),
        )
        .await?;
    s.field("requests", &r.body, "/spec/containers/0/resources/requests");
    s.field("image", &r.body, "/spec/containers/0/image");
    s.field("generation", &r.body, "/metadata/generation");
    Ok(())
}
