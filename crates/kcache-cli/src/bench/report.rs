//! The benchmark's outputs: `results.json`, `results.md` (medians, min–max, ratios) and the
//! charts.

use std::{collections::BTreeMap, fmt::Write as _, path::Path};

use anyhow::Context as _;

use super::{
    chart,
    row::{Row, Stat},
    runner::{Record, ServerCost},
};

/// The figures, in table order: key, column title, decimals. Page faults are there because
/// their cost is not fixed (a first touch of memory the VM's host had not backed costs several
/// times more, as CPU time): a CPU figure that swings between runs of the same work reads
/// against them.
pub(super) const FIGURES: [(&str, &str, usize); 9] = [
    ("sync_ms", "sync wall (ms)", 0),
    ("sync_cpu_s", "sync CPU (s)", 2),
    ("sync_cpu_us_per_obj", "sync CPU/pod (µs)", 0),
    ("rss_after_sync_mb", "RSS after sync (MB)", 0),
    ("vmhwm_mb", "peak RSS (MB)", 0),
    ("update_cpu_us_per_event", "update CPU/event (µs)", 0),
    ("update_events_per_s", "updates/s", 0),
    ("sync_faults_per_obj", "sync page faults/pod", 1),
    ("update_faults_per_event", "update page faults/event", 1),
];

/// Groups the records by (N, configuration), in first-run order.
pub(super) fn rows(records: &[Record]) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    for r in records {
        if rows.iter().any(|row| row.n == r.n && row.label == r.label) {
            continue;
        }
        let same: Vec<&Record> = records
            .iter()
            .filter(|x| x.n == r.n && x.label == r.label)
            .collect();
        let ok: Vec<_> = same.iter().filter_map(|x| x.line.as_ref().ok()).collect();
        let n = r.n as f64;
        let mut figures = BTreeMap::new();
        let mut put = |key: &'static str, f: &dyn Fn(&kcache_bench::PeerLine) -> Option<f64>| {
            if let Some(stat) = Stat::of(ok.iter().filter_map(|l| f(l)).collect()) {
                figures.insert(key, stat);
            }
        };
        put("sync_ms", &|l| Some(l.sync_ms));
        put("sync_cpu_s", &|l| Some(l.sync_cpu_s));
        put("sync_cpu_us_per_obj", &|l| Some(l.sync_cpu_s / n * 1e6));
        put("rss_after_sync_mb", &|l| {
            Some(l.rss_after_sync_bytes as f64 / 1e6)
        });
        put("vmhwm_mb", &|l| Some(l.vmhwm_bytes as f64 / 1e6));
        put("update_cpu_us_per_event", &|l| {
            Some(l.update_cpu_s? / l.update_events? as f64 * 1e6)
        });
        put("update_events_per_s", &|l| l.update_events_per_s);
        let extra = |l: &kcache_bench::PeerLine, key: &str| l.extra.get(key)?.as_f64();
        put("sync_faults_per_obj", &|l| {
            Some(extra(l, "sync_page_faults")? / n)
        });
        put("update_faults_per_event", &|l| {
            Some(extra(l, "update_page_faults")? / l.update_events? as f64)
        });
        server_figures(&same, &mut figures);
        rows.push(Row {
            n: r.n,
            label: r.label.clone(),
            peer: r.peer.name().to_owned(),
            mode: r.mode.to_owned(),
            storage: r.storage.clone(),
            protobuf: r.protobuf,
            runs_ok: ok.len(),
            runs_failed: same.len() - ok.len(),
            figures,
        });
    }
    rows
}

/// The API server's figures, in table order: key, column title, decimals.
const SERVER_FIGURES: [(&str, &str, usize); 5] = [
    ("server_sync_cpu_s", "server sync CPU (s)", 2),
    (
        "server_sync_rss_growth_mb",
        "server peak RSS growth in sync (MB)",
        0,
    ),
    (
        "server_sync_written_mb",
        "server bytes written in sync (MB)",
        1,
    ),
    (
        "server_update_cpu_us_per_event",
        "server update CPU/event (µs)",
        0,
    ),
    (
        "server_update_rss_growth_mb",
        "server peak RSS growth in updates (MB)",
        0,
    ),
];

/// The server's cost of the successful runs among `same` (those measured).
fn server_figures(same: &[&Record], figures: &mut BTreeMap<&'static str, Stat>) {
    let measured: Vec<_> = same
        .iter()
        .filter_map(|r| Some((r.line.as_ref().ok()?, r.server?)))
        .collect();
    let mut put =
        |key: &'static str, f: &dyn Fn(&kcache_bench::PeerLine, &ServerCost) -> Option<f64>| {
            if let Some(stat) = Stat::of(measured.iter().filter_map(|(l, c)| f(l, c)).collect()) {
                figures.insert(key, stat);
            }
        };
    put("server_sync_cpu_s", &|_, c| Some(c.sync.cpu_s));
    put("server_sync_rss_growth_mb", &|_, c| {
        Some(c.sync.rss_growth_bytes as f64 / 1e6)
    });
    put("server_sync_written_mb", &|_, c| {
        Some(c.sync.written_bytes as f64 / 1e6)
    });
    put("server_update_cpu_us_per_event", &|l, c| {
        Some(c.update?.cpu_s / l.update_events? as f64 * 1e6)
    });
    put("server_update_rss_growth_mb", &|_, c| {
        Some(c.update?.rss_growth_bytes as f64 / 1e6)
    });
}

