//! `kcache watch RESOURCE`: a kubectl-style live event stream from a cluster, through a
//! shared informer over `kcache-client`.

mod error;
mod print;
mod resolve;

use std::{path::PathBuf, sync::Arc, time::Duration};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use k8s_openapi::jiff::Timestamp;
use kcache::{
    EventHandler, SharedIndexInformer,
    informer::{self, DeletedObject},
    reflector::{self, InitialList},
};
use kcache_client::HttpListerWatcher;
use kube_client::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube_core::DynamicObject;
use tokio::{sync::mpsc, time::Instant};
use tokio_util::sync::CancellationToken;

pub(crate) use self::error::{WatchError, exit};
use self::print::{Event, Output};
use crate::counting::{Counting, Received};

/// Arguments of `kcache watch`.
#[derive(Debug, clap::Args)]
pub(crate) struct WatchArgs {
    /// The resource: plural, singular, short name or kind (`pods`, `pod`, `po`), optionally
    /// with its group (`deployments.apps`).
    pub resource: String,
    /// Namespace to watch (default: the kubeconfig context's, else `default`).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Watch all namespaces.
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// Label selector (`app=web,tier!=db`).
    #[arg(short = 'l', long = "selector")]
    pub selector: Option<String>,
    /// Field selector (`metadata.name=web-0`).
    #[arg(long)]
    pub field_selector: Option<String>,
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: its current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Output: `wide` adds UID and LABELS; `json` prints one watch event per line.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Output>,
    /// Do not print the objects of the initial list, only later changes.
    #[arg(long)]
    pub watch_only: bool,
    /// How the initial state is fetched: `list` (a paginated LIST), `stream` (a streaming list,
    /// `sendInitialEvents=true`, falling back to a LIST when refused) or `auto` (the default:
    /// `stream` on kube-apiserver 1.37+, `list` elsewhere, from the server's /version).
    #[arg(long, value_name = "list|stream|auto", default_value = "auto")]
    pub initial_list: InitialList,
}

/// Watches until Ctrl-C (or until stdout closes).
///
/// # Errors
/// A [`WatchError`] whose [`exit_code`](WatchError::exit_code) tells its class.
pub(crate) async fn run(args: WatchArgs) -> Result<(), WatchError> {
    let config = load_config(&args).await?;
    let server = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_owned();
    let default_ns = config.default_namespace.clone();
    let client = kcache_client::Client::from_config(config)
        .map_err(|e| WatchError::Config(e.to_string()))?;
    let discovered = resolve::discover(&client)
        .await
        .map_err(|e| WatchError::from_discovery(&e, &server))?;
    let resolved = resolve::resolve(&args.resource, &discovered)?;
    let what = resolved.display_name();
    let namespace = match (resolved.namespaced, args.all_namespaces) {
        (true, false) => Some(args.namespace.clone().unwrap_or(default_ns)),
        _ => None,
    };
    let mut lw = match &namespace {
        Some(ns) => HttpListerWatcher::<DynamicObject>::namespaced_with(client, &resolved.api, ns),
        None => HttpListerWatcher::<DynamicObject>::all_with(client, &resolved.api),
    };
    if let Some(l) = &args.selector {
        lw = lw.label_selector(l);
    }
    if let Some(f) = &args.field_selector {
        lw = lw.field_selector(f);
    }
    let received = Arc::new(Received::default());
    // Errors the reflector recovers from become warnings; 401/403/404 end the watch. The
    // channel is bounded: when it is full, further reports are dropped (the reflector keeps
    // retrying and reporting, so nothing important is lost).
    let (err_tx, mut err_rx) = mpsc::channel::<Result<String, WatchError>>(16);
    let informer = {
        let (server, resource) = (server.clone(), args.resource.clone());
        SharedIndexInformer::builder(Counting::new(lw, Arc::clone(&received)))
            .config(
                informer::Config::default()
                    .reflector(reflector::Config::default().initial_list(args.initial_list)),
            )
            .watch_error_handler(move |e| {
                let report = match e
                    .lister_watcher_error()
                    .and_then(|lw| WatchError::fatal_from_lister_watcher(lw, &server, &resource))
                {
                    Some(fatal) => Err(fatal),
                    None => Ok(e.to_string()),
                };
                let _ = err_tx.try_send(report);
            })
            .build()
    };
    let output = args.output.unwrap_or_default();
    let stdout_closed = CancellationToken::new();
    informer
        .add_event_handler(Printer {
            output,
            watch_only: args.watch_only,
            header: std::sync::Once::new(),
            closed: stdout_closed.clone(),
        })
        .map_err(|e| WatchError::Other(e.to_string()))?;

    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    let result = drive(&informer, &what, &received, &mut err_rx, &stdout_closed).await;
    cancel.cancel();
    let _ = task.await;
    result
}

