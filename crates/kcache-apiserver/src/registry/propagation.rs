//! Deletion propagation as kube-apiserver's generic store decides it: the DeleteOptions'
//! `propagationPolicy` (or the deprecated `orphanDependents`), the GC finalizers already on the
//! object and the kind's default policy give the `orphan` / `foregroundDeletion` finalizers a
//! DELETE adds. The apiserver adds them whether or not a garbage collector runs (a bare
//! kube-apiserver, as envtest starts it, leaves them on forever); [`crate::gc`] removes them.

use serde_json::{Value, json};

use crate::resource::ResourceInfo;
use crate::status::{ApiError, Cause};

/// The finalizer that makes the garbage collector orphan an object's dependents.
pub(crate) const ORPHAN: &str = "orphan";
/// The finalizer that makes the garbage collector delete an object's dependents first.
pub(crate) const FOREGROUND: &str = "foregroundDeletion";

/// The three policies `propagationPolicy` accepts.
const POLICIES: [&str; 3] = ["Foreground", "Background", "Orphan"];

/// Checks DeleteOptions as kube-apiserver's `ValidateDeleteOptions` does (422 Invalid
/// `DeleteOptions.meta.k8s.io`).
pub(crate) fn validate(opts: &Value) -> Result<(), ApiError> {
    let policy = opts.get("propagationPolicy").filter(|p| !p.is_null());
    let orphan = opts.get("orphanDependents").filter(|p| !p.is_null());
    let mut causes = Vec::new();
    if let (Some(p), Some(_)) = (policy, orphan) {
        causes.push(Cause::new(
            "FieldValueInvalid",
            format!(
                "Invalid value: {p}: orphanDependents and deletionPropagation cannot be both set"
            ),
            "propagationPolicy",
        ));
    }
    if let Some(p) = policy
        && !p.as_str().is_some_and(|s| POLICIES.contains(&s))
    {
        causes.push(Cause::new(
            "FieldValueNotSupported",
            format!(
                "Unsupported value: {p}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
            ),
            "propagationPolicy",
        ));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_options("DeleteOptions", causes))
    }
}

/// A kind's default policy (its registry strategy's `DefaultGarbageCollectionPolicy` in
/// kube-apiserver v1.36.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Default {
    /// Dependents are deleted (background) unless the options say otherwise.
    DeleteDependents,
    /// Dependents are orphaned unless the options say otherwise: the legacy default kept for
    /// ReplicationControllers (core/v1) and Jobs (batch/v1).
    OrphanDependents,
    /// Never garbage-collected (Events): no GC finalizer is ever added, and existing ones go.
    Unsupported,
}

fn default_policy(info: &ResourceInfo) -> Default {
    match (
        info.group.as_str(),
        info.version.as_str(),
        info.plural.as_str(),
    ) {
        ("", "v1", "replicationcontrollers") | ("batch", "v1", "jobs") => Default::OrphanDependents,
        ("" | "events.k8s.io", _, "events") => Default::Unsupported,
        _ => Default::DeleteDependents,
    }
}

/// The Warning kube-apiserver adds to a DELETE of a Job (one object or a collection) that
/// leaves the policy to the kind's orphaning default.
pub(crate) fn default_policy_warning(info: &ResourceInfo, opts: &Value) -> Option<&'static str> {
    let unset = |k: &str| opts.get(k).is_none_or(Value::is_null);
    (info.group == "batch"
        && info.plural == "jobs"
        && default_policy(info) == Default::OrphanDependents
        && unset("propagationPolicy")
        && unset("orphanDependents"))
    .then_some(
        "child pods are preserved by default when jobs are deleted; set \
         propagationPolicy=Background to remove them or set propagationPolicy=Orphan to \
         suppress this warning",
    )
}

