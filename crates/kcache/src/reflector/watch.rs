//! Watches: the streaming initial list and the watch loop's single watch.

use std::{collections::HashMap, sync::Arc, sync::atomic::Ordering, time::Duration};

use futures::{FutureExt as _, StreamExt};
use kube_core::Resource;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::{Error, Reflector, handle::Counters, resync::Resync};
use crate::{
    lister_watcher::{
        self, INITIAL_EVENTS_END_ANNOTATION, ListerWatcher, WatchEvent, WatchParams, WatchStream,
    },
    store::{ObjectKey, ReflectorStore, meta_namespace_key},
};

/// A watch that lived at least this long may close and be re-watched at once (client-go's
/// "very short watch" bound); a shorter one backs off first. A watch into the store that has
/// delivered an event (a bookmark counts) and is still healthy this long after it opened
/// proves the server healthy: the reflector's backoffs start over, so that the next failure
/// (a 410 ending the watch, say) waits 800 ms, not the step a flapping phase before it
/// reached. client-go gets there by stepping less (a short watch with events re-watches at
/// once) and by resetting its backoff two minutes after the last reset.
const HEALTHY_WATCH: Duration = Duration::from_secs(1);

/// Events in a row that cannot be applied (unknown type, no key) before the watch is given up
/// as a protocol error instead of being read on forever.
const MAX_BAD_EVENTS_IN_A_ROW: u32 = 10;

/// Watch events taken in a row without waiting before the loop looks at cancellation and
/// resync again (and the store is flushed).
const MAX_BURST: u32 = 256;

/// Calls the store's [`flush`](ReflectorStore::flush) when dropped: at the end of a watch,
/// however it ends.
struct FlushOnDrop<'a, K>(&'a dyn ReflectorStore<K>);

impl<K> Drop for FlushOnDrop<'_, K> {
    fn drop(&mut self) {
        self.0.flush();
    }
}

/// How a watch stream ended without an error.
pub(crate) enum WatchEnd<K> {
    /// Closed by the server (or a broken connection).
    Closed {
        /// Events applied (bookmarks included).
        useful: u64,
        /// How long the stream was open.
        lived: Duration,
    },
    /// The initial-events-end bookmark arrived; the stream is still open.
    InitialEventsEnd(WatchStream<K>),
    /// Cancelled.
    Stopped,
}

/// Where watch events go: the store, or the temporary map of a streaming initial list.
enum Sink<'a, K> {
    Store,
    Temporary(&'a mut HashMap<ObjectKey, Arc<K>>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum EventKind {
    Added,
    Modified,
    Deleted,
}

