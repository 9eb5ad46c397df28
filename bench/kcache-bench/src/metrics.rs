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
    let field = |name: &'static str| -> Result<u64, MetricsError> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kb| kb.trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .ok_or(MetricsError::Field(name))
    };
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
    fn cpu_time_grows_while_working() {
        let before = cpu_time();
        let mut x = 0u64;
        while cpu_time() == before {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(cpu_time() > before, "{x}");
    }
}
