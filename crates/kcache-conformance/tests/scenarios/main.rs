//! Differential scenarios: many small scripted scenarios (object lifecycle, patches,
//! validation and wording, routing, apps/v1 workloads,
//! CustomResourceDefinitions), each run in a namespace of its own against the embedded
//! `kcache-apiserver` and against the upstream kube-apiserver (`KCACHE_UPSTREAM_KUBECONFIG`,
//! started by `scripts/kube-up.sh`). Each scenario's normalised transcript must be the same on
//! both, except for the scenarios in [`KNOWN`], which must still differ (so the list stays
//! honest), and against another release than v1.36 the lines [`RELEASES`] records for it. The
//! test prints how many scenarios agree.
//!
//! Every scenario here was written against, and first run on, the upstream server.

mod apply;
mod crd_schema;
mod crd_writes;
mod crds;
mod deletion;
mod hookserver;
mod lifecycle;
mod patches;
mod protobuf;
mod resources;
mod schema;
mod script;
mod validation;
mod webhooks;
mod webhooks_more;
mod workloads;

use std::collections::BTreeSet;

use kcache_conformance::skew::{self, Recorded};
use kcache_conformance::{Target, upstream_kubeconfig};
use script::Script;

/// Scenarios whose transcripts differ on purpose, with why (see DIFFERENCES.md).
const KNOWN: &[(&str, &str)] = &[];

/// Lines of scenarios other releases answer differently (`kcache_conformance::skew`), as
/// `scenario: embedded LINE; upstream LINE`.
const RELEASES: &[Recorded] = &[
    Recorded {
        releases: &[34],
        line: r#"crd_cel_rules: embedded   message: Widget.kcache-sc-N-N.example.com "default-message" is invalid: spec: Invalid value: failed rule: self.tags.all(t, t.size() <= N); upstream   message: Widget.kcache-sc-N-N.example.com "default-message" is invalid: spec: Invalid value: "object": failed rule: self.tags.all(t, t.size() <= N)"#,
        why: "1.34 words the value a CEL rule refused by its type (\"object\", \"integer\", \"string\"); 1.35 and 1.36 give the value",
    },
    Recorded {
        releases: &[34],
        line: r#"crd_cel_rules: embedded   message: Widget.kcache-sc-N-N.example.com "message" is invalid: spec: Invalid value: min must not exceed max; upstream   message: Widget.kcache-sc-N-N.example.com "message" is invalid: spec: Invalid value: "object": min must not exceed max"#,
        why: "as the first crd_cel_rules line",
    },
    Recorded {
        releases: &[34],
        line: r#"crd_cel_rules: embedded   message: Widget.kcache-sc-N-N.example.com "message-expression" is invalid: spec: Invalid value: max is a bit too large; upstream   message: Widget.kcache-sc-N-N.example.com "message-expression" is invalid: spec: Invalid value: "object": max is a bit too large"#,
        why: "as the first crd_cel_rules line",
    },
    Recorded {
        releases: &[34],
        line: r#"crd_cel_rules: embedded   message: Widget.kcache-sc-N-N.example.com "ok" is invalid: spec.level: Invalid value: N: level may only grow; upstream   message: Widget.kcache-sc-N-N.example.com "ok" is invalid: spec.level: Invalid value: "integer": level may only grow"#,
        why: "as the first crd_cel_rules line",
    },
    Recorded {
        releases: &[34],
        line: r#"crd_cel_rules: embedded   message: Widget.kcache-sc-N-N.example.com "ok" is invalid: spec.mode: Invalid value: "b": mode is immutable; upstream   message: Widget.kcache-sc-N-N.example.com "ok" is invalid: spec.mode: Invalid value: "string": mode is immutable"#,
        why: "as the first crd_cel_rules line",
    },
    Recorded {
        releases: &[34],
        line: r#"crd_cel_rules: embedded   spec FieldValueInvalid: Invalid value: failed rule: self.tags.all(t, t.size() <= N); upstream   spec FieldValueInvalid: Invalid value: "object": failed rule: self.tags.all(t, t.size() <= N)"#,
        why: "as the first crd_cel_rules line",
    },
    Recorded {
        releases: &[34],
        line: r#"crd_cel_rules: embedded   spec FieldValueInvalid: Invalid value: max is a bit too large; upstream   spec FieldValueInvalid: Invalid value: "object": max is a bit too large"#,
        why: "as the first crd_cel_rules line",
    },
    Recorded {
        releases: &[34],
        line: r#"crd_cel_rules: embedded   spec FieldValueInvalid: Invalid value: min must not exceed max; upstream   spec FieldValueInvalid: Invalid value: "object": min must not exceed max"#,
        why: "as the first crd_cel_rules line",
    },
    Recorded {
        releases: &[34],
        line: r#"crd_cel_rules: embedded   spec.level FieldValueInvalid: Invalid value: N: level may only grow; upstream   spec.level FieldValueInvalid: Invalid value: "integer": level may only grow"#,
        why: "as the first crd_cel_rules line",
    },
    Recorded {
        releases: &[34],
        line: r#"crd_cel_rules: embedded   spec.mode FieldValueInvalid: Invalid value: "b": mode is immutable; upstream   spec.mode FieldValueInvalid: Invalid value: "string": mode is immutable"#,
        why: "as the first crd_cel_rules line",
    },
    Recorded {
        releases: &[34, 35],
        line: r#"crd_schema_integer_vs_string: embedded   <nil> FieldValueInvalid: Invalid value: "": Checked value must be of type integer (default format) in spec.replicas; upstream   spec.replicas FieldValueTypeInvalid: Invalid value: "number": spec.replicas in body must be of type integer: "number""#,
        why: "1.36 gives a number where a CRD's schema wants an integer a second cause (the \
              format check); 1.34 and 1.35 only the type error, so its lines come one earlier",
    },
    Recorded {
        releases: &[34, 35],
        line: r#"crd_schema_integer_vs_string: embedded   spec.replicas FieldValueTypeInvalid: Invalid value: "number": spec.replicas in body must be of type integer: "number"; upstream   message: Widget.kcache-sc-N-N.example.com "float-for-integer" is invalid: spec.replicas: Invalid value: "number": spec.replicas in body must be of type integer: "number""#,
        why: "the same cause missing, one line later",
    },
    Recorded {
        releases: &[37],
        line: "merge_patch_nulls: embedded not json: 400 BadRequest: error decoding patch: invalid character 'o' looking for beginning of object key string; upstream not json: 400 BadRequest: invalid JSON patch",
        why: "1.37 answers a merge patch that is not JSON without the decoder's words",
    },
    Recorded {
        releases: &[37],
        line: r#"other_workload_defaults: embedded /spec/updateStrategy = {"rollingUpdate":{"partition":0},"type":"RollingUpdate"}; upstream /spec/updateStrategy = {"rollingUpdate":{"maxUnavailable":1,"partition":0},"type":"RollingUpdate"}"#,
        why: "MaxUnavailableStatefulSet is on by default from 1.37: a StatefulSet's rollingUpdate \
              defaults maxUnavailable to 1",
    },
];

