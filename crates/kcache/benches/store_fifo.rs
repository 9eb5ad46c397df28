//! Throughput of the informer's core path without I/O: objects through a FIFO, popped in
//! batches and applied to a store with two indexes. `cargo bench -p kcache --bench store_fifo`.

use std::{collections::HashMap, sync::Arc};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use futures::executor::block_on;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache::{
    fifo::{DeltaFifo, DeltaFifoConfig, DeltaObject, Fifo, RealFifo},
    reflector::ReflectorStore,
    store::{
        IndexFunc, NAMESPACE_INDEX, ThreadSafeStore, Transaction, meta_namespace_key_func,
        namespace_index_func,
    },
};

const OBJECTS: usize = 100_000;

fn objects() -> Vec<Arc<ConfigMap>> {
    (0..OBJECTS)
        .map(|i| {
            let mut cm = ConfigMap::default();
            cm.metadata.namespace = Some(format!("ns-{}", i % 100));
            cm.metadata.name = Some(format!("cm-{i}"));
            cm.metadata.resource_version = Some(i.to_string());
            cm.metadata.labels = Some([("app".to_owned(), format!("app-{}", i % 10))].into());
            Arc::new(cm)
        })
        .collect()
}

fn indexed_store() -> ThreadSafeStore<ConfigMap> {
    let app: IndexFunc<ConfigMap> = Arc::new(|cm: &ConfigMap| {
        cm.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app").cloned())
            .into_iter()
            .collect()
    });
    ThreadSafeStore::with_indexers(
        meta_namespace_key_func(),
        HashMap::from([
            (NAMESPACE_INDEX.to_owned(), namespace_index_func()),
            ("app".to_owned(), app),
        ]),
    )
}

/// Pops everything and applies it as the informer does: one transaction per batch.
fn drain_into(fifo: &RealFifo<ConfigMap>, store: &ThreadSafeStore<ConfigMap>) {
    while !fifo.is_empty() {
        block_on(fifo.pop_batch(|deltas, _| {
            let mut txns = Vec::with_capacity(deltas.len());
            for delta in deltas {
                match delta.object {
                    DeltaObject::Object { key, obj } => txns.push(Transaction::Upsert(key, obj)),
                    DeltaObject::DeletedFinalStateUnknown { key, .. } => {
                        txns.push(Transaction::Delete(key))
                    }
                    DeltaObject::ReplacedAll {
                        objects,
                        resource_version,
                    } => {
                        kcache::testing::replace_keyed(store, objects, resource_version);
                    }
                    DeltaObject::SyncAll | DeltaObject::Bookmark { .. } => {}
                }
            }
            store.apply(txns);
        }))
        .expect("queue open");
    }
}

fn real_fifo(c: &mut Criterion) {
    let objs = objects();
    let mut group = c.benchmark_group("real_fifo_to_indexed_store");
    group.sample_size(10);
    group.throughput(Throughput::Elements(OBJECTS as u64));
    group.bench_function("100k_adds_pop_batch_apply", |b| {
        b.iter_batched(
            || (RealFifo::atomic(meta_namespace_key_func()), indexed_store()),
            |(fifo, store)| {
                for obj in &objs {
                    fifo.add(Arc::clone(obj)).expect("add");
                }
                drain_into(&fifo, &store);
                assert_eq!(store.len(), OBJECTS);
                (fifo, store)
            },
            BatchSize::PerIteration,
        );
    });
    group.bench_function("100k_atomic_replace_apply", |b| {
        b.iter_batched(
            || (RealFifo::atomic(meta_namespace_key_func()), indexed_store()),
            |(fifo, store)| {
                fifo.replace(objs.clone(), "1".into()).expect("replace");
                drain_into(&fifo, &store);
                assert_eq!(store.len(), OBJECTS);
                (fifo, store)
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

fn delta_fifo(c: &mut Criterion) {
    let objs = objects();
    let mut group = c.benchmark_group("delta_fifo");
    group.sample_size(10);
    group.throughput(Throughput::Elements(OBJECTS as u64));
    group.bench_function("100k_add_pop", |b| {
        b.iter_batched(
            || DeltaFifo::new(meta_namespace_key_func(), DeltaFifoConfig::default()),
            |fifo| {
                for obj in &objs {
                    fifo.add(Arc::clone(obj)).expect("add");
                }
                let mut popped = 0;
                while !fifo.is_empty() {
                    popped += block_on(fifo.pop(|deltas, _| deltas.len())).expect("open");
                }
                assert_eq!(popped, OBJECTS);
                fifo
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group!(benches, real_fifo, delta_fifo);
criterion_main!(benches);
