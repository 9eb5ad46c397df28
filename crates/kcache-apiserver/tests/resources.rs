//! The resources kube-apiserver v1.36 serves beyond plain storage, as a controller test suite
//! uses them: nodes, service accounts and their tokens, pod eviction and binding, RBAC,
//! CertificateSigningRequests with their approval, the review kinds, the verbs each resource
//! serves, and the objects every cluster has (the `default/kubernetes` Service, the system
//! namespaces, a `default` ServiceAccount per namespace).

mod common;

use common::{delete, get, post, put, request};
use http::Method;
use kcache_apiserver::{ApiServer, RunningServer};
use serde_json::{Value, json};

async fn server() -> RunningServer {
    ApiServer::builder()
        .build()
        .start()
        .await
        .expect("server starts")
}

fn pod(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
           "spec": {"containers": [{"name": "c", "image": "i"}]}})
}

#[tokio::test]
async fn nodes_are_served_cluster_scoped_with_status() {
    let s = server().await;
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                      "spec": {"unschedulable": true}});
    let r = post(s.addr(), "/api/v1/nodes", &node).await;
    assert_eq!(r.status, 201, "{}", r.json());
    assert!(r.json()["metadata"].get("namespace").is_none());
    let r = get(
        s.addr(),
        "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dtrue",
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 1);
    let mut n = get(s.addr(), "/api/v1/nodes/n1").await.json();
    n["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
    let r = put(s.addr(), "/api/v1/nodes/n1/status", &n).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["status"]["conditions"][0]["type"], "Ready");
    assert_eq!(delete(s.addr(), "/api/v1/nodes/n1").await.status, 200);
}

