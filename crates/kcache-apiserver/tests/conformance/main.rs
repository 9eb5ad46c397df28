//! Replays every request of every fixture recorded from kube-apiserver v1.36.2
//! (`testdata/kube-apiserver-v1.36/` at the repository root) against the embedded server and
//! compares normalised responses: status code, the headers that matter (Content-Type,
//! Retry-After, Warning, ETag, Transfer-Encoding of watches), Status reason / message /
//! details, objects (managedFields: managers, operations and, except for pods, field
//! sets), list metadata, watch event types, order and
//! bookmark shape. Placeholders (`<rv:N>`, `<uid:N>`, `<continue:N>`, `<etag:N>`) are bound
//! to our real values the first time they appear in a response and must stay consistent
//! afterwards; requests reuse the bound values.
//!
//! Deliberate differences are listed in `DIFFERENCES.md`; the steps they affect are
//! listed in [`KNOWN_DIFFERENCES`] and every other mismatch fails the test.
//!
//! Time is paused (`start_paused`), so the fixtures' 70 s watches and 3 s waits run
//! instantly and deterministically.

#[path = "../common/mod.rs"]
mod common;
mod compare;
mod step;

use std::collections::HashMap;
use std::path::PathBuf;

use http::Method;
use kcache_apiserver::{ApiServer, RunningServer};
use serde_json::{Map, Value, json};

const TOKEN: &str = "admin-token";
/// The recorder's User-Agent: kube-apiserver names the field manager after it.
const USER_AGENT: &str = "fixture-recorder/1.0 (python http.client)";

/// (file, step name prefix, why the embedded server answers differently).
const KNOWN_DIFFERENCES: &[(&str, &str, &str)] = &[
    (
        "crud-errors.json",
        "alice",
        "no RBAC: one bearer token, so alice's token is unknown (401, not 403)",
    ),
    (
        "crud-errors.json",
        "duplicate JSON field",
        "the fixture stores the parsed body, so the duplicated key cannot be replayed",
    ),
    (
        "watch-cache-disabled.json",
        "list resourceVersion=0&limit=3 without watch cache",
        "we always behave like the watch cache: RV=0 ignores limit",
    ),
    (
        "watch-cache-disabled.json",
        "watch from an old (not yet compacted) RV",
        "we send bookmarks like the watch cache",
    ),
    (
        "watch-cache-disabled.json",
        "watch from a compacted RV",
        "watch-cache wording of the 410 message",
    ),
    (
        "watch-cache-disabled.json",
        "same with allowWatchBookmarks=true",
        "watch-cache wording of the 410 message",
    ),
    (
        "watch-cache-disabled.json",
        "list resourceVersion=99999999",
        "watch-cache behaviour: the 504 carries Retry-After",
    ),
    (
        "watch-cache-disabled.json",
        "GET object resourceVersion=99999999",
        "watch-cache behaviour: the 504 carries Retry-After",
    ),
];

/// Steps before which the history is compacted (the recordings waited for etcd
/// compaction or for the watch cache window to pass).
const COMPACT_BEFORE: &[(&str, &str)] = &[
    (
        "expired-list-and-continue.json",
        "after compaction: list resourceVersion=<compacted RV>&resourceVersionMatch=Exact -> 410 Expired",
    ),
    (
        "watch-expired-rv.json",
        "watch from an RV older than the watch cache window",
    ),
    (
        "watch-cache-disabled.json",
        "watch from a compacted RV without watch cache -> 200",
    ),
];

