//! `kcache demo` end to end: the built binary, the embedded server over HTTP, churn, faults
//! and the verification.

use std::process::Command;

use serde_json::Value;

fn demo(args: &[&str]) -> (Option<i32>, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kcache"))
        .arg("demo")
        .args(args)
        .env_remove("KCACHE_DEMO_INJECT_DIVERGENCE")
        .output()
        .expect("kcache runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is one JSON object ({e}): {stdout}\nstderr: {stderr}"));
    (out.status.code(), json, stderr)
}

#[test]
fn demo_with_faults_stays_consistent_and_reports_its_figures_as_json() {
    let (code, s, stderr) = demo(&["--objects", "2000", "--duration", "5", "--json"]);
    assert_eq!(code, Some(0), "{s}\n{stderr}");
    assert_eq!(s["consistent"], true, "{s}");
    assert_eq!(s["difference_count"], 0, "{s}");
    assert_eq!(s["seeded"], 2000);
    let objects = s["objects"].as_u64().unwrap();
    assert!(objects > 0, "{s}");
    assert!(
        s["faults_injected"].as_u64().unwrap() > 0,
        "faults are on by default: {s}"
    );
    assert!(
        s["watch_restarts"].as_u64().unwrap() > 0,
        "dropped watches were re-opened: {s}"
    );
    assert!(s["events"].as_u64().unwrap() > 0, "{s}");
    assert!(s["writes"].as_u64().unwrap() > 0, "{s}");
    assert!(s["events_per_sec"].as_f64().unwrap() > 0.0, "{s}");
    assert!(s["peak_rss_bytes"].as_u64().unwrap() > 0, "{s}");
    // The cache's accounted bytes: a demo pod's bytes (labels, a container with env, status)
    // are well over 1 KB, and the per-object figure is the total over the objects.
    let (bytes, per_object) = (
        s["cache_bytes"].as_u64().unwrap(),
        s["cache_bytes_per_object"].as_u64().unwrap(),
    );
    assert!(per_object > 1_000, "{s}");
    assert!(
        per_object * objects <= bytes && bytes < (per_object + 1) * objects,
        "{s}"
    );
    for key in ["sync_ms", "relists"] {
        assert!(s[key].is_u64(), "{key} in {s}");
    }
    // Every handler handled at least the initial list.
    for h in s["handled"].as_array().unwrap() {
        assert!(h[1].as_u64().unwrap() >= 2000, "{s}");
    }
}

#[test]
fn demo_detects_an_event_dropped_inside_a_handler_and_exits_non_zero() {
    let (code, s, stderr) = demo(&[
        "--objects",
        "200",
        "--duration",
        "1",
        "--json",
        "--inject-divergence",
    ]);
    assert_eq!(code, Some(8), "{s}\n{stderr}");
    assert_eq!(s["consistent"], false, "{s}");
    let diffs: Vec<&str> = s["differences"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        diffs.iter().any(|d| d.starts_with("counting handler: ")),
        "the counting handler's loss is reported: {diffs:?}"
    );
    assert!(
        diffs.iter().all(|d| d.starts_with("counting handler: ")),
        "only the counting handler diverged: {diffs:?}"
    );
}

#[test]
fn demo_with_faults_off_injects_none_and_prints_a_summary_table() {
    let out = Command::new(env!("CARGO_BIN_EXE_kcache"))
        .args([
            "demo",
            "--objects",
            "100",
            "--duration",
            "1",
            "--faults",
            "off",
        ])
        .output()
        .expect("kcache runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("kcache demo — summary\n"), "{stdout}");
    let row = |name: &str| {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row in {stdout}"))
            .to_owned()
    };
    assert!(
        row("faults survived").contains("0 (faults off)"),
        "{stdout}"
    );
    assert!(row("verdict").contains("CONSISTENT"), "{stdout}");
    assert!(row("peak RSS").contains("MiB"), "{stdout}");
}

/// GET `path` on `addr` with a plain HTTP/1.1 request: (status code, body), or `None` when
/// nothing listens yet.
fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes())
        .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    Some((head.split(' ').nth(1)?.parse().ok()?, body.to_owned()))
}

#[test]
fn demo_serves_metrics_and_readiness_while_it_runs() {
    // A free port for the demo's metrics, picked below the kernel's ephemeral range (32768 and
    // up) so that no port-0 bind (the demo's own embedded server's included) takes it first.
    let addr = loop {
        let addr = format!("127.0.0.1:{}", 20_000 + rand::random::<u16>() % 12_000);
        if std::net::TcpListener::bind(&addr).is_ok() {
            break addr;
        }
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_kcache"))
        .args([
            "demo",
            "--objects",
            "300",
            "--duration",
            "6",
            "--json",
            "--metrics-addr",
            &addr,
        ])
        .env_remove("KCACHE_DEMO_INJECT_DIVERGENCE")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kcache runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut ready = None;
    while std::time::Instant::now() < deadline {
        if let Some((200, body)) = http_get(&addr, "/readyz") {
            ready = Some(body);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let ready = ready.unwrap_or_else(|| {
        let _ = child.kill();
        panic!("/readyz never answered 200 on {addr}")
    });
    assert!(ready.contains("[+]informer pods ok"), "{ready}");
    let (code, metrics) = http_get(&addr, "/metrics").expect("/metrics answers");
    assert_eq!(code, 200);
    let sample = metrics
        .lines()
        .find(|l| l.starts_with("kcache_informer_objects{resource=\"pods\"}"))
        .unwrap_or_else(|| panic!("no objects gauge in {metrics}"));
    let objects: f64 = sample.rsplit(' ').next().unwrap().parse().unwrap();
    // Churn creates and deletes pods; the cache holds about the 300 seeded.
    assert!(objects >= 150.0, "{sample}");
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
