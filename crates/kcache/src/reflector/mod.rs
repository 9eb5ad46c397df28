//! The reflector: keeps a [`ReflectorStore`] in sync with a [`ListerWatcher`].
//!
//! A [`Reflector`] lists the collection, hands the result to its store as one `replace`, then
//! watches from the list's resourceVersion and turns every event into an add, update or delete.
//! When the watch ends it decides, as client-go's reflector does, whether to re-watch from the
//! last resourceVersion it saw or to relist:
//!
//! | what happened | what the reflector does |
//! |---|---|
//! | watch closed normally (timeout, server restart) | re-watch from the last RV |
//! | watch could not be opened: connection failure, 429, 5xx | back off, re-watch from the last RV |
//! | watch could not be opened: any other error | relist (after a backoff) |
//! | `ERROR` event in the stream (410 Expired, …) or an undecodable event | relist |
//! | 429 in the stream | back off, re-watch |
//! | watch closed in under 1 s with no events | relist |
//! | list at an RV: 410 Expired or 504 "Too large resource version" | list again at once at `resourceVersion=""` |
//!
//! The first list is at `resourceVersion="0"` (served from the watch cache) in pages of 500; a
//! relist at a specific RV is not paged (so that it too can be served from the watch cache).
//! Watches ask for bookmarks and carry a random `timeoutSeconds` in [5 min, 10 min). Backoff is
//! 800 ms doubling with jitter, capped at 30 s, reset after 2 minutes without trouble.
//!
//! With [`Config::use_watch_list`] (the default) the initial state comes from a *streaming
//! list*: a watch with `sendInitialEvents=true` whose `ADDED` events fill a temporary map until
//! the bookmark annotated `k8s.io/initial-events-end: "true"`; then the store is replaced and
//! the same stream carries on. A server that refuses it gets a plain LIST instead.

mod backoff;
mod error;
mod store;

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use futures::StreamExt;
use kube_core::Resource;
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, debug_span, info, warn};

pub use backoff::BackoffConfig;
pub use error::Error;
pub use store::{ReflectorStore, StoreError};

use crate::{
    lister_watcher::{
        self, INITIAL_EVENTS_END_ANNOTATION, ListParams, ListerWatcher, WatchEvent, WatchParams,
        WatchStream,
    },
    store::{KeyListerGetter, ObjectKey, meta_namespace_key},
};
use backoff::Backoff;

/// A function applied to every object before it is stored (e.g. to drop `managedFields`).
/// The reflector applies it exactly once per received object.
pub type TransformFunc<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

/// Called with every error the reflector recovers from (client-go's `WatchErrorHandler`, which
/// here also sees dropped events and stream errors).
pub type WatchErrorHandler = Arc<dyn Fn(&Error) + Send + Sync>;

/// Asked before each periodic resync; `false` skips it (the informer passes "is any handler's
/// resync due").
pub type ShouldResyncFunc = Arc<dyn Fn() -> bool + Send + Sync>;

/// Reflector settings. `Default` is client-go's.
#[derive(Debug, Clone)]
pub struct Config {
    /// A name for logs and errors (client-go: the type description).
    pub name: String,
    /// Page size of paginated lists (client-go: 500).
    pub page_size: u32,
    /// Watches time out after a random duration in `[min, 2·min)` (client-go: 5 min).
    pub min_watch_timeout: Duration,
    /// Period of `resync` calls on the store; zero disables them (client-go: 0).
    pub resync_period: Duration,
    /// Use the streaming initial list (`sendInitialEvents=true`), falling back to LIST when the
    /// server refuses it (client-go 1.36: on).
    pub use_watch_list: bool,
    /// The backoff between retries.
    pub backoff: BackoffConfig,
    /// Label selector for lists and watches.
    pub label_selector: Option<String>,
    /// Field selector for lists and watches.
    pub field_selector: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            name: "reflector".to_owned(),
            page_size: 500,
            min_watch_timeout: Duration::from_secs(300),
            resync_period: Duration::ZERO,
            use_watch_list: true,
            backoff: BackoffConfig::default(),
            label_selector: None,
            field_selector: None,
        }
    }
}

