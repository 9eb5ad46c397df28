//! Per-kind rules of kube-apiserver's registry strategies (`k8s.io/kubernetes/pkg/registry`,
//! `pkg/apis/core/validation`) for the kinds this server serves, applied on create and update:
//! Secret `stringData`, default type, base64 data, required keys per type and immutability;
//! the ConfigMap size limit and immutability; Service defaults and cluster IPs; the namespace
//! name label; containers a pod update may not add or remove; finalizers that may not be added
//! to an object being deleted; and Go's `omitempty` for the empty maps of built-in kinds.

use std::sync::atomic::{AtomicU32, Ordering};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use super::crd;
use super::{apps, jobs, kinds, updates, validation};
use crate::resource::ResourceInfo;
use crate::status::{ApiError, Cause};

/// kube-apiserver's `MaxSecretSize` / ConfigMap limit: 1 MiB of data.
const MAX_DATA_BYTES: usize = 1024 * 1024;

fn core(info: &ResourceInfo, plural: &str) -> bool {
    info.group.is_empty() && info.plural == plural
}

fn builtin(info: &ResourceInfo) -> bool {
    info.schema.is_none() && crate::resource::table().group_rank(&info.group).is_some()
}

/// The rules of a create, on the object about to be stored (name already set).
pub(crate) fn on_create(info: &ResourceInfo, obj: &mut Map<String, Value>) -> Result<(), ApiError> {
    let name = name_of(obj);
    if crd::is_crd(info) {
        crd::validate(info, obj)?;
        // The apiextensions controllers write the status; a create starts without one.
        obj.remove("status");
    }
    let mut causes = Vec::new();
    if let Some(schema) = &info.schema {
        let mut v = Value::Object(std::mem::take(obj));
        crd::prune(&mut v, schema);
        crd::default(&mut v, schema);
        if let Value::Object(m) = v {
            *obj = m;
        }
        if info.subresources.iter().any(|s| s == "status") {
            obj.remove("status");
        }
        causes = crd::schema_causes(schema, &Value::Object(obj.clone()), None, false);
    }
    if core(info, "secrets") {
        secret_defaults(obj)?;
        let causes = secret_causes(obj);
        if !causes.is_empty() {
            return Err(ApiError::invalid(info, &name, causes));
        }
    }
    if core(info, "configmaps") {
        config_map_size(info, &name, obj)?;
    }
    if core(info, "services") {
        service_defaults(info, &name, obj, None)?;
    }
    if core(info, "namespaces") {
        namespace_label(obj, &name);
    }
    if is_csr(info) {
        csr_on_create(info, &name, obj)?;
    }
    validation::rbac_defaults(info, obj);
    kinds::set_defaults(info, obj);
    crate::registry::admissionregistration::set_defaults(info, obj);
    causes.extend(crate::registry::admissionregistration::causes(info, obj));
    if apps::is_workload(info) {
        apps::set_defaults(info, obj);
        // The status subresource's owner (the controller) writes status; a create starts
        // it empty.
        obj.insert("status".into(), json!({}));
        causes = apps::causes(info, obj);
    }
    updates::template_generation(info, None, obj);
    let causes = with_validation(info, obj, causes);
    if !causes.is_empty() {
        return Err(ApiError::invalid(info, &name, causes));
    }
    jobs::job_selector(info, obj);
    prune_empty(info, obj);
    Ok(())
}

/// kube-apiserver's validation ([`validation::causes`]: metadata, then the kind's fields)
/// merged with the causes a workload's own checks found (`kind_causes`, placed before the
/// pod template's container errors, as the apps validation orders them).
fn with_validation(
    info: &ResourceInfo,
    obj: &Map<String, Value>,
    kind_causes: Vec<Cause>,
) -> Vec<Cause> {
    let mut all = validation::causes(info, obj);
    let at = all
        .iter()
        .position(|c| c.field.starts_with("spec.template.spec."))
        .unwrap_or(all.len());
    all.splice(at..at, kind_causes);
    all
}

