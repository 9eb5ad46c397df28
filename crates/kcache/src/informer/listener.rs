//! Per-handler listeners: each registered handler has its own buffer and task.
//!
//! A note on the buffer bound. client-go's per-handler buffer is unbounded on purpose: the
//! informer must never block on a slow handler (that would stall the FIFO and every other
//! handler), and it must never drop a notification. We keep that default
//! ([`BufferMode::Unbounded`]) — its memory is one pointer-sized notification per pending change
//! (objects are shared with the cache) and its depth is visible through
//! [`HandlerRegistration::pending`](super::HandlerRegistration::pending) — and add
//! [`BufferMode::Coalescing`], whose memory is bounded by the number of distinct keys: while a
//! key waits, newer changes to it replace the pending one, so the handler sees the latest state
//! and skips intermediate ones.

use std::{
    collections::{HashMap, VecDeque},
    panic::AssertUnwindSafe,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use parking_lot::Mutex;
use tokio::{sync::Notify, time::Instant};
use tracing::error;

use super::handler::{DeletedObject, EventHandler};
use crate::store::ObjectKey;

/// How a handler's pending notifications are buffered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BufferMode {
    /// Every notification is kept and delivered in order (client-go's behaviour). Memory grows
    /// with the backlog of a slow handler.
    #[default]
    Unbounded,
    /// At most one pending notification per key: a newer change to a waiting key replaces it,
    /// so memory is bounded by the number of distinct keys. The handler sees the latest state:
    /// add+update → one add of the newest object; update+update → one update from the state
    /// it last saw; add+delete → nothing; delete+re-create → one update (compare UIDs to tell
    /// a re-creation apart). Keys are delivered in the order they first became pending.
    Coalescing,
}

/// One notification for a handler.
pub(crate) enum Notification<K> {
    Add {
        key: ObjectKey,
        obj: Arc<K>,
        initial: bool,
    },
    Update {
        key: ObjectKey,
        old: Arc<K>,
        new: Arc<K>,
    },
    Delete {
        key: ObjectKey,
        obj: DeletedObject<K>,
    },
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Add { key, obj, initial } => Self::Add {
                key: key.clone(),
                obj: Arc::clone(obj),
                initial: *initial,
            },
            Self::Update { key, old, new } => Self::Update {
                key: key.clone(),
                old: Arc::clone(old),
                new: Arc::clone(new),
            },
            Self::Delete { key, obj } => Self::Delete {
                key: key.clone(),
                obj: obj.clone(),
            },
        }
    }
}

enum Latest<K> {
    Present(Arc<K>),
    Deleted(DeletedObject<K>),
}

struct Slot<K> {
    /// What the handler last saw of this key (`None`: nothing, or a delete).
    seen: Option<Arc<K>>,
    latest: Latest<K>,
    initial: bool,
    /// Initial-list adds merged into this slot (for sync tracking).
    initial_count: usize,
}

enum Buffer<K> {
    Unbounded(VecDeque<Notification<K>>),
    Coalescing {
        order: VecDeque<ObjectKey>,
        slots: HashMap<ObjectKey, Slot<K>>,
    },
}

impl<K> Buffer<K> {
    fn new(mode: BufferMode) -> Self {
        match mode {
            BufferMode::Unbounded => Self::Unbounded(VecDeque::new()),
            BufferMode::Coalescing => Self::Coalescing {
                order: VecDeque::new(),
                slots: HashMap::new(),
            },
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Unbounded(q) => q.len(),
            Self::Coalescing { slots, .. } => slots.len(),
        }
    }

