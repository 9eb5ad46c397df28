//! The reflector: keeps a [`ReflectorStore`] in sync with a [`ListerWatcher`].
//!
//! A [`Reflector`] lists the collection, hands the result to its store as one `replace`, then
//! watches from the list's resourceVersion and turns every event into an add, update or delete.
//!
//! The first list is at `resourceVersion="0"` (served from the watch cache) in pages of 500; a
//! relist at a specific RV is not paged (so that it too can be served from the watch cache)
//! unless [`Config::page_size`] is set. A page's request goes out as soon as the page before
//! has told its `continue` token ([`ListerWatcher::list_telling_continue`]: kcache-client reads
//! it from the list's metadata, which the server sends before the items), so the server
//! prepares page k+1 while page k is read and decoded; one page ahead at most, pages in order,
//! never ahead after a short page. client-go's reflector asks for the next page only once the
//! page before is decoded; the requests are the same, only earlier. Items are taken as they
//! are decoded ([`ListerWatcher::list_each`]), an unchanged one swapped at once for the
//! cache's copy, so that a relist never holds two copies of every object. Watches ask for bookmarks
//! and carry a random `timeoutSeconds` in [5 min, 10 min). With [`Config::initial_list`]
//! [`InitialList::Stream`] (client-go 1.35+'s default; kcache's default,
//! [`InitialList::Auto`], picks it on kube-apiserver 1.37+, over protobuf from 1.34, and a
//! LIST elsewhere, from the server's `/version`) the initial state comes from a *streaming list*: a
//! watch with `sendInitialEvents=true` whose `ADDED` events fill a temporary map until the
//! bookmark annotated `k8s.io/initial-events-end: "true"`; then the store is replaced and the
//! same stream carries on.
//!
//! # Recovery
//!
//! Every failure goes through one decision (`recovery::decide`) that leads to exactly one
//! action; the reflector never stops on its own (only when cancelled or when its store is
//! closed). "Server backoff" is [`Config::backoff`] (800 ms doubling to 30 s with jitter,
//! reset after 2 min without trouble, and as soon as a watch has delivered an event and stayed
//! healthy for 1 s, so that a failure after a flapping phase has healed waits 800 ms again, as
//! in client-go; a `Retry-After` or `retryAfterSeconds` within that cap
//! is honoured, one beyond it is ignored as malformed); "reconnect backoff" is [`Config::reconnect_backoff`] (250 ms doubling to 1 s).
//!
//! | where | what happened | action | client-go |
//! |---|---|---|---|
//! | list | 410 Expired / too large RV, at a specific RV | list again at once at RV `""` | same |
//! | list | the same at RV `""`, or any other API error | server backoff, relist | same |
//! | list | connection refused / reset, deadline ([`Config::list_timeout`]) | reconnect backoff, relist | 30 s cap, no deadline |
//! | list | no `metadata.resourceVersion`, a `continue` token repeated, over [`Config::max_list_pages`] pages | server backoff, relist; cache untouched | accepts / loops |
//! | list | endless `continue` tokens on short pages (under half the limit) | each such page paced to ≥ 250 ms after the previous request (≤ 4 requests/s); full pages never | follows them at full speed |
//! | list | expired `continue` token | one unpaginated list at once (inside the pager) | same |
//! | streaming list | connection refused / reset | reconnect backoff, stream again | server backoff, stream again |
//! | streaming list | 429 | server backoff, stream again | same |
//! | streaming list | 410 / too large RV | forget the RV, stream again at once at RV `""` (at RV `""` already: plain LIST) | same (loops at `""`) |
//! | streaming list | anything else: 400/403/5xx, `ERROR` event, undecodable event, closed before the end bookmark, very short or idle stream, no end bookmark within [`Config::list_timeout`] | plain LIST at once for this round; stream again on the next round (`Auto`: LIST from then on) | same, except a stream closed before the bookmark: client-go streams again at once, which never syncs on a server that does not send it |
//! | watch open | connection refused / reset, deadline ([`Config::watch_open_timeout`]) | reconnect backoff, re-watch | 30 s cap |
//! | watch open | 429 | server backoff, re-watch (no relist) | same |
//! | watch open | any other error (403, 410, 5xx, too large RV, …) | server backoff, relist at the last RV (a too large RV then lists at `""`) | same |
//! | watch | closed after ≥ 1 s | re-watch at once from the last RV | same |
//! | watch | closed in < 1 s after some events | server backoff, re-watch | re-watches at once |
//! | watch | closed in < 1 s with no events ("very short watch") | server backoff, relist | same |
//! | watch | `ERROR` event 429 | server backoff, re-watch | same |
//! | watch | `ERROR` event 410, 500 (`InternalError`, `StorageReadError`) or other, undecodable event | server backoff, relist at the last RV (so objects removed by an unsafe delete leave the cache) | same (`MaxInternalErrorRetryDuration` is 0 by default) |
//! | watch | unknown event type, object without a key | skipped and reported; 10 in a row: server backoff, relist | skipped forever |
//! | watch | nothing for [`Config::watch_idle_timeout`] (half-open connection) | re-watch at once | HTTP/2 ping |
//! | watch | the store's resync fails | the watch ends; server backoff, relist (no resync while a relist waits) | same |
//! | any | `Retry-After` / `retryAfterSeconds` within the backoff cap | waited at least that long | ignores it (own backoff) |
//! | any | `Retry-After` beyond the backoff cap (2^64-1, 10^9 s) | malformed: ignored, normal backoff | ignores it |
//! | any | a panic inside the reflector (transform, store, lister-watcher) | caught, reported at error level, server backoff, relist | crashes the process |
//! | any | the store is closed | stop | same |
//!
//! Resyncs run while the reflector watches and while it waits to re-watch, never during a
//! list or while it waits to relist (client-go's resync goroutine lives for the watch phase).
//!
//! Every error goes to the watch error handler (or to `tracing` at warn level) and into
//! [`ReflectorHandle::health`], so a reflector that keeps failing is visible to readiness
//! checks. Spans, logs and errors carry the reflector's name: [`Config::name`], or what the
//! lister-watcher says it watches ([`ListerWatcher::describe`]).
//!
//! # Metrics
//!
//! A [`ReflectorHandle`] reads, without locking the reflector out: [`Metrics`] (lists, relists
//! by cause — [`RelistCauses`] —, watches, watch events by type — [`WatchEventCounts`] —,
//! errors, panics; relaxed atomics bumped on the hot path), the histograms
//! [`ReflectorHandle::list_items`] and [`ReflectorHandle::list_duration`] (one observation per
//! completed LIST or streaming list), the age of the last resourceVersion
//! ([`ReflectorHandle::since_last_resource_version`]) and [`Health`]. `kcache-metrics` exports
//! them as Prometheus families (`kcache_reflector_*`).

