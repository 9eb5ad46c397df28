//! `kcache bench --fleet SIZES`: a fleet of controllers restarting. SIZE peers of one
//! configuration start at once against the same objects (each its own process, as replicas of
//! different controllers are) and sync; the run ends when every one has synced and exited.
//! Reported per configuration and size: the wall time until the last member synced, the
//! members' CPU and memory added up, and what the fleet cost the API server (CPU seconds, peak
//! resident memory growth and bytes written, from `/proc` of its process).

use std::{fmt::Write as _, path::Path, time::Instant};

use anyhow::Context as _;
use kcache_bench::server_cost::{self, PhaseCost};
use serde::Serialize;

use super::{
    peer_process::Peer,
    row::Stat,
    runner::{Config, Context},
};

/// One start of a fleet.
#[derive(Debug, Serialize)]
pub(super) struct FleetRecord {
    pub n: usize,
    pub size: usize,
    pub run: usize,
    pub label: String,
    /// Members that synced and printed a valid line.
    pub members_ok: usize,
    /// The first member's failure, if any.
    pub error: Option<String>,
    /// From the first member's start to the last one's sync, in milliseconds.
    pub wall_ms: f64,
    /// The members' sync CPU, added up, in seconds.
    pub client_cpu_s: f64,
    /// The members' `VmRSS` after sync, added up, in bytes.
    pub client_rss_bytes: u64,
    /// What the fleet's sync cost the API server.
    pub server: Option<PhaseCost>,
}

/// Starts `size` peers of `config` at once and waits for all of them.
pub(super) async fn run(
    ctx: &Context<'_>,
    config: &Config,
    size: usize,
    run: usize,
) -> FleetRecord {
    let label = config.label();
    let mut record = FleetRecord {
        n: ctx.n,
        size,
        run,
        label: label.clone(),
        members_ok: 0,
        error: None,
        wall_ms: 0.0,
        client_cpu_s: 0.0,
        client_rss_bytes: 0,
        server: None,
    };
    if let Err(e) = run_members(ctx, config, &mut record).await {
        record.error.get_or_insert(format!("{e:#}"));
    }
    record
}

async fn run_members(
    ctx: &Context<'_>,
    config: &Config,
    record: &mut FleetRecord,
) -> anyhow::Result<()> {
    let slug = record.label.replace(' ', "-");
    let deadline = tokio::time::Instant::now() + ctx.args.timeout;
    let phase = ctx.server.map(server_cost::Server::phase).transpose()?;
    let started = Instant::now();
    let mut peers = Vec::with_capacity(record.size);
    for member in 0..record.size {
        let tag = format!(
            "{slug}-n{}-f{}-r{}-m{member}",
            ctx.n, record.size, record.run
        );
        peers.push(Peer::start(ctx, config, &tag, 0)?);
    }
    let synced = futures::future::join_all(peers.iter_mut().map(|p| p.synced(deadline))).await;
    record.wall_ms = started.elapsed().as_secs_f64() * 1e3;
    record.server = phase.map(server_cost::Phase::finish).transpose()?;
    let lines =
        futures::future::join_all(peers.into_iter().map(|p| p.finish(ctx, config, deadline))).await;
    for (member, (synced, line)) in synced.into_iter().zip(lines).enumerate() {
        match (synced, line) {
            (Ok(true), Ok(line)) => {
                record.members_ok += 1;
                record.client_cpu_s += line.sync_cpu_s;
                record.client_rss_bytes += line.rss_after_sync_bytes;
            }
            (synced, line) => {
                let why = match (synced, line) {
                    (Err(e), _) | (_, Err(e)) => format!("{e:#}"),
                    _ => "exited before its sync".to_owned(),
                };
                record
                    .error
                    .get_or_insert(format!("member {member}: {why}"));
            }
        }
    }
    Ok(())
}

