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
    assert!(
        first.starts_with("kcache API server listening on http://127.0.0.1:"),
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
