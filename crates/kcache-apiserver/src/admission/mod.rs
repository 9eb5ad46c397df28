//! Admission webhooks, as kube-apiserver's `MutatingAdmissionWebhook` and
//! `ValidatingAdmissionWebhook` plugins run them: on a create, update, patch, apply, delete
//! or subresource write, the mutating webhooks that match are called one after the other
//! (configurations in name order, webhooks in their order; once more for those with
//! `reinvocationPolicy: IfNeeded` when a later one changed the object), then the validating
//! ones, each with an `admission.k8s.io/v1` AdmissionReview over HTTPS.
//!
//! - the webhook configurations as objects (defaults, validation) are the registry's
//!   (`registry/admissionregistration.rs`);
//! - `matching.rs`: which webhooks a request calls (rules, selectors, `matchConditions`);
//! - `review.rs`: the AdmissionReview a webhook is sent;
//! - `call.rs`: the HTTPS call and the reading of the answer;
//! - `patch.rs`: a mutating webhook's JSON patch applied to the object.
//!
//! The HTTP front (`http/admit.rs`) decides when a request is admitted and turns the
//! mutated object back into the write.

pub(crate) mod call;
pub(crate) mod matching;
pub(crate) mod patch;
pub(crate) mod review;

use std::sync::Arc;

use serde_json::{Value, json};

use crate::registry::AppState;
use crate::resource::ResourceInfo;
use crate::status::ApiError;

/// The operation of an admitted request, as an AdmissionReview names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    /// `CREATE`.
    Create,
    /// `UPDATE`.
    Update,
    /// `DELETE`.
    Delete,
}

impl Operation {
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
        }
    }

    /// The kind of the request's options (`CreateOptions`, ...).
    fn options_kind(self) -> &'static str {
        match self {
            Self::Create => "CreateOptions",
            Self::Update => "UpdateOptions",
            Self::Delete => "DeleteOptions",
        }
    }
}

/// What a webhook is told about a request.
#[derive(Debug, Clone)]
pub(crate) struct Attributes {
    /// The operation.
    pub(crate) operation: Operation,
    /// The resource written.
    pub(crate) info: Arc<ResourceInfo>,
    /// The subresource, if any (`status`, `scale`).
    pub(crate) sub: Option<String>,
    /// The namespace, for namespaced resources.
    pub(crate) namespace: Option<String>,
    /// The object's name (empty for a create with `generateName`).
    pub(crate) name: String,
    /// The object after the write (none for a delete).
    pub(crate) object: Option<Value>,
    /// The object before the write (none for a create).
    pub(crate) old_object: Option<Value>,
    /// Whether nothing is stored.
    pub(crate) dry_run: bool,
    /// The request's options object (`fieldManager`, ...).
    pub(crate) options: Value,
}

impl Attributes {
    /// The `options` of a request, as kube-apiserver passes them (`fieldManager` when set).
    pub(crate) fn options(operation: Operation, field_manager: Option<&str>, dry: bool) -> Value {
        let mut o = json!({"kind": operation.options_kind(), "apiVersion": "meta.k8s.io/v1"});
        if dry {
            o["dryRun"] = json!(["All"]);
        }
        if let Some(m) = field_manager {
            o["fieldManager"] = json!(m);
        }
        o
    }
}

/// Whether any webhook's rules match the request (the fast path skips admission when none
/// does); `attrs` need not hold the objects yet.
pub(crate) fn may_apply(state: &AppState, attrs: &Attributes) -> bool {
    matching::any_rule_matches(state, attrs)
}

/// Runs the mutating webhooks; returns the object they produced (`None`: unchanged). Their
/// warnings are added to `warnings`.
///
/// # Errors
/// A denial, or a failed call of a webhook whose `failurePolicy` is `Fail`.
pub(crate) async fn mutate(
    state: &AppState,
    attrs: &Attributes,
    warnings: &mut Vec<String>,
) -> Result<Option<Value>, ApiError> {
    let hooks = matching::hooks(state, true, attrs)?;
    let mut current = attrs.clone();
    let mut changed_any = false;
    let mut reinvocable = Vec::new();
    let mut changed_after: Vec<bool> = Vec::new();
    for hook in &hooks {
        let patched = call::call(hook, &current, warnings).await?;
        let changed = match patched {
            Some(obj) if Some(&obj) != current.object.as_ref() => {
                current.object = Some(obj);
                true
            }
            _ => false,
        };
        changed_any |= changed;
        // A change invalidates what the webhooks before this one saw.
        for c in &mut changed_after {
            *c |= changed;
        }
        reinvocable.push(hook.reinvoke);
        changed_after.push(false);
    }
    // Reinvocation: once more for the IfNeeded webhooks that ran before a later change.
    if changed_any {
        for (i, hook) in hooks.iter().enumerate() {
            if !(reinvocable[i] && changed_after[i]) {
                continue;
            }
            let patched = call::call(hook, &current, warnings).await?;
            if let Some(obj) = patched {
                current.object = Some(obj);
            }
        }
    }
    Ok(current.object.filter(|_| changed_any))
}

/// Runs the validating webhooks, in order; the first denial or failure is the answer. Their
/// warnings are added to `warnings`.
///
/// # Errors
/// A denial, or a failed call of a webhook whose `failurePolicy` is `Fail`.
pub(crate) async fn validate(
    state: &AppState,
    attrs: &Attributes,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    for hook in matching::hooks(state, false, attrs)? {
        call::call(&hook, attrs, warnings).await?;
    }
    Ok(())
}
