//! List/watch over real HTTP, against the embedded server and (when requested) the upstream
//! kube-apiserver: the same test code for both. Fault scenarios need the embedded server's
//! fault injection and run there only.

mod common;

use std::{collections::BTreeSet, time::Duration};

use anyhow::{Context, Result, ensure};
use common::TestServer;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache::{
    ListerWatcher,
    lister_watcher::{
        INITIAL_EVENTS_END_ANNOTATION, ListParams, WatchEvent, WatchParams, WatchStream,
    },
};
use kcache_apiserver::InjectedFailure;
use kcache_client::{
    HttpListerWatcher,
    compact::{Compact, CompactDecoder},
    dynamic,
};
use kube_core::{DynamicObject, GroupVersionKind, PartialObjectMeta};
use serde_json::json;

/// A guard against a hung stream; not a performance assertion.
const HANG_GUARD: Duration = Duration::from_secs(60);

async fn next_event<K>(
    stream: &mut WatchStream<K>,
) -> Result<Option<Result<WatchEvent<K>, kcache::lister_watcher::Error>>> {
    tokio::time::timeout(HANG_GUARD, stream.next())
        .await
        .context("watch stream hung")
}

/// Reads events until `n` non-bookmark events arrived.
async fn take_events(
    stream: &mut WatchStream<ConfigMap>,
    n: usize,
) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    while out.len() < n {
        let ev = next_event(stream).await?.context("stream ended early")??;
        let (ty, cm) = match ev {
            WatchEvent::Added(cm) => ("ADDED", cm),
            WatchEvent::Modified(cm) => ("MODIFIED", cm),
            WatchEvent::Deleted(cm) => ("DELETED", cm),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(s) => anyhow::bail!("unexpected ERROR event {s:?}"),
        };
        out.push((ty.to_owned(), cm.metadata.name.unwrap_or_default()));
    }
    Ok(out)
}

fn cms(s: &TestServer) -> HttpListerWatcher<ConfigMap> {
    HttpListerWatcher::namespaced(s.client.clone(), &s.ns)
}

#[tokio::test]
async fn list_pagination_with_continue_returns_every_object_once() -> Result<()> {
    for s in TestServer::all().await? {
        for i in 0..7 {
            s.create_cm(&format!("cm-{i}"), json!({}), json!({"i": i.to_string()}))
                .await?;
        }
        let lw = cms(&s);
        let mut params = ListParams::default().limit(3);
        let mut names = Vec::new();
        let mut pages = 0;
        loop {
            let page = lw.list(&params).await?;
            pages += 1;
            if pages == 1 {
                ensure!(
                    page.metadata.remaining_item_count == Some(4),
                    "{}: remainingItemCount",
                    s.name
                );
            }
            names.extend(page.items.into_iter().map(|c| c.metadata.name.unwrap()));
            match page.metadata.continue_ {
                Some(c) if !c.is_empty() => params = params.continue_token(&c),
                _ => break,
            }
        }
        ensure!(pages == 3, "{}: {pages} pages", s.name);
        s.ensure_wire(&lw.wire_stats())?;
        let unique: BTreeSet<_> = names.iter().cloned().collect();
        ensure!(
            names.len() == 7 && unique.len() == 7,
            "{}: {names:?}",
            s.name
        );
    }
    Ok(())
}

#[tokio::test]
async fn first_list_at_rv_0_with_a_limit_is_served_from_the_watch_cache() -> Result<()> {
    // client-go sends resourceVersion=0&limit=500; kube-apiserver serves it from the watch
    // cache and ignores the limit. kube-core would drop resourceVersion=0 here; we must not.
    for s in TestServer::all().await? {
        for i in 0..5 {
            s.create_cm(&format!("cm-{i}"), json!({}), json!({}))
                .await?;
        }
        let page = cms(&s)
            .list(&ListParams::default().limit(2).at("0"))
            .await?;
        ensure!(
            page.items.len() == 5,
            "{}: {} items (limit honoured: RV=0 not sent?)",
            s.name,
            page.items.len()
        );
        ensure!(
            page.metadata.continue_.as_deref().unwrap_or("").is_empty(),
            "{}: continue",
            s.name
        );
    }
    Ok(())
}

