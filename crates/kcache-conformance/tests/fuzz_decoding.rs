//! A seeded differential fuzzer of writes: valid objects of common kinds, mutated one field at a
//! time (dropped, wrong JSON type, out of range, an unknown field at some depth, a bad name,
//! label or quantity), each sent as a dry-run create with `fieldValidation=Strict` to the
//! embedded server and to kube-apiserver v1.36.5 (`KCACHE_UPSTREAM_KUBECONFIG`, started by
//! `scripts/kube-up.sh`). Compared: status code, reason, and the causes' fields and reasons.
//! Prints the agreement per kind and per mutation class, and fails below the floors measured
//! when it was written (so a regression shows; raise them as checks land). Against another
//! release the default sample's differences must be the ones [`RELEASES`] records for it
//! (`kcache_conformance::skew`).
//!
//! `KCACHE_FUZZ_SEED` and `KCACHE_FUZZ_COUNT` (default 400) change the sample; every
//! disagreement is printed with the mutated body.

mod fuzz;

use std::collections::{BTreeMap, BTreeSet};

use fuzz::{CLASSES, Rng, Tally, mutate, outcome, report, seeds};
use kcache_conformance::skew::{self, Recorded};
use kcache_conformance::{Target, upstream_kubeconfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_writes_are_answered_as_kube_apiserver_answers_them() -> anyhow::Result<()> {
    let Some(upstream_cfg) = upstream_kubeconfig("the decoding fuzzer") else {
        return Ok(());
    };
    let embedded = kcache_apiserver::ApiServer::builder()
        .build()
        .start()
        .await?;
    let dir = std::env::temp_dir().join(format!("kcache-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let embedded_cfg = dir.join("embedded.kubeconfig");
    embedded.write_kubeconfig(&embedded_cfg)?;
    let ours = Target::from_kubeconfig(&embedded_cfg).await?;
    let theirs = Target::from_kubeconfig(&upstream_cfg).await?;

    let minor = skew::minor(&theirs).await?;
    let seed = std::env::var("KCACHE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED);
    let count: usize = std::env::var("KCACHE_FUZZ_COUNT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_COUNT);
    let mut rng = Rng(seed ^ 0x9E37_79B9_7F4A_7C15);
    let seeds = seeds();
    let mut by_kind: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut by_class: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut differences = BTreeSet::new();
    let mut sent = 0;
    while sent < count {
        let (kind, path, base) = &seeds[rng.pick(seeds.len())];
        let class = CLASSES[rng.pick(CLASSES.len())];
        let mut obj = base.clone();
        let Some(what) = mutate(&mut obj, class, &mut rng).map(|m| m.what) else {
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
            differences.insert(fuzz::release_line(kind, &oa, &ob));
            eprintln!(
                "DIFF {kind} {what}\n  embedded: {oa}\n  upstream: {ob}\n  upstream message: {}",
                b.body["message"].as_str().unwrap_or("")
            );
        }
    }
    embedded.shutdown().await;
    let (code, full, total) = report(&by_kind, &by_class);
    eprintln!("seed {seed}: {total} requests, status {code:.1}%, status+reason+causes {full:.1}%");
    if minor != skew::MODEL_MINOR && (seed, count) == (DEFAULT_SEED, DEFAULT_COUNT) {
        // Another release: the default sample's differences must be the recorded ones.
        if let Err(e) = skew::check("the decoding fuzzer", minor, &differences, RELEASES) {
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
const DEFAULT_COUNT: usize = 400;

/// What other releases answer differently in the default sample (seed 47, 400 requests).
const RELEASES: &[Recorded] = &[
    Recorded {
        releases: &[34, 35],
        line: r#"HorizontalPodAutoscaler: embedded 422 Invalid ["spec.maxReplicas FieldValueInvalid", "spec.maxReplicas FieldValueRequired"]; upstream 422 Invalid ["spec.maxReplicas FieldValueInvalid", "spec.maxReplicas FieldValueInvalid"]"#,
        why: "1.34 and 1.35 word a maxReplicas of 0 as invalid twice (must be greater than 0, \
              and than minReplicas) where 1.36 says invalid and required",
    },
    Recorded {
        releases: &[37],
        line: fuzz::REPEATS,
        why: "1.37 gives one cause where 1.36 repeated it: the pod template labels a bad Job \
              name makes, a metric without a type",
    },
    Recorded {
        releases: &[37],
        line: r#"HorizontalPodAutoscaler: embedded 422 Invalid ["spec.metrics FieldValueForbidden", "spec.minReplicas FieldValueInvalid"]; upstream 422 Invalid ["spec.metrics FieldValueForbidden"]"#,
        why: "HPAScaleToZero is on by default from 1.37: minReplicas 0 is allowed, with an \
              Object or External metric",
    },
];

/// The agreement measured with the default seed and count (400 requests) on 2026-12-07,
/// over 18 kinds: status 100%, status + reason + causes 100% (also at 3,000 requests with
/// seeds 1, 2, 3 and 47, and 20,000 with seed 47). Before the checks of HorizontalPodAutoscaler,
/// Ingress, NetworkPolicy, binding subjects, CronJob, Job labels, PodDisruptionBudget names,
/// PVCs, env names, requests above limits and named ports: 95.8% / 94.2%.
const FLOOR_STATUS: f64 = 100.0;
const FLOOR_FULL: f64 = 100.0;
