//! A listener's buffer of pending notifications: every one in order
//! ([`BufferMode::Unbounded`]), or at most one per key ([`BufferMode::Coalescing`]).

use std::{
    collections::{HashMap, VecDeque},
    sync::Arc,
};

use crate::informer::handler::DeletedObject;
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

pub(super) struct Slot<K> {
    /// What the handler last saw of this key (`None`: nothing, or a delete).
    seen: Option<Arc<K>>,
    latest: Latest<K>,
    initial: bool,
    /// Initial-list adds merged into this slot (for sync tracking).
    initial_count: usize,
}

pub(super) enum Buffer<K> {
    Unbounded(VecDeque<Notification<K>>),
    Coalescing {
        order: VecDeque<ObjectKey>,
        slots: HashMap<ObjectKey, Slot<K>>,
    },
}

impl<K> Buffer<K> {
    pub(super) fn new(mode: BufferMode) -> Self {
        match mode {
            BufferMode::Unbounded => Self::Unbounded(VecDeque::new()),
            BufferMode::Coalescing => Self::Coalescing {
                order: VecDeque::new(),
                slots: HashMap::new(),
            },
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Self::Unbounded(q) => q.len(),
            Self::Coalescing { slots, .. } => slots.len(),
        }
    }

    pub(super) fn push(&mut self, n: Notification<K>) {
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
    pub(super) fn drain(&mut self) -> (Vec<Notification<K>>, usize) {
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
}