#[tokio::test]
async fn continue_token_after_compaction_is_410_expired() -> Result<()> {
    let s = TestServer::embedded().await?;
    for i in 0..4 {
        s.create_cm(&format!("cm-{i}"), json!({}), json!({}))
            .await?;
    }
    let lw = cms(&s);
    let first = lw.list(&ListParams::default().limit(2)).await?;
    let token = first.metadata.continue_.context("continue token")?;
    s.create_cm("later", json!({}), json!({})).await?;
    s.faults().unwrap().compact();
    let err = lw
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap_err();
    ensure!(err.is_expired(), "{err}");
    ensure!(err.code() == Some(410), "{err}");
    // A consistent list at RV="" then succeeds.
    let fresh = lw
        .list(&ListParams {
            resource_version: Some(String::new()),
            ..ListParams::default()
        })
        .await?;
    ensure!(fresh.items.len() == 5);
    Ok(())
}

#[tokio::test]
async fn watch_from_a_compacted_rv_yields_one_error_event_410() -> Result<()> {
    let s = TestServer::embedded().await?;
    let created = s.create_cm("a", json!({}), json!({})).await?;
    let old_rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    for i in 0..3 {
        s.update_cm("a", json!({"v": i.to_string()})).await?;
    }
    s.faults().unwrap().compact();
    let mut stream = cms(&s).watch(&WatchParams::default(), &old_rv).await?;
    let ev = next_event(&mut stream).await?.context("no event")??;
    let WatchEvent::Error(status) = ev else {
        anyhow::bail!("expected ERROR, got {ev:?}")
    };
    ensure!(status.code == 410, "{status:?}");
    ensure!(kcache::lister_watcher::Error::api(*status, None).is_expired());
    Ok(())
}

#[tokio::test]
async fn watch_delivers_added_modified_deleted_in_order() -> Result<()> {
    for s in TestServer::all().await? {
        let lw = cms(&s);
        let list = lw.list(&ListParams::default()).await?;
        let rv = list.metadata.resource_version.context("list RV")?;
        let mut stream = lw.watch(&WatchParams::default().timeout(60), &rv).await?;
        s.create_cm("w", json!({}), json!({"k": "1"})).await?;
        s.update_cm("w", json!({"k": "2"})).await?;
        s.delete_cm("w").await?;
        let got = take_events(&mut stream, 3).await?;
        let want: Vec<(String, String)> = ["ADDED", "MODIFIED", "DELETED"]
            .iter()
            .map(|t| ((*t).to_owned(), "w".to_owned()))
            .collect();
        ensure!(got == want, "{}: {got:?}", s.name);
        s.ensure_wire(&lw.wire_stats())?;
    }
    Ok(())
}

#[tokio::test]
async fn streaming_initial_list_ends_with_the_initial_events_end_bookmark() -> Result<()> {
    for s in TestServer::all().await? {
        for i in 0..3 {
            s.create_cm(&format!("cm-{i}"), json!({}), json!({}))
                .await?;
        }
        let params = WatchParams::default().timeout(60).initial_events();
        let mut stream = cms(&s).watch(&params, "").await?;
        let mut added = BTreeSet::new();
        loop {
            match next_event(&mut stream)
                .await?
                .context("ended before the bookmark")??
            {
                WatchEvent::Added(cm) => {
                    added.insert(cm.metadata.name.unwrap());
                }
                WatchEvent::Bookmark(b) => {
                    if b.metadata
                        .annotations
                        .get(INITIAL_EVENTS_END_ANNOTATION)
                        .map(String::as_str)
                        == Some("true")
                    {
                        ensure!(!b.metadata.resource_version.is_empty());
                        break;
                    }
                }
                other => anyhow::bail!("{}: unexpected {other:?}", s.name),
            }
        }
        ensure!(added.len() == 3, "{}: {added:?}", s.name);
        // The same stream carries on with live events.
        s.create_cm("live", json!({}), json!({})).await?;
        ensure!(take_events(&mut stream, 1).await? == [("ADDED".to_owned(), "live".to_owned())]);
    }
    Ok(())
}

