//! What the write fuzzers share: a seeded generator, valid objects of common kinds, the
//! mutations (one field at a time), and what is compared.
// Each of the two fuzzers uses a part of this module.
#![allow(dead_code)]

use serde_json::{Value, json};

/// xorshift64*: a fixed sequence for a seed, no dependency.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn pick(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// (kind, collection path under namespace `default`, a valid object).
pub(crate) fn seeds() -> Vec<(&'static str, String, Value)> {
    let ns = |r: &str| format!("/api/v1/namespaces/default/{r}");
    let apis = |g: &str, r: &str| format!("/apis/{g}/namespaces/default/{r}");
    let container = json!({"name": "c", "image": "nginx:1", "imagePullPolicy": "IfNotPresent",
        "ports": [{"containerPort": 80, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        "env": [{"name": "A", "value": "b"}]});
    let pod_spec = json!({"containers": [container], "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30});
    let template = json!({"metadata": {"labels": {"app": "w"}}, "spec": pod_spec});
    vec![
        (
            "ConfigMap",
            ns("configmaps"),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "fz", "labels": {"a": "b"}}, "data": {"k": "v"}}),
        ),
        (
            "Secret",
            ns("secrets"),
            json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "fz"}, "type": "Opaque", "data": {"k": "dg=="}}),
        ),
        (
            "Pod",
            ns("pods"),
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "fz", "labels": {"app": "w"}}, "spec": pod_spec}),
        ),
        (
            "Deployment",
            apis("apps/v1", "deployments"),
            json!({"apiVersion": "apps/v1",
            "kind": "Deployment", "metadata": {"name": "fz"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "w"}},
                "template": template}}),
        ),
        (
            "Service",
            ns("services"),
            json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "fz"}, "spec": {"selector": {"app": "w"},
                "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]}}),
        ),
        (
            "Job",
            apis("batch/v1", "jobs"),
            json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "fz"}, "spec": {"backoffLimit": 2, "template": {
                "spec": {"containers": [{"name": "c", "image": "busybox"}],
                    "restartPolicy": "Never"}}}}),
        ),
        (
            "Role",
            apis("rbac.authorization.k8s.io/v1", "roles"),
            json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "fz"}, "rules": [{"apiGroups": [""],
                "resources": ["pods"], "verbs": ["get", "list"]}]}),
        ),
        (
            "Lease",
            apis("coordination.k8s.io/v1", "leases"),
            json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "fz"},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}}),
        ),
        (
            "StatefulSet",
            apis("apps/v1", "statefulsets"),
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "fz"},
            "spec": {"replicas": 1, "serviceName": "fz", "selector": {"matchLabels": {"app": "w"}},
                "template": template}}),
        ),
        (
            "DaemonSet",
            apis("apps/v1", "daemonsets"),
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "fz"},
            "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": template}}),
        ),
        (
            "CronJob",
            apis("batch/v1", "cronjobs"),
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "fz"},
            "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {
                "spec": {"containers": [{"name": "c", "image": "busybox"}],
                    "restartPolicy": "OnFailure"}}}}}}),
        ),
        (
            "RoleBinding",
            apis("rbac.authorization.k8s.io/v1", "rolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "fz"},
            "subjects": [{"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {"kind": "Role", "name": "fz", "apiGroup": "rbac.authorization.k8s.io"}}),
        ),
        (
            "PersistentVolumeClaim",
            ns("persistentvolumeclaims"),
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "fz"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
                "resources": {"requests": {"storage": "1Gi"}}}}),
        ),
        (
            "Ingress",
            apis("networking.k8s.io/v1", "ingresses"),
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "fz"},
            "spec": {"rules": [{"host": "a.example.com", "http": {"paths": [{"path": "/",
                "pathType": "Prefix", "backend": {"service": {"name": "s",
                    "port": {"number": 80}}}}]}}]}}),
        ),
        (
            "NetworkPolicy",
            apis("networking.k8s.io/v1", "networkpolicies"),
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "fz"}, "spec": {"podSelector": {"matchLabels": {"app": "w"}},
                "ingress": [{"ports": [{"protocol": "TCP", "port": 80}]}],
                "policyTypes": ["Ingress"]}}),
        ),
        (
            "PodDisruptionBudget",
            apis("policy/v1", "poddisruptionbudgets"),
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "fz"}, "spec": {"minAvailable": 1,
                "selector": {"matchLabels": {"app": "w"}}}}),
        ),
        (
            "HorizontalPodAutoscaler",
            apis("autoscaling/v2", "horizontalpodautoscalers"),
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "fz"}, "spec": {"scaleTargetRef": {"apiVersion": "apps/v1",
                "kind": "Deployment", "name": "w"}, "minReplicas": 1, "maxReplicas": 5,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 80}}}]}}),
        ),
        (
            "ServiceAccount",
            ns("serviceaccounts"),
            json!({"apiVersion": "v1",
            "kind": "ServiceAccount", "metadata": {"name": "fz"},
            "automountServiceAccountToken": false}),
        ),
    ]
}

