//! Streaming lists answered with `Content-Encoding: gzip` (kube-apiserver 1.37+, the
//! `WatchListCompression` gate): the body is a run of gzip members, one per flush of the
//! server, inflated here as the chunks arrive.

use std::io::Write as _;

use bytes::Bytes;
use futures::{Stream, StreamExt as _, stream};

/// An error inside a watch body: the transport's, or an inflate error.
pub(super) type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// Whether a response's body is gzip.
pub(super) fn is_gzip(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("gzip"))
}

/// `body` inflated: each chunk goes through one gzip decoder that takes member after member;
/// what it yields is passed on at once (a server flushes after every batch of events, so a
/// chunk usually holds whole members). A corrupt body ends in one error.
pub(super) fn inflate<S, E>(body: S) -> impl Stream<Item = Result<Bytes, BodyError>> + Send
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<BodyError>,
{
    let decoder = flate2::write::MultiGzDecoder::new(Vec::new());
    stream::unfold(
        (body.boxed(), Some(decoder)),
        |(mut body, mut decoder)| async move {
            let inflater = decoder.as_mut()?;
            loop {
                match body.next().await {
                    Some(Ok(chunk)) => {
                        let out = inflater
                            .write_all(&chunk)
                            .and_then(|()| inflater.flush())
                            .map(|()| std::mem::take(inflater.get_mut()));
                        match out {
                            Ok(out) if out.is_empty() => continue,
                            Ok(out) => return Some((Ok(Bytes::from(out)), (body, decoder))),
                            Err(e) => return Some((Err(gzip(e)), (body, None))),
                        }
                    }
                    Some(Err(e)) => return Some((Err(e.into()), (body, None))),
                    None => {
                        let inflater = decoder.take()?;
                        return match inflater.finish() {
                            Ok(rest) if rest.is_empty() => None,
                            Ok(rest) => Some((Ok(Bytes::from(rest)), (body, None))),
                            Err(e) => Some((Err(gzip(e)), (body, None))),
                        };
                    }
                }
            }
        },
    )
}

fn gzip(e: std::io::Error) -> BodyError {
    format!("gzip watch body: {e}").into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(text: &str) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(text.as_bytes()).unwrap();
        gz.finish().unwrap()
    }

    async fn inflated(chunks: Vec<Vec<u8>>) -> Vec<Result<String, String>> {
        let body = stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, std::io::Error>(Bytes::from(c))),
        );
        inflate(body)
            .map(|r| {
                r.map(|b| String::from_utf8(b.to_vec()).unwrap())
                    .map_err(|e| e.to_string())
            })
            .collect()
            .await
    }

    #[tokio::test]
    async fn one_member_per_flush_is_inflated_as_it_arrives() {
        let out = inflated(vec![member("{\"a\":1}\n"), member("{\"b\":2}\n")]).await;
        assert_eq!(
            out,
            [Ok("{\"a\":1}\n".to_owned()), Ok("{\"b\":2}\n".to_owned())]
        );
    }

    #[tokio::test]
    async fn a_member_split_across_chunks_is_joined() {
        let m = member("{\"event\":\"split\"}\n");
        let (a, b) = m.split_at(m.len() / 2);
        let out: String = inflated(vec![a.to_vec(), b.to_vec()])
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(out, "{\"event\":\"split\"}\n");
    }

    #[tokio::test]
    async fn a_corrupt_body_ends_in_an_error() {
        let out = inflated(vec![b"not gzip at all".to_vec()]).await;
        assert_eq!(out.len(), 1);
        let err = out[0].as_ref().unwrap_err();
        assert!(err.contains("gzip watch body"), "{err}");
    }

    #[test]
    fn content_encoding_gzip_is_recognised() {
        let mut h = http::HeaderMap::new();
        assert!(!is_gzip(&h));
        h.insert(http::header::CONTENT_ENCODING, "gzip".parse().unwrap());
        assert!(is_gzip(&h));
    }
}