    fn push(&mut self, n: Notification<K>) {
        match self {
            Self::Unbounded(q) => q.push_back(n),
            Self::Coalescing { order, slots } => {
                let (key, initial) = match &n {
                    Notification::Add { key, initial, .. } => (key.clone(), *initial),
                    Notification::Update { key, .. } | Notification::Delete { key, .. } => {
                        (key.clone(), false)
                    }
                };
                match slots.get_mut(&key) {
                    Some(slot) => {
                        slot.latest = match n {
                            Notification::Add { obj, .. }
                            | Notification::Update { new: obj, .. } => Latest::Present(obj),
                            Notification::Delete { obj, .. } => Latest::Deleted(obj),
                        };
                        slot.initial &= initial;
                        slot.initial_count += usize::from(initial);
                    }
                    None => {
                        let (seen, latest) = match n {
                            Notification::Add { obj, .. } => (None, Latest::Present(obj)),
                            Notification::Update { old, new, .. } => {
                                (Some(old), Latest::Present(new))
                            }
                            Notification::Delete { obj, .. } => {
                                (Some(Arc::clone(obj.object())), Latest::Deleted(obj))
                            }
                        };
                        let slot = Slot {
                            seen,
                            latest,
                            initial,
                            initial_count: usize::from(initial),
                        };
                        slots.insert(key.clone(), slot);
                        order.push_back(key);
                    }
                }
            }
        }
    }

    /// Takes everything pending: the notifications to deliver and how many initial-list adds
    /// they account for.
    fn drain(&mut self) -> (Vec<Notification<K>>, usize) {
        match self {
            Self::Unbounded(q) => {
                let out: Vec<_> = q.drain(..).collect();
                let initial = out
                    .iter()
                    .filter(|n| matches!(n, Notification::Add { initial: true, .. }))
                    .count();
                (out, initial)
            }
            Self::Coalescing { order, slots } => {
                let mut out = Vec::with_capacity(order.len());
                let mut initial_count = 0;
                for key in order.drain(..) {
                    let Some(slot) = slots.remove(&key) else {
                        continue;
                    };
                    initial_count += slot.initial_count;
                    match (slot.seen, slot.latest) {
                        (None, Latest::Present(obj)) => {
                            out.push(Notification::Add {
                                key,
                                obj,
                                initial: slot.initial,
                            });
                        }
                        (Some(old), Latest::Present(new)) => {
                            out.push(Notification::Update { key, old, new })
                        }
                        (Some(_), Latest::Deleted(obj)) => {
                            out.push(Notification::Delete { key, obj })
                        }
                        (None, Latest::Deleted(_)) => {}
                    }
                }
                (out, initial_count)
            }
        }
    }
}

/// A handler with its buffer, resync schedule and sync tracking.
pub(crate) struct Listener<K> {
    pub(crate) id: u64,
    handler: Box<dyn EventHandler<K>>,
    buffer: Mutex<Buffer<K>>,
    wake: Notify,
    closed: AtomicBool,
    /// Initial-list adds queued but not yet handled.
    pending_initial: AtomicUsize,
    delivered: AtomicU64,
    pub(crate) requested_resync: Duration,
    /// Deliver on the listener's task rather than the blocking pool.
    pub(crate) inline: bool,
    resync: Mutex<ResyncState>,
    /// Poked whenever sync progress may have changed (shared with the informer).
    sync_notify: Arc<Notify>,
}

struct ResyncState {
    period: Duration,
    next: Instant,
}

