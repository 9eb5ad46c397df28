//! A `metav1.LabelSelector` object in its string form (what `selector.rs` parses, and what
//! `Scale.status.selector` and admission's namespace selectors carry).

use serde_json::Value;

/// A `metav1.LabelSelector` (matchLabels and matchExpressions) in the string form.
pub(crate) fn selector_string(selector: &Value) -> String {
    let mut terms = Vec::new();
    if let Some(m) = selector.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            terms.push(format!("{k}={}", v.as_str().unwrap_or("")));
        }
    }
    for e in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" => terms.push(format!("{key} in ({})", values.join(","))),
            "NotIn" => terms.push(format!("{key} notin ({})", values.join(","))),
            "Exists" => terms.push(key.to_owned()),
            "DoesNotExist" => terms.push(format!("!{key}")),
            _ => {}
        }
    }
    terms.join(",")
}
