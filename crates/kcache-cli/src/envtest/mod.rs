//! Go's envtest on kcache: `kcache envtest-assets DIR` writes `kube-apiserver`, `etcd` and
//! `kubectl` into DIR, for `KUBEBUILDER_ASSETS=DIR`. The first two are this binary (a hard
//! link, or a copy where linking fails) and act by the name they are started under
//! ([`dispatch`]); `kubectl` is a launcher of the kubectl on `PATH` (envtest runs kubectl only
//! for tests calling `ControlPlane.KubeCtl()`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

mod apiserver;
mod etcd;
mod flags;

/// Arguments of `kcache envtest-assets`.
#[derive(Debug, clap::Args)]
pub(crate) struct AssetsArgs {
    /// The directory to write `kube-apiserver`, `etcd` and `kubectl` into (created if
    /// missing); point `KUBEBUILDER_ASSETS` at it.
    pub dir: PathBuf,
}

/// The kubectl launcher: the first kubectl on PATH that is not this file.
const KUBECTL: &str = r#"#!/bin/sh
# kubectl for envtest, written by `kcache envtest-assets`: runs the kubectl on PATH.
self=$(cd "$(dirname "$0")" && pwd)/kubectl
IFS=:
for d in $PATH; do
  [ -n "$d" ] || d=.
  if [ -x "$d/kubectl" ] && [ "$(cd "$d" && pwd)/kubectl" != "$self" ]; then
    exec "$d/kubectl" "$@"
  fi
done
echo "kubectl: no kubectl on PATH (envtest runs it only for ControlPlane.KubeCtl())" >&2
exit 127
"#;

/// Runs the program named by `argv[0]` when it is `kube-apiserver` or `etcd`; `None` for
/// `kcache` itself.
pub(crate) fn dispatch() -> Option<ExitCode> {
    let mut args = std::env::args();
    let argv0 = args.next()?;
    let name = Path::new(&argv0).file_name()?.to_str()?.to_owned();
    let rest: Vec<String> = args.collect();
    match name.as_str() {
        "kube-apiserver" => Some(run_logged(|| apiserver::main(&rest))),
        "etcd" => Some(run_logged(|| etcd::main(&rest))),
        _ => None,
    }
}

fn run_logged(f: impl FnOnce() -> ExitCode) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    f()
}

/// Writes the assets into `args.dir`.
///
/// # Errors
/// When the directory or a file cannot be written.
pub(crate) fn write_assets(args: &AssetsArgs) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("locating the kcache binary")?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    for name in ["kube-apiserver", "etcd"] {
        let target = args.dir.join(name);
        match std::fs::remove_file(&target) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("replacing {}", target.display())),
        }
        if std::fs::hard_link(&exe, &target).is_err() {
            std::fs::copy(&exe, &target)
                .with_context(|| format!("copying {} to {}", exe.display(), target.display()))?;
        }
    }
    let kubectl = args.dir.join("kubectl");
    let _ = std::fs::remove_file(&kubectl);
    std::fs::write(&kubectl, KUBECTL).with_context(|| format!("writing {}", kubectl.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&kubectl, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("making {} executable", kubectl.display()))?;
    }
    println!(
        "wrote kube-apiserver, etcd and kubectl to {0}\ntry: KUBEBUILDER_ASSETS={0} go test ./...",
        args.dir.display()
    );
    Ok(())
}

/// Runs `program` on a fresh runtime (multi-threaded or on this thread) to its end: success,
/// or exit code 1 with the error after `prefix` (`Error` as kube-apiserver words it, `error` as
/// etcd does).
fn run(
    multi_thread: bool,
    prefix: &str,
    program: impl std::future::Future<Output = anyhow::Result<()>>,
) -> std::process::ExitCode {
    let mut builder = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{prefix}: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    match runtime.block_on(program) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{prefix}: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}

/// Registers for SIGTERM (envtest's stop signal) and SIGINT at once, and resolves on either.
/// Called before the program listens: a stop sent as soon as the port answers is not lost
/// (before the handler is installed, SIGTERM's default action kills the process).
fn terminated() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
        let mut int = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
        Ok(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
