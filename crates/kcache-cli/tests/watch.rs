//! `kcache watch` end to end against the embedded API server (and, for 403, a tiny server
//! that forbids everything): the event stream and each documented error with its exit code.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use kcache_apiserver::{ApiServer, RunningServer, kubeconfig_yaml};
use serde_json::json;

/// A safety net against a hung child, not a speed assertion.
const HANG: Duration = Duration::from_secs(120);

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("kcache-watch-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
    fn file(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, contents).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn kcache(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kcache"));
    cmd.args(args)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("RUST_LOG");
    cmd
}

/// Runs `kcache watch ARGS --kubeconfig PATH` to completion: (exit code, stderr).
fn watch_fails(args: &[&str], kubeconfig: Option<&Path>) -> (Option<i32>, String) {
    let mut cmd = kcache(&[&["watch"], args].concat());
    if let Some(k) = kubeconfig {
        cmd.arg("--kubeconfig").arg(k);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr)
}

fn lines_of(read: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(read).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn interrupt(child: &mut Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

async fn server() -> RunningServer {
    ApiServer::builder().build().start().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prints_added_modified_deleted_for_a_create_update_delete() {
    let server = server().await;
    let dir = TempDir::new("events");
    let kubeconfig = dir.0.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    // `cm` is the short name: resolved through discovery.
    let mut child = kcache(&["watch", "cm", "-n", "default", "--kubeconfig"])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = lines_of(child.stdout.take().unwrap());
    let stderr = lines_of(child.stderr.take().unwrap());
    let synced = tokio::task::spawn_blocking(move || {
        stderr
            .iter()
            .find(|l| l.starts_with("synced "))
            .expect("a sync line before stderr closes")
    })
    .await
    .unwrap();
    assert!(synced.starts_with("synced 0 configmaps in "), "{synced}");

    let h = server.handle();
    let created = h
        .create(
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": "web"}, "data": {"k": "1"}}),
        )
        .unwrap();
    let mut changed = created.clone();
    changed["data"]["k"] = json!("2");
    let updated = h
        .update("/api/v1/namespaces/default/configmaps/web", changed)
        .unwrap();
    h.delete("/api/v1/namespaces/default/configmaps/web")
        .unwrap();

    let rows: Vec<Vec<String>> = tokio::task::spawn_blocking(move || {
        (0..4)
            .map(|_| {
                let line = stdout.recv_timeout(HANG).expect("a line");
                line.split_whitespace().map(str::to_owned).collect()
            })
            .collect()
    })
    .await
    .unwrap();
    assert_eq!(rows[0], ["EVENT", "NAMESPACE", "NAME", "RV", "AGE"]);
    let rv = |v: &serde_json::Value| {
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(rows[1][..4], ["ADDED", "default", "web", &rv(&created)]);
    assert_eq!(rows[2][..4], ["MODIFIED", "default", "web", &rv(&updated)]);
    assert_eq!(rows[3][..3], ["DELETED", "default", "web"]);
    assert!(rows[3][3].parse::<u64>().unwrap() > rv(&updated).parse::<u64>().unwrap());
    assert!(rows[1][4].ends_with('s'), "AGE in seconds: {:?}", rows[1]);

    interrupt(&mut child);
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "Ctrl-C ends the watch cleanly: {status:?}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_json_output_prints_watch_events_across_namespaces() {
    let server = server().await;
    let dir = TempDir::new("json");
    let kubeconfig = dir.0.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    server
        .handle()
        .create(
            "/api/v1/namespaces/kube-system/pods",
            json!({"metadata": {"name": "early"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}),
        )
        .unwrap();
    let mut child = kcache(&["watch", "po", "-A", "-o", "json", "--kubeconfig"])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = lines_of(child.stdout.take().unwrap());
    let first: serde_json::Value = tokio::task::spawn_blocking(move || {
        serde_json::from_str(&stdout.recv_timeout(HANG).expect("a line")).unwrap()
    })
    .await
    .unwrap();
    assert_eq!(
        first["type"], "ADDED",
        "the initial list is printed: {first}"
    );
    assert_eq!(first["object"]["metadata"]["namespace"], "kube-system");
    assert_eq!(first["object"]["metadata"]["name"], "early");
    assert_eq!(first["object"]["kind"], "Pod");
    interrupt(&mut child);
    assert!(child.wait().unwrap().success());
    server.shutdown().await;
}

#[test]
fn missing_kubeconfig_file_exits_3_naming_the_file() {
    let (code, stderr) = watch_fails(&["pods"], Some(Path::new("/nonexistent/kcache/kubeconfig")));
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "error: cannot read kubeconfig /nonexistent/kcache/kubeconfig: the file does not exist"
    );
}

#[test]
fn no_configuration_at_all_exits_3() {
    let home = TempDir::new("home");
    let out = kcache(&["watch", "pods"])
        .env_remove("KUBECONFIG")
        .env("HOME", &home.0)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "error: no Kubernetes configuration found: set KUBECONFIG, create ~/.kube/config or pass --kubeconfig"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_context_exits_3() {
    let server = server().await;
    let dir = TempDir::new("context");
    let kubeconfig = dir.file("kubeconfig", &server.kubeconfig());
    let (code, stderr) = watch_fails(&["pods", "--context", "nope"], Some(&kubeconfig));
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("context \"nope\""), "{stderr}");
}

#[test]
fn unreachable_server_exits_4() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }; // closed again: nothing listens there
    let dir = TempDir::new("unreachable");
    let url = format!("http://127.0.0.1:{port}");
    let kubeconfig = dir.file("kubeconfig", &kubeconfig_yaml(&url, None));
    let (code, stderr) = watch_fails(&["pods"], Some(&kubeconfig));
    assert_eq!(code, Some(4), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "error: cannot connect to the API server at {url}: "
        )),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "one sentence: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_token_exits_5() {
    let server = ApiServer::builder()
        .token("right-token")
        .build()
        .start()
        .await
        .unwrap();
    let dir = TempDir::new("401");
    let kubeconfig = dir.file(
        "kubeconfig",
        &kubeconfig_yaml(&server.url(), Some("wrong-token")),
    );
    let (code, stderr) = watch_fails(&["pods"], Some(&kubeconfig));
    assert_eq!(code, Some(5), "{stderr}");
    assert!(
        stderr.contains("rejected the credentials (401 Unauthorized)"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("wrong-token"),
        "never print the token: {stderr}"
    );
    server.shutdown().await;
}

/// Answers every request with `head` (status line and headers, without Content-Length) and
/// `body`, then closes the connection.
fn answering_server(head: &str, body: Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let head = format!(
        "{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        head.trim_end(),
        body.len()
    );
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    url
}

/// Answers every request with 403 Forbidden and a Kubernetes Status.
fn forbidding_server() -> String {
    let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden: User \"system:anonymous\" cannot get path \"/api\"","reason":"Forbidden","details":{},"code":403}"#;
    answering_server(
        "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json",
        body.as_bytes().to_vec(),
    )
}

/// `kcache watch pods` against a server answering every request with `head` and `body`:
/// (exit code, stderr).
fn watch_against(tag: &str, head: &str, body: Vec<u8>) -> (Option<i32>, String) {
    let url = answering_server(head, body);
    let dir = TempDir::new(tag);
    let kubeconfig = dir.file("kubeconfig", &kubeconfig_yaml(&url, None));
    watch_fails(&["pods"], Some(&kubeconfig))
}

/// One line, nothing raw: no control character but the final newline, no U+FFFD.
fn assert_one_clean_line(stderr: &str) {
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "one sentence: {stderr}"
    );
    assert!(
        !stderr
            .trim_end()
            .chars()
            .any(|c| c.is_control() || c == '\u{fffd}'),
        "raw bytes in {stderr:?}"
    );
}

#[test]
fn discovery_answering_garbage_exits_9_saying_not_json() {
    let (code, stderr) = watch_against(
        "garbage",
        "HTTP/1.1 200 OK\r\nContent-Type: text/html",
        b"<html>\x1b[31mWelcome to the captive portal</html>".to_vec(),
    );
    assert_eq!(code, Some(9), "{stderr}");
    assert!(stderr.starts_with("error: the API server at "), "{stderr}");
    assert!(stderr.contains("is not JSON"), "{stderr}");
    assert!(
        stderr.contains("Welcome to the captive portal"),
        "an excerpt: {stderr}"
    );
    assert!(stderr.contains("\\u{1b}"), "the escape, escaped: {stderr}");
    assert!(!stderr.contains("cannot connect"), "{stderr}");
    assert_one_clean_line(&stderr);
}

#[test]
fn discovery_redirected_exits_9_naming_the_location() {
    let (code, stderr) = watch_against(
        "redirect",
        "HTTP/1.1 302 Found\r\nContent-Type: text/html\r\nLocation: https://login.example.com/sso?session=s3cr3t",
        b"<a href=\"https://login.example.com/sso?session=s3cr3t\">Found</a>".to_vec(),
    );
    assert_eq!(code, Some(9), "{stderr}");
    assert!(
        stderr.contains("redirected get /api to https://login.example.com/sso"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("s3cr3t"),
        "the query may hold credentials: {stderr}"
    );
    assert!(!stderr.contains("cannot connect"), "{stderr}");
    assert_one_clean_line(&stderr);
}

#[test]
fn discovery_500_with_a_binary_body_exits_9_without_raw_bytes() {
    let (code, stderr) = watch_against(
        "binary",
        "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/octet-stream",
        (0..=255u8).cycle().take(4096).collect(),
    );
    assert_eq!(code, Some(9), "{stderr}");
    assert!(stderr.contains("HTTP status 500"), "{stderr}");
    assert!(stderr.contains("binary body, 4096 bytes"), "{stderr}");
    assert!(!stderr.contains("cannot connect"), "{stderr}");
    assert_one_clean_line(&stderr);
}

#[test]
fn forbidden_exits_6_with_the_servers_reason() {
    let url = forbidding_server();
    let dir = TempDir::new("403");
    let kubeconfig = dir.file("kubeconfig", &kubeconfig_yaml(&url, None));
    let (code, stderr) = watch_fails(&["pods"], Some(&kubeconfig));
    assert_eq!(code, Some(6), "{stderr}");
    assert!(stderr.contains("(403 Forbidden)"), "{stderr}");
    assert!(stderr.contains("cannot get path"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_resource_exits_7() {
    let server = server().await;
    let dir = TempDir::new("unknown");
    let kubeconfig = dir.file("kubeconfig", &server.kubeconfig());
    let (code, stderr) = watch_fails(&["frobnicators"], Some(&kubeconfig));
    assert_eq!(code, Some(7), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "error: the server doesn't have a resource type \"frobnicators\""
    );
    server.shutdown().await;
}

#[test]
fn bad_command_line_exits_2() {
    let out = kcache(&["watch", "pods", "-n", "a", "-A"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `--initial-list list|stream|auto`: each syncs and ends cleanly on Ctrl-C; anything else is a
/// usage error naming the choices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_initial_list_strategy_syncs_and_a_bad_one_is_a_usage_error() {
    let server = server().await;
    let dir = TempDir::new("initial-list");
    let kubeconfig = dir.0.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    for strategy in ["list", "stream", "auto"] {
        let mut child = kcache(&["watch", "cm", "-n", "default", "--initial-list", strategy])
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = lines_of(child.stderr.take().unwrap());
        let synced =
            tokio::task::spawn_blocking(move || stderr.iter().find(|l| l.starts_with("synced ")))
                .await
                .unwrap();
        assert!(
            synced.is_some_and(|l| l.starts_with("synced 0 configmaps in ")),
            "--initial-list {strategy}: no sync line"
        );
        interrupt(&mut child);
        assert!(child.wait().unwrap().success(), "--initial-list {strategy}");
    }
    let (code, stderr) = watch_fails(&["cm", "--initial-list", "watchlist"], Some(&kubeconfig));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("list, stream or auto"), "{stderr}");
    server.shutdown().await;
}