/// The rules of an update from `old` to `new` (a whole object, server metadata restored).
/// A write through a subresource (`status_only`: `/status`, a pod's ephemeral containers or
/// resize) is not checked for the fields the main resource keeps; a `/status` write of a
/// custom resource checks the status alone.
pub(crate) fn on_update(
    info: &ResourceInfo,
    old: &Value,
    new: &mut Value,
    status_only: bool,
) -> Result<(), ApiError> {
    let Some(obj) = new.as_object_mut() else {
        return Ok(());
    };
    let name = name_of(obj);
    if crd::is_crd(info) {
        crd::validate(info, obj)?;
    }
    let mut kind_causes = Vec::new();
    if let Some(schema) = &info.schema {
        crd::prune(new, schema);
        crd::default(new, schema);
        kind_causes = crd::schema_causes(schema, new, Some(old), status_only);
    }
    let Some(obj) = new.as_object_mut() else {
        return Ok(());
    };
    let mut causes = Vec::new();
    if old.pointer("/metadata/deletionTimestamp").is_some() {
        let had = string_list(old.pointer("/metadata/finalizers"));
        let added: Vec<String> = string_list(obj.get("metadata").and_then(|m| m.get("finalizers")))
            .into_iter()
            .filter(|f| !had.contains(f))
            .collect();
        if !added.is_empty() {
            let quoted: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
            causes.push(Cause::new(
                "FieldValueForbidden",
                format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    quoted.join(", ")
                ),
                "metadata.finalizers",
            ));
        }
    }
    if core(info, "secrets") {
        secret_defaults(obj)?;
        immutable_data(old, obj, &mut causes);
        let old_type = old.get("type").and_then(Value::as_str).unwrap_or("Opaque");
        let new_type = obj.get("type").and_then(Value::as_str).unwrap_or("Opaque");
        if old_type != new_type {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: \"{new_type}\": field is immutable"),
                "type",
            ));
        }
        causes.extend(secret_causes(obj));
    }
    if core(info, "configmaps") {
        immutable_data(old, obj, &mut causes);
        if causes.is_empty() {
            config_map_size(info, &name, obj)?;
        }
    }
    if core(info, "pods") {
        let count = |v: Option<&Value>| v.and_then(Value::as_array).map_or(0, Vec::len);
        let (was, is) = (
            count(old.pointer("/spec/containers")),
            count(obj.get("spec").and_then(|s| s.get("containers"))),
        );
        if was != is {
            causes.push(Cause::new(
                "FieldValueForbidden",
                "Forbidden: pod updates may not add or remove containers",
                "spec.containers",
            ));
        }
    }
    if core(info, "services") {
        service_defaults(info, &name, obj, Some(old))?;
    }
    if core(info, "namespaces") {
        namespace_label(obj, &name);
    }
    validation::rbac_defaults(info, obj);
    kinds::set_defaults(info, obj);
    causes.extend(validation::rbac_update_causes(info, old, obj));
    crate::registry::admissionregistration::set_defaults(info, obj);
    kind_causes.extend(crate::registry::admissionregistration::causes(info, obj));
    if apps::is_workload(info) {
        apps::set_defaults(info, obj);
        kind_causes = apps::causes(info, obj);
    }
    updates::template_generation(info, Some(old), obj);
    let mut validated = with_validation(info, obj, kind_causes);
    if status_only {
        causes.extend(validated);
    } else {
        validated.extend(jobs::selector_causes(info, obj));
        causes.extend(jobs::generated_causes(info, old, obj));
        causes.extend(updates::repeated(info, validated));
        causes.extend(updates::immutable_causes(info, old, obj));
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(info, &name, causes));
    }
    prune_empty(info, obj);
    Ok(())
}

fn name_of(obj: &Map<String, Value>) -> String {
    obj.get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `stringData` folded into `data` (base64), the default type, and `data` checked as base64
/// (a 400, as the v1 → internal conversion fails).
fn secret_defaults(obj: &mut Map<String, Value>) -> Result<(), ApiError> {
    if let Some(Value::Object(strings)) = obj.remove("stringData") {
        let data = obj.entry("data").or_insert_with(|| json!({}));
        if !data.is_object() {
            *data = json!({});
        }
        if let Some(d) = data.as_object_mut() {
            for (k, v) in strings {
                let text = v.as_str().unwrap_or_default().to_owned();
                d.insert(k, json!(STANDARD.encode(text)));
            }
        }
    }
    if obj
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        obj.insert("type".into(), json!("Opaque"));
    }
    if let Some(Value::Object(data)) = obj.get("data") {
        for v in data.values() {
            let s = v.as_str().unwrap_or_default();
            if STANDARD.decode(s).is_err() {
                return Err(ApiError::bad_request(format!(
                    "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte {}",
                    illegal_base64_at(s)
                )));
            }
        }
    }
    Ok(())
}

/// Where Go's decoder reports base64 `s` illegal: the first byte outside the alphabet, else
/// the end.
fn illegal_base64_at(s: &str) -> usize {
    s.bytes()
        .position(|b| !(b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'='))
        .unwrap_or(s.len())
}