/// Every scenario, by name.
/// The scenarios in run order; `crd_schema::NAMES` run after these.
const SCENARIOS: &[&str] = &[
    "finalizers_hold_a_deletion",
    "finalizers_cannot_be_added_while_deleting",
    "generate_name",
    "generate_name_invalid",
    "delete_preconditions",
    "dry_run",
    "unconditional_update",
    "update_name_mismatch",
    "namespace_label_and_termination",
    "delete_response_bodies",
    "merge_patch_nulls",
    "merge_patch_secret_string_data",
    "json_patch_test_is_atomic",
    "json_patch_missing_paths",
    "strategic_merge_directives",
    "service_defaults",
    "secret_rules",
    "configmap_size_limit",
    "field_selectors",
    "invalid_label_selector",
    "unknown_paths",
    "method_not_allowed",
    "unsupported_media_type",
    "field_validation_modes",
    "watch_rv0_bookmarks",
    "status_subresource_rules",
    "deployment_defaults_and_generation",
    "deployment_validation",
    "scale_subresource",
    "other_workload_defaults",
    "crd_serves_its_resource",
    "crd_validation",
    "nodes",
    "service_account_token",
    "eviction_and_binding",
    "rbac",
    "certificate_signing_requests",
    "reviews_and_verbs",
    "protobuf_bodies",
    "status_metadata_and_json_patch_test_null",
    "common_kinds_validation",
    "server_side_apply_ownership",
    "server_side_apply_after_fields_cleared",
    "pod_spec_subresources",
    "deletion_propagation",
    "webhook_configuration_defaults_and_validation",
    "webhook_validating_deny",
    "webhook_mutating_patch",
    "webhook_failure_policy",
    "webhook_selectors",
    "webhook_dry_run",
    "webhook_review_fields",
    "webhook_timeout",
    "webhook_reinvocation",
    "webhook_subresources",
    "webhook_match_conditions",
    "webhook_answers",
    "webhook_delete_collection",
    "webhook_eviction",
    "schema_decoding",
    "controller_runtime_parity",
];

