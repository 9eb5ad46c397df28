//! The `kcache` command.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod bench_operator;
mod counting;
mod demo;
mod envtest;
mod serve;
mod watch;

use watch::exit;

const EXIT_CODES: &str = "\
Exit codes:
  0  success (demo: cache and handlers consistent with the server)
  1  any other failure
  2  bad command line
  3  no usable kubeconfig (missing file, no current context, unknown --context)
  4  the API server cannot be reached
  5  the API server rejected the credentials (401)
  6  access to the resource is forbidden (403)
  7  the API server does not serve the resource
  8  demo: the cache or a handler diverged from the server
  9  the API server answered something unusable (not JSON, a redirect, an unexpected
     HTTP status, a malformed HTTP response)";

/// kcache: Kubernetes informer machinery in Rust.
#[derive(Debug, Parser)]
#[command(name = "kcache", version, about, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the whole pipeline on an embedded API server under churn and faults, then verify
    /// that the cache and every handler match the server.
    #[command(after_help = EXIT_CODES)]
    Demo(demo::DemoArgs),
    /// Stream a resource's changes from a cluster, through an informer (like kubectl get -w).
    #[command(after_help = EXIT_CODES)]
    Watch(watch::WatchArgs),
    /// Run the embedded Kubernetes-compatible API server (prints a kubeconfig for kubectl).
    Serve(serve::ServeArgs),
    /// Benchmark kcache side by side with client-go and kube-rs (see BENCHMARKS.md).
    Bench(bench::BenchArgs),
    /// Measure the embedded server's cost of authorization per request (RBAC on, off, and as
    /// system:masters).
    BenchAuthz(bench::authz::AuthzArgs),
    /// Benchmark one operator on kcache-runtime, controller-runtime and kube-runtime.
    BenchOperator(bench_operator::BenchOperatorArgs),
    /// Write `kube-apiserver`, `etcd` and `kubectl` for Go's envtest into a directory (use it
    /// as KUBEBUILDER_ASSETS): controller-runtime suites then start kcache's server.
    EnvtestAssets(envtest::AssetsArgs),
}

fn main() -> ExitCode {
    // Started as `kube-apiserver` or `etcd` (the envtest assets): act as that program.
    if let Some(code) = envtest::dispatch() {
        return code;
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are "errors" that print to stdout and succeed.
            let code = if e.use_stderr() { exit::USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    // Without RUST_LOG: errors only, and none from kube-client, whose failed requests the
    // reflector already recovers from and the commands report in their own words.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error,kube_client=off"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILURE);
        }
    };
    let code = match cli.command {
        Command::EnvtestAssets(args) => match envtest::write_assets(&args) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: {e:#}");
                exit::FAILURE
            }
        },
        Command::Serve(args) => match runtime.block_on(serve::run(args)) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: {e:#}");
                exit::FAILURE
            }
        },
        Command::Demo(args) => {
            let json = args.json;
            match runtime.block_on(demo::run(args)) {
                Ok(summary) => {
                    if json {
                        match serde_json::to_string(&summary) {
                            Ok(s) => println!("{s}"),
                            Err(e) => eprintln!("error: cannot encode the summary: {e}"),
                        }
                    } else {
                        print!("{}", summary.table());
                    }
                    if summary.consistent {
                        0
                    } else {
                        exit::DIVERGED
                    }
                }
                Err(e) => {
                    eprintln!("error: {e:#}");
                    exit::FAILURE
                }
            }
        }
        Command::Bench(args) => match runtime.block_on(bench::run(args)) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: {e:#}");
                exit::FAILURE
            }
        },
        Command::BenchOperator(args) => match runtime.block_on(bench_operator::run(args)) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: {e:#}");
                exit::FAILURE
            }
        },
        Command::BenchAuthz(args) => match runtime.block_on(bench::authz::run(args)) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: {e:#}");
                exit::FAILURE
            }
        },
        Command::Watch(args) => match runtime.block_on(watch::run(args)) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: {e}");
                e.exit_code()
            }
        },
    };
    // Handlers may still sleep on the blocking pool; do not wait for them.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    ExitCode::from(code)
}
