//! The faults: error bodies, stalls, truncations and nonsense, one per hostile case.

use super::*;

pub(super) fn err_body(body: ErrBody, code: u16) -> (&'static str, Vec<u8>) {
    match body {
        ErrBody::Empty => ("text/plain", Vec::new()),
        ErrBody::Html => (
            "text/html",
            format!("<html><head><title>{code}</title></head><body><h1>{code} {}</h1><p>nginx</p></body></html>", reason(code)).into_bytes(),
        ),
        ErrBody::Binary => ("application/octet-stream", (0..=255u8).cycle().take(4096).collect()),
        ErrBody::Control => (
            "text/plain",
            b"bad\0gateway\x1b[31mRED\x1b[0m\x07\x08\r\n\x1b]0;pwned\x07 end".to_vec(),
        ),
        ErrBody::Mega => ("text/plain", "all work and no play ".repeat(MB / 21).into_bytes()),
        ErrBody::Secret => (
            "text/plain",
            format!("upstream rejected GET {PATH}\nAuthorization: Bearer {SECRET}\nCookie: session={SECRET}\n").into_bytes(),
        ),
        ErrBody::StatusSecret | ErrBody::StatusSecretSmall => {
            let pad = if matches!(body, ErrBody::StatusSecret) { MB } else { 2048 };
            let message = format!(
                "denied \u{1b}[31m\0 request with Authorization: Bearer {SECRET} {}",
                "x".repeat(pad)
            );
            (
                "application/json",
                serde_json::to_vec(&json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure", "message": message, "reason": "InternalError", "code": code}))
                .unwrap(),
            )
        }
        ErrBody::StatusRetryHuge => (
            "application/json",
            serde_json::to_vec(&json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "slow down", "reason": "TooManyRequests",
                "details": {"retryAfterSeconds": u32::MAX}, "code": code}))
            .unwrap(),
        ),
        ErrBody::StatusTooLarge => (
            "application/json",
            serde_json::to_vec(&json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure",
                "message": "Timeout: Too large resource version: 99999999, current: 8",
                "reason": "Timeout", "code": code,
                "details": {"causes": [{"reason": "ResourceVersionTooLarge",
                    "message": "Too large resource version"}], "retryAfterSeconds": 1}}))
            .unwrap(),
        ),
        ErrBody::Huge => ("text/plain", Vec::new()),
        ErrBody::ProtobufGarbage => (
            "application/vnd.kubernetes.protobuf",
            b"k8s\0\xff\xff\xff\xff\x0f garbage \x00\x01".to_vec(),
        ),
    }
}

/// A repeated 64 KB block of `unit`, for streaming huge bodies without holding them.
pub(super) fn block(unit: &[u8]) -> Bytes {
    let n = (64 * 1024 / unit.len()).max(1);
    Bytes::from(unit.repeat(n))
}

pub(super) async fn stream_blocks(sock: &mut TcpStream, block: &Bytes, total: usize) -> bool {
    let mut sent = 0;
    while sent < total {
        if !chunk(sock, block).await {
            return false;
        }
        sent += block.len();
    }
    true
}

/// Never answers; holds the connection until the client gives up.
pub(super) async fn hold(sock: &mut TcpStream) -> bool {
    let mut tmp = [0u8; 1024];
    loop {
        match sock.read(&mut tmp).await {
            Ok(0) | Err(_) => return false,
            Ok(_) => {}
        }
    }
}

