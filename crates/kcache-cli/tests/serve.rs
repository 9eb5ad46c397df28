//! `kcache serve` end to end: start the binary, read the URL and kubeconfig path it
//! prints, use kubectl against it, stop it with Ctrl-C (SIGINT).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn kubectl() -> String {
    let bin = std::env::var("KUBECTL").unwrap_or_else(|_| "/usr/bin/kubectl".into());
    assert!(
        std::path::Path::new(&bin).exists(),
        "kubectl not found at {bin} (set KUBECTL)"
    );
    bin
}

#[test]
fn serve_prints_url_and_kubeconfig_serves_kubectl_and_stops_on_ctrl_c() {
    let dir = std::env::temp_dir().join(format!("kcache-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kcache"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--seed-pods",
            "5",
            "--write-kubeconfig",
        ])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .spawn()
        .expect("kcache starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    // HTTPS by default: the kubeconfig carries the generated CA and the admin token, and
    // kubectl verifies the server with it.
    assert!(
        first.starts_with("kcache API server listening on https://127.0.0.1:"),
        "{first}"
    );
    let second = lines.next().unwrap().unwrap();
    assert_eq!(
        second,
        format!("kubeconfig written to {}", kubeconfig.display())
    );

    let out = Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .args(["get", "pods", "-o", "name"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pods: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(pods.len(), 5, "{pods:?}");
    assert_eq!(pods[0], "pod/pod-000000");
    let written = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(
        written.contains("certificate-authority-data: "),
        "{written}"
    );
    assert!(written.contains("    token: "), "{written}");

    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(
        exit.success(),
        "kcache serve exits cleanly on Ctrl-C: {exit:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_insecure_http_serves_plain_http_without_credentials() {
    let dir = std::env::temp_dir().join(format!("kcache-serve-http-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kcache"))
        .args(["serve", "--listen", "127.0.0.1:0", "--insecure-http"])
        .arg("--write-kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .spawn()
        .expect("kcache starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(
        first.starts_with("kcache API server listening on http://127.0.0.1:"),
        "{first}"
    );
    let _ = lines.next();
    let written = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(!written.contains("certificate-authority-data"), "{written}");
    assert!(written.contains("user: {}"), "{written}");
    let out = Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .args(["get", "namespaces", "-o", "name"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("namespace/default"));
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_preloads_a_manifest_directory_crds_first() {
    let dir = std::env::temp_dir().join(format!("kcache-serve-manifests-{}", std::process::id()));
    let manifests = dir.join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    // The custom resource's file sorts before its CRD's: CRDs are created first anyway.
    std::fs::write(
        manifests.join("a-widget.yaml"),
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: team\nspec:\n  size: 3\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n",
    )
    .unwrap();
    std::fs::write(
        manifests.join("b-crd.json"),
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        }))
        .unwrap(),
    )
    .unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kcache"))
        .args(["serve", "--listen", "127.0.0.1:0", "--manifests"])
        .arg(&manifests)
        .arg("--write-kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .spawn()
        .expect("kcache starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert_eq!(
        first,
        format!("created 3 objects from {}", manifests.display())
    );
    let _ = lines.next();
    let _ = lines.next();
    let out = Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .args([
            "get",
            "widgets",
            "-n",
            "team",
            "-o",
            "jsonpath={.items[0].spec.size}",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "3");
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_fails_clearly_on_a_bad_manifest() {
    let dir = std::env::temp_dir().join(format!("kcache-serve-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("x.yaml"),
        "apiVersion: nope/v9\nkind: Thing\nmetadata:\n  name: t\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kcache"))
        .args(["serve", "--listen", "127.0.0.1:0", "--manifests"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("x.yaml: creating Thing \"t\""), "{err}");
    assert!(err.contains("does not serve Thing"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_adds_users_whose_kubeconfigs_rbac_governs() {
    let dir = std::env::temp_dir().join(format!("kcache-serve-users-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kcache"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--user",
            "alice:dev,ops",
        ])
        .arg("--write-kubeconfig")
        .arg(&kubeconfig)
        .arg("--permissions-report")
        .arg(dir.join("permissions.json"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("kcache starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let _listening = lines.next().unwrap().unwrap();
    let _admin = lines.next().unwrap().unwrap();
    let _try = lines.next().unwrap().unwrap();
    let alice_cfg = dir.join("alice.kubeconfig");
    assert_eq!(
        lines.next().unwrap().unwrap(),
        format!(
            "user alice (groups dev,ops,system:authenticated): kubeconfig written to {}",
            alice_cfg.display()
        )
    );
    let kubectl_as = |cfg: &std::path::Path, args: &[&str]| {
        Command::new(kubectl())
            .arg("--kubeconfig")
            .arg(cfg)
            .arg("--cache-dir")
            .arg(dir.join("cache"))
            .args(args)
            .output()
            .unwrap()
    };
    let out = kubectl_as(
        &alice_cfg,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "alice");
    let out = kubectl_as(&alice_cfg, &["get", "pods"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The admin binds the group `dev` to `view` in `default`; alice may list pods there.
    let out = kubectl_as(
        &kubeconfig,
        &[
            "create",
            "rolebinding",
            "dev-view",
            "--clusterrole=view",
            "--group=dev",
            "-n",
            "default",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = kubectl_as(
        &alice_cfg,
        &["auth", "can-i", "list", "pods", "-n", "default"],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "yes");
    let out = kubectl_as(
        &alice_cfg,
        &["auth", "can-i", "delete", "pods", "-n", "default"],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "no");
    let out = kubectl_as(&alice_cfg, &["get", "pods"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // On SIGTERM the server writes what each user did: alice's pod list, denied then allowed.
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("permissions.json")).unwrap()).unwrap();
    let alice = &report["users"]["alice"];
    assert_eq!(
        alice["groups"],
        serde_json::json!(["dev", "ops", "system:authenticated"])
    );
    let list_pods = alice["accesses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["verb"] == "list" && a["resource"] == "pods")
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(list_pods["namespace"], "default");
    assert_eq!(
        (&list_pods["allowed"], &list_pods["denied"]),
        (&serde_json::json!(true), &serde_json::json!(true)),
        "{list_pods}"
    );
    assert_eq!(report["dropped"], 0);
    let _ = std::fs::remove_dir_all(&dir);
}
