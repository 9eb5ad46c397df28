//! The one schema source of the built-in kinds: kube-apiserver v1.36.5's OpenAPI documents
//! (`/openapi/v2` and every `/openapi/v3/<path>`), recorded by `scripts/record-openapi.sh`
//! into `data/openapi-v1.36.5.json.gz` and embedded compressed. Decompressed on first use
//! only: the documents are served as recorded ([`docs`]), and the v2 definitions become the
//! decoding [`model`] that finds type errors and unknown fields at every depth ([`check`]).

pub(crate) mod check;
pub(crate) mod model;

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::value::RawValue;

/// The recorded bundle, gzip-compressed JSON `{"version", "v2", "v3": {path: document}}`.
const BUNDLE: &[u8] = include_bytes!("../../data/openapi-v1.36.5.json.gz");

/// The recorded documents, each as its JSON text.
pub(crate) struct Docs {
    /// `/openapi/v2`.
    pub(crate) v2: &'static RawValue,
    /// `/openapi/v3/<path>` by path (`api/v1`, `apis/apps/v1`, `version`, ...).
    pub(crate) v3: BTreeMap<&'static str, &'static RawValue>,
}

#[derive(Deserialize)]
struct Bundle<'a> {
    version: &'a str,
    #[serde(borrow)]
    v2: &'a RawValue,
    #[serde(borrow)]
    v3: BTreeMap<&'a str, &'a RawValue>,
}

/// The recorded documents (decompressed once, then kept for the life of the process).
pub(crate) fn docs() -> &'static Docs {
    static DOCS: OnceLock<Docs> = OnceLock::new();
    DOCS.get_or_init(|| {
        let text: &'static str = Box::leak(decompress().into_boxed_str());
        let b: Bundle<'static> =
            serde_json::from_str(text).expect("the embedded OpenAPI bundle is JSON");
        assert_eq!(
            b.version, "v1.36.5",
            "the embedded OpenAPI bundle's version"
        );
        Docs { v2: b.v2, v3: b.v3 }
    })
}

/// The bundle's JSON text.
fn decompress() -> String {
    let mut text = String::new();
    // The bundle is part of the binary and checked by the tests: failing here is a build
    // defect, not bad input.
    flate2::read::GzDecoder::new(BUNDLE)
        .read_to_string(&mut text)
        .expect("the embedded OpenAPI bundle decompresses");
    text
}

/// The decoding model of every built-in kind, built from the v2 definitions on first use
/// (from a transient copy of the bundle: the documents stay compressed until served).
pub(crate) fn model() -> &'static model::Model {
    static MODEL: OnceLock<model::Model> = OnceLock::new();
    MODEL.get_or_init(|| {
        let text = decompress();
        let b: Bundle<'_> =
            serde_json::from_str(&text).expect("the embedded OpenAPI bundle is JSON");
        let v2: model::RawDoc =
            serde_json::from_str(b.v2.get()).expect("the embedded OpenAPI v2 is JSON");
        model::Model::from_definitions(&v2.definitions)
    })
}

/// The `default` of a scalar field of a definition (`protocol` of
/// `io.k8s.api.core.v1.ContainerPort`: `"TCP"`), from the v3 documents (v2 has no
/// defaults). Read on first use only: server-side apply needs it for a list-map key an item
/// leaves out, as kube-apiserver keys such an item by the default.
pub(crate) fn field_default(def: &str, field: &str) -> Option<&'static serde_json::Value> {
    #[derive(Deserialize)]
    struct V3 {
        #[serde(default)]
        components: Components,
    }
    #[derive(Deserialize, Default)]
    struct Components {
        #[serde(default)]
        schemas: HashMap<String, Schema>,
    }
    #[derive(Deserialize)]
    struct Schema {
        #[serde(default)]
        properties: HashMap<String, Prop>,
    }
    #[derive(Deserialize)]
    struct Prop {
        #[serde(default)]
        default: Option<serde_json::Value>,
    }
    static DEFAULTS: OnceLock<HashMap<(String, String), serde_json::Value>> = OnceLock::new();
    DEFAULTS
        .get_or_init(|| {
            let mut out = HashMap::new();
            for doc in docs().v3.values() {
                let Ok(v3) = serde_json::from_str::<V3>(doc.get()) else {
                    continue;
                };
                for (name, schema) in v3.components.schemas {
                    for (f, p) in schema.properties {
                        if let Some(d) = p.default.filter(|d| !d.is_object() && !d.is_array()) {
                            out.insert((name.clone(), f), d);
                        }
                    }
                }
            }
            out
        })
        .get(&(def.to_owned(), field.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundle_holds_v2_and_every_v3_document() {
        let d = docs();
        assert!(d.v2.get().contains("\"io.k8s.api.core.v1.Pod\""));
        for p in [
            "api/v1",
            "apis/apps/v1",
            "apis/rbac.authorization.k8s.io/v1",
        ] {
            assert!(d.v3.contains_key(p), "{p}");
        }
        assert!(model().kind("apps", "v1", "Deployment").is_some());
    }
}
