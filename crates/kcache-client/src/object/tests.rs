//! Lean objects through an informer: a key-enqueuing handler never decodes, a view decodes
//! once however often it is read, listers hand out fresh views, metadata indexes never decode,
//! a typed index decodes once per add (twice per update), and a malformed object is an error, not a panic.

use std::{
    borrow::Cow,
    collections::HashMap,
    sync::{Arc, LazyLock, Mutex},
    time::Duration,
};

use kcache::{
    SharedIndexInformer,
    factory::{self, InformerFrom, SharedInformerFactory},
    informer,
    store::{ObjectKey, meta_namespace_key, parse_label_selector},
    testing::FakeSource,
    workqueue::Queue,
};
use kube_core::{NamespaceResourceScope, ObjectMeta, Resource};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::*;

/// Typed decodes per object name (each test uses names of its own).
static DECODES: LazyLock<Mutex<HashMap<String, usize>>> = LazyLock::new(Default::default);

fn decodes(prefix: &str) -> usize {
    let map = DECODES.lock().unwrap();
    map.iter()
        .filter(|(name, _)| name.starts_with(prefix))
        .map(|(_, n)| n)
        .sum()
}

/// A namespaced custom kind whose `Deserialize` counts its decodes.
#[derive(Clone, Debug, Default, PartialEq)]
struct Widget {
    metadata: ObjectMeta,
    spec: WidgetSpec,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
struct WidgetSpec {
    #[serde(default)]
    node: Option<String>,
    #[serde(default)]
    size: u32,
}

impl<'de> Deserialize<'de> for Widget {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            #[serde(default)]
            metadata: ObjectMeta,
            #[serde(default)]
            spec: WidgetSpec,
        }
        let raw = Raw::deserialize(d)?;
        let name = raw.metadata.name.clone().unwrap_or_default();
        *DECODES.lock().unwrap().entry(name).or_default() += 1;
        Ok(Self {
            metadata: raw.metadata,
            spec: raw.spec,
        })
    }
}

impl Resource for Widget {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Widget".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "example.com".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "widgets".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

fn widget(name: &str, app: &str, node: &str) -> Compact<Widget> {
    let json = serde_json::json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": app},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Thing", "name": "t",
                                          "uid": format!("uid-{app}")}]},
        "spec": {"node": node, "size": 1}
    });
    Compact::from_json(json.to_string().as_bytes(), false).unwrap()
}

/// A lean source over a fake collection (what `kcache_client::Client` is over HTTP).
struct Lean(FakeSource<Compact<Widget>>);

impl factory::Source<Widget> for Lean {
    type Object = Compact<Widget>;
    type ListerWatcher = FakeSource<Compact<Widget>>;
    fn lister_watcher(&self, _namespace: Option<&str>) -> Self::ListerWatcher {
        self.0.clone()
    }
}

async fn next_key(queue: &Queue<ObjectKey>) -> ObjectKey {
    let key = tokio::time::timeout(Duration::from_secs(10), queue.get())
        .await
        .expect("a key within 10 s")
        .expect("queue open");
    queue.done(&key);
    key
}

#[tokio::test]
async fn a_handler_that_enqueues_keys_never_decodes() {
    let src = FakeSource::new();
    for i in 0..3 {
        src.upsert(widget(&format!("enq-{i}"), "web", "node-a"));
    }
    let informer = SharedIndexInformer::new(src.clone(), informer::Config::default());
    let queue = Queue::<ObjectKey>::new();
    let q = queue.clone();
    let (qa, qu, qd) = (q.clone(), q.clone(), q);
    let enqueue = move |q: &Queue<ObjectKey>, obj: &Object<Widget>| {
        q.add(meta_namespace_key(obj.stored().as_ref()).unwrap())
            .unwrap();
    };
    let registration = informer
        .add_event_handler(
            ObjectHandlerFns::<Widget>::new()
                .on_add(move |obj, _| enqueue(&qa, obj))
                .on_update(move |_, new| enqueue(&qu, new))
                .on_delete(move |obj, _| enqueue(&qd, obj)),
        )
        .unwrap();
    let cancel = CancellationToken::new();
    let runner = informer.clone();
    let token = cancel.clone();
    let run = tokio::spawn(async move { runner.run(token).await });
    assert!(registration.synced().await);
    for _ in 0..3 {
        next_key(&queue).await;
    }
    src.upsert(widget("enq-1", "web", "node-b"));
    assert_eq!(next_key(&queue).await, ObjectKey::new(Some("ns"), "enq-1"));
    src.delete(&ObjectKey::new(Some("ns"), "enq-2"));
    assert_eq!(next_key(&queue).await, ObjectKey::new(Some("ns"), "enq-2"));
    // Label selectors and the namespace index read metadata only.
    let web = informer
        .lister()
        .namespaced("ns")
        .list(&parse_label_selector("app=web").unwrap());
    assert_eq!(web.len(), 2);
    assert_eq!(decodes("enq-"), 0, "no typed decode for key-only handling");
    cancel.cancel();
    run.await.unwrap();
}

