//! The write helpers on the embedded server: what `apply_owned` did, the field manager and
//! the Events' reporter set per manager and per controller, and the metrics server on a
//! listener bound beforehand.

mod common;

use std::sync::Arc;

use anyhow::{Result, anyhow};
use common::{NS, eventually, get};
use k8s_openapi::{
    ByteString,
    api::core::v1::{ConfigMap, Secret},
};
use kcache_client::Client;
use kcache_runtime::{Action, Context, Event, EventType, Manager, api, manager};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn secret(name: &str, value: &str) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(name.to_owned());
    let value = ByteString(value.as_bytes().to_vec());
    s.data = Some([("v".to_owned(), value)].into());
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_owned_says_what_it_did_under_the_configured_field_manager_and_reporter() -> Result<()>
{
    let server = common::server().await?;
    server
        .handle()
        .create(
            &format!("/api/v1/namespaces/{NS}/configmaps"),
            json!({"metadata": {"name": "app"}}),
        )
        .map_err(|e| anyhow!("{e}"))?;
    let config = manager::Config::new("helpers")
        .namespace(NS)
        .field_manager("legacy-operator")
        .event_reporter("legacy-operator/unused");
    let manager = Manager::new(Client::from_url(&server.url())?, config)?;
    let verbs = Arc::new(Mutex::new(Vec::<String>::new()));
    manager
        .controller::<ConfigMap>()
        .owns::<Secret>()
        .event_reporter("legacy-operator/apps")
        .build({
            let verbs = Arc::clone(&verbs);
            move |_cm, ctx: Context<ConfigMap>| {
                let verbs = Arc::clone(&verbs);
                async move {
                    let step = verbs.lock().len();
                    // Create, apply the same again, then change it.
                    let value = if step < 2 { "one" } else { "two" };
                    let applied = ctx.apply_owned(secret("app", value)).await?;
                    if step == 0 {
                        let event = Event {
                            type_: EventType::Normal,
                            reason: applied.verb().into(),
                            note: None,
                            action: "Apply".into(),
                            secondary: None,
                        };
                        ctx.publish(event).await;
                    }
                    verbs.lock().push(applied.verb().to_owned());
                    let next = if step < 2 {
                        Action::Requeue
                    } else {
                        Action::Done
                    };
                    Ok::<_, api::Error>(next)
                }
            }
        })?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    eventually("three reconciles", || verbs.lock().len() >= 3).await?;
    assert_eq!(verbs.lock()[..3], ["Created", "Unchanged", "Updated"]);

    let h = server.handle();
    let s = h
        .get(&format!("/api/v1/namespaces/{NS}/secrets/app"))
        .map_err(|e| anyhow!("{e}"))?;
    let managers: Vec<&str> = s["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["manager"].as_str())
        .collect();
    assert_eq!(managers, ["legacy-operator"], "{s}");
    let reporters = || -> Result<Vec<String>> {
        let (events, _) = h
            .list(&format!("/apis/events.k8s.io/v1/namespaces/{NS}/events"))
            .map_err(|e| anyhow!("{e}"))?;
        Ok(events
            .iter()
            .filter_map(|e| e["reportingController"].as_str().map(str::to_owned))
            .collect())
    };
    eventually("the Event", || reporters().is_ok_and(|r| !r.is_empty())).await?;
    assert_eq!(reporters()?, ["legacy-operator/apps"]);
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_server_runs_on_a_listener_bound_beforehand() -> Result<()> {
    let server = common::server().await?;
    // Bound here and kept: no window in which another process could take the port.
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let manager = Manager::new(
        Client::from_url(&server.url())?,
        manager::Config::new("helpers").namespace(NS),
    )?
    .with_metrics_listener(listener)?;
    assert_eq!(manager.metrics_addr(), Some(addr));
    manager
        .controller::<ConfigMap>()
        .build(|_cm, _ctx: Context<ConfigMap>| async { Ok::<_, api::Error>(Action::Done) })?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    let (code, body) = get(addr, "/metrics").await?;
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("controller_runtime_reconcile_total"),
        "{body}"
    );
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}
