//! What a client costs the API server: the server process's CPU time, resident memory and
//! bytes written, read from `/proc/<pid>` while a peer (or a fleet of peers) syncs and takes
//! updates.
//!
//! CPU time is `utime + stime` of `/proc/<pid>/stat` (every thread); memory is `VmRSS` of
//! `/proc/<pid>/status`, sampled every [`SAMPLE_EVERY`] during a phase for its peak; bytes
//! written are `wchar` of `/proc/<pid>/io`: every byte the server passed to `write(2)` and its
//! kind, which for kube-apiserver is mostly the responses on its client connections (its
//! requests to etcd and its log lines are in it too, and are small beside a list of pods).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use serde::Serialize;

use crate::metrics::{stat_field, status_kib};

/// How often a phase samples the server's resident memory for its peak.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// Reading the server's `/proc` files failed.
#[derive(Debug, thiserror::Error)]
pub enum ServerCostError {
    /// A file could not be read (the process is gone, or belongs to another user).
    #[error("reading /proc/{pid}/{file}: {source}")]
    Read {
        /// The server's process id.
        pid: u32,
        /// `stat`, `status` or `io`.
        file: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// A file lacks the field or holds something else than a number.
    #[error("/proc/{pid}/{file} has no usable {field}")]
    Field {
        /// The server's process id.
        pid: u32,
        /// `stat`, `status` or `io`.
        file: &'static str,
        /// The field looked for.
        field: &'static str,
    },
}

/// One reading of the server process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// User + system CPU time so far, in clock ticks.
    pub cpu_ticks: u64,
    /// `VmRSS`, in bytes.
    pub rss_bytes: u64,
    /// `wchar`: bytes written so far.
    pub written_bytes: u64,
}

/// The server process to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Server {
    pid: u32,
}

impl Server {
    /// The process with this id (checked on the first [`Server::sample`]).
    #[must_use]
    pub fn new(pid: u32) -> Self {
        Self { pid }
    }

    /// The process's id.
    #[must_use]
    pub fn pid(self) -> u32 {
        self.pid
    }

    /// Reads the three files once.
    ///
    /// # Errors
    /// [`ServerCostError`] when a file cannot be read or parsed.
    pub fn sample(self) -> Result<Sample, ServerCostError> {
        let read = |file: &'static str| {
            std::fs::read_to_string(format!("/proc/{}/{file}", self.pid)).map_err(|source| {
                ServerCostError::Read {
                    pid: self.pid,
                    file,
                    source,
                }
            })
        };
        let field = |file, field| ServerCostError::Field {
            pid: self.pid,
            file,
            field,
        };
        let cpu_ticks = parse_cpu_ticks(&read("stat")?).ok_or(field("stat", "utime/stime"))?;
        let rss_bytes = status_kib(&read("status")?, "VmRSS").ok_or(field("status", "VmRSS"))?;
        let written_bytes = io_field(&read("io")?, "wchar").ok_or(field("io", "wchar"))?;
        Ok(Sample {
            cpu_ticks,
            rss_bytes,
            written_bytes,
        })
    }

    /// Starts watching a phase: reads the server now and samples its memory until
    /// [`Phase::finish`]. Call it inside a tokio runtime.
    ///
    /// # Errors
    /// [`ServerCostError`] when the first reading fails.
    pub fn phase(self) -> Result<Phase, ServerCostError> {
        let start = self.sample()?;
        let peak = Arc::new(AtomicU64::new(start.rss_bytes));
        let sampler = tokio::spawn({
            let peak = Arc::clone(&peak);
            async move {
                let mut tick = tokio::time::interval(SAMPLE_EVERY);
                loop {
                    tick.tick().await;
                    if let Ok(s) = self.sample() {
                        peak.fetch_max(s.rss_bytes, Ordering::Relaxed);
                    }
                }
            }
        });
        Ok(Phase {
            server: self,
            start,
            peak,
            sampler,
        })
    }
}

/// A phase being watched ([`Server::phase`]).
#[derive(Debug)]
pub struct Phase {
    server: Server,
    start: Sample,
    peak: Arc<AtomicU64>,
    sampler: tokio::task::JoinHandle<()>,
}

