//! A seeded differential fuzzer of changes to stored objects: each sample creates a valid
//! object of a common kind on the embedded server and on kube-apiserver v1.36.5
//! (`KCACHE_UPSTREAM_KUBECONFIG`, started by `scripts/kube-up.sh`), then changes it once —
//! an update (PUT) of a field the server keeps immutable, an update with one field mutated
//! (as the decoding fuzzer mutates: dropped, wrong type, out of range, unknown field, bad
//! label or quantity), or the same mutation sent as a JSON merge patch, a strategic merge
//! patch or a JSON patch — with `fieldValidation=Strict`. Compared: status code, reason, the
//! causes' fields and reasons, and, where both accepted the change, the stored object
//! (status, managed fields, what a server allocates and uid-valued labels left out). A
//! strategic merge patch kube-apiserver fails with a 500 and the embedded server refuses
//! with a 4xx counts as agreeing (a documented difference, DIFFERENCES.md). Prints the
//! agreement per kind and per class, and fails below the floors last measured.
//!
//! `KCACHE_FUZZ_SEED` and `KCACHE_FUZZ_UPDATES` (default 150) change the sample; every
//! disagreement is printed with the change sent.

mod fuzz;

use std::collections::{BTreeMap, BTreeSet};

use fuzz::{
    CLASSES, Mutation, Rng, Tally, json_patch, merge_patch, mutate, outcome, report, seeds, set_at,
};
use kcache_conformance::skew::{self, Recorded};
use kcache_conformance::{Response, Target, normalise, upstream_kubeconfig};
use serde_json::{Value, json};

const UPDATE_CLASSES: &[&str] = &[
    "immutable change",
    "update",
    "merge patch",
    "strategic merge patch",
    "json patch",
];

