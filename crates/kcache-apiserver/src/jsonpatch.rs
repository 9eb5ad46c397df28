//! JSON patch (RFC 6902) as kube-apiserver applies it: one engine for client `PATCH`
//! requests (`application/json-patch+json`, `http::crud::patch`) and mutating webhooks'
//! patches (`admission::patch`). kube-apiserver runs both through evanphx/json-patch v4
//! (`gopkg.in/evanphx/json-patch.v4`: `DecodePatch`, then `Patch.Apply`); so does this, on
//! top of the `json_patch` crate with v4's rules added.
//!
//! v4's rules, kept here: the patch is atomic (an operation that fails leaves the document
//! as it was); where v4 reads a missing key of an existing object as `null` rather than
//! failing, so does this: a `test` of such a key against `null` passes (kube-rs's finalizer
//! helper sends one before adding the first finalizer), a `replace` of it adds the key, and a
//! `copy` from it adds `null`.
//!
//! Decoding follows `DecodePatch`, which only requires an array of objects: an object that
//! is not a runnable operation (an unknown `op`, a missing `path`) decodes, and fails when
//! the patch is applied, as in v4. Differences from v4, by design: the message of a failing
//! operation is v4's wording for the common cases, not byte for byte (v4's wording varies by
//! operation and quotes some paths); an unrunnable operation fails the patch even when an
//! earlier operation would have failed first (the patch fails either way).

use json_patch::jsonptr::Pointer;
use json_patch::{AddOperation, PatchErrorKind, PatchOperation};
use serde_json::Value;

/// Why a JSON patch was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PatchError {
    /// Not an array of objects: `DecodePatch` fails (Go's `json.Unmarshal` message).
    Undecodable(String),
    /// An operation cannot run or fails: `Patch.Apply` fails, nothing is applied.
    Failed(String),
}

impl std::fmt::Display for PatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Undecodable(m) | Self::Failed(m) => f.write_str(m),
        }
    }
}

/// A decoded JSON patch: its operations, or why they cannot run (reported by [`apply`]).
#[derive(Debug, Clone)]
pub(crate) struct Operations(Result<json_patch::Patch, String>);

impl Operations {
    /// Whether the patch has no operation (a webhook's empty patch changes nothing).
    pub(crate) fn is_empty(&self) -> bool {
        self.0.as_ref().is_ok_and(|p| p.0.is_empty())
    }
}

/// Go's name for a JSON value's type, as `json.Unmarshal` reports it.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

/// Decodes a JSON patch as `DecodePatch` does.
///
/// # Errors
/// [`PatchError::Undecodable`] when `patch` is not an array of objects.
pub(crate) fn decode(patch: &Value) -> Result<Operations, PatchError> {
    let Value::Array(items) = patch else {
        return Err(PatchError::Undecodable(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
            go_type(patch)
        )));
    };
    if let Some(bad) = items.iter().find(|i| !i.is_object() && !i.is_null()) {
        return Err(PatchError::Undecodable(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            go_type(bad)
        )));
    }
    Ok(Operations(
        serde_json::from_value(patch.clone()).map_err(|e| e.to_string()),
    ))
}

/// Applies a decoded patch to `doc`, atomically, with v4's rules (see the module docs).
///
/// # Errors
/// [`PatchError::Failed`] when an operation cannot run or fails; `doc` is then unchanged.
pub(crate) fn apply(doc: &mut Value, ops: &Operations) -> Result<(), PatchError> {
    let ops = ops.0.as_ref().map_err(|e| PatchError::Failed(e.clone()))?;
    let mut work = doc.clone();
    for op in &ops.0 {
        let as_v4 = match op {
            PatchOperation::Test(t)
                if t.value.is_null() && work.pointer(t.path.as_str()).is_none() =>
            {
                continue;
            }
            PatchOperation::Replace(r) if missing_object_key(&work, &r.path) => {
                Some(PatchOperation::Add(AddOperation {
                    path: r.path.clone(),
                    value: r.value.clone(),
                }))
            }
            PatchOperation::Copy(c) if missing_object_key(&work, &c.from) => {
                Some(PatchOperation::Add(AddOperation {
                    path: c.path.clone(),
                    value: Value::Null,
                }))
            }
            _ => None,
        };
        let op = as_v4.as_ref().unwrap_or(op);
        json_patch::patch(&mut work, std::slice::from_ref(op))
            .map_err(|e| PatchError::Failed(v4_message(op, &e.kind)))?;
    }
    *doc = work;
    Ok(())
}

