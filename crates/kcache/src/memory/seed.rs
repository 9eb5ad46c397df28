//! The inline sizes of the k8s-openapi structs that appear as sequence elements of common
//! objects, by serde struct name, so that a one-element sequence of one of them (a pod's only
//! container) is sized exactly. Only names that one k8s-openapi struct has are listed.

use std::{collections::HashMap, mem::size_of};

use k8s_openapi::{
    api::{apps::v1 as apps, core::v1 as core},
    apimachinery::pkg::apis::meta::v1 as meta,
};

macro_rules! sizes {
    ($($module:ident :: $ty:ident),* $(,)?) => {
        [$((stringify!($ty), size_of::<$module::$ty>())),*]
    };
}

pub(super) fn k8s_openapi_sizes() -> HashMap<&'static str, usize> {
    sizes![
        core::Container,
        core::EnvVar,
        core::EnvFromSource,
        core::ContainerPort,
        core::VolumeMount,
        core::VolumeDevice,
        core::Volume,
        core::Toleration,
        core::PodCondition,
        core::ContainerStatus,
        core::HostAlias,
        core::LocalObjectReference,
        core::EphemeralContainer,
        core::PodIP,
        core::HostIP,
        core::TopologySpreadConstraint,
        core::PodReadinessGate,
        core::KeyToPath,
        core::NodeSelectorTerm,
        core::NodeSelectorRequirement,
        core::PreferredSchedulingTerm,
        core::WeightedPodAffinityTerm,
        core::PodAffinityTerm,
        core::ContainerResizePolicy,
        core::PodSchedulingGate,
        core::Sysctl,
        core::NodeCondition,
        core::NodeAddress,
        core::ContainerImage,
        core::AttachedVolume,
        core::ServicePort,
        core::EndpointSubset,
        core::EndpointAddress,
        core::Taint,
        core::VolumeProjection,
        core::VolumeMountStatus,
        meta::ManagedFieldsEntry,
        meta::OwnerReference,
        meta::Condition,
        meta::LabelSelectorRequirement,
        apps::DeploymentCondition,
        apps::ReplicaSetCondition,
        apps::StatefulSetCondition,
        apps::DaemonSetCondition,
    ]
    .into_iter()
    .collect()
}
