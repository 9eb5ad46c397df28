//! The custom-resource dataset: `Widget`s of the namespaced CRD `widgets.bench.kcache.io`
//! (served in JSON only, as every custom resource is), each with a nested spec and status and
//! lists of maps, about 4.7 KB as created; the server adds `managedFields` and `uid`,
//! timestamps for ~6 KB as read back.
//!
//! [`Widget`] is also the typed form the Rust peers decode (kube's `CustomResource` derive).
//! The CRD the bench installs is [`crd`]: the derive's schema without the status subresource,
//! so that one create writes the status too (the dataset loads in one request per object).

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResource;
use kube_core::CustomResourceExt as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The CRD's group.
pub const GROUP: &str = "bench.kcache.io";
/// The CRD's served version.
pub const VERSION: &str = "v1";
/// The resource's plural.
pub const PLURAL: &str = "widgets";

/// A widget's desired state: a deployment-like shape with endpoints, rollout steps,
/// configuration and resources.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "bench.kcache.io",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct WidgetSpec {
    /// Desired replicas.
    pub replicas: i32,
    /// Container image.
    pub image: String,
    /// Tier (web, api, worker, cache).
    pub tier: String,
    /// Owning team.
    pub owner: String,
    /// Served endpoints (a list of maps).
    pub endpoints: Vec<Endpoint>,
    /// Rollout strategy.
    pub rollout: Rollout,
    /// Free-form configuration.
    pub config: BTreeMap<String, String>,
    /// Resource requests and limits.
    pub resources: Resources,
}

/// One served endpoint.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// Endpoint name.
    pub name: String,
    /// URL path.
    pub path: String,
    /// Port.
    pub port: i32,
    /// Protocol.
    pub protocol: String,
    /// Traffic weight.
    pub weight: i32,
    /// Headers added to requests.
    pub headers: BTreeMap<String, String>,
}

/// A rollout strategy.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// Strategy name.
    pub strategy: String,
    /// Extra replicas allowed during a rollout.
    pub max_surge: String,
    /// Unavailable replicas allowed during a rollout.
    pub max_unavailable: String,
    /// Canary steps.
    pub steps: Vec<RolloutStep>,
}

/// One canary step.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStep {
    /// Traffic weight of the step.
    pub weight: i32,
    /// Pause after the step, in seconds.
    pub pause_seconds: i32,
    /// Analysis template run during the step.
    pub analysis: String,
}

/// Resource requests and limits.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Resources {
    /// Requests.
    pub requests: BTreeMap<String, String>,
    /// Limits.
    pub limits: BTreeMap<String, String>,
}

/// A widget's observed state.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    /// The generation last acted on.
    pub observed_generation: i64,
    /// Lifecycle phase.
    pub phase: String,
    /// Ready replicas.
    pub ready_replicas: i32,
    /// Conditions (a list of maps).
    pub conditions: Vec<Condition>,
    /// Per-endpoint health (a list of maps).
    pub endpoints: Vec<EndpointStatus>,
}

/// One condition.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// When the status last changed (RFC 3339).
    pub last_transition_time: String,
}

/// One endpoint's health.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointStatus {
    /// Endpoint name.
    pub name: String,
    /// Whether it answers.
    pub ready: bool,
    /// Last probe time (RFC 3339).
    pub last_probe: String,
    /// Last probe latency in milliseconds.
    pub latency_ms: i64,
}

/// The CRD the bench installs: [`Widget`]'s schema, namespaced, JSON only as every CRD, with
/// no subresources (a create writes the status too).
pub fn crd() -> CustomResourceDefinition {
    let mut crd = Widget::crd();
    for version in &mut crd.spec.versions {
        version.subresources = None;
    }
    crd
}

/// The name of widget `i` of the dataset.
pub fn name(i: usize) -> String {
    format!("widget-{i:06}")
}

const TIERS: [&str; 4] = ["web", "api", "worker", "cache"];

