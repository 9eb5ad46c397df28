//! [`ObjectHandlerFns`]: closures called with an [`Object`] view per notification, as an
//! [`EventHandler`] of an informer that stores lean [`Compact<K>`] objects.

use std::sync::Arc;

use kcache::informer::{DeletedObject, EventHandler};

use super::Object;
use crate::Compact;

type AddFn<K> = Box<dyn Fn(&Object<K>, bool) + Send + Sync>;
type UpdateFn<K> = Box<dyn Fn(&Object<K>, &Object<K>) + Send + Sync>;
type DeleteFn<K> = Box<dyn Fn(&Object<K>, bool) + Send + Sync>;

/// An [`EventHandler`] of a lean informer (`factory.informer::<K>(&client)`) made of
/// closures; missing ones do nothing. The lean counterpart of [`kcache::HandlerFns`].
///
/// Each call gets a fresh [`Object<K>`] view of the notified object: reading its metadata is
/// free, and [`Object::typed`] decodes at most once for that call however often it is called.
/// A handler that only enqueues keys never decodes an object.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kcache_client::ObjectHandlerFns;
///
/// let handler = ObjectHandlerFns::<Pod>::new()
///     .on_add(|pod, _initial| println!("added {:?}", pod.metadata().name))
///     .on_update(|_old, new| {
///         if let Ok(pod) = new.typed() {
///             println!("{:?} is {:?}", pod.metadata.name, pod.status.as_ref().map(|s| &s.phase));
///         }
///     })
///     .on_delete(|pod, _final_state_unknown| println!("deleted {:?}", pod.metadata().name));
/// # let _ = handler;
/// ```
pub struct ObjectHandlerFns<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
}

impl<K> std::fmt::Debug for ObjectHandlerFns<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectHandlerFns")
            .field("on_add", &self.add.is_some())
            .field("on_update", &self.update.is_some())
            .field("on_delete", &self.delete.is_some())
            .finish()
    }
}

impl<K> Default for ObjectHandlerFns<K> {
    fn default() -> Self {
        Self {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<K> ObjectHandlerFns<K> {
    /// A handler that does nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the add callback: the object, and whether it is part of the initial list.
    #[must_use]
    pub fn on_add(mut self, f: impl Fn(&Object<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }

    /// Sets the update callback: the old and the new object (the same resourceVersion for a
    /// resync).
    #[must_use]
    pub fn on_update(mut self, f: impl Fn(&Object<K>, &Object<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }

    /// Sets the delete callback: the deleted object (its final state, or the last state the
    /// cache knew), and whether the deletion was inferred from a relist (client-go's
    /// `DeletedFinalStateUnknown`).
    #[must_use]
    pub fn on_delete(mut self, f: impl Fn(&Object<K>, bool) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K: Send + Sync + 'static> EventHandler<Compact<K>> for ObjectHandlerFns<K> {
    fn on_add(&self, obj: &Arc<Compact<K>>, is_in_initial_list: bool) {
        if let Some(f) = &self.add {
            f(&Object::new(Arc::clone(obj)), is_in_initial_list);
        }
    }

    fn on_update(&self, old: &Arc<Compact<K>>, new: &Arc<Compact<K>>) {
        if let Some(f) = &self.update {
            f(&Object::new(Arc::clone(old)), &Object::new(Arc::clone(new)));
        }
    }

    fn on_delete(&self, obj: &DeletedObject<Compact<K>>) {
        if let Some(f) = &self.delete {
            let view = Object::new(Arc::clone(obj.object()));
            f(&view, obj.is_final_state_unknown());
        }
    }
}
