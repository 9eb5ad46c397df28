//! [`HttpListerWatcher`] as a [`ListerWatcher`]: requests sent, protobuf asked for first when
//! it may be (and JSON asked for again after a 406), answers decoded while they arrive and
//! counted, shard filters applied, dynamic items given their list's type.

use std::{any::TypeId, sync::atomic::Ordering};

#[cfg(feature = "protobuf")]
use http::HeaderValue;
use http_body_util::BodyDataStream;
use kcache::{
    ListerWatcher,
    lister_watcher::{Error, ListParams, ObjectList, ServerVersion, WatchParams, WatchStream},
    sharding::Current,
};
use kube_core::DynamicObject;
use tokio::sync::oneshot;

use super::{
    HttpListerWatcher, describe::describe_collection, inflate, item_types::fill_dynamic_item_types,
};
use crate::{
    client::ItemSink,
    decode::{ItemDecoder, watch_events},
};

impl<K, D> ListerWatcher<K> for HttpListerWatcher<K, D>
where
    K: Clone + Send + 'static,
    D: ItemDecoder<K>,
{
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
        self.list_page(params, None).await
    }

    async fn list_telling_continue(
        &self,
        params: &ListParams,
        next: oneshot::Sender<String>,
    ) -> Result<ObjectList<K>, Error> {
        self.list_page(params, Some(next)).await
    }

    /// Items go to `sink` as they are decoded, unless a shard filter or a dynamic list's item
    /// types must see the page whole.
    async fn list_each(
        &self,
        params: &ListParams,
        next: Option<oneshot::Sender<String>>,
        sink: &mut (dyn FnMut(K) + Send),
    ) -> Result<ObjectList<K>, Error> {
        if self.shards.is_some() || TypeId::of::<K>() == TypeId::of::<DynamicObject>() {
            return self.list_page(params, next).await;
        }
        let mut next = next;
        self.list_unfiltered(params, None, &mut next, Some(sink))
            .await
    }

    fn describe(&self) -> String {
        describe_collection(
            &self.request.url_path,
            self.label_selector.as_deref(),
            self.field_selector.as_deref(),
        )
    }

    fn uses_protobuf(&self) -> bool {
        self.asks_for_protobuf()
    }

    async fn server_version(&self) -> Option<ServerVersion> {
        match self.client.server_version().await {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::debug!(error = %e, "the server's version is unknown");
                None
            }
        }
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, Error> {
        let Some(s) = &self.shards else {
            return self.watch_unfiltered(params, resource_version, None).await;
        };
        let (sent, stale) = s.filter.for_watch(params.send_initial_events);
        let stream = self
            .watch_unfiltered(params, resource_version, Some(&sent))
            .await?;
        Ok((s.watch)(&s.filter, sent, stale, stream))
    }
}

impl<K, D> HttpListerWatcher<K, D>
where
    K: Clone + Send + 'static,
    D: ItemDecoder<K>,
{
    /// One page, shard filters applied; its continue token goes to `next` once read.
    async fn list_page(
        &self,
        params: &ListParams,
        mut next: Option<oneshot::Sender<String>>,
    ) -> Result<ObjectList<K>, Error> {
        let shard = self
            .shards
            .as_ref()
            .map(|s| s.filter.for_list(params.continue_token.is_some()));
        let mut list = self
            .list_unfiltered(params, shard.as_ref(), &mut next, None)
            .await?;
        fill_dynamic_item_types(&mut list);
        if let (Some(s), Some(sent)) = (&self.shards, &shard) {
            let echoed = list
                .metadata
                .shard_info
                .as_ref()
                .map(|i| i.selector.clone());
            (s.accept_items)(&s.filter, sent, echoed.as_deref(), &mut list.items);
        }
        Ok(list)
    }

    async fn list_unfiltered(
        &self,
        params: &ListParams,
        shard: Option<&Current>,
        next: &mut Option<oneshot::Sender<String>>,
        mut sink: ItemSink<'_, K>,
    ) -> Result<ObjectList<K>, Error> {
        #[cfg(feature = "protobuf")]
        if self.asks_for_protobuf() {
            let mut request = self.list_request(params, shard)?;
            request.headers_mut().insert(
                http::header::ACCEPT,
                HeaderValue::from_static(crate::protobuf::ACCEPT_LIST),
            );
            // Reborrowed: the sink is still wanted if JSON must be asked for again.
            let again = sink
                .as_mut()
                .map(|sink| &mut **sink as &mut (dyn FnMut(K) + Send));
            match self.split_list(request, next, again).await {
                // A server that cannot produce protobuf and does not take the JSON
                // alternative: ask again for JSON only.
                Err(e) if is_not_acceptable(&e) => {}
                answer => return answer,
            }
        }
        let request = self.list_request(params, shard)?;
        self.split_list(request, next, sink).await
    }

    /// Sends a list request and decodes its answer while it arrives, its items to `sink` when
    /// given; counts its format and size.
    async fn split_list(
        &self,
        request: http::Request<Vec<u8>>,
        next: &mut Option<oneshot::Sender<String>>,
        sink: ItemSink<'_, K>,
    ) -> Result<ObjectList<K>, Error> {
        let split = self
            .client
            .send_split_list(
                request,
                self.decoder.clone(),
                self.max_frame_size,
                next,
                sink,
            )
            .await?;
        self.wire.record(split.protobuf);
        self.wire
            .0
            .list_bytes
            .fetch_add(split.size, Ordering::Relaxed);
        Ok(split.list)
    }

    async fn watch_unfiltered(
        &self,
        params: &WatchParams,
        resource_version: &str,
        shard: Option<&Current>,
    ) -> Result<WatchStream<K>, Error> {
        #[cfg(feature = "protobuf")]
        if self.asks_for_protobuf() {
            let mut request = self.watch_request(params, resource_version, shard)?;
            request.headers_mut().insert(
                http::header::ACCEPT,
                HeaderValue::from_static(crate::protobuf::ACCEPT_WATCH),
            );
            match self.client.send(request, "watch").await {
                Ok(response) => {
                    let protobuf = crate::protobuf::is_protobuf(response.headers());
                    return Ok(self.watch_events(response, protobuf));
                }
                Err(e) if is_not_acceptable(&e) => {}
                Err(e) => return Err(e),
            }
        }
        let request = self.watch_request(params, resource_version, shard)?;
        let response = self.client.send(request, "watch").await?;
        Ok(self.watch_events(response, false))
    }

    /// The events of an open watch, inflated first when the server compressed them (a
    /// streaming list asks for gzip; kube-apiserver 1.37+ answers with it).
    fn watch_events(
        &self,
        response: http::Response<kube_client::client::Body>,
        protobuf: bool,
    ) -> WatchStream<K> {
        self.wire.record(protobuf);
        let gzip = inflate::is_gzip(response.headers());
        let body = BodyDataStream::new(response.into_body());
        let decoder = self.decoder.clone();
        let max = self.max_frame_size;
        match (protobuf, gzip) {
            #[cfg(feature = "protobuf")]
            (true, false) => crate::protobuf::watch_events(body, decoder, max),
            #[cfg(feature = "protobuf")]
            (true, true) => crate::protobuf::watch_events(inflate::inflate(body), decoder, max),
            (_, false) => watch_events(body, decoder, max),
            (_, true) => watch_events(inflate::inflate(body), decoder, max),
        }
    }
}

/// 406 Not Acceptable: the server produces none of the representations asked for.
#[cfg(feature = "protobuf")]
fn is_not_acceptable(e: &Error) -> bool {
    e.status().is_some_and(|s| s.code == 406)
}
