//! A seeded differential fuzzer of writes: valid objects of common kinds, mutated one field at a
//! time (dropped, wrong JSON type, out of range, an unknown field at some depth, a bad name,
//! label or quantity), each sent as a dry-run create with `fieldValidation=Strict` to the
//! embedded server and to kube-apiserver v1.36.5 (`KCACHE_UPSTREAM_KUBECONFIG`, started by
//! `scripts/kube-up.sh`). Compared: status code, reason, and the causes' fields and reasons.
//! Prints the agreement per kind and per mutation class, and fails below the floors measured
//! when it was written (so a regression shows; raise them as checks land).
//!
//! `KCACHE_FUZZ_SEED` and `KCACHE_FUZZ_COUNT` (default 400) change the sample; every
//! disagreement is printed with the mutated body.

use std::collections::BTreeMap;

use kcache_conformance::{Target, upstream_kubeconfig};
use serde_json::{Value, json};

/// xorshift64*: a fixed sequence for a seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn pick(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// (kind, collection path under namespace `default`, a valid object).
fn seeds() -> Vec<(&'static str, String, Value)> {
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

const CLASSES: &[&str] = &[
    "drop",
    "wrong type",
    "out of range",
    "unknown field",
    "bad name",
    "bad label",
    "bad quantity",
];

/// Mutates `obj` by `class`; returns a description, or `None` when the class does not apply.
fn mutate(obj: &mut Value, class: &str, rng: &mut Rng) -> Option<String> {
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
            Some(format!("drop {p}"))
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
            Some(format!("{p} = {swapped}"))
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
            Some(format!("{p} = {v}"))
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
            Some(format!("unknown field at {p}/"))
        }
        "bad name" => {
            let long = "x".repeat(254);
            let bad = ["Fuzz_Name", "-fz", "fz.", long.as_str(), "a b", ".."][rng.pick(6)];
            obj["metadata"]["name"] = json!(bad);
            Some(format!("name {bad:.20}"))
        }
        "bad label" => {
            let (k, v) = [("a b", "c"), ("ok", "no spaces"), ("-x", "y"), ("k", "-v")][rng.pick(4)];
            obj["metadata"]["labels"] = json!({k: v});
            Some(format!("label {k}={v}"))
        }
        "bad quantity" => {
            let qs: Vec<&String> = ptrs
                .iter()
                .filter(|p| p.contains("/requests/") || p.contains("/limits/"))
                .collect();
            let p = qs.get(rng.pick(qs.len()))?.to_string();
            let v = ["lots", "1Gb", "1kk", "", "--1"][rng.pick(5)];
            *obj.pointer_mut(&p)? = json!(v);
            Some(format!("{p} = {v:?}"))
        }
        _ => None,
    }
}

/// What is compared: status, reason, sorted `field reason` of the causes.
fn outcome(r: &kcache_conformance::Response) -> String {
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

#[derive(Default)]
struct Tally {
    total: u32,
    code: u32,
    full: u32,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_writes_are_answered_as_kube_apiserver_answers_them() -> anyhow::Result<()> {
    let Some(upstream_cfg) = upstream_kubeconfig("the decoding fuzzer") else {
        return Ok(());
    };
    let embedded = kcache_apiserver::ApiServer::builder().start().await?;
    let dir = std::env::temp_dir().join(format!("kcache-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let embedded_cfg = dir.join("embedded.kubeconfig");
    embedded.write_kubeconfig(&embedded_cfg)?;
    let ours = Target::from_kubeconfig(&embedded_cfg).await?;
    let theirs = Target::from_kubeconfig(&upstream_cfg).await?;

    let seed = std::env::var("KCACHE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(47);
    let count: usize = std::env::var("KCACHE_FUZZ_COUNT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(400);
    let mut rng = Rng(seed ^ 0x9E37_79B9_7F4A_7C15);
    let seeds = seeds();
    let mut by_kind: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut by_class: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut sent = 0;
    while sent < count {
        let (kind, path, base) = &seeds[rng.pick(seeds.len())];
        let class = CLASSES[rng.pick(CLASSES.len())];
        let mut obj = base.clone();
        let Some(what) = mutate(&mut obj, class, &mut rng) else {
            continue;
        };
        sent += 1;
        let url = format!("{path}?dryRun=All&fieldValidation=Strict");
        let a = ours.send("POST", &url, Some(obj.clone())).await?;
        let b = theirs.send("POST", &url, Some(obj.clone())).await?;
        let (oa, ob) = (outcome(&a), outcome(&b));
        for t in [
            by_kind.entry(kind).or_default(),
            by_class.entry(class).or_default(),
        ] {
            t.total += 1;
            t.code += u32::from(a.status == b.status);
            t.full += u32::from(oa == ob);
        }
        if oa != ob {
            eprintln!(
                "DIFF {kind} {what}\n  embedded: {oa}\n  upstream: {ob}\n  upstream message: {}",
                b.body["message"].as_str().unwrap_or("")
            );
        }
    }
    embedded.shutdown().await;
    let pct = |n: u32, d: u32| f64::from(n) * 100.0 / f64::from(d.max(1));
    let mut total = Tally::default();
    for (name, t) in by_kind
        .iter()
        .map(|(k, t)| (("kind", *k), t))
        .chain(by_class.iter().map(|(k, t)| (("class", *k), t)))
    {
        eprintln!(
            "{:5} {:15} {:4} requests: status {:5.1}%, status+reason+causes {:5.1}%",
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
    let (code, full) = (pct(total.code, total.total), pct(total.full, total.total));
    eprintln!(
        "seed {seed}: {} requests, status {code:.1}%, status+reason+causes {full:.1}%",
        total.total
    );
    assert!(
        code >= FLOOR_STATUS && full >= FLOOR_FULL,
        "agreement fell below the floors ({FLOOR_STATUS}% / {FLOOR_FULL}%): {code:.1}% / {full:.1}%"
    );
    Ok(())
}

/// The agreement measured with the default seed and count (400 requests) on 2026-12-07:
/// status 99.2%, status + reason + causes 96.5% (3,000 requests: 99.4% / 97.4%). The rest:
/// checks not implemented yet (the labels a Job derives from an invalid name, numeric
/// `targetPort` strings, env names, requests above limits, a Deployment without selector
/// also reported as not matching its template).
const FLOOR_STATUS: f64 = 99.0;
const FLOOR_FULL: f64 = 96.0;
