//! Draining the FIFO and client-go's `processDeltas`: a popped batch is applied to the indexer
//! first, then the handlers are notified; the notifications reach the listeners at the next
//! delivery.

use std::sync::Arc;

use futures::FutureExt as _;
use kube_core::Resource;

use super::{handler::DeletedObject, listener::Notification, shared_informer::Inner};
use crate::{
    fifo::{self, DeltaObject, DeltaType, Deltas, Fifo},
    store::{ObjectKey, Transaction},
};

impl<K> Inner<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// Hands the listeners what the drains queued for them, under the informer's span.
    pub(super) fn deliver(&self) {
        let _span = self.span.enter();
        self.processor.flush();
    }

    /// Pops and applies everything queued, on the caller's task, under the informer's span;
    /// the notifications wait in the listeners' buffers for the next flush.
    /// `drain_lock` keeps one consumer even if writes ever came from two threads.
    pub(super) fn drain(&self) {
        let _consumer = self.drain_lock.lock();
        let _span = self.span.enter();
        let one_key = self.queue.pops_one_key();
        loop {
            let popped = self
                .queue
                .pop_batch(|d, initial| self.handle_deltas(d, initial, one_key))
                .now_or_never();
            match popped {
                Some(Ok(())) => {}
                // Nothing queued (the pop would wait), or closed and drained.
                None | Some(Err(fifo::Error::Closed)) => return,
            }
        }
    }

    /// client-go's `processDeltas`/`processDeltasInBatch`: update the indexer first, then
    /// notify. `one_key` says the deltas all concern one key (a `DeltaFifo` pop), so they must
    /// be applied one by one.
    fn handle_deltas(&self, deltas: Deltas<K>, initial: bool, one_key: bool) {
        let _block = self.block_deltas.lock();
        let mut chunk: Vec<(DeltaType, DeltaObject<K>)> = Vec::with_capacity(deltas.len());
        for d in deltas {
            match d.object {
                DeltaObject::Object { .. } | DeltaObject::DeletedFinalStateUnknown { .. } => {
                    chunk.push((d.kind, d.object));
                    if one_key {
                        self.apply_chunk(&mut chunk, initial);
                    }
                }
                DeltaObject::ReplacedAll {
                    objects,
                    resource_version,
                } => {
                    self.apply_chunk(&mut chunk, initial);
                    self.replace_all(objects, resource_version, initial);
                }
                DeltaObject::SyncAll => {
                    self.apply_chunk(&mut chunk, initial);
                    for (key, obj) in crate::store::KeyListerGetter::list_keyed(&self.indexer) {
                        self.processor.distribute(
                            Notification::Update {
                                key,
                                old: Arc::clone(&obj),
                                new: obj,
                            },
                            true,
                        );
                    }
                }
                DeltaObject::Bookmark { resource_version } => {
                    self.apply_chunk(&mut chunk, initial);
                    self.indexer.set_resource_version(resource_version);
                }
            }
        }
        self.apply_chunk(&mut chunk, initial);
        self.check_memory_budget();
    }

    fn apply_chunk(&self, chunk: &mut Vec<(DeltaType, DeltaObject<K>)>, initial: bool) {
        if chunk.is_empty() {
            return;
        }
        let txns = chunk
            .iter()
            .filter_map(|(kind, object)| match object {
                DeltaObject::Object { key, obj } if *kind != DeltaType::Deleted => {
                    Some(Transaction::Upsert(key.clone(), Arc::clone(obj)))
                }
                DeltaObject::Object { key, .. }
                | DeltaObject::DeletedFinalStateUnknown { key, .. } => {
                    Some(Transaction::Delete(key.clone()))
                }
                _ => None,
            })
            .collect();
        // client-go's store records the resourceVersion of each object it adds, updates or
        // deletes (tombstones carry none).
        let resource_version = chunk.iter().rev().find_map(|(_, object)| match object {
            DeltaObject::Object { obj, .. } => obj.meta().resource_version.clone(),
            _ => None,
        });
        let previous = self.indexer.apply_at(txns, resource_version);
        for ((kind, object), old) in chunk.drain(..).zip(previous) {
            match object {
                DeltaObject::Object { key, obj } if kind == DeltaType::Deleted => {
                    self.processor.distribute(
                        Notification::Delete {
                            key,
                            obj: DeletedObject::Final(obj),
                        },
                        false,
                    );
                }
                DeltaObject::DeletedFinalStateUnknown { key, obj } => {
                    self.processor.distribute(
                        Notification::Delete {
                            key: key.clone(),
                            obj: DeletedObject::FinalStateUnknown { key, obj },
                        },
                        false,
                    );
                }
                DeltaObject::Object { key, obj } => self.notify_upsert(key, old, obj, initial),
                _ => {}
            }
        }
    }

    fn notify_upsert(&self, key: ObjectKey, old: Option<Arc<K>>, new: Arc<K>, initial: bool) {
        match old {
            Some(old) => {
                let is_sync = old.meta().resource_version == new.meta().resource_version;
                self.processor
                    .distribute(Notification::Update { key, old, new }, is_sync);
            }
            None => self.processor.distribute(
                Notification::Add {
                    key,
                    obj: new,
                    initial,
                },
                false,
            ),
        }
    }

    /// client-go's `processReplacedAllInfo`: replace the indexer's content, then notify the
    /// deletions (tombstones with the last known state) and then the adds/updates in list order.
    fn replace_all(
        &self,
        objects: Vec<(ObjectKey, Arc<K>)>,
        resource_version: String,
        initial: bool,
    ) {
        let mut previous = self
            .indexer
            .replace_keyed(objects.clone(), resource_version);
        let mut upserts = Vec::with_capacity(objects.len());
        for (key, obj) in objects {
            let old = previous.remove(&key);
            upserts.push((key, old, obj));
        }
        for (key, obj) in previous {
            self.processor.distribute(
                Notification::Delete {
                    key: key.clone(),
                    obj: DeletedObject::FinalStateUnknown { key, obj },
                },
                false,
            );
        }
        for (key, old, obj) in upserts {
            self.notify_upsert(key, old, obj, initial);
        }
    }
}
