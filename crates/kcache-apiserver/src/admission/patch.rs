//! A mutating webhook's patch: a JSON patch (RFC 6902) as Go's `[]byte` decodes it — a base64
//! string, or an array of byte values (what kube-rs' `AdmissionResponse` sends) — applied to
//! the object it was sent, by the same engine as a client's JSON patch (`crate::jsonpatch`,
//! evanphx/json-patch v4's rules, as kube-apiserver's mutating webhook dispatcher).

use base64::Engine;
use serde_json::Value;

use crate::status::ApiError;

/// The bytes of a `[]byte` JSON field: base64 text, or an array of numbers 0..=255.
fn bytes(v: &Value) -> Result<Vec<u8>, String> {
    match v {
        Value::String(s) => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| e.to_string()),
        Value::Array(a) => a
            .iter()
            .map(|b| {
                b.as_u64()
                    .and_then(|n| u8::try_from(n).ok())
                    .ok_or_else(|| format!("{b} is not a byte"))
            })
            .collect(),
        other => Err(format!("a patch cannot be {other}")),
    }
}

/// `obj` with the webhook `name`'s JSON patch (`response.patch`) applied; `None` when the
/// patch has no operation (then there may be no object, as for a DELETE).
///
/// # Errors
/// 500 when the patch does not decode or does not apply, worded as kube-apiserver: an
/// undecodable patch fails the call to the webhook ("failed calling webhook ...", which the
/// caller's failure policy may ignore in kube-apiserver), a patch that does not apply is the
/// engine's message.
pub(crate) fn apply(
    name: &str,
    obj: Option<&Value>,
    patch: &Value,
) -> Result<Option<Value>, ApiError> {
    let undecodable = |e: String| {
        ApiError::internal(format!(
            "failed calling webhook \"{name}\": received undecodable patch in webhook response: {e}"
        ))
    };
    let raw = bytes(patch).map_err(undecodable)?;
    let patch: Value = serde_json::from_slice(&raw).map_err(|e| undecodable(e.to_string()))?;
    let ops = crate::jsonpatch::decode(&patch).map_err(|e| undecodable(e.to_string()))?;
    if ops.is_empty() {
        return Ok(None);
    }
    let Some(obj) = obj else {
        return Err(ApiError::internal(format!(
            "admission webhook \"{name}\" attempted to modify the object, which is not supported for this operation"
        )));
    };
    let mut out = obj.clone();
    crate::jsonpatch::apply(&mut out, &ops).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(v: &Value) -> Value {
        Value::String(base64::engine::general_purpose::STANDARD.encode(v.to_string()))
    }

    #[test]
    fn a_json_patch_adds_a_label() {
        let obj = json!({"metadata": {"name": "a"}});
        let p = json!([{"op": "add", "path": "/metadata/labels", "value": {"hooked": "yes"}}]);
        let out = apply("x.example.com", Some(&obj), &b64(&p))
            .unwrap()
            .unwrap();
        assert_eq!(out["metadata"]["labels"]["hooked"], "yes");
        assert_eq!(out["metadata"]["name"], "a");
    }

    #[test]
    fn a_patch_may_come_as_an_array_of_bytes() {
        let obj = json!({"metadata": {}});
        let text = json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]);
        let bytes: Vec<Value> = text.to_string().bytes().map(|b| json!(b)).collect();
        let out = apply("x.example.com", Some(&obj), &Value::Array(bytes))
            .unwrap()
            .unwrap();
        assert_eq!(out["metadata"]["labels"]["a"], "b");
        assert!(apply("x.example.com", Some(&obj), &json!([300])).is_err());
    }

    /// kube-apiserver applies webhook patches with evanphx/json-patch v4, as client JSON
    /// patches: a `test` of a missing key against `null` passes and a `replace` of a missing
    /// key adds it.
    #[test]
    fn a_webhook_patch_has_the_v4_rules_of_a_client_json_patch() {
        let obj = json!({"metadata": {"name": "a"}});
        let p = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "replace", "path": "/metadata/labels", "value": {"k": "v"}},
        ]);
        let out = apply("x.example.com", Some(&obj), &b64(&p))
            .unwrap()
            .unwrap();
        assert_eq!(out["metadata"]["labels"]["k"], "v");
    }

    #[test]
    fn an_empty_patch_changes_nothing_even_without_an_object() {
        assert_eq!(
            apply("x.example.com", None, &b64(&json!([]))).unwrap(),
            None
        );
        let p = json!([{"op": "add", "path": "/a", "value": 1}]);
        let e = apply("x.example.com", None, &b64(&p)).unwrap_err();
        assert!(
            e.message.contains("attempted to modify the object"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_patch_that_does_not_apply_or_decode_is_an_internal_error() {
        let obj = json!({"metadata": {}});
        let p = json!([{"op": "replace", "path": "/spec/x", "value": 1}]);
        let e = apply("x.example.com", Some(&obj), &b64(&p)).unwrap_err();
        assert_eq!(e.code, 500);
        let e = apply("x.example.com", Some(&obj), &json!("not base64!")).unwrap_err();
        assert!(
            e.message.contains("received undecodable patch"),
            "{}",
            e.message
        );
    }
}
