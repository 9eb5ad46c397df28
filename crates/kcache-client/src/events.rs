//! An event recorder for `events.k8s.io/v1` Events (client-go's `tools/events`, in the shape of
//! kube-runtime's `Recorder`): [`Recorder::publish`] an [`Event`] about an object, and
//! `kubectl describe` shows it under `Events`.
//!
//! - **Series**: an identical event (same type, reason, action, note, regarding and related
//!   object, from the same [`Reporter`]) published again within 6 minutes of its last
//!   occurrence is not created again: the existing Event is PATCHed (JSON merge patch) with
//!   `series.count` (2, 3, …) and `series.lastObservedTime`, as client-go's event series do.
//!   After 6 minutes without it, the next occurrence creates a new Event. If the Event to
//!   patch is gone (404: expired or deleted), a new one is created.
//! - **Limits**: `note` is truncated to 1 KiB (at a character boundary), the most the API server
//!   accepts; `reason` and `action` must be at most 128 characters (not checked here; the
//!   server answers 422).
//! - **Failures** are logged (`tracing`, at warn level) and never panic: publishing an event is
//!   best effort, as in client-go. [`Recorder::try_publish`] returns the error instead.
//! - **Retries**: requests go through [`Client::kube_for_writes`], with kube-client's default
//!   retries of 429/503/504.
//! - Events are created in the namespace of the object they are about, or in `default` for a
//!   cluster-scoped object. RBAC: `create` and `patch` on `events` in `events.k8s.io`.
//!
//! # Why not kube-runtime's `Recorder`
//!
//! kube-runtime 5.0's `events::Recorder` has this API and the same 6-minute series cache, but
//! using it would make kcache-client depend on all of kube-runtime (its watcher, reflector
//! and controller machinery and their dependencies) for about 150 lines, and it differs where
//! it matters here: it does not truncate the note (a longer note is a 422, so the event is
//! lost), it patches the whole cached Event back instead of only the series, it does not
//! recover when the Event to patch was deleted (the series fails until the cache entry
//! expires), and its `publish` returns the error where client-go's recorder logs it. So the
//! recorder is written here, on kube-client's `Api`, with kube-runtime's names (`Recorder`,
//! `Reporter`, `Event`, `EventType`) so code moves between the two easily.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcache_client::events::{Event, EventType, Recorder, Reporter};
//! use kube_core::Resource;
//!
//! # #[allow(dead_code)]
//! # async fn run(client: kcache_client::Client, cm: ConfigMap) {
//! let recorder = Recorder::new(
//!     &client,
//!     Reporter {
//!         controller: "example.com/configmap-controller".into(),
//!         instance: std::env::var("POD_NAME").ok(),
//!     },
//! );
//! let event = Event {
//!     type_: EventType::Normal,
//!     reason: "Reconciled".into(),
//!     note: Some("annotation written".into()),
//!     action: "Reconcile".into(),
//!     secondary: None,
//! };
//! recorder.publish(&event, &cm.object_ref(&())).await; // errors are logged
//! # }
//! ```

use std::{collections::HashMap, sync::Arc, time::Duration};

use k8s_openapi::api::{
    core::v1::ObjectReference,
    events::v1::{Event as K8sEvent, EventSeries},
};
use kube_client::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use kube_core::ObjectMeta;
use serde_json::json;
use tokio::{sync::Mutex, time::Instant};
use tracing::{debug, warn};

use crate::{Client, lease::micro_now};

/// How long an event's series stays open after its last occurrence (client-go's value).
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// The most bytes of `note` the API server accepts.
pub const MAX_NOTE_BYTES: usize = 1024;

/// An event's severity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something may need attention.
    Warning,
}

impl EventType {
    /// The wire value, `Normal` or `Warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// What to publish about an object.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Normal or Warning (`kubectl describe`: Type).
    pub type_: EventType,
    /// Why the action was taken, in `PascalCase`, at most 128 characters (Reason).
    pub reason: String,
    /// A human-readable description; truncated to [`MAX_NOTE_BYTES`] (Message).
    pub note: Option<String>,
    /// What was done (or failed), in `PascalCase`, at most 128 characters.
    pub action: String,
    /// Another object the action concerns (the Event's `related`).
    pub secondary: Option<ObjectReference>,
}

/// Who publishes: the Event's `reportingController` and `reportingInstance`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reporter {
    /// The controller's name, e.g. `example.com/my-controller`.
    pub controller: String,
    /// This replica, e.g. the pod name; `None` uses [`controller`](Self::controller).
    pub instance: Option<String>,
}