async fn run(name: &str, s: &mut Script<'_>) -> anyhow::Result<()> {
    match name {
        "finalizers_hold_a_deletion" => lifecycle::finalizers_hold_a_deletion(s).await,
        "finalizers_cannot_be_added_while_deleting" => {
            lifecycle::finalizers_cannot_be_added_while_deleting(s).await
        }
        "generate_name" => lifecycle::generate_name(s).await,
        "generate_name_invalid" => lifecycle::generate_name_invalid(s).await,
        "delete_preconditions" => lifecycle::delete_preconditions(s).await,
        "dry_run" => lifecycle::dry_run(s).await,
        "unconditional_update" => lifecycle::unconditional_update(s).await,
        "update_name_mismatch" => lifecycle::update_name_mismatch(s).await,
        "namespace_label_and_termination" => lifecycle::namespace_label_and_termination(s).await,
        "delete_response_bodies" => lifecycle::delete_response_bodies(s).await,
        "status_subresource_rules" => lifecycle::status_subresource_rules(s).await,
        "merge_patch_nulls" => patches::merge_patch_nulls(s).await,
        "merge_patch_secret_string_data" => patches::merge_patch_secret_string_data(s).await,
        "json_patch_test_is_atomic" => patches::json_patch_test_is_atomic(s).await,
        "json_patch_missing_paths" => patches::json_patch_missing_paths(s).await,
        "strategic_merge_directives" => patches::strategic_merge_directives(s).await,
        "service_defaults" => validation::service_defaults(s).await,
        "secret_rules" => validation::secret_rules(s).await,
        "configmap_size_limit" => validation::configmap_size_limit(s).await,
        "field_selectors" => validation::field_selectors(s).await,
        "invalid_label_selector" => validation::invalid_label_selector(s).await,
        "unknown_paths" => validation::unknown_paths(s).await,
        "method_not_allowed" => validation::method_not_allowed(s).await,
        "unsupported_media_type" => validation::unsupported_media_type(s).await,
        "field_validation_modes" => validation::field_validation_modes(s).await,
        "watch_rv0_bookmarks" => validation::watch_rv0_bookmarks(s).await,
        "deployment_defaults_and_generation" => {
            workloads::deployment_defaults_and_generation(s).await
        }
        "deployment_validation" => workloads::deployment_validation(s).await,
        "scale_subresource" => workloads::scale_subresource(s).await,
        "other_workload_defaults" => workloads::other_workload_defaults(s).await,
        "crd_serves_its_resource" => crds::crd_serves_its_resource(s).await,
        "crd_validation" => crds::crd_validation(s).await,
        "nodes" => resources::nodes(s).await,
        "service_account_token" => resources::service_account_token(s).await,
        "eviction_and_binding" => resources::eviction_and_binding(s).await,
        "rbac" => resources::rbac(s).await,
        "certificate_signing_requests" => resources::certificate_signing_requests(s).await,
        "reviews_and_verbs" => resources::reviews_and_verbs(s).await,
        "protobuf_bodies" => protobuf::protobuf_bodies(s).await,
        "status_metadata_and_json_patch_test_null" => {
            patches::status_metadata_and_json_patch_test_null(s).await
        }
        "common_kinds_validation" => validation::common_kinds_validation(s).await,
        "server_side_apply_ownership" => apply::server_side_apply_ownership(s).await,
        "server_side_apply_after_fields_cleared" => {
            apply::server_side_apply_after_fields_cleared(s).await
        }
        "pod_spec_subresources" => resources::pod_spec_subresources(s).await,
        n if crd_schema::NAMES.contains(&n) => crd_schema::run(n, s).await,
        "deletion_propagation" => deletion::deletion_propagation(s).await,
        "webhook_configuration_defaults_and_validation" => {
            webhooks::webhook_configuration_defaults_and_validation(s).await
        }
        "webhook_validating_deny" => webhooks::webhook_validating_deny(s).await,
        "webhook_mutating_patch" => webhooks::webhook_mutating_patch(s).await,
        "webhook_failure_policy" => webhooks::webhook_failure_policy(s).await,
        "webhook_selectors" => webhooks::webhook_selectors(s).await,
        "webhook_dry_run" => webhooks::webhook_dry_run(s).await,
        "webhook_review_fields" => webhooks::webhook_review_fields(s).await,
        "webhook_timeout" => webhooks_more::webhook_timeout(s).await,
        "webhook_reinvocation" => webhooks_more::webhook_reinvocation(s).await,
        "webhook_subresources" => webhooks_more::webhook_subresources(s).await,
        "webhook_match_conditions" => webhooks_more::webhook_match_conditions(s).await,
        "webhook_answers" => webhooks_more::webhook_answers(s).await,
        "webhook_delete_collection" => webhooks_more::webhook_delete_collection(s).await,
        "webhook_eviction" => webhooks_more::webhook_eviction(s).await,
        "schema_decoding" => schema::schema_decoding(s).await,
        "controller_runtime_parity" => schema::controller_runtime_parity(s).await,
        other => anyhow::bail!("no scenario {other:?}"),
    }
}

