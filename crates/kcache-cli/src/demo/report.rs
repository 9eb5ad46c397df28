//! The demo's summary: a table for people, one JSON object for machines.

use serde::Serialize;

/// Everything the demo measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Summary {
    /// Pods on the server at the end (equal to the cache's size when consistent).
    pub objects: usize,
    /// Pods seeded before the informer started.
    pub seeded: usize,
    /// Notifications delivered to the counting handler after the initial list.
    pub events: u64,
    /// `events` per second of churn.
    pub events_per_sec: f64,
    /// Time from the informer's start to its cache holding the initial list.
    pub sync_ms: u64,
    /// Initial-list objects per second.
    pub sync_objects_per_sec: f64,
    /// Relists after the first list (410s, failed watches).
    pub relists: u64,
    /// Watches opened after the first one.
    pub watch_restarts: u64,
    /// Errors the reflector recovered from.
    pub reflector_errors: u64,
    /// Faults injected.
    pub faults_injected: u64,
    /// Faults injected, per kind.
    pub faults: Vec<(&'static str, u64)>,
    /// Writes made during churn.
    pub writes: u64,
    /// Churn duration in seconds.
    pub duration_secs: f64,
    /// Notifications each handler handled (for the controller: reconciles).
    pub handled: Vec<(&'static str, u64)>,
    /// Time for the cache and handlers to settle after the last write.
    pub settle_ms: u64,
    /// Peak resident set size of the process (`VmHWM`), server included.
    pub peak_rss_bytes: u64,
    /// Resident set size once the server was seeded, before the informer started (`VmRSS`):
    /// the embedded server's share.
    pub server_rss_bytes: u64,
    /// Resident set size right after the initial sync (`VmRSS`): server plus synced informer.
    pub rss_after_sync_bytes: u64,
    /// Bytes the informer's cache holds at the end, by its memory accounting
    /// (`SharedIndexInformer::memory`): the objects and the store's entries (indexes not counted).
    pub cache_bytes: u64,
    /// `cache_bytes` per cached object (0 with no objects).
    pub cache_bytes_per_object: u64,
    /// The verdict: cache and every handler's state equal the server's LIST.
    pub consistent: bool,
    /// Number of differences found.
    pub difference_count: usize,
    /// Up to 20 of them.
    pub differences: Vec<String>,
}

/// Peak RSS of this process from `/proc/self/status` (`VmHWM`); 0 where unavailable.
pub(super) fn peak_rss_bytes() -> u64 {
    proc_status_bytes("VmHWM:")
}

/// Current RSS of this process (`VmRSS`); 0 where unavailable.
pub(super) fn rss_bytes() -> u64 {
    proc_status_bytes("VmRSS:")
}

fn proc_status_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| parse_kb_field(&s, field))
        .unwrap_or(0)
}

fn parse_kb_field(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

impl Summary {
    /// The human summary table.
    pub(crate) fn table(&self) -> String {
        let faults = if self.faults.is_empty() {
            "0 (faults off)".to_owned()
        } else {
            let kinds: Vec<String> = self
                .faults
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            format!("{} ({})", self.faults_injected, kinds.join(", "))
        };
        let handled: Vec<String> = self
            .handled
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let verdict = if self.consistent {
            format!(
                "CONSISTENT: cache, node index and {} handlers equal a fresh LIST ({} pods, same resourceVersions)",
                self.handled.len(),
                self.objects
            )
        } else {
            format!("DIVERGED: {} differences", self.difference_count)
        };
        let rows = [
            (
                "objects",
                format!("{} ({} seeded)", self.objects, self.seeded),
            ),
            (
                "initial sync",
                format!(
                    "{} ms ({:.0} objects/s)",
                    self.sync_ms, self.sync_objects_per_sec
                ),
            ),
            (
                "writes",
                format!("{} in {:.1} s", self.writes, self.duration_secs),
            ),
            (
                "events",
                format!("{} ({:.0}/s)", self.events, self.events_per_sec),
            ),
            ("handled", handled.join(", ")),
            ("relists", self.relists.to_string()),
            ("watch restarts", self.watch_restarts.to_string()),
            ("faults survived", faults),
            ("settled after", format!("{} ms", self.settle_ms)),
            (
                "peak RSS",
                format!(
                    "{} (the embedded server after seeding: {})",
                    mib(self.peak_rss_bytes),
                    mib(self.server_rss_bytes)
                ),
            ),
            (
                "cache memory",
                format!(
                    "{} ({} bytes per pod, by the informer's accounting)",
                    mib(self.cache_bytes),
                    self.cache_bytes_per_object
                ),
            ),
            ("verdict", verdict),
        ];
        let mut out = String::from("kcache demo — summary\n");
        for (k, v) in rows {
            out.push_str(&format!("  {k:<16} {v}\n"));
        }
        for d in &self.differences {
            out.push_str(&format!("  - {d}\n"));
        }
        out
    }
}

/// `bytes / objects`, rounded down; 0 with no objects.
pub(super) fn per_object(bytes: u64, objects: usize) -> u64 {
    match objects {
        0 => 0,
        n => bytes / n as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_hwm_is_read_in_bytes() {
        let status =
            "Name:\tkcache\nVmPeak:\t  300000 kB\nVmHWM:\t   51234 kB\nVmRSS:\t 40000 kB\n";
        assert_eq!(parse_kb_field(status, "VmHWM:"), Some(51_234 * 1024));
        assert_eq!(parse_kb_field(status, "VmRSS:"), Some(40_000 * 1024));
        assert_eq!(parse_kb_field("Name: x\n", "VmHWM:"), None);
    }

    #[test]
    fn bytes_per_object_rounds_down_and_is_zero_without_objects() {
        assert_eq!(per_object(10_000, 3), 3_333);
        assert_eq!(per_object(10_000, 0), 0);
    }

    #[test]
    fn peak_rss_of_this_process_is_positive_on_linux() {
        assert!(peak_rss_bytes() > 0);
    }
}
