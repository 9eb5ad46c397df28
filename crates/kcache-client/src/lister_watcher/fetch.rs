//! [`HttpListerWatcher`] as a [`ListerWatcher`]: requests sent, protobuf asked for first when
//! it may be (and JSON asked for again after a 406), answers decoded and counted, shard
//! filters applied.

use std::sync::atomic::Ordering;

use bytes::Bytes;
#[cfg(feature = "protobuf")]
use http::HeaderValue;
use http_body_util::BodyDataStream;
use kcache::{
    ListerWatcher,
    lister_watcher::{Error, ListParams, ObjectList, WatchParams, WatchStream},
    sharding::Current,
};

use super::{HttpListerWatcher, describe::describe_collection};
use crate::decode::{ItemDecoder, decode_list, watch_events};

/// List bodies at least this large are decoded on Tokio's blocking pool.
const BLOCKING_DECODE_THRESHOLD: usize = 256 * 1024;

impl<K, D> ListerWatcher<K> for HttpListerWatcher<K, D>
where
    K: Clone + Send + 'static,
    D: ItemDecoder<K>,
{
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
        let shard = self
            .shards
            .as_ref()
            .map(|s| s.filter.for_list(params.continue_token.is_some()));
        let mut list = self.list_unfiltered(params, shard.as_ref()).await?;
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

    fn describe(&self) -> String {
        describe_collection(
            &self.request.url_path,
            self.label_selector.as_deref(),
            self.field_selector.as_deref(),
        )
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
    async fn list_unfiltered(
        &self,
        params: &ListParams,
        shard: Option<&Current>,
    ) -> Result<ObjectList<K>, Error> {
        #[cfg(feature = "protobuf")]
        if self.asks_for_protobuf() {
            let mut request = self.list_request(params, shard)?;
            request.headers_mut().insert(
                http::header::ACCEPT,
                HeaderValue::from_static(crate::protobuf::ACCEPT_LIST),
            );
            match self.client.send_collect_with_headers(request, "list").await {
                Ok((headers, body)) => {
                    let protobuf = crate::protobuf::is_protobuf(&headers);
                    return self.decode_list_body(body, protobuf).await;
                }
                // A server that cannot produce protobuf and does not take the JSON
                // alternative: ask again for JSON only.
                Err(e) if is_not_acceptable(&e) => {}
                Err(e) => return Err(e),
            }
        }
        let request = self.list_request(params, shard)?;
        let (list, size) = self
            .client
            .send_split_list(request, self.decoder.clone())
            .await?;
        self.wire.record(false);
        self.wire.0.list_bytes.fetch_add(size, Ordering::Relaxed);
        Ok(list)
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
                    self.wire.record(protobuf);
                    let body = BodyDataStream::new(response.into_body());
                    let decoder = self.decoder.clone();
                    return Ok(if protobuf {
                        crate::protobuf::watch_events(body, decoder, self.max_frame_size)
                    } else {
                        watch_events(body, decoder, self.max_frame_size)
                    });
                }
                Err(e) if is_not_acceptable(&e) => {}
                Err(e) => return Err(e),
            }
        }
        let request = self.watch_request(params, resource_version, shard)?;
        let response = self.client.send(request, "watch").await?;
        self.wire.record(false);
        let body = BodyDataStream::new(response.into_body());
        Ok(watch_events(
            body,
            self.decoder.clone(),
            self.max_frame_size,
        ))
    }
}

impl<K, D: ItemDecoder<K>> HttpListerWatcher<K, D> {
    /// Decodes a list body (protobuf or JSON, as the response said) and counts its format. The
    /// body is dropped as soon as its items are decoded; a large page (a 500-pod page is about
    /// 4 MB of JSON, tens of milliseconds of CPU) is decoded on the blocking pool so that it does
    /// not stall the runtime's worker.
    async fn decode_list_body(&self, body: Bytes, protobuf: bool) -> Result<ObjectList<K>, Error>
    where
        K: Clone + Send + 'static,
    {
        self.wire.record(protobuf);
        self.wire
            .0
            .list_bytes
            .fetch_add(body.len() as u64, Ordering::Relaxed);
        let decode = move |body: Bytes, decoder: &D| -> Result<ObjectList<K>, Error> {
            #[cfg(feature = "protobuf")]
            if protobuf {
                return crate::protobuf::decode_list(body, decoder);
            }
            decode_list(&body, decoder).map_err(crate::client::decode_error)
        };
        if body.len() < BLOCKING_DECODE_THRESHOLD {
            return decode(body, &self.decoder);
        }
        let decoder = self.decoder.clone();
        tokio::task::spawn_blocking(move || decode(body, &decoder))
            .await
            .map_err(|e| Error::decode(format!("list decoding task failed: {e}")))?
    }
}

/// 406 Not Acceptable: the server produces none of the representations asked for.
#[cfg(feature = "protobuf")]
fn is_not_acceptable(e: &Error) -> bool {
    e.status().is_some_and(|s| s.code == 406)
}
