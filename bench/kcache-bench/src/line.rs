//! The peers' result line.
//!
//! Every peer (client-go, kube-rs, kcache) prints exactly one JSON object on stdout with the
//! fields of [`PeerLine`]; fields a peer adds beyond those (client-go's request counters, the
//! kcache storage mode) are kept in [`PeerLine::extra`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One peer run's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerLine {
    /// `client-go`, `kube-rs` or `kcache`.
    pub peer: String,
    /// How the initial list was done: `list-watch` or `streaming`.
    pub mode: String,
    /// Objects in the cache after sync.
    pub n: u64,
    /// Wall time from the informer's start to the cache holding all objects, in milliseconds.
    pub sync_ms: f64,
    /// The process's user + system CPU time over the same window, in seconds.
    pub sync_cpu_s: f64,
    /// `VmHWM` (peak resident set) right after sync, in bytes.
    pub vmhwm_bytes: u64,
    /// `VmRSS` right after sync, in bytes.
    pub rss_after_sync_bytes: u64,
    /// Update events counted after sync (`None` when the run asked for none).
    pub update_events: Option<u64>,
    /// Update events per second, from the first to the last counted one.
    pub update_events_per_s: Option<f64>,
    /// The process's CPU time over the same window, in seconds.
    pub update_cpu_s: Option<f64>,
    /// Any other field the peer prints.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// Why a peer's output is not a valid result.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    /// The output has no line that parses as a [`PeerLine`].
    #[error("no JSON result line in the peer's output ({0})")]
    Missing(String),
    /// The line parsed but a figure is impossible or differs from what was asked.
    #[error("invalid result line: {0}")]
    Invalid(String),
}

impl PeerLine {
    /// The storage label of a kcache run (`extra["storage"]`), or `None`.
    pub fn storage(&self) -> Option<&str> {
        self.extra.get("storage").and_then(Value::as_str)
    }

    /// Whether client-go ran with protobuf (`extra["protobuf"]`).
    pub fn protobuf(&self) -> bool {
        self.extra
            .get("protobuf")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// A label naming the configuration: `peer mode[ storage][ protobuf]`.
    pub fn label(&self) -> String {
        let mut s = format!("{} {}", self.peer, self.mode);
        if let Some(storage) = self.storage() {
            s.push(' ');
            s.push_str(storage);
        }
        if self.protobuf() {
            s.push_str(" protobuf");
        }
        s
    }

    /// The last line of `output` that parses as a [`PeerLine`].
    ///
    /// # Errors
    /// [`LineError::Missing`] when no line parses.
    pub fn parse_output(output: &str) -> Result<Self, LineError> {
        let mut last_err = String::from("empty output");
        for line in output.lines().rev().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<PeerLine>(line) {
                Ok(parsed) => return Ok(parsed),
                Err(e) => last_err = e.to_string(),
            }
        }
        Err(LineError::Missing(last_err))
    }

    /// Checks that the figures are possible and match the run: `expected_n` objects synced and,
    /// when `expected_updates > 0`, that many update events with a positive rate (a rate needs
    /// two events: with one it may be 0).
    ///
    /// # Errors
    /// [`LineError::Invalid`] naming the first wrong figure.
    pub fn validate(&self, expected_n: u64, expected_updates: u64) -> Result<(), LineError> {
        let bad = |what: String| Err(LineError::Invalid(what));
        if self.n != expected_n {
            return bad(format!("n = {}, expected {expected_n}", self.n));
        }
        if !(self.sync_ms.is_finite() && self.sync_ms > 0.0) {
            return bad(format!("sync_ms = {}", self.sync_ms));
        }
        if !(self.sync_cpu_s.is_finite() && self.sync_cpu_s >= 0.0) {
            return bad(format!("sync_cpu_s = {}", self.sync_cpu_s));
        }
        if self.rss_after_sync_bytes == 0 || self.vmhwm_bytes < self.rss_after_sync_bytes {
            return bad(format!(
                "vmhwm_bytes = {}, rss_after_sync_bytes = {}",
                self.vmhwm_bytes, self.rss_after_sync_bytes
            ));
        }
        if expected_updates > 0 {
            if self.update_events != Some(expected_updates) {
                return bad(format!(
                    "update_events = {:?}, expected {expected_updates}",
                    self.update_events
                ));
            }
            match (self.update_events_per_s, self.update_cpu_s) {
                (Some(rate), Some(cpu)) if (rate > 0.0 || expected_updates == 1) && cpu >= 0.0 => {}
                other => return bad(format!("update rate / cpu = {other:?}")),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLIENT_GO: &str = r#"{"peer":"client-go","client_go":"v0.36.5","mode":"list-watch","protobuf":false,"namespace":"bench","n":3,"expected_n":3,"sync_ms":4.3,"sync_cpu_s":0.0018,"vmhwm_bytes":23789568,"rss_after_sync_bytes":23789568,"update_events":null,"update_events_per_s":null,"update_cpu_s":null,"list_requests":1,"watch_list_requests":0,"watch_requests":1}"#;

    #[test]
    fn parses_the_client_go_peer_line_and_keeps_its_extra_fields() {
        let line = PeerLine::parse_output(&format!("noise\n{CLIENT_GO}\n")).unwrap();
        assert_eq!(line.peer, "client-go");
        assert_eq!(line.n, 3);
        assert_eq!(line.extra["list_requests"], 1);
        assert_eq!(line.label(), "client-go list-watch");
        line.validate(3, 0).unwrap();
    }

    #[test]
    fn serialises_extra_fields_flat() {
        let mut line = PeerLine::parse_output(CLIENT_GO).unwrap();
        line.extra.insert("storage".into(), "typed".into());
        let json = serde_json::to_value(&line).unwrap();
        assert_eq!(json["storage"], "typed");
        assert_eq!(json["client_go"], "v0.36.5");
        assert_eq!(line.label(), "client-go list-watch typed");
    }

    #[test]
    fn validate_rejects_a_wrong_count() {
        let line = PeerLine::parse_output(CLIENT_GO).unwrap();
        assert!(matches!(line.validate(4, 0), Err(LineError::Invalid(_))));
    }

    #[test]
    fn validate_rejects_missing_update_figures() {
        let line = PeerLine::parse_output(CLIENT_GO).unwrap();
        let err = line.validate(3, 3).unwrap_err();
        assert!(err.to_string().contains("update_events"), "{err}");
    }

    #[test]
    fn output_without_a_result_line_is_an_error() {
        assert!(matches!(
            PeerLine::parse_output("panic: boom\n"),
            Err(LineError::Missing(_))
        ));
        assert!(matches!(
            PeerLine::parse_output(""),
            Err(LineError::Missing(_))
        ));
    }
}
