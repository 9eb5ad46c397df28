//! The `default` storage: exactly what the README's quick start builds —
//! `factory.informer::<Pod>(&client)`, lean objects (wire bytes plus parsed metadata, protobuf
//! for Pods, `managedFields` kept as the factory's default keeps them) — with the usual
//! controller handler: every add, update and delete enqueues the object's key into a
//! rate-limited work queue that one worker drains. Nothing decodes a typed `Pod`. For the
//! custom-resource dataset the same with `Widget` (lean over JSON).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kcache::{
    SharedIndexInformer, factory,
    informer::{Delivery, HandlerConfig},
    store::{ObjectKey, meta_namespace_key},
    workqueue::RateLimitingQueue,
};
use kcache_bench::widgets::Widget;
use kcache_client::{Client, Compact, CompactDecoder, HttpListerWatcher, Object, ObjectHandlerFns};
use kube_core::Resource;
use serde::de::DeserializeOwned;

/// The lister-watcher `factory.informer::<Pod>(&client)` makes for namespace `ns` (JSON when
/// `protobuf` is false, for the JSON line; protobuf is the client's default).
pub(crate) fn lister_watcher(
    client: &Client,
    ns: &str,
    protobuf: bool,
) -> HttpListerWatcher<Compact<Pod>, CompactDecoder> {
    <Client as factory::Source<Pod>>::lister_watcher(client, Some(ns)).protobuf(protobuf)
}

/// The lister-watcher `factory.informer::<Widget>(&client)` makes for namespace `ns`: lean
/// `Compact<Widget>` over JSON (custom resources have no protobuf).
pub(crate) fn widget_lister_watcher(
    client: &Client,
    ns: &str,
) -> HttpListerWatcher<Compact<Widget>, CompactDecoder> {
    <Client as factory::Source<Widget>>::lister_watcher(client, Some(ns))
}

/// Adds the key-enqueuing handler (its queue's driver and worker are spawned on the current
/// runtime and end with it); `on_update` runs after each update is enqueued.
pub(crate) fn register_key_handler<K>(
    informer: &SharedIndexInformer<Compact<K>>,
    on_update: Box<dyn Fn() + Send + Sync>,
) -> anyhow::Result<()>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Send + Sync + 'static,
{
    let (queue, driver) = RateLimitingQueue::<ObjectKey>::new();
    tokio::spawn(driver);
    let worker = queue.clone();
    tokio::spawn(async move {
        while let Some(key) = worker.get().await {
            worker.forget(&key);
            worker.done(&key);
        }
    });
    let enqueue = Arc::new(move |obj: &Object<K>| {
        if let Ok(key) = meta_namespace_key(obj.stored().as_ref()) {
            let _ = queue.add(key);
        }
    });
    let (add, update, delete) = (enqueue.clone(), enqueue.clone(), enqueue);
    informer.add_event_handler_with_config(
        ObjectHandlerFns::<K>::new()
            .on_add(move |pod, _initial| add(pod))
            .on_update(move |_old, new| {
                update(new);
                on_update();
            })
            .on_delete(move |pod, _unknown| delete(pod)),
        HandlerConfig::default().delivery(delivery()?),
    )?;
    Ok(())
}

/// Where the handler is called: the default (`adaptive`), or `inline` / `pool` from
/// `KCACHE_PEER_DELIVERY`, to measure each path of `informer::Delivery`.
fn delivery() -> anyhow::Result<Delivery> {
    match std::env::var("KCACHE_PEER_DELIVERY").as_deref() {
        Err(_) | Ok("" | "adaptive") => Ok(Delivery::Adaptive),
        Ok("inline") => Ok(Delivery::Inline),
        Ok("pool") => Ok(Delivery::BlockingPool),
        Ok(other) => {
            anyhow::bail!("KCACHE_PEER_DELIVERY={other:?}: expected adaptive, inline or pool")
        }
    }
}
