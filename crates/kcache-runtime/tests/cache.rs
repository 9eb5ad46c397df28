//! Caches configured per type on the embedded server: a label selector and a transform on
//! the cache of one type; a read outside the selector is an error naming it; the manager's
//! default selector, and a type cached in a namespace of its own.

mod common;

use std::sync::Arc;

use anyhow::{Result, anyhow};
use common::{NS, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
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
        .build({
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_managers_default_selector_applies_to_every_cache_and_a_type_may_watch_another_namespace()
-> Result<()> {
    let server = common::server().await?;
    let h = server.handle();
    let create = |path: &str, body: serde_json::Value| {
        h.create(path, body).map(drop).map_err(|e| anyhow!("{e}"))
    };
    create("/api/v1/namespaces", json!({"metadata": {"name": "vault"}}))?;
    for (name, team) in [("app", "a"), ("other", "b")] {
        create(
            &format!("/api/v1/namespaces/{NS}/configmaps"),
            json!({"metadata": {"name": name, "labels": {"team": team}}}),
        )?;
    }
    for (name, team) in [("web", "a"), ("db", "b"), ("skipped", "a")] {
        create(
            &format!("/api/v1/namespaces/{NS}/secrets"),
            json!({"metadata": {"name": name, "labels": {"team": team}}}),
        )?;
    }
    for ns in [NS, "vault"] {
        create(
            &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
            json!({"metadata": {"name": "builder", "labels": {"team": "a"}}}),
        )?;
    }
    let config = manager::Config::new("defaults")
        .namespace(NS)
        .default_label_selector("team=a")
        .default_field_selector("metadata.name!=skipped");
    let manager = Manager::new(Client::from_url(&server.url())?, config)?;
    let accounts = manager.cache::<ServiceAccount>(manager::Cache::new().namespace("vault"))?;
    assert_eq!(accounts.namespace(), Some("vault"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    manager
        .controller::<ConfigMap>()
        .watches::<Secret>(|_| Vec::new())
        .build({
            let seen = Arc::clone(&seen);
            move |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
                let seen = Arc::clone(&seen);
                async move {
                    let web = ctx.read::<Secret>("web").map(drop);
                    let db = ctx.read::<Secret>("db").map(drop);
                    let skipped = ctx.read::<Secret>("skipped").map(drop);
                    let here = ctx.read::<ServiceAccount>("builder").map(drop);
                    let vault = ctx
                        .lister::<ServiceAccount>()
                        .namespaced("vault")
                        .get("builder");
                    seen.lock().push((
                        cm.metadata.name.clone(),
                        web,
                        db,
                        skipped,
                        here,
                        vault.is_some(),
                    ));
                    Ok::<_, api::Error>(Action::Done)
                }
            }
        })?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(cancel.clone()));
    eventually("a reconcile", || !seen.lock().is_empty()).await?;
    let (name, web, db, skipped, here, vault) = seen.lock().remove(0);
    assert_eq!(
        name.as_deref(),
        Some("app"),
        "only team=a ConfigMaps are cached"
    );
    assert!(web.is_ok(), "{web:?}");
    let selectors = r#"label selector "team=a", field selector "metadata.name!=skipped""#;
    assert_eq!(
        db.expect_err("team=b is outside the default label selector")
            .to_string(),
        format!(
            "secrets apps/db is not in the manager's cache of secrets ({selectors}): it does not exist, or the cache's selectors leave it out"
        )
    );
    assert!(
        skipped
            .expect_err("outside the default field selector")
            .is_not_cached()
    );
    assert_eq!(
        here.expect_err("outside the cache's namespace").to_string(),
        format!(
            "serviceaccounts apps/builder is not in the manager's cache of serviceaccounts (namespace \"vault\", {selectors}): it does not exist, or the cache's selectors leave it out"
        )
    );
    assert!(vault, "the cache holds vault's");
    assert!(
        seen.lock().iter().all(|s| s.0.as_deref() == Some("app")),
        "`other` is outside the default selector"
    );
    cancel.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}