/// The table of what each line cost the API server, when the run measured it.
fn server_table(md: &mut String, rows: &[Row], n: usize) {
    let measured: Vec<&Row> = rows
        .iter()
        .filter(|r| r.n == n && r.figures.contains_key("server_sync_cpu_s"))
        .collect();
    if measured.is_empty() {
        return;
    }
    md.push_str(
        "What each line cost the API server (medians (min–max); read from /proc of the server \
         process; bytes written are its write(2) bytes, mostly the responses):\n\n",
    );
    let _ = write!(md, "| configuration |");
    for (_, title, _) in SERVER_FIGURES {
        let _ = write!(md, " {title} |");
    }
    let _ = write!(md, "\n|---|");
    for _ in SERVER_FIGURES {
        md.push_str("---|");
    }
    md.push('\n');
    for row in measured {
        let _ = write!(md, "| {} |", row.label);
        for (key, _, decimals) in SERVER_FIGURES {
            let _ = write!(md, " {} |", cell(row.figures.get(key), decimals));
        }
        md.push('\n');
    }
    md.push('\n');
}

pub(super) fn cell(stat: Option<&Stat>, decimals: usize) -> String {
    match stat {
        None => "–".into(),
        Some(s) if s.min == s.max => format!("{:.decimals$}", s.median),
        Some(s) => format!(
            "{:.decimals$} ({:.decimals$}–{:.decimals$})",
            s.median, s.min, s.max
        ),
    }
}

/// The peer row a kcache row is compared with: same N, mode and wire format.
fn reference<'a>(rows: &'a [Row], kcache: &Row, peer: &str) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.n == kcache.n && r.peer == peer && r.mode == kcache.mode && r.protobuf == kcache.protobuf
    })
}

/// The limit row a row is compared with: same N, mode and wire format.
fn limit_twin<'a>(rows: &'a [Row], row: &Row) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.is_limit() && r.n == row.n && r.mode == row.mode && r.protobuf == row.protobuf)
}

/// The table "× limit": each line's median sync wall over the limit line's of the same mode
/// and wire format (nothing when there is no limit line).
fn limit_table(md: &mut String, rows: &[Row], n: usize) {
    let wall = |r: &Row| r.figures.get("sync_ms").map(|s| s.median);
    let pairs: Vec<(&Row, &Row)> = rows
        .iter()
        .filter(|r| r.n == n && !r.is_limit())
        .filter_map(|r| Some((r, limit_twin(rows, r)?)))
        .collect();
    if pairs.is_empty() {
        return;
    }
    md.push_str(
        "Sync wall × limit (medians; the limit line of the same mode and wire format reads the \
         same first answer with nothing decoded — what the server alone costs):\n\n",
    );
    md.push_str("| configuration | sync wall (ms) | limit (ms) | × limit |\n|---|---|---|---|\n");
    for (row, limit) in pairs {
        let ms = |v: Option<f64>| v.map_or_else(|| "–".to_owned(), |v| format!("{v:.0}"));
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            row.label,
            ms(wall(row)),
            ms(wall(limit)),
            ratio(wall(row), wall(limit))
        );
    }
    md.push('\n');
}

/// The JSON twin of a protobuf row: same N, peer, mode and storage.
fn json_twin<'a>(rows: &'a [Row], protobuf: &Row) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.n == protobuf.n
            && r.peer == protobuf.peer
            && r.mode == protobuf.mode
            && r.storage == protobuf.storage
            && !r.protobuf
    })
}

/// `a / b` as `1.23×`, or `–`.
fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "–".into(),
    }
}

/// The header of a ratio table.
fn ratio_header(md: &mut String, first: &str) {
    let _ = write!(md, "| {first} |");
    for key in RATIO_FIGURES {
        let title = FIGURES.iter().find(|f| f.0 == key).map_or(key, |f| f.1);
        let _ = write!(md, " {title} |");
    }
    md.push_str("\n|---|");
    for _ in RATIO_FIGURES {
        md.push_str("---|");
    }
    md.push('\n');
}

/// The peer's best median of a figure at the kcache row's N, over all its configurations.
fn best(rows: &[Row], n: usize, peer: &str, key: &str) -> Option<f64> {
    rows.iter()
        .filter(|r| r.n == n && r.peer == peer)
        .filter_map(|r| r.figures.get(key).map(|s| s.median))
        .min_by(f64::total_cmp)
}

const RATIO_FIGURES: [&str; 5] = [
    "sync_ms",
    "sync_cpu_s",
    "rss_after_sync_mb",
    "vmhwm_mb",
    "update_cpu_us_per_event",
];

