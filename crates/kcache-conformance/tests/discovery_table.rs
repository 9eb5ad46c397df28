//! The resource table kcache-apiserver serves is generated from kube-apiserver's own
//! discovery: `crates/kcache-apiserver/data/discovery-v1.36.5.json` holds the upstream server's
//! `/api`, `/api/v1`, `/apis` and `/apis/<group>/<version>` documents (groups and versions in
//! upstream order, every resource and subresource with its verbs, short names, categories,
//! kinds and storage version hash), plus two facts of the registry strategies read from the
//! Go sources of `k8s.io/kubernetes` v1.36.5 (which kinds keep `metadata.generation`, which
//! refuse an update without a resourceVersion).
//!
//! - `the_checked_in_table_is_upstream_discovery` (upstream-only) fetches the documents from
//!   the running kube-apiserver and requires the data file to hold exactly them. With
//!   `KCACHE_REGEN_DISCOVERY=1` it (re)writes the file instead, also rescanning the strategies
//!   in `$(go env GOMODCACHE)/k8s.io/kubernetes@v1.36.5/pkg/registry` (and the apiextensions and
//!   aggregator registries).
//! - `served_resources_against_upstream_discovery` (upstream-only) compares what the embedded
//!   server's discovery lists with the upstream server's, group by group, prints the counts and
//!   requires every served resource to be described as upstream describes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kcache_conformance::skew::{self, Recorded};
use kcache_conformance::{Target, upstream_kubeconfig};
use serde_json::{Map, Value, json};

fn data_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kcache-apiserver/data/discovery-v1.36.5.json")
}

async fn get(t: &Target, path: &str) -> anyhow::Result<Value> {
    let r = t.send("GET", path, None).await?;
    anyhow::ensure!(r.status == 200, "GET {path}: {}", r.status);
    Ok(r.body)
}