/// The keys each Secret type requires.
fn secret_causes(obj: &Map<String, Value>) -> Vec<Cause> {
    let data = obj.get("data").and_then(Value::as_object);
    let has = |k: &str| data.is_some_and(|d| d.contains_key(k));
    let required = |k: &str| {
        Cause::new(
            "FieldValueRequired",
            "Required value",
            &format!("data[{k}]"),
        )
    };
    match obj.get("type").and_then(Value::as_str).unwrap_or("Opaque") {
        "kubernetes.io/tls" => ["tls.crt", "tls.key"]
            .into_iter()
            .filter(|k| !has(k))
            .map(required)
            .collect(),
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            vec![required("username"), required("password")]
        }
        "kubernetes.io/ssh-auth" if !has("ssh-privatekey") => vec![required("ssh-privatekey")],
        "kubernetes.io/dockerconfigjson" if !has(".dockerconfigjson") => {
            vec![required(".dockerconfigjson")]
        }
        "kubernetes.io/dockercfg" if !has(".dockercfg") => vec![required(".dockercfg")],
        _ => Vec::new(),
    }
}

/// `immutable: true` freezes `data`, `binaryData` and `immutable` itself.
fn immutable_data(old: &Value, new: &Map<String, Value>, causes: &mut Vec<Cause>) {
    if old.get("immutable") != Some(&json!(true)) {
        return;
    }
    let frozen = "Forbidden: field is immutable when `immutable` is set";
    for field in ["data", "binaryData"] {
        let empty = |v: Option<&Value>| v.is_none_or(|v| v.as_object().is_some_and(Map::is_empty));
        let (a, b) = (old.get(field), new.get(field));
        if a != b && !(empty(a) && empty(b)) {
            causes.push(Cause::new("FieldValueForbidden", frozen, field));
        }
    }
    if new.get("immutable") != Some(&json!(true)) {
        causes.push(Cause::new("FieldValueForbidden", frozen, "immutable"));
    }
}

fn config_map_size(
    info: &ResourceInfo,
    name: &str,
    obj: &Map<String, Value>,
) -> Result<(), ApiError> {
    let mut total = 0;
    if let Some(Value::Object(data)) = obj.get("data") {
        total += data
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum::<usize>();
    }
    if let Some(Value::Object(data)) = obj.get("binaryData") {
        total += data
            .iter()
            .map(|(k, v)| {
                k.len()
                    + STANDARD
                        .decode(v.as_str().unwrap_or_default())
                        .map_or(0, |b| b.len())
            })
            .sum::<usize>();
    }
    if total > MAX_DATA_BYTES {
        return Err(ApiError::invalid(
            info,
            name,
            vec![Cause::new(
                "FieldValueTooLong",
                format!("Too long: may not be more than {MAX_DATA_BYTES} bytes"),
                "[]",
            )],
        ));
    }
    Ok(())
}

/// The next cluster IP of the service range 10.96.0.0/12 (.1 is the `kubernetes` service).
fn allocate_cluster_ip() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(10);
    let n = NEXT.fetch_add(1, Ordering::Relaxed) % (1 << 20);
    format!("10.{}.{}.{}", 96 + (n >> 16), (n >> 8) & 0xff, n & 0xff)
}

