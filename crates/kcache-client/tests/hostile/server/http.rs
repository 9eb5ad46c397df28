//! Reading requests and writing answers: the HTTP/1.1 framing the hostile server speaks by hand.

use super::*;

pub(super) struct Request {
    pub(super) path: String,
    pub(super) query: HashMap<String, String>,
}

impl Request {
    pub(super) fn is_watch(&self) -> bool {
        matches!(
            self.query.get("watch").map(String::as_str),
            Some("1" | "true")
        )
    }

    pub(super) fn is_streaming(&self) -> bool {
        self.is_watch() && self.query.get("sendInitialEvents").map(String::as_str) == Some("true")
    }

    pub(super) fn matches(&self, scope: Scope) -> bool {
        match scope {
            Scope::Any => true,
            Scope::List => !self.is_watch(),
            Scope::Continue => !self.is_watch() && self.query.contains_key("continue"),
            Scope::Watch => self.is_watch() && !self.is_streaming(),
            Scope::Streaming => self.is_streaming(),
        }
    }
}

pub(super) async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Request> {
    loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..pos]).into_owned();
            buf.drain(..pos + 4);
            let target = head.lines().next()?.split(' ').nth(1)?.to_owned();
            let (path, q) = target.split_once('?').unwrap_or((&target, ""));
            let query = q
                .split('&')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.replace("%3A", ":").replace("%2F", "/")))
                .collect();
            return Some(Request {
                path: path.to_owned(),
                query,
            });
        }
        let mut tmp = [0u8; 8192];
        let n = sock.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

/// Serves one connection (keep-alive); returns when it is closed or spoiled.
pub(super) async fn connection(state: Arc<State>, mut sock: TcpStream) {
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut sock, &mut buf).await {
        state.requests.fetch_add(1, Ordering::Relaxed);
        let fault = {
            let mut f = state.fault.lock().unwrap();
            match f.as_mut() {
                Some(fault) if req.matches(fault.scope) => {
                    let what = fault.what.clone();
                    if let Some(n) = &mut fault.remaining {
                        *n -= 1;
                        if *n == 0 {
                            *f = None;
                        }
                    }
                    Some(what)
                }
                _ => None,
            }
        };
        let keep = if req.path != PATH {
            write_full(&mut sock, 404, "text/plain", &[], b"404 page not found\n").await
        } else if let Some(what) = fault {
            state.faulty_responses.fetch_add(1, Ordering::Relaxed);
            misbehave(&state, &req, &mut sock, what).await
        } else if req.is_watch() {
            healthy_watch(&state, &req, &mut sock, Prefix::default()).await
        } else {
            healthy_list(&state, &req, &mut sock).await
        };
        if !keep {
            return;
        }
    }
}

pub(super) fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        302 => "Found",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        410 => "Gone",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Whatever",
    }
}

pub(super) fn head(
    code: u16,
    content_type: &str,
    extra: &[(&str, &str)],
    length: Option<usize>,
) -> Vec<u8> {
    let mut h = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {content_type}\r\n",
        reason(code)
    );
    for (k, v) in extra {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    match length {
        Some(n) => h.push_str(&format!("Content-Length: {n}\r\n\r\n")),
        None => h.push_str("Transfer-Encoding: chunked\r\n\r\n"),
    }
    h.into_bytes()
}

pub(super) async fn write_full(
    sock: &mut TcpStream,
    code: u16,
    content_type: &str,
    extra: &[(&str, &str)],
    body: &[u8],
) -> bool {
    let h = head(code, content_type, extra, Some(body.len()));
    sock.write_all(&h).await.is_ok() && sock.write_all(body).await.is_ok()
}

pub(super) async fn chunk(sock: &mut TcpStream, data: &[u8]) -> bool {
    if data.is_empty() {
        return true;
    }
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    sock.write_all(&out).await.is_ok()
}

pub(super) async fn end_chunks(sock: &mut TcpStream) -> bool {
    sock.write_all(b"0\r\n\r\n").await.is_ok()
}