mod backoff;
mod config;
mod error;
mod handle;
mod initial_list;
mod pager;
mod recovery;
mod resync;
mod watch;

use std::{panic::AssertUnwindSafe, sync::Arc, time::Duration};

use futures::FutureExt;
use kube_core::Resource;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info, warn};

/// The store contract the reflector writes to; it lives in [`crate::store`].
pub use crate::store::{ReflectorStore, StoreError};
pub use backoff::BackoffConfig;
pub use config::{
    Config, MIN_WATCH_TIMEOUT_FLOOR, ShouldResyncFunc, TransformFunc, WatchErrorHandler,
};
pub use error::Error;
pub use handle::{Health, Metrics, ReflectorHandle, RelistCauses, WatchEventCounts};
pub use initial_list::{
    FIRST_COMPRESSED_WATCH_LIST_MINOR, FIRST_WATCH_LIST_MINOR, InitialList, ParseInitialListError,
    auto_initial_list,
};

use crate::{
    lister_watcher::{self, ListerWatcher, WatchStream},
    store::{KeyListerGetter, meta_namespace_key},
};
use backoff::Backoff;
use handle::{RelistCause, Shared};
use recovery::{Action, Context, Phase, Wait};
use resync::Resync;

/// Keeps a [`ReflectorStore`] in sync with a [`ListerWatcher`]; see the [module docs](self).
pub struct Reflector<K, L> {
    lw: L,
    store: Arc<dyn ReflectorStore<K>>,
    config: Config,
    name: Arc<str>,
    shared: Arc<Shared>,
    transform: Option<TransformFunc<K>>,
    error_handler: Option<WatchErrorHandler>,
    should_resync: Option<ShouldResyncFunc>,
    known: Option<Arc<dyn KeyListerGetter<K>>>,
    /// Set when a watch proves the server healthy (see `watch::HEALTHY_WATCH`); the run loop
    /// then starts its backoffs over.
    watch_proved_healthy: std::sync::atomic::AtomicBool,
}

impl<K, L> std::fmt::Debug for Reflector<K, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reflector")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// How a wait between two steps ended.
enum Slept {
    /// The wait is over: carry out the planned step.
    Done,
    /// Cancelled during the wait.
    Cancelled,
    /// A resync failed during the wait: relist instead of the planned re-watch.
    ResyncFailed,
}

