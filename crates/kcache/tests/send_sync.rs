//! Public types are `Send + Sync` (checked at compile time).

use k8s_openapi::api::core::v1::Pod;
use kcache::{
    SharedInformerFactory, factory,
    fifo::{DeltaFifo, RealFifo},
    informer::{HandlerRegistration, SharedIndexInformer},
    lister_watcher,
    reflector::{Reflector, ReflectorHandle},
    store::{Lister, ObjectKey, ThreadSafeStore},
    testing::FakeSource,
};

fn send_sync<T: Send + Sync>() {}
fn send<T: Send>() {}

#[test]
fn public_types_are_send_and_sync() {
    send_sync::<ObjectKey>();
    send_sync::<ThreadSafeStore<Pod>>();
    send_sync::<Lister<Pod>>();
    send_sync::<RealFifo<Pod>>();
    send_sync::<DeltaFifo<Pod>>();
    send_sync::<SharedIndexInformer<Pod>>();
    send_sync::<HandlerRegistration>();
    send_sync::<SharedInformerFactory>();
    send_sync::<factory::Config>();
    send_sync::<ReflectorHandle>();
    send_sync::<lister_watcher::Error>();
    send_sync::<kcache::reflector::Error>();
    send::<Reflector<Pod, FakeSource<Pod>>>();
    send_sync::<FakeSource<Pod>>();
}

#[test]
fn informer_and_factory_futures_are_send() {
    fn assert_send<F: std::future::Future + Send>(_: F) {}
    let informer = SharedIndexInformer::new(FakeSource::<Pod>::new(), Default::default());
    assert_send(informer.run(tokio_util::sync::CancellationToken::new()));
    assert_send(informer.wait_for_sync());
    let factory = SharedInformerFactory::new(factory::Config::default());
    assert_send(factory.wait_for_cache_sync());
    assert_send(factory.shutdown());
}