/// Runs every scenario selected by `KCACHE_SCENARIOS` (comma-separated names; all when unset)
/// against `target`; returns each one's transcript.
async fn transcripts(target: &Target, who: &str) -> anyhow::Result<Vec<(String, Vec<String>)>> {
    let only = std::env::var("KCACHE_SCENARIOS").ok();
    let mut out = Vec::new();
    let all = SCENARIOS.iter().chain(crd_schema::NAMES);
    for (i, name) in all.enumerate() {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|n| n == *name))
        {
            continue;
        }
        let ns = format!("kcache-sc-{}-{i}", std::process::id());
        let mut s = Script::new(target, ns);
        s.create_namespace().await?;
        run(name, &mut s).await?;
        eprintln!("--- {who}: {name}\n{}", s.lines.join("\n"));
        out.push(((*name).to_owned(), s.lines));
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_and_upstream_servers_answer_each_scenario_alike() -> anyhow::Result<()> {
    let Some(upstream_cfg) = upstream_kubeconfig("the differential scenarios") else {
        return Ok(());
    };
    let embedded = kcache_apiserver::ApiServer::builder()
        .build()
        .start()
        .await?;
    let dir = std::env::temp_dir().join(format!("kcache-sc-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let embedded_cfg = dir.join("embedded.kubeconfig");
    embedded.write_kubeconfig(&embedded_cfg)?;

    let theirs = transcripts(&Target::from_kubeconfig(&upstream_cfg).await?, "upstream").await?;
    let ours = transcripts(&Target::from_kubeconfig(&embedded_cfg).await?, "embedded").await?;
    embedded.shutdown().await;

    let mut unexpected = BTreeSet::new();
    let mut still_known = Vec::new();
    let mut agree = 0;
    for ((name, o), (_, u)) in ours.iter().zip(&theirs) {
        let known = KNOWN.iter().any(|(k, _)| k == name);
        if o == u {
            agree += 1;
            if known {
                still_known.push(name.clone());
            }
            continue;
        }
        if known {
            continue;
        }
        for i in 0..o.len().max(u.len()) {
            let (a, b) = (o.get(i), u.get(i));
            if a != b {
                unexpected.insert(format!(
                    "{name}: embedded {}; upstream {}",
                    a.map_or("(none)", String::as_str),
                    b.map_or("(none)", String::as_str)
                ));
            }
        }
    }
    eprintln!(
        "{agree} of {} scenarios answer alike ({} known differences)",
        ours.len(),
        KNOWN.len()
    );
    let minor = skew::minor(&Target::from_kubeconfig(&upstream_cfg).await?).await?;
    if let Err(e) = skew::check("the differential scenarios", minor, &unexpected, RELEASES) {
        panic!("{e}");
    }
    assert!(
        still_known.is_empty(),
        "listed as known differences but now alike, remove them from KNOWN: {still_known:?}"
    );
    // The transcripts are not trivially empty.
    assert!(theirs.iter().all(|(_, t)| !t.is_empty()));
    Ok(())
}
