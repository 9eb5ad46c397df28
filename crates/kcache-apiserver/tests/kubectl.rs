//! Drives the real `kubectl` installed on the machine against the embedded server:
//! create / apply / get / patch / label / delete of configmaps and pods, `get -w` seeing an
//! update, and a Deployment created (protobuf), scaled, patched and deleted. Fails (never
//! skips) when kubectl is missing; set `KUBECTL` to use a different binary.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;

use kcache_apiserver::ApiServer;
use serde_json::{Value, json};

fn kubectl_bin() -> PathBuf {
    let bin = PathBuf::from(std::env::var("KUBECTL").unwrap_or_else(|_| "/usr/bin/kubectl".into()));
    assert!(
        bin.exists(),
        "kubectl not found at {} (set KUBECTL): this test must not be skipped",
        bin.display()
    );
    bin
}

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    cache: PathBuf,
    dir: PathBuf,
}

impl Kubectl {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache);
        c.args(args);
        c
    }

    /// Runs kubectl; returns stdout, panicking with stderr on failure.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.command(args).output().expect("kubectl runs");
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl expecting failure; returns stderr.
    fn fails(&self, args: &[&str]) -> String {
        let out = self.command(args).output().expect("kubectl runs");
        assert!(
            !out.status.success(),
            "kubectl {args:?} unexpectedly succeeded"
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&a)).expect("kubectl printed JSON")
    }

    /// Starts `kubectl <args> -w --output-watch-events -o json`; its events arrive on the
    /// receiver, one JSON value each.
    fn watch(
        &self,
        args: &[&str],
    ) -> (
        std::process::Child,
        mpsc::Receiver<Value>,
        std::thread::JoinHandle<()>,
    ) {
        let mut a = args.to_vec();
        a.extend(["-w", "--output-watch-events", "-o", "json"]);
        let mut child = self
            .command(&a)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (tx, rx) = mpsc::channel::<Value>();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut buf = String::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                buf.push_str(&line);
                buf.push('\n');
                if let Ok(v) = serde_json::from_str::<Value>(&buf) {
                    buf.clear();
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            }
        });
        (child, rx, reader)
    }

    fn file(&self, name: &str, content: &Value) -> String {
        let p = self.dir.join(name);
        std::fs::write(&p, serde_json::to_vec_pretty(content).unwrap()).unwrap();
        p.to_string_lossy().into_owned()
    }
}

fn scratch_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("kcache-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run_blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> tokio::task::JoinHandle<T> {
    tokio::task::spawn_blocking(f)
}