impl<K, L> Reflector<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    fn watch_params(&self, send_initial_events: bool) -> WatchParams {
        let min = self.config.effective_min_watch_timeout().as_secs_f64();
        let timeout = min + rand::random::<f64>() * min;
        WatchParams {
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
            timeout: Some(timeout as u32),
            bookmarks: true,
            send_initial_events,
        }
    }

    /// Opens a watch under [`Config::watch_open_timeout`](super::Config::watch_open_timeout).
    /// `Ok(None)` when cancelled.
    async fn open_watch(
        &self,
        initial: bool,
        rv: &str,
        cancel: &CancellationToken,
    ) -> Result<Option<WatchStream<K>>, Error> {
        let params = self.watch_params(initial);
        let deadline = self.config.watch_open_timeout;
        let open = async {
            if deadline.is_zero() {
                Ok(self.lw.watch(&params, rv).await)
            } else {
                tokio::time::timeout(deadline, self.lw.watch(&params, rv)).await
            }
        };
        let opened = tokio::select! {
            () = cancel.cancelled() => return Ok(None),
            res = open => res,
        };
        match opened {
            Err(_elapsed) => Err(self.timeout("watch", deadline)),
            Ok(Err(source)) => Err(Error::WatchOpen {
                type_name: self.name.to_string(),
                source,
            }),
            Ok(Ok(stream)) => {
                self.shared.counters.watches.fetch_add(1, Ordering::Relaxed);
                self.shared.success();
                Ok(Some(stream))
            }
        }
    }

    /// The streaming initial list: `Ok(Some(stream))` once the store is replaced (the stream
    /// carries on), `Ok(None)` when cancelled. Errors come wrapped in [`Error::WatchList`].
    pub(crate) async fn watch_list(
        &self,
        cancel: &CancellationToken,
    ) -> Result<Option<WatchStream<K>>, Error> {
        let wrap = |e: Error| Error::WatchList {
            type_name: self.name.to_string(),
            source: Box::new(e),
        };
        let started = Instant::now();
        let rv = self.rewatch_resource_version();
        let Some(stream) = self.open_watch(true, &rv, cancel).await.map_err(wrap)? else {
            return Ok(None);
        };
        let mut temporary = HashMap::new();
        let mut list_rv = String::new();
        let mut on_rv = |rv: &str, past_added: bool| {
            if past_added {
                list_rv = rv.to_owned();
            }
        };
        let streamed = self.handle_watch(
            stream,
            Sink::Temporary(&mut temporary),
            cancel,
            None,
            &mut on_rv,
        );
        // A stream that keeps sending events but never the initial-events-end bookmark would
        // hold the informer unsynced forever (client-go only warns): the streaming list gets
        // the LIST's deadline, and past it the round falls back to a LIST.
        let deadline = self.config.list_timeout;
        let end = if deadline.is_zero() {
            streamed.await
        } else {
            match tokio::time::timeout(deadline, streamed).await {
                Ok(end) => end,
                Err(_) => Err(self.timeout("streaming list", deadline)),
            }
        }
        .map_err(wrap)?;
        match end {
            WatchEnd::InitialEventsEnd(stream) => {
                let items: Vec<Arc<K>> = temporary.into_values().collect();
                let count = items.len();
                debug!(items = count, resource_version = %list_rv, "streamed initial list");
                // Counted before the store has it, as a LIST is (see `list`).
                self.shared
                    .counters
                    .watch_lists
                    .fetch_add(1, Ordering::Relaxed);
                self.store
                    .replace(items, list_rv.clone())
                    .map_err(|source| Error::Store {
                        type_name: self.name.to_string(),
                        source,
                    })?;
                self.synced(list_rv, count, started);
                Ok(Some(stream))
            }
            WatchEnd::Stopped => Ok(None),
            WatchEnd::Closed { useful, lived } if useful == 0 && lived < HEALTHY_WATCH => {
                Err(wrap(Error::VeryShortWatch {
                    type_name: self.name.to_string(),
                }))
            }
            WatchEnd::Closed { .. } => Err(wrap(Error::StreamingListEndedEarly {
                type_name: self.name.to_string(),
            })),
        }
    }

    /// One watch from the last synced RV (or `stream`, left open by a streaming list) into the
    /// store. `Ok(true)`: closed after a healthy life, re-watch at once; `Ok(false)`: cancelled.
    pub(crate) async fn watch(
        &self,
        stream: Option<WatchStream<K>>,
        cancel: &CancellationToken,
        resync: &mut Resync,
    ) -> Result<bool, Error> {
        let stream = match stream {
            Some(s) => s,
            None => {
                // Never empty: a sync without a resourceVersion is refused (a watch from ""
                // would replay synthetic ADDED events in key order, not RV order).
                let rv = self.shared.rv.lock().last_sync.clone();
                match self.open_watch(false, &rv, cancel).await? {
                    Some(s) => s,
                    None => return Ok(false),
                }
            }
        };
        let end = self
            .handle_watch(stream, Sink::Store, cancel, Some(resync), &mut |rv, _| {
                self.shared.advance(rv.to_owned())
            })
            .await?;
        match end {
            WatchEnd::Stopped => Ok(false),
            WatchEnd::Closed { lived, .. } if lived >= HEALTHY_WATCH => Ok(true),
            WatchEnd::Closed { useful: 0, .. } => Err(Error::VeryShortWatch {
                type_name: self.name.to_string(),
            }),
            WatchEnd::Closed { useful, .. } => Err(Error::ShortWatch {
                type_name: self.name.to_string(),
                events: useful,
            }),
            WatchEnd::InitialEventsEnd(_) => Ok(true),
        }
    }

    /// Consumes one watch stream into `sink`. `on_rv(rv, past_added)` is called after each
    /// applied event; `past_added` turns true at the first event that is not an `ADDED`.
    async fn handle_watch(
        &self,
        mut stream: WatchStream<K>,
        mut sink: Sink<'_, K>,
        cancel: &CancellationToken,
        mut resync: Option<&mut Resync>,
        on_rv: &mut (dyn FnMut(&str, bool) + Send),
    ) -> Result<WatchEnd<K>, Error> {
        let started = Instant::now();
        let initial_list = matches!(sink, Sink::Temporary(_));
        let idle = self.config.watch_idle_timeout;
        let mut useful = 0u64;
        let mut bad_in_a_row = 0u32;
        let mut past_added = false;
        let mut proved_healthy = initial_list;
        // The store hears of the end of each burst of events (and of the watch, however it
        // ends): the informer wakes its handlers once per burst.
        let _flush = FlushOnDrop(&*self.store);
        let mut burst = 0u32;
        loop {
            // Events already read are taken without waiting (a bounded number in a row, so
            // that cancellation and resync still get their turn); before waiting, flush.
            let ready = if burst < MAX_BURST && !cancel.is_cancelled() {
                stream.next().now_or_never()
            } else {
                None
            };
            let item = match ready {
                Some(item) => {
                    burst += 1;
                    Ok(item)
                }
                None => {
                    burst = 0;
                    self.store.flush();
                    let next = async {
                        if idle.is_zero() {
                            Ok(stream.next().await)
                        } else {
                            tokio::time::timeout(idle, stream.next()).await
                        }
                    };
                    tokio::select! {
                        biased;
                        () = cancel.cancelled() => return Ok(WatchEnd::Stopped),
                        () = due(resync.as_deref()) => {
                            if let Some(r) = resync.as_deref_mut() {
                                self.resync(r)?;
                            }
                            continue;
                        }
                        item = next => item,
                    }
                }
            };
            if !proved_healthy && useful > 0 && started.elapsed() >= HEALTHY_WATCH {
                proved_healthy = true;
                self.watch_proved_healthy.store(true, Ordering::Relaxed);
            }
            let event = match item {
                Err(_elapsed) => {
                    return Err(Error::WatchIdle {
                        type_name: self.name.to_string(),
                        idle,
                    });
                }
                Ok(None) => break,
                Ok(Some(Ok(event))) => event,
                Ok(Some(Err(e))) if e.is_protocol() => {
                    self.bad_event(&mut bad_in_a_row, e.to_string())?;
                    continue;
                }
                Ok(Some(Err(e))) if e.is_transport() => {
                    debug!(error = %e, "watch stream broken");
                    break;
                }
                Ok(Some(Err(source))) => {
                    return Err(Error::WatchStream {
                        type_name: self.name.to_string(),
                        source,
                    });
                }
            };
            self.shared
                .counters
                .watch_events
                .fetch_add(1, Ordering::Relaxed);
            let c = &self.shared.counters;
            Counters::inc(match &event {
                WatchEvent::Added(_) => &c.added,
                WatchEvent::Modified(_) => &c.modified,
                WatchEvent::Deleted(_) => &c.deleted,
                WatchEvent::Bookmark(_) => &c.bookmarks,
                WatchEvent::Error(_) => &c.error_events,
            });
            let mut initial_events_end = false;
            let rv = match event {
                WatchEvent::Error(status) => {
                    return Err(Error::WatchStream {
                        type_name: self.name.to_string(),
                        source: lister_watcher::Error::api(*status, None),
                    });
                }
                WatchEvent::Bookmark(b) => {
                    past_added = true;
                    initial_events_end = b
                        .metadata
                        .annotations
                        .get(INITIAL_EVENTS_END_ANNOTATION)
                        .is_some_and(|v| v == "true");
                    if let Sink::Store = sink
                        && let Err(e) = self.store.bookmark(&b.metadata.resource_version)
                    {
                        self.report(&Error::BadEvent {
                            type_name: self.name.to_string(),
                            reason: e.to_string(),
                        });
                    }
                    Ok(b.metadata.resource_version)
                }
                WatchEvent::Added(obj) => self.apply(&mut sink, EventKind::Added, obj),
                WatchEvent::Modified(obj) => {
                    past_added = true;
                    self.apply(&mut sink, EventKind::Modified, obj)
                }
                WatchEvent::Deleted(obj) => {
                    past_added = true;
                    self.apply(&mut sink, EventKind::Deleted, obj)
                }
            };
            match rv {
                Ok(rv) => {
                    bad_in_a_row = 0;
                    useful += 1;
                    self.shared.success();
                    if rv.is_empty() {
                        self.report(&Error::BadEvent {
                            type_name: self.name.to_string(),
                            reason: "event without a resourceVersion; applied without \
                                     advancing the last synced RV"
                                .into(),
                        });
                    } else {
                        on_rv(&rv, past_added);
                    }
                }
                Err(reason) => self.bad_event(&mut bad_in_a_row, reason)?,
            }
            if initial_list && initial_events_end {
                return Ok(WatchEnd::InitialEventsEnd(stream));
            }
        }
        let lived = started.elapsed();
        if !proved_healthy && useful > 0 && lived >= HEALTHY_WATCH {
            self.watch_proved_healthy.store(true, Ordering::Relaxed);
        }
        debug!(events = useful, ?lived, "watch closed");
        Ok(WatchEnd::Closed { useful, lived })
    }

    /// Reports a dropped event; too many in a row end the watch as a protocol error.
    fn bad_event(&self, in_a_row: &mut u32, reason: String) -> Result<(), Error> {
        *in_a_row += 1;
        if *in_a_row > MAX_BAD_EVENTS_IN_A_ROW {
            return Err(self.protocol(format!(
                "{MAX_BAD_EVENTS_IN_A_ROW} watch events in a row could not be applied; last: \
                 {reason}"
            )));
        }
        self.report(&Error::BadEvent {
            type_name: self.name.to_string(),
            reason,
        });
        Ok(())
    }

    /// Applies one object event to the sink; returns the object's RV, or why it was dropped.
    fn apply(&self, sink: &mut Sink<'_, K>, kind: EventKind, obj: K) -> Result<String, String> {
        let obj = match sink {
            Sink::Temporary(_) if kind == EventKind::Added => self.share_or_reuse(obj),
            _ => self.share(obj),
        };
        let rv = obj.meta().resource_version.clone().unwrap_or_default();
        let result = match sink {
            Sink::Store => match kind {
                EventKind::Added => self.store.add(obj),
                EventKind::Modified => self.store.update(obj),
                EventKind::Deleted => self.store.delete(obj),
            },
            Sink::Temporary(map) => match meta_namespace_key(&*obj) {
                Ok(key) => {
                    if kind == EventKind::Deleted {
                        map.remove(&key);
                    } else {
                        map.insert(key, obj);
                    }
                    Ok(())
                }
                Err(e) => Err(e.into()),
            },
        };
        result.map(|()| rv).map_err(|e| e.to_string())
    }
}

pub(super) async fn due(resync: Option<&Resync>) {
    match resync {
        Some(r) => r.due().await,
        None => std::future::pending().await,
    }
}
