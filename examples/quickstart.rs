//! A shared informer over HTTP with an index by node and an event handler.
//! Run it with `cargo run -p kcache-examples --example quickstart`.
use k8s_openapi::api::core::v1::Pod;
use kcache::store::parse_label_selector;
use kcache::{InformerFrom, SharedInformerFactory, factory};
use kcache_apiserver::ApiServer;
use kcache_client::{Client, ObjectHandlerFns};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // An embedded API server with three pods; for a real cluster use `Client::infer().await?`.
    let server = ApiServer::builder().build().start().await?;
    for (name, app, node) in [
        ("web-0", "web", "node-a"),
        ("web-1", "web", "node-b"),
        ("db-0", "db", "node-a"),
    ] {
        let pod = serde_json::json!({
            "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "nginx"}]}
        });
        server
            .handle()
            .create("/api/v1/namespaces/default/pods", pod)?;
    }
    let client = Client::from_url(&server.url())?;

    // One shared informer per type, pods kept lean (wire bytes + metadata), indexed by node.
    let factory = SharedInformerFactory::new(factory::Config::default());
    let pods = factory
        .informer_builder::<Pod>(&client)
        .indexer("node", |pod: &Pod| {
            let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
            node.into_iter().collect()
        })
        .build()?;

    // Handlers run on their own task each, after the cache holds the change.
    let printer = pods.add_event_handler(
        ObjectHandlerFns::<Pod>::new()
            .on_add(|pod, initial| {
                println!("added {:?} (initial list: {initial})", pod.metadata().name)
            })
            .on_delete(|gone, _| println!("deleted {:?}", gone.metadata().name)),
    )?;

    factory.start();
    factory.wait_for_cache_sync().await; // the cache holds the initial list
    printer.synced().await; // and the handler has seen it

    // Reads come from the in-memory cache, not the server.
    let on_a = pods.indexer().by_index("node", "node-a")?;
    let web = pods
        .lister()
        .namespaced("default")
        .list(&parse_label_selector("app=web")?);
    println!("{} pods on node-a, {} with app=web", on_a.len(), web.len());
    assert_eq!((on_a.len(), web.len()), (2, 2));

    factory.shutdown().await;
    server.shutdown().await;
    Ok(())
}
