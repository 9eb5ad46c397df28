//! The events.k8s.io/v1 recorder against the embedded and (when requested) the upstream server:
//! creation, series aggregation by PATCH, note truncation, recovery when the series' Event was
//! deleted, and failures that are reported, not panics.

mod common;

use anyhow::{Context, Result, ensure};
use common::TestServer;
use k8s_openapi::api::core::v1::ObjectReference;
use kcache_client::events::{Event, EventType, MAX_NOTE_BYTES, Recorder, Reporter};
use serde_json::{Value, json};

fn reporter() -> Reporter {
    Reporter {
        controller: "kcache.dev/test-controller".into(),
        instance: Some("test-0".into()),
    }
}

fn event(reason: &str, note: &str) -> Event {
    Event {
        type_: EventType::Normal,
        reason: reason.into(),
        note: Some(note.into()),
        action: "Reconcile".into(),
        secondary: None,
    }
}

/// A reference to a new ConfigMap `name` in the test namespace.
async fn config_map_ref(s: &TestServer, name: &str) -> Result<ObjectReference> {
    let cm = s.create_cm(name, json!({}), json!({"k": "v"})).await?;
    Ok(ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: Some(name.into()),
        namespace: Some(s.ns.clone()),
        uid: cm["metadata"]["uid"].as_str().map(str::to_owned),
        resource_version: cm["metadata"]["resourceVersion"]
            .as_str()
            .map(str::to_owned),
        ..ObjectReference::default()
    })
}

/// The namespace's events.k8s.io/v1 Events about `regarding` (by name), oldest first.
async fn events_about(s: &TestServer, regarding: &str) -> Result<Vec<Value>> {
    let path = format!("/apis/events.k8s.io/v1/namespaces/{}/events", s.ns);
    let list = s.request("GET", &path, None).await?;
    let mut items: Vec<Value> = list["items"]
        .as_array()
        .context("an events list")?
        .iter()
        .filter(|e| e["regarding"]["name"] == regarding)
        .cloned()
        .collect();
    items.sort_by_key(|e| {
        e["metadata"]["creationTimestamp"]
            .as_str()
            .map(str::to_owned)
    });
    Ok(items)
}

#[tokio::test]
async fn first_event_is_created_with_the_reporter_and_regarding_object() -> Result<()> {
    for s in TestServer::all().await? {
        let regarding = config_map_ref(&s, "first").await?;
        let recorder = Recorder::new(&s.client, reporter());
        recorder
            .try_publish(&event("Reconciled", "all good"), &regarding)
            .await?;
        let events = events_about(&s, "first").await?;
        ensure!(events.len() == 1, "{}: {events:?}", s.name);
        let e = &events[0];
        ensure!(e["type"] == "Normal", "{}: {e}", s.name);
        ensure!(
            e["reason"] == "Reconciled" && e["action"] == "Reconcile",
            "{}: {e}",
            s.name
        );
        ensure!(e["note"] == "all good", "{}: {e}", s.name);
        ensure!(
            e["reportingController"] == "kcache.dev/test-controller",
            "{}",
            s.name
        );
        ensure!(e["reportingInstance"] == "test-0", "{}: {e}", s.name);
        ensure!(e["regarding"]["kind"] == "ConfigMap", "{}: {e}", s.name);
        ensure!(
            e["regarding"]["uid"] == regarding.uid.as_deref().unwrap_or(""),
            "{}",
            s.name
        );
        ensure!(e["eventTime"].is_string(), "{}: {e}", s.name);
        ensure!(
            e["series"].is_null(),
            "{}: a single event has no series: {e}",
            s.name
        );
    }
    Ok(())
}

#[tokio::test]
async fn identical_events_are_aggregated_into_one_series() -> Result<()> {
    for s in TestServer::all().await? {
        let regarding = config_map_ref(&s, "series").await?;
        let recorder = Recorder::new(&s.client, reporter());
        for _ in 0..3 {
            recorder
                .try_publish(&event("Retrying", "backoff"), &regarding)
                .await?;
        }
        let events = events_about(&s, "series").await?;
        ensure!(
            events.len() == 1,
            "{}: one Event for three: {events:?}",
            s.name
        );
        let series = &events[0]["series"];
        ensure!(series["count"] == 3, "{}: {series}", s.name);
        ensure!(
            series["lastObservedTime"].is_string(),
            "{}: {series}",
            s.name
        );

        // Another reason, or another note, is another Event.
        recorder
            .try_publish(&event("Failed", "backoff"), &regarding)
            .await?;
        recorder
            .try_publish(&event("Retrying", "other note"), &regarding)
            .await?;
        let events = events_about(&s, "series").await?;
        ensure!(events.len() == 3, "{}: {events:?}", s.name);
    }
    Ok(())
}

#[tokio::test]
async fn note_is_truncated_to_one_kib() -> Result<()> {
    for s in TestServer::all().await? {
        let regarding = config_map_ref(&s, "long").await?;
        let recorder = Recorder::new(&s.client, reporter());
        let long = "y".repeat(5 * MAX_NOTE_BYTES);
        recorder
            .try_publish(&event("Long", &long), &regarding)
            .await
            .with_context(|| format!("{}: a long note must not be refused", s.name))?;
        let events = events_about(&s, "long").await?;
        ensure!(events.len() == 1, "{}", s.name);
        let note = events[0]["note"].as_str().unwrap_or_default();
        ensure!(
            note.len() == MAX_NOTE_BYTES && long.starts_with(note),
            "{}: note of {} bytes",
            s.name,
            note.len()
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_series_whose_event_was_deleted_starts_a_new_event() -> Result<()> {
    for s in TestServer::all().await? {
        let regarding = config_map_ref(&s, "gone").await?;
        let recorder = Recorder::new(&s.client, reporter());
        recorder.try_publish(&event("R", "n"), &regarding).await?;
        let first = events_about(&s, "gone").await?;
        let name = first[0]["metadata"]["name"].as_str().context("a name")?;
        let path = format!("/apis/events.k8s.io/v1/namespaces/{}/events/{name}", s.ns);
        s.request("DELETE", &path, None).await?;

        recorder.try_publish(&event("R", "n"), &regarding).await?;
        let events = events_about(&s, "gone").await?;
        ensure!(events.len() == 1, "{}: {events:?}", s.name);
        ensure!(
            events[0]["metadata"]["name"] != name,
            "{}: a new Event",
            s.name
        );
        ensure!(events[0]["series"].is_null(), "{}: {}", s.name, events[0]);
    }
    Ok(())
}

#[tokio::test]
async fn a_refused_event_is_an_error_from_try_publish_and_only_logged_by_publish() -> Result<()> {
    for s in TestServer::all().await? {
        let regarding = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            name: Some("x".into()),
            namespace: Some("no-such-namespace-kcache".into()),
            ..ObjectReference::default()
        };
        let recorder = Recorder::new(&s.client, reporter());
        let err = recorder
            .try_publish(&event("R", "n"), &regarding)
            .await
            .err()
            .with_context(|| format!("{}: an Event in a missing namespace", s.name))?;
        ensure!(
            matches!(&err, kube_client::Error::Api(status) if status.is_not_found()),
            "{}: {err}",
            s.name
        );
        // Logged, no panic, nothing returned.
        recorder.publish(&event("R", "n"), &regarding).await;
    }
    Ok(())
}