#[tokio::test]
async fn every_cluster_has_its_default_objects() {
    let s = server().await;
    let svc = get(s.addr(), "/api/v1/namespaces/default/services/kubernetes").await;
    assert_eq!(svc.status, 200);
    let svc = svc.json();
    assert_eq!(svc["spec"]["ports"][0]["port"], 443);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], s.addr().port());
    assert_eq!(svc["metadata"]["labels"]["component"], "apiserver");
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let r = get(
            s.addr(),
            &format!("/api/v1/namespaces/{ns}/serviceaccounts/default"),
        )
        .await;
        assert_eq!(r.status, 200, "{ns}: {}", r.json());
    }
    let r = post(
        s.addr(),
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "fresh"}}),
    )
    .await;
    assert_eq!(r.status, 201);
    let r = get(s.addr(), "/api/v1/namespaces/fresh/serviceaccounts/default").await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn a_service_account_token_is_a_token_request_the_server_accepts() {
    let s = ApiServer::builder()
        .token("admin-secret")
        .build()
        .start()
        .await
        .expect("server starts");
    let auth = [("authorization", "Bearer admin-secret")];
    let body = json!({"metadata": {"name": "robot"}});
    let r = request(
        s.addr(),
        Method::POST,
        "/api/v1/namespaces/default/serviceaccounts",
        &auth,
        Some(serde_json::to_vec(&body).unwrap()),
    )
    .await
    .expect("request");
    assert_eq!(r.status, 201);
    let tr = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"audiences": ["a"], "expirationSeconds": 3600}});
    let r = request(
        s.addr(),
        Method::POST,
        "/api/v1/namespaces/default/serviceaccounts/robot/token",
        &auth,
        Some(serde_json::to_vec(&tr).unwrap()),
    )
    .await
    .expect("request");
    assert_eq!(r.status, 201, "{}", r.json());
    let tr = r.json();
    assert_eq!(tr["kind"], "TokenRequest");
    assert_eq!(tr["metadata"]["name"], "robot");
    assert_eq!(tr["spec"]["audiences"], json!(["a"]));
    assert!(tr["status"]["expirationTimestamp"].is_string());
    let token = tr["status"]["token"].as_str().unwrap().to_owned();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    // The token authenticates as the service account, which RBAC refuses until a binding
    // grants it `view`; a TokenReview names the service account.
    let bearer = format!("Bearer {token}");
    let sa_auth = [("authorization", bearer.as_str())];
    let list = || {
        request(
            s.addr(),
            Method::GET,
            "/api/v1/namespaces/default/configmaps",
            &sa_auth,
            None,
        )
    };
    let r = list().await.expect("request");
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["message"],
        "configmaps is forbidden: User \"system:serviceaccount:default:robot\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    let binding = json!({"metadata": {"name": "robot-view"},
        "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}});
    let r = request(
        s.addr(),
        Method::POST,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        &auth,
        Some(serde_json::to_vec(&binding).unwrap()),
    )
    .await
    .expect("request");
    assert_eq!(r.status, 201, "{}", r.json());
    let r = list().await.expect("request");
    assert_eq!(r.status, 200, "{}", r.json());
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                        "spec": {"token": token}});
    let r = request(
        s.addr(),
        Method::POST,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        &auth,
        Some(serde_json::to_vec(&review).unwrap()),
    )
    .await
    .expect("request");
    assert_eq!(r.status, 201);
    assert_eq!(r.json()["status"]["authenticated"], true);
    assert_eq!(
        r.json()["status"]["user"]["username"],
        "system:serviceaccount:default:robot"
    );
    // Too short a lifetime, a missing account.
    let short = json!({"spec": {"expirationSeconds": 60}});
    let r = request(
        s.addr(),
        Method::POST,
        "/api/v1/namespaces/default/serviceaccounts/robot/token",
        &auth,
        Some(serde_json::to_vec(&short).unwrap()),
    )
    .await
    .expect("request");
    assert_eq!(r.status, 422);
    let r = request(
        s.addr(),
        Method::POST,
        "/api/v1/namespaces/default/serviceaccounts/nope/token",
        &auth,
        Some(b"{}".to_vec()),
    )
    .await
    .expect("request");
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn eviction_deletes_the_pod_and_respects_a_disruption_budget() {
    let s = server().await;
    let pods = "/api/v1/namespaces/default/pods";
    assert_eq!(
        post(s.addr(), pods, &pod("p1", json!({"app": "a"})))
            .await
            .status,
        201
    );
    let ev = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p1"}});
    // Dry run keeps the pod.
    let r = post(s.addr(), &format!("{pods}/p1/eviction?dryRun=All"), &ev).await;
    assert_eq!(r.status, 201, "{}", r.json());
    assert_eq!(get(s.addr(), &format!("{pods}/p1")).await.status, 200);
    // A DeleteOptions precondition that does not hold.
    let bad = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p1"},
                     "deleteOptions": {"preconditions": {"uid": "not-it"}}});
    let r = post(s.addr(), &format!("{pods}/p1/eviction"), &bad).await;
    assert_eq!(r.status, 409, "{}", r.json());
    let r = post(s.addr(), &format!("{pods}/p1/eviction"), &ev).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.json()["status"], "Success");
    assert_eq!(get(s.addr(), &format!("{pods}/p1")).await.status, 404);
    // A running pod covered by a budget that allows no disruption is not evicted.
    let mut running = pod("p2", json!({"app": "a"}));
    running["status"] = json!({"phase": "Running"});
    assert_eq!(post(s.addr(), pods, &running).await.status, 201);
    let mut p2 = get(s.addr(), &format!("{pods}/p2")).await.json();
    p2["status"]["phase"] = json!("Running");
    assert_eq!(
        put(s.addr(), &format!("{pods}/p2/status"), &p2)
            .await
            .status,
        200
    );
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                     "metadata": {"name": "budget"},
                     "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}}});
    let pdbs = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
    let r = post(s.addr(), pdbs, &pdb).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let ev2 = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p2"}});
    let r = post(s.addr(), &format!("{pods}/p2/eviction"), &ev2).await;
    assert_eq!(r.status, 429, "{}", r.json());
    assert_eq!(get(s.addr(), &format!("{pods}/p2")).await.status, 200);
    // Once the budget allows one disruption, the eviction uses it up.
    let mut b = get(s.addr(), &format!("{pdbs}/budget")).await.json();
    b["status"] = json!({"observedGeneration": 1, "disruptionsAllowed": 1, "currentHealthy": 1,
                          "desiredHealthy": 1, "expectedPods": 1});
    assert_eq!(
        put(s.addr(), &format!("{pdbs}/budget/status"), &b)
            .await
            .status,
        200
    );
    let r = post(s.addr(), &format!("{pods}/p2/eviction"), &ev2).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let b = get(s.addr(), &format!("{pdbs}/budget")).await.json();
    assert_eq!(b["status"]["disruptionsAllowed"], 0);
}

#[tokio::test]
async fn binding_assigns_a_pod_to_a_node_once() {
    let s = server().await;
    let pods = "/api/v1/namespaces/default/pods";
    assert_eq!(
        post(s.addr(), pods, &pod("p1", json!({}))).await.status,
        201
    );
    let b = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1"},
                   "target": {"kind": "Node", "name": "n1"}});
    let r = post(s.addr(), &format!("{pods}/p1/binding"), &b).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let p = get(s.addr(), &format!("{pods}/p1")).await.json();
    assert_eq!(p["spec"]["nodeName"], "n1");
    assert_eq!(p["status"]["conditions"][0]["type"], "PodScheduled");
    assert_eq!(p["metadata"]["generation"], 1);
    let r = post(s.addr(), &format!("{pods}/p1/binding"), &b).await;
    assert_eq!(r.status, 409);
    assert_eq!(
        r.json()["message"],
        "Operation cannot be fulfilled on pods/binding \"p1\": pod p1 is already assigned to node \"n1\""
    );
    // The core `bindings` collection does the same.
    assert_eq!(
        post(s.addr(), pods, &pod("p2", json!({}))).await.status,
        201
    );
    let b2 = json!({"metadata": {"name": "p2"}, "target": {"kind": "Node", "name": "n2"}});
    let r = post(s.addr(), "/api/v1/namespaces/default/bindings", &b2).await;
    assert_eq!(r.status, 201);
    assert_eq!(
        get(s.addr(), &format!("{pods}/p2")).await.json()["spec"]["nodeName"],
        "n2"
    );
}

