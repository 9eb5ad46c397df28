//! Tests of `managed.rs`: field sets, updates and server-side apply's list keys.

use super::*;

#[test]
fn field_set_matches_kube_apiserver_encoding_for_configmaps_and_pods() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "w", "labels": {"app": "fx"}}, "data": {"v": "1"}});
    assert_eq!(
        field_set(&cm, false),
        json!({"f:data": {".": {}, "f:v": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"containers": [{"name": "c", "image": "x"}]},
                     "status": {"phase": "Pending"}});
    assert_eq!(
        field_set(&pod, false),
        json!({"f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}})
    );
    assert_eq!(field_set(&pod, true), json!({"f:status": {"f:phase": {}}}));
}

/// kube-apiserver keys list items by the schema's `x-kubernetes-list-map-keys`, an absent
/// key field by its default: a Service port by port and protocol, a container port by
/// containerPort and protocol (TCP when left out), host aliases by ip.
#[test]
fn list_items_are_keyed_by_the_schemas_list_map_keys() {
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                     "spec": {"ports": [{"port": 80, "protocol": "UDP"}]}});
    assert_eq!(
        field_set(&svc, false),
        json!({"f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"UDP\"}":
            {".": {}, "f:port": {}, "f:protocol": {}}}}})
    );
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a"]}],
                 "containers": [{"name": "c", "ports": [{"containerPort": 8080}]}]}});
    let fields = field_set(&pod, false);
    assert_eq!(
        fields["f:spec"]["f:hostAliases"],
        json!({"k:{\"ip\":\"10.0.0.1\"}": {".": {}, "f:hostnames": {}, "f:ip": {}}})
    );
    assert_eq!(
        fields["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["f:ports"],
        json!({"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}})
    );
    default_item_keys(&mut pod);
    assert_eq!(
        pod["spec"]["containers"][0]["ports"][0],
        json!({"containerPort": 8080, "protocol": "TCP"})
    );
}

/// Structs and maps the schema marks `x-kubernetes-map-type: atomic` are one field, as
/// kube-apiserver owns them: a Service's `selector`, a Deployment's `LabelSelector`, an
/// owner reference (its key only).
#[test]
fn atomic_structs_and_maps_are_one_field() {
    let svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "s", "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
            "name": "o", "uid": "u1"}]},
        "spec": {"selector": {"app": "a"}}});
    assert_eq!(
        field_set(&svc, false),
        json!({"f:metadata": {"f:ownerReferences": {"k:{\"uid\":\"u1\"}": {}}},
               "f:spec": {"f:selector": {}}})
    );
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}}});
    assert_eq!(
        field_set(&deploy, false),
        json!({"f:spec": {"f:selector": {}}})
    );
}

#[test]
fn updates_move_changed_fields_to_the_writer_and_drop_deleted_ones() {
    let m = |n: &str| Manager {
        name: n.into(),
        operation: "Update",
    };
    let v0 = json!({"metadata": {"name": "x"}, "data": {"a": "1", "b": "2"}});
    let mf0 = updated(
        None,
        None,
        &FieldsChange::Set(m("a"), field_set(&v0, false)),
        None,
        "v1",
        "t1",
    )
    .unwrap();
    let v1 = json!({"metadata": {"name": "x"}, "data": {"a": "1", "c": "3"}});
    let t = Transition {
        old: &v0,
        new: &v1,
        status_only: false,
    };
    let mf1 = updated(
        Some(&mf0),
        None,
        &FieldsChange::Update(m("b")),
        Some(&t),
        "v1",
        "t2",
    )
    .unwrap();
    let entries = mf1.as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["manager"], "a");
    assert_eq!(
        entries[0]["fieldsV1"],
        json!({"f:data": {".": {}, "f:a": {}}})
    );
    assert_eq!(entries[1]["manager"], "b");
    assert_eq!(
        entries[1]["fieldsV1"],
        json!({"f:data": {".": {}, "f:c": {}}})
    );
    let sent = json!([{"manager": "z"}]);
    assert_eq!(
        updated(
            Some(&mf1),
            Some(&sent),
            &FieldsChange::Update(m("c")),
            None,
            "v1",
            "t"
        ),
        Some(sent)
    );
}