/// JSON pointers of every value under `v` (not the root), objects and arrays included.
fn pointers(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{at}/{k}");
                out.push(p.clone());
                pointers(x, &p, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(x, &p, out);
            }
        }
        _ => {}
    }
}

pub(crate) const CLASSES: &[&str] = &[
    "drop",
    "wrong type",
    "out of range",
    "unknown field",
    "bad name",
    "bad label",
    "bad quantity",
];

/// One mutation: what it did, where (a JSON pointer), and the value put there (`None`: the
/// member was removed).
pub(crate) struct Mutation {
    pub(crate) what: String,
    pub(crate) pointer: String,
    pub(crate) value: Option<Value>,
}

/// Mutates `obj` by `class`; returns what it did, or `None` when the class does not apply.
pub(crate) fn mutate(obj: &mut Value, class: &str, rng: &mut Rng) -> Option<Mutation> {
    let what = mutate_in_place(obj, class, rng)?;
    let pointer = what.pointer.clone();
    let value = if class == "drop" {
        None
    } else {
        obj.pointer(&pointer).cloned()
    };
    Some(Mutation {
        what: what.what,
        pointer,
        value,
    })
}

struct Done {
    what: String,
    pointer: String,
}

fn done(what: String, pointer: String) -> Option<Done> {
    Some(Done { what, pointer })
}

fn mutate_in_place(obj: &mut Value, class: &str, rng: &mut Rng) -> Option<Done> {
    let mut ptrs = Vec::new();
    pointers(obj, "", &mut ptrs);
    ptrs.retain(|p| p != "/apiVersion" && p != "/kind");
    match class {
        "drop" => {
            let p = ptrs[rng.pick(ptrs.len())].clone();
            let (parent, key) = p.rsplit_once('/')?;
            match obj.pointer_mut(parent)? {
                Value::Object(m) => {
                    m.remove(key);
                }
                Value::Array(a) => {
                    a.remove(key.parse::<usize>().ok()?);
                }
                _ => return None,
            }
            done(format!("drop {p}"), p)
        }
        "wrong type" => {
            let p = ptrs[rng.pick(ptrs.len())].clone();
            let slot = obj.pointer_mut(&p)?;
            let swapped = match slot {
                Value::String(_) => json!(7),
                Value::Number(_) => json!("7"),
                Value::Bool(_) => json!("yes"),
                Value::Array(_) => json!({"x": 1}),
                Value::Object(_) => json!(["x"]),
                Value::Null => json!(1),
            };
            *slot = swapped.clone();
            done(format!("{p} = {swapped}"), p)
        }
        "out of range" => {
            let ints: Vec<&String> = ptrs
                .iter()
                .filter(|p| obj.pointer(p).is_some_and(Value::is_i64))
                .collect();
            let p = ints.get(rng.pick(ints.len()))?.to_string();
            let v =
                [json!(-1), json!(0), json!(99_999), json!(3_000_000_000_i64)][rng.pick(4)].clone();
            *obj.pointer_mut(&p)? = v.clone();
            done(format!("{p} = {v}"), p)
        }
        "unknown field" => {
            let objs: Vec<String> = std::iter::once(String::new())
                .chain(ptrs.iter().cloned())
                .filter(|p| obj.pointer(p).is_some_and(Value::is_object))
                .collect();
            let p = objs[rng.pick(objs.len())].clone();
            // Not under a map of free keys (labels, data, ...): a new key there is valid.
            if [
                "labels",
                "annotations",
                "data",
                "selector",
                "matchLabels",
                "requests",
                "limits",
            ]
            .iter()
            .any(|k| p.ends_with(&format!("/{k}")))
            {
                return None;
            }
            obj.pointer_mut(&p)?
                .as_object_mut()?
                .insert("fuzzUnknownField".into(), json!(1));
            done(
                format!("unknown field at {p}/"),
                format!("{p}/fuzzUnknownField"),
            )
        }
        "bad name" => {
            let long = "x".repeat(254);
            let bad = ["Fuzz_Name", "-fz", "fz.", long.as_str(), "a b", ".."][rng.pick(6)];
            obj["metadata"]["name"] = json!(bad);
            done(format!("name {bad:.20}"), "/metadata/name".into())
        }
        "bad label" => {
            let (k, v) = [("a b", "c"), ("ok", "no spaces"), ("-x", "y"), ("k", "-v")][rng.pick(4)];
            obj["metadata"]["labels"] = json!({k: v});
            done(format!("label {k}={v}"), "/metadata/labels".into())
        }
        "bad quantity" => {
            let qs: Vec<&String> = ptrs
                .iter()
                .filter(|p| p.contains("/requests/") || p.contains("/limits/"))
                .collect();
            let p = qs.get(rng.pick(qs.len()))?.to_string();
            let v = ["lots", "1Gb", "1kk", "", "--1"][rng.pick(5)];
            *obj.pointer_mut(&p)? = json!(v);
            done(format!("{p} = {v:?}"), p)
        }
        _ => None,
    }
}