#[tokio::test]
async fn selectors_restrict_lists_and_watches() -> Result<()> {
    for s in TestServer::all().await? {
        s.create_cm("blue", json!({"color": "blue"}), json!({}))
            .await?;
        s.create_cm("red", json!({"color": "red"}), json!({}))
            .await?;
        let by_label = cms(&s).label_selector("color=blue");
        let names: Vec<_> = by_label
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect();
        ensure!(names == ["blue"], "{}: {names:?}", s.name);
        let by_field = cms(&s).field_selector("metadata.name=red");
        let list = by_field.list(&ListParams::default()).await?;
        ensure!(list.items.len() == 1 && list.items[0].metadata.name.as_deref() == Some("red"));
        let mut stream = by_label
            .watch(
                &WatchParams::default().timeout(60),
                &list.metadata.resource_version.unwrap(),
            )
            .await?;
        s.create_cm("red2", json!({"color": "red"}), json!({}))
            .await?;
        s.create_cm("blue2", json!({"color": "blue"}), json!({}))
            .await?;
        ensure!(
            take_events(&mut stream, 1).await? == [("ADDED".to_owned(), "blue2".to_owned())],
            "{}",
            s.name
        );
    }
    Ok(())
}

#[tokio::test]
async fn typed_dynamic_metadata_only_and_compact_objects_agree() -> Result<()> {
    for s in TestServer::all().await? {
        for i in 0..3 {
            s.create_cm(
                &format!("cm-{i}"),
                json!({"i": i.to_string()}),
                json!({"payload": "x".repeat(100)}),
            )
            .await?;
        }
        let names = |v: Vec<Option<String>>| v.into_iter().flatten().collect::<BTreeSet<_>>();
        let typed = names(
            cms(&s)
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .map(|c| c.metadata.name)
                .collect(),
        );

        let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
        let (resource, scope) = dynamic::discover(&s.client, &gvk).await?;
        ensure!(resource.plural == "configmaps" && scope == dynamic::ResourceScope::Namespaced);
        let dyn_lw = dynamic::lister_watcher(s.client.clone(), &gvk, Some(&s.ns)).await?;
        let dyn_list = dyn_lw.list(&ListParams::default()).await?;
        ensure!(dyn_list.items.iter().all(|o| {
            o.data["data"]["payload"]
                .as_str()
                .is_some_and(|p| p.len() == 100)
        }));
        let dynamic = names(
            dyn_list
                .items
                .into_iter()
                .map(|o| o.metadata.name)
                .collect(),
        );

        let meta_lw =
            HttpListerWatcher::<DynamicObject>::namespaced_with(s.client.clone(), &resource, &s.ns)
                .metadata_only(true);
        let meta_list = meta_lw.list(&ListParams::default()).await?;
        ensure!(
            meta_list.types.kind == "PartialObjectMetadataList",
            "{}: {}",
            s.name,
            meta_list.types.kind
        );
        ensure!(
            meta_list.items.iter().all(|o| o.data.get("data").is_none()),
            "{}: metadata-only carried data",
            s.name
        );
        let partial =
            HttpListerWatcher::<PartialObjectMeta<ConfigMap>>::namespaced(s.client.clone(), &s.ns);
        let partial_names = names(
            partial
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .map(|o| o.metadata.name)
                .collect(),
        );

        let compact = HttpListerWatcher::<Compact<ConfigMap>>::namespaced(s.client.clone(), &s.ns)
            .with_decoder(CompactDecoder::new().strip_managed_fields(true));
        let compact_list = compact.list(&ListParams::default()).await?;
        for c in &compact_list.items {
            let cm = c.typed()?;
            ensure!(cm.data.unwrap()["payload"].len() == 100);
        }
        let compact_names = names(
            compact_list
                .items
                .iter()
                .map(|c| c.metadata().name.clone())
                .collect(),
        );

        ensure!(typed.len() == 3, "{}: {typed:?}", s.name);
        ensure!(
            typed == dynamic && typed == partial_names && typed == compact_names,
            "{}",
            s.name
        );
    }
    Ok(())
}

