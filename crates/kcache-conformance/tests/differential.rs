//! Differential conformance: one scripted scenario (creates, updates, conflicts, deletes, paged
//! lists, selectors, watches from an old RV, the streaming initial list, a too-large RV) is run
//! against the embedded `kcache-apiserver` and the upstream kube-apiserver described by
//! `KCACHE_UPSTREAM_KUBECONFIG` (started by `scripts/kube-up.sh`; `scripts/test.sh` exports
//! it). The normalised transcripts must be identical, except for the differences listed in
//! [`DELIBERATE`], each of which must still occur (so the list stays honest).
//!
//! A missing upstream server is a failure, never a silent skip: only `KCACHE_UPSTREAM=skip`
//! (`scripts/quick-test.sh`) skips the test, with a line on stderr.

use kcache_conformance::{Target, describe, event_lines, item_names, upstream_kubeconfig};
use serde_json::{Value, json};

/// Lines where the two servers differ on purpose, as (embedded line, upstream line). Empty:
/// every step answers the same.
const DELIBERATE: &[(&str, &str)] = &[];

fn push(out: &mut Vec<String>, line: String) {
    eprintln!("{line}");
    out.push(line);
}

async fn scenario(t: &Target, ns: &str) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let cm = |name: &str, app: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": app}}, "data": {"k": "v"}});

    let r = t
        .send(
            "POST",
            "/api/v1/namespaces",
            Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})),
        )
        .await?;
    push(
        &mut out,
        format!("create namespace: {} {}", r.status, describe(&r.body)),
    );
    let start_rv = r
        .body
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("0")
        .to_owned();

    let mut a_rv = String::new();
    for (name, app) in [("a", "x"), ("b", "y"), ("c", "x")] {
        let r = t.send("POST", &cms, Some(cm(name, app))).await?;
        push(
            &mut out,
            format!("create {name}: {} {}", r.status, describe(&r.body)),
        );
        if name == "a" {
            a_rv = r
                .body
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
        }
    }
    let r = t.send("POST", &cms, Some(cm("a", "x"))).await?;
    push(
        &mut out,
        format!("create a again: {} {}", r.status, describe(&r.body)),
    );
    let r = t.send("GET", &format!("{cms}/missing"), None).await?;
    push(
        &mut out,
        format!("get missing: {} {}", r.status, describe(&r.body)),
    );
    let r = t
        .send(
            "POST",
            &cms,
            Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})),
        )
        .await?;
    push(
        &mut out,
        format!("create without name: {} {}", r.status, describe(&r.body)),
    );

    let mut a = cm("a", "x");
    a["metadata"]["resourceVersion"] = json!(a_rv);
    a["data"]["k"] = json!("v2");
    let r = t.send("PUT", &format!("{cms}/a"), Some(a.clone())).await?;
    push(
        &mut out,
        format!(
            "update a: {} {} data={}",
            r.status,
            describe(&r.body),
            r.body.pointer("/data/k").unwrap_or(&Value::Null)
        ),
    );
    let r = t.send("PUT", &format!("{cms}/a"), Some(a)).await?;
    push(
        &mut out,
        format!(
            "update a with a stale RV: {} {}",
            r.status,
            describe(&r.body)
        ),
    );
    let r = t
        .send(
            "PATCH",
            &format!("{cms}/b"),
            Some(json!({"data": {"extra": "1"}})),
        )
        .await?;
    push(
        &mut out,
        format!(
            "merge-patch b: {} {} data={}",
            r.status,
            describe(&r.body),
            r.body.get("data").unwrap_or(&Value::Null)
        ),
    );
    let r = t.send("DELETE", &format!("{cms}/c"), None).await?;
    push(&mut out, format!("delete c: {}", r.status));
    let r = t.send("DELETE", &format!("{cms}/c"), None).await?;
    push(
        &mut out,
        format!("delete c again: {} {}", r.status, describe(&r.body)),
    );

    let r = t.send("GET", &format!("{cms}?limit=1"), None).await?;
    let token = r
        .body
        .pointer("/metadata/continue")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    push(
        &mut out,
        format!(
            "list limit=1: {} items={:?} remaining={} continue={}",
            r.status,
            item_names(&r.body),
            r.body
                .pointer("/metadata/remainingItemCount")
                .unwrap_or(&Value::Null),
            !token.is_empty()
        ),
    );
    let r = t
        .send("GET", &format!("{cms}?limit=1&continue={token}"), None)
        .await?;
    push(
        &mut out,
        format!(
            "list continue: {} items={:?} continue={}",
            r.status,
            item_names(&r.body),
            r.body
                .pointer("/metadata/continue")
                .and_then(Value::as_str)
                .is_some_and(|c| !c.is_empty())
        ),
    );
    let r = t
        .send("GET", &format!("{cms}?labelSelector=app%3Dx"), None)
        .await?;
    push(
        &mut out,
        format!("list app=x: {} items={:?}", r.status, item_names(&r.body)),
    );
    let r = t
        .send(
            "GET",
            &format!("{cms}?labelSelector=app%20in%20(x,y),app!%3Dy"),
            None,
        )
        .await?;
    push(
        &mut out,
        format!(
            "list app in (x,y),app!=y: {} items={:?}",
            r.status,
            item_names(&r.body)
        ),
    );
    let r = t
        .send(
            "GET",
            &format!("{cms}?fieldSelector=metadata.name%3Db"),
            None,
        )
        .await?;
    push(
        &mut out,
        format!("list name=b: {} items={:?}", r.status, item_names(&r.body)),
    );

    let r = t
        .send(
            "GET",
            &format!("{cms}?watch=true&resourceVersion={start_rv}&timeoutSeconds=1"),
            None,
        )
        .await?;
    push(
        &mut out,
        format!(
            "watch from the namespace's RV: {} {:?}",
            r.status,
            event_lines(&r.events)
        ),
    );
    let r = t
        .send(
            "GET",
            &format!("{cms}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"),
            None,
        )
        .await?;
    push(
        &mut out,
        format!(
            "streaming initial list: {} {:?}",
            r.status,
            event_lines(&r.events)
        ),
    );
    let r = t
        .send(
            "GET",
            &format!("{cms}?watch=true&sendInitialEvents=true&timeoutSeconds=1"),
            None,
        )
        .await?;
    push(
        &mut out,
        format!(
            "sendInitialEvents without resourceVersionMatch: {} {}",
            r.status,
            describe(&r.body)
        ),
    );
    let r = t
        .send(
            "GET",
            &format!("{cms}?resourceVersion=99999999&resourceVersionMatch=NotOlderThan"),
            None,
        )
        .await?;
    push(
        &mut out,
        format!("list at a future RV: {} {}", r.status, describe(&r.body)),
    );
    let r = t
        .send("GET", &format!("{cms}?resourceVersionMatch=Exact"), None)
        .await?;
    push(
        &mut out,
        format!("Exact without RV: {} {}", r.status, describe(&r.body)),
    );
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_and_upstream_servers_answer_the_scenario_alike() -> anyhow::Result<()> {
    let Some(upstream_cfg) = upstream_kubeconfig("the differential scenario") else {
        return Ok(());
    };
    let ns = format!("kcache-diff-{}", std::process::id());

    let embedded = kcache_apiserver::ApiServer::builder()
        .build()
        .start()
        .await?;
    let dir = std::env::temp_dir().join(format!("kcache-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let embedded_cfg = dir.join("embedded.kubeconfig");
    embedded.write_kubeconfig(&embedded_cfg)?;

    let ours = scenario(&Target::from_kubeconfig(&embedded_cfg).await?, &ns).await?;
    let theirs = scenario(&Target::from_kubeconfig(&upstream_cfg).await?, &ns).await?;
    embedded.shutdown().await;

    let mut unexpected = Vec::new();
    let mut seen = vec![false; DELIBERATE.len()];
    for (o, u) in ours.iter().zip(&theirs) {
        if o == u {
            continue;
        }
        match DELIBERATE.iter().position(|(eo, eu)| eo == o && eu == u) {
            Some(i) => seen[i] = true,
            None => unexpected.push(format!("  embedded: {o}\n  upstream: {u}")),
        }
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
            "a listed deliberate difference no longer occurs, remove it: {:?}",
            DELIBERATE[i]
        );
    }
    // The transcript is not trivially empty or all-errors.
    assert!(
        theirs.iter().any(|l| l.starts_with("create a: 201")),
        "{theirs:#?}"
    );
    Ok(())
}