/// The Markdown report: per N, a table of medians (min–max) and the ratios kcache/peer.
pub(super) fn markdown(
    server: &str,
    pod_sizes: &[(usize, usize, usize)],
    rows: &[Row],
    runs: usize,
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "Server: {server}. Runs per configuration: {runs}.\n");
    for (n, total, managed) in pod_sizes {
        let _ = writeln!(
            md,
            "N = {n}: one object is {total} bytes of JSON as read back, {managed} of them managedFields.\n"
        );
    }
    let mut ns: Vec<usize> = rows.iter().map(|r| r.n).collect();
    ns.dedup();
    for n in ns {
        let _ = writeln!(md, "### N = {n} objects\n");
        let _ = write!(md, "| configuration | runs ok |");
        for (_, title, _) in FIGURES {
            let _ = write!(md, " {title} |");
        }
        let _ = write!(md, "\n|---|---|");
        for _ in FIGURES {
            md.push_str("---|");
        }
        md.push('\n');
        for row in rows.iter().filter(|r| r.n == n) {
            let _ = write!(
                md,
                "| {} | {}/{} |",
                row.label,
                row.runs_ok,
                row.runs_ok + row.runs_failed
            );
            for (key, _, decimals) in FIGURES {
                let _ = write!(md, " {} |", cell(row.figures.get(key), decimals));
            }
            md.push('\n');
        }
        md.push('\n');
        server_table(&mut md, rows, n);
        limit_table(&mut md, rows, n);
        let kcache_rows: Vec<&Row> = rows
            .iter()
            .filter(|r| r.n == n && r.peer == "kcache" && !r.is_limit())
            .collect();
        for peer in ["client-go", "kube-rs"] {
            if kcache_rows.is_empty() || !rows.iter().any(|r| r.n == n && r.peer == peer) {
                continue;
            }
            let _ = writeln!(
                md,
                "Ratios kcache / {peer} (medians; same mode, same wire format, – where {peer} has no such line — in brackets: vs {peer}'s best configuration):\n"
            );
            ratio_header(&mut md, "kcache configuration");
            for k in &kcache_rows {
                let _ = write!(md, "| {} |", k.label);
                for key in RATIO_FIGURES {
                    let mine = k.figures.get(key).map(|s| s.median);
                    let same = reference(rows, k, peer)
                        .and_then(|r| r.figures.get(key))
                        .map(|s| s.median);
                    let best = best(rows, n, peer, key);
                    let _ = write!(md, " {} [{}] |", ratio(mine, same), ratio(mine, best));
                }
                md.push('\n');
            }
            md.push('\n');
        }
        let pairs: Vec<(&Row, &Row)> = rows
            .iter()
            .filter(|r| r.n == n && r.protobuf)
            .filter_map(|r| Some((r, json_twin(rows, r)?)))
            .collect();
        if !pairs.is_empty() {
            md.push_str("Ratios protobuf / JSON (medians; same peer, mode and storage):\n\n");
            ratio_header(&mut md, "configuration");
            for (pb, json) in pairs {
                let _ = write!(md, "| {} |", pb.label);
                for key in RATIO_FIGURES {
                    let a = pb.figures.get(key).map(|s| s.median);
                    let b = json.figures.get(key).map(|s| s.median);
                    let _ = write!(md, " {} |", ratio(a, b));
                }
                md.push('\n');
            }
            md.push('\n');
        }
    }
    md
}

/// What the machine is (the run's context in results.json).
fn machine() -> serde_json::Value {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split(':')
                .nth(1)
                .map(|s| s.trim().to_owned())
        })
        .unwrap_or_default();
    let mem = read("/proc/meminfo")
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    serde_json::json!({
        "cpu": cpu,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "memory": mem,
        "kernel": read("/proc/sys/kernel/osrelease").trim(),
        "loadavg_at_end": read("/proc/loadavg").trim(),
    })
}

/// Writes results.json, results.md and the charts; returns the Markdown.
///
/// # Errors
/// When a file cannot be written.
pub(super) fn write_all(
    out: &Path,
    server: &str,
    pod_sizes: &[(usize, usize, usize)],
    records: &[Record],
) -> anyhow::Result<String> {
    let rows = rows(records);
    let runs = records.iter().map(|r| r.run + 1).max().unwrap_or(0);
    let json = serde_json::json!({
        "server": server,
        "machine": machine(),
        "pod_json_bytes": pod_sizes.iter().map(|(n, total, managed)| {
            serde_json::json!({"n": n, "total": total, "managed_fields": managed})
        }).collect::<Vec<_>>(),
        "runs": records,
        "summary": rows,
    });
    let path = out.join("results.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("writing {}", path.display()))?;
    let md = markdown(server, pod_sizes, &rows, runs);
    let path = out.join("results.md");
    std::fs::write(&path, &md).with_context(|| format!("writing {}", path.display()))?;
    let mut ns: Vec<usize> = rows.iter().map(|r| r.n).collect();
    ns.dedup();
    for n in ns {
        let these: Vec<&Row> = rows.iter().filter(|r| r.n == n).collect();
        let path = out.join(format!("chart-{n}.png"));
        if let Err(e) = chart::draw(&path, n, &these) {
            eprintln!("bench: chart {}: {e:#}", path.display());
        }
    }
    Ok(md)
}

#[cfg(test)]
mod tests;
