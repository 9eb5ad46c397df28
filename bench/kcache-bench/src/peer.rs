//! What every Rust peer shares: its flags (those of `harness/client-go-peer`), the sync timer
//! and the update-window counter.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use crate::{
    PeerLine,
    metrics::{self, MetricsError},
};

/// How the initial list is fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// A (paginated) LIST, then a WATCH from its resourceVersion.
    ListWatch,
    /// One WATCH with `sendInitialEvents=true` (the streaming list).
    Streaming,
}

impl Mode {
    /// The name used in the result line: `list-watch` or `streaming`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ListWatch => "list-watch",
            Mode::Streaming => "streaming",
        }
    }
}

/// Which objects the benchmark loads and the peers cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Dataset {
    /// Realistic pods (~8 KB of JSON each), see [`crate::dataset::pod`].
    #[default]
    Pods,
    /// `Widget` custom resources of the CRD `widgets.bench.kcache.io` (JSON only, ~5–6 KB
    /// each), see [`crate::widgets`].
    Widgets,
}

impl Dataset {
    /// The name on the command line and in results: `pods` or `widgets`.
    pub fn as_str(self) -> &'static str {
        match self {
            Dataset::Pods => "pods",
            Dataset::Widgets => "widgets",
        }
    }
}

/// The flags every peer takes (the same as `client-go-peer`'s).
#[derive(Debug, Clone, clap::Args)]
pub struct PeerArgs {
    /// Kubeconfig of the server to read from.
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Namespace whose objects are cached.
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// Which objects: pods, or the custom resources of the widgets CRD.
    #[arg(long, value_enum, default_value_t = Dataset::Pods)]
    pub dataset: Dataset,
    /// The number of pods expected; sync is done when the cache is synced and holds this many.
    #[arg(long)]
    pub n: u64,
    /// How the initial list is fetched.
    #[arg(long, value_enum, default_value_t = Mode::ListWatch)]
    pub mode: Mode,
    /// After sync, wait for this many update events and time them.
    #[arg(long, default_value_t = 0)]
    pub updates: u64,
    /// Create this file once synced (a driver then sends the updates).
    #[arg(long)]
    pub ready_file: Option<PathBuf>,
    /// Give up after this long (sync plus updates), e.g. `300s` or `5m`.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// Parses `300`, `300s`, `5m` or `1h` into a duration.
///
/// # Errors
/// A message naming the accepted forms.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration like 90s, 5m or 1h"))?;
    match unit {
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!("`{s}` is not a duration like 90s, 5m or 1h")),
    }
}

/// A peer failed.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// Memory figures could not be read.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// The ready file could not be written.
    #[error("writing the ready file {path}: {source}")]
    ReadyFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Times the sync phase: wall clock and process CPU from [`SyncTimer::start`].
#[derive(Debug, Clone, Copy)]
pub struct SyncTimer {
    wall: Instant,
    cpu: Duration,
    faults: u64,
}

impl SyncTimer {
    /// Starts timing now.
    pub fn start() -> Self {
        Self {
            wall: Instant::now(),
            cpu: metrics::cpu_time(),
            faults: metrics::page_faults(),
        }
    }

    /// Ends the sync phase: a [`PeerLine`] with the sync figures and memory read now, then
    /// creates the ready file (if any) so that the driver starts its updates.
    ///
    /// # Errors
    /// [`PeerError`] when memory cannot be read or the ready file cannot be written.
    pub fn synced(&self, peer: &str, args: &PeerArgs, n: u64) -> Result<PeerLine, PeerError> {
        let wall = self.wall.elapsed();
        let cpu = metrics::cpu_time().saturating_sub(self.cpu);
        let mem = metrics::memory()?;
        let mut extra = std::collections::BTreeMap::new();
        extra.insert("namespace".into(), args.namespace.clone().into());
        extra.insert("expected_n".into(), args.n.into());
        extra.insert(
            "sync_page_faults".into(),
            metrics::page_faults().saturating_sub(self.faults).into(),
        );
        let line = PeerLine {
            peer: peer.to_owned(),
            mode: args.mode.as_str().to_owned(),
            n,
            sync_ms: wall.as_secs_f64() * 1000.0,
            sync_cpu_s: cpu.as_secs_f64(),
            vmhwm_bytes: mem.hwm_bytes,
            rss_after_sync_bytes: mem.rss_bytes,
            update_events: None,
            update_events_per_s: None,
            update_cpu_s: None,
            extra,
        };
        if let Some(path) = &args.ready_file {
            std::fs::write(path, b"synced\n").map_err(|source| PeerError::ReadyFile {
                path: path.clone(),
                source,
            })?;
        }
        Ok(line)
    }
}

