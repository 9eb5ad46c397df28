//! Decoding a built-in object as kube-apiserver's Go decoder does: the first type error
//! (`json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type
//! int32`, an int32 out of range, a malformed quantity) fails the request; fields no struct
//! declares are found at every depth and reported by their path
//! (`spec.template.spec.containers[0].imagePullPolicyy`).

use serde_json::Value;

use super::model::{Model, Ty};

/// Go's `resource.ErrFormatWrong`.
pub(crate) const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// Walks `obj` as the struct `root`: `Err` is the first decoding error's message, `Ok` the
/// paths of the unknown fields, which are removed when `drop_unknown`.
pub(crate) fn decode(
    model: &Model,
    root: usize,
    obj: &mut Value,
    drop_unknown: bool,
) -> Result<Vec<String>, String> {
    let mut walk = Walk {
        model,
        drop_unknown,
        unknown: Vec::new(),
    };
    walk.value(obj, &Ty::Struct(root), "", "", "")?;
    Ok(walk.unknown)
}

struct Walk<'a> {
    model: &'a Model,
    drop_unknown: bool,
    unknown: Vec<String>,
}

/// Go's name of a JSON value's kind in `cannot unmarshal` errors.
fn what(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn int_in(v: &Value, min: i64, max: i64) -> bool {
    v.as_i64().is_some_and(|n| (min..=max).contains(&n))
}

impl Walk<'_> {
    /// `go_path` is the dotted field path Go names (no indices), `shown` the path with indices
    /// for unknown fields, `parent` the Go struct holding the field.
    fn value(
        &mut self,
        v: &mut Value,
        t: &Ty,
        go_path: &str,
        shown: &str,
        parent: &str,
    ) -> Result<(), String> {
        if v.is_null() {
            return Ok(());
        }
        let mismatch = |v: &Value, model: &Model| {
            let got = match v {
                Value::Number(n) => format!("number {n}"),
                other => what(other).to_owned(),
            };
            let got = if matches!(t, Ty::Int32 | Ty::Int64) || !v.is_number() {
                got
            } else {
                "number".to_owned()
            };
            format!(
                "json: cannot unmarshal {got} into Go struct field {parent}.{go_path} of type {}",
                model.go_name(t)
            )
        };
        let ok = match t {
            Ty::Any => true,
            Ty::Bool => v.is_boolean(),
            Ty::Str | Ty::Bytes => v.is_string(),
            Ty::Int32 => int_in(v, i32::MIN.into(), i32::MAX.into()),
            Ty::Int64 => v.as_i64().is_some(),
            Ty::Float => v.is_number(),
            Ty::Quantity => {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                return parse_quantity(&text).map_err(str::to_owned);
            }
            Ty::IntOrString => {
                if v.is_string() || int_in(v, i32::MIN.into(), i32::MAX.into()) {
                    return Ok(());
                }
                let got = match v {
                    Value::Number(n) => format!("number {n}"),
                    other => what(other).to_owned(),
                };
                return Err(format!(
                    "json: cannot unmarshal {got} into Go value of type int32"
                ));
            }
            Ty::Struct(i) => {
                let Value::Object(fields) = v else {
                    return Err(mismatch(v, self.model));
                };
                let def = &self.model.defs[*i];
                let mut drop = Vec::new();
                for (k, child) in fields.iter_mut() {
                    let child_shown = if shown.is_empty() {
                        k.clone()
                    } else {
                        format!("{shown}.{k}")
                    };
                    match def.fields.get(k) {
                        Some(ft) => {
                            let child_go = if go_path.is_empty() {
                                k.clone()
                            } else {
                                format!("{go_path}.{k}")
                            };
                            self.value(child, ft, &child_go, &child_shown, &def.name)?;
                        }
                        None => {
                            self.unknown.push(child_shown);
                            drop.push(k.clone());
                        }
                    }
                }
                if self.drop_unknown {
                    for k in drop {
                        fields.remove(&k);
                    }
                }
                return Ok(());
            }
            Ty::Array(item) => {
                let Value::Array(items) = v else {
                    return Err(mismatch(v, self.model));
                };
                for (i, x) in items.iter_mut().enumerate() {
                    self.value(x, item, go_path, &format!("{shown}[{i}]"), parent)?;
                }
                return Ok(());
            }
            Ty::Map(item) => {
                let Value::Object(entries) = v else {
                    return Err(mismatch(v, self.model));
                };
                for (k, x) in entries.iter_mut() {
                    self.value(x, item, go_path, &format!("{shown}[{k}]"), parent)?;
                }
                return Ok(());
            }
        };
        if ok {
            Ok(())
        } else {
            Err(mismatch(v, self.model))
        }
    }
}

