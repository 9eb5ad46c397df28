//! A small controller: a shared informer feeds a rate-limited work queue, and two workers
//! reconcile each changed pod by key (an `Err` would be retried with backoff).
//! Run it with `cargo run -p kcache-examples --example controller`.
use std::{convert::Infallible, sync::Arc};

use k8s_openapi::api::core::v1::Pod;
use kcache::controller::{self, Action, Controller};
use kcache::{InformerFrom, SharedInformerFactory, factory};
use kcache_apiserver::ApiServer;
use kcache_client::{Client, Compact, Object};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = ApiServer::builder().build().start().await?;
    for i in 0..3 {
        let pod = serde_json::json!({
            "metadata": {"name": format!("app-{i}")},
            "spec": {"containers": [{"name": "main", "image": "nginx"}]}
        });
        server
            .handle()
            .create("/api/v1/namespaces/default/pods", pod)?;
    }
    let client = Client::from_url(&server.url())?;
    let factory = SharedInformerFactory::new(factory::Config::default().namespace("default"));
    // Pods in the factory's namespace, listed and watched through the client, kept lean.
    let pods = factory.informer::<Pod>(&client);
    let controller = Controller::new(pods, controller::Config::default().name("pods").workers(2));
    factory.start();

    // The reconcile function gets the key and the cached object (None once it is deleted).
    let (done_tx, mut done) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        move |key, pod: Option<Arc<Compact<Pod>>>| {
            let done_tx = done_tx.clone();
            async move {
                // The typed pod is decoded here, once per reconcile (the cache keeps bytes).
                let pod = pod.map(Object::new);
                let typed = pod.as_ref().and_then(|p| p.typed().ok());
                let phase = typed.and_then(|p| p.status.as_ref()?.phase.clone());
                println!("reconcile {key}: exists={} phase={phase:?}", pod.is_some());
                let _ = done_tx.send((key.to_string(), pod.is_some()));
                Ok::<_, Infallible>(Action::Done)
            }
        },
        cancel.clone(),
    ));

    factory.wait_for_cache_sync().await;
    server
        .handle()
        .delete("/api/v1/namespaces/default/pods/app-0")?;
    // Stop once the deletion has been reconciled.
    while let Some((key, exists)) = done.recv().await {
        if key == "default/app-0" && !exists {
            break;
        }
    }
    cancel.cancel();
    run.await??;
    factory.shutdown().await;
    server.shutdown().await;
    Ok(())
}