impl Phase {
    /// Ends the phase: the server's CPU, peak memory growth and bytes written since it began.
    ///
    /// # Errors
    /// [`ServerCostError`] when the last reading fails (the server went away).
    pub fn finish(self) -> Result<PhaseCost, ServerCostError> {
        self.sampler.abort();
        let end = self.server.sample()?;
        let peak = self.peak.load(Ordering::Relaxed).max(end.rss_bytes);
        Ok(PhaseCost::between(
            &self.start,
            &end,
            peak,
            ticks_per_second(),
        ))
    }
}

impl Drop for Phase {
    fn drop(&mut self) {
        self.sampler.abort();
    }
}

/// The server's cost over one phase.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PhaseCost {
    /// CPU seconds the server spent.
    pub cpu_s: f64,
    /// The highest `VmRSS` seen minus the one at the start (0 when it never rose), in bytes.
    pub rss_growth_bytes: u64,
    /// `VmRSS` at the start, in bytes.
    pub rss_start_bytes: u64,
    /// Bytes the server wrote.
    pub written_bytes: u64,
}

impl PhaseCost {
    /// The cost between two readings, with the peak `VmRSS` seen between them.
    #[must_use]
    pub fn between(start: &Sample, end: &Sample, peak_rss: u64, ticks_per_s: u64) -> Self {
        Self {
            cpu_s: end.cpu_ticks.saturating_sub(start.cpu_ticks) as f64 / ticks_per_s.max(1) as f64,
            rss_growth_bytes: peak_rss.saturating_sub(start.rss_bytes),
            rss_start_bytes: start.rss_bytes,
            written_bytes: end.written_bytes.saturating_sub(start.written_bytes),
        }
    }
}

/// The kernel's clock ticks per second (`sysconf(_SC_CLK_TCK)`: 100 on Linux).
fn ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second()
}

/// `utime + stime` (fields 14 and 15) of a `/proc/<pid>/stat` line.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    Some(stat_field(stat, 14)? + stat_field(stat, 15)?)
}

/// A `name: 123` line of `/proc/<pid>/io`.
fn io_field(io: &str, name: &str) -> Option<u64> {
    io.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_utime_plus_stime_after_a_name_with_spaces() {
        let stat = "42 (kube apiserver) S 1 42 42 0 -1 4194560 100 0 3 0 250 75 0 0 20 0 12 0";
        assert_eq!(parse_cpu_ticks(stat), Some(325));
        assert_eq!(parse_cpu_ticks("42 (x) S 1"), None);
    }

    #[test]
    fn status_and_io_fields_are_read_in_bytes() {
        let status = "Name:\tkube-apiserver\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(status_kib(status, "VmRSS"), Some(1024 * 1024));
        assert_eq!(status_kib(status, "VmSwap"), None);
        let io = "rchar: 10\nwchar: 12345\nsyscr: 3\n";
        assert_eq!(io_field(io, "wchar"), Some(12345));
        assert_eq!(io_field(io, "write_bytes"), None);
    }

    #[test]
    fn a_phase_cost_is_the_difference_and_the_growth_to_the_peak() {
        let start = Sample {
            cpu_ticks: 100,
            rss_bytes: 1_000,
            written_bytes: 50,
        };
        let end = Sample {
            cpu_ticks: 350,
            rss_bytes: 900,
            written_bytes: 5_050,
        };
        let cost = PhaseCost::between(&start, &end, 4_000, 100);
        assert_eq!(cost.cpu_s, 2.5);
        assert_eq!(cost.rss_growth_bytes, 3_000);
        assert_eq!(cost.written_bytes, 5_000);
        // Memory that only fell grew by nothing.
        assert_eq!(
            PhaseCost::between(&start, &end, 900, 100).rss_growth_bytes,
            0
        );
    }

    #[tokio::test]
    async fn this_process_can_be_read_as_a_server() {
        let me = Server::new(std::process::id());
        let phase = me.phase().expect("reading /proc/self");
        let mut v = vec![0u8; 8 << 20];
        for (i, b) in v.iter_mut().enumerate().step_by(4096) {
            *b = i as u8;
        }
        std::hint::black_box(&v);
        tokio::time::sleep(SAMPLE_EVERY * 3).await;
        let cost = phase.finish().expect("reading /proc/self again");
        assert!(cost.rss_start_bytes > 0);
        assert!(cost.rss_growth_bytes >= 4 << 20, "{cost:?}");
        assert!(matches!(
            Server::new(u32::MAX).sample(),
            Err(ServerCostError::Read { file: "stat", .. })
        ));
    }
}
