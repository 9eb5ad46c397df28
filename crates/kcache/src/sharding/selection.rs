//! [`Selection`]: the shard selector an informer lists and watches with, changeable while it
//! runs; and the client-side filter that makes the informer's contents the same whether the
//! server applies the selector or not.

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicU64, Ordering},
};

use futures::StreamExt;
use kube_core::{ObjectList, Resource, WatchEvent};
use parking_lot::Mutex;
use tokio::sync::watch;
use tracing::warn;

use super::selector::Selector;
use crate::lister_watcher::{Error, WatchStream};

/// One value of a [`Selection`]: the selector (`None`: everything) and a generation that
/// grows with each change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Current {
    /// Incremented by every [`Selection::set`] that changes the selector.
    pub generation: u64,
    /// The selector; `None` selects every object.
    pub selector: Option<Arc<Selector>>,
}

/// The shard selector of one informer's lister-watcher, shared between the writer (a
/// [`ShardManager`](super::ShardManager), or the user) and the lister-watcher.
///
/// Setting a different selector ends the informer's open watch with
/// [`Error::is_selection_changed`], and its reflector lists again with the new selector (the
/// store's replace then drops the objects no longer selected and adds the new ones).
///
/// Lister-watchers (`kcache-client`'s `HttpListerWatcher::shards`) send
/// [`Selector::to_wire`] as `shardSelector` on every list and watch and filter what comes
/// back with [`ShardFilter`], so that the cache holds exactly the selected objects also when
/// the server ignores the parameter (feature gate `ShardedListAndWatch` off, a server older
/// than v1.36, a proxy that drops it). The fallback still transfers every object.
///
/// ```
/// use kcache::sharding::{Field, Layout, Selection};
/// use std::collections::BTreeSet;
/// let selection = Selection::new(None);
/// let layout = Layout::new(3, Field::Uid);
/// selection.set(Some(layout.selector(&BTreeSet::from([1]))));
/// assert_eq!(selection.current().generation, 1);
/// ```
#[derive(Clone, Debug)]
pub struct Selection {
    tx: Arc<watch::Sender<Current>>,
    stats: Arc<Stats>,
}

/// How the server treated the selector, counted over the lists of a [`Selection`].
#[derive(Debug, Default)]
struct Stats {
    applied: AtomicU64,
    ignored: AtomicU64,
    dropped: AtomicU64,
    warned: AtomicBool,
}

impl Selection {
    /// A selection starting at `selector` (`None`: everything).
    pub fn new(selector: Option<Selector>) -> Self {
        let (tx, _rx) = watch::channel(Current {
            generation: 0,
            selector: selector.map(Arc::new),
        });
        Self {
            tx: Arc::new(tx),
            stats: Arc::default(),
        }
    }

    /// Changes the selector; a no-op when it is the same one.
    pub fn set(&self, selector: Option<Selector>) {
        self.tx.send_if_modified(|cur| {
            if cur.selector.as_deref() == selector.as_ref() {
                return false;
            }
            cur.generation += 1;
            cur.selector = selector.map(Arc::new);
            true
        });
    }

    /// The current value.
    pub fn current(&self) -> Current {
        self.tx.borrow().clone()
    }

    /// List responses whose `shardInfo.selector` echoed the selector sent (the server
    /// filtered).
    pub fn lists_applied(&self) -> u64 {
        self.stats.applied.load(Ordering::Relaxed)
    }

    /// List responses without the echo (the server ignored the selector; filtered here).
    pub fn lists_ignored(&self) -> u64 {
        self.stats.ignored.load(Ordering::Relaxed)
    }

    /// Objects the client-side filter dropped (lists and watch events).
    pub fn objects_dropped(&self) -> u64 {
        self.stats.dropped.load(Ordering::Relaxed)
    }

    fn subscribe(&self) -> watch::Receiver<Current> {
        self.tx.subscribe()
    }
}

/// The per-lister-watcher side of a [`Selection`]: pins the selector for the pages of one
/// list, filters lists and watch events, and ends watches when the selection changes.
#[derive(Clone, Debug)]
pub struct ShardFilter {
    selection: Selection,
    /// The value the last sync (first list page or streaming list) used.
    pinned: Arc<Mutex<Option<Current>>>,
}

impl ShardFilter {
    /// A filter following `selection`.
    pub fn new(selection: Selection) -> Self {
        Self {
            selection,
            pinned: Arc::default(),
        }
    }