/// The finalizers of `cur` after a DELETE with `opts`: the `orphan` and `foregroundDeletion`
/// finalizers removed, then added back as the policy says (explicit options first, then the
/// finalizers already present, then the kind's default). `None` when the set does not change.
pub(crate) fn deletion_finalizers(
    info: &ResourceInfo,
    cur: &Value,
    opts: &Value,
) -> Option<Vec<Value>> {
    let existing: Vec<&str> = cur
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let explicit_orphan = opts.get("orphanDependents").and_then(Value::as_bool);
    let policy = opts.get("propagationPolicy").and_then(Value::as_str);
    let from_finalizers = existing.iter().find_map(|f| match *f {
        ORPHAN => Some("Orphan"),
        FOREGROUND => Some("Foreground"),
        _ => None,
    });
    let default = default_policy(info);
    let (orphan, foreground) = match (explicit_orphan, policy) {
        _ if default == Default::Unsupported => (false, false),
        (Some(o), _) => (o, false),
        (None, Some(p)) => (p == "Orphan", p == "Foreground"),
        (None, None) => match from_finalizers {
            Some(p) => (p == "Orphan", p == "Foreground"),
            None => (default == Default::OrphanDependents, false),
        },
    };
    let mut next: Vec<&str> = existing
        .iter()
        .copied()
        .filter(|f| *f != ORPHAN && *f != FOREGROUND)
        .collect();
    if orphan {
        next.push(ORPHAN);
    }
    if foreground {
        next.push(FOREGROUND);
    }
    let same = next.len() == existing.len() && next.iter().all(|f| existing.contains(f));
    (!same).then(|| next.into_iter().map(|f| json!(f)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rc() -> ResourceInfo {
        ResourceInfo::namespaced("", "v1", "replicationcontrollers", "ReplicationController")
    }

    fn cm() -> ResourceInfo {
        ResourceInfo::namespaced("", "v1", "configmaps", "ConfigMap")
    }

    #[test]
    fn explicit_options_override_finalizers_and_defaults() {
        let held = json!({"metadata": {"finalizers": ["a", "orphan"]}});
        let fg = json!({"propagationPolicy": "Foreground"});
        assert_eq!(
            deletion_finalizers(&cm(), &held, &fg),
            Some(vec![json!("a"), json!("foregroundDeletion")])
        );
        let bg = json!({"propagationPolicy": "Background"});
        assert_eq!(deletion_finalizers(&rc(), &json!({}), &bg), None);
        let keep = json!({"orphanDependents": false});
        assert_eq!(
            deletion_finalizers(&cm(), &held, &keep),
            Some(vec![json!("a")])
        );
    }

    #[test]
    fn without_options_the_finalizers_then_the_kind_decide() {
        assert_eq!(
            deletion_finalizers(&rc(), &json!({}), &json!({})),
            Some(vec![json!("orphan")])
        );
        assert_eq!(deletion_finalizers(&cm(), &json!({}), &json!({})), None);
        let fg = json!({"metadata": {"finalizers": ["foregroundDeletion"]}});
        assert_eq!(deletion_finalizers(&rc(), &fg, &json!({})), None);
        let job = ResourceInfo::namespaced("batch", "v1", "jobs", "Job");
        assert_eq!(
            deletion_finalizers(&job, &json!({}), &json!({})),
            Some(vec![json!("orphan")])
        );
    }

    #[test]
    fn events_never_get_gc_finalizers() {
        let ev = ResourceInfo::namespaced("events.k8s.io", "v1", "events", "Event");
        let fg = json!({"propagationPolicy": "Foreground"});
        assert_eq!(deletion_finalizers(&ev, &json!({}), &fg), None);
        let held = json!({"metadata": {"finalizers": ["orphan", "x"]}});
        assert_eq!(deletion_finalizers(&ev, &held, &fg), Some(vec![json!("x")]));
    }

    #[test]
    fn invalid_options_are_422_with_kube_apiserver_wording() {
        let both = json!({"propagationPolicy": "Orphan", "orphanDependents": true});
        let e = validate(&both).expect_err("both set");
        assert_eq!(e.code, 422);
        assert!(
            e.message
                .contains("propagationPolicy: Invalid value: \"Orphan\": orphanDependents and deletionPropagation cannot be both set"),
            "{}",
            e.message
        );
        let odd = json!({"propagationPolicy": "Sideways"});
        let e = validate(&odd).expect_err("unknown policy");
        assert!(e.message.contains(
            "Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
        ));
        assert!(validate(&json!({"propagationPolicy": "Orphan"})).is_ok());
    }
}