impl<K: Send + Sync + 'static> Listener<K> {
    pub(crate) fn new(
        id: u64,
        handler: Box<dyn EventHandler<K>>,
        mode: BufferMode,
        inline: bool,
        requested_resync: Duration,
        resync_period: Duration,
        sync_notify: Arc<Notify>,
    ) -> Self {
        Self {
            id,
            handler,
            buffer: Mutex::new(Buffer::new(mode)),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            pending_initial: AtomicUsize::new(0),
            delivered: AtomicU64::new(0),
            requested_resync,
            inline,
            resync: Mutex::new(ResyncState {
                period: resync_period,
                next: Instant::now() + resync_period,
            }),
            sync_notify,
        }
    }

    /// Queues a notification; never blocks on the handler.
    pub(crate) fn add(&self, n: Notification<K>) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        if matches!(n, Notification::Add { initial: true, .. }) {
            self.pending_initial.fetch_add(1, Ordering::AcqRel);
        }
        self.buffer.lock().push(n);
        self.wake.notify_one();
    }

    /// Pending notifications (keys, in coalescing mode).
    pub(crate) fn pending(&self) -> usize {
        self.buffer.lock().len()
    }

    /// Notifications handed to the handler so far.
    pub(crate) fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }

    /// Whether every initial-list add queued so far has been handled.
    pub(crate) fn initial_done(&self) -> bool {
        self.pending_initial.load(Ordering::Acquire) == 0
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake.notify_one();
        self.sync_notify.notify_waiters();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Delivers notifications until closed.
    ///
    /// Handlers are synchronous and may block, so by default each drained batch is delivered on
    /// tokio's blocking pool: a blocking handler then never holds an async worker (and the
    /// tasks queued behind it). `inline` delivers on this task instead, which saves a thread
    /// hop per batch for handlers that never block.
    pub(crate) async fn run(self: Arc<Self>) {
        let inline = self.inline;
        loop {
            let (batch, initial) = self.buffer.lock().drain();
            if batch.is_empty() && initial == 0 {
                if self.is_closed() {
                    return;
                }
                self.wake.notified().await;
                continue;
            }
            let finished = if inline {
                self.deliver_all(batch)
            } else {
                let this = Arc::clone(&self);
                tokio::task::spawn_blocking(move || this.deliver_all(batch))
                    .await
                    .unwrap_or(false)
            };
            if initial > 0 {
                self.pending_initial.fetch_sub(initial, Ordering::AcqRel);
                self.sync_notify.notify_waiters();
            }
            if !finished {
                return;
            }
            tokio::task::yield_now().await;
        }
    }

    /// Delivers a batch; `false` when the listener was closed meanwhile.
    fn deliver_all(&self, batch: Vec<Notification<K>>) -> bool {
        for n in batch {
            if self.is_closed() {
                return false;
            }
            self.deliver(n);
            self.delivered.fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    fn deliver(&self, n: Notification<K>) {
        let handler = &self.handler;
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| match &n {
            Notification::Add { obj, initial, .. } => handler.on_add(obj, *initial),
            Notification::Update { old, new, .. } => handler.on_update(old, new),
            Notification::Delete { obj, .. } => handler.on_delete(obj),
        }));
        if result.is_err() {
            let key = match &n {
                Notification::Add { key, .. }
                | Notification::Update { key, .. }
                | Notification::Delete { key, .. } => key,
            };
            error!(listener = self.id, %key, "event handler panicked; the notification is dropped for this handler");
        }
    }

    /// Whether this listener's resync is due at `now`.
    pub(crate) fn resync_due(&self, now: Instant) -> bool {
        let r = self.resync.lock();
        !r.period.is_zero() && now >= r.next
    }

    pub(crate) fn schedule_next_resync(&self, now: Instant) {
        let mut r = self.resync.lock();
        r.next = now + r.period;
    }

    pub(crate) fn set_resync_period(&self, period: Duration) {
        self.resync.lock().period = period;
    }

    pub(crate) fn resync_period(&self) -> Duration {
        self.resync.lock().period
    }
}

