//! `kcache envtest-assets DIR`: the `kube-apiserver` and `etcd` it writes act as those programs
//! do for Go's envtest — flags refused in their words, `--help` listing what envtest probes for,
//! etcd's `/health`, exit on SIGTERM. (The whole of envtest on them: scripts/envtest-smoke.sh.)

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn assets() -> tempdir::Dir {
    let dir = tempdir::Dir::new();
    let out = Command::new(env!("CARGO_BIN_EXE_kcache"))
        .args(["envtest-assets"])
        .arg(dir.path())
        .output()
        .expect("kcache runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// A throwaway directory, removed on drop (no tempfile dependency).
mod tempdir {
    use std::path::{Path, PathBuf};

    pub(crate) struct Dir(PathBuf);

    impl Dir {
        pub(crate) fn new() -> Self {
            let p = std::env::temp_dir().join(format!(
                "kcache-envtest-assets-{}-{}",
                std::process::id(),
                rand::random::<u64>()
            ));
            std::fs::create_dir_all(&p).unwrap();
            Self(p)
        }
        pub(crate) fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A port free now, picked below the kernel's ephemeral range (32768 and up here) so that no
/// process binding port 0 between this probe and the program's own bind takes it.
fn free_port() -> u16 {
    loop {
        let port = 20_000 + (rand::random::<u16>() % 12_000);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Starts `make(port)` on a free port, waits until the port answers a connect and returns the
/// child with its port. Should another process have bound the port between the probe and the
/// child's bind (the child exits saying so), it tries another port, three times at most; any
/// other early exit fails with the child's stderr.
fn start_on_free_port(dir: &Path, what: &str, make: impl Fn(u16) -> Command) -> (Child, u16) {
    for _ in 0..3 {
        let port = free_port();
        let log = dir.join(format!("{what}-{port}.stderr"));
        let mut child = make(port)
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let stderr = std::fs::read_to_string(&log).unwrap_or_default();
                assert!(
                    stderr.contains("in use"),
                    "{what} exited early ({status}): {stderr}"
                );
                break;
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return (child, port);
            }
            assert!(Instant::now() < deadline, "{what} never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("{what}: three free ports were taken before it could bind them");
}

fn sigterm_and_wait(child: &mut Child) -> std::process::ExitStatus {
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("did not exit within 10 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run(dir: &Path, bin: &str, args: &[&str]) -> std::process::Output {
    Command::new(dir.join(bin)).args(args).output().unwrap()
}

#[test]
fn the_assets_refuse_unknown_flags_in_the_programs_words() {
    let dir = assets();
    for bin in ["kube-apiserver", "etcd", "kubectl"] {
        assert!(dir.path().join(bin).is_file(), "{bin} written");
    }
    let out = run(
        dir.path(),
        "kube-apiserver",
        &["--etcd-servers=x", "--foo=1"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "Error: unknown flag: --foo"
    );
    let out = run(dir.path(), "etcd", &["--foo"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "flag provided but not defined: -foo"
    );
    // envtest reads `--help` for `--insecure-port` (absent since 1.24: not passed) and etcd's
    // for `--unsafe-no-fsync` (passed when listed).
    let help = run(dir.path(), "kube-apiserver", &["--help"]);
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("\n      --client-ca-file string\n"), "{help}");
    assert!(!help.contains("insecure-port"), "{help}");
    let help = run(dir.path(), "etcd", &["--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("\n  --unsafe-no-fsync\n"));
    // kube-apiserver requires --etcd-servers.
    let out = run(dir.path(), "kube-apiserver", &["--secure-port=1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--etcd-servers must be specified"));
}

#[test]
fn etcd_answers_health_and_both_exit_on_sigterm() {
    let dir = assets();
    let data = dir.path().join("data");
    let (mut etcd, port) = start_on_free_port(dir.path(), "etcd", |port| {
        let url = format!("http://127.0.0.1:{port}");
        let mut c = Command::new(dir.path().join("etcd"));
        c.args([
            format!("--listen-client-urls={url}"),
            format!("--advertise-client-urls={url}"),
            "--listen-peer-urls=http://127.0.0.1:0".to_owned(),
            format!("--data-dir={}", data.display()),
            "--unsafe-no-fsync=true".to_owned(),
        ]);
        c
    });
    let url = format!("http://127.0.0.1:{port}");
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    let read = conn.read_to_string(&mut body);
    assert!(read.is_ok(), "reading etcd's answer: {read:?}");
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(
        body.ends_with("{\"health\":\"true\",\"reason\":\"\"}"),
        "{body}"
    );
    assert!(sigterm_and_wait(&mut etcd).success());

    let (mut apiserver, _) = start_on_free_port(dir.path(), "kube-apiserver", |port| {
        let mut c = Command::new(dir.path().join("kube-apiserver"));
        c.args([
            format!("--etcd-servers={url}"),
            format!("--secure-port={port}"),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--cert-dir={}", dir.path().display()),
            "--authorization-mode=RBAC".to_owned(),
            "--allow-privileged=true".to_owned(),
            "--disable-admission-plugins=ServiceAccount".to_owned(),
            "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
        ]);
        c
    });
    assert!(sigterm_and_wait(&mut apiserver).success());
}
