//! Differential RBAC: the same requests, as several users, against the embedded server and the
//! upstream kube-apiserver v1.36.5 (`scripts/kube-up.sh`: `--authorization-mode=RBAC`, a token
//! file with `admin` in `system:masters` and `alice` without bindings). The users: nobody (no
//! rights), alice (a namespaced Role, impersonation of bob, escalation attempts), bob (a
//! ClusterRole with resourceNames), carol (an aggregated ClusterRole), erin (a client
//! certificate: CN `erin`, O `kcache:cert-users`, signed by the CA both servers trust; her group
//! is bound to a Role), a ServiceAccount's token, anonymous requests, and impersonated
//! identities. Every status code and 403 message,
//! the reviews' answers, and `kubectl auth can-i --list` / `kubectl auth whoami` must match,
//! except for the differences in [`DELIBERATE`], each of which must still occur, and against
//! another release than v1.36 those [`RELEASES`] records for it.
//!
//! A missing upstream server is a failure; only `KCACHE_UPSTREAM=skip` skips the test.

use std::path::{Path, PathBuf};

use kcache_apiserver::auth::UserInfo;
use kcache_apiserver::{ApiServer, kubeconfig_document};
use std::collections::BTreeSet;

use kcache_conformance::skew::{self, Recorded};
use kcache_conformance::{Target, describe, item_names, upstream_kubeconfig};
use serde_json::{Value, json};

/// (embedded line prefix, upstream line prefix) pairs that differ on purpose. The upstream
/// harness runs no kube-controller-manager, so its aggregated ClusterRole never gets rules; the
/// embedded server runs the aggregation controller, as a cluster does, so carol may list
/// secrets there. The `kubectl auth can-i --list` lines differ only by that rule (checked in
/// [`deliberate`]).
const DELIBERATE: &[(&str, &str)] = &[
    (
        "carol list secrets: 200 [s1]",
        "carol list secrets: 403 Forbidden: secrets is forbidden: User \"carol\" cannot list",
    ),
    (
        "carol review can list secrets: allowed=true reason=RBAC: allowed by RoleBinding \"carol-agg/NS\" of ClusterRole \"agg-NS\"",
        "carol review can list secrets: allowed=false reason=",
    ),
    (
        "carol rules: 201 {\"apiGroups\":[\"\"],\"resources\":[\"secrets\"],\"verbs\":[\"list\"]} ",
        "carol rules: 201 {\"apiGroups\":[\"authentication.k8s.io\"]",
    ),
    ("carol kubectl auth can-i:", "carol kubectl auth can-i:"),
];

/// Which [`DELIBERATE`] difference `ours` / `theirs` is, if any: the prefixes match and, apart
/// from the aggregated `secrets` rule, the lines are the same.
fn deliberate(ours: &str, theirs: &str) -> Option<usize> {
    let without_secrets = |s: &str| {
        s.replace(
            r#"{"apiGroups":[""],"resources":["secrets"],"verbs":["list"]} "#,
            "",
        )
        .lines()
        .filter(|l| !l.starts_with("secrets "))
        .collect::<Vec<_>>()
        .join("\n")
    };
    let i = DELIBERATE
        .iter()
        .position(|(o, t)| ours.starts_with(o) && theirs.starts_with(t))?;
    (i < 2 || without_secrets(ours) == without_secrets(theirs)).then_some(i)
}

/// How a line differs when the upstream release grants every authenticated user the
/// discovery of ClusterTrustBundles.
const TRUST_BUNDLES: &str = "upstream also grants get, list, watch on clustertrustbundles";

/// The line without the rule of `system:cluster-trust-bundle-discovery` (in a rules review's
/// JSON or a `kubectl auth can-i --list` row).
fn without_trust_bundle_discovery(line: &str) -> String {
    line.replace(
        r#"{"apiGroups":["certificates.k8s.io"],"resources":["clustertrustbundles"],"verbs":["get","list","watch"]} "#,
        "",
    )
    .lines()
    .filter(|l| !l.starts_with("clustertrustbundles.certificates.k8s.io "))
    .collect::<Vec<_>>()
    .join("\n")
}

