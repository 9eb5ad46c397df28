//! The realistic ~8 KB Pod of the decode and compact benchmarks, built as the generated prost
//! type (labels, annotations with a last-applied configuration, ownerReferences, two
//! managedFields entries, two containers with env, resources, probes and mounts, four volumes,
//! status), so that its protobuf and JSON forms are the same object.

#![allow(dead_code, reason = "each benchmark uses part of it")]

use kcache_proto::api::core::v1 as pb;
use kcache_proto::apimachinery::pkg::api::resource::Quantity;
use kcache_proto::apimachinery::pkg::apis::meta::v1 as meta;

fn s(v: &str) -> Option<String> {
    Some(v.to_owned())
}

fn time(sec: i64) -> Option<meta::Time> {
    Some(meta::Time {
        seconds: Some(sec),
        nanos: Some(0),
    })
}

fn q(v: &str) -> Quantity {
    Quantity { string: s(v) }
}

fn container(name: &str, i: usize) -> pb::Container {
    pb::Container {
        name: s(name),
        image: Some(format!("registry.example.com/team/{name}:v1.{i}.0")),
        command: vec!["/bin/server".into()],
        args: vec![
            "--port=8080".into(),
            "--log-level=info".into(),
            format!("--shard={i}"),
        ],
        ports: vec![pb::ContainerPort {
            name: s("http"),
            container_port: Some(8080),
            protocol: s("TCP"),
            ..Default::default()
        }],
        env: (0..10)
            .map(|e| pb::EnvVar {
                name: Some(format!("ENV_VAR_{e}")),
                value: Some(format!("value-{e}-{i}")),
                value_from: None,
            })
            .collect(),
        resources: Some(pb::ResourceRequirements {
            limits: [
                ("cpu".to_owned(), q("500m")),
                ("memory".to_owned(), q("512Mi")),
            ]
            .into(),
            requests: [
                ("cpu".to_owned(), q("100m")),
                ("memory".to_owned(), q("128Mi")),
            ]
            .into(),
            claims: vec![],
        }),
        volume_mounts: vec![
            pb::VolumeMount {
                name: s("config"),
                mount_path: s("/etc/config"),
                read_only: Some(true),
                ..Default::default()
            },
            pb::VolumeMount {
                name: s("data"),
                mount_path: s("/var/lib/data"),
                ..Default::default()
            },
            pb::VolumeMount {
                name: s("kube-api-access"),
                mount_path: s("/var/run/secrets/kubernetes.io/serviceaccount"),
                read_only: Some(true),
                ..Default::default()
            },
        ],
        liveness_probe: Some(pb::Probe {
            handler: Some(pb::ProbeHandler {
                http_get: Some(pb::HttpGetAction {
                    path: s("/healthz"),
                    port: Some(kcache_proto::apimachinery::pkg::util::intstr::IntOrString {
                        r#type: Some(0),
                        int_val: Some(8080),
                        str_val: s(""),
                    }),
                    scheme: s("HTTP"),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            initial_delay_seconds: Some(10),
            period_seconds: Some(10),
            timeout_seconds: Some(1),
            success_threshold: Some(1),
            failure_threshold: Some(3),
            ..Default::default()
        }),
        termination_message_path: s("/dev/termination-log"),
        termination_message_policy: s("File"),
        image_pull_policy: s("IfNotPresent"),
        ..Default::default()
    }
}

/// One realistic Pod, `i` making names and values distinct.
pub(crate) fn pod(i: usize) -> pb::Pod {
    let fields = serde_json::json!({
        "f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}},
                       "f:labels": {".": {}, "f:app": {}, "f:tier": {}, "f:version": {}}},
        "f:spec": {"f:containers": {
            "k:{\"name\":\"app\"}": {".": {}, "f:args": {}, "f:command": {}, "f:env": {".": {}, "k:{\"name\":\"ENV_VAR_0\"}": {".": {}, "f:name": {}, "f:value": {}}},
                                    "f:image": {}, "f:imagePullPolicy": {}, "f:livenessProbe": {}, "f:name": {}, "f:ports": {}, "f:resources": {}, "f:volumeMounts": {}},
            "k:{\"name\":\"sidecar\"}": {".": {}, "f:args": {}, "f:image": {}, "f:name": {}, "f:resources": {}}},
            "f:volumes": {"k:{\"name\":\"config\"}": {}, "k:{\"name\":\"data\"}": {}}}
    });
    let status_fields = serde_json::json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}},
        "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:podIPs": {".": {}, "k:{\"ip\":\"10.0.0.1\"}": {".": {}, "f:ip": {}}}, "f:startTime": {}}});
    let cond = |t: &str| pb::PodCondition {
        r#type: s(t),
        status: s("True"),
        last_probe_time: None,
        last_transition_time: time(1_700_000_100),
        ..Default::default()
    };
    let cstatus = |n: &str| pb::ContainerStatus {
        name: s(n),
        state: Some(pb::ContainerState {
            running: Some(pb::ContainerStateRunning {
                started_at: time(1_700_000_050),
            }),
            ..Default::default()
        }),
        last_state: Some(pb::ContainerState::default()),
        ready: Some(true),
        restart_count: Some(0),
        image: Some(format!("registry.example.com/team/{n}:v1.{i}.0")),
        image_id: Some(format!("registry.example.com/team/{n}@sha256:{:064x}", i)),
        container_id: Some(format!("containerd://{:064x}", i * 7 + 1)),
        started: Some(true),
        ..Default::default()
    };
    pb::Pod {
        metadata: Some(meta::ObjectMeta {
            name: Some(format!("app-{i:06}-7d9f8b6c5d-x2k9p")),
            generate_name: s("app-7d9f8b6c5d-"),
            namespace: s("bench"),
            uid: Some(format!("{:08x}-0000-4000-8000-{:012x}", i, i)),
            resource_version: Some(format!("{}", 100_000 + i)),
            generation: Some(1),
            creation_timestamp: time(1_700_000_000),
            labels: [
                ("app".to_owned(), "app".to_owned()),
                ("tier".to_owned(), "backend".to_owned()),
                ("version".to_owned(), "v1".to_owned()),
                ("pod-template-hash".to_owned(), "7d9f8b6c5d".to_owned()),
                ("shard".to_owned(), format!("{}", i % 16)),
            ]
            .into(),
            annotations: [
                ("kubectl.kubernetes.io/last-applied-configuration".to_owned(), format!("{{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{{\"labels\":{{\"app\":\"app\",\"tier\":\"backend\"}},\"name\":\"app-{i}\",\"namespace\":\"bench\"}},\"spec\":{{\"containers\":[{{\"image\":\"registry.example.com/team/app:v1.0.0\",\"name\":\"app\",\"ports\":[{{\"containerPort\":8080}}],\"resources\":{{\"limits\":{{\"cpu\":\"500m\",\"memory\":\"512Mi\"}}}}}}]}}}}\n")),
                ("prometheus.io/scrape".to_owned(), "true".to_owned()),
                ("prometheus.io/port".to_owned(), "8080".to_owned()),
            ]
            .into(),
            owner_references: vec![meta::OwnerReference {
                api_version: s("apps/v1"),
                kind: s("ReplicaSet"),
                name: s("app-7d9f8b6c5d"),
                uid: s("6a1f0b2c-0000-4000-8000-000000000001"),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }],
            managed_fields: vec![
                meta::ManagedFieldsEntry {
                    manager: s("kube-controller-manager"),
                    operation: s("Update"),
                    api_version: s("v1"),
                    time: time(1_700_000_000),
                    fields_type: s("FieldsV1"),
                    fields_v1: Some(meta::FieldsV1 { raw: Some(serde_json::to_vec(&fields).unwrap()) }),
                    subresource: s(""),
                },
                meta::ManagedFieldsEntry {
                    manager: s("kubelet"),
                    operation: s("Update"),
                    api_version: s("v1"),
                    time: time(1_700_000_100),
                    fields_type: s("FieldsV1"),
                    fields_v1: Some(meta::FieldsV1 { raw: Some(serde_json::to_vec(&status_fields).unwrap()) }),
                    subresource: s("status"),
                },
            ],
            ..Default::default()
        }),
        spec: Some(pb::PodSpec {
            containers: vec![container("app", i), container("sidecar", i)],
            volumes: vec![
                pb::Volume {
                    name: s("config"),
                    volume_source: Some(pb::VolumeSource {
                        config_map: Some(pb::ConfigMapVolumeSource {
                            local_object_reference: Some(pb::LocalObjectReference { name: s("app-config") }),
                            default_mode: Some(420),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                },
                pb::Volume {
                    name: s("data"),
                    volume_source: Some(pb::VolumeSource {
                        empty_dir: Some(pb::EmptyDirVolumeSource { medium: s(""), size_limit: Some(q("1Gi")) }),
                        ..Default::default()
                    }),
                },
                pb::Volume {
                    name: s("secret"),
                    volume_source: Some(pb::VolumeSource {
                        secret: Some(pb::SecretVolumeSource { secret_name: s("app-secret"), default_mode: Some(420), ..Default::default() }),
                        ..Default::default()
                    }),
                },
                pb::Volume {
                    name: s("kube-api-access"),
                    volume_source: Some(pb::VolumeSource {
                        projected: Some(pb::ProjectedVolumeSource {
                            sources: vec![pb::VolumeProjection {
                                service_account_token: Some(pb::ServiceAccountTokenProjection {
                                    audience: s(""),
                                    expiration_seconds: Some(3607),
                                    path: s("token"),
                                }),
                                ..Default::default()
                            }],
                            default_mode: Some(420),
                        }),
                        ..Default::default()
                    }),
                },
            ],
            restart_policy: s("Always"),
            termination_grace_period_seconds: Some(30),
            dns_policy: s("ClusterFirst"),
            service_account_name: s("default"),
            node_name: Some(format!("node-{:03}", i % 100)),
            scheduler_name: s("default-scheduler"),
            tolerations: vec![pb::Toleration {
                key: s("node.kubernetes.io/not-ready"),
                operator: s("Exists"),
                effect: s("NoExecute"),
                toleration_seconds: Some(300),
                value: s(""),
            }],
            priority: Some(0),
            enable_service_links: Some(true),
            preemption_policy: s("PreemptLowerPriority"),
            ..Default::default()
        }),
        status: Some(pb::PodStatus {
            phase: s("Running"),
            conditions: vec![cond("Initialized"), cond("Ready"), cond("ContainersReady"), cond("PodScheduled")],
            host_ip: Some(format!("10.1.{}.{}", i / 250 % 250, i % 250)),
            pod_ip: Some(format!("10.2.{}.{}", i / 250 % 250, i % 250)),
            pod_i_ps: vec![pb::PodIp { ip: Some(format!("10.2.{}.{}", i / 250 % 250, i % 250)) }],
            start_time: time(1_700_000_010),
            container_statuses: vec![cstatus("app"), cstatus("sidecar")],
            qos_class: s("Burstable"),
            ..Default::default()
        }),
    }
}
