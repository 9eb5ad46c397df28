//! Event handlers: what an informer calls for every change.

use std::sync::Arc;

use crate::store::ObjectKey;

/// The object an [`EventHandler::on_delete`] receives.
#[derive(Debug)]
pub enum DeletedObject<K> {
    /// The watch reported the deletion; this is the object's final state.
    Final(Arc<K>),
    /// The deletion was inferred from a relist (the watch missed it): client-go's
    /// `DeletedFinalStateUnknown`. `obj` is the last state the cache knew, possibly stale.
    FinalStateUnknown {
        /// The vanished object's key.
        key: ObjectKey,
        /// Its last known state.
        obj: Arc<K>,
    },
}

impl<K> DeletedObject<K> {
    /// The deleted object: its final state, or the last known one for a tombstone.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Final(obj) | Self::FinalStateUnknown { obj, .. } => obj,
        }
    }

    /// Whether the deletion was inferred from a relist.
    pub fn is_final_state_unknown(&self) -> bool {
        matches!(self, Self::FinalStateUnknown { .. })
    }
}

impl<K> Clone for DeletedObject<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Final(obj) => Self::Final(Arc::clone(obj)),
            Self::FinalStateUnknown { key, obj } => Self::FinalStateUnknown {
                key: key.clone(),
                obj: Arc::clone(obj),
            },
        }
    }
}

/// Receives an informer's notifications (client-go's `ResourceEventHandler`).
///
/// Each registered handler runs on its own task, one notification at a time, in the order the
/// informer produced them; a slow handler delays only itself. Methods are synchronous and
/// should return quickly — the usual handler computes a key and adds it to a
/// [`RateLimitingQueue`](crate::workqueue::RateLimitingQueue), where workers do the slow work.
/// The cache ([`SharedIndexInformer::indexer`](super::SharedIndexInformer::indexer)) already
/// holds the new state when a notification is delivered, and may hold newer ones.
///
/// Objects are shared with the cache: never mutate them (they are behind `Arc`).
///
/// # Panics
///
/// A panic in a handler method is caught: it is logged at error level with the handler's name,
/// the object's key and the panic's message, that one notification is dropped *for that handler
/// only*, and the handler goes on with the next one at once; the cache and the other handlers
/// are not affected. A handler that keeps state
/// should therefore not panic halfway through an update. client-go does not catch handler
/// panics: its `HandleCrash` logs and re-panics, which ends the process.
pub trait EventHandler<K>: Send + Sync + 'static {
    /// An object was added. `is_in_initial_list` is true for objects of the initial list (and
    /// for the synthetic adds a handler registered after start receives).
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        let _ = (obj, is_in_initial_list);
    }

    /// An object changed, or is re-delivered by a resync (then `old` and `new` have the same
    /// resourceVersion).
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let _ = (old, new);
    }

    /// An object was deleted.
    fn on_delete(&self, obj: &DeletedObject<K>) {
        let _ = obj;
    }
}

type AddFn<K> = Box<dyn Fn(&Arc<K>, bool) + Send + Sync>;
type UpdateFn<K> = Box<dyn Fn(&Arc<K>, &Arc<K>) + Send + Sync>;
type DeleteFn<K> = Box<dyn Fn(&DeletedObject<K>) + Send + Sync>;

/// An [`EventHandler`] made of closures (client-go's `ResourceEventHandlerFuncs`); missing ones
/// do nothing.
///
/// ```
/// use kcache::informer::HandlerFns;
/// use k8s_openapi::api::core::v1::Pod;
///
/// let handler = HandlerFns::<Pod>::new()
///     .on_add(|pod, _initial| println!("added {:?}", pod.metadata.name))
///     .on_delete(|deleted| println!("deleted {:?}", deleted.object().metadata.name));
/// # let _ = handler;
/// ```
pub struct HandlerFns<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
}

impl<K> std::fmt::Debug for HandlerFns<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerFns")
            .field("on_add", &self.add.is_some())
            .field("on_update", &self.update.is_some())
            .field("on_delete", &self.delete.is_some())
            .finish()
    }
}

impl<K> Default for HandlerFns<K> {
    fn default() -> Self {
        Self {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<K> HandlerFns<K> {
    /// A handler that does nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the add callback.
    #[must_use]
    pub fn on_add(mut self, f: impl Fn(&Arc<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }

    /// Sets the update callback.
    #[must_use]
    pub fn on_update(mut self, f: impl Fn(&Arc<K>, &Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }

    /// Sets the delete callback.
    #[must_use]
    pub fn on_delete(mut self, f: impl Fn(&DeletedObject<K>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K: Send + Sync + 'static> EventHandler<K> for HandlerFns<K> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        if let Some(f) = &self.add {
            f(obj, is_in_initial_list);
        }
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        if let Some(f) = &self.update {
            f(old, new);
        }
    }

    fn on_delete(&self, obj: &DeletedObject<K>) {
        if let Some(f) = &self.delete {
            f(obj);
        }
    }
}

impl<K: Send + Sync + 'static, H: EventHandler<K> + ?Sized> EventHandler<K> for Arc<H> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        (**self).on_add(obj, is_in_initial_list);
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        (**self).on_update(old, new);
    }

    fn on_delete(&self, obj: &DeletedObject<K>) {
        (**self).on_delete(obj);
    }
}
