//! The decoding model: what kube-apiserver's Go types accept, read from the OpenAPI v2
//! definitions (each definition is one Go struct; its properties are the struct's JSON
//! fields).

use std::collections::HashMap;

use serde::Deserialize;

/// The type of a field, as Go's JSON decoder sees it.
#[derive(Debug, Clone)]
pub(crate) enum Ty {
    /// Anything (`RawExtension`, `FieldsV1`, `JSON`, times: checked elsewhere or not at all).
    Any,
    Bool,
    Str,
    /// `[]byte`: a base64 string.
    Bytes,
    Int32,
    Int64,
    Float,
    /// `resource.Quantity`.
    Quantity,
    /// `intstr.IntOrString`.
    IntOrString,
    /// A struct: the index of its definition.
    Struct(usize),
    Array(Box<Ty>),
    Map(Box<Ty>),
}

/// One Go struct.
#[derive(Debug)]
pub(crate) struct Def {
    /// The Go type's name (`DeploymentSpec`).
    pub(crate) name: String,
    /// The Go type's name with its package (`v1.DeploymentSpec`).
    pub(crate) qualified: String,
    /// Its JSON fields.
    pub(crate) fields: HashMap<String, Ty>,
    /// How strategic merge patch merges its list fields: the field's
    /// `x-kubernetes-patch-merge-key`, for those whose `x-kubernetes-patch-strategy` merges
    /// (`None`: a list of primitives merged as a set).
    pub(crate) merged_lists: HashMap<String, Option<String>>,
    /// How server-side apply tells the items of its list fields apart: the field's
    /// `x-kubernetes-list-type` and `x-kubernetes-list-map-keys` (a list without one is
    /// atomic).
    pub(crate) list_types: HashMap<String, ListType>,
    /// The definition's name in the OpenAPI documents (`io.k8s.api.core.v1.ContainerPort`).
    pub(crate) full_name: String,
    /// `x-kubernetes-map-type: atomic`: server-side apply owns a value of this struct as a
    /// whole (`LabelSelector`, `OwnerReference`, ...).
    pub(crate) atomic: bool,
    /// Its fields whose own `x-kubernetes-map-type` is `atomic` (a Service's `selector`).
    pub(crate) atomic_fields: Vec<String>,
}

/// A list field's `x-kubernetes-list-type`, as server-side apply reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListType {
    /// `atomic` (or none): the list is one value.
    Atomic,
    /// `set`: primitives, each item a field (`v:<value>`).
    Set,
    /// `map`: objects, each item a field keyed by these fields (`k:{...}`).
    Map(Vec<String>),
}

/// Every struct of the built-in API, and the kinds' root structs.
#[derive(Debug, Default)]
pub(crate) struct Model {
    pub(crate) defs: Vec<Def>,
    kinds: HashMap<(String, String, String), usize>,
    by_name: HashMap<String, usize>,
}

/// A v2 definition, read without its descriptions (most of the document's bytes).
#[derive(Deserialize)]
pub(crate) struct RawDef {
    #[serde(default)]
    properties: Option<HashMap<String, RawProp>>,
    #[serde(default, rename = "x-kubernetes-group-version-kind")]
    gvk: Vec<RawGvk>,
    #[serde(default, rename = "x-kubernetes-map-type")]
    map_type: Option<String>,
}

#[derive(Deserialize)]
struct RawGvk {
    #[serde(default)]
    group: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    kind: String,
}

/// A property (or item) schema of a v2 definition.
#[derive(Deserialize, Default)]
struct RawProp {
    #[serde(default, rename = "$ref")]
    reference: Option<String>,
    #[serde(default, rename = "type")]
    ty: Option<String>,
    #[serde(default)]
    format: Option<String>,
    #[serde(default)]
    items: Option<Box<RawProp>>,
    #[serde(default, rename = "additionalProperties")]
    additional: Option<Box<AdditionalProps>>,
    #[serde(default, rename = "x-kubernetes-patch-merge-key")]
    merge_key: Option<String>,
    #[serde(default, rename = "x-kubernetes-patch-strategy")]
    strategy: Option<String>,
    #[serde(default, rename = "x-kubernetes-list-type")]
    list_type: Option<String>,
    #[serde(default, rename = "x-kubernetes-list-map-keys")]
    list_map_keys: Vec<String>,
    #[serde(default, rename = "x-kubernetes-map-type")]
    map_type: Option<String>,
}

