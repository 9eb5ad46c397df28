//! LIST, paginated as client-go's pager does, checked for protocol errors — with one
//! difference: the next page is asked for as soon as the current one tells its continue token
//! (before its items are read), not after it is decoded. The same requests in the same order;
//! at most two in flight; a page with a token other than the one told, or a short page, ends
//! the asking ahead for that page (resp. the rest of the list). Measured at 100,000 JSON pods
//! on kube-apiserver serving lists from etcd in 200 pages: sync 32.9 s → 15.2 s (medians of
//! 8; BENCHMARKS.md). A first list at `resourceVersion=0` from the watch cache comes in one
//! page and is not affected.

use std::{collections::HashSet, sync::Arc, sync::atomic::Ordering, time::Duration};

use futures::future::{self, BoxFuture, Either, FutureExt};
use kube_core::Resource;
use tokio::sync::oneshot;
use tracing::{Instrument, debug, debug_span};

use super::{Error, Reflector};
use crate::{
    lister_watcher::{self, ListParams, ListerWatcher, ObjectList},
    store::{ObjectKey, meta_namespace_key},
};

/// A page that carries a `continue` token but less than half the page limit looks like a
/// server that is paging without end (kube-apiserver fills its pages): the next request then
/// waits until this long after the previous one, so that a lying server sees at most 4 page
/// requests a second from one reflector. Full pages are never paced.
const SHORT_PAGE_INTERVAL: Duration = Duration::from_millis(250);

/// The page limit assumed when the server paginates a list that asked for none.
const DEFAULT_PAGE_LIMIT: u32 = 500;

/// A key's hash, to check a paginated list for repeats in 8 bytes per object.
fn hash_key(key: &ObjectKey) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(key)
}

/// A listed page: its items, shared (or reused from the cache) as they were decoded, and the
/// list's metadata (its own `items` taken out).
struct SharedPage<K: Clone> {
    list: ObjectList<K>,
    items: Vec<Arc<K>>,
}

/// A page request on its way.
struct Page<'a, K: Clone> {
    /// When it was sent.
    requested: tokio::time::Instant,
    /// Its answer.
    future: BoxFuture<'a, Result<SharedPage<K>, Error>>,
    /// Its continue token, told before its items are read (see
    /// [`ListerWatcher::list_telling_continue`]).
    early: oneshot::Receiver<String>,
}

/// The next page, asked for before the current one was done.
struct Ahead<'a, K: Clone> {
    /// The continue token it was asked with.
    token: String,
    page: Page<'a, K>,
}

/// A listed collection: the items (transformed, shared), the list's RV and whether it came
/// in more than one page.
pub(crate) struct Listed<K> {
    pub(crate) items: Vec<Arc<K>>,
    pub(crate) resource_version: String,
    pub(crate) paginated: bool,
}