#[tokio::test]
async fn a_view_decodes_once_per_notification_however_often_it_is_read() {
    let src = FakeSource::new();
    src.upsert(widget("memo-0", "web", "node-a"));
    src.upsert(widget("memo-1", "web", "node-a"));
    let informer = SharedIndexInformer::new(src.clone(), informer::Config::default());
    let queue = Queue::<ObjectKey>::new();
    let q = queue.clone();
    let registration = informer
        .add_event_handler(ObjectHandlerFns::<Widget>::new().on_add(move |obj, _| {
            assert!(!obj.is_decoded());
            let size: u32 = (0..5).map(|_| obj.typed().unwrap().spec.size).sum();
            assert_eq!(size, 5);
            assert!(obj.is_decoded());
            q.add(meta_namespace_key(obj.stored().as_ref()).unwrap())
                .unwrap();
        }))
        .unwrap();
    let cancel = CancellationToken::new();
    let runner = informer.clone();
    let token = cancel.clone();
    let run = tokio::spawn(async move { runner.run(token).await });
    assert!(registration.synced().await);
    next_key(&queue).await;
    next_key(&queue).await;
    assert_eq!(
        decodes("memo-"),
        2,
        "one decode per notification, five reads each"
    );
    // The cache did not keep the decoded objects: a new view decodes again.
    let view = Object::new(
        informer
            .indexer()
            .get_by_key(&ObjectKey::new(Some("ns"), "memo-0"))
            .unwrap(),
    );
    assert!(!view.is_decoded());
    cancel.cancel();
    run.await.unwrap();
}

#[test]
fn lister_reads_hand_out_fresh_views() {
    let store = kcache::store::ThreadSafeStore::<Compact<Widget>>::for_resource();
    store
        .add(Arc::new(widget("read-0", "web", "node-a")))
        .unwrap();
    store
        .add(Arc::new(widget("read-1", "db", "node-a")))
        .unwrap();
    let lister = ObjectLister::from(kcache::store::Lister::new(store));
    let got = lister.namespaced("ns").get("read-0").unwrap();
    assert_eq!(got.typed().unwrap().spec.node.as_deref(), Some("node-a"));
    assert_eq!(got.typed().unwrap().spec.size, 1);
    assert_eq!(decodes("read-0"), 1, "memoised for that read");
    let again = lister.namespaced("ns").get("read-0").unwrap();
    assert!(!again.is_decoded());
    let _ = again.typed().unwrap();
    assert_eq!(decodes("read-0"), 2, "a new read decodes again");
    let db = lister.list(&parse_label_selector("app=db").unwrap());
    assert_eq!(db.len(), 1);
    assert_eq!(db[0].metadata().name.as_deref(), Some("read-1"));
    assert_eq!(decodes("read-1"), 0);
    assert!(lister.namespaced("other").get("read-0").is_none());
    assert_eq!(
        db[0].clone().into_typed().unwrap().spec.node.as_deref(),
        Some("node-a")
    );
}