/// What makes two events identical (one series). The references are kept as their JSON,
/// since `ObjectReference` is not `Hash`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    type_: EventType,
    reason: String,
    note: Option<String>,
    action: String,
    secondary: Option<String>,
    regarding: String,
}

impl Key {
    fn new(event: &Event, regarding: &ObjectReference) -> Self {
        let json = |r: &ObjectReference| serde_json::to_string(r).unwrap_or_default();
        Self {
            type_: event.type_,
            reason: event.reason.clone(),
            note: event.note.clone(),
            action: event.action.clone(),
            secondary: event.secondary.as_ref().map(json),
            regarding: json(regarding),
        }
    }
}

/// An event already created: where it is and how often it was seen.
#[derive(Clone, Debug)]
struct Series {
    namespace: String,
    name: String,
    count: i32,
    last: Instant,
}

/// What one publish does.
#[derive(Debug, PartialEq, Eq)]
enum Plan {
    Create,
    Patch {
        namespace: String,
        name: String,
        count: i32,
    },
}

/// Publishes `events.k8s.io/v1` Events with client-go's series aggregation; see the
/// [module documentation](self). Cheap to clone (clones share the series cache).
#[derive(Clone)]
pub struct Recorder {
    client: kube_client::Client,
    reporter: Reporter,
    series: Arc<Mutex<HashMap<Key, Series>>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("reporter", &self.reporter)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder that publishes as `reporter` through `client`'s
    /// [`kube_for_writes`](Client::kube_for_writes).
    pub fn new(client: &Client, reporter: Reporter) -> Self {
        Self {
            client: client.kube_for_writes().clone(),
            reporter,
            series: Arc::default(),
        }
    }

    /// The reporter events are published as.
    pub fn reporter(&self) -> &Reporter {
        &self.reporter
    }

    /// Publishes `event` about `regarding`: creates an Event, or counts one more occurrence of
    /// an identical one seen within [`SERIES_WINDOW`]. A failure is logged at warn level;
    /// publishing never panics.
    pub async fn publish(&self, event: &Event, regarding: &ObjectReference) {
        if let Err(e) = self.try_publish(event, regarding).await {
            warn!(
                reason = %event.reason,
                action = %event.action,
                regarding = ?regarding.name,
                namespace = ?regarding.namespace,
                error = %e,
                "could not publish event"
            );
        }
    }

    /// Like [`publish`](Self::publish), returning the API error instead of logging it.
    ///
    /// # Errors
    /// kube-client's error when the server refuses the create or the patch, or cannot be
    /// reached (after kube-client's retries).
    pub async fn try_publish(
        &self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube_client::Error> {
        let mut event = event.clone();
        if let Some(note) = &mut event.note {
            truncate_note(note);
        }
        let key = Key::new(&event, regarding);
        // Held across the request, so concurrent publishes of one series count in order.
        let mut cache = self.series.lock().await;
        let now = Instant::now();
        let plan = plan(&mut cache, &key, now);
        if let Plan::Patch {
            namespace,
            name,
            count,
        } = &plan
        {
            let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), namespace);
            let patch = json!({ "series": EventSeries {
                count: *count,
                last_observed_time: micro_now(),
            }});
            match api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    debug!(%namespace, %name, count, "event series patched");
                    cache.insert(
                        key,
                        Series {
                            namespace: namespace.clone(),
                            name: name.clone(),
                            count: *count,
                            last: now,
                        },
                    );
                    return Ok(());
                }
                Err(kube_client::Error::Api(status)) if status.is_not_found() => {
                    debug!(%namespace, %name, "event of the series is gone; creating a new one");
                    cache.remove(&key);
                }
                Err(e) => return Err(e),
            }
        }
        let created = self.create(&event, regarding).await?;
        cache.insert(key, created.with_last(now));
        Ok(())
    }

    async fn create(
        &self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> Result<Series, kube_client::Error> {
        let namespace = regarding
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        let event_time = micro_now();
        let base = regarding
            .name
            .as_deref()
            .unwrap_or(&self.reporter.controller);
        let name = format!(
            "{base}.{:x}",
            event_time.0.as_nanosecond().max(0).unsigned_abs()
        );
        let k8s = K8sEvent {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            event_time: Some(event_time),
            type_: Some(event.type_.as_str().to_owned()),
            reason: Some(event.reason.clone()),
            action: Some(event.action.clone()),
            note: event.note.clone(),
            regarding: Some(regarding.clone()),
            related: event.secondary.clone(),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            ..K8sEvent::default()
        };
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        let created = api.create(&PostParams::default(), &k8s).await?;
        let name = created.metadata.name.unwrap_or_default();
        debug!(%namespace, %name, "event created");
        Ok(Series {
            namespace,
            name,
            count: 1,
            last: Instant::now(),
        })
    }
}