fn setup(dir: &Path, server: &kcache_apiserver::RunningServer) -> Kubectl {
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    Kubectl {
        bin: kubectl_bin(),
        kubeconfig,
        cache: dir.join("cache"),
        dir: dir.to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_applies_patches_watches_and_deletes_configmaps_and_pods() {
    // No token: kubectl (client-go) never sends bearer tokens over plain HTTP.
    let server = ApiServer::builder().build().start().await.unwrap();
    let dir = scratch_dir();
    let k = setup(&dir, &server);
    run_blocking(move || {
        // version and discovery
        let v = k.ok(&["version", "-o", "json"]);
        assert!(v.contains("v1.36.5-kcache"), "{v}");

        // create from a file, then read it back
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "demo", "labels": {"app": "demo"}}, "data": {"a": "1"}});
        let f = k.file("cm.json", &cm);
        assert!(k.ok(&["create", "-f", &f]).contains("configmap/demo created"));
        assert!(k.fails(&["create", "-f", &f]).contains("AlreadyExists"));
        let got = k.json(&["get", "configmap", "demo"]);
        assert_eq!(got["data"]["a"], "1");
        assert!(got["metadata"]["uid"].is_string());

        // apply: unchanged, then configured
        assert!(k.ok(&["apply", "-f", &f]).contains("configmap/demo"));
        assert!(k.ok(&["apply", "-f", &f]).contains("unchanged"));
        let mut changed = cm.clone();
        changed["data"]["a"] = json!("2");
        let f2 = k.file("cm2.json", &changed);
        assert!(k.ok(&["apply", "-f", &f2]).contains("configured"));
        assert_eq!(k.json(&["get", "cm", "demo"])["data"]["a"], "2");

        // patches and labels
        k.ok(&["patch", "configmap", "demo", "-p", r#"{"data":{"b":"x"}}"#]);
        k.ok(&["patch", "configmap", "demo", "--type=merge", "-p", r#"{"data":{"c":"y"}}"#]);
        k.ok(&["patch", "configmap", "demo", "--type=json", "-p", r#"[{"op":"remove","path":"/data/b"}]"#]);
        k.ok(&["label", "configmap", "demo", "tier=gold"]);
        let got = k.json(&["get", "cm", "demo"]);
        assert_eq!(got["data"], json!({"a": "2", "c": "y"}));
        assert_eq!(got["metadata"]["labels"]["tier"], "gold");

        // table output and selectors
        let table = k.ok(&["get", "configmaps", "-l", "tier=gold"]);
        assert!(table.contains("NAME") && table.contains("demo"), "{table}");
        assert!(k.ok(&["get", "configmaps", "-l", "tier=silver"]).is_empty());

        // get -w sees an update made while it runs
        let (mut watch, rx, reader) = k.watch(&["get", "configmap", "demo"]);
        let first = rx.recv().unwrap();
        assert_eq!(first["type"], "ADDED");
        k.ok(&["patch", "configmap", "demo", "-p", r#"{"data":{"watched":"yes"}}"#]);
        let update = loop {
            let e = rx.recv().expect("kubectl get -w printed the update");
            if e["type"] == "MODIFIED" {
                break e;
            }
        };
        assert_eq!(update["object"]["data"]["watched"], "yes");
        watch.kill().unwrap();
        let _ = watch.wait();
        let _ = reader.join();

        // pods
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
                         "spec": {"containers": [
                             {"name": "c", "image": "registry.k8s.io/pause:3.10", "ports": [{"containerPort": 80}]},
                             {"name": "sidecar", "image": "busybox:1", "args": ["sleep", "1d"]}]}});
        let pf = k.file("pod.json", &pod);
        assert!(k.ok(&["apply", "-f", &pf]).contains("pod/web created"));
        // re-apply with one image changed: kubectl sends a strategic merge patch
        let mut newer = pod.clone();
        newer["spec"]["containers"][0]["image"] = json!("registry.k8s.io/pause:3.11");
        let pf2 = k.file("pod2.json", &newer);
        assert!(k.ok(&["apply", "-f", &pf2]).contains("pod/web configured"));
        let got = k.json(&["get", "pod", "web"]);
        assert_eq!(got["spec"]["containers"], newer["spec"]["containers"], "containers merged by name");
        assert_eq!(got["metadata"]["generation"], 2);
        let pods = k.ok(&["get", "pods"]);
        assert!(pods.contains("web") && pods.contains("Pending"), "{pods}");
        k.ok(&["label", "pod", "web", "role=frontend"]);
        assert_eq!(k.json(&["get", "pod", "web"])["metadata"]["labels"]["role"], "frontend");
        assert!(k.ok(&["delete", "pod", "web"]).contains("deleted"));
        assert!(k.fails(&["get", "pod", "web"]).contains("NotFound"));

        // typed generators send protobuf bodies
        assert!(k.ok(&["create", "namespace", "team-a"]).contains("namespace/team-a created"));
        k.ok(&["create", "configmap", "gen", "-n", "team-a", "--from-literal=x=1", "--from-literal=y=2"]);
        k.ok(&["create", "secret", "generic", "sec", "-n", "team-a", "--from-literal=p=q"]);
        assert_eq!(k.json(&["get", "cm", "gen", "-n", "team-a"])["data"], json!({"x": "1", "y": "2"}));
        assert_eq!(k.json(&["get", "secret", "sec", "-n", "team-a"])["data"]["p"], "cQ==");
        assert!(k.ok(&["delete", "namespace", "team-a"]).contains("deleted"));
        assert!(k.fails(&["get", "cm", "gen", "-n", "team-a"]).contains("not found"));

        // delete the configmap
        assert!(k.ok(&["delete", "configmap", "demo"]).contains("deleted"));
        assert!(k.fails(&["get", "configmap", "demo"]).contains("not found"));
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_scales_updates_and_deletes_a_deployment() {
    let server = ApiServer::builder().build().start().await.unwrap();
    let dir = scratch_dir().join("apps");
    std::fs::create_dir_all(&dir).unwrap();
    let k = setup(&dir, &server);
    run_blocking(move || {
        // `kubectl create deployment` sends an apps/v1 Deployment as protobuf.
        let out = k.ok(&[
            "create",
            "deployment",
            "web",
            "--image=nginx:1.27",
            "--replicas=2",
        ]);
        assert!(out.contains("deployment.apps/web created"), "{out}");
        let d = k.json(&["get", "deployment", "web"]);
        assert_eq!(d["spec"]["replicas"], 2);
        assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
        assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "web");
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        assert_eq!(d["metadata"]["generation"], 1);
        // the scale subresource
        assert!(
            k.ok(&["scale", "deployment", "web", "--replicas=4"])
                .contains("scaled")
        );
        let d = k.json(&["get", "deploy", "web"]);
        assert_eq!(d["spec"]["replicas"], 4);
        assert_eq!(d["metadata"]["generation"], 2);
        // a strategic merge patch of the template (containers merged by name)
        assert!(
            k.ok(&["set", "image", "deployment/web", "nginx=nginx:1.28"])
                .contains("image updated")
        );
        let d = k.json(&["get", "deploy", "web"]);
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:1.28"
        );
        assert_eq!(d["metadata"]["generation"], 3);
        let listed = k.ok(&["get", "deployments"]);
        assert!(listed.contains("web"), "{listed}");
        assert!(k.ok(&["delete", "deployment", "web"]).contains("deleted"));
        assert!(k.fails(&["get", "deployment", "web"]).contains("NotFound"));
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_a_crd_and_a_custom_resource_and_watches_it() {
    let server = ApiServer::builder().build().start().await.unwrap();
    let dir = scratch_dir().join("crd");
    std::fs::create_dir_all(&dir).unwrap();
    let k = setup(&dir, &server);
    run_blocking(move || {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}
        });
        let f = k.file("crd.json", &crd);
        let out = k.ok(&["apply", "-f", &f]);
        assert!(out.contains("customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"), "{out}");
        let got = k.json(&["get", "crd", "widgets.example.com"]);
        assert_eq!(got["status"]["acceptedNames"]["kind"], "Widget");
        let w = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w1"}, "spec": {"size": 1, "unknown": true}});
        let wf = k.file("w1.json", &w);
        // kubectl validates strictly by default: the unknown field is refused, as upstream.
        let err = k.fails(&["apply", "-f", &wf]);
        assert!(err.contains(r#"strict decoding error: unknown field "spec.unknown""#), "{err}");
        assert!(k.ok(&["apply", "--validate=warn", "-f", &wf]).contains("widget.example.com/w1 created"));
        let got = k.json(&["get", "widget", "w1"]);
        assert_eq!(got["spec"], json!({"size": 1}), "unknown fields pruned");
        assert!(k.ok(&["get", "wd"]).contains("w1"), "short name");

        let (mut watch, rx, reader) = k.watch(&["get", "widgets", "w1"]);
        assert_eq!(rx.recv().unwrap()["type"], "ADDED");
        let mut changed = w.clone();
        changed["spec"]["size"] = json!(2);
        let wf = k.file("w1.json", &changed);
        assert!(k.ok(&["apply", "-f", &wf]).contains("configured"));
        let update = loop {
            let e = rx.recv().expect("kubectl get -w printed the update");
            if e["type"] == "MODIFIED" {
                break e;
            }
        };
        assert_eq!(update["object"]["spec"]["size"], 2);
        assert_eq!(update["object"]["metadata"]["generation"], 2);
        watch.kill().unwrap();
        let _ = watch.wait();
        let _ = reader.join();

        assert!(k.ok(&["delete", "crd", "widgets.example.com"]).contains("deleted"));
        let err = k.fails(&["get", "widgets"]);
        // Not served any more (kubectl's cached discovery may still name the resource).
        assert!(
            err.contains("the server doesn't have a resource type")
                || err.contains("the server could not find the requested resource"),
            "{err}"
        );
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    server.shutdown().await;
}