/// Widget `i` of the dataset, as JSON (labels, annotations, spec and status filled).
pub fn widget(namespace: &str, i: usize) -> Value {
    let app = crate::labels::app(i);
    let stamp = |k: usize| format!("2026-11-{:02}T{:02}:{:02}:00Z", 1 + k % 28, k % 24, i % 60);
    let endpoints = (0..6)
        .map(|k: i32| Endpoint {
            name: format!("endpoint-{k}"),
            path: format!("/api/v{k}/{app}/resources"),
            port: 8080 + k,
            protocol: if k % 2 == 0 { "HTTP" } else { "GRPC" }.into(),
            weight: 25,
            headers: (0..3)
                .map(|h| (format!("x-bench-header-{h}"), format!("value-{i}-{k}-{h}")))
                .collect(),
        })
        .collect();
    let steps = [10, 25, 50, 100]
        .iter()
        .map(|&w| RolloutStep {
            weight: w,
            pause_seconds: 60,
            analysis: format!("{app}-success-rate"),
        })
        .collect();
    let config = (0..16)
        .map(|k| {
            (
                format!("setting.{k}"),
                format!("value-{i}-{k}-{}", "c".repeat(16)),
            )
        })
        .collect();
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let conditions = [
        "Available",
        "Progressing",
        "Degraded",
        "Reconciled",
        "EndpointsReady",
        "RolloutComplete",
    ]
    .iter()
    .enumerate()
    .map(|(k, t)| Condition {
        type_: (*t).into(),
        status: if k == 2 { "False" } else { "True" }.into(),
        reason: format!("{t}Reason"),
        message: format!("widget {} is {t} after reconcile {}", name(i), i % 97),
        last_transition_time: stamp(k),
    })
    .collect();
    let endpoint_status = (0..6)
        .map(|k| EndpointStatus {
            name: format!("endpoint-{k}"),
            ready: k != 5,
            last_probe: stamp(k + 4),
            latency_ms: (i % 100 + k) as i64,
        })
        .collect();
    let mut widget = Widget::new(
        &name(i),
        WidgetSpec {
            replicas: (i % 5) as i32 + 1,
            image: format!("registry.example.invalid/{app}:1.24.3"),
            tier: TIERS[i % TIERS.len()].into(),
            owner: format!("team-{}", i % 7),
            endpoints,
            rollout: Rollout {
                strategy: "Canary".into(),
                max_surge: "25%".into(),
                max_unavailable: "0".into(),
                steps,
            },
            config,
            resources: Resources {
                requests: map(&[("cpu", "250m"), ("memory", "256Mi")]),
                limits: map(&[("cpu", "1"), ("memory", "512Mi")]),
            },
        },
    );
    widget.status = Some(WidgetStatus {
        observed_generation: 1,
        phase: "Ready".into(),
        ready_replicas: (i % 5) as i32 + 1,
        conditions,
        endpoints: endpoint_status,
    });
    widget.metadata.namespace = Some(namespace.to_owned());
    widget.metadata.labels = Some(map(&[
        (crate::labels::APP_LABEL, &app),
        ("app.kubernetes.io/instance", &format!("{app}-prod")),
        ("app.kubernetes.io/managed-by", "kcache-bench"),
        ("tier", TIERS[i % TIERS.len()]),
    ]));
    widget.metadata.annotations = Some(map(&[
        ("bench.kcache.io/owner", &format!("team-{}", i % 7)),
        ("bench.kcache.io/revision", &format!("{}", i % 13)),
        ("bench.kcache.io/note", &"n".repeat(120)),
    ]));
    serde_json::to_value(&widget).expect("a Widget serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widget_is_a_typed_widget_of_the_intended_size() {
        let value = widget("bench", 7);
        let size = value.to_string().len();
        assert!((4_000..5_500).contains(&size), "{size} bytes");
        let typed: Widget = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(typed.metadata.name.as_deref(), Some("widget-000007"));
        assert_eq!(typed.spec.endpoints.len(), 6);
        assert_eq!(typed.status.as_ref().unwrap().conditions.len(), 6);
        assert_eq!(value["apiVersion"], "bench.kcache.io/v1");
        assert_eq!(value["kind"], "Widget");
        assert_ne!(widget("bench", 1), widget("bench", 2));
    }

    #[test]
    fn the_crd_is_namespaced_served_and_has_no_subresources() {
        let crd = crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("widgets.bench.kcache.io")
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.plural, PLURAL);
        let v = &crd.spec.versions[0];
        assert!(v.served && v.storage && v.subresources.is_none());
        assert!(v.schema.is_some());
    }
}