/// The discovery documents of a server, in the data file's form.
async fn discovery(t: &Target) -> anyhow::Result<Vec<Value>> {
    let mut groups = Vec::new();
    let api = get(t, "/api").await?;
    let core_versions: Vec<String> = api["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    let mut versions = Vec::new();
    for v in &core_versions {
        let list = get(t, &format!("/api/{v}")).await?;
        versions.push(json!({"version": v, "resources": list["resources"]}));
    }
    groups
        .push(json!({"name": "", "preferredVersion": core_versions.first(), "versions": versions}));
    // Groups served by CustomResourceDefinitions are not kube-apiserver's own: other tests of
    // the suite register CRDs on the same server (the operator benchmark's Teams, for one).
    let crds = get(t, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions").await?;
    let crd_groups: BTreeSet<&str> = crds["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["spec"]["group"].as_str())
        .collect();
    let apis = get(t, "/apis").await?;
    for g in apis["groups"].as_array().into_iter().flatten() {
        let name = g["name"].as_str().unwrap_or_default();
        if crd_groups.contains(name) {
            continue;
        }
        let mut versions = Vec::new();
        for v in g["versions"].as_array().into_iter().flatten() {
            let version = v["version"].as_str().unwrap_or_default();
            let list = get(t, &format!("/apis/{name}/{version}")).await?;
            versions.push(json!({"version": version, "resources": list["resources"]}));
        }
        groups.push(json!({
            "name": name,
            "preferredVersion": g["preferredVersion"]["version"],
            "versions": versions,
        }));
    }
    Ok(groups)
}

/// `(registry directory's first group label, kind directory)` → the strategy facts, scanned
/// from the Go sources.
fn scan_strategies() -> anyhow::Result<BTreeMap<(String, String), (bool, bool)>> {
    let out = std::process::Command::new("go")
        .args(["env", "GOMODCACHE"])
        .output()?;
    let cache = PathBuf::from(String::from_utf8(out.stdout)?.trim());
    let roots = [
        (cache.join("k8s.io/kubernetes@v1.36.5/pkg/registry"), None),
        (
            cache.join("k8s.io/apiextensions-apiserver@v0.36.5/pkg/registry"),
            Some("apiextensions"),
        ),
        (
            cache.join("k8s.io/kube-aggregator@v0.36.5/pkg/registry"),
            Some("apiregistration"),
        ),
    ];
    let mut facts = BTreeMap::new();
    for (root, fixed_group) in roots {
        anyhow::ensure!(root.is_dir(), "{} is missing", root.display());
        let group_dirs: Vec<(String, PathBuf)> = match fixed_group {
            Some(g) => vec![(g.to_owned(), root.clone())],
            None => std::fs::read_dir(&root)?
                .filter_map(Result::ok)
                .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                .collect(),
        };
        for (group, dir) in group_dirs {
            let Ok(kinds) = std::fs::read_dir(&dir) else {
                continue;
            };
            for kind in kinds.filter_map(Result::ok) {
                let Ok(src) = std::fs::read_to_string(kind.path().join("strategy.go")) else {
                    continue;
                };
                let generation = src.contains("Generation = 1");
                let conditional = src
                    .split("AllowUnconditionalUpdate() bool {")
                    .skip(1)
                    .any(|rest| rest.trim_start().starts_with("return false"));
                let name = kind.file_name().to_string_lossy().into_owned();
                let name = if name == "customresourcedefinition" || name == "apiservice" {
                    name
                } else {
                    name.replace('-', "")
                };
                facts.insert((group.clone(), name), (generation, conditional));
            }
        }
    }
    Ok(facts)
}

fn strategies(groups: &[Value]) -> anyhow::Result<Value> {
    let facts = scan_strategies()?;
    let mut generation = BTreeSet::new();
    let mut conditional = BTreeSet::new();
    for g in groups {
        let group = g["name"].as_str().unwrap_or_default();
        let dir = if group.is_empty() {
            "core"
        } else {
            group.split('.').next().unwrap_or_default()
        };
        for v in g["versions"].as_array().into_iter().flatten() {
            for r in v["resources"].as_array().into_iter().flatten() {
                let name = r["name"].as_str().unwrap_or_default();
                if name.contains('/') {
                    continue;
                }
                let singular = r["singularName"].as_str().unwrap_or_default();
                let qualified = if group.is_empty() {
                    name.to_owned()
                } else {
                    format!("{name}.{group}")
                };
                if let Some((gen_, cond)) = facts.get(&(dir.to_owned(), singular.to_owned())) {
                    if *gen_ {
                        generation.insert(qualified.clone());
                    }
                    if *cond {
                        conditional.insert(qualified);
                    }
                }
            }
        }
    }
    Ok(json!({"tracksGeneration": generation, "conditionalUpdateOnly": conditional}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checked_in_table_is_upstream_discovery() -> anyhow::Result<()> {
    let Some(cfg) = upstream_kubeconfig("the discovery table check") else {
        return Ok(());
    };
    let upstream = Target::from_kubeconfig(&cfg).await?;
    let groups = discovery(&upstream).await?;
    if std::env::var("KCACHE_REGEN_DISCOVERY").is_ok_and(|v| v == "1") {
        let version = get(&upstream, "/version").await?;
        let doc = json!({
            "source": format!(
                "kube-apiserver {} discovery (/api, /api/<v>, /apis, /apis/<g>/<v>), \
                 written by crates/kcache-conformance/tests/discovery_table.rs with \
                 KCACHE_REGEN_DISCOVERY=1; strategies scanned from the Go registry sources",
                version["gitVersion"].as_str().unwrap_or("?")
            ),
            "groups": groups,
            "strategies": strategies(&groups)?,
        });
        let mut text = serde_json::to_string_pretty(&doc)?;
        text.push('\n');
        std::fs::write(data_file(), text)?;
        eprintln!("wrote {}", data_file().display());
        return Ok(());
    }
    let checked_in: Value = serde_json::from_str(&std::fs::read_to_string(data_file())?)?;
    let minor = skew::minor(&upstream).await?;
    if minor == skew::MODEL_MINOR {
        assert_eq!(
            checked_in["groups"],
            Value::Array(groups),
            "the upstream discovery changed: regenerate {} with KCACHE_REGEN_DISCOVERY=1",
            data_file().display()
        );
        return Ok(());
    }
    let table = by_name(
        checked_in["groups"]
            .as_array()
            .map_or(&[][..], Vec::as_slice),
    );
    let found = entry_differences(&table, &by_name(&groups));
    if let Err(e) = skew::check("the discovery table", minor, &found, RELEASES) {
        panic!("{e}");
    }
    Ok(())
}

/// What other releases serve differently from the table (v1.36.5's discovery), by
/// [`entry_differences`]' lines; the embedded server serves the table, so
/// `served_resources_against_upstream_discovery` sees the same minus what it does not serve.
const RELEASES: &[Recorded] = &[
    Recorded {
        releases: &[34],
        line: "resource.k8s.io/v1 deviceclasses: storageVersionHash differ",
        why: "1.34 stores the resource.k8s.io kinds at another version (their storage version hashes differ)",
    },
    Recorded {
        releases: &[34],
        line: "resource.k8s.io/v1 resourceclaims: storageVersionHash differ",
        why: "as deviceclasses",
    },
    Recorded {
        releases: &[34],
        line: "resource.k8s.io/v1 resourceclaimtemplates: storageVersionHash differ",
        why: "as deviceclasses",
    },
    Recorded {
        releases: &[34],
        line: "resource.k8s.io/v1 resourceslices: storageVersionHash differ",
        why: "as deviceclasses",
    },
    Recorded {
        releases: &[34, 35],
        line: "admissionregistration.k8s.io/v1 mutatingadmissionpolicies: served by kcache-apiserver, not upstream",
        why: "MutatingAdmissionPolicy is served in admissionregistration.k8s.io/v1 from 1.36",
    },
    Recorded {
        releases: &[34, 35],
        line: "admissionregistration.k8s.io/v1 mutatingadmissionpolicybindings: served by kcache-apiserver, not upstream",
        why: "as mutatingadmissionpolicies",
    },
    Recorded {
        releases: &[34, 35],
        line: "storage.k8s.io/v1 volumeattributesclasses: storageVersionHash differ",
        why: "1.34 and 1.35 store VolumeAttributesClass at another version (its storage version hash differs)",
    },
    Recorded {
        releases: &[37],
        line: "admissionregistration.k8s.io/v1 mutatingadmissionpolicies: storageVersionHash differ",
        why: "1.37 stores MutatingAdmissionPolicy at another version (its storage version hash changed)",
    },
    Recorded {
        releases: &[37],
        line: "admissionregistration.k8s.io/v1 mutatingadmissionpolicybindings: storageVersionHash differ",
        why: "as mutatingadmissionpolicies",
    },
    Recorded {
        releases: &[37],
        line: "certificates.k8s.io/v1 clustertrustbundles: served upstream, not by kcache-apiserver",
        why: "ClusterTrustBundle is served in certificates.k8s.io/v1 from 1.37",
    },
    Recorded {
        releases: &[37],
        line: "certificates.k8s.io/v1 podcertificaterequests: served upstream, not by kcache-apiserver",
        why: "PodCertificateRequest is served in certificates.k8s.io/v1 from 1.37",
    },
    Recorded {
        releases: &[37],
        line: "certificates.k8s.io/v1 podcertificaterequests/status: served upstream, not by kcache-apiserver",
        why: "as podcertificaterequests",
    },
    Recorded {
        releases: &[37],
        line: "resource.k8s.io/v1 devicetaintrules: served upstream, not by kcache-apiserver",
        why: "DeviceTaintRule is served in resource.k8s.io/v1 from 1.37",
    },
    Recorded {
        releases: &[37],
        line: "resource.k8s.io/v1 devicetaintrules/status: served upstream, not by kcache-apiserver",
        why: "as devicetaintrules",
    },
    Recorded {
        releases: &[37],
        line: "storage.k8s.io/v1 csinodes/status: served upstream, not by kcache-apiserver",
        why: "1.37 serves a status subresource for CSINode",
    },
    Recorded {
        releases: &[37],
        line: "storagemigration.k8s.io/v1 storageversionmigrations: served upstream, not by kcache-apiserver",
        why: "StorageVersionMigration is served in storagemigration.k8s.io/v1 from 1.37",
    },
    Recorded {
        releases: &[37],
        line: "storagemigration.k8s.io/v1 storageversionmigrations/status: served upstream, not by kcache-apiserver",
        why: "as storageversionmigrations",
    },
];

/// The differences between two servers' discovery, entry by entry: a resource only one side
/// serves, or the fields whose values differ.
fn entry_differences(
    ours: &BTreeMap<String, BTreeMap<String, Map<String, Value>>>,
    upstream: &BTreeMap<String, BTreeMap<String, Map<String, Value>>>,
) -> BTreeSet<String> {
    let empty = BTreeMap::new();
    let mut out = BTreeSet::new();
    for gv in ours.keys().chain(upstream.keys()).collect::<BTreeSet<_>>() {
        let (a, b) = (
            ours.get(gv).unwrap_or(&empty),
            upstream.get(gv).unwrap_or(&empty),
        );
        for name in a.keys().chain(b.keys()).collect::<BTreeSet<_>>() {
            match (a.get(name), b.get(name)) {
                (Some(_), None) => {
                    out.insert(format!(
                        "{gv} {name}: served by kcache-apiserver, not upstream"
                    ));
                }
                (None, Some(_)) => {
                    out.insert(format!(
                        "{gv} {name}: served upstream, not by kcache-apiserver"
                    ));
                }
                (Some(x), Some(y)) if x != y => {
                    let fields: BTreeSet<&String> = x
                        .keys()
                        .chain(y.keys())
                        .filter(|k| x.get(*k) != y.get(*k))
                        .collect();
                    let fields: Vec<&str> = fields.into_iter().map(String::as_str).collect();
                    out.insert(format!("{gv} {name}: {} differ", fields.join(", ")));
                }
                _ => {}
            }
        }
    }
    out
}

/// `group/version` → resource name → its discovery entry.
fn by_name(groups: &[Value]) -> BTreeMap<String, BTreeMap<String, Map<String, Value>>> {
    let mut out = BTreeMap::new();
    for g in groups {
        let group = g["name"].as_str().unwrap_or_default();
        for v in g["versions"].as_array().into_iter().flatten() {
            let version = v["version"].as_str().unwrap_or_default();
            let gv = if group.is_empty() {
                version.to_owned()
            } else {
                format!("{group}/{version}")
            };
            let entries: &mut BTreeMap<String, Map<String, Value>> = out.entry(gv).or_default();
            for r in v["resources"].as_array().into_iter().flatten() {
                if let Some(m) = r.as_object() {
                    let name = m["name"].as_str().unwrap_or_default().to_owned();
                    entries.insert(name, m.clone());
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_resources_against_upstream_discovery() -> anyhow::Result<()> {
    let Some(cfg) = upstream_kubeconfig("served resources against upstream discovery") else {
        return Ok(());
    };
    let upstream = by_name(&discovery(&Target::from_kubeconfig(&cfg).await?).await?);
    let embedded_server = kcache_apiserver::ApiServer::builder()
        .build()
        .start()
        .await?;
    let dir = std::env::temp_dir().join(format!("kcache-disc-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("embedded.kubeconfig");
    embedded_server.write_kubeconfig(&kubeconfig)?;
    let embedded = by_name(&discovery(&Target::from_kubeconfig(&kubeconfig).await?).await?);
    embedded_server.shutdown().await;

    let (mut total_up, mut total_ours) = ((0, 0), (0, 0));
    for (gv, theirs) in &upstream {
        let ours = embedded.get(gv).cloned().unwrap_or_default();
        let count = |m: &BTreeMap<String, Map<String, Value>>, sub: bool| {
            m.keys().filter(|k| k.contains('/') == sub).count()
        };
        let served_missing: Vec<&String> =
            theirs.keys().filter(|k| !ours.contains_key(*k)).collect();
        eprintln!(
            "{gv}: resources {}/{}, subresources {}/{}{}",
            count(&ours, false),
            count(theirs, false),
            count(&ours, true),
            count(theirs, true),
            if served_missing.is_empty() {
                String::new()
            } else {
                format!(" (not served: {served_missing:?})")
            }
        );
        total_up.0 += count(theirs, false);
        total_up.1 += count(theirs, true);
        total_ours.0 += count(&ours, false);
        total_ours.1 += count(&ours, true);
        for (name, entry) in &ours {
            if let Some(up) = theirs.get(name).filter(|up| *up != entry) {
                eprintln!(
                    "{gv} {name}:\n  embedded: {}\n  upstream: {}",
                    Value::Object(entry.clone()),
                    Value::Object(up.clone())
                );
            }
        }
    }
    eprintln!(
        "total: resources {}/{}, subresources {}/{}",
        total_ours.0, total_up.0, total_ours.1, total_up.1
    );
    // What the embedded server serves must be served upstream, and alike; what it does not
    // serve is counted above, not a failure.
    let found: BTreeSet<String> = entry_differences(&embedded, &upstream)
        .into_iter()
        .filter(|l| !l.contains("served upstream, not by"))
        .collect();
    let recorded: Vec<Recorded> = RELEASES
        .iter()
        .filter(|r| !r.line.contains("served upstream, not by"))
        .copied()
        .collect();
    let minor = skew::minor(&Target::from_kubeconfig(&cfg).await?).await?;
    if let Err(e) = skew::check("served resources", minor, &found, &recorded) {
        panic!("{e}");
    }
    Ok(())
}