pub(super) async fn misbehave(
    state: &State,
    req: &Request,
    sock: &mut TcpStream,
    what: Misbehaviour,
) -> bool {
    match what {
        Misbehaviour::Status {
            code,
            body,
            retry_after,
        } => {
            let extra: Vec<(&str, &str)> = retry_after
                .map(|r| ("Retry-After", r))
                .into_iter()
                .collect();
            if matches!(body, ErrBody::Huge) {
                let h = head(code, "text/plain", &extra, None);
                return sock.write_all(&h).await.is_ok()
                    && stream_blocks(sock, &block(b"error "), 100 * MB).await
                    && end_chunks(sock).await;
            }
            let (ct, b) = err_body(body, code);
            write_full(sock, code, ct, &extra, &b).await
        }
        Misbehaviour::Redirect => {
            write_full(
                sock,
                302,
                "text/html",
                &[("Location", "http://192.0.2.1/elsewhere")],
                b"<a href=\"http://192.0.2.1/elsewhere\">Found</a>",
            )
            .await
        }
        Misbehaviour::Body { content_type, body } => {
            write_full(sock, 200, content_type, &[], &body).await
        }
        Misbehaviour::TruncatedList => {
            let body = healthy_list_body(state, req);
            let h = head(200, "application/json", &[], Some(body.len()));
            let _ = sock.write_all(&h).await;
            let _ = sock.write_all(&body[..body.len() / 2]).await;
            false
        }
        Misbehaviour::ListWithoutRv | Misbehaviour::ListWithWrongKind => {
            let body = {
                let m = state.model.lock().unwrap();
                let mut items: Vec<Value> = m.objects.values().cloned().collect();
                let rv = matches!(what, Misbehaviour::ListWithWrongKind);
                if rv {
                    items.push(json!({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": "not-a-configmap", "namespace": "ns",
                            "resourceVersion": m.rv.to_string()},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}));
                }
                serde_json::to_vec(&list_json(&m, &items.iter().collect::<Vec<_>>(), None, rv))
                    .unwrap()
            };
            write_full(sock, 200, "application/json", &[], &body).await
        }
        Misbehaviour::HugeList { mb } => {
            let h = head(200, "application/json", &[], None);
            let start = br#"{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"1"},"items":["#;
            let item = br#"{"metadata":{"name":"pad","namespace":"ns","resourceVersion":"1"},"data":{"k":"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"}},"#;
            let _ = sock.write_all(&h).await.is_ok()
                && chunk(sock, start).await
                && stream_blocks(sock, &block(item), mb * MB).await;
            false
        }
        Misbehaviour::HugeObjectList { mb } => {
            let h = head(200, "application/json", &[], None);
            let start = br#"{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"huge","namespace":"ns","resourceVersion":"1"},"data":{"k":""#;
            let _ = sock.write_all(&h).await.is_ok()
                && chunk(sock, start).await
                && stream_blocks(sock, &block(b"x"), mb * MB).await;
            false
        }
        Misbehaviour::DeepList { depth } => {
            let mut body = br#"{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"deep","namespace":"ns","resourceVersion":"1"},"data":"#.to_vec();
            body.extend(std::iter::repeat_n(b'[', depth));
            body.extend(std::iter::repeat_n(b']', depth));
            body.extend_from_slice(b"}]}");
            write_full(sock, 200, "application/json", &[], &body).await
        }
        Misbehaviour::StallNoAnswer => hold(sock).await,
        Misbehaviour::StallAfterHead => {
            let _ = sock
                .write_all(&head(200, "application/json", &[], None))
                .await;
            hold(sock).await
        }
        Misbehaviour::Trickle => {
            let body = healthy_list_body(state, req);
            if sock
                .write_all(&head(200, "application/json", &[], Some(body.len())))
                .await
                .is_err()
            {
                return false;
            }
            for b in body {
                if sock.write_all(&[b]).await.is_err() {
                    return false;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            true
        }
        Misbehaviour::ResetMidList => {
            let body = healthy_list_body(state, req);
            let h = head(200, "application/json", &[], Some(body.len()));
            let _ = sock.write_all(&h).await;
            let _ = sock.write_all(&body[..body.len() / 2]).await;
            let _ = sock.flush().await;
            #[allow(
                deprecated,
                reason = "the blocking-close caveat does not apply to a zero linger"
            )]
            let _ = sock.set_linger(Some(Duration::ZERO));
            false
        }
        Misbehaviour::CloseAtOnce => false,
        Misbehaviour::EndlessFreshContinue => {
            let body = {
                let m = state.model.lock().unwrap();
                let n = state.requests.load(Ordering::Relaxed);
                let mut item = m.objects.values().next().cloned().unwrap_or_default();
                item["metadata"]["name"] = json!(format!("endless-{n}"));
                serde_json::to_vec(&list_json(&m, &[&item], Some(format!("fresh-{n}")), true))
                    .unwrap()
            };
            write_full(sock, 200, "application/json", &[], &body).await
        }
        Misbehaviour::EndlessContinue | Misbehaviour::RepeatingContinue => {
            let body = {
                let m = state.model.lock().unwrap();
                let items: Vec<&Value> = m.objects.values().take(1).collect();
                let n = state.requests.load(Ordering::Relaxed);
                let token = if matches!(what, Misbehaviour::EndlessContinue) {
                    format!("endless-{n}")
                } else {
                    "again".to_owned()
                };
                serde_json::to_vec(&list_json(&m, &items, Some(token), true)).unwrap()
            };
            write_full(sock, 200, "application/json", &[], &body).await
        }
        Misbehaviour::WatchLines { lines, end } => {
            let p = Prefix {
                lines,
                close_after_lines: matches!(end, End::Close),
                ..Prefix::default()
            };
            healthy_watch(state, req, sock, p).await
        }
        Misbehaviour::BadChunking => {
            let _ = sock
                .write_all(&head(200, "application/json", &[], None))
                .await;
            let _ = sock
                .write_all(b"zz\r\n{\"type\":\"ADDED\"}\r\n-5\r\nnope\r\n")
                .await;
            false
        }
        Misbehaviour::SplitLines => {
            let p = Prefix {
                split: true,
                ..Prefix::default()
            };
            healthy_watch(state, req, sock, p).await
        }
        Misbehaviour::CloseAfterOneEvent => {
            let p = Prefix {
                close_after: Some(1),
                ..Prefix::default()
            };
            healthy_watch(state, req, sock, p).await
        }
        Misbehaviour::CloseEmpty => {
            let _ = sock
                .write_all(&head(200, "application/json", &[], None))
                .await;
            end_chunks(sock).await
        }
        Misbehaviour::Silent => {
            let _ = sock
                .write_all(&head(200, "application/json", &[], None))
                .await;
            hold(sock).await
        }
        Misbehaviour::ResetMidWatch => {
            let p = Prefix {
                close_after: Some(1),
                reset: true,
                ..Prefix::default()
            };
            healthy_watch(state, req, sock, p).await;
            false
        }
        Misbehaviour::StreamingCloseEarly => {
            let p = Prefix {
                no_end_bookmark: true,
                close_after_lines: true,
                ..Prefix::default()
            };
            healthy_watch(state, req, sock, p).await
        }
        Misbehaviour::StreamingNoEndBookmark => {
            let p = Prefix {
                no_end_bookmark: true,
                ..Prefix::default()
            };
            healthy_watch(state, req, sock, p).await
        }
        Misbehaviour::HugeEvent { mb } => {
            let _ = sock
                .write_all(&head(200, "application/json", &[], None))
                .await;
            let start = br#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"huge","namespace":"ns","resourceVersion":"1"},"data":{"k":""#;
            let ok = chunk(sock, start).await
                && stream_blocks(sock, &block(b"x"), mb * MB).await
                && chunk(sock, b"\"}}}\n").await;
            ok && end_chunks(sock).await
        }
    }
}