/// The figures of a fleet table: title, decimals, the figure of one record.
type Figure = (&'static str, usize, fn(&FleetRecord) -> Option<f64>);

const FIGURES: [Figure; 6] = [
    ("wall until all synced (ms)", 0, |r| Some(r.wall_ms)),
    ("members' sync CPU (s)", 2, |r| Some(r.client_cpu_s)),
    ("members' RSS after sync (MB)", 0, |r| {
        Some(r.client_rss_bytes as f64 / 1e6)
    }),
    ("server CPU (s)", 2, |r| Some(r.server?.cpu_s)),
    ("server peak RSS growth (MB)", 0, |r| {
        Some(r.server?.rss_growth_bytes as f64 / 1e6)
    }),
    ("server bytes written (MB)", 1, |r| {
        Some(r.server?.written_bytes as f64 / 1e6)
    }),
];

/// The Markdown tables: per N, one row per configuration and fleet size (medians over the
/// runs in which every member synced, min–max in brackets).
pub(super) fn markdown(server: &str, records: &[FleetRecord]) -> String {
    let mut md = format!(
        "Server: {server}. Fleets of controllers restarting: every member of a fleet starts at \
         once, syncs and exits; the server's figures are read from /proc of its process.\n\n"
    );
    let mut ns: Vec<usize> = records.iter().map(|r| r.n).collect();
    ns.dedup();
    for n in ns {
        let _ = write!(
            md,
            "### N = {n} objects\n\n| configuration | fleet | runs ok |"
        );
        for (title, _, _) in FIGURES {
            let _ = write!(md, " {title} |");
        }
        md.push_str("\n|---|---|---|");
        md.push_str(&"---|".repeat(FIGURES.len()));
        md.push('\n');
        let mut keys: Vec<(&str, usize)> = Vec::new();
        for r in records.iter().filter(|r| r.n == n) {
            if !keys.contains(&(r.label.as_str(), r.size)) {
                keys.push((r.label.as_str(), r.size));
            }
        }
        for (label, size) in keys {
            let same: Vec<&FleetRecord> = records
                .iter()
                .filter(|r| r.n == n && r.label == label && r.size == size)
                .collect();
            let ok: Vec<&&FleetRecord> = same.iter().filter(|r| r.error.is_none()).collect();
            let _ = write!(md, "| {label} | {size} | {}/{} |", ok.len(), same.len());
            for (_, decimals, figure) in FIGURES {
                let stat = Stat::of(ok.iter().filter_map(|r| figure(r)).collect());
                let _ = write!(md, " {} |", super::report::cell(stat.as_ref(), decimals));
            }
            md.push('\n');
        }
        md.push('\n');
    }
    md
}

/// Writes `fleet.json` and `fleet.md` into `out`; returns the Markdown.
///
/// # Errors
/// When a file cannot be written.
pub(super) fn write_all(
    out: &Path,
    server: &str,
    records: &[FleetRecord],
) -> anyhow::Result<String> {
    let path = out.join("fleet.json");
    let json = serde_json::json!({ "server": server, "fleets": records });
    std::fs::write(&path, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("writing {}", path.display()))?;
    let md = markdown(server, records);
    let path = out.join("fleet.md");
    std::fs::write(&path, &md).with_context(|| format!("writing {}", path.display()))?;
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(size: usize, run: usize, wall_ms: f64, error: Option<&str>) -> FleetRecord {
        FleetRecord {
            n: 100,
            size,
            run,
            label: "kcache list-watch default".into(),
            members_ok: if error.is_some() { size - 1 } else { size },
            error: error.map(str::to_owned),
            wall_ms,
            client_cpu_s: 0.5 * size as f64,
            client_rss_bytes: 10_000_000 * size as u64,
            server: Some(PhaseCost {
                cpu_s: 0.25 * size as f64,
                rss_growth_bytes: 4_000_000,
                rss_start_bytes: 1,
                written_bytes: 1_500_000 * size as u64,
            }),
        }
    }

    #[test]
    fn a_fleet_row_takes_medians_over_the_runs_where_every_member_synced() {
        let records = [
            record(10, 0, 900.0, None),
            record(10, 1, 1100.0, None),
            record(10, 2, 99_999.0, Some("member 3: exited with 1")),
            record(1, 0, 300.0, None),
        ];
        let md = markdown("test", &records);
        assert!(
            md.contains("| kcache list-watch default | 10 | 2/3 | 1000 (900–1100) | 5.00 | 100 | 2.50 | 4 | 15.0 |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| kcache list-watch default | 1 | 1/1 | 300 | 0.50 | 10 | 0.25 | 4 | 1.5 |"
            ),
            "{md}"
        );
        assert!(
            !md.contains("99999"),
            "a failed fleet is not in the medians: {md}"
        );
    }
}
