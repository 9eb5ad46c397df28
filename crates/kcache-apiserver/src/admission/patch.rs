//! A mutating webhook's patch: base64 of a JSON patch (RFC 6902), applied to the object it
//! was sent.

use base64::Engine;
use serde_json::Value;

use crate::status::ApiError;

/// `obj` with the webhook `name`'s base64 JSON patch applied.
///
/// # Errors
/// 500 when the patch does not decode or does not apply, worded as kube-apiserver.
pub(crate) fn apply(name: &str, obj: &Value, patch_b64: &str) -> Result<Value, ApiError> {
    let undecodable = |e: String| {
        ApiError::internal(format!(
            "failed calling webhook \"{name}\": received undecodable patch in webhook response: {e}"
        ))
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(patch_b64)
        .map_err(|e| undecodable(e.to_string()))?;
    let patch: json_patch::Patch =
        serde_json::from_slice(&raw).map_err(|e| undecodable(e.to_string()))?;
    let mut out = obj.clone();
    json_patch::patch(&mut out, &patch).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(v: &Value) -> String {
        base64::engine::general_purpose::STANDARD.encode(v.to_string())
    }

    #[test]
    fn a_json_patch_adds_a_label() {
        let obj = json!({"metadata": {"name": "a"}});
        let p = json!([{"op": "add", "path": "/metadata/labels", "value": {"hooked": "yes"}}]);
        let out = apply("x.example.com", &obj, &b64(&p)).unwrap();
        assert_eq!(out["metadata"]["labels"]["hooked"], "yes");
        assert_eq!(out["metadata"]["name"], "a");
    }

    #[test]
    fn a_patch_that_does_not_apply_or_decode_is_an_internal_error() {
        let obj = json!({"metadata": {}});
        let p = json!([{"op": "replace", "path": "/spec/x", "value": 1}]);
        let e = apply("x.example.com", &obj, &b64(&p)).unwrap_err();
        assert_eq!(e.code, 500);
        let e = apply("x.example.com", &obj, "not base64!").unwrap_err();
        assert!(
            e.message.contains("received undecodable patch"),
            "{}",
            e.message
        );
    }
}
