//! How server-side apply tells list items apart, from the recorded OpenAPI schema
//! ([`crate::schema`]): a list field's `x-kubernetes-list-type` (`map`, `set`, else atomic),
//! a `map` list's `x-kubernetes-list-map-keys`, the v3 `default` of a key field an item
//! leaves out (a port's `protocol`: `TCP`), and which structs and maps are owned whole
//! (`x-kubernetes-map-type: atomic`), as structured-merge-diff reads them. Custom
//! resources have no type here: their lists are atomic (their CRD schema's list types are not
//! read yet); their `metadata` is an `ObjectMeta`.

use std::sync::LazyLock;

use serde_json::{Map, Value};

use crate::schema::model::{ListType, Ty};

/// The schema type of an object: its kind's root struct (none for custom resources).
pub(super) fn root_ty(obj: &Value) -> Option<Ty> {
    let av = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let (group, version) = av.rsplit_once('/').unwrap_or(("", av));
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    crate::schema::model()
        .kind(group, version, kind)
        .map(Ty::Struct)
}

/// The type of field `k` of a value of type `ty`; `metadata` of an untyped object (a custom
/// resource) is an `ObjectMeta`.
pub(super) fn child<'m>(ty: Option<&'m Ty>, k: &str) -> Option<&'m Ty> {
    static META: LazyLock<Option<Ty>> = LazyLock::new(|| {
        crate::schema::model()
            .def("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
            .map(Ty::Struct)
    });
    let model = crate::schema::model();
    match ty {
        Some(Ty::Struct(i)) => model.defs[*i].fields.get(k),
        Some(Ty::Map(inner)) => Some(inner),
        None if k == "metadata" => META.as_ref(),
        _ => None,
    }
}

/// The type of a list's items.
pub(super) fn items_ty(ty: Option<&Ty>) -> Option<&Ty> {
    match ty? {
        Ty::Array(inner) => Some(inner),
        _ => None,
    }
}

/// The list type of field `k` of a value of type `ty`, from the schema (atomic without one).
pub(super) fn list_type<'m>(ty: Option<&'m Ty>, k: &str) -> &'m ListType {
    static ATOMIC: ListType = ListType::Atomic;
    match ty {
        Some(Ty::Struct(i)) => crate::schema::model().defs[*i]
            .list_types
            .get(k)
            .unwrap_or(&ATOMIC),
        _ => &ATOMIC,
    }
}

/// The default of key field `k` of list items of type `ty` (the OpenAPI v3 `default`).
fn key_default(ty: Option<&Ty>, k: &str) -> Option<&'static Value> {
    match ty? {
        Ty::Struct(i) => {
            crate::schema::field_default(&crate::schema::model().defs[*i].full_name, k)
        }
        _ => None,
    }
}

/// A list-map item's key (`{"containerPort":80,"protocol":"TCP"}`): its key fields, an
/// absent one by its default, as kube-apiserver keys it; `None` when a key field is absent
/// with no default, or the item has none of them.
pub(super) fn item_key(
    item: &Value,
    keys: &[String],
    ty: Option<&Ty>,
) -> Option<Map<String, Value>> {
    let mut keys: Vec<&String> = keys.iter().collect();
    keys.sort();
    let mut out = Map::new();
    for k in keys {
        let v = item.get(k).or_else(|| key_default(ty, k))?;
        out.insert(k.clone(), v.clone());
    }
    (!out.is_empty()).then_some(out)
}

/// Sets the absent key fields of list-map items to their defaults, through `obj` (an
/// applied configuration): the items are then found by the keys their field set names, as
/// in the object once defaulted.
pub(crate) fn default_item_keys(obj: &mut Value) {
    let ty = root_ty(obj);
    fill_keys(obj, ty.as_ref());
}

fn fill_keys(v: &mut Value, ty: Option<&Ty>) {
    let Some(m) = v.as_object_mut() else { return };
    for (k, fv) in m.iter_mut() {
        let fty = child(ty, k);
        match fv {
            Value::Array(items) => {
                let item_ty = items_ty(fty);
                let keys = match list_type(ty, k) {
                    ListType::Map(keys) => keys.as_slice(),
                    _ => &[],
                };
                for item in items.iter_mut() {
                    if let Some(im) = item.as_object_mut() {
                        for key in keys {
                            if !im.contains_key(key)
                                && let Some(d) = key_default(item_ty, key)
                            {
                                im.insert(key.clone(), d.clone());
                            }
                        }
                    }
                    fill_keys(item, item_ty);
                }
            }
            Value::Object(_) => fill_keys(fv, fty),
            _ => {}
        }
    }
}

/// Whether field `k` of a value of type `ty` is owned as a whole: an atomic map (a Service's
/// `selector`) or a value of an atomic struct (`LabelSelector`).
pub(super) fn atomic(ty: Option<&Ty>, k: &str) -> bool {
    let model = crate::schema::model();
    let Some(Ty::Struct(i)) = ty else {
        return false;
    };
    model.defs[*i].atomic_fields.iter().any(|f| f == k)
        || matches!(child(ty, k), Some(Ty::Struct(c)) if model.defs[*c].atomic)
}

/// Whether list items of type `ty` are owned as a whole (`OwnerReference`, `Subject`).
pub(super) fn atomic_item(ty: Option<&Ty>) -> bool {
    matches!(ty, Some(Ty::Struct(i)) if crate::schema::model().defs[*i].atomic)
}