/// What the run loop does next.
enum Next<K> {
    /// An initial sync: streaming list (if configured) or LIST.
    Sync,
    /// A plain LIST (the streaming list was refused in this cycle).
    List,
    /// A LIST at `resourceVersion=""`.
    ListConsistent,
    /// Watch from the last RV, or carry on with a stream a streaming list left open.
    Watch(Option<WatchStream<K>>),
}

impl<K, L> Reflector<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    /// A reflector feeding `store` from `lw`.
    pub fn new(lw: L, store: Arc<dyn ReflectorStore<K>>, config: Config) -> Self {
        let name: Arc<str> = if config.name.is_empty() {
            lw.describe().into()
        } else {
            config.name.as_str().into()
        };
        Self {
            lw,
            store,
            config,
            name,
            shared: Arc::default(),
            transform: None,
            error_handler: None,
            should_resync: None,
            known: None,
            watch_proved_healthy: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Lets the reflector reuse objects its consumer already holds: during a (re)list, an
    /// object whose key and resourceVersion match a cached one is replaced by the cached `Arc`
    /// as soon as it is decoded, and the fresh copy is dropped. A relist then costs about one
    /// page of extra memory instead of a second copy of the whole collection, and skips the
    /// transform for unchanged objects. The informer passes its indexer.
    #[must_use]
    pub fn with_known_objects(mut self, known: Arc<dyn KeyListerGetter<K>>) -> Self {
        self.known = Some(known);
        self
    }

    /// Applies `transform` to every object before it reaches the store.
    #[must_use]
    pub fn with_transform(mut self, transform: TransformFunc<K>) -> Self {
        self.transform = Some(transform);
        self
    }

    /// Calls `handler` with every error the reflector recovers from. Without one, errors are
    /// logged with `tracing`.
    #[must_use]
    pub fn with_error_handler(mut self, handler: WatchErrorHandler) -> Self {
        self.error_handler = Some(handler);
        self
    }

    /// Asks `should_resync` before each periodic resync.
    #[must_use]
    pub fn with_should_resync(mut self, should_resync: ShouldResyncFunc) -> Self {
        self.should_resync = Some(should_resync);
        self
    }

    /// A handle to read the reflector's resourceVersion, counters and health while it runs.
    pub fn handle(&self) -> ReflectorHandle {
        ReflectorHandle {
            shared: Arc::clone(&self.shared),
            name: Arc::clone(&self.name),
        }
    }

    /// Runs list-and-watch cycles until `cancel` fires (or the store is closed), recovering
    /// from every error as the [module docs](self) say, panics inside the reflector included.
    ///
    /// # Cancel safety
    /// Dropping the future stops the reflector; the store keeps what it was given.
    pub async fn run(self, cancel: CancellationToken) {
        let span = tracing::info_span!("reflector", resource = %self.name);
        async {
            info!(resync_period = ?self.config.resync_period, "starting reflector");
            let mut backoff = Backoff::new(self.config.backoff.clone());
            let mut reconnect = Backoff::new(self.config.reconnect_backoff.clone());
            let mut resync = Resync::new(self.config.resync_period);
            let mut next = Next::Sync;
            let Some(mut streaming) = self.streams(&cancel).await else {
                info!("stopping reflector");
                return;
            };
            while !cancel.is_cancelled() {
                let (phase, at_consistent_rv) = match &next {
                    Next::Sync if streaming => (
                        Phase::StreamingList,
                        self.rewatch_resource_version().is_empty(),
                    ),
                    Next::Sync | Next::List => {
                        (Phase::List, self.relist_resource_version().is_empty())
                    }
                    Next::ListConsistent => (Phase::List, true),
                    Next::Watch(Some(_)) => (Phase::Watch, false),
                    Next::Watch(None) => (Phase::WatchOpen, false),
                };
                let step = AssertUnwindSafe(self.step(next, streaming, &cancel, &mut resync))
                    .catch_unwind()
                    .await;
                if self
                    .watch_proved_healthy
                    .swap(false, std::sync::atomic::Ordering::Relaxed)
                {
                    // As client-go's backoff manager after a period without errors: the
                    // trouble before this watch no longer lengthens the next wait.
                    backoff.reset();
                    reconnect.reset();
                }
                let err = match step {
                    Ok(Ok(Some(n))) => {
                        if matches!(phase, Phase::List | Phase::StreamingList) {
                            // A new watch phase: its first resync is a full period away.
                            resync.reset();
                        }
                        next = n;
                        continue;
                    }
                    Ok(Ok(None)) => break,
                    Ok(Err(err)) => err,
                    Err(panic) => {
                        self.shared
                            .counters
                            .panics
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let message = panic_message(&*panic);
                        error!(%message, "reflector panicked; restarting after a backoff");
                        Error::Panicked {
                            type_name: self.name.to_string(),
                            message,
                        }
                    }
                };
                // A watch that failed after it was open counts as a watch failure.
                let phase = if phase == Phase::WatchOpen
                    && matches!(
                        err,
                        Error::WatchStream { .. }
                            | Error::VeryShortWatch { .. }
                            | Error::ShortWatch { .. }
                            | Error::WatchIdle { .. }
                    ) {
                    Phase::Watch
                } else {
                    phase
                };
                let action = recovery::decide(
                    Context {
                        phase,
                        at_consistent_rv,
                    },
                    &err,
                );
                debug!(?phase, ?action, error = %err, "recovering");
                if recovery::forgets_resource_version(&err)
                    && matches!(phase, Phase::List | Phase::StreamingList)
                {
                    self.set_unavailable(true);
                }
                let reselect = err
                    .lister_watcher_error()
                    .is_some_and(lister_watcher::Error::is_selection_changed);
                if reselect {
                    info!("the shard selection changed: listing again");
                } else if action != Action::RelistConsistent {
                    // The retry at RV "" is part of the list, silent as in client-go.
                    self.report(&err);
                }
                if matches!(action, Action::Relist(_) | Action::RelistConsistent) {
                    self.shared.relist_caused_by(recovery::relist_cause(&err));
                }
                let (wait, then) = match action {
                    Action::Stop => break,
                    Action::RelistConsistent => (Wait::None, Next::ListConsistent),
                    Action::FallbackToList => {
                        if self.config.initial_list == InitialList::Auto && streaming {
                            // Auto's first answer: this server refuses the streaming list.
                            info!("the server refused the streaming list: listing from now on");
                            streaming = false;
                        }
                        (Wait::None, Next::List)
                    }
                    Action::Relist(w) => (w, Next::Sync),
                    Action::Rewatch(w) => (w, Next::Watch(None)),
                };
                let delay = match wait {
                    Wait::None => Duration::ZERO,
                    Wait::Server => backoff.next_delay_honouring(retry_after(&err)),
                    Wait::Reconnect => reconnect.next_delay(),
                };
                // As in client-go, resyncs go on while a watch is retried (its resync runs
                // for the whole watch phase) but not while a relist waits.
                let rewatching = matches!(then, Next::Watch(_));
                match self
                    .sleep(&cancel, delay, rewatching.then_some(&mut resync))
                    .await
                {
                    Slept::Cancelled => break,
                    Slept::Done => next = then,
                    Slept::ResyncFailed => {
                        self.shared.relist_caused_by(RelistCause::Error);
                        next = Next::Sync;
                    }
                }
            }
            info!("stopping reflector");
        }
        .instrument(span)
        .await;
    }

    /// Whether initial syncs stream ([`Config::initial_list`], `Auto` resolved from the
    /// server's version under [`VERSION_DEADLINE`]); `None` when cancelled meanwhile.
    async fn streams(&self, cancel: &CancellationToken) -> Option<bool> {
        let strategy = match self.config.initial_list {
            InitialList::Auto => {
                let asked = tokio::time::timeout(VERSION_DEADLINE, self.lw.server_version());
                let version = tokio::select! {
                    () = cancel.cancelled() => return None,
                    v = AssertUnwindSafe(asked).catch_unwind() => v.ok().and_then(Result::ok).flatten(),
                };
                let chosen = auto_initial_list(version.as_ref(), self.lw.uses_protobuf());
                match version {
                    Some(v) => {
                        info!(server = %v, initial_list = %chosen, "initial list chosen by the server's version")
                    }
                    None => {
                        info!(initial_list = %chosen, "the server's version is unknown: initial list by LIST")
                    }
                }
                chosen
            }
            other => other,
        };
        Some(strategy == InitialList::Stream)
    }

    /// Runs one step; `Ok(None)` when cancelled or when the step says stop.
    async fn step(
        &self,
        next: Next<K>,
        streaming: bool,
        cancel: &CancellationToken,
        resync: &mut Resync,
    ) -> Result<Option<Next<K>>, Error> {
        match next {
            Next::Sync if streaming => match self.watch_list(cancel).await? {
                Some(stream) => Ok(Some(Next::Watch(Some(stream)))),
                None => Ok(None),
            },
            Next::Sync | Next::List => {
                self.list_cancellable(&self.relist_resource_version(), cancel)
                    .await
            }
            Next::ListConsistent => self.list_cancellable("", cancel).await,
            Next::Watch(stream) => match self.watch(stream, cancel, resync).await? {
                true => Ok(Some(Next::Watch(None))),
                false => Ok(None),
            },
        }
    }

    async fn list_cancellable(
        &self,
        rv: &str,
        cancel: &CancellationToken,
    ) -> Result<Option<Next<K>>, Error> {
        tokio::select! {
            () = cancel.cancelled() => Ok(None),
            res = self.list(rv) => res.map(|()| Some(Next::Watch(None))),
        }
    }

    fn report(&self, err: &Error) {
        self.shared
            .counters
            .errors
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if !matches!(err, Error::BadEvent { .. }) {
            self.shared.failure(err.to_string());
        }
        match &self.error_handler {
            Some(handler) => handler(err),
            None => warn!(error = %err, "reflector error"),
        }
    }

    /// The RV to (re)list at: `""` after an expired/too-large error, `"0"` before the first
    /// sync, else the last synced RV.
    fn relist_resource_version(&self) -> String {
        let rv = self.shared.rv.lock();
        if rv.unavailable {
            String::new()
        } else if rv.last_sync.is_empty() {
            "0".to_owned()
        } else {
            rv.last_sync.clone()
        }
    }

    /// The RV to start a streaming list at: `""` after an expired/too-large error.
    fn rewatch_resource_version(&self) -> String {
        let rv = self.shared.rv.lock();
        if rv.unavailable {
            String::new()
        } else {
            rv.last_sync.clone()
        }
    }

    fn set_unavailable(&self, unavailable: bool) {
        self.shared.rv.lock().unavailable = unavailable;
    }

    /// A sync (list or streaming list) of `items` objects, begun at `started`, completed at
    /// `resource_version`.
    fn synced(&self, resource_version: String, items: usize, started: Instant) {
        self.shared
            .sync_completed(resource_version, items, started.elapsed());
    }

    /// Sleeps `d`, running due resyncs meanwhile when `resync` is given. A resync that fails
    /// ends the watch phase, as in client-go: the rest of the wait runs without resyncs and
    /// the reflector relists after it ([`Slept::ResyncFailed`]).
    async fn sleep(
        &self,
        cancel: &CancellationToken,
        d: Duration,
        mut resync: Option<&mut Resync>,
    ) -> Slept {
        if cancel.is_cancelled() {
            return Slept::Cancelled;
        }
        if d.is_zero() {
            return Slept::Done;
        }
        let Some(deadline) = Instant::now().checked_add(d) else {
            return Slept::Cancelled;
        };
        let mut failed = false;
        loop {
            tokio::select! {
                () = cancel.cancelled() => return Slept::Cancelled,
                () = tokio::time::sleep_until(deadline) => {
                    return if failed { Slept::ResyncFailed } else { Slept::Done };
                }
                () = watch::due(resync.as_deref()) => {
                    if let Some(r) = resync.as_deref_mut()
                        && let Err(e) = self.resync(r)
                    {
                        self.report(&e);
                        failed = true;
                        resync = None;
                    }
                }
            }
        }
    }

    fn resync(&self, resync: &mut Resync) -> Result<(), Error> {
        resync.reset();
        if self.should_resync.as_ref().is_none_or(|f| f()) {
            debug!("forcing resync");
            self.store.resync().map_err(|source| Error::Store {
                type_name: self.name.to_string(),
                source,
            })?;
        }
        Ok(())
    }

    fn share(&self, obj: K) -> Arc<K> {
        Arc::new(match &self.transform {
            Some(t) => t(obj),
            None => obj,
        })
    }

    /// Shares a listed object, or reuses the consumer's copy when it is unchanged.
    fn share_or_reuse(&self, obj: K) -> Arc<K> {
        if let Some(known) = &self.known
            && let Some(rv) = obj
                .meta()
                .resource_version
                .as_deref()
                .filter(|rv| !rv.is_empty())
            && let Ok(key) = meta_namespace_key(&obj)
            && let Some(cached) = known.get_by_key(key.as_str())
            && cached.meta().resource_version.as_deref() == Some(rv)
        {
            return cached;
        }
        self.share(obj)
    }
}

/// How long `Auto` waits for the server's version before it lists (the answer is cached per
/// client, so only a reflector's first start pays it).
const VERSION_DEADLINE: Duration = Duration::from_secs(10);

/// The server's `Retry-After` behind an error, if any.
fn retry_after(err: &Error) -> Option<Duration> {
    err.lister_watcher_error().and_then(|e| e.retry_after())
}

/// The message of a caught panic.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

#[cfg(test)]
mod hardening_tests;
#[cfg(test)]
mod initial_list_tests;
#[cfg(test)]
mod pager_tests;
#[cfg(test)]
mod recovery_tests;
#[cfg(test)]
mod tests;