/// Waits for the initial sync (with a one-line progress message), then for Ctrl-C, a closed
/// stdout or a fatal error.
async fn drive(
    informer: &SharedIndexInformer<DynamicObject>,
    what: &str,
    received: &Received,
    errors: &mut mpsc::Receiver<Result<String, WatchError>>,
    stdout_closed: &CancellationToken,
) -> Result<(), WatchError> {
    let start = Instant::now();
    let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
        spinner.set_style(style);
    }
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut synced = false;
    loop {
        tokio::select! {
            () = informer.wait_for_sync(), if !synced => {
                synced = true;
                spinner.finish_and_clear();
                eprintln!(
                    "synced {} {what} in {} ms; watching for changes (Ctrl-C to stop)",
                    informer.indexer().len(),
                    start.elapsed().as_millis()
                );
            }
            () = tokio::time::sleep(Duration::from_millis(100)), if !synced => {
                let n = received.objects.load(std::sync::atomic::Ordering::Relaxed);
                spinner.set_message(format!("syncing {what}: {n} objects received"));
                spinner.tick();
            }
            _ = &mut ctrl_c => return Ok(()),
            () = stdout_closed.cancelled() => return Ok(()),
            report = errors.recv() => match report {
                Some(Err(fatal)) => {
                    spinner.finish_and_clear();
                    return Err(fatal);
                }
                Some(Ok(warning)) => spinner.suspend(|| eprintln!("warning: {warning}; retrying")),
                None => {}
            },
        }
    }
}

/// Prints every notification as a line.
struct Printer {
    output: Output,
    watch_only: bool,
    /// The header goes out with the first line, as kubectl does.
    header: std::sync::Once,
    closed: CancellationToken,
}

impl Printer {
    fn print(&self, event: Event, obj: &DynamicObject) {
        use std::io::Write;
        let line = print::line(self.output, event, obj, Timestamp::now());
        let mut out = std::io::stdout().lock();
        let mut result = Ok(());
        self.header.call_once(|| {
            if let Some(h) = print::header(self.output) {
                result = writeln!(out, "{h}");
            }
        });
        if result
            .and_then(|()| writeln!(out, "{line}"))
            .and_then(|()| out.flush())
            .is_err()
        {
            self.closed.cancel();
        }
    }
}

impl EventHandler<DynamicObject> for Printer {
    fn on_add(&self, obj: &Arc<DynamicObject>, is_in_initial_list: bool) {
        if !(is_in_initial_list && self.watch_only) {
            self.print(Event::Added, obj);
        }
    }

    fn on_update(&self, _old: &Arc<DynamicObject>, new: &Arc<DynamicObject>) {
        self.print(Event::Modified, new);
    }

    fn on_delete(&self, obj: &DeletedObject<DynamicObject>) {
        let event = if obj.is_final_state_unknown() {
            Event::DeletedFinalStateUnknown
        } else {
            Event::Deleted
        };
        self.print(event, obj.object());
    }
}

/// The client configuration: `--kubeconfig`/`--context` when given, else kubectl's inference.
async fn load_config(args: &WatchArgs) -> Result<kube_client::Config, WatchError> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let result = if let Some(path) = &args.kubeconfig {
        let kubeconfig = Kubeconfig::read_from(path).map_err(|e| config_error(&e))?;
        kube_client::Config::from_custom_kubeconfig(kubeconfig, &options).await
    } else if args.context.is_some() {
        kube_client::Config::from_kubeconfig(&options).await
    } else {
        return kube_client::Config::infer().await.map_err(|e| {
            match std::error::Error::source(&e).and_then(|s| s.downcast_ref::<KubeconfigError>()) {
                Some(k @ KubeconfigError::ReadConfig(..))
                    if std::env::var_os("KUBECONFIG").is_some() =>
                {
                    config_error(k)
                }
                Some(
                    k @ (KubeconfigError::Parse(_)
                    | KubeconfigError::CurrentContextNotSet
                    | KubeconfigError::LoadContext(_)),
                ) => config_error(k),
                _ => config_error(&KubeconfigError::FindPath),
            }
        });
    };
    result.map_err(|e| config_error(&e))
}

/// One sentence for a kubeconfig failure, without file contents (which may hold credentials).
fn config_error(e: &KubeconfigError) -> WatchError {
    WatchError::Config(match e {
        KubeconfigError::FindPath => "no Kubernetes configuration found: set KUBECONFIG, create ~/.kube/config or pass --kubeconfig".to_owned(),
        KubeconfigError::ReadConfig(io, path) if io.kind() == std::io::ErrorKind::NotFound => {
            format!("cannot read kubeconfig {}: the file does not exist", path.display())
        }
        KubeconfigError::ReadConfig(io, path) => format!("cannot read kubeconfig {}: {io}", path.display()),
        KubeconfigError::LoadContext(name) => format!("context \"{name}\" not found in the kubeconfig"),
        KubeconfigError::CurrentContextNotSet => "the kubeconfig has no current-context; pass --context NAME".to_owned(),
        KubeconfigError::Parse(_) => "the kubeconfig is not valid YAML".to_owned(),
        other => format!("invalid kubeconfig: {other}"),
    })
}