/// What is compared: status, reason, sorted `field reason` of the causes.
pub(crate) fn outcome(r: &kcache_conformance::Response) -> String {
    let mut causes: Vec<String> = r.body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{} {}",
                c["field"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or("")
            )
        })
        .collect();
    causes.sort();
    let reason = if r.status < 300 {
        ""
    } else {
        r.body["reason"].as_str().unwrap_or("")
    };
    format!("{} {reason} {causes:?}", r.status)
}

/// How a difference between two [`outcome`]s is recorded for another release
/// (`kcache_conformance::skew`): as [`REPEATS`] when the status, reason and causes are the
/// same but for how often a cause repeats (releases add and drop duplicate causes, the same
/// way for every kind), else as `what: embedded OUTCOME; upstream OUTCOME`.
pub(crate) fn release_line(what: &str, ours: &str, upstream: &str) -> String {
    let distinct = |o: &str| {
        let mut causes: Vec<String> = o
            .find('[')
            .and_then(|i| serde_json::from_str(&o[i..]).ok())
            .unwrap_or_default();
        causes.dedup();
        (o.split('[').next().unwrap_or_default().to_owned(), causes)
    };
    if distinct(ours) == distinct(upstream) {
        REPEATS.to_owned()
    } else {
        format!("{what}: embedded {ours}; upstream {upstream}")
    }
}

/// The [`release_line`] of outcomes that differ only in repeated causes.
pub(crate) const REPEATS: &str =
    "the same causes, one of them repeated a different number of times";

#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) total: u32,
    pub(crate) code: u32,
    pub(crate) full: u32,
}

fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// A JSON merge patch making the object what `mutated` is at `m.pointer`: objects down to
/// the first list on the path, that whole list (merge patches replace lists), `null` for a
/// removed member.
pub(crate) fn merge_patch(mutated: &Value, m: &Mutation) -> Value {
    fn build(cur: &Value, segs: &[String]) -> Value {
        let Some((k, rest)) = segs.split_first() else {
            return cur.clone();
        };
        let inner = match cur.get(k) {
            None => Value::Null,
            Some(c) if c.is_array() || rest.is_empty() => c.clone(),
            Some(c) => build(c, rest),
        };
        let mut map = serde_json::Map::new();
        map.insert(k.clone(), inner);
        Value::Object(map)
    }
    let segs: Vec<String> = m.pointer.split('/').skip(1).map(unescape).collect();
    build(mutated, &segs)
}

/// A one-operation JSON patch doing `m` to `base`.
pub(crate) fn json_patch(base: &Value, m: &Mutation) -> Value {
    match &m.value {
        None => json!([{"op": "remove", "path": m.pointer}]),
        Some(v) if base.pointer(&m.pointer).is_some() => {
            json!([{"op": "replace", "path": m.pointer, "value": v}])
        }
        Some(v) => json!([{"op": "add", "path": m.pointer, "value": v}]),
    }
}

/// Sets (or, with `None`, removes) the member at `pointer`; `None` when its parent is
/// missing.
pub(crate) fn set_at(obj: &mut Value, pointer: &str, value: Option<Value>) -> Option<()> {
    let (parent, key) = pointer.rsplit_once('/')?;
    let key = unescape(key);
    match (obj.pointer_mut(parent)?, value) {
        (Value::Object(m), Some(v)) => {
            m.insert(key, v);
        }
        (Value::Object(m), None) => {
            m.remove(&key);
        }
        (Value::Array(a), v) => {
            let i = key.parse::<usize>().ok()?;
            match v {
                Some(v) if i < a.len() => a[i] = v,
                Some(v) => a.push(v),
                None if i < a.len() => {
                    a.remove(i);
                }
                None => return None,
            }
        }
        _ => return None,
    }
    Some(())
}

/// Prints the agreement per kind and per class; returns the totals' (status %, full %).
pub(crate) fn report(
    by_kind: &std::collections::BTreeMap<&str, Tally>,
    by_class: &std::collections::BTreeMap<&str, Tally>,
) -> (f64, f64, u32) {
    let pct = |n: u32, d: u32| f64::from(n) * 100.0 / f64::from(d.max(1));
    let mut total = Tally::default();
    for (name, t) in by_kind
        .iter()
        .map(|(k, t)| (("kind", *k), t))
        .chain(by_class.iter().map(|(k, t)| (("class", *k), t)))
    {
        eprintln!(
            "{:5} {:22} {:5} requests: status {:5.1}%, status+reason+causes {:5.1}%",
            name.0,
            name.1,
            t.total,
            pct(t.code, t.total),
            pct(t.full, t.total)
        );
        if name.0 == "kind" {
            total.total += t.total;
            total.code += t.code;
            total.full += t.full;
        }
    }
    (
        pct(total.code, total.total),
        pct(total.full, total.total),
        total.total,
    )
}