#[tokio::test]
async fn too_many_requests_reaches_the_caller_with_retry_after() -> Result<()> {
    // kube-client's retry layer is off: the reflector must see the 429 to back off itself.
    let s = TestServer::embedded().await?;
    s.faults()
        .unwrap()
        .fail_next(1, InjectedFailure::TooManyRequests { retry_after: 7 });
    let err = cms(&s).list(&ListParams::default()).await.unwrap_err();
    ensure!(err.is_too_many_requests(), "{err}");
    ensure!(err.retry_after() == Some(Duration::from_secs(7)), "{err}");
    ensure!(cms(&s).list(&ListParams::default()).await.is_ok());
    Ok(())
}

#[tokio::test]
async fn truncated_watch_stream_ends_with_a_transport_error() -> Result<()> {
    let s = TestServer::embedded().await?;
    let rv = cms(&s)
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .unwrap();
    let mut stream = cms(&s)
        .watch(&WatchParams::default().timeout(60), &rv)
        .await?;
    s.faults().unwrap().truncate_next_watch_events(1);
    s.create_cm("cut", json!({}), json!({})).await?;
    loop {
        match next_event(&mut stream)
            .await?
            .context("stream ended without an error")?
        {
            Ok(WatchEvent::Bookmark(_)) => continue,
            Ok(other) => anyhow::bail!("expected a truncation error, got {other:?}"),
            Err(e) => {
                ensure!(e.is_transport(), "{e}");
                break;
            }
        }
    }
    ensure!(
        next_event(&mut stream).await?.is_none(),
        "stream goes on after the error"
    );
    Ok(())
}

#[tokio::test]
async fn dropped_watch_ends_the_stream_cleanly() -> Result<()> {
    let s = TestServer::embedded().await?;
    let rv = cms(&s)
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .unwrap();
    let mut stream = cms(&s)
        .watch(&WatchParams::default().timeout(60), &rv)
        .await?;
    s.create_cm("before", json!({}), json!({})).await?;
    ensure!(take_events(&mut stream, 1).await?.len() == 1);
    s.faults().unwrap().drop_watches();
    loop {
        match next_event(&mut stream).await? {
            None => break,
            Some(Ok(WatchEvent::Bookmark(_))) => continue,
            Some(other) => anyhow::bail!("expected the end of the stream, got {other:?}"),
        }
    }
    Ok(())
}

#[tokio::test]
async fn compact_decoder_reads_watch_events() -> Result<()> {
    let s = TestServer::embedded().await?;
    let lw = HttpListerWatcher::<Compact<ConfigMap>>::namespaced(s.client.clone(), &s.ns)
        .with_decoder(CompactDecoder::new());
    let rv = lw
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .unwrap();
    let mut stream = lw.watch(&WatchParams::default().timeout(60), &rv).await?;
    s.create_cm("c", json!({"a": "b"}), json!({"k": "v"}))
        .await?;
    loop {
        match next_event(&mut stream).await?.context("ended")?? {
            WatchEvent::Added(c) => {
                ensure!(c.metadata().labels.as_ref().unwrap()["a"] == "b");
                ensure!(c.typed()?.data.unwrap()["k"] == "v");
                break;
            }
            WatchEvent::Bookmark(_) => continue,
            other => anyhow::bail!("{other:?}"),
        }
    }
    Ok(())
}

#[tokio::test]
async fn large_list_pages_decode_off_the_runtime_and_keep_every_item() -> Result<()> {
    // 80 objects of 4 KB: a page above the blocking-decode threshold (256 KiB).
    for s in TestServer::all().await? {
        for i in 0..80 {
            s.create_cm(
                &format!("big-{i:02}"),
                json!({}),
                json!({"blob": "x".repeat(4096)}),
            )
            .await?;
        }
        let list = cms(&s).list(&ListParams::default()).await?;
        ensure!(list.items.len() == 80, "{}: {}", s.name, list.items.len());
        ensure!(
            list.items
                .iter()
                .all(|c| c.data.as_ref().unwrap()["blob"].len() == 4096)
        );
    }
    Ok(())
}