impl Config {
    /// Sets [`Config::name`].
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets [`Config::page_size`].
    #[must_use]
    pub fn page_size(mut self, n: u32) -> Self {
        self.page_size = n;
        self
    }

    /// Sets [`Config::resync_period`].
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = period;
        self
    }

    /// Sets [`Config::use_watch_list`].
    #[must_use]
    pub fn use_watch_list(mut self, on: bool) -> Self {
        self.use_watch_list = on;
        self
    }

    /// Sets [`Config::label_selector`].
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Sets [`Config::field_selector`].
    #[must_use]
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }
}

/// Counters a reflector keeps; read them with [`ReflectorHandle::metrics`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Metrics {
    /// Completed LISTs (each possibly several pages).
    pub lists: u64,
    /// Completed initial syncs after the first one (by LIST or streaming list).
    pub relists: u64,
    /// Completed streaming initial lists.
    pub watch_lists: u64,
    /// Watches opened.
    pub watches: u64,
    /// Watch events received (all types).
    pub watch_events: u64,
    /// Errors passed to the watch error handler.
    pub errors: u64,
}

#[derive(Default)]
struct Counters {
    lists: AtomicU64,
    syncs: AtomicU64,
    watch_lists: AtomicU64,
    watches: AtomicU64,
    watch_events: AtomicU64,
    errors: AtomicU64,
}

#[derive(Default)]
struct RvState {
    last_sync: String,
    unavailable: bool,
}

#[derive(Default)]
struct Shared {
    rv: Mutex<RvState>,
    paginated_result: AtomicBool,
    counters: Counters,
}

/// A cheap handle on a running reflector's state.
#[derive(Clone)]
pub struct ReflectorHandle {
    shared: Arc<Shared>,
}

impl ReflectorHandle {
    /// The resourceVersion of the last list or watch event applied (client-go
    /// `LastSyncResourceVersion`); empty before the first sync.
    pub fn last_sync_resource_version(&self) -> String {
        self.shared.rv.lock().last_sync.clone()
    }

    /// The reflector's counters.
    pub fn metrics(&self) -> Metrics {
        let c = &self.shared.counters;
        let syncs = c.syncs.load(Ordering::Relaxed);
        Metrics {
            lists: c.lists.load(Ordering::Relaxed),
            relists: syncs.saturating_sub(1),
            watch_lists: c.watch_lists.load(Ordering::Relaxed),
            watches: c.watches.load(Ordering::Relaxed),
            watch_events: c.watch_events.load(Ordering::Relaxed),
            errors: c.errors.load(Ordering::Relaxed),
        }
    }
}

/// Keeps a [`ReflectorStore`] in sync with a [`ListerWatcher`]; see the [module docs](self).
pub struct Reflector<K, L> {
    lw: L,
    store: Arc<dyn ReflectorStore<K>>,
    config: Config,
    shared: Arc<Shared>,
    transform: Option<TransformFunc<K>>,
    error_handler: Option<WatchErrorHandler>,
    should_resync: Option<ShouldResyncFunc>,
    known: Option<Arc<dyn KeyListerGetter<K>>>,
}

