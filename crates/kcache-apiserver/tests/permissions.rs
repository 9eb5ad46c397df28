//! The permissions record (beyond kube-apiserver): what a user did, the least-privilege RBAC
//! written from it (applied with kubectl, then the same requests replayed as the user and
//! allowed), and the check of RBAC manifests against the record.

#![allow(dead_code, reason = "common is shared by several test files")]

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::request;
use http::Method;
use kcache_apiserver::ApiServer;
use kcache_apiserver::auth::UserInfo;
use kcache_apiserver::auth::permissions::{self, Access, Options, UserRecord};
use serde_json::json;

/// (method, path, body) of alice's requests.
const REQUESTS: [(&str, &str, Option<&str>); 6] = [
    ("GET", "/api/v1/namespaces/a/configmaps", None),
    ("GET", "/api/v1/namespaces/a/configmaps/cm", None),
    (
        "PATCH",
        "/api/v1/namespaces/a/configmaps/cm",
        Some(r#"{"data":{"k":"v"}}"#),
    ),
    ("GET", "/apis/apps/v1/deployments", None),
    ("GET", "/api/v1/namespaces/b/pods/p/status", None),
    ("GET", "/version", None),
];

/// The status codes of alice's requests, and the message of the first 403.
async fn as_alice(addr: std::net::SocketAddr) -> (Vec<u16>, Option<String>) {
    let mut codes = Vec::new();
    let mut first_403 = None;
    for (method, path, body) in REQUESTS {
        let headers = [
            ("authorization", "Bearer alice-token"),
            ("content-type", "application/merge-patch+json"),
        ];
        let r = request(
            addr,
            method.parse::<Method>().unwrap(),
            path,
            &headers,
            body.map(|b| b.as_bytes().to_vec()),
        )
        .await
        .expect("request");
        if r.status == 403 && first_403.is_none() {
            first_403 = Some(r.json()["message"].as_str().unwrap_or("").to_owned());
        }
        codes.push(r.status);
    }
    (codes, first_403)
}

fn kubectl() -> PathBuf {
    let bin = PathBuf::from(std::env::var("KUBECTL").unwrap_or_else(|_| "/usr/bin/kubectl".into()));
    assert!(
        bin.exists(),
        "kubectl not found at {} (set KUBECTL): this test must not be skipped",
        bin.display()
    );
    bin
}

async fn server() -> kcache_apiserver::RunningServer {
    let mut b = ApiServer::builder().user_token("alice-token", UserInfo::new("alice", ["dev"]));
    for ns in ["a", "b"] {
        b = b.seed("/api/v1/namespaces", json!({"metadata": {"name": ns}}));
    }
    b.seed(
        "/api/v1/namespaces/a/configmaps",
        json!({"metadata": {"name": "cm"}}),
    )
    .build()
    .start()
    .await
    .expect("server starts")
}

fn record(server: &kcache_apiserver::RunningServer) -> UserRecord {
    server
        .permissions()
        .user("alice")
        .cloned()
        .expect("alice's record")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_least_privilege_rbac_of_a_record_allows_its_requests_and_nothing_more() {
    let server = server().await;
    let (codes, message) = as_alice(server.addr()).await;
    assert_eq!(codes, [403, 403, 403, 403, 403, 200]);
    let message = message.unwrap();

    let rec = record(&server);
    assert_eq!(rec.groups, ["dev", "system:authenticated"]);
    let outline: Vec<String> = rec
        .accesses
        .iter()
        .map(|a| {
            format!(
                "{} {}/{}/{} ns={} name={} path={} allowed={} denied={}",
                a.verb,
                a.api_group,
                a.resource,
                a.subresource,
                a.namespace,
                a.name,
                a.path,
                a.allowed,
                a.denied
            )
        })
        .collect();
    assert_eq!(
        outline,
        [
            "get // ns= name= path=/version allowed=true denied=false",
            "get /configmaps/ ns=a name=cm path= allowed=false denied=true",
            "get /pods/status ns=b name=p path= allowed=false denied=true",
            "list /configmaps/ ns=a name= path= allowed=false denied=true",
            "list apps/deployments/ ns= name= path= allowed=false denied=true",
            "patch /configmaps/ ns=a name=cm path= allowed=false denied=true",
        ]
    );
    assert_eq!(server.permissions().dropped, 0);

    // The generated RBAC: a ClusterRole (the all-namespace list; /version is the bootstrap
    // roles' to every user), a Role in a and one in b, each bound to alice.
    let objects = permissions::least_privilege("alice", &rec, &Options::default());
    let kinds: Vec<String> = objects
        .iter()
        .map(|o| format!("{} {}", o["kind"], o["metadata"]["namespace"]))
        .collect();
    assert_eq!(
        kinds,
        [
            "\"ClusterRole\" null",
            "\"ClusterRoleBinding\" null",
            "\"Role\" \"a\"",
            "\"RoleBinding\" \"a\"",
            "\"Role\" \"b\"",
            "\"RoleBinding\" \"b\"",
        ]
    );
    assert_eq!(
        objects[2]["rules"],
        json!([{"verbs": ["get", "list", "patch"], "apiGroups": [""], "resources": ["configmaps"]}])
    );
    assert_eq!(
        objects[0]["rules"],
        json!([{"verbs": ["list"], "apiGroups": ["apps"], "resources": ["deployments"]}])
    );
    let yaml = permissions::to_yaml(&objects).unwrap();

    // kubectl applies it (as the admin); alice's requests are then all allowed.
    let dir = std::env::temp_dir().join(format!("kcache-permissions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let manifest = dir.join("rbac.yaml");
    std::fs::write(&manifest, &yaml).unwrap();
    let out = Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .arg("apply")
        .arg("-f")
        .arg(&manifest)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{yaml}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (codes, _) = as_alice(server.addr()).await;
    assert_eq!(codes, [200, 200, 200, 200, 404, 200], "{yaml}");
    let _ = std::fs::remove_dir_all(&dir);

    // The check: the generated manifests allow everything and grant nothing more.
    let report = permissions::check(&yaml, "alice", &rec).unwrap();
    assert!(
        report.missing.is_empty() && report.excess.is_empty(),
        "{report:?}"
    );
    // No manifests: every request but /version (the bootstrap roles') is missing, with the
    // 403 the server answered.
    let report = permissions::check("", "alice", &rec).unwrap();
    assert_eq!(report.missing.len(), 5);
    assert!(report.missing.iter().all(|m| m.access.path.is_empty()));
    let list = report
        .missing
        .iter()
        .find(|m| m.access.verb == "list" && m.access.resource == "configmaps")
        .unwrap();
    assert_eq!(list.message, message);
    // Broader manifests: what was never done is listed.
    let broad = format!(
        "{yaml}---\n{}",
        r#"apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: extra, namespace: a}
rules:
- {apiGroups: [""], resources: [configmaps, secrets], verbs: [get, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: extra, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extra}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
"#
    );
    let report = permissions::check(&broad, "alice", &rec).unwrap();
    assert!(report.missing.is_empty(), "{report:?}");
    assert_eq!(report.excess.len(), 1, "{report:?}");
    assert_eq!(
        report.excess[0].binding,
        "RoleBinding \"extra/a\" of Role \"extra\" to User \"alice\""
    );
    assert_eq!(
        report.excess[0].unused,
        ["get /secrets", "delete /configmaps", "delete /secrets"]
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_names_restrict_named_gets_and_patches_when_asked() {
    let server = server().await;
    as_alice(server.addr()).await;
    let rec = record(&server);
    let objects =
        permissions::least_privilege("alice", &rec, &Options::default().resource_names(true));
    assert_eq!(
        objects[2]["rules"],
        json!([{"verbs": ["get", "patch"], "apiGroups": [""], "resources": ["configmaps"],
                "resourceNames": ["cm"]},
               {"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"]}])
    );
    assert_eq!(
        objects[4]["rules"],
        json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods/status"],
                "resourceNames": ["p"]}])
    );
    let yaml = permissions::to_yaml(&objects).unwrap();
    let report = permissions::check(&yaml, "alice", &rec).unwrap();
    assert!(
        report.missing.is_empty() && report.excess.is_empty(),
        "{report:?}"
    );
    // A service account's record binds the service account.
    let sa =
        permissions::least_privilege("system:serviceaccount:ops:bot", &rec, &Options::default());
    assert_eq!(
        sa[1]["subjects"],
        json!([{"kind": "ServiceAccount", "name": "bot", "namespace": "ops"}])
    );
    assert_eq!(
        sa[1]["metadata"]["name"],
        "recorded:system:serviceaccount:ops:bot"
    );
    server.shutdown().await;
}

/// An informer that watched also needs `list`, even when its streaming list (a watch with
/// `sendInitialEvents=true`) made the LIST unnecessary on this run: a reflector lists when the
/// server refuses the stream or its end bookmark does not come. So a recorded watch implies the
/// list of the same resource and scope, in the least-privilege rules and in the check.
#[test]
fn a_recorded_watch_needs_the_list_of_the_same_resource() {
    let record = UserRecord {
        groups: vec!["system:authenticated".into()],
        accesses: vec![
            Access::resource("watch", "", "configmaps", "", "web", ""),
            Access::resource("watch", "apps", "deployments", "", "", ""),
        ],
    };
    let least = permissions::least_privilege("ops", &record, &Options::default());
    let yaml = permissions::to_yaml(&least).unwrap();
    let report = permissions::check(&yaml, "ops", &record).unwrap();
    assert!(report.missing.is_empty(), "{:#?}", report.missing);
    assert!(report.excess.is_empty(), "{:#?}", report.excess);
    for (kind, resource) in [("Role", "configmaps"), ("ClusterRole", "deployments")] {
        let role = least
            .iter()
            .find(|o| o["kind"] == kind)
            .unwrap_or_else(|| panic!("a {kind}: {yaml}"));
        let rule = &role["rules"][0];
        assert_eq!(rule["resources"], serde_json::json!([resource]), "{yaml}");
        assert_eq!(
            rule["verbs"],
            serde_json::json!(["list", "watch"]),
            "{yaml}"
        );
    }
    // A manifest granting only the watch misses the list.
    let watch_only = yaml.replace("- list\n", "");
    assert_ne!(watch_only, yaml);
    let report = permissions::check(&watch_only, "ops", &record).unwrap();
    assert_eq!(report.missing.len(), 2, "{:#?}", report.missing);
    assert!(
        report.missing.iter().all(|m| m.access.verb == "list"),
        "{:#?}",
        report.missing
    );
}