#[tokio::test]
async fn factory_informer_from_the_client_applies_the_factory_namespace() -> Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    use kcache::{InformerFrom, SharedIndexInformer, SharedInformerFactory, factory};
    use kcache_client::Compact;
    for s in TestServer::all().await? {
        s.create_cm("mine", json!({}), json!({})).await?;
        let factory = SharedInformerFactory::new(factory::Config::default().namespace(&s.ns));
        // The client's default is lean storage; `client.typed()` stores typed objects.
        let cms: SharedIndexInformer<Compact<ConfigMap>> = factory.informer::<ConfigMap>(&s.client);
        let namespaces: SharedIndexInformer<Namespace> =
            factory.informer::<Namespace>(&s.client.typed());
        factory.start();
        let synced = tokio::time::timeout(HANG_GUARD, factory.wait_for_cache_sync()).await?;
        ensure!(synced.values().all(|ok| *ok), "{}: {synced:?}", s.name);
        let names: Vec<_> = cms
            .indexer()
            .list_keys()
            .into_iter()
            .map(|k| k.to_string())
            .collect();
        ensure!(
            names.iter().all(|k| k.starts_with(&format!("{}/", s.ns)))
                && names.contains(&format!("{}/mine", s.ns)),
            "{}: ConfigMaps outside the factory's namespace, or ours missing: {names:?}",
            s.name
        );
        // Namespaces are cluster-scoped: the factory's namespace does not apply to them.
        ensure!(
            namespaces.indexer().get_by_key(s.ns.as_str()).is_some(),
            "{}: the namespace informer did not list namespace {}",
            s.name,
            s.ns
        );
        factory.shutdown().await;
    }
    Ok(())
}

#[tokio::test]
async fn factory_informer_builder_over_the_client_applies_its_own_selector_and_index() -> Result<()>
{
    use kcache::{InformerFrom, SharedInformerFactory, factory};
    for s in TestServer::all().await? {
        s.create_cm("web", json!({"app": "web"}), json!({})).await?;
        s.create_cm("db", json!({"app": "db"}), json!({})).await?;
        // The factory's default selector would select nothing: the builder's replaces it.
        let factory = SharedInformerFactory::new(
            factory::Config::default()
                .namespace(&s.ns)
                .label_selector("app=none"),
        );
        let cms = factory
            .informer_builder::<ConfigMap>(&s.client)
            .label_selector("app=web")
            .strip_managed_fields(true)
            .indexer("by-app", |cm: &ConfigMap| {
                let labels = cm.metadata.labels.iter().flatten();
                labels
                    .filter(|(k, _)| *k == "app")
                    .map(|(_, v)| v.clone())
                    .collect()
            })
            .build()?;
        factory.start();
        let synced = tokio::time::timeout(HANG_GUARD, factory.wait_for_cache_sync()).await?;
        ensure!(synced.values().all(|ok| *ok), "{}: {synced:?}", s.name);
        let keys: Vec<_> = cms
            .indexer()
            .list_keys()
            .into_iter()
            .map(|k| k.to_string())
            .collect();
        ensure!(
            keys == [format!("{}/web", s.ns)],
            "{}: the builder's selector app=web should select exactly one ConfigMap: {keys:?}",
            s.name
        );
        let web = cms.indexer().by_index("by-app", "web")?;
        ensure!(web.len() == 1, "{}: by-app index: {}", s.name, web.len());
        ensure!(
            web[0].typed()?.metadata.managed_fields.is_none()
                && !web[0].bytes().windows(13).any(|w| w == b"managedFields"),
            "{}: managed fields kept",
            s.name
        );
        factory.shutdown().await;
    }
    Ok(())
}
