//! `kcache bench`'s and `kcache bench-authz`'s argument checks and a small run, through the
//! real binary.
use std::process::Command;

#[test]
fn keep_dataset_is_refused_on_the_embedded_server() {
    let out = Command::new(env!("CARGO_BIN_EXE_kcache"))
        .args(["bench", "--keep-dataset", "--objects", "10"])
        .output()
        .expect("running kcache");
    assert!(
        !out.status.success(),
        "kcache bench --keep-dataset on the embedded server succeeded"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--keep-dataset needs --server kubeconfig"),
        "unexpected stderr: {stderr}"
    );
}

#[test]
fn bench_authz_reports_the_three_callers_and_the_cost() {
    let out = Command::new(env!("CARGO_BIN_EXE_kcache"))
        .args(["bench-authz", "--requests", "30", "--runs", "1"])
        .output()
        .expect("running kcache");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kcache bench-authz failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "admin (system:masters)",
        "alice, RBAC on",
        "alice, authorization off",
        "µs per request",
    ] {
        assert!(stdout.contains(line), "no {line:?} in:\n{stdout}");
    }
}

#[test]
fn bench_authz_refuses_zero_requests() {
    let out = Command::new(env!("CARGO_BIN_EXE_kcache"))
        .args(["bench-authz", "--requests", "0"])
        .output()
        .expect("running kcache");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--requests and --runs must be at least 1")
    );
}
