//! `kcache bench-operator` at a tiny size against the upstream kube-apiserver, with all three
//! peers: each must reach the full reconcile (every Team's ConfigMap holding its namespace's
//! Pod count, checked on the server by the driver) and go through the update phase.
//!
//! Needs `KCACHE_UPSTREAM_KUBECONFIG` (scripts/kube-up.sh's env file): without it the test
//! fails, never skips silently; only `KCACHE_UPSTREAM=skip` skips it, with a line on stderr.
//! Needs the peers: `operator-peer` beside the `kcache` binary (`cargo build -p
//! operator-peer`) and `controller-runtime-peer`, built (or found cached) here with
//! `scripts/build-harness.sh controller-runtime-peer`.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

fn upstream_kubeconfig() -> Option<PathBuf> {
    match std::env::var("KCACHE_UPSTREAM") {
        Ok(v) if v == "skip" => {
            eprintln!("SKIPPED: bench-operator upstream test, because KCACHE_UPSTREAM=skip");
            return None;
        }
        Ok(v) if !v.is_empty() => panic!("KCACHE_UPSTREAM={v:?}: the only value is `skip`"),
        _ => {}
    }
    let path = std::env::var_os("KCACHE_UPSTREAM_KUBECONFIG").expect(
        "this test needs the upstream kube-apiserver: run scripts/kube-up.sh and source its env \
         file, or set KCACHE_UPSTREAM=skip to skip it on purpose",
    );
    Some(path.into())
}

fn controller_runtime_peer() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("bash")
        .arg(root.join("scripts/build-harness.sh"))
        .arg("controller-runtime-peer")
        .output()
        .expect("running scripts/build-harness.sh");
    assert!(
        out.status.success(),
        "building controller-runtime-peer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// Builds operator-peer into the `kcache` binary's target directory and profile (`cargo test`
/// builds only this package's binaries).
fn build_operator_peer(kcache: &Path) {
    let profile_dir = kcache.parent().expect("a target profile directory");
    let target_dir = profile_dir.parent().expect("a target directory");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", "operator-peer"])
        .env("CARGO_TARGET_DIR", target_dir);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd.status().expect("running cargo build -p operator-peer");
    assert!(
        status.success(),
        "cargo build -p operator-peer failed: {status}"
    );
}

#[test]
fn tiny_run_reconciles_with_all_three_peers() {
    let Some(kubeconfig) = upstream_kubeconfig() else {
        return;
    };
    let kcache = PathBuf::from(env!("CARGO_BIN_EXE_kcache"));
    let operator_peer = kcache.with_file_name("operator-peer");
    if !operator_peer.is_file() {
        build_operator_peer(&kcache);
    }
    assert!(
        operator_peer.is_file(),
        "{} is missing: cargo build -p operator-peer (same target dir and profile)",
        operator_peer.display()
    );
    let go_peer = controller_runtime_peer();
    let out = std::env::temp_dir().join(format!("bench-operator-test-{}", std::process::id()));
    let status = Command::new(&kcache)
        .arg("bench-operator")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--n", "200", "--teams", "10", "--namespaces", "5"])
        // Its own namespaces: the bench smoke runs `op-smoke` on the same server later.
        .args(["--namespace", &format!("op-test-{}", std::process::id())])
        .args(["--runs", "1", "--updates", "50"])
        .args(["--update-rate", "200", "--timeout", "180s", "--cleanup"])
        .arg("--operator-peer")
        .arg(&operator_peer)
        .arg("--controller-runtime-peer")
        .arg(&go_peer)
        .arg("--out")
        .arg(&out)
        .status()
        .expect("running kcache bench-operator");
    assert!(status.success(), "kcache bench-operator failed: {status}");
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    let runs = results["runs"].as_array().expect("runs");
    let mut peers: Vec<&str> = runs.iter().map(|r| r["peer"].as_str().unwrap()).collect();
    peers.sort_unstable();
    assert_eq!(
        peers,
        ["controller-runtime", "kcache-runtime", "kube-runtime"]
    );
    for run in runs {
        let peer = &run["peer"];
        assert_eq!(
            run["verified_teams"], 10,
            "{peer}: teams verified on the server"
        );
        let line = &run["line"];
        assert!(
            line["full_reconcile_ms"]
                .as_f64()
                .is_some_and(|ms| ms > 0.0),
            "{peer}: {line}"
        );
        assert!(
            line["update_events"].as_u64().is_some_and(|n| n >= 50),
            "{peer}: {line}"
        );
        assert!(
            line["requests_sync"].as_u64().is_some_and(|n| n >= 10),
            "{peer}: {line}"
        );
        // Every peer tells the watches among its update phase's requests.
        let (all, watches) = (&line["requests_update"], &line["watches_update"]);
        assert!(
            watches
                .as_u64()
                .zip(all.as_u64())
                .is_some_and(|(w, a)| w <= a),
            "{peer}: {line}"
        );
    }
    assert!(
        std::fs::read_to_string(out.join("results.md"))
            .unwrap()
            .contains("kcache-runtime")
    );
    // `--cleanup` keeps the namespaces: a second run with the same prefix loads its Pods
    // there again (deleted namespaces stay Terminating on a server without a namespace
    // controller, and refuse new content).
    let again = Command::new(&kcache)
        .arg("bench-operator")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--n", "20", "--teams", "5", "--namespaces", "5"])
        .args(["--namespace", &format!("op-test-{}", std::process::id())])
        .args(["--runs", "1", "--updates", "5", "--peers", "kcache-runtime"])
        .args(["--update-rate", "200", "--timeout", "120s", "--cleanup"])
        .arg("--operator-peer")
        .arg(&operator_peer)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("running kcache bench-operator again");
    assert!(
        again.status.success(),
        "a second run on the same namespaces failed: {}",
        String::from_utf8_lossy(&again.stderr)
    );
    let _ = std::fs::remove_dir_all(&out);
}
