//! A relist in one page reuses the cache's copy of each unchanged object as the object is
//! decoded: the listed objects never all live beside the cache's.

use std::{borrow::Cow, sync::atomic::AtomicBool};

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube_core::{ObjectMeta, TypeMeta};

use super::*;
use crate::lister_watcher::{ListParams, ObjectList, WatchParams};

/// How many [`Tracked`] objects are alive, and the most that were at once.
#[derive(Default)]
struct Live {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Live {
    fn born(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
    }
}

/// A config map that counts itself in [`Live`] while it lives.
struct Tracked {
    cm: ConfigMap,
    live: Arc<Live>,
}

impl Tracked {
    fn new(name: &str, live: &Arc<Live>) -> Self {
        live.born();
        let mut cm = cm(name);
        cm.metadata.resource_version = Some("7".into());
        Self {
            cm,
            live: Arc::clone(live),
        }
    }
}

impl Clone for Tracked {
    fn clone(&self) -> Self {
        self.live.born();
        Self {
            cm: self.cm.clone(),
            live: Arc::clone(&self.live),
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.live.now.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Resource for Tracked {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        ConfigMap::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        ConfigMap::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        ConfigMap::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        ConfigMap::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.cm.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.cm.metadata
    }
}

/// Objects in the fake's collection.
const OBJECTS: usize = 200;

/// Lists the same [`OBJECTS`] objects, unchanged (resourceVersion 7), every time, each one
/// made just before it is handed over; its first watch fails with 410 Expired (so the
/// reflector relists), later ones stay open and silent. Records, per list, the most objects
/// alive at once during it.
struct Unchanging {
    live: Arc<Live>,
    /// Whether a watch has failed already.
    failed: AtomicBool,
    /// Per list: the most objects alive at once while it ran.
    most_per_list: Arc<Mutex<Vec<usize>>>,
}

impl Unchanging {
    fn list_of(items: Vec<Tracked>) -> ObjectList<Tracked> {
        ObjectList {
            types: TypeMeta {
                api_version: "v1".into(),
                kind: "ConfigMapList".into(),
            },
            metadata: ListMeta {
                resource_version: Some("7".into()),
                ..ListMeta::default()
            },
            items,
        }
    }

    fn name(i: usize) -> String {
        format!("c{i:03}")
    }

    fn start_list(&self) {
        let now = self.live.now.load(Ordering::SeqCst);
        self.live.most.store(now, Ordering::SeqCst);
    }

    fn end_list(&self) {
        let most = self.live.most.load(Ordering::SeqCst);
        self.most_per_list.lock().push(most);
    }
}

impl ListerWatcher<Tracked> for Unchanging {
    async fn list(&self, _: &ListParams) -> Result<ObjectList<Tracked>, lister_watcher::Error> {
        self.start_list();
        let items = (0..OBJECTS)
            .map(|i| Tracked::new(&Self::name(i), &self.live))
            .collect();
        self.end_list();
        Ok(Self::list_of(items))
    }

    async fn list_each(
        &self,
        _: &ListParams,
        _: Option<tokio::sync::oneshot::Sender<String>>,
        sink: &mut (dyn FnMut(Tracked) + Send),
    ) -> Result<ObjectList<Tracked>, lister_watcher::Error> {
        self.start_list();
        for i in 0..OBJECTS {
            sink(Tracked::new(&Self::name(i), &self.live));
        }
        self.end_list();
        Ok(Self::list_of(Vec::new()))
    }

    async fn watch(
        &self,
        _: &WatchParams,
        _: &str,
    ) -> Result<WatchStream<Tracked>, lister_watcher::Error> {
        if self.failed.swap(true, Ordering::SeqCst) {
            return Ok(futures::stream::pending().boxed());
        }
        Err(lister_watcher::Error::api(
            status(410, "Expired", "too old resource version: 1 (7)"),
            None,
        ))
    }
}

/// The first list fills the cache with [`OBJECTS`] objects; the relist after an expired
/// watch lists them again, unchanged. While it runs, at most one listed object lives beside
/// the cache's copies: each is dropped for the cached copy as soon as it is handed over. (A
/// relist that shared the page only once it was whole held twice as many.)
#[tokio::test(start_paused = true)]
async fn a_relist_drops_each_unchanged_object_for_the_cached_copy_as_it_comes() {
    let lists = Arc::new(Mutex::new(Vec::new()));
    let lw = Unchanging {
        live: Arc::default(),
        failed: AtomicBool::new(false),
        most_per_list: Arc::clone(&lists),
    };
    let store = crate::store::ThreadSafeStore::<Tracked>::for_resource();
    let reflector = Reflector::new(lw, Arc::new(store.clone()), list_config())
        .with_known_objects(Arc::new(store.clone()));
    let cancel = CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    for _ in 0..1000 {
        if lists.lock().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let most = lists.lock().clone();
    cancel.cancel();
    task.await.unwrap();
    assert_eq!(most.len(), 2, "a list and a relist: {most:?}");
    assert_eq!(most[0], OBJECTS, "the first list: {most:?}");
    assert!(
        most[1] <= OBJECTS + 1,
        "the relist held {} objects at once beside the cache's {OBJECTS}: {most:?}",
        most[1] - OBJECTS
    );
    assert_eq!(store.len(), OBJECTS);
}
