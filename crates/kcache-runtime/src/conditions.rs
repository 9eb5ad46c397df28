//! Status conditions with the rules of Kubernetes' `metav1.Condition` helpers
//! (`k8s.io/apimachinery/pkg/api/meta`: `SetStatusCondition`, `FindStatusCondition`,
//! `RemoveStatusCondition`, `IsStatusConditionTrue`): one condition per `type`, and its
//! `lastTransitionTime` moves only when its `status` changes.
//!
//! A status keeps its conditions as a `Vec<Condition>`; a reconcile builds the condition it
//! observed with [`Context::condition`](crate::Context::condition) (which sets
//! `observedGeneration` to the object's `metadata.generation`) or [`new`], sets it with
//! [`set_condition`], and writes the status only when something changed:
//!
//! ```
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
//! use kcache_runtime::conditions::{self, set_condition};
//!
//! let mut status: Vec<Condition> = Vec::new();
//! assert!(set_condition(&mut status, conditions::new("Ready", false, "Starting", "0 of 2 pods")));
//! let since = status[0].last_transition_time.clone();
//!
//! // Same status, new message: changed, but the transition time stays.
//! assert!(set_condition(&mut status, conditions::new("Ready", false, "Starting", "1 of 2 pods")));
//! assert_eq!(status[0].last_transition_time, since);
//! assert_eq!(status[0].message, "1 of 2 pods");
//!
//! // Nothing new: unchanged (no status write needed).
//! assert!(!set_condition(&mut status, conditions::new("Ready", false, "Starting", "1 of 2 pods")));
//!
//! assert!(set_condition(&mut status, conditions::new("Ready", true, "Serving", "2 of 2 pods")));
//! assert!(conditions::is_true(&status, "Ready"));
//! assert!(conditions::remove(&mut status, "Ready"));
//! assert!(conditions::find(&status, "Ready").is_none());
//! ```

use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};

/// A condition of `type_` with `status` (`"True"` / `"False"`), `reason` (CamelCase) and
/// `message`, its `lastTransitionTime` left unset (the Unix epoch: [`set_condition`] sets it)
/// and no `observedGeneration` ([`Context::condition`](crate::Context::condition) sets one).
pub fn new(
    type_: impl Into<String>,
    status: bool,
    reason: impl Into<String>,
    message: impl Into<String>,
) -> Condition {
    Condition {
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
        message: message.into(),
        observed_generation: None,
        reason: reason.into(),
        status: if status { "True" } else { "False" }.to_owned(),
        type_: type_.into(),
    }
}

/// Whether `time` is unset: the Unix epoch, what [`new`] leaves (Go's zero time).
fn is_unset(time: &Time) -> bool {
    time.0 == Timestamp::UNIX_EPOCH
}

/// Sets `condition` in `conditions` (apimachinery's `SetStatusCondition`); returns whether
/// anything changed.
///
/// - no condition of its type yet: appended, with `lastTransitionTime` now unless set;
/// - its `status` differs: the status is replaced and `lastTransitionTime` moves (to the one
///   given, else now);
/// - `reason`, `message` and `observedGeneration` are replaced when they differ, without
///   moving `lastTransitionTime`.
pub fn set_condition(conditions: &mut Vec<Condition>, mut condition: Condition) -> bool {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == condition.type_) else {
        if is_unset(&condition.last_transition_time) {
            condition.last_transition_time = Time(Timestamp::now());
        }
        conditions.push(condition);
        return true;
    };
    let mut changed = false;
    if existing.status != condition.status {
        existing.status = condition.status;
        existing.last_transition_time = if is_unset(&condition.last_transition_time) {
            Time(Timestamp::now())
        } else {
            condition.last_transition_time
        };
        changed = true;
    }
    if existing.reason != condition.reason {
        existing.reason = condition.reason;
        changed = true;
    }
    if existing.message != condition.message {
        existing.message = condition.message;
        changed = true;
    }
    if existing.observed_generation != condition.observed_generation {
        existing.observed_generation = condition.observed_generation;
        changed = true;
    }
    changed
}

/// The condition of `type_` (apimachinery's `FindStatusCondition`).
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Removes the condition of `type_`; returns whether there was one
/// (apimachinery's `RemoveStatusCondition`).
pub fn remove(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// Whether the condition of `type_` is `"True"` (apimachinery's `IsStatusConditionTrue`).
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).expect("a valid time"))
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let mut cs = Vec::new();
        let mut ready = new("Ready", false, "Starting", "");
        ready.last_transition_time = at(100);
        ready.observed_generation = Some(1);
        assert!(set_condition(&mut cs, ready));
        assert_eq!(cs[0].last_transition_time, at(100), "a time given is kept");

        let mut same = new("Ready", false, "Waiting", "pods");
        same.observed_generation = Some(2);
        assert!(set_condition(&mut cs, same));
        assert_eq!(cs[0].last_transition_time, at(100));
        assert_eq!(
            (cs[0].reason.as_str(), cs[0].message.as_str()),
            ("Waiting", "pods")
        );
        assert_eq!(cs[0].observed_generation, Some(2));

        let mut flipped = new("Ready", true, "Serving", "pods");
        flipped.observed_generation = Some(2);
        assert!(set_condition(&mut cs, flipped));
        assert!(cs[0].last_transition_time.0 > at(100).0, "now");
        assert_eq!(cs.len(), 1, "one condition per type");

        let mut given = new("Ready", false, "Down", "pods");
        given.observed_generation = Some(2);
        given.last_transition_time = at(200);
        assert!(set_condition(&mut cs, given));
        assert_eq!(cs[0].last_transition_time, at(200));
    }

    #[test]
    fn an_unchanged_condition_reports_no_change_and_other_types_are_untouched() {
        let mut cs = vec![];
        assert!(set_condition(&mut cs, new("Ready", true, "Serving", "")));
        assert!(set_condition(
            &mut cs,
            new("Degraded", false, "AllGood", "")
        ));
        let before = cs.clone();
        assert!(!set_condition(&mut cs, new("Ready", true, "Serving", "")));
        assert_eq!(cs, before);
        assert!(!is_true(&cs, "Degraded"));
        assert!(!is_true(&cs, "Missing"));
        assert!(!remove(&mut cs, "Missing"));
        assert!(remove(&mut cs, "Ready"));
        assert_eq!(cs.len(), 1);
    }
}
