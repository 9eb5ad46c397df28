//! The event lines `kcache watch` prints.

use k8s_openapi::jiff::Timestamp;
use kube_core::DynamicObject;
use serde_json::json;

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum Output {
    /// EVENT, NAMESPACE, NAME, RV, AGE.
    #[default]
    Table,
    /// The table plus UID and LABELS.
    Wide,
    /// One JSON object per line: `{"type": "ADDED", "object": {...}}`; a delete inferred by a
    /// relist adds `"finalStateUnknown": true`.
    Json,
}

/// The kind of change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Event {
    /// Added (or in the initial list).
    Added,
    /// Modified.
    Modified,
    /// Deleted.
    Deleted,
    /// Deleted while the watch was down: inferred by a relist (client-go's
    /// `DeletedFinalStateUnknown`); the object is the last state the cache knew, possibly stale.
    /// Printed as `DELETED?` in tables and as `"finalStateUnknown": true` in JSON.
    DeletedFinalStateUnknown,
}

impl Event {
    fn as_str(self) -> &'static str {
        match self {
            Event::Added => "ADDED",
            Event::Modified => "MODIFIED",
            Event::Deleted => "DELETED",
            Event::DeletedFinalStateUnknown => "DELETED?",
        }
    }
}

const WIDTHS: [usize; 4] = [8, 20, 40, 10];

/// The header line, if the format has one.
pub(super) fn header(output: Output) -> Option<String> {
    let base = ["EVENT", "NAMESPACE", "NAME", "RV"];
    match output {
        Output::Json => None,
        Output::Table => Some(row(&base, "AGE", None)),
        Output::Wide => Some(row(&base, "AGE", Some(("UID", "LABELS")))),
    }
}

fn row(cols: &[&str; 4], age: &str, wide: Option<(&str, &str)>) -> String {
    let mut line = String::new();
    for (c, w) in cols.iter().zip(WIDTHS) {
        line.push_str(&format!("{c:<w$} "));
    }
    match wide {
        Some((uid, labels)) => line.push_str(&format!("{age:<6} {uid:<36} {labels}")),
        None => line.push_str(age),
    }
    line.trim_end().to_owned()
}

/// `5s`, `3m`, `2h`, `4d`, like kubectl's AGE column; `<unknown>` without a timestamp.
pub(super) fn age(created: Option<Timestamp>, now: Timestamp) -> String {
    let Some(created) = created else {
        return "<unknown>".to_owned();
    };
    let secs = (now.as_second() - created.as_second()).max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// One line for `event` on `obj`.
pub(super) fn line(output: Output, event: Event, obj: &DynamicObject, now: Timestamp) -> String {
    let meta = &obj.metadata;
    if output == Output::Json {
        if event == Event::DeletedFinalStateUnknown {
            return json!({"type": "DELETED", "finalStateUnknown": true, "object": obj})
                .to_string();
        }
        return json!({"type": event.as_str(), "object": obj}).to_string();
    }
    let created = meta.creation_timestamp.as_ref().map(|t| t.0);
    let cols = [
        event.as_str(),
        meta.namespace.as_deref().unwrap_or("-"),
        meta.name.as_deref().unwrap_or("-"),
        meta.resource_version.as_deref().unwrap_or("-"),
    ];
    let age = age(created, now);
    match output {
        Output::Wide => {
            let labels: Vec<String> = meta
                .labels
                .iter()
                .flatten()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let labels = if labels.is_empty() {
                "<none>".to_owned()
            } else {
                labels.join(",")
            };
            row(
                &cols,
                &age,
                Some((meta.uid.as_deref().unwrap_or("-"), &labels)),
            )
        }
        _ => row(&cols, &age, None),
    }
}

#[cfg(test)]
mod tests {
    use kube_core::{ApiResource, ObjectMeta};

    use super::*;

    fn cm() -> DynamicObject {
        let ar = ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
        };
        let mut obj = DynamicObject::new("cm1", &ar).within("default");
        obj.metadata = ObjectMeta {
            resource_version: Some("42".into()),
            labels: Some([("app".to_owned(), "web".to_owned())].into()),
            creation_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t0())),
            ..obj.metadata
        };
        obj
    }

    fn t0() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(t0().as_second() + s).unwrap()
    }

    #[test]
    fn table_line_has_event_namespace_name_rv_age_columns() {
        let now = at(180);
        let line = line(Output::Table, Event::Modified, &cm(), now);
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols, ["MODIFIED", "default", "cm1", "42", "3m"]);
        let header: Vec<String> = header(Output::Table)
            .unwrap()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        assert_eq!(header, ["EVENT", "NAMESPACE", "NAME", "RV", "AGE"]);
        let wide = super::line(Output::Wide, Event::Added, &cm(), now);
        assert!(wide.ends_with("app=web"), "{wide}");
    }

    #[test]
    fn json_line_is_a_watch_event() {
        let now = Timestamp::now();
        let v: serde_json::Value =
            serde_json::from_str(&line(Output::Json, Event::Deleted, &cm(), now)).unwrap();
        assert_eq!(v["type"], "DELETED");
        assert_eq!(v["object"]["metadata"]["name"], "cm1");
        assert_eq!(v["object"]["kind"], "ConfigMap");
    }

    /// A delete the informer inferred from a relist (client-go's `DeletedFinalStateUnknown`):
    /// the object is only the last state the cache knew, and the line says so.
    #[test]
    fn a_delete_inferred_by_a_relist_is_marked() {
        let now = Timestamp::now();
        let v: serde_json::Value = serde_json::from_str(&line(
            Output::Json,
            Event::DeletedFinalStateUnknown,
            &cm(),
            now,
        ))
        .unwrap();
        assert_eq!(v["type"], "DELETED");
        assert_eq!(v["finalStateUnknown"], true);
        assert_eq!(v["object"]["metadata"]["name"], "cm1");
        let observed: serde_json::Value =
            serde_json::from_str(&line(Output::Json, Event::Deleted, &cm(), now)).unwrap();
        assert!(observed.get("finalStateUnknown").is_none(), "{observed}");
        let table = line(Output::Table, Event::DeletedFinalStateUnknown, &cm(), now);
        assert!(table.starts_with("DELETED? "), "{table}");
    }

    #[test]
    fn age_reads_like_kubectl() {
        assert_eq!(age(Some(t0()), at(5)), "5s");
        assert_eq!(age(Some(t0()), at(600)), "10m");
        assert_eq!(age(Some(t0()), at(3 * 3600)), "3h");
        assert_eq!(age(Some(t0()), at(5 * 86400)), "5d");
        assert_eq!(age(None, t0()), "<unknown>");
    }
}