/// The way another release answers `ours`'s request differently, if it is one of those
/// [`RELEASES`] words: the trust-bundle discovery 1.37 grants, or impersonation denied in the
/// words of a release without constrained impersonation (1.35: "cannot impersonate resource
/// users" where 1.36 names the impersonated request, "impersonate-on:user-info:list").
fn release_difference(ours: &str, upstream: &str) -> Option<String> {
    let who_what = upstream.split(':').next().unwrap_or_default();
    if upstream.contains("clustertrustbundles")
        && squash(ours) == squash(&without_trust_bundle_discovery(upstream))
    {
        return Some(format!("{who_what}: {TRUST_BUNDLES}"));
    }
    let who = who_what.split(" as ").next().unwrap_or_default();
    (ours.contains(&format!("User \"{who}\" cannot impersonate-on:"))
        && upstream.contains(&format!(
            "User \"{who}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        )))
    .then(|| format!("{who_what}: {OLD_IMPERSONATION}"))
}

/// How a line differs when the upstream release checks impersonation without constrained
/// impersonation.
const OLD_IMPERSONATION: &str =
    "403 for impersonating a user, not for the impersonated request (no constrained impersonation)";

/// `line` with every run of whitespace one space (kubectl pads its columns to the widest row).
fn squash(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What other releases answer differently (`kcache_conformance::skew`).
const RELEASES: &[Recorded] = &[
    Recorded {
        releases: &[34, 35],
        line: "erin as bob list configmaps: 403 for impersonating a user, not for the impersonated request (no constrained impersonation)",
        why: "1.34 and 1.35 lack ConstrainedImpersonation (1.36): impersonating bob without the right is refused as such, whatever the request",
    },
    Recorded {
        releases: &[34, 35],
        line: "erin as bob get cm1: 403 for impersonating a user, not for the impersonated request (no constrained impersonation)",
        why: "as erin as bob list configmaps",
    },
    Recorded {
        releases: &[34, 35],
        line: "erin as bob get cm2: 403 for impersonating a user, not for the impersonated request (no constrained impersonation)",
        why: "as erin as bob list configmaps",
    },
    Recorded {
        releases: &[34, 35],
        line: "erin as bob list configmaps in default: 403 for impersonating a user, not for the impersonated request (no constrained impersonation)",
        why: "as erin as bob list configmaps",
    },
    Recorded {
        releases: &[34, 35],
        line: "erin as bob list cm1 by field: 403 for impersonating a user, not for the impersonated request (no constrained impersonation)",
        why: "as erin as bob list configmaps",
    },
    Recorded {
        releases: &[34, 35],
        line: "erin as bob watch configmaps: 403 for impersonating a user, not for the impersonated request (no constrained impersonation)",
        why: "as erin as bob list configmaps",
    },
    Recorded {
        releases: &[34, 35],
        line: "erin as bob create configmap: 403 for impersonating a user, not for the impersonated request (no constrained impersonation)",
        why: "as erin as bob list configmaps",
    },
    Recorded {
        releases: &[34, 35],
        line: "erin as bob list secrets: 403 for impersonating a user, not for the impersonated request (no constrained impersonation)",
        why: "as erin as bob list configmaps",
    },
    Recorded {
        releases: &[34, 35],
        line: "erin as bob list namespaces: 403 for impersonating a user, not for the impersonated request (no constrained impersonation)",
        why: "as erin as bob list configmaps",
    },
    Recorded {
        releases: &[34, 35],
        line: "erin as bob get scale: 403 for impersonating a user, not for the impersonated request (no constrained impersonation)",
        why: "as erin as bob list configmaps",
    },
    Recorded {
        releases: &[34, 35],
        line: "erin as bob discovery: 403 for impersonating a user, not for the impersonated request (no constrained impersonation)",
        why: "as erin as bob list configmaps",
    },
    Recorded {
        releases: &[34, 35],
        line: "erin as bob healthz: 403 for impersonating a user, not for the impersonated request (no constrained impersonation)",
        why: "as erin as bob list configmaps",
    },
    Recorded {
        releases: &[34, 35],
        line: "erin as bob metrics: 403 for impersonating a user, not for the impersonated request (no constrained impersonation)",
        why: "as erin as bob list configmaps",
    },
    Recorded {
        releases: &[34, 35],
        line: "erin as bob review can list secrets: 403 for impersonating a user, not for the impersonated request (no constrained impersonation)",
        why: "as erin as bob list configmaps",
    },
    Recorded {
        releases: &[34, 35],
        line: "erin as bob whoami: 403 for impersonating a user, not for the impersonated request (no constrained impersonation)",
        why: "as erin as bob list configmaps",
    },
    Recorded {
        releases: &[34, 35],
        line: "erin as bob kubectl auth can-i: 403 for impersonating a user, not for the impersonated request (no constrained impersonation)",
        why: "as erin as bob list configmaps",
    },
    Recorded {
        releases: &[37],
        line: "robot rules: upstream also grants get, list, watch on clustertrustbundles",
        why: "with ClusterTrustBundle GA in 1.37 the bootstrap policy binds \
              system:authenticated to system:cluster-trust-bundle-discovery",
    },
    Recorded {
        releases: &[37],
        line: "robot kubectl auth can-i: upstream also grants get, list, watch on clustertrustbundles",
        why: "the same binding, as kubectl lists it",
    },
];

struct Server {
    url: String,
    ca_pem: String,
    admin: String,
    alice: String,
    /// erin's client certificate and key (PEM).
    client_cert: (String, String),
    dir: PathBuf,
}

/// Who sends a request: a bearer token or a client certificate (neither: anonymous) and
/// impersonation headers.
#[derive(Clone)]
struct Who {
    label: String,
    token: Option<String>,
    /// A client certificate and its key (PEM).
    cert: Option<(String, String)>,
    impersonate: Option<String>,
}

impl Server {
    fn kubeconfig(&self, who: &Who) -> anyhow::Result<PathBuf> {
        let path = self
            .dir
            .join(format!("{}.kubeconfig", who.label.replace(' ', "-")));
        let mut text = kubeconfig_document(&self.url, who.token.as_deref(), Some(&self.ca_pem));
        if let Some((cert, key)) = &who.cert {
            use base64::Engine as _;
            let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
            text = text.replace(
                "  user: {}\n",
                &format!(
                    "  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
                    b64(cert),
                    b64(key)
                ),
            );
        }
        if let Some(user) = &who.impersonate {
            text.push_str(&format!("    as: {user:?}\n"));
        }
        std::fs::write(&path, text)?;
        Ok(path)
    }

    async fn target(&self, who: &Who) -> anyhow::Result<Target> {
        Target::from_kubeconfig(&self.kubeconfig(who)?).await
    }

    async fn send(
        &self,
        who: &Who,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<kcache_conformance::Response> {
        let t = self.target(who).await?;
        let headers: Vec<(&str, &str)> = who
            .impersonate
            .as_deref()
            .map(|u| vec![("Impersonate-User", u)])
            .unwrap_or_default();
        let bytes = body.map(|b| serde_json::to_vec(&b)).transpose()?;
        let ct = bytes.as_ref().map(|_| {
            if method == "PATCH" {
                "application/merge-patch+json"
            } else {
                "application/json"
            }
        });
        t.send_with_headers(method, path, &headers, ct, bytes).await
    }

    fn kubectl(&self, who: &Who, args: &[&str]) -> anyhow::Result<String> {
        let cfg = self.kubeconfig(&Who {
            impersonate: None,
            ..who.clone()
        })?;
        let mut cmd = std::process::Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(&cfg).args(args);
        if let Some(u) = &who.impersonate {
            cmd.arg("--as").arg(u);
        }
        let out = cmd.output()?;
        Ok(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .filter(|l| !l.contains("version difference"))
                .collect::<Vec<_>>()
                .join("\n")
        ))
    }
}

fn line(out: &mut Vec<String>, ns: &str, text: String) {
    let text = text.replace(ns, "NS");
    eprintln!("{text}");
    out.push(text);
}

fn summary(r: &kcache_conformance::Response) -> String {
    match r.status {
        200 | 201 if r.body.get("items").is_some() => {
            format!("{} {:?}", r.status, item_names(&r.body)).replace('"', "")
        }
        200 | 201 => format!("{}", r.status),
        code => format!("{code} {}", describe(&r.body)),
    }
}

fn who(label: &str, token: Option<&str>, impersonate: Option<&str>) -> Who {
    Who {
        label: label.to_owned(),
        token: token.map(str::to_owned),
        cert: None,
        impersonate: impersonate.map(str::to_owned),
    }
}

fn read(path: &Path) -> anyhow::Result<String> {
    Ok(std::fs::read_to_string(path)?.trim().to_owned())
}

fn env_path(name: &str) -> anyhow::Result<PathBuf> {
    std::env::var_os(name)
        .map(PathBuf::from)
        .ok_or_else(|| anyhow::anyhow!("{name} is not set (scripts/kube-up.sh's env file sets it)"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_are_authorized_as_kube_apiserver_authorizes_them() -> anyhow::Result<()> {
    let Some(upstream_cfg) = upstream_kubeconfig("the RBAC differential scenario") else {
        return Ok(());
    };
    let minor = skew::minor(&Target::from_kubeconfig(&upstream_cfg).await?).await?;
    let ns = format!("kcache-rbac-{}", std::process::id());
    let dir = std::env::temp_dir().join(format!("kcache-rbac-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let client_cert = (
        read(&env_path("KCACHE_UPSTREAM_CLIENT_CERT")?)?,
        read(&env_path("KCACHE_UPSTREAM_CLIENT_KEY")?)?,
    );
    let upstream = Server {
        url: std::env::var("KCACHE_UPSTREAM_URL")?,
        ca_pem: read(&env_path("KCACHE_UPSTREAM_CA")?)?,
        admin: read(&env_path("KCACHE_UPSTREAM_ADMIN_TOKEN_FILE")?)?,
        alice: read(&env_path("KCACHE_UPSTREAM_ALICE_TOKEN_FILE")?)?,
        client_cert: client_cert.clone(),
        dir: dir.join("upstream"),
    };
    let alice_token = "alice-token-0123456789";
    let mut alice = UserInfo::new("alice", Vec::<String>::new());
    alice.uid = "alice-uid".into();
    // The embedded server trusts the upstream harness's CA for client certificates, so that
    // erin's one certificate authenticates on both.
    let embedded = ApiServer::builder()
        .https(true)
        .client_ca_pem(read(&env_path("KCACHE_UPSTREAM_CA")?)?)
        .user_token(alice_token, alice)
        .build()
        .start()
        .await?;
    let ours_server = Server {
        url: embedded.url(),
        ca_pem: embedded.ca_pem().unwrap_or_default().to_owned(),
        admin: embedded.admin_token().unwrap_or_default().to_owned(),
        alice: alice_token.to_owned(),
        client_cert,
        dir: dir.join("embedded"),
    };
    std::fs::create_dir_all(&upstream.dir)?;
    std::fs::create_dir_all(&ours_server.dir)?;
    let ours = scenario(&ours_server, &ns).await?;
    let theirs = scenario(&upstream, &ns).await?;
    embedded.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);

    let mut unexpected = Vec::new();
    let mut releases = BTreeSet::new();
    let mut seen = vec![false; DELIBERATE.len()];
    for (o, u) in ours.iter().zip(&theirs) {
        if o == u {
            continue;
        }
        match deliberate(o, u) {
            Some(i) => seen[i] = true,
            None => match release_difference(o, u) {
                Some(line) => {
                    releases.insert(line);
                }
                None => unexpected.push(format!("  embedded: {o}\n  upstream: {u}")),
            },
        }
    }
    if let Err(e) = skew::check("the RBAC scenario", minor, &releases, RELEASES) {
        panic!("{e}");
    }
    assert_eq!(ours.len(), theirs.len());
    assert!(
        unexpected.is_empty(),
        "the servers differ:\n{}",
        unexpected.join("\n")
    );
    for (i, s) in seen.iter().enumerate() {
        assert!(
            s,
            "a listed deliberate difference no longer occurs: {:?}",
            DELIBERATE[i]
        );
    }
    // The scenario exercised both answers.
    assert!(
        theirs.iter().any(|l| l.contains(": 403 Forbidden: ")),
        "{theirs:#?}"
    );
    assert!(
        theirs
            .iter()
            .any(|l| l.starts_with("alice list configmaps: 200")),
        "{theirs:#?}"
    );
    // The client certificate authenticated (as erin, in her group) on both servers.
    assert!(
        theirs
            .iter()
            .any(|l| l.starts_with("erin list configmaps: 200")),
        "{theirs:#?}"
    );
    Ok(())
}

mod scenario;

use scenario::*;
