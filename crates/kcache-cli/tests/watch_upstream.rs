//! `kcache watch` against the upstream kube-apiserver (TLS, bearer tokens, RBAC), described by
//! the `KCACHE_UPSTREAM_*` variables that `scripts/kube-up.sh` writes and `scripts/test.sh`
//! exports. Without `KCACHE_UPSTREAM_KUBECONFIG` these tests fail; they never skip silently:
//! only `KCACHE_UPSTREAM=skip` (`scripts/quick-test.sh`) skips them, each with a line on stderr.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A safety net against a hung child, not a speed assertion.
const HANG: Duration = Duration::from_secs(120);

struct Upstream {
    kubeconfig: PathBuf,
    alice_kubeconfig: PathBuf,
    url: String,
    ca: PathBuf,
}

/// The upstream server these tests need. Without it they fail — never a silent pass; `None`
/// (skipped, said on stderr past the output capture) only under `KCACHE_UPSTREAM=skip`.
fn upstream() -> Option<Upstream> {
    match std::env::var("KCACHE_UPSTREAM") {
        Ok(v) if v == "skip" => {
            use std::io::Write as _;
            let thread = std::thread::current();
            let test = thread.name().unwrap_or("this test");
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: {test} (upstream-only), because KCACHE_UPSTREAM=skip"
            );
            return None;
        }
        Ok(v) if !v.is_empty() => panic!("KCACHE_UPSTREAM={v:?}: the only value is `skip`"),
        _ => {}
    }
    assert!(
        std::env::var_os("KCACHE_UPSTREAM_KUBECONFIG").is_some(),
        "these tests need the upstream kube-apiserver: run scripts/kube-up.sh and source its env \
         file (scripts/test.sh does), or set KCACHE_UPSTREAM=skip to skip them on purpose"
    );
    let var = |name: &str| {
        std::env::var_os(name).unwrap_or_else(|| {
            panic!("the upstream kube-apiserver is requested but {name} is not set: run scripts/kube-up.sh and source its env file")
        })
    };
    Some(Upstream {
        kubeconfig: var("KCACHE_UPSTREAM_KUBECONFIG").into(),
        alice_kubeconfig: var("KCACHE_UPSTREAM_ALICE_KUBECONFIG").into(),
        url: var("KCACHE_UPSTREAM_URL").into_string().unwrap(),
        ca: var("KCACHE_UPSTREAM_CA").into(),
    })
}

fn kubectl(kubeconfig: &PathBuf, args: &[&str]) -> String {
    let bin = std::env::var("KUBECTL").unwrap_or_else(|_| "/usr/bin/kubectl".into());
    let out = Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn kcache() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kcache"));
    cmd.env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("RUST_LOG");
    cmd
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

#[test]
fn watch_streams_a_create_update_delete_from_the_upstream_kube_apiserver() {
    let Some(up) = upstream() else { return };
    let ns = format!("kcache-cli-watch-{}", std::process::id());
    kubectl(&up.kubeconfig, &["create", "namespace", &ns]);
    let mut child = kcache()
        .args([
            "watch",
            "configmaps",
            "-n",
            &ns,
            "--field-selector",
            "metadata.name=web",
        ])
        .arg("--kubeconfig")
        .arg(&up.kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = lines_of(child.stdout.take().unwrap());
    let stderr = lines_of(child.stderr.take().unwrap());
    let synced = stderr
        .iter()
        .find(|l| l.starts_with("synced "))
        .expect("a sync line");
    assert!(synced.starts_with("synced 0 configmaps in "), "{synced}");

    let rv = "jsonpath={.metadata.resourceVersion}";
    let created = kubectl(
        &up.kubeconfig,
        &[
            "create",
            "configmap",
            "web",
            "-n",
            &ns,
            "--from-literal=k=1",
            "-o",
            rv,
        ],
    );
    let patched = kubectl(
        &up.kubeconfig,
        &[
            "patch",
            "configmap",
            "web",
            "-n",
            &ns,
            "--type=merge",
            "-p",
            r#"{"data":{"k":"2"}}"#,
            "-o",
            rv,
        ],
    );
    kubectl(&up.kubeconfig, &["delete", "configmap", "web", "-n", &ns]);

    let rows: Vec<Vec<String>> = (0..4)
        .map(|_| {
            let line = stdout.recv_timeout(HANG).expect("a line");
            line.split_whitespace().map(str::to_owned).collect()
        })
        .collect();
    assert_eq!(rows[0], ["EVENT", "NAMESPACE", "NAME", "RV", "AGE"]);
    assert_eq!(
        rows[1][..4],
        ["ADDED", ns.as_str(), "web", created.as_str()]
    );
    assert_eq!(
        rows[2][..4],
        ["MODIFIED", ns.as_str(), "web", patched.as_str()]
    );
    assert_eq!(rows[3][..3], ["DELETED", ns.as_str(), "web"]);

    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success());
    kubectl(
        &up.kubeconfig,
        &["delete", "namespace", &ns, "--wait=false"],
    );
}

#[test]
fn a_user_without_rbac_rights_gets_exit_6_from_the_upstream_kube_apiserver() {
    let Some(up) = upstream() else { return };
    let out = kcache()
        .args(["watch", "pods", "-n", "default", "--kubeconfig"])
        .arg(&up.alice_kubeconfig)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    let last = stderr.trim().lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!(
            "error: the API server at {} refused access (403 Forbidden): ",
            up.url
        )),
        "{stderr}"
    );
    assert!(last.contains("User \"alice\" cannot"), "{stderr}");
}

#[test]
fn a_wrong_token_gets_exit_5_from_the_upstream_kube_apiserver() {
    let Some(up) = upstream() else { return };
    let dir = std::env::temp_dir().join(format!("kcache-cli-401-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: up\n  cluster:\n    server: {}\n    certificate-authority: {}\n\
             contexts:\n- name: up\n  context:\n    cluster: up\n    user: bad\ncurrent-context: up\n\
             users:\n- name: bad\n  user:\n    token: not-a-valid-token\n",
            up.url,
            up.ca.display()
        ),
    )
    .unwrap();
    let out = kcache()
        .args(["watch", "pods", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("rejected the credentials (401 Unauthorized)"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("not-a-valid-token"),
        "never print the token: {stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
