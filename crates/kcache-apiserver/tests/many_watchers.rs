//! 1,000 concurrent watchers on one server each see every event, in order.

mod common;

use common::{Watch, post};
use kcache_apiserver::ApiServer;
use serde_json::json;

const WATCHERS: usize = 1000;
const EVENTS: usize = 20;
const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_thousand_concurrent_watchers_each_receive_every_event_in_order() {
    let s = ApiServer::builder().build().start().await.unwrap();
    let start_rv = s.handle().resource_version();
    let mut watches = Vec::with_capacity(WATCHERS);
    for i in 0..WATCHERS {
        // Half from an RV (replay + live), half streaming lists, all on one namespace.
        let path = if i % 2 == 0 {
            format!("{CMS}?watch=1&resourceVersion={start_rv}&timeoutSeconds=600")
        } else {
            format!(
                "{CMS}?watch=1&resourceVersion={start_rv}&allowWatchBookmarks=true&timeoutSeconds=600"
            )
        };
        watches.push(
            Watch::open(s.addr(), &path, &[])
                .await
                .expect("watch opens"),
        );
    }
    for n in 0..EVENTS {
        let r = post(
            s.addr(),
            CMS,
            &json!({"metadata": {"name": format!("cm-{n:03}")}}),
        )
        .await;
        assert_eq!(r.status, 201);
    }
    let mut tasks = Vec::new();
    for mut w in watches {
        tasks.push(tokio::spawn(async move {
            let mut names = Vec::new();
            while names.len() < EVENTS {
                let e = w.next().await.expect("stream stays open");
                if e["type"] == "ADDED" {
                    names.push(e["object"]["metadata"]["name"].as_str().unwrap().to_owned());
                }
            }
            names
        }));
    }
    let expected: Vec<String> = (0..EVENTS).map(|n| format!("cm-{n:03}")).collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), expected);
    }
    s.shutdown().await;
}
