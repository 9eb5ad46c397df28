//! A [`ListerWatcher`] wrapper that counts what arrives, for the initial-sync progress bar.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use futures::StreamExt;
use kcache::{
    ListerWatcher,
    lister_watcher::{Error, ListParams, ObjectList, WatchEvent, WatchParams, WatchStream},
};

/// Counters shared between a [`Counting`] source and the progress display.
#[derive(Debug, Default)]
pub(crate) struct Received {
    /// Objects received in list pages and as `ADDED` watch events.
    pub objects: AtomicU64,
    /// The total the server announced: items of the first page plus its `remainingItemCount`
    /// (0 when it did not say, e.g. for a streaming list).
    pub announced_total: AtomicU64,
}

/// Forwards to `inner` and counts received objects into [`Received`].
pub(crate) struct Counting<L> {
    inner: L,
    received: Arc<Received>,
}

impl<L> Counting<L> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: L, received: Arc<Received>) -> Self {
        Self { inner, received }
    }
}

impl<L> Counting<L> {
    /// Counts a listed page's objects (and, on the first page, the announced total); `handed`
    /// of them were counted already, as they were handed over one by one.
    fn count<K: Clone>(
        &self,
        params: &ListParams,
        page: ObjectList<K>,
        handed: u64,
    ) -> ObjectList<K> {
        let in_page = page.items.len() as u64;
        self.received.objects.fetch_add(in_page, Ordering::Relaxed);
        let n = handed + in_page;
        if params.continue_token.is_none()
            && let Some(remaining) = page.metadata.remaining_item_count
        {
            let total = n + u64::try_from(remaining).unwrap_or(0);
            self.received
                .announced_total
                .store(total, Ordering::Relaxed);
        }
        page
    }
}

impl<K, L> ListerWatcher<K> for Counting<L>
where
    K: Clone + Send + 'static,
    L: ListerWatcher<K>,
{
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
        let page = self.inner.list(params).await?;
        Ok(self.count(params, page, 0))
    }

    async fn list_telling_continue(
        &self,
        params: &ListParams,
        next: tokio::sync::oneshot::Sender<String>,
    ) -> Result<ObjectList<K>, Error> {
        let page = self.inner.list_telling_continue(params, next).await?;
        Ok(self.count(params, page, 0))
    }

    async fn list_each(
        &self,
        params: &ListParams,
        next: Option<tokio::sync::oneshot::Sender<String>>,
        sink: &mut (dyn FnMut(K) + Send),
    ) -> Result<ObjectList<K>, Error> {
        let mut handed = 0;
        let mut counting = |item: K| {
            handed += 1;
            self.received.objects.fetch_add(1, Ordering::Relaxed);
            sink(item);
        };
        let page = self.inner.list_each(params, next, &mut counting).await?;
        Ok(self.count(params, page, handed))
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, Error> {
        let stream = self.inner.watch(params, resource_version).await?;
        let received = Arc::clone(&self.received);
        Ok(stream
            .inspect(move |event| {
                if let Ok(WatchEvent::Added(_)) = event {
                    received.objects.fetch_add(1, Ordering::Relaxed);
                }
            })
            .boxed())
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    async fn server_version(&self) -> Option<kcache::lister_watcher::ServerVersion> {
        self.inner.server_version().await
    }

    fn uses_protobuf(&self) -> bool {
        self.inner.uses_protobuf()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use kcache::{ListerWatcher, factory};
    use kcache_client::Client;

    use super::*;

    /// The wrapper tells what the wrapped lister-watcher tells: the demo's informer is the
    /// default one, which streams protobuf where `InitialList::Auto` does.
    #[tokio::test]
    async fn counting_tells_the_wire_of_what_it_wraps() {
        let client = Client::from_url("http://127.0.0.1:9").unwrap();
        let lw = <Client as factory::Source<Pod>>::lister_watcher(&client, None);
        assert!(lw.uses_protobuf(), "a built-in kind travels in protobuf");
        let counting = Counting::new(lw, Arc::default());
        assert!(counting.uses_protobuf());
    }
}