fn fixture_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(common::fixtures_dir())
        .expect("fixtures directory exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

/// A request ready to send: method, path with query, headers, body.
type Built = (Method, String, Vec<(String, String)>, Option<Vec<u8>>);

struct Replay {
    file: String,
    server: RunningServer,
    bound: HashMap<String, String>,
    diffs: Vec<String>,
    step: String,
    /// Set while comparing a pod (whose managed field sets include defaulted fields).
    in_pod: bool,
}

fn is_placeholder_start(s: &str) -> Option<(String, usize)> {
    for prefix in ["<rv:", "<uid:", "<continue:", "<etag:"] {
        if let Some(rest) = s.strip_prefix(prefix) {
            let end = rest.find('>')?;
            let n = &rest[..end];
            if n.chars().all(|c| c.is_ascii_digit()) {
                let len = prefix.len() + end + 1;
                return Some((s[..len].to_owned(), len));
            }
        }
    }
    for fixed in ["<time>", "<age>", "<random>"] {
        if s.starts_with(fixed) {
            return Some((fixed.to_owned(), fixed.len()));
        }
    }
    None
}

impl Replay {
    fn diff(&mut self, what: String) {
        self.diffs
            .push(format!("{} / {}: {what}", self.file, self.step));
    }

    /// Replaces bound placeholders in a request string.
    fn subst(&mut self, s: &str) -> String {
        let mut out = String::new();
        let mut i = 0;
        while i < s.len() {
            if let Some((ph, len)) = is_placeholder_start(&s[i..]) {
                if ph == "<time>" {
                    out.push_str(&chrono_now_micro());
                    i += len;
                    continue;
                }
                match self.bound.get(&ph) {
                    Some(v) => out.push_str(v),
                    None if ph.starts_with("<rv:") => {
                        // An RV the recorder took from an unrecorded moment ("the current
                        // RV"): ours is the current one.
                        let v = self.server.handle().resource_version().to_string();
                        self.bound.insert(ph, v.clone());
                        out.push_str(&v);
                    }
                    None => {
                        self.diff(format!("request uses unbound placeholder {ph}"));
                        out.push_str(&ph);
                    }
                }
                i += len;
            } else {
                let c = s[i..].chars().next().unwrap();
                out.push(c);
                i += c.len_utf8();
            }
        }
        out
    }

    fn subst_value(&mut self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.subst(s)),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.subst_value(x)).collect()),
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, x)| (k.clone(), self.subst_value(x)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// Matches an expected string (with placeholders) against an actual one, binding
    /// placeholders. Returns false on mismatch.
    fn match_str(&mut self, expected: &str, actual: &str) -> bool {
        let mut pieces: Vec<(bool, String)> = Vec::new();
        let mut i = 0;
        let mut lit = String::new();
        while i < expected.len() {
            if let Some((ph, len)) = is_placeholder_start(&expected[i..]) {
                if !lit.is_empty() {
                    pieces.push((false, std::mem::take(&mut lit)));
                }
                pieces.push((true, ph));
                i += len;
            } else {
                let c = expected[i..].chars().next().unwrap();
                lit.push(c);
                i += c.len_utf8();
            }
        }
        if !lit.is_empty() {
            pieces.push((false, lit));
        }
        let mut pos = 0;
        let mut binds = Vec::new();
        for (idx, (is_ph, text)) in pieces.iter().enumerate() {
            if !is_ph {
                if !actual[pos..].starts_with(text.as_str()) {
                    return false;
                }
                pos += text.len();
                continue;
            }
            let end = match pieces.get(idx + 1) {
                Some((false, next)) => match actual[pos..].find(next.as_str()) {
                    Some(off) => pos + off,
                    None => return false,
                },
                _ => actual.len(),
            };
            let value = &actual[pos..end];
            if value.is_empty() {
                return false;
            }
            binds.push((text.clone(), value.to_owned()));
            pos = end;
        }
        if pos != actual.len() {
            return false;
        }
        for (ph, value) in binds {
            if matches!(ph.as_str(), "<time>" | "<age>" | "<random>") {
                continue;
            }
            match self.bound.get(&ph) {
                Some(prev) if *prev != value => {
                    self.diff(format!("placeholder {ph} was {prev} but is now {value}"));
                }
                Some(_) => {}
                None => {
                    self.bound.insert(ph, value);
                }
            }
        }
        true
    }
}

/// The recorded protobuf body of a response (verbatim, not normalised).
fn expected_protobuf(resp: &Value) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(resp["body_base64"].as_str().unwrap_or_default())
        .expect("body_base64 is base64")
}

