//! `kcache bench`'s argument checks, through the real binary.
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