    /// The selection followed.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// The value to list with: the current one for a first page (`continuing == false`),
    /// the one the first page used for its continuations.
    pub fn for_list(&self, continuing: bool) -> Current {
        let mut pinned = self.pinned.lock();
        match &*pinned {
            Some(p) if continuing => p.clone(),
            _ => {
                let cur = self.selection.current();
                *pinned = Some(cur.clone());
                cur
            }
        }
    }

    /// The value to watch with. A streaming list (`initial_events`) is a new sync and pins
    /// the current value; a plain watch continues the last sync and is refused (its stream
    /// yields [`Error::selection_changed`]) when the selection changed since.
    pub fn for_watch(&self, initial_events: bool) -> (Current, bool) {
        let mut pinned = self.pinned.lock();
        let cur = self.selection.current();
        let stale = match &*pinned {
            Some(p) => !initial_events && p.generation != cur.generation,
            None => false,
        };
        if initial_events || pinned.is_none() {
            *pinned = Some(cur.clone());
        }
        (cur, stale)
    }

    /// Checks a list answer against the selector it was asked with and drops what the
    /// selector does not select. Counts whether the server applied it (`metadata.shardInfo`
    /// echoing the selector sent) and warns once when it did not.
    pub fn accept_list<K: Resource + Clone>(&self, sent: &Current, list: &mut ObjectList<K>) {
        let echoed = list
            .metadata
            .shard_info
            .as_ref()
            .map(|i| i.selector.clone());
        self.accept_items(sent, echoed.as_deref(), &mut list.items);
    }

    /// [`ShardFilter::accept_list`] on a list's parts: the `shardInfo.selector` it echoed and
    /// its items.
    pub fn accept_items<K: Resource>(
        &self,
        sent: &Current,
        echoed: Option<&str>,
        items: &mut Vec<K>,
    ) {
        let Some(selector) = &sent.selector else {
            return;
        };
        let wire = selector.to_wire();
        let stats = &self.selection.stats;
        if echoed == Some(wire.as_str()) {
            stats.applied.fetch_add(1, Ordering::Relaxed);
        } else {
            stats.ignored.fetch_add(1, Ordering::Relaxed);
            if !stats.warned.swap(true, Ordering::Relaxed) {
                warn!(
                    sent = %wire,
                    echoed = echoed.unwrap_or("<none>"),
                    "the server did not apply the shard selector (feature gate \
                     ShardedListAndWatch off, or an older server): filtering on the client, \
                     every object is still transferred"
                );
            }
        }
        let before = items.len();
        items.retain(|o| selector.matches(o.meta()));
        let dropped = before - items.len();
        stats.dropped.fetch_add(dropped as u64, Ordering::Relaxed);
    }

    /// Filters a watch opened with `sent` (see [`ShardFilter::for_watch`]): events of objects
    /// not selected are dropped, and the stream ends with [`Error::selection_changed`] as
    /// soon as the selection changes (or at once when `stale`).
    pub fn watch<K>(&self, sent: Current, stale: bool, stream: WatchStream<K>) -> WatchStream<K>
    where
        K: Resource + Send + 'static,
    {
        struct State<K> {
            stream: WatchStream<K>,
            rx: watch::Receiver<Current>,
            stale: bool,
            done: bool,
            /// The selection's sender is gone: no more changes can come.
            closed: bool,
        }
        let stats = Arc::clone(&self.selection.stats);
        let generation = sent.generation;
        let selector = sent.selector;
        let state = State {
            stream,
            rx: self.selection.subscribe(),
            stale,
            done: false,
            closed: false,
        };
        futures::stream::unfold(state, move |mut st| {
            let selector = selector.clone();
            let stats = Arc::clone(&stats);
            async move {
                if st.done {
                    return None;
                }
                if st.stale || st.rx.borrow_and_update().generation != generation {
                    st.done = true;
                    return Some((Err(Error::selection_changed()), st));
                }
                loop {
                    let item = tokio::select! {
                        biased;
                        r = st.rx.changed(), if !st.closed => {
                            if r.is_err() {
                                st.closed = true;
                                continue;
                            }
                            if st.rx.borrow_and_update().generation != generation {
                                st.done = true;
                                return Some((Err(Error::selection_changed()), st));
                            }
                            continue;
                        }
                        item = st.stream.next() => item?,
                    };
                    let keep = match (&item, &selector) {
                        (
                            Ok(
                                WatchEvent::Added(o)
                                | WatchEvent::Modified(o)
                                | WatchEvent::Deleted(o),
                            ),
                            Some(s),
                        ) => s.matches(o.meta()),
                        _ => true,
                    };
                    if keep {
                        return Some((item, st));
                    }
                    stats.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
        .boxed()
    }
}
