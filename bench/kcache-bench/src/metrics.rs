//! The process's own CPU time and memory, as the peers report them.
//!
//! CPU time is `CLOCK_PROCESS_CPUTIME_ID` (user + system time of every thread, what `getrusage`
//! sums as `ru_utime + ru_stime`); memory is `VmHWM` and `VmRSS` from `/proc/self/status`.

use std::time::Duration;

/// Reading `/proc/self/status` failed.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The file could not be read.
    #[error("reading /proc/self/status: {0}")]
    Read(#[from] std::io::Error),
    /// A field is missing or not a number of kB.
    #[error("/proc/self/status has no usable {0} line")]
    Field(&'static str),
}

/// The process's CPU time so far (user + system, all threads).
pub fn cpu_time() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// The process's page faults so far (minor + major, all threads): fields 10 and 12 of
/// `/proc/self/stat`; 0 where that file cannot be read (not Linux).
///
/// The bench reports them beside CPU time because a fault's cost is not fixed: in a VM whose
/// memory the host backs lazily, a first touch of guest memory cost 12–47 µs on this project's
/// 2-core machine against 2 µs for memory the host already backed (BENCHMARKS.md, 2026-12-05),
/// and it is counted as the process's CPU time.
pub fn page_faults() -> u64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| parse_faults(&stat))
        .unwrap_or(0)
}

/// Minor + major faults from a `/proc/<pid>/stat` line.
fn parse_faults(stat: &str) -> Option<u64> {
    Some(stat_field(stat, 10)? + stat_field(stat, 12)?)
}

/// Field `n` (1-based, as `man 5 proc` numbers them) of a `/proc/<pid>/stat` line as a number.
/// The command name (field 2) may hold spaces and parentheses: fields are counted after its
/// last `)`.
pub(crate) fn stat_field(stat: &str, n: usize) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name, state is field 3: field n is at index n - 3.
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

/// A `Name:   123 kB` line of a `/proc/<pid>/status` text, in bytes.
pub(crate) fn status_kib(status: &str, name: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// Resident memory figures, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// `VmHWM`: the peak resident set size.
    pub hwm_bytes: u64,
    /// `VmRSS`: the current resident set size.
    pub rss_bytes: u64,
}

/// `VmHWM` and `VmRSS` of this process.
///
/// # Errors
/// [`MetricsError`] when `/proc/self/status` cannot be read or lacks the fields (not Linux).
pub fn memory() -> Result<Memory, MetricsError> {
    parse_status(&std::fs::read_to_string("/proc/self/status")?)
}

/// Parses the `VmHWM:` and `VmRSS:` lines of a `/proc/<pid>/status` text.
///
/// # Errors
/// [`MetricsError::Field`] naming a missing or malformed field.
pub fn parse_status(status: &str) -> Result<Memory, MetricsError> {
    let field = |name: &'static str| status_kib(status, name).ok_or(MetricsError::Field(name));
    Ok(Memory {
        hwm_bytes: field("VmHWM")?,
        rss_bytes: field("VmRSS")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_status_reads_hwm_and_rss_in_bytes() {
        let text = "Name:\tpeer\nVmPeak:\t 9000 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n";
        assert_eq!(
            parse_status(text).unwrap(),
            Memory {
                hwm_bytes: 2048 * 1024,
                rss_bytes: 1024 * 1024
            }
        );
    }

    #[test]
    fn parse_status_names_a_missing_field() {
        let err = parse_status("VmHWM:\t 1 kB\n").unwrap_err();
        assert!(matches!(err, MetricsError::Field("VmRSS")), "{err}");
    }

    #[test]
    fn memory_of_this_process_is_plausible() {
        let m = memory().unwrap();
        assert!(m.rss_bytes > 0);
        assert!(m.hwm_bytes >= m.rss_bytes);
    }

    #[test]
    fn parse_faults_counts_minor_and_major_after_the_name() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 170 0 3 0 5 2 0 0 20 0 1 0";
        assert_eq!(parse_faults(stat), Some(173));
        assert_eq!(parse_faults("42 (x) S 1"), None);
    }

    #[test]
    fn page_faults_grow_when_fresh_memory_is_touched() {
        let before = page_faults();
        let mut v = vec![0u8; 16 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        std::hint::black_box(&v);
        assert!(page_faults() > before);
    }

    #[test]
    fn cpu_time_grows_while_working() {
        let before = cpu_time();
        let mut x = 0u64;
        while cpu_time() == before {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(cpu_time() > before, "{x}");
    }
}
