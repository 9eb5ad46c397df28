//! One configuration's figures at one N ([`Row`]), the contract between the report that
//! computes them and the chart that draws them.

use std::collections::BTreeMap;

use serde::Serialize;

use super::runner::LIMIT_STORAGE;

/// One figure over the runs of one configuration.
#[derive(Debug, Clone, Copy, Serialize)]
pub(super) struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Stat {
    /// `None` for no values.
    pub(super) fn of(mut values: Vec<f64>) -> Option<Self> {
        values.retain(|v| v.is_finite());
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let mid = values.len() / 2;
        let median = if values.len() % 2 == 1 {
            values[mid]
        } else {
            (values[mid - 1] + values[mid]) / 2.0
        };
        Some(Self {
            median,
            min: values[0],
            max: values[values.len() - 1],
        })
    }
}

/// The figures of one configuration at one N.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Row {
    pub n: usize,
    pub label: String,
    pub peer: String,
    pub mode: String,
    pub storage: Option<String>,
    pub protobuf: bool,
    pub runs_ok: usize,
    pub runs_failed: usize,
    pub figures: BTreeMap<&'static str, Stat>,
}

impl Row {
    /// Whether this is a limit line (the server's cost alone, see `kcache-peer --storage
    /// limit`).
    pub(super) fn is_limit(&self) -> bool {
        self.storage.as_deref() == Some(LIMIT_STORAGE)
    }
}
