//! Reading `protobuf.json` of the recorded kube-apiserver fixtures
//! (`testdata/kube-apiserver-v1.36/`), shared by the protobuf tests of kcache-proto and
//! kcache-client (the latter include this file by path in its `tests/common`). The file is found
//! by the parent module's `fixture_file`, one per crate.

#![allow(dead_code, reason = "each test binary uses a different part")]

use std::collections::HashMap;

use base64::Engine as _;
use bytes::Bytes;
use serde_json::Value;

/// The whole `protobuf.json` fixture.
pub(crate) fn fixture() -> Value {
    let path = super::fixture_file("protobuf.json");
    serde_json::from_slice(&std::fs::read(&path).expect("protobuf.json"))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The first step whose name starts with `prefix`.
pub(crate) fn step<'a>(f: &'a Value, prefix: &str) -> &'a Value {
    f["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"].as_str().unwrap().starts_with(prefix))
        .unwrap_or_else(|| panic!("no step {prefix:?}"))
}

/// A step's response body, as recorded (base64).
pub(crate) fn body(step: &Value) -> Bytes {
    let b64 = step["response"]["body_base64"]
        .as_str()
        .expect("body_base64");
    Bytes::from(
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap(),
    )
}

/// The recorded JSON is normalised (`<rv:N>`, `<uid:N>`, `<time>`), the protobuf is not: each
/// placeholder must stand for one real value across the file (both ways), and `<time>` for a
/// timestamp.
#[derive(Default)]
pub(crate) struct Placeholders {
    forward: HashMap<String, String>,
    backward: HashMap<String, String>,
}

impl Placeholders {
    /// Asserts that `actual` is `expected` with its placeholders filled in consistently.
    pub(crate) fn check(&mut self, expected: &Value, actual: &Value, path: &str) {
        match (expected, actual) {
            (Value::String(e), Value::String(a)) if e == "<time>" => {
                assert!(
                    k8s_openapi::jiff::Timestamp::strptime("%Y-%m-%dT%H:%M:%S%.fZ", a).is_ok()
                        || a.parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
                    "{path}: {a:?} is not a timestamp"
                );
            }
            (Value::String(e), Value::String(a))
                if e.starts_with("<rv:") || e.starts_with("<uid:") =>
            {
                let prev = self.forward.entry(e.clone()).or_insert_with(|| a.clone());
                assert_eq!(prev, a, "{path}: {e} stands for {prev} elsewhere");
                let prev = self.backward.entry(a.clone()).or_insert_with(|| e.clone());
                assert_eq!(prev, e, "{path}: {a} is {prev} elsewhere");
            }
            (Value::Object(e), Value::Object(a)) => {
                let mut ek: Vec<_> = e.keys().collect();
                let mut ak: Vec<_> = a.keys().collect();
                ek.sort();
                ak.sort();
                assert_eq!(ek, ak, "{path}: keys differ");
                for (k, v) in e {
                    self.check(v, &a[k], &format!("{path}.{k}"));
                }
            }
            (Value::Array(e), Value::Array(a)) => {
                assert_eq!(e.len(), a.len(), "{path}: lengths differ");
                for (i, (e, a)) in e.iter().zip(a).enumerate() {
                    self.check(e, a, &format!("{path}[{i}]"));
                }
            }
            (e, a) => assert_eq!(e, a, "{path}"),
        }
    }
}