/// `additionalProperties`: a schema or a boolean.
#[derive(Deserialize)]
#[serde(untagged)]
enum AdditionalProps {
    Schema(Box<RawProp>),
    /// `true` or `false`: any value, read only to accept the document.
    Bool(#[expect(dead_code, reason = "only read to accept the document")] bool),
}

/// The v2 document, its definitions only.
#[derive(Deserialize)]
pub(crate) struct RawDoc {
    #[serde(default)]
    pub(crate) definitions: HashMap<String, RawDef>,
}

impl Model {
    /// Builds the model from the v2 document's `definitions`.
    pub(crate) fn from_definitions(defs: &HashMap<String, RawDef>) -> Self {
        let mut model = Self::default();
        let mut index = HashMap::new();
        let mut names: Vec<&String> = defs.keys().collect();
        names.sort();
        for name in names {
            let short = name.rsplit('.').next().unwrap_or(name);
            let pkg = name.rsplit('.').nth(1).unwrap_or("");
            index.insert(name.clone(), model.defs.len());
            model.defs.push(Def {
                name: short.to_owned(),
                qualified: format!("{pkg}.{short}"),
                fields: HashMap::new(),
                merged_lists: HashMap::new(),
                list_types: HashMap::new(),
                full_name: name.clone(),
                atomic: defs[name].map_type.as_deref() == Some("atomic"),
                atomic_fields: Vec::new(),
            });
        }
        for (name, d) in defs {
            let i = index[name];
            if let Some(props) = &d.properties {
                model.defs[i].fields = props
                    .iter()
                    .map(|(k, p)| (k.clone(), ty(p, defs, &index)))
                    .collect();
                model.defs[i].merged_lists = props
                    .iter()
                    .filter(|(_, p)| {
                        p.strategy
                            .as_deref()
                            .is_some_and(|s| s.split(',').any(|x| x == "merge"))
                    })
                    .map(|(k, p)| (k.clone(), p.merge_key.clone()))
                    .collect();
                model.defs[i].list_types = props
                    .iter()
                    .filter_map(|(k, p)| {
                        let t = match p.list_type.as_deref()? {
                            "set" => ListType::Set,
                            "map" => ListType::Map(p.list_map_keys.clone()),
                            _ => ListType::Atomic,
                        };
                        Some((k.clone(), t))
                    })
                    .collect();
                model.defs[i].atomic_fields = props
                    .iter()
                    .filter(|(_, p)| p.map_type.as_deref() == Some("atomic"))
                    .map(|(k, _)| k.clone())
                    .collect();
            }
            for g in &d.gvk {
                model
                    .kinds
                    .insert((g.group.clone(), g.version.clone(), g.kind.clone()), i);
            }
        }
        model.by_name = index;
        model
    }

    /// The struct of a definition, by its name in the documents
    /// (`io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`).
    pub(crate) fn def(&self, full_name: &str) -> Option<usize> {
        self.by_name.get(full_name).copied()
    }

    /// The root struct of a built-in kind.
    pub(crate) fn kind(&self, group: &str, version: &str, kind: &str) -> Option<usize> {
        self.kinds
            .get(&(group.to_owned(), version.to_owned(), kind.to_owned()))
            .copied()
    }

    /// Go's name of `t` in decoding errors (`int32`, `v1.LabelSelector`, `[]v1.Container`).
    pub(crate) fn go_name(&self, t: &Ty) -> String {
        match t {
            Ty::Any => "interface {}".into(),
            Ty::Bool => "bool".into(),
            Ty::Str => "string".into(),
            Ty::Bytes => "[]uint8".into(),
            Ty::Int32 => "int32".into(),
            Ty::Int64 => "int64".into(),
            Ty::Float => "float64".into(),
            Ty::Quantity => "resource.Quantity".into(),
            Ty::IntOrString => "intstr.IntOrString".into(),
            Ty::Struct(i) => self.defs[*i].qualified.clone(),
            Ty::Array(t) => format!("[]{}", self.go_name(t)),
            Ty::Map(t) => format!("map[string]{}", self.go_name(t)),
        }
    }
}

/// The type of one property (or item) schema.
fn ty(p: &RawProp, defs: &HashMap<String, RawDef>, index: &HashMap<String, usize>) -> Ty {
    if let Some(r) = &p.reference {
        let name = r.trim_start_matches("#/definitions/");
        let Some(d) = defs.get(name) else {
            return Ty::Any;
        };
        return match name {
            "io.k8s.apimachinery.pkg.api.resource.Quantity" => Ty::Quantity,
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString" => Ty::IntOrString,
            _ if d.properties.is_some() => Ty::Struct(index[name]),
            _ => Ty::Any,
        };
    }
    let format = p.format.as_deref().unwrap_or("");
    match p.ty.as_deref().unwrap_or("") {
        "boolean" => Ty::Bool,
        "string" if format == "byte" => Ty::Bytes,
        "string" if format == "int-or-string" => Ty::IntOrString,
        "string" if format == "date-time" => Ty::Any,
        "string" => Ty::Str,
        "integer" if format == "int32" => Ty::Int32,
        "integer" => Ty::Int64,
        "number" => Ty::Float,
        "array" => match &p.items {
            Some(items) => Ty::Array(Box::new(ty(items, defs, index))),
            None => Ty::Any,
        },
        "object" => match p.additional.as_deref() {
            Some(AdditionalProps::Schema(v)) => Ty::Map(Box::new(ty(v, defs, index))),
            _ => Ty::Any,
        },
        _ => Ty::Any,
    }
}