/// Creates an object over HTTP as the recorder would have.
async fn create_as_recorder(r: &Replay, path: &str, obj: Value) -> Value {
    let auth = format!("Bearer {TOKEN}");
    let headers = [
        ("content-type", "application/json"),
        ("user-agent", USER_AGENT),
        ("authorization", auth.as_str()),
    ];
    let resp = common::request(
        r.server.addr(),
        Method::POST,
        path,
        &headers,
        Some(serde_json::to_vec(&obj).unwrap()),
    )
    .await
    .unwrap();
    assert_eq!(
        resp.status,
        201,
        "setup create {path}: {}",
        String::from_utf8_lossy(&resp.body)
    );
    resp.json()
}

/// Objects that existed before a recording started (created by unrecorded steps).
async fn setup(r: &mut Replay) {
    match r.file.as_str() {
        "watch-expired-rv.json" => {
            for i in 1..=5 {
                let o = create_as_recorder(
                    r,
                    "/api/v1/namespaces/fx-expired/configmaps",
                    json!({"metadata": {"name": format!("e-{i}")}, "data": {"i": i.to_string()}}),
                )
                .await;
                if i == 1 {
                    r.bound.insert(
                        "<rv:1>".into(),
                        o["metadata"]["resourceVersion"]
                            .as_str()
                            .unwrap()
                            .to_owned(),
                    );
                }
            }
        }
        "table.json" => {
            for i in 1..=3 {
                create_as_recorder(
                    r,
                    "/api/v1/namespaces/fx-table/configmaps",
                    json!({"metadata": {"name": format!("t-{i}")}, "data": {"a": "1", "b": "2"}}),
                )
                .await;
            }
        }
        "protobuf.json" => {
            r.bound.insert(
                "<rv:1>".into(),
                r.server.handle().resource_version().to_string(),
            );
        }
        _ => {}
    }
}

fn chrono_now_micro() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    // A fixed, valid MicroTime: the exact value does not matter to any comparison.
    let _ = d;
    "2026-01-01T00:00:00.000000Z".to_owned()
}

fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn namespaces_of(fixture: &Value) -> Vec<String> {
    let text = fixture.to_string();
    let mut out = Vec::new();
    for part in text.split("/namespaces/").skip(1) {
        let ns: String = part
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if !ns.is_empty() && ns != "fx-no-such-ns" && ns != "default" && !out.contains(&ns) {
            out.push(ns);
        }
    }
    out
}

async fn replay(path: &PathBuf) -> (usize, Vec<String>) {
    let file = path.file_name().unwrap().to_string_lossy().into_owned();
    let fixture: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let server = ApiServer::builder()
        .token(TOKEN)
        .build()
        .start()
        .await
        .expect("server starts");
    for ns in namespaces_of(&fixture) {
        server
            .handle()
            .create("/api/v1/namespaces", json!({"metadata": {"name": ns}}))
            .unwrap();
    }
    let mut r = Replay {
        file: file.clone(),
        server,
        bound: HashMap::new(),
        diffs: Vec::new(),
        step: String::new(),
        in_pod: false,
    };
    setup(&mut r).await;
    let steps = fixture["steps"].as_array().unwrap();
    for step in steps {
        r.run_step(step).await;
    }
    (steps.len(), r.diffs)
}

#[tokio::test(start_paused = true)]
async fn every_fixture_step_matches_kube_apiserver_or_is_a_documented_difference() {
    let files = fixture_files();
    assert_eq!(files.len(), 14, "all fixture files are replayed");
    let mut unexpected = Vec::new();
    let mut used = vec![false; KNOWN_DIFFERENCES.len()];
    let mut documented = 0;
    let mut total_steps = 0;
    for f in &files {
        let (steps, diffs) = replay(f).await;
        total_steps += steps;
        for d in diffs {
            let known = KNOWN_DIFFERENCES
                .iter()
                .position(|(file, step, _)| d.starts_with(&format!("{file} / {step}")));
            if let Some(i) = known {
                used[i] = true;
                documented += 1;
            } else {
                unexpected.push(d);
            }
        }
    }
    eprintln!(
        "replayed {total_steps} steps from {} files; {documented} documented differences",
        files.len()
    );
    assert!(
        unexpected.is_empty(),
        "{} unexpected differences:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
    let stale: Vec<_> = KNOWN_DIFFERENCES
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(k, _)| k)
        .collect();
    assert!(
        stale.is_empty(),
        "documented differences that no longer differ: {stale:?}"
    );
}