impl Series {
    fn with_last(mut self, last: Instant) -> Self {
        self.last = last;
        self
    }
}

/// Drops the series whose window has closed, then decides whether `key` starts a new Event or
/// continues a series.
fn plan(cache: &mut HashMap<Key, Series>, key: &Key, now: Instant) -> Plan {
    cache.retain(|_, s| now.saturating_duration_since(s.last) < SERIES_WINDOW);
    match cache.get(key) {
        Some(s) => Plan::Patch {
            namespace: s.namespace.clone(),
            name: s.name.clone(),
            // The first occurrence is count 1, so the first patch says 2 (client-go).
            count: s.count.saturating_add(1).max(2),
        },
        None => Plan::Create,
    }
}

/// Cuts `note` to at most [`MAX_NOTE_BYTES`], at a character boundary.
fn truncate_note(note: &mut String) {
    if note.len() > MAX_NOTE_BYTES {
        let mut end = MAX_NOTE_BYTES;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(reason: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some("n".into()),
            action: "Reconcile".into(),
            secondary: None,
        }
    }

    fn regarding() -> ObjectReference {
        ObjectReference {
            name: Some("a".into()),
            namespace: Some("ns".into()),
            ..ObjectReference::default()
        }
    }

    fn key(reason: &str) -> Key {
        Key::new(&event(reason), &regarding())
    }

    fn series(count: i32, last: Instant) -> Series {
        Series {
            namespace: "ns".into(),
            name: "a.1".into(),
            count,
            last,
        }
    }

    #[test]
    fn an_identical_event_within_six_minutes_patches_the_series() {
        let now = Instant::now();
        let mut cache = HashMap::from([(key("R"), series(1, now))]);
        let later = now + SERIES_WINDOW - Duration::from_secs(1);
        assert_eq!(
            plan(&mut cache, &key("R"), later),
            Plan::Patch {
                namespace: "ns".into(),
                name: "a.1".into(),
                count: 2
            }
        );
        cache.insert(key("R"), series(2, later));
        let Plan::Patch { count, .. } = plan(&mut cache, &key("R"), later) else {
            panic!("a series")
        };
        assert_eq!(count, 3);
    }

    #[test]
    fn an_event_after_six_minutes_quiet_creates_a_new_one() {
        let now = Instant::now();
        let mut cache = HashMap::from([(key("R"), series(5, now))]);
        assert_eq!(
            plan(&mut cache, &key("R"), now + SERIES_WINDOW),
            Plan::Create
        );
        assert!(cache.is_empty(), "the closed series was dropped");
    }

    #[test]
    fn a_different_event_is_not_part_of_the_series() {
        let now = Instant::now();
        let mut cache = HashMap::from([(key("R"), series(1, now))]);
        assert_eq!(plan(&mut cache, &key("Other"), now), Plan::Create);
        let mut other_note = event("R");
        other_note.note = Some("different".into());
        assert_eq!(
            plan(&mut cache, &Key::new(&other_note, &regarding()), now),
            Plan::Create
        );
        let mut warning = event("R");
        warning.type_ = EventType::Warning;
        assert_eq!(
            plan(&mut cache, &Key::new(&warning, &regarding()), now),
            Plan::Create
        );
        let mut related = event("R");
        related.secondary = Some(regarding());
        assert_eq!(
            plan(&mut cache, &Key::new(&related, &regarding()), now),
            Plan::Create
        );
        let other_object = ObjectReference {
            name: Some("b".into()),
            ..regarding()
        };
        assert_eq!(
            plan(&mut cache, &Key::new(&event("R"), &other_object), now),
            Plan::Create
        );
        assert!(matches!(
            plan(&mut cache, &key("R"), now),
            Plan::Patch { .. }
        ));
    }

    #[test]
    fn note_is_truncated_to_one_kib_at_a_character_boundary() {
        let mut ascii = "x".repeat(MAX_NOTE_BYTES + 10);
        truncate_note(&mut ascii);
        assert_eq!(ascii.len(), MAX_NOTE_BYTES);
        // 'é' is two bytes: 1023 bytes of them plus one would split a character.
        let mut wide = format!("x{}", "é".repeat(MAX_NOTE_BYTES));
        truncate_note(&mut wide);
        assert_eq!(wide.len(), MAX_NOTE_BYTES - 1);
        assert!(wide.ends_with('é'));
        let mut short = "short".to_owned();
        truncate_note(&mut short);
        assert_eq!(short, "short");
    }
}