#[tokio::test]
async fn rbac_kinds_are_served() {
    let s = server().await;
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                      "metadata": {"name": "reader"},
                      "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
    assert_eq!(
        post(s.addr(), &format!("{rbac}/clusterroles"), &role)
            .await
            .status,
        201
    );
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                         "metadata": {"name": "read"},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "reader"},
                         "subjects": [{"kind": "User", "name": "bob"}]});
    let r = post(
        s.addr(),
        &format!("{rbac}/namespaces/default/rolebindings"),
        &binding,
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json());
    for path in [
        "roles",
        "rolebindings",
        "clusterroles",
        "clusterrolebindings",
    ] {
        assert_eq!(
            get(s.addr(), &format!("{rbac}/{path}")).await.status,
            200,
            "{path}"
        );
    }
}

#[tokio::test]
async fn certificate_signing_requests_are_created_and_approved() {
    let s = server().await;
    let csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let pem = "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n";
    let request = base64_encode(pem.as_bytes());
    let csr = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                     "metadata": {"name": "c1"},
                     "spec": {"request": request, "signerName": "example.com/s", "usages": ["client auth"]},
                     "status": {"conditions": [{"type": "Approved", "status": "True"}]}});
    let r = post(s.addr(), csrs, &csr).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let c = r.json();
    assert_eq!(c["status"], json!({}), "a create starts without status");
    assert_eq!(c["spec"]["username"], "admin");
    let mut c = c;
    c["status"] = json!({"conditions": [{"type": "Approved", "status": "True", "reason": "R", "message": "m"}]});
    c["spec"]["signerName"] = json!("example.com/other");
    let r = put(s.addr(), &format!("{csrs}/c1/approval"), &c).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let c = r.json();
    assert_eq!(c["status"]["conditions"][0]["type"], "Approved");
    assert!(c["status"]["conditions"][0]["lastUpdateTime"].is_string());
    assert_eq!(
        c["spec"]["signerName"], "example.com/s",
        "approval keeps spec"
    );
    let bad = json!({"metadata": {"name": "c2"}, "spec": {"request": "aGVsbG8=", "usages": []}});
    let r = post(s.addr(), csrs, &bad).await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["message"],
        "CertificateSigningRequest.certificates.k8s.io \"c2\" is invalid: [spec.request: Invalid value: \"aGVsbG8=\": PEM block type must be CERTIFICATE REQUEST, spec.usages: Required value, spec.signerName: Required value]"
    );
}

fn base64_encode(b: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in b.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &x)| acc | (u32::from(x) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[tokio::test]
async fn reviews_are_answered_and_not_stored() {
    let s = server().await;
    let ssar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                      "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}});
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let r = post(s.addr(), path, &ssar).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.json()["status"]["allowed"], true);
    // A create-only resource: no list (405), no named object (404).
    assert_eq!(get(s.addr(), path).await.status, 405);
    assert_eq!(get(s.addr(), &format!("{path}/x")).await.status, 404);
    let r = post(
        s.addr(),
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &json!({}),
    )
    .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.json()["status"]["userInfo"]["username"], "admin");
}

#[tokio::test]
async fn verbs_a_resource_does_not_serve_are_refused() {
    let s = server().await;
    let r = delete(s.addr(), "/api/v1/namespaces").await;
    assert_eq!(r.status, 405);
    assert_eq!(r.json()["reason"], "MethodNotAllowed");
    let r = get(s.addr(), "/api/v1/namespaces/default/bindings").await;
    assert_eq!(r.status, 405);
    let r = get(s.addr(), "/api/v1/componentstatuses").await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn discovery_lists_every_upstream_group_in_upstream_order() {
    let s = server().await;
    let apis = get(s.addr(), "/apis").await.json();
    let names: Vec<&str> = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 20, "{names:?}");
    assert_eq!(
        &names[..3],
        ["apiregistration.k8s.io", "apps", "events.k8s.io"]
    );
    let autoscaling = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "autoscaling")
        .unwrap();
    assert_eq!(autoscaling["preferredVersion"]["version"], "v2");
    let core = get(s.addr(), "/api/v1").await.json();
    let pods_eviction = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods/eviction")
        .cloned()
        .unwrap();
    assert_eq!(
        pods_eviction,
        json!({"name": "pods/eviction", "singularName": "", "namespaced": true,
               "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]})
    );
}