/// Service defaults (`type`, `sessionAffinity`, port protocols and target ports, IP families,
/// traffic policy), the cluster IP allocated on create and kept on update, and ports required
/// unless the type is ExternalName.
fn service_defaults(
    info: &ResourceInfo,
    name: &str,
    obj: &mut Map<String, Value>,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let spec = obj.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return Ok(());
    };
    let ty = spec
        .entry("type")
        .or_insert_with(|| json!("ClusterIP"))
        .as_str()
        .unwrap_or("ClusterIP")
        .to_owned();
    if ty != "ExternalName" {
        let ports = spec
            .get("ports")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        if ports == 0 {
            return Err(ApiError::invalid(
                info,
                name,
                vec![Cause::new(
                    "FieldValueRequired",
                    "Required value",
                    "spec.ports",
                )],
            ));
        }
    }
    spec.entry("sessionAffinity")
        .or_insert_with(|| json!("None"));
    if let Some(Value::Array(ports)) = spec.get_mut("ports") {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            p.entry("protocol").or_insert_with(|| json!("TCP"));
            if let Some(port) = p.get("port").cloned() {
                p.entry("targetPort").or_insert(port);
            }
        }
    }
    if ty == "ExternalName" {
        return Ok(());
    }
    let kept = old
        .and_then(|o| o.pointer("/spec/clusterIP"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let ip = match spec.get("clusterIP").and_then(Value::as_str) {
        Some(ip) if !ip.is_empty() => ip.to_owned(),
        _ => kept.unwrap_or_else(allocate_cluster_ip),
    };
    spec.insert("clusterIP".into(), json!(ip));
    spec.entry("clusterIPs").or_insert_with(|| json!([ip]));
    if ip != "None" {
        spec.entry("ipFamilies").or_insert_with(|| json!(["IPv4"]));
        spec.entry("ipFamilyPolicy")
            .or_insert_with(|| json!("SingleStack"));
    }
    spec.entry("internalTrafficPolicy")
        .or_insert_with(|| json!("Cluster"));
    Ok(())
}

fn is_csr(info: &ResourceInfo) -> bool {
    info.group == "certificates.k8s.io" && info.plural == "certificatesigningrequests"
}

/// A CertificateSigningRequest's create: the requesting user (this server's admin identity)
/// written into `spec`, the status cleared, and kube-apiserver's checks of `request`,
/// `usages` and `signerName`.
fn csr_on_create(
    info: &ResourceInfo,
    name: &str,
    obj: &mut Map<String, Value>,
) -> Result<(), ApiError> {
    obj.insert("status".into(), json!({}));
    let spec = obj.entry("spec").or_insert_with(|| json!({}));
    if !spec.is_object() {
        *spec = json!({});
    }
    spec["username"] = json!(crate::auth::ADMIN_USER);
    spec["uid"] = json!(crate::auth::ADMIN_UID);
    spec["groups"] = json!(crate::auth::ADMIN_GROUPS);
    let mut causes = Vec::new();
    let request = spec.get("request").and_then(Value::as_str).unwrap_or("");
    let pem = STANDARD.decode(request).unwrap_or_default();
    let pem = String::from_utf8_lossy(&pem);
    if !pem.contains("-----BEGIN CERTIFICATE REQUEST-----") {
        causes.push(Cause::new(
            "FieldValueInvalid",
            format!("Invalid value: \"{request}\": PEM block type must be CERTIFICATE REQUEST"),
            "spec.request",
        ));
    }
    if spec
        .get("usages")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        causes.push(Cause::new(
            "FieldValueRequired",
            "Required value",
            "spec.usages",
        ));
    }
    if spec
        .get("signerName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        causes.push(Cause::new(
            "FieldValueRequired",
            "Required value",
            "spec.signerName",
        ));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(info, name, causes))
    }
}

/// The conditions of a CertificateSigningRequest written through `approval` or `status`:
/// `lastUpdateTime` and `lastTransitionTime` default to now.
pub(crate) fn csr_condition_times(obj: &mut Value, now: &str) {
    if let Some(conds) = obj
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for c in conds.iter_mut().filter_map(Value::as_object_mut) {
            c.entry("lastUpdateTime").or_insert_with(|| json!(now));
            c.entry("lastTransitionTime").or_insert_with(|| json!(now));
        }
    }
}

/// `kubernetes.io/metadata.name`: always the namespace's name.
fn namespace_label(obj: &mut Map<String, Value>, name: &str) {
    let meta = obj.entry("metadata").or_insert_with(|| json!({}));
    if let Some(m) = meta.as_object_mut() {
        let labels = m.entry("labels").or_insert_with(|| json!({}));
        if !labels.is_object() {
            *labels = json!({});
        }
        labels["kubernetes.io/metadata.name"] = json!(name);
    }
}

/// What Go's typed decoding and `omitempty` make of a built-in object: a `null` value in a
/// string map (labels, annotations, a ConfigMap's `data`) is the empty string, and the empty
/// labels, annotations and finalizers of any built-in kind, and the empty `data` /
/// `binaryData` of ConfigMaps and Secrets, are not kept.
fn prune_empty(info: &ResourceInfo, obj: &mut Map<String, Value>) {
    if !builtin(info) {
        return;
    }
    let null_to_empty = |v: Option<&mut Value>| {
        for x in v
            .and_then(Value::as_object_mut)
            .into_iter()
            .flat_map(|m| m.values_mut())
        {
            if x.is_null() {
                *x = json!("");
            }
        }
    };
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        null_to_empty(m.get_mut("labels"));
        null_to_empty(m.get_mut("annotations"));
    }
    if core(info, "configmaps") {
        null_to_empty(obj.get_mut("data"));
    }
    let empty = |v: &Value| match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Null => true,
        _ => false,
    };
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in ["labels", "annotations", "finalizers"] {
            if m.get(k).is_some_and(empty) {
                m.remove(k);
            }
        }
    }
    if core(info, "configmaps") || core(info, "secrets") {
        for k in ["data", "binaryData"] {
            if obj.get(k).is_some_and(empty) {
                obj.remove(k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_reports_the_first_byte_outside_the_alphabet() {
        assert_eq!(illegal_base64_at("not base64!"), 3);
        assert_eq!(illegal_base64_at("abc"), 3);
    }

    #[test]
    fn cluster_ips_are_distinct_and_in_the_service_range() {
        let (a, b) = (allocate_cluster_ip(), allocate_cluster_ip());
        assert_ne!(a, b);
        assert!(a.starts_with("10.96."), "{a}");
    }
}