/// client-go's `determineResyncPeriod`: 0 stays 0; an informer that does not resync gives 0;
/// otherwise at least the informer's check period.
pub(crate) fn determine_resync_period(desired: Duration, check: Duration) -> Duration {
    if desired.is_zero() {
        Duration::ZERO
    } else if check.is_zero() {
        tracing::warn!(
            ?desired,
            "resync period ignored: this informer does not resync"
        );
        Duration::ZERO
    } else if desired < check {
        tracing::warn!(
            ?desired,
            ?check,
            "resync period raised to the informer's resync check period"
        );
        check
    } else {
        desired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: &str) -> ObjectKey {
        ObjectKey::new(Some("ns"), n)
    }

    fn drain_desc(b: &mut Buffer<String>) -> (Vec<String>, usize) {
        let (out, initial) = b.drain();
        let desc = out
            .into_iter()
            .map(|n| match n {
                Notification::Add { key, obj, initial } => format!("add {key} {obj} {initial}"),
                Notification::Update { key, old, new } => format!("update {key} {old}->{new}"),
                Notification::Delete { key, obj } => format!("delete {key} {}", obj.object()),
            })
            .collect();
        (desc, initial)
    }

    #[test]
    fn coalescing_buffer_keeps_one_pending_notification_per_key() {
        let mut b = Buffer::new(BufferMode::Coalescing);
        let (a, c) = (key("a"), key("c"));
        b.push(Notification::Add {
            key: a.clone(),
            obj: Arc::new("a1".into()),
            initial: true,
        });
        b.push(Notification::Update {
            key: a.clone(),
            old: Arc::new("a1".into()),
            new: Arc::new("a2".into()),
        });
        b.push(Notification::Update {
            key: c.clone(),
            old: Arc::new("c1".into()),
            new: Arc::new("c2".into()),
        });
        b.push(Notification::Update {
            key: c.clone(),
            old: Arc::new("c2".into()),
            new: Arc::new("c3".into()),
        });
        assert_eq!(b.len(), 2, "memory is bounded by distinct keys");
        let (desc, initial) = drain_desc(&mut b);
        assert_eq!(desc, ["add ns/a a2 false", "update ns/c c1->c3"]);
        assert_eq!(initial, 1, "the merged initial add is accounted for");
    }

    #[test]
    fn coalescing_add_then_delete_delivers_nothing_and_update_then_delete_delivers_the_delete() {
        let mut b = Buffer::new(BufferMode::Coalescing);
        b.push(Notification::Add {
            key: key("a"),
            obj: Arc::new("a1".into()),
            initial: false,
        });
        b.push(Notification::Delete {
            key: key("a"),
            obj: DeletedObject::Final(Arc::new("a1".into())),
        });
        b.push(Notification::Update {
            key: key("b"),
            old: Arc::new("b1".into()),
            new: Arc::new("b2".into()),
        });
        b.push(Notification::Delete {
            key: key("b"),
            obj: DeletedObject::Final(Arc::new("b2".into())),
        });
        let (desc, _) = drain_desc(&mut b);
        assert_eq!(desc, ["delete ns/b b2"]);
    }

    #[test]
    fn unbounded_buffer_keeps_every_notification_in_order() {
        let mut b = Buffer::new(BufferMode::Unbounded);
        b.push(Notification::Add {
            key: key("a"),
            obj: Arc::new("a1".into()),
            initial: true,
        });
        b.push(Notification::Update {
            key: key("a"),
            old: Arc::new("a1".into()),
            new: Arc::new("a2".into()),
        });
        b.push(Notification::Delete {
            key: key("a"),
            obj: DeletedObject::Final(Arc::new("a2".into())),
        });
        let (desc, initial) = drain_desc(&mut b);
        assert_eq!(
            desc,
            ["add ns/a a1 true", "update ns/a a1->a2", "delete ns/a a2"]
        );
        assert_eq!(initial, 1);
    }

    #[test]
    fn resync_period_rules_follow_client_go() {
        let s = Duration::from_secs;
        assert_eq!(determine_resync_period(s(0), s(10)), s(0));
        assert_eq!(
            determine_resync_period(s(5), s(0)),
            s(0),
            "an informer without resync"
        );
        assert_eq!(
            determine_resync_period(s(5), s(10)),
            s(10),
            "raised to the check period"
        );
        assert_eq!(determine_resync_period(s(30), s(10)), s(30));
    }
}