/// v4's message for a failing operation (its common wording; see the module docs).
fn v4_message(op: &PatchOperation, kind: &PatchErrorKind) -> String {
    let (name, path) = match op {
        PatchOperation::Add(o) => ("add", o.path.as_str()),
        PatchOperation::Remove(o) => ("remove", o.path.as_str()),
        PatchOperation::Replace(o) => ("replace", o.path.as_str()),
        PatchOperation::Move(o) => ("move", o.from.as_str()),
        PatchOperation::Copy(o) => ("copy", o.from.as_str()),
        PatchOperation::Test(o) => ("test", o.path.as_str()),
    };
    match kind {
        PatchErrorKind::TestFailed => format!("testing value {path} failed: test failed"),
        PatchErrorKind::CannotMoveInsideItself => {
            format!("move operation does not apply: cannot move {path} into itself")
        }
        _ => format!("{name} operation does not apply: doc is missing path: {path}: missing value"),
    }
}

/// Whether `path` names a key its parent object lacks (the parent exists and is an object).
fn missing_object_key(doc: &Value, path: &Pointer) -> bool {
    let Some((parent, key)) = path.split_back() else {
        return false;
    };
    doc.pointer(parent.as_str())
        .and_then(Value::as_object)
        .is_some_and(|o| !o.contains_key(key.decoded().as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
        let mut out = doc.clone();
        apply(&mut out, &decode(patch)?)?;
        Ok(out)
    }

    #[test]
    fn v4_reads_a_missing_key_as_null() {
        let doc = json!({"metadata": {"name": "a"}});
        let out = run(
            &doc,
            &json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "replace", "path": "/metadata/labels", "value": {"k": "v"}},
                {"op": "copy", "from": "/metadata/missing", "path": "/metadata/copied"},
            ]),
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"]["k"], "v");
        assert_eq!(out["metadata"]["copied"], Value::Null);
        assert!(out["metadata"].as_object().unwrap().contains_key("copied"));
    }

    #[test]
    fn a_failing_operation_leaves_the_document_unchanged() {
        let mut doc = json!({"a": 1});
        let ops = decode(&json!([
            {"op": "add", "path": "/b", "value": 2},
            {"op": "remove", "path": "/x/y"},
        ]))
        .unwrap();
        let e = apply(&mut doc, &ops).unwrap_err();
        assert_eq!(
            e,
            PatchError::Failed(
                "remove operation does not apply: doc is missing path: /x/y: missing value".into()
            )
        );
        assert_eq!(doc, json!({"a": 1}));
        let e = run(&doc, &json!([{"op": "test", "path": "/a", "value": 2}])).unwrap_err();
        assert_eq!(e.to_string(), "testing value /a failed: test failed");
    }

    #[test]
    fn decoding_needs_an_array_of_objects_and_unknown_ops_fail_when_applied() {
        let e = decode(&json!({"op": "add"})).unwrap_err();
        assert_eq!(
            e,
            PatchError::Undecodable(
                "json: cannot unmarshal object into Go value of type jsonpatch.Patch".into()
            )
        );
        assert!(matches!(
            decode(&json!([1])),
            Err(PatchError::Undecodable(m)) if m.contains("number into Go value of type jsonpatch.Operation")
        ));
        let ops = decode(&json!([{"op": "bogus", "path": "/a"}])).unwrap();
        assert!(matches!(
            apply(&mut json!({}), &ops),
            Err(PatchError::Failed(_))
        ));
        assert!(decode(&json!([])).unwrap().is_empty());
    }
}