impl<K, L> Reflector<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    /// Lists every page at `rv`, then `replace`s the store.
    pub(crate) async fn list(&self, rv: &str) -> Result<(), Error> {
        let span = debug_span!("list", resource_version = %rv);
        async {
            let started = tokio::time::Instant::now();
            let listed = self.list_pages(rv).await?;
            if rv == "0" && listed.paginated {
                self.shared.paginated_result.store(true, Ordering::Relaxed);
            }
            let items = listed.items.len();
            debug!(items, resource_version = %listed.resource_version, "listed");
            // Counted before the store has it: whoever sees the cache synced sees the list.
            self.shared.counters.lists.fetch_add(1, Ordering::Relaxed);
            self.store
                .replace(listed.items, listed.resource_version.clone())
                .map_err(|source| Error::Store {
                    type_name: self.name.to_string(),
                    source,
                })?;
            self.synced(listed.resource_version, items, started);
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// The page size for a list at `rv`: client-go's pager rules (see
    /// [`Config::page_size`](super::Config::page_size)).
    fn page_limit(&self, rv: &str) -> Option<u32> {
        match self.config.page_size {
            Some(n) => Some(n).filter(|n| *n > 0),
            None if self.shared.paginated_result.load(Ordering::Relaxed)
                || rv.is_empty()
                || rv == "0" =>
            {
                Some(500)
            }
            None => None,
        }
    }

    async fn list_pages(&self, rv: &str) -> Result<Listed<K>, Error> {
        let first = ListParams {
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
            limit: self.page_limit(rv),
            resource_version: Some(rv.to_owned()),
            ..ListParams::default()
        };
        let mut params = first.clone();
        let mut items: Vec<Arc<K>> = Vec::new();
        let mut tokens = HashSet::new();
        let mut keys: HashSet<u64> = HashSet::new();
        let mut pages = 0u32;
        let mut pace_until: Option<tokio::time::Instant> = None;
        // The next page's request, started when the current one told its continue token early.
        let mut ahead: Option<Ahead<'_, K>> = None;
        // Pages are asked for ahead only while every page so far was a full one: a server
        // that pages without end gets paced requests, one at a time.
        let mut full_pages = true;
        loop {
            pages += 1;
            if pages > self.config.max_list_pages.max(1) {
                return Err(self.protocol(format!(
                    "the list did not end after {} pages",
                    self.config.max_list_pages
                )));
            }
            let page = match ahead.take() {
                Some(a) if Some(&a.token) == params.continue_token.as_ref() => a.page,
                _ => {
                    if let Some(until) = pace_until.take() {
                        tokio::time::sleep_until(until).await;
                    }
                    self.request_page(params.clone())
                }
            };
            let requested = page.requested;
            let may_ask_ahead = |token: &str| {
                (full_pages
                    && !token.is_empty()
                    && pages < self.config.max_list_pages
                    && !tokens.contains(token))
                .then(|| ListParams {
                    continue_token: Some(token.to_owned()),
                    resource_version: None,
                    version_match: None,
                    ..first.clone()
                })
            };
            let (result, next_page) = self.await_page(page, may_ask_ahead).await;
            ahead = next_page;
            let page = match result {
                Ok(page) => page,
                // client-go's pager: an expired continue token falls back to one full list.
                Err(Error::List { source, .. })
                    if source.is_expired() && params.continue_token.is_some() =>
                {
                    debug!("continue token expired, falling back to a full list");
                    drop(ahead);
                    let full = ListParams {
                        limit: None,
                        ..first.clone()
                    };
                    let page = self.list_page(&full, None).await?;
                    let resource_version = self.list_resource_version(&page.list)?;
                    return Ok(Listed {
                        items: page.items,
                        resource_version,
                        paginated: !tokens.is_empty(),
                    });
                }
                Err(e) => return Err(e),
            };
            let next = page
                .list
                .metadata
                .continue_
                .clone()
                .filter(|c| !c.is_empty());
            let resource_version = self.list_resource_version(&page.list)?;
            let limit = params.limit.unwrap_or(DEFAULT_PAGE_LIMIT) as usize;
            if next.is_some() && page.items.len() < limit.div_ceil(2) {
                pace_until = requested.checked_add(SHORT_PAGE_INTERVAL);
                full_pages = false;
            }
            let start = items.len();
            if items.is_empty() {
                items = page.items;
            } else {
                items.extend(page.items);
            }
            if let Some(token) = &next
                && !tokens.insert(token.clone())
            {
                return Err(self.protocol(format!(
                    "the server repeated continue token {:?}",
                    lister_watcher::trim_for_display(token, 64)
                )));
            }
            // A paginated list is one snapshot: a key that comes twice means the server is
            // replaying pages (a continue loop), which the page limit alone would only stop
            // after many thousands of requests.
            if next.is_some() || !keys.is_empty() {
                for obj in &items[start..] {
                    if let Ok(key) = meta_namespace_key(&**obj)
                        && !keys.insert(hash_key(&key))
                    {
                        return Err(self.protocol(format!(
                            "the paginated list returned {key} twice (page {pages})"
                        )));
                    }
                }
            }
            match next {
                Some(token) => {
                    params = ListParams {
                        continue_token: Some(token),
                        resource_version: None,
                        version_match: None,
                        ..first.clone()
                    };
                }
                None => {
                    return Ok(Listed {
                        items,
                        resource_version,
                        paginated: !tokens.is_empty(),
                    });
                }
            }
        }
    }

    /// Starts a page request that tells its continue token early.
    fn request_page(&self, params: ListParams) -> Page<'_, K> {
        let (tx, rx) = oneshot::channel();
        Page {
            requested: tokio::time::Instant::now(),
            future: async move { self.list_page(&params, Some(tx)).await }.boxed(),
            early: rx,
        }
    }

    /// Waits for `page`. If it tells its continue token before it is done and `ask_ahead`
    /// gives the next page's parameters for it, the next page is asked for at once and its
    /// request driven alongside: it comes back, maybe already answered, with the token it
    /// was asked with.
    async fn await_page<'a>(
        &'a self,
        page: Page<'a, K>,
        ask_ahead: impl FnOnce(&str) -> Option<ListParams>,
    ) -> (Result<SharedPage<K>, Error>, Option<Ahead<'a, K>>) {
        let Page {
            mut future, early, ..
        } = page;
        // The token first: a page that is done already may still start the next one.
        let (token, params) = match future::select(early, &mut future).await {
            Either::Left((Ok(token), _)) => match ask_ahead(&token) {
                Some(params) => (token, params),
                None => return (future.await, None),
            },
            Either::Left((Err(_), _)) => return (future.await, None),
            Either::Right((result, _)) => return (result, None),
        };
        debug!("asking for the next page ahead");
        let Page {
            future: next_future,
            early: next_early,
            requested: next_requested,
        } = self.request_page(params);
        let (result, next_future) = match future::select(future, next_future).await {
            Either::Left((result, next_future)) => (result, next_future),
            Either::Right((next_result, future)) => {
                (future.await, future::ready(next_result).boxed())
            }
        };
        let next = Page {
            requested: next_requested,
            future: next_future,
            early: next_early,
        };
        (result, Some(Ahead { token, page: next }))
    }

    /// One list request under [`Config::list_timeout`](super::Config::list_timeout), telling
    /// `next` its continue token early when given. Each item is shared as it is decoded
    /// ([`ListerWatcher::list_each`]): an unchanged one is replaced by the cache's copy at
    /// once, so a relist in one page holds one decoded object at a time beside the cache
    /// rather than a second copy of every object.
    async fn list_page(
        &self,
        params: &ListParams,
        next: Option<oneshot::Sender<String>>,
    ) -> Result<SharedPage<K>, Error> {
        let deadline = self.config.list_timeout;
        let mut items = Vec::new();
        let request = async {
            let mut sink = |obj: K| items.push(self.share_or_reuse(obj));
            self.lw.list_each(params, next, &mut sink).await
        };
        let result = if deadline.is_zero() {
            request.await
        } else {
            match tokio::time::timeout(deadline, request).await {
                Ok(r) => r,
                Err(_) => return Err(self.timeout("list", deadline)),
            }
        };
        let mut list = result.map_err(|source| Error::List {
            type_name: self.name.to_string(),
            source,
        })?;
        items.extend(
            std::mem::take(&mut list.items)
                .into_iter()
                .map(|o| self.share_or_reuse(o)),
        );
        Ok(SharedPage { list, items })
    }

    /// A list answer must carry a resourceVersion: without one the watch that follows would
    /// start at "any" and could leave phantom objects forever.
    fn list_resource_version(&self, list: &ObjectList<K>) -> Result<String, Error> {
        match list.metadata.resource_version.as_deref() {
            Some(rv) if !rv.is_empty() => Ok(rv.to_owned()),
            _ => Err(self.protocol(
                "the list answer has no metadata.resourceVersion; the cache was left untouched"
                    .into(),
            )),
        }
    }

    pub(crate) fn protocol(&self, reason: String) -> Error {
        Error::Protocol {
            type_name: self.name.to_string(),
            reason,
        }
    }

    pub(crate) fn timeout(&self, what: &'static str, after: Duration) -> Error {
        Error::Timeout {
            type_name: self.name.to_string(),
            what,
            after,
        }
    }
}
