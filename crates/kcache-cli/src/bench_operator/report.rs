//! results.json and results.md: every run, then per peer the median and range of each
//! figure, and kcache-runtime's ratios to controller-runtime and kube-runtime.

use anyhow::Context as _;
use serde_json::{Value, json};

use super::{BenchOperatorArgs, Peer, RunResult, config_json};

/// The figures summarised: (key in a peer's line, label, divisor for the unit shown).
const FIGURES: &[(&str, &str, f64)] = &[
    ("full_reconcile_ms", "time to full reconcile (ms)", 1.0),
    ("sync_cpu_s", "CPU until full reconcile (s)", 1.0),
    (
        "rss_after_sync_bytes",
        "RSS after full reconcile (MiB)",
        1_048_576.0,
    ),
    ("vmhwm_end_bytes", "peak RSS, VmHWM (MiB)", 1_048_576.0),
    ("requests_sync", "API requests until full reconcile", 1.0),
    ("cpu_per_update_us", "CPU per Pod update event (µs)", 1.0),
    ("reconciles_per_s", "reconciles/s in the update phase", 1.0),
    ("reconciles_update", "reconciles in the update phase", 1.0),
    ("requests_update", "API requests in the update phase", 1.0),
    (
        "watches_update",
        "of them, watches opened again (the server ended one)",
        1.0,
    ),
    (
        "other_requests_update",
        "of them, other requests (writes, lists)",
        1.0,
    ),
    ("achieved_rate", "Pod patches/s achieved by the driver", 1.0),
];

fn figure(r: &RunResult, key: &str) -> Option<f64> {
    if key == "achieved_rate" {
        r.achieved_rate
    } else if key == "other_requests_update" {
        let all = r.line.get("requests_update").and_then(Value::as_f64)?;
        Some(all - r.line.get("watches_update").and_then(Value::as_f64)?)
    } else {
        r.line.get(key).and_then(Value::as_f64)
    }
}

/// Median, minimum and maximum.
fn stats(mut v: Vec<f64>) -> Option<(f64, f64, f64)> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    let median = if v.len() % 2 == 1 {
        v[mid]
    } else {
        f64::midpoint(v[mid - 1], v[mid])
    };
    Some((median, v[0], v[v.len() - 1]))
}

fn summary(results: &[RunResult], peer: Peer, key: &str) -> Option<(f64, f64, f64)> {
    stats(
        results
            .iter()
            .filter(|r| r.peer == peer)
            .filter_map(|r| figure(r, key))
            .collect(),
    )
}

fn fmt(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// Writes results.json and results.md under `--out`.
///
/// # Errors
/// A file that cannot be written.
pub(super) fn write(args: &BenchOperatorArgs, results: &[RunResult]) -> anyhow::Result<()> {
    let peers: Vec<Peer> = args.peers.clone();
    let runs: Vec<Value> = results
        .iter()
        .map(|r| {
            json!({"peer": r.peer.as_str(), "run": r.run + 1, "line": r.line,
                   "achieved_rate": r.achieved_rate, "verified_teams": r.verified_teams})
        })
        .collect();
    let mut summaries = serde_json::Map::new();
    for &peer in &peers {
        let mut m = serde_json::Map::new();
        for (key, _, _) in FIGURES {
            if let Some((median, min, max)) = summary(results, peer, key) {
                m.insert(
                    (*key).into(),
                    json!({"median": median, "min": min, "max": max}),
                );
            }
        }
        summaries.insert(peer.as_str().into(), m.into());
    }
    let ratio = |key: &str, other: Peer| -> Option<f64> {
        let a = summary(results, Peer::KcacheRuntime, key)?.0;
        let b = summary(results, other, key)?.0;
        (b != 0.0).then(|| a / b)
    };
    let mut ratios = serde_json::Map::new();
    for (key, _, _) in FIGURES {
        ratios.insert(
            (*key).into(),
            json!({"kcache_runtime/controller_runtime": ratio(key, Peer::ControllerRuntime),
                   "kcache_runtime/kube_runtime": ratio(key, Peer::KubeRuntime)}),
        );
    }
    let doc = json!({"config": config_json(args), "runs": runs, "summary": summaries,
                     "ratios": ratios});
    let path = args.out.join("results.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc)?)
        .with_context(|| format!("writing {}", path.display()))?;

    let mut md = format!(
        "# kcache bench-operator\n\n{} Pods over {} namespaces, {} Teams; update phase: {} Pod \
         patches at {} /s asked; {} run(s) of each peer. Median (min–max).\n\n",
        args.n,
        args.namespaces,
        args.teams,
        config_json(args)["updates"],
        args.update_rate,
        args.runs
    );
    md.push_str("| figure |");
    for p in &peers {
        md.push_str(&format!(" {} |", p.as_str()));
    }
    md.push_str(" kcache-runtime / controller-runtime | kcache-runtime / kube-runtime |\n|---|");
    md.push_str(&"---|".repeat(peers.len() + 2));
    md.push('\n');
    for (key, label, div) in FIGURES {
        md.push_str(&format!("| {label} |"));
        for &p in &peers {
            match summary(results, p, key) {
                Some((median, min, max)) => md.push_str(&format!(
                    " {} ({}–{}) |",
                    fmt(median / div),
                    fmt(min / div),
                    fmt(max / div)
                )),
                None => md.push_str(" – |"),
            }
        }
        for other in [Peer::ControllerRuntime, Peer::KubeRuntime] {
            match ratio(key, other) {
                Some(r) => md.push_str(&format!(" {r:.2} |")),
                None => md.push_str(" – |"),
            }
        }
        md.push('\n');
    }
    let path = args.out.join("results.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Peer, RunResult, figure};

    fn run(line: serde_json::Value) -> RunResult {
        RunResult {
            peer: Peer::KcacheRuntime,
            run: 0,
            line,
            achieved_rate: Some(250.0),
            verified_teams: 10,
        }
    }

    /// The update phase's requests split into watches opened again and the rest; a peer
    /// that does not count its watches (an older line) shows no split rather than a wrong one.
    #[test]
    fn update_requests_split_into_watches_and_others() {
        let counted = run(json!({"requests_update": 7, "watches_update": 5}));
        assert_eq!(figure(&counted, "requests_update"), Some(7.0));
        assert_eq!(figure(&counted, "watches_update"), Some(5.0));
        assert_eq!(figure(&counted, "other_requests_update"), Some(2.0));
        assert_eq!(figure(&counted, "achieved_rate"), Some(250.0));
        let older = run(json!({"requests_update": 7}));
        assert_eq!(figure(&older, "watches_update"), None);
        assert_eq!(figure(&older, "other_requests_update"), None);
    }
}
