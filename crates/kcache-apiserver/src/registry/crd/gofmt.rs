//! Values written the way kube-apiserver's Go code writes them in error messages: `%v` of a
//! float64 (`1.5`, `2`, `1e+21`), `%q` of a string, and `field.Error`'s rendering of a bad
//! value (numbers and booleans bare, strings quoted, anything else as JSON with sorted keys).

use serde_json::Value;

/// Go's `%v` of a float64: the shortest representation, in exponent form (`1e+21`, `1e-05`)
/// below 1e-4 and from 1e21 on.
pub(crate) fn float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    let a = f.abs();
    if a != 0.0 && !(1e-4..1e21).contains(&a) {
        let s = format!("{f:e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let (sign, digits) = match exp.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', exp),
        };
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    format!("{f}")
}

/// A JSON number as Go's `%v` writes the value it decodes to (int64 or float64).
pub(crate) fn number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else {
        float(n.as_f64().unwrap_or(0.0))
    }
}

/// Go's `strconv.Quote` (`%q`).
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `encoding/json` of a value: object keys sorted, `<`, `>` and `&` escaped.
pub(crate) fn json(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", json(&Value::String((*k).clone())), json(&m[*k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => {
            let parts: Vec<String> = a.iter().map(json).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Number(n) => number(n),
        Value::String(s) => Value::String(s.clone())
            .to_string()
            .replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026"),
        other => other.to_string(),
    }
}

/// How `field.Error` writes a bad value: numbers and booleans bare, strings quoted, null and
/// composite values as JSON.
pub(crate) fn bad_value(v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => quote(s),
        other => json(other),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn floats_print_as_go_prints_them() {
        assert_eq!(float(1.5), "1.5");
        assert_eq!(float(2.0), "2");
        assert_eq!(float(1e21), "1e+21");
        assert_eq!(float(0.00001), "1e-05");
        assert_eq!(float(-0.5), "-0.5");
        assert_eq!(float(0.0), "0");
    }

    #[test]
    fn bad_values_print_as_field_errors_print_them() {
        assert_eq!(bad_value(&json!("a\"b\n")), r#""a\"b\n""#);
        assert_eq!(bad_value(&json!(3)), "3");
        assert_eq!(bad_value(&json!(2.5)), "2.5");
        assert_eq!(
            bad_value(&json!({"b": 1, "a": "<"})),
            r#"{"a":"\u003c","b":1}"#
        );
        assert_eq!(bad_value(&Value::Null), "null");
    }
}
