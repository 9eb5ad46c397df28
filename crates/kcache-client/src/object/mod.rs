//! [`Object<K>`]: the view of a lean stored object ([`Compact<K>`]) that handlers and listers
//! hand out. Its metadata is free; its typed `K` is decoded on first access and kept for the
//! life of the view (one notification, one read), never in the cache.
//!
//! `factory.informer::<Pod>(&client)` stores each Pod as its wire bytes plus its parsed
//! metadata. A handler that only enqueues keys — the common controller pattern — reads
//! metadata and never decodes a Pod; one that needs the spec calls [`Object::typed`], which
//! decodes once however often it is called on that view:
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::Pod;
//! use kcache_client::{Compact, Object};
//!
//! let json = br#"{"metadata":{"name":"web-0","namespace":"default"},
//!                 "spec":{"nodeName":"node-a","containers":[]}}"#;
//! let stored: Arc<Compact<Pod>> = Arc::new(Compact::from_json(json, false)?);
//! let pod = Object::new(stored);
//! assert_eq!(pod.metadata().name.as_deref(), Some("web-0")); // no decode
//! assert!(!pod.is_decoded());
//! let node = pod.typed()?.spec.as_ref().and_then(|s| s.node_name.as_deref());
//! assert_eq!(node, Some("node-a"));
//! assert!(pod.is_decoded()); // a second `typed()` on this view is free
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Decode errors come back as a `Result` from [`Object::typed`] (the bytes were checked only
//! for their metadata when stored); nothing here panics on a malformed object.
//!
//! The handler adaptor is in `handler` ([`ObjectHandlerFns`]), the lister in `lister`
//! ([`ObjectLister`]), the lean store's index and transform rules in `stored`.

mod handler;
mod lister;
mod stored;
#[cfg(test)]
mod tests;

use std::{
    fmt,
    ops::Deref,
    sync::{Arc, OnceLock},
};

use kube_core::{ObjectMeta, Resource};
use serde::de::DeserializeOwned;

pub use handler::ObjectHandlerFns;
pub use lister::{ObjectLister, ObjectNamespaceLister};

use crate::{Compact, compact::CompactError};

/// A lean stored object as handlers and listers see it: the shared [`Compact<K>`] (wire
/// bytes plus parsed metadata) and, once asked for, its typed `K`.
///
/// A view is made per notification and per lister read; the decoded `K` lives as long as the
/// view and is dropped with it, so the cache keeps only the lean object. Keep a view (or the
/// `&K` it lends) for as long as the typed object is needed; keep
/// [`stored`](Self::stored) to hold on to the object itself cheaply.
///
/// It dereferences to [`Compact<K>`] ([`metadata`](Compact::metadata),
/// [`bytes`](Compact::bytes), [`format`](Compact::format), and [`Resource`]'s `meta`), so
/// reading metadata never decodes; key functions take [`stored`](Self::stored).
pub struct Object<K> {
    stored: Arc<Compact<K>>,
    typed: OnceLock<Result<K, Arc<CompactError>>>,
}

impl<K> Object<K> {
    /// A view of `stored`, nothing decoded yet.
    pub fn new(stored: Arc<Compact<K>>) -> Self {
        Self {
            stored,
            typed: OnceLock::new(),
        }
    }

    /// The parsed metadata (without `managedFields`); never decodes.
    pub fn metadata(&self) -> &ObjectMeta {
        self.stored.metadata()
    }

    /// The stored object, shared with the cache.
    pub fn stored(&self) -> &Arc<Compact<K>> {
        &self.stored
    }

    /// The stored object, giving up the view (and its decoded `K`, if any).
    pub fn into_stored(self) -> Arc<Compact<K>> {
        self.stored
    }

    /// Whether this view has decoded its typed object (successfully or not).
    pub fn is_decoded(&self) -> bool {
        self.typed.get().is_some()
    }
}

impl<K: DeserializeOwned + Resource + 'static> Object<K> {
    /// The typed object, decoded from the stored bytes on the first call and kept by this view
    /// (later calls on the same view return it, or the same error, without decoding again).
    /// Its metadata is [`metadata`](Self::metadata) plus the bytes' `managedFields`, as
    /// [`Compact::typed`] gives it.
    ///
    /// # Errors
    /// The decode error (shared: every call on this view returns the same one) when the bytes
    /// are not a valid `K`.
    pub fn typed(&self) -> Result<&K, Arc<CompactError>> {
        self.typed
            .get_or_init(|| self.stored.typed().map_err(Arc::new))
            .as_ref()
            .map_err(Arc::clone)
    }

    /// The typed object, owned (decoded now unless this view already has it).
    ///
    /// # Errors
    /// As [`typed`](Self::typed).
    pub fn into_typed(self) -> Result<K, Arc<CompactError>> {
        match self.typed.into_inner() {
            Some(done) => done,
            None => self.stored.typed().map_err(Arc::new),
        }
    }
}

impl<K> From<Arc<Compact<K>>> for Object<K> {
    fn from(stored: Arc<Compact<K>>) -> Self {
        Self::new(stored)
    }
}

impl<K> Deref for Object<K> {
    type Target = Compact<K>;

    fn deref(&self) -> &Compact<K> {
        &self.stored
    }
}

impl<K: Clone> Clone for Object<K> {
    fn clone(&self) -> Self {
        Self {
            stored: Arc::clone(&self.stored),
            typed: self.typed.clone(),
        }
    }
}

impl<K> fmt::Debug for Object<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Object")
            .field("stored", &self.stored)
            .field("decoded", &self.is_decoded())
            .finish()
    }
}