/// How a watch stream ended.
enum WatchEnd<K> {
    /// Closed by the server (or a transport failure): re-watch.
    Closed,
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

impl<K, L> Reflector<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    /// A reflector feeding `store` from `lw`.
    pub fn new(lw: L, store: Arc<dyn ReflectorStore<K>>, config: Config) -> Self {
        Self {
            lw,
            store,
            config,
            shared: Arc::default(),
            transform: None,
            error_handler: None,
            should_resync: None,
            known: None,
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

    /// A handle to read the reflector's resourceVersion and counters while it runs.
    pub fn handle(&self) -> ReflectorHandle {
        ReflectorHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Runs list-and-watch cycles until `cancel` fires, recovering from every error.
    ///
    /// # Cancel safety
    /// Dropping the future stops the reflector; the store keeps what it was given.
    pub async fn run(self, cancel: CancellationToken) {
        let span = tracing::info_span!("reflector", name = %self.config.name);
        async {
            info!(resync_period = ?self.config.resync_period, "starting reflector");
            let mut backoff = Backoff::new(self.config.backoff.clone());
            loop {
                if let Err(err) = self.list_and_watch(&cancel, &mut backoff).await {
                    self.report(&err);
                }
                if cancel.is_cancelled() {
                    break;
                }
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep(backoff.next_delay()) => {}
                }
            }
            info!("stopping reflector");
        }
        .instrument(span)
        .await;
    }

    fn report(&self, err: &Error) {
        self.shared.counters.errors.fetch_add(1, Ordering::Relaxed);
        match &self.error_handler {
            Some(handler) => handler(err),
            None => warn!(error = %err, "reflector error"),
        }
    }

    fn type_name(&self) -> String {
        self.config.name.clone()
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

    fn set_last_sync(&self, resource_version: String) {
        self.shared.rv.lock().last_sync = resource_version;
    }

    fn set_unavailable(&self, unavailable: bool) {
        self.shared.rv.lock().unavailable = unavailable;
    }

    fn watch_params(&self, send_initial_events: bool) -> WatchParams {
        let min = self.config.min_watch_timeout.as_secs_f64();
        let timeout = min + rand::random::<f64>() * min;
        WatchParams {
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
            timeout: Some(timeout as u32),
            bookmarks: true,
            send_initial_events,
        }
    }

    async fn list_and_watch(
        &self,
        cancel: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Result<(), Error> {
        let mut stream = None;
        if self.config.use_watch_list {
            match self.watch_list(cancel, backoff).await {
                Ok(Some(s)) => stream = Some(s),
                Ok(None) => return Ok(()),
                Err(err) => {
                    debug!(error = %err, "streaming list unavailable, falling back to LIST");
                    self.report(&Error::WatchList {
                        type_name: self.type_name(),
                        source: Box::new(err),
                    });
                }
            }
        }
        if stream.is_none() {
            tokio::select! {
                () = cancel.cancelled() => return Ok(()),
                res = self.list() => res?,
            }
        }
        self.watch(stream, cancel, backoff).await
    }

    /// LIST, paginated as client-go's pager does, then `replace`.
    async fn list(&self) -> Result<(), Error> {
        let rv = self.relist_resource_version();
        let span = debug_span!("list", resource_version = %rv);
        async {
            let result = match self.list_pages(&rv).await {
                Err(e) if e.is_expired() || e.is_too_large_resource_version() => {
                    debug!(error = %e, "list at resourceVersion {rv:?} unavailable, relisting at \"\"");
                    self.set_unavailable(true);
                    self.list_pages("").await
                }
                other => other,
            };
            let (items, list_rv, paginated) =
                result.map_err(|source| Error::List { type_name: self.type_name(), source })?;
            if rv == "0" && paginated {
                self.shared.paginated_result.store(true, Ordering::Relaxed);
            }
            self.set_unavailable(false);
            debug!(items = items.len(), resource_version = %list_rv, "listed");
            self.store
                .replace(items, list_rv.clone())
                .map_err(|source| Error::Store { type_name: self.type_name(), source })?;
            self.set_last_sync(list_rv);
            self.shared.counters.lists.fetch_add(1, Ordering::Relaxed);
            self.shared.counters.syncs.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// Lists every page at `rv`. Returns the items (transformed, shared), the list's RV and
    /// whether the result came in more than one page.
    async fn list_pages(
        &self,
        rv: &str,
    ) -> Result<(Vec<Arc<K>>, String, bool), lister_watcher::Error> {
        let paged =
            self.shared.paginated_result.load(Ordering::Relaxed) || rv.is_empty() || rv == "0";
        let limit = (paged && self.config.page_size > 0).then_some(self.config.page_size);
        let first = ListParams {
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
            limit,
            resource_version: Some(rv.to_owned()),
            ..ListParams::default()
        };
        let mut params = first.clone();
        let mut items: Vec<Arc<K>> = Vec::new();
        let mut paginated = false;
        loop {
            let page = match self.lw.list(&params).await {
                Ok(page) => page,
                // client-go's pager: an expired continue token falls back to one full list.
                Err(e) if e.is_expired() && params.continue_token.is_some() => {
                    debug!("continue token expired, falling back to a full list");
                    let full = ListParams {
                        limit: None,
                        ..first.clone()
                    };
                    let page = self.lw.list(&full).await?;
                    let list_rv = page.metadata.resource_version.clone().unwrap_or_default();
                    return Ok((self.share_listed(page.items), list_rv, paginated));
                }
                Err(e) => return Err(e),
            };
            let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
            let list_rv = page.metadata.resource_version.clone().unwrap_or_default();
            if items.is_empty() {
                items = self.share_listed(page.items);
            } else {
                items.extend(page.items.into_iter().map(|o| self.share_or_reuse(o)));
            }
            match next {
                Some(token) => {
                    paginated = true;
                    params = ListParams {
                        continue_token: Some(token),
                        resource_version: None,
                        version_match: None,
                        ..first.clone()
                    };
                }
                None => return Ok((items, list_rv, paginated)),
            }
        }
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

    fn share_listed(&self, objs: Vec<K>) -> Vec<Arc<K>> {
        objs.into_iter().map(|o| self.share_or_reuse(o)).collect()
    }

    /// The streaming initial list. `Ok(None)` when cancelled.
    async fn watch_list(
        &self,
        cancel: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Result<Option<WatchStream<K>>, Error> {
        loop {
            if cancel.is_cancelled() {
                return Ok(None);
            }
            let rv = self.rewatch_resource_version();
            let params = self.watch_params(true);
            let opened = tokio::select! {
                () = cancel.cancelled() => return Ok(None),
                res = self.lw.watch(&params, &rv) => res,
            };
            let stream = match opened {
                Ok(s) => s,
                Err(e) if e.is_retriable_watch_open_error() => {
                    debug!(error = %e, "streaming list failed, backing off");
                    if !self.sleep(cancel, backoff.next_delay()).await {
                        return Ok(None);
                    }
                    continue;
                }
                Err(e) if e.is_expired() || e.is_too_large_resource_version() => {
                    self.set_unavailable(true);
                    continue;
                }
                Err(source) => {
                    return Err(Error::WatchOpen {
                        type_name: self.type_name(),
                        source,
                    });
                }
            };
            self.shared.counters.watches.fetch_add(1, Ordering::Relaxed);
            let mut temporary = HashMap::new();
            let mut list_rv = String::new();
            let end = self
                .handle_watch(
                    stream,
                    Sink::Temporary(&mut temporary),
                    cancel,
                    None,
                    &mut |rv, past_added| {
                        if past_added {
                            list_rv = rv.to_owned();
                        }
                    },
                )
                .await;
            match end {
                Ok(WatchEnd::InitialEventsEnd(stream)) => {
                    self.set_unavailable(false);
                    let items: Vec<Arc<K>> = temporary.into_values().collect();
                    debug!(items = items.len(), resource_version = %list_rv, "streamed initial list");
                    self.store
                        .replace(items, list_rv.clone())
                        .map_err(|source| Error::Store {
                            type_name: self.type_name(),
                            source,
                        })?;
                    self.set_last_sync(list_rv);
                    self.shared
                        .counters
                        .watch_lists
                        .fetch_add(1, Ordering::Relaxed);
                    self.shared.counters.syncs.fetch_add(1, Ordering::Relaxed);
                    return Ok(Some(stream));
                }
                Ok(WatchEnd::Stopped) => return Ok(None),
                Ok(WatchEnd::Closed) => continue,
                Err(err) => {
                    let lw_err = err.lister_watcher_error();
                    if lw_err.is_some_and(|e| e.is_too_many_requests()) {
                        if !self.sleep(cancel, backoff.next_delay()).await {
                            return Ok(None);
                        }
                        continue;
                    }
                    if lw_err.is_some_and(|e| e.is_expired() || e.is_too_large_resource_version()) {
                        self.set_unavailable(true);
                        continue;
                    }
                    return Err(err);
                }
            }
        }
    }

    /// Sleeps `d`; `false` when cancelled first.
    async fn sleep(&self, cancel: &CancellationToken, d: Duration) -> bool {
        tokio::select! {
            () = cancel.cancelled() => false,
            () = tokio::time::sleep(d) => true,
        }
    }

    /// The watch loop: (re)open watches from the last synced RV until an error asks for a
    /// relist. Runs the periodic resync meanwhile.
    async fn watch(
        &self,
        mut stream: Option<WatchStream<K>>,
        cancel: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Result<(), Error> {
        let mut resync = Resync::new(self.config.resync_period);
        loop {
            if cancel.is_cancelled() {
                return Ok(());
            }
            let mut propagate_from_start = true;
            let s = match stream.take() {
                Some(s) => s,
                None => {
                    let rv = self.shared.rv.lock().last_sync.clone();
                    if rv.is_empty() || rv == "0" {
                        // Synthetic ADDED events come in key order, not RV order: record no RV
                        // until the first event that is not an ADDED.
                        propagate_from_start = false;
                    }
                    let params = self.watch_params(false);
                    let opened = tokio::select! {
                        () = cancel.cancelled() => return Ok(()),
                        res = self.lw.watch(&params, &rv) => res,
                    };
                    match opened {
                        Ok(s) => {
                            self.shared.counters.watches.fetch_add(1, Ordering::Relaxed);
                            s
                        }
                        Err(e) if e.is_retriable_watch_open_error() => {
                            debug!(error = %e, "watch failed, backing off");
                            let delay = e
                                .retry_after()
                                .unwrap_or_default()
                                .max(backoff.next_delay());
                            if !self.sleep_with_resync(cancel, delay, &mut resync).await? {
                                return Ok(());
                            }
                            continue;
                        }
                        Err(source) => {
                            return Err(Error::WatchOpen {
                                type_name: self.type_name(),
                                source,
                            });
                        }
                    }
                }
            };
            let end = self
                .handle_watch(
                    s,
                    Sink::Store,
                    cancel,
                    Some(&mut resync),
                    &mut |rv, past_added| {
                        if propagate_from_start || past_added {
                            self.set_last_sync(rv.to_owned());
                        }
                    },
                )
                .await;
            match end {
                Ok(WatchEnd::Stopped) => return Ok(()),
                Ok(_) => continue,
                Err(err) => {
                    if err
                        .lister_watcher_error()
                        .is_some_and(|e| e.is_too_many_requests())
                    {
                        debug!("watch returned 429, backing off");
                        if !self
                            .sleep_with_resync(cancel, backoff.next_delay(), &mut resync)
                            .await?
                        {
                            return Ok(());
                        }
                        continue;
                    }
                    if err.is_expired() {
                        // Relist at the last RV: a list "not older than" it is still valid.
                        debug!(error = %err, "watch closed");
                    }
                    self.report(&err);
                    return Ok(());
                }
            }
        }
    }

    async fn sleep_with_resync(
        &self,
        cancel: &CancellationToken,
        d: Duration,
        resync: &mut Resync,
    ) -> Result<bool, Error> {
        let deadline = Instant::now() + d;
        loop {
            tokio::select! {
                () = cancel.cancelled() => return Ok(false),
                () = tokio::time::sleep_until(deadline) => return Ok(true),
                () = resync.due() => self.resync(resync)?,
            }
        }
    }

    fn resync(&self, resync: &mut Resync) -> Result<(), Error> {
        resync.reset();
        if self.should_resync.as_ref().is_none_or(|f| f()) {
            debug!("forcing resync");
            self.store.resync().map_err(|source| Error::Store {
                type_name: self.type_name(),
                source,
            })?;
        }
        Ok(())
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
        let mut count = 0u64;
        let mut past_added = false;
        loop {
            let item = tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(WatchEnd::Stopped),
                () = Resync::due_opt(resync.as_deref_mut()) => {
                    if let Some(r) = resync.as_deref_mut() {
                        self.resync(r)?;
                    }
                    continue;
                }
                item = stream.next() => item,
            };
            let event = match item {
                None => break,
                Some(Ok(event)) => event,
                Some(Err(e)) if e.is_protocol() => {
                    self.report(&Error::BadEvent {
                        type_name: self.type_name(),
                        reason: e.to_string(),
                    });
                    continue;
                }
                Some(Err(e)) if e.is_transport() => {
                    debug!(error = %e, "watch stream broken");
                    break;
                }
                Some(Err(source)) => {
                    return Err(Error::WatchStream {
                        type_name: self.type_name(),
                        source,
                    });
                }
            };
            self.shared
                .counters
                .watch_events
                .fetch_add(1, Ordering::Relaxed);
            let mut initial_events_end = false;
            let rv = match event {
                WatchEvent::Error(status) => {
                    let source = lister_watcher::Error::api(*status, None);
                    return Err(Error::WatchStream {
                        type_name: self.type_name(),
                        source,
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
                            type_name: self.type_name(),
                            reason: e.to_string(),
                        });
                    }
                    Some(b.metadata.resource_version)
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
            if let Some(rv) = rv.filter(|rv| !rv.is_empty()) {
                on_rv(&rv, past_added);
            }
            count += 1;
            if initial_list && initial_events_end {
                return Ok(WatchEnd::InitialEventsEnd(stream));
            }
        }
        if count == 0 && started.elapsed() < Duration::from_secs(1) {
            return Err(Error::VeryShortWatch {
                type_name: self.type_name(),
            });
        }
        debug!(events = count, "watch closed");
        Ok(WatchEnd::Closed)
    }

    /// Applies one object event to the sink; returns the object's RV (`None` when the event
    /// was dropped or the object has no RV, which is reported).
    fn apply(&self, sink: &mut Sink<'_, K>, kind: EventKind, obj: K) -> Option<String> {
        let obj = match sink {
            Sink::Temporary(_) if kind == EventKind::Added => self.share_or_reuse(obj),
            _ => self.share(obj),
        };
        let rv = obj.meta().resource_version.clone();
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
        if let Err(e) = result {
            self.report(&Error::BadEvent {
                type_name: self.type_name(),
                reason: e.to_string(),
            });
            return None;
        }
        if rv.as_deref().is_none_or(str::is_empty) {
            self.report(&Error::BadEvent {
                type_name: self.type_name(),
                reason:
                    "object has no resourceVersion; applied without advancing the last synced RV"
                        .into(),
            });
        }
        rv
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum EventKind {
    Added,
    Modified,
    Deleted,
}

/// The periodic resync timer.
struct Resync {
    period: Duration,
    deadline: Option<Instant>,
}

impl Resync {
    fn new(period: Duration) -> Self {
        let deadline = (!period.is_zero()).then(|| Instant::now() + period);
        Self { period, deadline }
    }

    fn reset(&mut self) {
        self.deadline = (!self.period.is_zero()).then(|| Instant::now() + self.period);
    }

    async fn due(&self) {
        match self.deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    }

    async fn due_opt(this: Option<&mut Resync>) {
        match this {
            Some(r) => r.due().await,
            None => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests;
