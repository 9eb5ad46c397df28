//! Caches configured per type on the embedded server: a label selector and a transform on
//! the cache of one type; a read outside the selector is an error naming it.

mod common;

use std::sync::Arc;

use anyhow::{Result, anyhow};
use common::{NS, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcache::store::LabelSelector;
use kcache_client::Client;
use kcache_runtime::{Action, Context, Manager, api, manager};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selected_transformed_cache_holds_only_what_it_selects_and_says_so_on_a_miss()
-> Result<()> {
    let server = common::server().await?;
    let h = server.handle();
    for (name, app) in [("web", "web"), ("db", "db")] {
        h.create(
            &format!("/api/v1/namespaces/{NS}/secrets"),
            json!({"metadata": {"name": name, "labels": {"app": app},
                "annotations": {"note": "big"}}}),
        )
        .map_err(|e| anyhow!("{e}"))?;
    }
    h.create(
        &format!("/api/v1/namespaces/{NS}/configmaps"),
        json!({"metadata": {"name": "app"}}),
    )
    .map_err(|e| anyhow!("{e}"))?;
    let manager = Manager::new(
        Client::from_url(&server.url())?,
        manager::Config::new("cache").namespace(NS),
    )?;
    manager.cache::<Secret>(manager::Cache::new().label_selector("app=web").transform(
        |mut s: Secret| {
            s.metadata.annotations = None;
            s
        },
    ))?;
    let again = manager
        .cache::<Secret>(manager::Cache::new())
        .expect_err("cached already");
    assert!(
        again.to_string().contains(r#"label selector "app=web""#),
        "{again}"
    );
    let seen = Arc::new(Mutex::new(None));
    manager
        .controller::<ConfigMap>()
        .watches::<Secret>(|_| Vec::new())
        .run({
            let seen = Arc::clone(&seen);
            move |_cm, ctx: Context<ConfigMap>| {
                let seen = Arc::clone(&seen);
                async move {
                    let web = ctx.read::<Secret>("web")?;
                    let db = ctx.read::<Secret>("db").expect_err("outside the selector");
                    let cached = ctx.lister::<Secret>().list(&LabelSelector::default()).len();
                    *seen.lock() = Some((web.metadata.annotations.clone(), db, cached));
                    Ok::<_, api::Error>(Action::Done)
                }
            }
        })?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    eventually("a reconcile", || seen.lock().is_some()).await?;
    let (annotations, miss, cached) = seen.lock().take().expect("seen");
    assert_eq!(annotations, None, "the transform ran");
    assert_eq!(cached, 1, "only app=web is cached");
    assert!(miss.is_not_cached());
    assert_eq!(
        miss.to_string(),
        r#"secrets apps/db is not in the manager's cache of secrets (label selector "app=web"): it does not exist, or the cache's selectors leave it out"#
    );
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}
