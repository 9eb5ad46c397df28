//! The `apiVersion` and `kind` of dynamic list items, which a list leaves out.
//!
//! kube-apiserver writes `apiVersion` and `kind` once, on a list of built-in objects
//! (`PodList`), not on its items; a watch event's object carries them. client-go's
//! `UnstructuredList` decoding sets each item's from the list's (kind without its `List`
//! suffix), so that a dynamic informer's objects look the same whether they came from a list or
//! from a watch; so does kcache's for [`DynamicObject`] items. Typed `K` need nothing: their
//! type is in the Rust type.

use std::any::Any;

use kcache::lister_watcher::ObjectList;
use kube_core::{DynamicObject, TypeMeta};

/// Sets the `apiVersion` and `kind` of every [`DynamicObject`] item that has none from the
/// list's own (`PodList` → `Pod`). Lists of any other `K`, and lists whose kind is not
/// `<Kind>List`, are left as they are.
pub(super) fn fill_dynamic_item_types<K: Clone + 'static>(list: &mut ObjectList<K>) {
    let Some(items) = (&mut list.items as &mut dyn Any).downcast_mut::<Vec<DynamicObject>>() else {
        return;
    };
    let Some(kind) = list.types.kind.strip_suffix("List") else {
        return;
    };
    if kind.is_empty() || list.types.api_version.is_empty() {
        return;
    }
    for item in items.iter_mut().filter(|i| i.types.is_none()) {
        item.types = Some(TypeMeta {
            api_version: list.types.api_version.clone(),
            kind: kind.to_owned(),
        });
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use kube_core::ObjectMeta;

    use super::*;

    fn list<K: Clone>(api_version: &str, kind: &str, items: Vec<K>) -> ObjectList<K> {
        ObjectList {
            types: TypeMeta {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            },
            metadata: Default::default(),
            items,
        }
    }

    fn dynamic(name: &str, types: Option<(&str, &str)>) -> DynamicObject {
        DynamicObject {
            types: types.map(|(a, k)| TypeMeta {
                api_version: a.to_owned(),
                kind: k.to_owned(),
            }),
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            data: serde_json::Value::Null,
        }
    }

    fn types(o: &DynamicObject) -> Option<(&str, &str)> {
        o.types
            .as_ref()
            .map(|t| (t.api_version.as_str(), t.kind.as_str()))
    }

    #[test]
    fn dynamic_items_without_a_type_get_the_lists() {
        let mut l = list(
            "apps/v1",
            "DeploymentList",
            vec![
                dynamic("a", None),
                dynamic("b", Some(("apps/v1beta1", "Deployment"))),
            ],
        );
        fill_dynamic_item_types(&mut l);
        assert_eq!(types(&l.items[0]), Some(("apps/v1", "Deployment")));
        assert_eq!(
            types(&l.items[1]),
            Some(("apps/v1beta1", "Deployment")),
            "an item's own type is kept"
        );
    }

    #[test]
    fn a_list_kind_without_its_suffix_sets_nothing() {
        for (api_version, kind) in [("v1", "List"), ("v1", "Pods"), ("", "PodList")] {
            let mut l = list(api_version, kind, vec![dynamic("a", None)]);
            fill_dynamic_item_types(&mut l);
            assert_eq!(types(&l.items[0]), None, "{api_version} {kind}");
        }
    }

    #[test]
    fn typed_items_are_left_alone() {
        let mut l = list("v1", "PodList", vec![Pod::default()]);
        fill_dynamic_item_types(&mut l);
        assert_eq!(l.items, vec![Pod::default()]);
    }
}
