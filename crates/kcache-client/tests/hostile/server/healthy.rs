//! The healthy answers: lists and watches as kube-apiserver sends them.

use super::*;

pub(super) fn list_json(m: &Model, items: &[&Value], cont: Option<String>, rv: bool) -> Value {
    let mut meta = serde_json::Map::new();
    if rv {
        meta.insert("resourceVersion".into(), json!(m.rv.to_string()));
    }
    if let Some(c) = cont {
        meta.insert("continue".into(), json!(c));
    }
    json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": meta, "items": items})
}

pub(super) fn healthy_list_body(state: &State, req: &Request) -> Vec<u8> {
    let m = state.model.lock().unwrap();
    let all: Vec<&Value> = m.objects.values().collect();
    let limit = req
        .query
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0);
    let offset = req
        .query
        .get("continue")
        .and_then(|c| c.strip_prefix("off-"))
        .and_then(|o| o.parse::<usize>().ok())
        .unwrap_or(0)
        .min(all.len());
    let (items, cont) = match limit {
        Some(l) if offset + l < all.len() => (
            &all[offset..offset + l],
            Some(format!("off-{}", offset + l)),
        ),
        _ => (&all[offset..], None),
    };
    serde_json::to_vec(&list_json(&m, items, cont, true)).unwrap()
}

pub(super) async fn healthy_list(state: &State, req: &Request, sock: &mut TcpStream) -> bool {
    // A token this server did not issue (one a fault made up) is refused as kube-apiserver
    // refuses a continue token it cannot decode.
    if let Some(token) = req.query.get("continue")
        && token
            .strip_prefix("off-")
            .is_none_or(|o| o.parse::<usize>().is_err())
    {
        let body = serde_json::to_vec(&json!({"kind": "Status", "apiVersion": "v1",
            "metadata": {}, "status": "Failure", "reason": "BadRequest", "code": 400,
            "message": "continue key is not valid: incorrect encoded start resourceVersion"}))
        .unwrap();
        return write_full(sock, 400, "application/json", &[], &body).await;
    }
    let body = healthy_list_body(state, req);
    write_full(sock, 200, "application/json", &[], &body).await
}

pub(super) fn line(v: &Value) -> Vec<u8> {
    let mut l = serde_json::to_vec(v).unwrap();
    l.push(b'\n');
    l
}

/// Tweaks of a healthy watch.
#[derive(Default)]
pub(super) struct Prefix {
    /// Raw lines sent right after the initial events.
    pub(super) lines: Vec<Bytes>,
    /// Close after the lines.
    pub(super) close_after_lines: bool,
    /// Close after this many events.
    pub(super) close_after: Option<usize>,
    /// Close before the initial-events-end bookmark.
    pub(super) no_end_bookmark: bool,
    /// Split every line into three chunks.
    pub(super) split: bool,
    /// Reset the connection instead of closing.
    pub(super) reset: bool,
}

pub(super) async fn send(sock: &mut TcpStream, data: &[u8], split: bool) -> bool {
    if split && data.len() >= 3 {
        let a = data.len() / 3;
        let b = 2 * data.len() / 3;
        // Separate writes with a pause, so that they arrive as separate reads.
        for part in [&data[..a], &data[a..b], &data[b..]] {
            if !chunk(sock, part).await {
                return false;
            }
            let _ = sock.flush().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    } else {
        chunk(sock, data).await
    }
}

/// A watch as the API server does it (with bookmarks every second when asked for), tweaked by
/// `p`. Returns whether the connection can be reused.
pub(super) async fn healthy_watch(
    state: &State,
    req: &Request,
    sock: &mut TcpStream,
    p: Prefix,
) -> bool {
    let mut kick = state.kick.subscribe();
    kick.borrow_and_update();
    let mut log_len = state.log_len.subscribe();
    if sock
        .write_all(&head(200, "application/json", &[], None))
        .await
        .is_err()
    {
        return false;
    }
    let bookmarks = req.query.get("allowWatchBookmarks").map(String::as_str) == Some("true");
    let mut sent_events = 0usize;
    // Initial events (a streaming list's ADDED events and end bookmark), or the replay from
    // the asked resourceVersion.
    let (mut next, mut last_rv, initial) = {
        let m = state.model.lock().unwrap();
        if req.is_streaming() {
            let initial: Vec<Vec<u8>> = m
                .objects
                .values()
                .map(|o| line(&json!({"type": "ADDED", "object": o})))
                .collect();
            (m.log.len(), m.rv, initial)
        } else {
            let from = req
                .query
                .get("resourceVersion")
                .and_then(|rv| rv.parse::<u64>().ok())
                .filter(|rv| *rv > 0)
                .unwrap_or(m.rv);
            (
                m.log.partition_point(|(rv, ..)| *rv <= from),
                from,
                Vec::new(),
            )
        }
    };
    for l in initial {
        if !send(sock, &l, p.split).await {
            return false;
        }
        sent_events += 1;
    }
    if req.is_streaming() && !p.no_end_bookmark {
        let b = json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"resourceVersion": last_rv.to_string(),
                "annotations": {"k8s.io/initial-events-end": "true"}}}});
        if !send(sock, &line(&b), p.split).await {
            return false;
        }
    }
    for l in &p.lines {
        if !chunk(sock, l).await {
            return false;
        }
    }
    if p.close_after_lines || p.close_after.is_some_and(|n| sent_events >= n) {
        return finish(sock, p.reset).await;
    }
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        let batch: Vec<(u64, Vec<u8>)> = {
            let m = state.model.lock().unwrap();
            let b = m.log[next..]
                .iter()
                .map(|(rv, ty, o)| (*rv, line(&json!({"type": ty, "object": o}))))
                .collect();
            next = m.log.len();
            b
        };
        for (rv, l) in batch {
            if !send(sock, &l, p.split).await {
                return false;
            }
            last_rv = rv;
            sent_events += 1;
            if p.close_after.is_some_and(|n| sent_events >= n) {
                return finish(sock, p.reset).await;
            }
        }
        tokio::select! {
            _ = log_len.changed() => {}
            _ = tick.tick() => {
                if bookmarks {
                    let b = json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap",
                        "apiVersion": "v1", "metadata": {"resourceVersion": last_rv.to_string()}}});
                    if !send(sock, &line(&b), p.split).await {
                        return false;
                    }
                }
            }
            r = kick.changed() => {
                if r.is_err() {
                    return false;
                }
                let k = *kick.borrow_and_update();
                match k {
                    Kick::None => {}
                    Kick::Close(_) => return end_chunks(sock).await,
                    Kick::Expire(_) => {
                        let e = json!({"type": "ERROR", "object": {"kind": "Status",
                            "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": KICK_MESSAGE, "reason": "Expired", "code": 410}});
                        return chunk(sock, &line(&e)).await && end_chunks(sock).await;
                    }
                }
            }
        }
    }
}

pub(super) async fn finish(sock: &mut TcpStream, rst: bool) -> bool {
    if rst {
        let _ = sock.flush().await;
        // The caller drops the socket; make that a reset.
        #[allow(
            deprecated,
            reason = "the blocking-close caveat does not apply to a zero linger"
        )]
        let _ = sock.set_linger(Some(Duration::ZERO));
        return false;
    }
    end_chunks(sock).await
}
