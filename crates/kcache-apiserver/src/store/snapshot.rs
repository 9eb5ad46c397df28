//! List reads: one page of a resource type at the latest state or rebuilt at an exact
//! resourceVersion from the current objects and the event history.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use super::{Store, StoreError, Table};
use crate::object::StoredObject;
use crate::resource::ResourceId;

/// Which state a list reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadAt {
    /// The latest state.
    Latest,
    /// The state exactly at this resourceVersion.
    Exact(u64),
}

/// A list request against one resource type.
pub(crate) struct ListQuery<'a> {
    /// Restrict to one namespace.
    pub(crate) namespace: Option<&'a str>,
    /// Which state to read.
    pub(crate) at: ReadAt,
    /// Continue strictly after this key (relative to the namespace prefix).
    pub(crate) start_after: Option<&'a str>,
    /// At most this many items.
    pub(crate) limit: Option<usize>,
    /// Only items for which this returns true.
    pub(crate) filter: &'a (dyn Fn(&StoredObject) -> bool + Sync),
    /// Whether to count the remaining items when a page is cut.
    pub(crate) count_remaining: bool,
}

impl std::fmt::Debug for ListQuery<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListQuery")
            .field("namespace", &self.namespace)
            .field("at", &self.at)
            .field("start_after", &self.start_after)
            .field("limit", &self.limit)
            .field("count_remaining", &self.count_remaining)
            .finish_non_exhaustive()
    }
}

/// One page of a list.
#[derive(Debug, Clone)]
pub(crate) struct ListPage {
    /// The items, ordered by key.
    pub(crate) items: Vec<Arc<StoredObject>>,
    /// The resourceVersion the page is consistent at.
    pub(crate) rv: u64,
    /// When more items follow: the key (relative to the namespace prefix) of the last item.
    pub(crate) continue_after: Option<String>,
    /// How many matching items follow, when counted.
    pub(crate) remaining: Option<u64>,
}

impl Store {
    /// Reads one page of a list.
    ///
    /// # Errors
    /// [`StoreError::TooOld`] when an exact RV is older than the history window,
    /// [`StoreError::TooLarge`] when it is newer than the store.
    pub(crate) fn list(&self, id: &ResourceId, q: &ListQuery<'_>) -> Result<ListPage, StoreError> {
        let inner = self.inner.read();
        let current = inner.rv;
        let empty;
        let table = match inner.tables.get(id) {
            Some(t) => t,
            None => {
                empty = Table::new(inner.floor);
                &empty
            }
        };
        let rv = match q.at {
            ReadAt::Latest => current,
            ReadAt::Exact(r) if r > current => {
                return Err(StoreError::TooLarge {
                    requested: r,
                    current,
                });
            }
            ReadAt::Exact(r) if r < table.compacted => {
                return Err(StoreError::TooOld {
                    requested: r,
                    oldest: table.compacted,
                });
            }
            ReadAt::Exact(r) => r,
        };
        // State at `rv` for keys changed after it: the `prev` of the earliest later event.
        let mut overrides: BTreeMap<&str, Option<&Arc<StoredObject>>> = BTreeMap::new();
        for ev in table.log.iter().rev().take_while(|e| e.rv > rv) {
            overrides.insert(ev.key.as_str(), ev.prev.as_ref());
        }
        let prefix = q.namespace.map(|ns| format!("{ns}/")).unwrap_or_default();
        let start_key = q.start_after.map(|s| format!("{prefix}{s}"));
        let lower: Bound<&str> = match &start_key {
            Some(k) => Bound::Excluded(k.as_str()),
            None => Bound::Included(prefix.as_str()),
        };
        let mut cur = table
            .objects
            .range::<str, _>((lower, Bound::Unbounded))
            .map(|(k, v)| (k.as_str(), Some(v)))
            .take_while(|(k, _)| k.starts_with(&prefix))
            .peekable();
        let mut ovr = overrides
            .range::<str, _>((lower, Bound::Unbounded))
            .map(|(k, v)| (*k, *v))
            .take_while(|(k, _)| k.starts_with(&prefix))
            .peekable();
        let merged = std::iter::from_fn(move || {
            let take_cur = match (cur.peek(), ovr.peek()) {
                (None, None) => return None,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((a, _)), Some((b, _))) => {
                    if a == b {
                        cur.next();
                        false
                    } else {
                        a < b
                    }
                }
            };
            if take_cur { cur.next() } else { ovr.next() }
        })
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .filter(|(_, v)| (q.filter)(v));

        let mut items = Vec::new();
        let mut last_key = None;
        let mut remaining = 0u64;
        let mut more = false;
        for (k, v) in merged {
            if q.limit.is_some_and(|l| items.len() >= l) {
                more = true;
                if !q.count_remaining {
                    break;
                }
                remaining += 1;
                continue;
            }
            items.push(v.clone());
            last_key = Some(k);
        }
        let continue_after = if more {
            last_key.map(|k| k[prefix.len()..].to_owned())
        } else {
            None
        };
        Ok(ListPage {
            items,
            rv,
            continue_after,
            remaining: (more && q.count_remaining).then_some(remaining),
        })
    }
}