#[tokio::test]
async fn metadata_indexes_never_decode_and_a_typed_index_decodes_once_per_insert() {
    let factory = SharedInformerFactory::new(factory::Config::default());
    let src = FakeSource::new();
    src.upsert(widget("idx-0", "web", "node-a"));
    src.upsert(widget("idx-1", "db", "node-b"));
    let widgets: SharedIndexInformer<Compact<Widget>> = factory
        .informer_builder::<Widget>(&Lean(src.clone()))
        .meta_indexer("app", |meta| {
            meta.labels
                .iter()
                .flatten()
                .filter(|(k, _)| *k == "app")
                .map(|(_, v)| v.clone())
                .collect()
        })
        .meta_indexer("owner", |meta| {
            meta.owner_references
                .iter()
                .flatten()
                .map(|o| o.uid.clone())
                .collect()
        })
        .build()
        .unwrap();
    factory.start();
    factory.wait_for_cache_sync().await;
    let by_app = widgets.indexer().by_index("app", "web").unwrap();
    assert_eq!(by_app.len(), 1);
    assert_eq!(
        widgets.indexer().by_index("owner", "uid-db").unwrap().len(),
        1
    );
    assert_eq!(
        widgets.indexer().by_index("namespace", "ns").unwrap().len(),
        2
    );
    assert_eq!(decodes("idx-"), 0, "metadata indexes read no typed object");
    factory.shutdown().await;

    // An index over a non-metadata field (the spec's node) decodes once per add, and twice per
    // update (the stored old object and the new one).
    let factory = SharedInformerFactory::new(factory::Config::default());
    let src = FakeSource::new();
    src.upsert(widget("node-0", "web", "node-a"));
    src.upsert(widget("node-1", "db", "node-a"));
    let widgets = factory
        .informer_builder::<Widget>(&Lean(src.clone()))
        .indexer("node", |w: &Widget| {
            w.spec.node.clone().into_iter().collect()
        })
        .build()
        .unwrap();
    factory.start();
    factory.wait_for_cache_sync().await;
    assert_eq!(
        widgets.indexer().by_index("node", "node-a").unwrap().len(),
        2
    );
    assert_eq!(decodes("node-"), 2, "one decode per object added");
    src.upsert(widget("node-1", "db", "node-b"));
    tokio::time::timeout(Duration::from_secs(10), async {
        while widgets
            .indexer()
            .by_index("node", "node-b")
            .unwrap()
            .is_empty()
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the update reaches the index");
    assert_eq!(
        decodes("node-"),
        4,
        "two decodes for the update: old and new"
    );
    assert_eq!(
        widgets.indexer().by_index("node", "node-a").unwrap().len(),
        1
    );
    factory.shutdown().await;
}

#[test]
fn a_typed_transform_is_refused_for_lean_storage() {
    let factory = SharedInformerFactory::new(factory::Config::default());
    let err = factory
        .informer_builder::<Widget>(&Lean(FakeSource::new()))
        .transform(|w| w)
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err,
            factory::Error::TransformNeedsTypedStorage { kind: "Widget" }
        ),
        "{err}"
    );
}

#[test]
fn a_malformed_object_is_an_error_not_a_panic() {
    // Valid metadata (so it is stored), a spec that is not a Widget's.
    let json = br#"{"metadata":{"name":"bad-0","namespace":"ns"},"spec":{"size":"big"}}"#;
    let stored = Arc::new(Compact::<Widget>::from_json(json, false).unwrap());
    let view = Object::new(Arc::clone(&stored));
    let first = view.typed().unwrap_err();
    let second = view.typed().unwrap_err();
    assert!(Arc::ptr_eq(&first, &second), "the error is memoised too");
    assert!(first.to_string().contains("invalid type"), "{first}");
    assert!(Object::new(stored).into_typed().is_err());
    // A typed index leaves it out instead of failing the insert.
    let index = <Compact<Widget> as factory::Stored<Widget>>::index_fn(Arc::new(|w: &Widget| {
        vec![w.spec.size.to_string()]
    }));
    assert!(index(view.stored()).is_empty());
}

#[test]
fn the_lean_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    use k8s_openapi::api::core::v1::Pod;
    send_sync::<Object<Pod>>();
    send_sync::<ObjectHandlerFns<Pod>>();
    send_sync::<ObjectLister<Pod>>();
    send_sync::<ObjectNamespaceLister<Pod>>();
    send_sync::<crate::TypedSource>();
}
