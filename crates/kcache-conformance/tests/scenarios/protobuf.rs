//! Protobuf request bodies as client-go's protobuf serializer writes them for built-in kinds:
//! DeleteOptions on DELETE and on a collection's DELETE, a Scale on PUT, an Eviction, objects
//! of kinds outside kcache-proto (a Role, a PodDisruptionBudget); and a server-side apply of a
//! Scale.

use bytes::Bytes;
use kcache_proto::Envelope;
use kcache_proto::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta, Preconditions};
use prost::Message;
use serde_json::json;

use crate::script::{Script, config_map};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    Envelope {
        api_version: api_version.into(),
        kind: kind.into(),
        raw: Bytes::from(raw),
        content_type: String::new(),
    }
    .encode_to_bytes()
    .to_vec()
}

fn delete_options(uid: Option<&str>, dry_run: bool) -> Vec<u8> {
    let opts = DeleteOptions {
        preconditions: uid.map(|u| Preconditions {
            uid: Some(u.into()),
            resource_version: None,
        }),
        propagation_policy: Some("Background".into()),
        dry_run: if dry_run {
            vec!["All".into()]
        } else {
            Vec::new()
        },
        ..Default::default()
    };
    envelope("meta.k8s.io/v1", "DeleteOptions", opts.encode_to_vec())
}

fn field(tag: u32, bytes: &[u8], out: &mut Vec<u8>) {
    prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, out);
    prost::encoding::encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

impl Script<'_> {
    async fn pb(
        &mut self,
        label: &str,
        method: &str,
        path: &str,
        body: Vec<u8>,
    ) -> anyhow::Result<kcache_conformance::Response> {
        let r = self
            .t
            .send_raw(method, path, Some(PROTOBUF), Some(body))
            .await?;
        self.note(format!(
            "{label}: {} {}",
            r.status,
            kcache_conformance::describe(&r.body)
        ));
        Ok(r)
    }
}

pub(crate) async fn protobuf_bodies(s: &mut Script<'_>) -> anyhow::Result<()> {
    let cms = s.core("configmaps");
    for name in ["a", "b", "c"] {
        let mut cm = config_map(name, json!({"k": "v"}));
        cm["metadata"]["labels"] = json!({"x": "y"});
        s.req(&format!("create {name}"), "POST", &cms, Some(cm))
            .await?;
    }
    s.pb(
        "delete dry run",
        "DELETE",
        &format!("{cms}/a"),
        delete_options(None, true),
    )
    .await?;
    s.req("get after dry run", "GET", &format!("{cms}/a"), None)
        .await?;
    let uid = "00000000-0000-0000-0000-000000000000";
    s.pb(
        "delete precondition",
        "DELETE",
        &format!("{cms}/a"),
        delete_options(Some(uid), false),
    )
    .await?;
    s.pb(
        "delete",
        "DELETE",
        &format!("{cms}/a"),
        delete_options(None, false),
    )
    .await?;
    s.req("get after", "GET", &format!("{cms}/a"), None).await?;
    let r = s
        .pb(
            "deletecollection dry run",
            "DELETE",
            &format!("{cms}?labelSelector=x%3Dy"),
            delete_options(None, true),
        )
        .await?;
    s.note(format!(
        "listed {}",
        r.body["items"].as_array().map_or(0, Vec::len)
    ));
    let r = s
        .req(
            "list after",
            "GET",
            &format!("{cms}?labelSelector=x%3Dy"),
            None,
        )
        .await?;
    s.note(format!(
        "still {}",
        r.body["items"].as_array().map_or(0, Vec::len)
    ));

    let deploys = format!("/apis/apps/v1/namespaces/{}/deployments", s.ns);
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                   "spec": {"selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}},
                                         "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    s.req("create deployment", "POST", &deploys, Some(d))
        .await?;
    let meta = ObjectMeta {
        name: Some("web".into()),
        namespace: Some(s.ns.clone()),
        ..Default::default()
    }
    .encode_to_vec();
    let mut raw = Vec::new();
    field(1, &meta, &mut raw);
    field(2, &[0x08, 0x03], &mut raw);
    let r = s
        .pb(
            "put scale",
            "PUT",
            &format!("{deploys}/web/scale"),
            envelope("autoscaling/v1", "Scale", raw),
        )
        .await?;
    s.field("scale replicas", &r.body, "/spec/replicas");
    let apply = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                       "metadata": {"name": "web", "namespace": s.ns}, "spec": {"replicas": 5}});
    let r = s
        .raw(
            "apply scale",
            "PATCH",
            &format!("{deploys}/web/scale?fieldManager=scaler&force=true"),
            "application/apply-patch+yaml",
            &apply.to_string(),
        )
        .await?;
    s.field("applied replicas", &r.body, "/spec/replicas");
    let r = s
        .req("get deployment", "GET", &format!("{deploys}/web"), None)
        .await?;
    s.field("deployment replicas", &r.body, "/spec/replicas");

    let pods = s.core("pods");
    let p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                   "spec": {"containers": [{"name": "c", "image": "i"}]}});
    s.req("create pod", "POST", &pods, Some(p)).await?;
    let meta = ObjectMeta {
        name: Some("p".into()),
        ..Default::default()
    }
    .encode_to_vec();
    let opts = DeleteOptions::default().encode_to_vec();
    let mut raw = Vec::new();
    field(1, &meta, &mut raw);
    field(2, &opts, &mut raw);
    s.pb(
        "evict",
        "POST",
        &format!("{pods}/p/eviction"),
        envelope("policy/v1", "Eviction", raw),
    )
    .await?;
    s.req("get pod", "GET", &format!("{pods}/p"), None).await?;

    // A kind kcache-proto has no type for: a Role (rbac.authorization.k8s.io/v1) and a
    // PodDisruptionBudget (policy/v1, an IntOrString and a selector).
    let meta = ObjectMeta {
        name: Some("r".into()),
        labels: [("app".to_owned(), "web".to_owned())].into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut rule = Vec::new();
    field(1, b"get", &mut rule);
    field(1, b"watch", &mut rule);
    field(2, b"apps", &mut rule);
    field(3, b"deployments", &mut rule);
    let mut raw = Vec::new();
    field(1, &meta, &mut raw);
    field(2, &rule, &mut raw);
    let roles = format!(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{}/roles",
        s.ns
    );
    let r = s
        .pb(
            "create role",
            "POST",
            &roles,
            envelope("rbac.authorization.k8s.io/v1", "Role", raw),
        )
        .await?;
    s.field("role rules", &r.body, "/rules");
    s.field("role labels", &r.body, "/metadata/labels");
    let mut ios = vec![0x08, 0x01];
    field(3, b"50%", &mut ios);
    let mut entry = Vec::new();
    field(1, b"app", &mut entry);
    field(2, b"web", &mut entry);
    let mut selector = Vec::new();
    field(1, &entry, &mut selector);
    let mut spec = Vec::new();
    field(1, &ios, &mut spec);
    field(2, &selector, &mut spec);
    let meta = ObjectMeta {
        name: Some("budget".into()),
        ..Default::default()
    }
    .encode_to_vec();
    let mut raw = Vec::new();
    field(1, &meta, &mut raw);
    field(2, &spec, &mut raw);
    let pdbs = format!("/apis/policy/v1/namespaces/{}/poddisruptionbudgets", s.ns);
    let r = s
        .pb(
            "create pdb",
            "POST",
            &pdbs,
            envelope("policy/v1", "PodDisruptionBudget", raw),
        )
        .await?;
    s.field("pdb spec", &r.body, "/spec");
    Ok(())
}