/// Fields each kind keeps immutable once stored (pointer, new value). ConfigMaps and Secrets
/// are created with `immutable: true` for this class.
fn immutable(kind: &str) -> &'static [(&'static str, &'static str)] {
    match kind {
        "ConfigMap" | "Secret" => &[("/data/k", r#""eA==""#), ("/immutable", "false")],
        "Pod" => &[
            ("/spec/containers/0/name", r#""d""#),
            ("/spec/restartPolicy", r#""Never""#),
            ("/spec/containers/0/ports/0/containerPort", "81"),
        ],
        "Deployment" | "StatefulSet" | "DaemonSet" => &[
            ("/spec/selector/matchLabels/app", r#""other""#),
            ("/spec/selector/matchLabels/extra", r#""x""#),
        ],
        // Outside both service ranges (the harness's 10.0.0.0/24, the embedded server's
        // 10.96.0.0/12), so never the address a server allocated the Service: a change to
        // that would be no change (200), as kube-apiserver 1.37 once answered.
        "Service" => &[("/spec/clusterIP", r#""10.0.1.123""#)],
        "Job" => &[
            ("/spec/template/spec/containers/0/image", r#""busybox:2""#),
            ("/spec/completions", "3"),
        ],
        "RoleBinding" => &[("/roleRef/name", r#""other""#)],
        "PersistentVolumeClaim" => &[
            ("/spec/accessModes/0", r#""ReadOnlyMany""#),
            ("/spec/storageClassName", r#""other""#),
        ],
        _ => &[("/metadata/name", r#""renamed""#)],
    }
}

/// The object as a server stored it, without what legitimately differs between servers.
fn stored(r: &Response) -> String {
    let mut v = r.body.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "managedFields",
            "uid",
            "resourceVersion",
            "creationTimestamp",
        ] {
            m.remove(k);
        }
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    for p in ["/spec/clusterIP", "/spec/clusterIPs"] {
        let _ = set_at(&mut v, p, None);
    }
    without_uids(&mut v);
    normalise(&v.to_string())
}

/// Labels whose value is the object's uid (a Job's generated selector and pod labels) differ
/// between servers as the uid does.
fn without_uids(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k.ends_with("controller-uid") && x.is_string() {
                    *x = json!("UID");
                } else {
                    without_uids(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(without_uids),
        _ => {}
    }
}

/// A documented difference (DIFFERENCES.md): kube-apiserver answers 500 to a strategic merge
/// patch whose list item lacks its merge key (a server error, not a verdict on the object);
/// the embedded server answers as for any invalid object, with a 4xx.
fn documented(class: &str, embedded: &Response, upstream: &Response) -> bool {
    class == "strategic merge patch"
        && upstream.status == 500
        && (400..500).contains(&embedded.status)
}

async fn send_patch(t: &Target, path: &str, ct: &str, patch: &Value) -> anyhow::Result<Response> {
    t.send_raw("PATCH", path, Some(ct), Some(serde_json::to_vec(patch)?))
        .await
}

/// The change of `class` to the object stored as `created` on one server.
async fn change(
    t: &Target,
    url: &str,
    class: &str,
    created: &Value,
    sent: &Value,
    m: &Mutation,
    mutated_seed: &Value,
) -> anyhow::Result<Response> {
    let q = "?fieldValidation=Strict";
    match class {
        "immutable change" | "update" => {
            let mut body = created.clone();
            if set_at(&mut body, &m.pointer, m.value.clone()).is_none() {
                anyhow::bail!("{} has no parent in the stored object", m.pointer);
            }
            t.send("PUT", &format!("{url}{q}"), Some(body)).await
        }
        "merge patch" => {
            let p = merge_patch(mutated_seed, m);
            send_patch(t, &format!("{url}{q}"), "application/merge-patch+json", &p).await
        }
        "strategic merge patch" => {
            let p = merge_patch(mutated_seed, m);
            let ct = "application/strategic-merge-patch+json";
            send_patch(t, &format!("{url}{q}"), ct, &p).await
        }
        _ => {
            let p = json_patch(sent, m);
            send_patch(t, &format!("{url}{q}"), "application/json-patch+json", &p).await
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_to_stored_objects_are_answered_as_kube_apiserver_answers_them()
-> anyhow::Result<()> {
    let Some(upstream_cfg) = upstream_kubeconfig("the update fuzzer") else {
        return Ok(());
    };
    let embedded = kcache_apiserver::ApiServer::builder()
        .build()
        .start()
        .await?;
    let dir = std::env::temp_dir().join(format!("kcache-fuzz-updates-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let embedded_cfg = dir.join("embedded.kubeconfig");
    embedded.write_kubeconfig(&embedded_cfg)?;
    let targets = [
        Target::from_kubeconfig(&embedded_cfg).await?,
        Target::from_kubeconfig(&upstream_cfg).await?,
    ];
    let minor = skew::minor(&targets[1]).await?;
    let seed = std::env::var("KCACHE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED);
    let count: usize = std::env::var("KCACHE_FUZZ_UPDATES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_COUNT);
    let mut differences = BTreeSet::new();
    let mut rng = Rng(seed ^ 0x5851_F42D_4C95_7F2D);
    let seeds = seeds();
    let (mut by_kind, mut by_class) = (BTreeMap::new(), BTreeMap::new());
    let (mut stored_total, mut stored_same) = (0u32, 0u32);
    let mut sent = 0;
    while sent < count {
        let (kind, path, base) = &seeds[rng.pick(seeds.len())];
        let class = UPDATE_CLASSES[rng.pick(UPDATE_CLASSES.len())];
        let mut obj = base.clone();
        let name = format!("fu-{}-{sent}", std::process::id());
        obj["metadata"]["name"] = json!(name);
        let m = if class == "immutable change" {
            let table = immutable(kind);
            let (pointer, value) = table[rng.pick(table.len())];
            if kind == &"ConfigMap" || kind == &"Secret" {
                obj["immutable"] = json!(true);
            }
            Mutation {
                what: format!("{pointer} = {value}"),
                pointer: pointer.to_owned(),
                value: Some(serde_json::from_str(value)?),
            }
        } else {
            let inner = CLASSES[rng.pick(CLASSES.len())];
            if inner == "bad name" {
                continue;
            }
            let mut probe = obj.clone();
            match mutate(&mut probe, inner, &mut rng) {
                Some(m) => m,
                None => continue,
            }
        };
        let mut mutated_seed = obj.clone();
        if set_at(&mut mutated_seed, &m.pointer, m.value.clone()).is_none() {
            continue;
        }
        sent += 1;
        let url = format!("{path}/{name}");
        let mut answers = Vec::new();
        for t in &targets {
            let created = t.send("POST", path, Some(obj.clone())).await?;
            anyhow::ensure!(
                created.status == 201,
                "creating the valid {kind} failed: {}",
                outcome(&created)
            );
            answers.push(change(t, &url, class, &created.body, &obj, &m, &mutated_seed).await?);
            t.send("DELETE", &format!("{url}?gracePeriodSeconds=0"), None)
                .await?;
        }
        let (a, b) = (&answers[0], &answers[1]);
        let (oa, ob) = if documented(class, a, b) {
            (String::from("documented"), String::from("documented"))
        } else {
            (outcome(a), outcome(b))
        };
        let both_stored = a.status < 300 && b.status < 300;
        let same_stored = !both_stored || stored(a) == stored(b);
        for t in [
            by_kind.entry(*kind).or_insert_with(Tally::default),
            by_class.entry(class).or_insert_with(Tally::default),
        ] {
            t.total += 1;
            t.code += u32::from(a.status == b.status || oa == "documented");
            t.full += u32::from(oa == ob && same_stored);
        }
        if both_stored {
            stored_total += 1;
            stored_same += u32::from(same_stored);
        }
        if oa != ob || !same_stored {
            differences.insert(if same_stored {
                fuzz::release_line(&format!("{kind} {class}"), &oa, &ob)
            } else {
                format!("{kind} {class}: embedded {oa}; upstream {ob}; stored objects differ")
            });
            eprintln!(
                "DIFF {kind} {class}: {}\n  embedded: {oa}\n  upstream: {ob}\n  upstream message: {}",
                m.what,
                b.body["message"].as_str().unwrap_or("")
            );
            if !same_stored {
                eprintln!(
                    "  embedded stored: {}\n  upstream stored: {}",
                    stored(a),
                    stored(b)
                );
            }
        }
    }
    embedded.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    let (code, full, total) = report(&by_kind, &by_class);
    eprintln!(
        "seed {seed}: {total} changes, status {code:.1}%, status+reason+causes+stored object {full:.1}% \
         (stored objects compared: {stored_same} of {stored_total} equal)"
    );
    assert!(
        by_class.len() == UPDATE_CLASSES.len(),
        "not every class ran: {:?}",
        by_class.keys()
    );
    if minor != skew::MODEL_MINOR && (seed, count) == (DEFAULT_SEED, DEFAULT_COUNT) {
        // Another release: the default sample's differences must be the recorded ones.
        if let Err(e) = skew::check("the update fuzzer", minor, &differences, RELEASES) {
            panic!("{e}");
        }
        return Ok(());
    }
    assert!(
        code >= FLOOR_STATUS && full >= FLOOR_FULL,
        "agreement fell below the floors ({FLOOR_STATUS}% / {FLOOR_FULL}%): {code:.1}% / {full:.1}%"
    );
    Ok(())
}

const DEFAULT_SEED: u64 = 47;
const DEFAULT_COUNT: usize = 150;

/// What other releases answer differently in the default sample (seed 47, 150 changes), as
/// `kind class: embedded OUTCOME; upstream OUTCOME` (`kcache_conformance::skew`).
const RELEASES: &[Recorded] = &[
    Recorded {
        releases: &[34, 35, 37],
        line: fuzz::REPEATS,
        why: "1.34 and 1.35 repeat some causes 1.36 gives once (a NetworkPolicy port out of \
              range, an invalid label of a NetworkPolicy or, on 1.34, an RBAC object, a \
              RoleBinding's roleRef); 1.37 gives once what 1.36 repeats (an invalid label: one \
              cause, not three or four; a Job without spec; an HPA metric without a type)",
    },
    Recorded {
        releases: &[37],
        line: r#"StatefulSet immutable change: embedded 422 Invalid ["spec FieldValueForbidden", "spec.template.metadata.labels FieldValueInvalid"]; upstream 422 Invalid ["spec.selector FieldValueInvalid", "spec.template.metadata.labels FieldValueInvalid"]"#,
        why: "1.37 refuses a changed StatefulSet selector as `spec.selector: field is \
              immutable`; 1.36 as a spec field outside those an update may change",
    },
    Recorded {
        releases: &[37],
        line: r#"StatefulSet merge patch: embedded 200  []; upstream 200  []; stored objects differ"#,
        why: "MaxUnavailableStatefulSet is on by default from 1.37: the stored rollingUpdate \
              has maxUnavailable 1",
    },
];

/// The agreement measured with the default seed and count (150 changes) on 2026-12-07:
/// status 100.0%, status + reason + causes + stored object 100.0% (at 2,000 changes: 100.0% /
/// 98.7%; seeds 1–3 at 150: 100% status, 97.3–98.0% in full). What still differs at 2,000:
/// stored objects where Go's encoding drops or keeps an empty value by field (`omitempty`:
/// an emptied selector or list dropped, an emptied `spec` struct kept, a Role's `rules`
/// written as `null`), pods' defaults and admission-added fields kcache does not write
/// (`enableServiceLinks`, `priority`, `preemptionPolicy`, ...), and a strategic merge patch
/// of an int32 beyond its range, which kube-apiserver wraps around (3000000000 becomes
/// -1294967296) and the embedded server refuses on the field `patch`.
const FLOOR_STATUS: f64 = 100.0;
const FLOOR_FULL: f64 = 100.0;