/// Counts update events after sync and times the window from the first to the `target`-th,
/// like `client-go-peer`: the rate is `(target - 1) / elapsed`, the CPU is the process's CPU
/// time between the two. The process's counters are read at those two events only (as
/// `client-go-peer` does): read on every event, their system calls would count in the window.
#[derive(Debug)]
pub struct UpdateWindow {
    target: u64,
    seen: u64,
    first: Option<Sample>,
    /// Rate, CPU seconds and page faults of the window.
    result: Option<(f64, f64, u64)>,
}

/// The process's counters at one event of an [`UpdateWindow`].
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// When the event was seen.
    pub at: Instant,
    /// The process's CPU time then.
    pub cpu: Duration,
    /// The process's page faults then.
    pub faults: u64,
}

impl Sample {
    /// This process's counters now.
    pub fn now() -> Self {
        Self {
            at: Instant::now(),
            cpu: metrics::cpu_time(),
            faults: metrics::page_faults(),
        }
    }
}

impl UpdateWindow {
    /// A window that completes at `target` events (`0`: never counts).
    pub fn new(target: u64) -> Self {
        Self {
            target,
            seen: 0,
            first: None,
            result: None,
        }
    }

    /// Records one update event; returns `true` once `target` events have been seen.
    pub fn record(&mut self) -> bool {
        self.record_with(Sample::now)
    }

    /// [`record`](Self::record) with the counters read by `sample`, which is called at the
    /// window's first and `target`-th event only.
    pub fn record_with(&mut self, mut sample: impl FnMut() -> Sample) -> bool {
        if self.target == 0 || self.result.is_some() {
            return self.is_done();
        }
        self.seen += 1;
        if self.seen == 1 {
            self.first = Some(sample());
        }
        if self.seen < self.target {
            return false;
        }
        let first = self.first.expect("sampled at the first event");
        let now = if self.seen == 1 { first } else { sample() };
        let elapsed = now.at.duration_since(first.at).as_secs_f64();
        let rate = if self.seen > 1 && elapsed > 0.0 {
            (self.seen - 1) as f64 / elapsed
        } else {
            0.0
        };
        self.result = Some((
            rate,
            now.cpu.saturating_sub(first.cpu).as_secs_f64(),
            now.faults.saturating_sub(first.faults),
        ));
        true
    }

    /// Whether `target` events have been seen (always `true` for a target of 0).
    pub fn is_done(&self) -> bool {
        self.target == 0 || self.result.is_some()
    }

    /// Events seen so far.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Fills the update figures of `line` (left `None` for a target of 0 or an unfinished
    /// window), with the window's page faults as `update_page_faults`.
    pub fn fill(&self, line: &mut PeerLine) {
        if let Some((rate, cpu, faults)) = self.result {
            line.update_events = Some(self.seen);
            line.update_events_per_s = Some(rate);
            line.update_cpu_s = Some(cpu);
            line.extra
                .insert("update_page_faults".into(), faults.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_duration_accepts_seconds_minutes_hours() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("5 minutes").is_err());
        assert!(parse_duration("m").is_err());
    }

    #[test]
    fn update_window_completes_at_the_target_and_stops_counting() {
        let mut w = UpdateWindow::new(3);
        assert!(!w.is_done());
        assert!(!w.record());
        assert!(!w.record());
        assert!(w.record());
        assert!(w.record(), "stays done");
        assert_eq!(w.seen(), 3);
        let mut line = PeerLine::parse_output(
            r#"{"peer":"p","mode":"list-watch","n":1,"sync_ms":1,"sync_cpu_s":0,"vmhwm_bytes":2,"rss_after_sync_bytes":1,"update_events":null,"update_events_per_s":null,"update_cpu_s":null}"#,
        )
        .unwrap();
        w.fill(&mut line);
        assert_eq!(line.update_events, Some(3));
        assert!(line.update_cpu_s.unwrap() >= 0.0);
    }

    #[test]
    fn update_window_samples_the_process_at_its_first_and_last_event_only() {
        // Reading the counters costs system calls (and a /proc read for the faults):
        // taken on every event, that cost would count in the window's CPU per event.
        // client-go-peer samples twice too.
        let mut w = UpdateWindow::new(5);
        let mut samples = 0;
        let t0 = Instant::now();
        for i in 0..7u64 {
            w.record_with(|| {
                samples += 1;
                Sample {
                    at: t0 + Duration::from_millis(10 * i),
                    cpu: Duration::from_micros(100 * i),
                    faults: 3 * i,
                }
            });
        }
        assert_eq!(samples, 2, "first and 5th event only");
        assert_eq!(w.seen(), 5);
        let (rate, cpu, faults) = w.result.unwrap();
        assert!((rate - 4.0 / 0.04).abs() < 1e-6, "{rate}");
        assert!((cpu - 0.0004).abs() < 1e-12, "{cpu}");
        assert_eq!(faults, 12);
    }

    #[test]
    fn update_window_with_no_target_is_done_and_fills_nothing() {
        let mut w = UpdateWindow::new(0);
        assert!(w.is_done());
        assert!(w.record());
        assert_eq!(w.seen(), 0);
    }
}