/// Go's `resource.ParseQuantity`, for its errors only.
pub(crate) fn parse_quantity(s: &str) -> Result<(), &'static str> {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let num_len = s
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b'.')
        .count();
    let (num, suffix) = s.split_at(num_len);
    if num.is_empty() {
        return Err(QUANTITY_FORMAT);
    }
    // The regular expression's suffix: `[eEinumkKMGTP]*[-+]?[0-9]*`.
    let letters = suffix
        .bytes()
        .take_while(|b| b"eEinumkKMGTP".contains(b))
        .count();
    let rest = &suffix[letters..];
    let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    if !rest.bytes().all(|b| b.is_ascii_digit()) {
        return Err(QUANTITY_FORMAT);
    }
    if num.bytes().filter(|b| *b == b'.').count() > 1 || num == "." {
        return Err("unable to parse numeric part of quantity");
    }
    let known = matches!(
        suffix,
        "" | "Ki"
            | "Mi"
            | "Gi"
            | "Ti"
            | "Pi"
            | "Ei"
            | "n"
            | "u"
            | "m"
            | "k"
            | "M"
            | "G"
            | "T"
            | "P"
            | "E"
    );
    let exponent = suffix.len() > 1
        && suffix.starts_with(['e', 'E'])
        && suffix[1..]
            .trim_start_matches(['+', '-'])
            .bytes()
            .all(|b| b.is_ascii_digit())
        && !suffix[1..].trim_start_matches(['+', '-']).is_empty();
    if known || exponent {
        Ok(())
    } else {
        Err("unable to parse quantity's suffix")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_fail_as_go_parses_them() {
        for ok in [
            "1",
            "100m",
            "1.5Gi",
            "+2",
            "1e3",
            "1E-3",
            "0.5",
            "128974848",
        ] {
            assert_eq!(parse_quantity(ok), Ok(()), "{ok}");
        }
        for bad in ["lots", "abc", "", "1 Gi", "true", "{}"] {
            assert_eq!(parse_quantity(bad), Err(QUANTITY_FORMAT), "{bad}");
        }
        assert_eq!(
            parse_quantity("1kk"),
            Err("unable to parse quantity's suffix")
        );
    }

    #[test]
    fn type_errors_and_unknown_fields_are_found_at_every_depth() {
        let model = super::super::model();
        let root = model.kind("apps", "v1", "Deployment").unwrap();
        let mut d = serde_json::json!({"spec": {"replicas": "three"}});
        assert_eq!(
            decode(model, root, &mut d, false).unwrap_err(),
            "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas \
             of type int32"
        );
        let mut d = serde_json::json!({"spec": {"template": {"spec": {"containers": [
            {"name": "c", "ports": [{"containerPort": 3_000_000_000_i64}]}]}}}});
        assert_eq!(
            decode(model, root, &mut d, false).unwrap_err(),
            "json: cannot unmarshal number 3000000000 into Go struct field \
             ContainerPort.spec.template.spec.containers.ports.containerPort of type int32"
        );
        let mut d = serde_json::json!({"metadata": {"labels": {"a": 1}}});
        assert_eq!(
            decode(model, root, &mut d, false).unwrap_err(),
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of \
             type string"
        );
        let mut d = serde_json::json!({"spec": {"selector": [],}});
        assert!(
            decode(model, root, &mut d, false)
                .unwrap_err()
                .ends_with("Go struct field DeploymentSpec.spec.selector of type v1.LabelSelector")
        );
        let mut d = serde_json::json!({"spec": {"template": {"spec": {"containers": [
            {"name": "c", "imagePullPolicyy": "Always"}]}}, "zzz": 1}});
        assert_eq!(
            decode(model, root, &mut d, true).unwrap(),
            [
                "spec.template.spec.containers[0].imagePullPolicyy",
                "spec.zzz"
            ]
        );
        assert!(d["spec"].get("zzz").is_none());
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0],
            serde_json::json!({"name": "c"})
        );
    }
}
