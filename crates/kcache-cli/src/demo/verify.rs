//! The end-of-run check: the informer's cache and every handler's rebuilt state must equal a
//! fresh, consistent LIST from the server (same keys, same resourceVersions), and the node
//! index must agree with the listed `spec.nodeName`s.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use kcache::{
    ListerWatcher, SharedIndexInformer,
    lister_watcher::ListParams,
    store::{ObjectKey, meta_namespace_key},
};
use kcache_client::Compact;
use tokio::time::Instant;

use super::handlers::{Rebuilt, Snapshot};

/// The index of pods by `spec.nodeName`.
pub(super) const NODE_INDEX: &str = "nodeName";

/// The server's state from a fresh LIST.
#[derive(Debug)]
pub(super) struct Truth {
    /// Key → resourceVersion.
    pub pods: Snapshot,
    /// Node → number of pods.
    pub per_node: BTreeMap<String, usize>,
    /// The list's resourceVersion.
    pub resource_version: u64,
}

/// Lists every pod in pages of 500 with a consistent read (`resourceVersion` unset).
///
/// # Errors
/// The list error, after 5 attempts.
pub(super) async fn list_truth<L: ListerWatcher<Pod>>(
    lw: &L,
) -> Result<Truth, kcache::lister_watcher::Error> {
    let mut attempt = 0;
    loop {
        match list_once(lw).await {
            Ok(t) => return Ok(t),
            Err(e) if attempt < 4 => {
                attempt += 1;
                tracing::warn!(error = %e, "verification LIST failed; retrying");
                tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

async fn list_once<L: ListerWatcher<Pod>>(lw: &L) -> Result<Truth, kcache::lister_watcher::Error> {
    let mut pods = HashMap::new();
    let mut per_node = BTreeMap::new();
    let mut params = ListParams::default().limit(500);
    let mut resource_version = 0;
    loop {
        let page = lw.list(&params).await?;
        if params.continue_token.is_none() {
            resource_version = page
                .metadata
                .resource_version
                .as_deref()
                .and_then(|rv| rv.parse().ok())
                .unwrap_or(0);
        }
        for pod in &page.items {
            if let Ok(key) = meta_namespace_key(pod) {
                let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
                *per_node.entry(node.unwrap_or_default()).or_insert(0) += 1;
                pods.insert(
                    key,
                    pod.metadata.resource_version.clone().unwrap_or_default(),
                );
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    per_node.remove("");
    Ok(Truth {
        pods,
        per_node,
        resource_version,
    })
}

/// Differences between an observed state and the truth, worded for the report.
pub(super) fn diff(name: &str, seen: &Snapshot, truth: &Snapshot, out: &mut Vec<String>) -> usize {
    let mut n = 0;
    let mut keys: Vec<&ObjectKey> = truth.keys().chain(seen.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let line = match (seen.get(key), truth.get(key)) {
            (Some(a), Some(b)) if a == b => continue,
            (Some(a), Some(b)) => format!("{name}: {key} at resourceVersion {a}, server has {b}"),
            (None, Some(_)) => format!("{name}: {key} missing"),
            (Some(_), None) => format!("{name}: {key} present, but deleted on the server"),
            (None, None) => continue,
        };
        n += 1;
        if out.len() < 20 {
            out.push(line);
        }
    }
    n
}

/// The informer's cache as key → resourceVersion.
pub(super) fn cache_snapshot(informer: &SharedIndexInformer<Compact<Pod>>) -> Snapshot {
    informer
        .indexer()
        .list()
        .iter()
        .filter_map(|p| {
            let key = meta_namespace_key(&**p).ok()?;
            Some((
                key,
                p.metadata().resource_version.clone().unwrap_or_default(),
            ))
        })
        .collect()
}

/// Differences between the node index and the listed nodes.
pub(super) fn index_diff(
    informer: &SharedIndexInformer<Compact<Pod>>,
    truth: &Truth,
    out: &mut Vec<String>,
) -> usize {
    let mut n = 0;
    let mut nodes: Vec<String> = informer.indexer().list_index_func_values(NODE_INDEX);
    nodes.extend(truth.per_node.keys().cloned());
    nodes.sort();
    nodes.dedup();
    for node in nodes {
        let cached = informer
            .indexer()
            .index_keys(NODE_INDEX, &node)
            .map(|k| k.len())
            .unwrap_or(0);
        let listed = truth.per_node.get(&node).copied().unwrap_or(0);
        if cached != listed {
            n += 1;
            if out.len() < 20 {
                out.push(format!(
                    "index {NODE_INDEX}={node}: {cached} pods in the cache, {listed} on the server"
                ));
            }
        }
    }
    n
}

/// One observer of the pods whose view must converge to the truth.
pub(super) struct Observer {
    /// Its name in reports.
    pub name: &'static str,
    /// Its rebuilt state.
    pub state: Arc<Rebuilt>,
    /// Its backlog (buffer or queue depth) right now.
    pub backlog: Box<dyn Fn() -> usize + Send + Sync>,
}

/// The verdict.
#[derive(Debug, Default)]
pub(super) struct Verdict {
    /// Whether everything matched.
    pub consistent: bool,
    /// Up to 20 differences.
    pub differences: Vec<String>,
    /// Number of differences in all.
    pub difference_count: usize,
    /// How long it took the cache and the handlers to catch up after churn stopped.
    pub settle: Duration,
}

/// After the last write, no progress for this long with nothing left to deliver means the
/// views will not change any more.
const QUIET: Duration = Duration::from_secs(5);
/// The longest the informer may take to reach the listed resourceVersion (it may be backing
/// off after the last injected failure).
const CATCH_UP: Duration = Duration::from_secs(60);

/// Waits until the informer has seen the truth's resourceVersion and every view stops moving,
/// then compares. Returns as soon as everything matches.
pub(super) async fn settle_and_compare(
    informer: &SharedIndexInformer<Compact<Pod>>,
    observers: &[Observer],
    truth: &Truth,
) -> Verdict {
    let start = Instant::now();
    let mut last_progress = (Instant::now(), Vec::new());
    loop {
        let mut out = Vec::new();
        let informer_rv: u64 = informer.last_sync_resource_version().parse().unwrap_or(0);
        let caught_up = informer_rv >= truth.resource_version && informer.queue_len() == 0;
        let mut count = 0;
        if caught_up {
            count += diff(
                "informer cache",
                &cache_snapshot(informer),
                &truth.pods,
                &mut out,
            );
            count += index_diff(informer, truth, &mut out);
            for o in observers {
                count += diff(o.name, &o.state.snapshot(), &truth.pods, &mut out);
                for a in o.state.anomalies() {
                    count += 1;
                    if out.len() < 20 {
                        out.push(format!("{}: {a}", o.name));
                    }
                }
            }
            if count == 0 {
                return Verdict {
                    consistent: true,
                    settle: start.elapsed(),
                    ..Verdict::default()
                };
            }
        }
        let signature: Vec<u64> = std::iter::once(informer_rv)
            .chain(std::iter::once(informer.queue_len() as u64))
            .chain(observers.iter().flat_map(|o| {
                [
                    o.state.handled.load(std::sync::atomic::Ordering::Relaxed),
                    (o.backlog)() as u64,
                ]
            }))
            .collect();
        if signature != last_progress.1 {
            last_progress = (Instant::now(), signature);
        }
        let idle = observers.iter().all(|o| (o.backlog)() == 0);
        let quiet = last_progress.0.elapsed() >= QUIET;
        if (caught_up && idle && quiet) || start.elapsed() >= CATCH_UP {
            if !caught_up {
                out.push(format!(
                    "the informer did not reach the server's resourceVersion {} (it is at {informer_rv}) within {CATCH_UP:?}",
                    truth.resource_version
                ));
                count += 1;
            }
            return Verdict {
                consistent: false,
                differences: out,
                difference_count: count,
                settle: start.elapsed(),
            };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
