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

mod common;

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

    fn compare(&mut self, exp: &Value, act: &Value, path: &str) {
        match (exp, act) {
            (Value::String(e), Value::String(a)) => {
                if !self.match_str(e, a) {
                    self.diff(format!("{path}: expected {e:?}, got {a:?}"));
                }
            }
            (Value::Object(e), Value::Object(a)) => {
                if e.get("spec").and_then(|s| s.get("containers")).is_some()
                    && e.contains_key("metadata")
                {
                    return self.compare_pod(e, a, path);
                }
                if e.get("kind").and_then(Value::as_str) == Some("Table") && e.contains_key("rows")
                {
                    return self.compare_table(e, a, path);
                }
                for (k, ev) in e {
                    if k == "managedFields" {
                        self.compare_managed_fields(ev, a.get(k), &format!("{path}.{k}"));
                        continue;
                    }
                    match a.get(k) {
                        Some(av) => self.compare(ev, av, &format!("{path}.{k}")),
                        None => self.diff(format!("{path}.{k}: missing (expected {ev})")),
                    }
                }
                for k in a.keys() {
                    if !e.contains_key(k) && k != "managedFields" {
                        self.diff(format!("{path}.{k}: unexpected field {}", a[k]));
                    }
                }
            }
            (Value::Array(e), Value::Array(a)) => {
                if e.len() != a.len() {
                    self.diff(format!(
                        "{path}: expected {} items, got {}",
                        e.len(),
                        a.len()
                    ));
                }
                for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                    self.compare(ev, av, &format!("{path}[{i}]"));
                }
            }
            (e, a) => {
                if e != a {
                    self.diff(format!("{path}: expected {e}, got {a}"));
                }
            }
        }
    }

    /// managedFields: the same managers and operations in the same order; the field sets
    /// too, except for pods (whose sets include server-defaulted fields).
    fn compare_managed_fields(&mut self, exp: &Value, act: Option<&Value>, path: &str) {
        let e = exp.as_array().cloned().unwrap_or_default();
        let a = act.and_then(Value::as_array).cloned().unwrap_or_default();
        let who = |v: &[Value]| {
            v.iter()
                .map(|x| format!("{}/{}", x["manager"], x["operation"]))
                .collect::<Vec<_>>()
        };
        if who(&e) != who(&a) {
            self.diff(format!("{path}: managers {:?} vs {:?}", who(&e), who(&a)));
            return;
        }
        for (i, (ev, av)) in e.iter().zip(&a).enumerate() {
            for k in ["apiVersion", "fieldsType", "time"] {
                self.compare(&ev[k], &av[k], &format!("{path}[{i}].{k}"));
            }
            if !self.in_pod {
                self.compare(
                    &ev["fieldsV1"],
                    &av["fieldsV1"],
                    &format!("{path}[{i}].fieldsV1"),
                );
            }
        }
    }

    /// Pods: the real server defaults dozens of spec/status fields; compare identity,
    /// metadata and phase.
    fn compare_pod(&mut self, e: &Map<String, Value>, a: &Map<String, Value>, path: &str) {
        self.in_pod = true;
        for k in ["kind", "apiVersion", "metadata"] {
            if let Some(ev) = e.get(k) {
                self.compare(ev, a.get(k).unwrap_or(&Value::Null), &format!("{path}.{k}"));
            }
        }
        if let Some(phase) = e.get("status").and_then(|s| s.get("phase")) {
            let got = a
                .get("status")
                .and_then(|s| s.get("phase"))
                .unwrap_or(&Value::Null);
            self.compare(phase, got, &format!("{path}.status.phase"));
        }
        self.in_pod = false;
    }

    /// Tables: rows in the fixture are trimmed and our columns are fewer; compare the
    /// shape, the metadata, the Name column and each row's object.
    fn compare_table(&mut self, e: &Map<String, Value>, a: &Map<String, Value>, path: &str) {
        // Pod tables (kubectl's pod columns): their row objects are pods.
        let pod_table = e["columnDefinitions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|d| d["name"] == "Restarts"));
        self.in_pod = pod_table;
        for k in ["kind", "apiVersion", "metadata"] {
            self.compare(
                &e[k],
                a.get(k).unwrap_or(&Value::Null),
                &format!("{path}.{k}"),
            );
        }
        let first_col = |m: &Map<String, Value>| {
            m.get("columnDefinitions")
                .and_then(|c| c.get(0))
                .and_then(|c| c.get("name"))
                .cloned()
        };
        if first_col(e) != first_col(a) {
            self.diff(format!("{path}: first column differs"));
        }
        let er = e["rows"].as_array().cloned().unwrap_or_default();
        let ar = a
            .get("rows")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if ar.len() < er.len() {
            self.diff(format!(
                "{path}.rows: expected at least {} rows, got {}",
                er.len(),
                ar.len()
            ));
        }
        for (i, (ev, av)) in er.iter().zip(&ar).enumerate() {
            self.compare(
                &ev["cells"][0],
                &av["cells"][0],
                &format!("{path}.rows[{i}].cells[0]"),
            );
            self.compare(
                &ev["object"],
                &av["object"],
                &format!("{path}.rows[{i}].object"),
            );
        }
        self.in_pod = false;
    }

    fn compare_discovery(&mut self, exp: &Value, act: &Value, path: &str) {
        let kind = exp.get("kind").and_then(Value::as_str).unwrap_or("");
        match kind {
            "" => {
                // /version
                for k in [
                    "major",
                    "minor",
                    "emulationMajor",
                    "emulationMinor",
                    "minCompatibilityMajor",
                    "minCompatibilityMinor",
                ] {
                    self.compare(&exp[k], &act[k], &format!("{path}.{k}"));
                }
                let ek: Vec<&String> = exp.as_object().unwrap().keys().collect();
                let ak: Vec<&String> = act
                    .as_object()
                    .map(|m| m.keys().collect())
                    .unwrap_or_default();
                let mut ek = ek;
                let mut ak = ak;
                ek.sort();
                ak.sort();
                if ek != ak {
                    self.diff(format!("{path}: /version keys differ: {ek:?} vs {ak:?}"));
                }
            }
            "APIVersions" => {
                self.compare(&exp["kind"], &act["kind"], path);
                self.compare(&exp["versions"], &act["versions"], path);
                if act.get("apiVersion").is_some() {
                    self.diff(format!("{path}: APIVersions must not carry apiVersion"));
                }
            }
            "APIResourceList" => {
                for k in ["kind", "groupVersion"] {
                    self.compare(&exp[k], &act[k], &format!("{path}.{k}"));
                }
                if exp.get("apiVersion") != act.get("apiVersion") {
                    self.diff(format!("{path}: apiVersion presence differs"));
                }
                let ours: HashMap<String, Value> = act["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| (r["name"].as_str().unwrap().to_owned(), r.clone()))
                    .collect();
                for r in exp["resources"].as_array().unwrap() {
                    let name = r["name"].as_str().unwrap();
                    if let Some(mine) = ours.get(name) {
                        self.compare(r, mine, &format!("{path}.resources[{name}]"));
                    } else if ours.contains_key(name.split('/').next().unwrap())
                        && !name.ends_with("/log")
                    {
                        self.diff(format!("{path}: resource {name} missing"));
                    }
                }
            }
            "APIGroupList" => {
                let ours: HashMap<String, Value> = act["groups"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|g| (g["name"].as_str().unwrap().to_owned(), g.clone()))
                    .collect();
                let theirs: Vec<String> = exp["groups"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|g| g["name"].as_str().unwrap().to_owned())
                    .collect();
                for g in exp["groups"].as_array().unwrap() {
                    if let Some(mine) = ours.get(g["name"].as_str().unwrap()) {
                        self.compare(g, mine, &format!("{path}.groups[{}]", g["name"]));
                    }
                }
                for g in ours.keys() {
                    if !theirs.contains(g) {
                        self.diff(format!("{path}: group {g} not served by kube-apiserver"));
                    }
                }
                self.compare(&exp["apiVersion"], &act["apiVersion"], path);
            }
            "APIGroupDiscoveryList" => {
                self.compare(&exp["apiVersion"], &act["apiVersion"], path);
                let ours = act["items"].as_array().unwrap();
                for item in exp["items"].as_array().unwrap() {
                    let name = item["metadata"].get("name").cloned();
                    let Some(mine) = ours
                        .iter()
                        .find(|i| i["metadata"].get("name").cloned() == name)
                    else {
                        if name.as_ref().is_some_and(|n| n == "coordination.k8s.io")
                            || name.is_none()
                        {
                            self.diff(format!("{path}: group {name:?} missing"));
                        }
                        continue;
                    };
                    self.compare(
                        &item["metadata"],
                        &mine["metadata"],
                        &format!("{path}.metadata"),
                    );
                    let mv = &mine["versions"][0];
                    let ev = &item["versions"][0];
                    self.compare(&ev["version"], &mv["version"], &format!("{path}.version"));
                    self.compare(
                        &ev["freshness"],
                        &mv["freshness"],
                        &format!("{path}.freshness"),
                    );
                    for r in ev["resources"].as_array().unwrap() {
                        let rname = r["resource"].as_str().unwrap();
                        let Some(m) = mv["resources"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .find(|x| x["resource"] == rname)
                        else {
                            continue;
                        };
                        let mut r = r.clone();
                        let mut m = m.clone();
                        // Subresources we do not serve (pods/log) are dropped from both.
                        if let Some(subs) = r.get_mut("subresources").and_then(Value::as_array_mut)
                        {
                            let served: Vec<Value> = m["subresources"]
                                .as_array()
                                .cloned()
                                .unwrap_or_default()
                                .iter()
                                .map(|s| s["subresource"].clone())
                                .collect();
                            subs.retain(|s| served.contains(&s["subresource"]));
                        }
                        if m.get("subresources").is_none() {
                            r.as_object_mut().unwrap().remove("subresources");
                        }
                        // The fixture is trimmed: subresources it does not list are not
                        // compared.
                        if let Some(subs) = m.get_mut("subresources").and_then(Value::as_array_mut)
                        {
                            let recorded: Vec<Value> = r["subresources"]
                                .as_array()
                                .cloned()
                                .unwrap_or_default()
                                .iter()
                                .map(|s| s["subresource"].clone())
                                .collect();
                            subs.retain(|s| recorded.contains(&s["subresource"]));
                        }
                        m.as_object_mut().unwrap().remove("categories");
                        r.as_object_mut().unwrap().remove("categories");
                        self.compare(&r, &m, &format!("{path}.{rname}"));
                    }
                }
            }
            _ => self.compare(exp, act, path),
        }
    }

    fn auth_header(auth: &str) -> String {
        if auth.contains("invalid") {
            "Bearer not-the-token".to_owned()
        } else if auth.contains("alice") {
            "Bearer alice-token".to_owned()
        } else {
            format!("Bearer {TOKEN}")
        }
    }

    fn build(&mut self, req: &Value) -> Built {
        let method = Method::from_bytes(req["method"].as_str().unwrap().as_bytes()).unwrap();
        let mut path = self.subst(req["path"].as_str().unwrap());
        let mut pairs = Vec::new();
        if let Some(q) = req["query"].as_object() {
            for (k, v) in q {
                let v = self.subst(v.as_str().unwrap_or(""));
                pairs.push(format!("{}={}", enc(k), enc(&v)));
            }
        }
        if !pairs.is_empty() {
            path = format!("{path}?{}", pairs.join("&"));
        }
        let mut headers = vec![
            ("user-agent".to_owned(), USER_AGENT.to_owned()),
            (
                "authorization".to_owned(),
                Self::auth_header(req["auth"].as_str().unwrap_or("")),
            ),
        ];
        if let Some(h) = req["headers"].as_object() {
            for (k, v) in h {
                headers.push((k.clone(), self.subst(v.as_str().unwrap_or(""))));
            }
        }
        let body = match &req["body"] {
            Value::Null => None,
            Value::String(s) => Some(self.subst(s).into_bytes()),
            v => Some(serde_json::to_vec(&self.subst_value(v)).unwrap()),
        };
        (method, path, headers, body)
    }

    fn compare_headers(&mut self, exp: &Value, actual: &http::HeaderMap, is_watch: bool) {
        let exp = exp.as_object().cloned().unwrap_or_default();
        for name in ["Content-Type", "Retry-After", "Warning", "ETag"] {
            let got = actual.get(name).and_then(|v| v.to_str().ok());
            match (exp.get(name).and_then(Value::as_str), got) {
                (Some(e), Some(g)) => {
                    if !self.match_str(e, g) {
                        self.diff(format!("header {name}: expected {e:?}, got {g:?}"));
                    }
                }
                (Some(e), None) => self.diff(format!("header {name} missing (expected {e:?})")),
                (None, Some(g)) => self.diff(format!("unexpected header {name}: {g:?}")),
                (None, None) => {}
            }
        }
        if is_watch {
            let chunked = actual
                .get("transfer-encoding")
                .is_some_and(|v| v == "chunked");
            if !chunked {
                self.diff("watch response is not chunked".into());
            }
        }
    }

    fn compare_events(&mut self, exp: &[Value], act: &[Value]) {
        let collapse = |evs: &[Value]| -> Vec<Value> {
            let mut out: Vec<Value> = Vec::new();
            for e in evs {
                if e["type"] == "BOOKMARK" && out.last().is_some_and(|l| l["type"] == "BOOKMARK") {
                    continue;
                }
                out.push(e.clone());
            }
            out
        };
        let (e, a) = (collapse(exp), collapse(act));
        let types = |v: &[Value]| {
            v.iter()
                .map(|x| x["type"].as_str().unwrap_or("?").to_owned())
                .collect::<Vec<_>>()
        };
        if types(&e) != types(&a) {
            self.diff(format!(
                "event types: expected {:?}, got {:?}",
                types(&e),
                types(&a)
            ));
            return;
        }
        for (i, (ev, av)) in e.iter().zip(&a).enumerate() {
            self.compare(ev, av, &format!("events[{i}]"));
        }
    }

    async fn run_step(&mut self, step: &Value) {
        self.step = step["name"].as_str().unwrap_or("?").to_owned();
        if COMPACT_BEFORE
            .iter()
            .any(|(f, s)| *f == self.file && self.step.starts_with(s))
        {
            // The recordings had a background writer; its writes moved the RV past the
            // compacted one. One write elsewhere does the same here.
            self.server
                .handle()
                .create(
                    "/api/v1/namespaces/default/configmaps",
                    json!({"metadata": {"generateName": "background-"}}),
                )
                .unwrap();
            self.server.faults().compact();
        }
        if self.file == "table.json" && self.step.starts_with("kubectl get pods") {
            // The recorder created its pod between the configmap and the pod steps.
            create_as_recorder(self, "/api/v1/namespaces/fx-table/pods", json!({"metadata": {"name": "tp-1"}, "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})).await;
        }
        let (method, path, headers, body) = self.build(&step["request"]);
        let header_refs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let resp = &step["response"];
        let expected_status = resp["status"].as_u64().unwrap() as u16;
        let protobuf_only = resp.get("body_base64").is_some();
        if resp.get("events").is_some() || step.get("concurrent_steps").is_some() {
            let mut w = common::Watch::open(self.server.addr(), &path, &header_refs)
                .await
                .expect("watch opens");
            if w.status != expected_status {
                self.diff(format!(
                    "status: expected {expected_status}, got {}",
                    w.status
                ));
            }
            let step_name = self.step.clone();
            for c in step["concurrent_steps"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                Box::pin(self.run_step(&c)).await;
            }
            self.step = step_name;
            if protobuf_only {
                let ours = w.collect_bytes().await;
                if w.status == expected_status {
                    self.compare_headers(&resp["headers"], &w.headers, expected_status == 200);
                    let theirs = common::pb::watch_outline(&expected_protobuf(resp));
                    let ours = common::pb::watch_outline(&ours);
                    if theirs != ours {
                        self.diff(format!(
                            "protobuf frames: expected {theirs:?}, got {ours:?}"
                        ));
                    }
                }
                return;
            }
            let events = if w.status == 200 {
                w.collect().await
            } else {
                Vec::new()
            };
            if w.status == expected_status {
                self.compare_headers(&resp["headers"], &w.headers, expected_status == 200);
                if let Some(exp) = resp["events"].as_array() {
                    self.compare_events(exp, &events);
                }
            }
            return;
        }
        let r = common::request(self.server.addr(), method, &path, &header_refs, body)
            .await
            .expect("request");
        if r.status != expected_status {
            self.diff(format!(
                "status: expected {expected_status}, got {} ({})",
                r.status,
                String::from_utf8_lossy(&r.body)
            ));
            return;
        }
        if protobuf_only {
            let stream = resp["headers"]["Content-Type"]
                .as_str()
                .is_some_and(|ct| ct.ends_with(";stream=watch"));
            self.compare_headers(&resp["headers"], &r.headers, stream);
            let (theirs, ours) = if stream {
                (
                    common::pb::watch_outline(&expected_protobuf(resp)),
                    common::pb::watch_outline(&r.body),
                )
            } else {
                (
                    vec![common::pb::outline(&expected_protobuf(resp))],
                    vec![common::pb::outline(&r.body)],
                )
            };
            if theirs != ours {
                self.diff(format!("protobuf body: expected {theirs:?}, got {ours:?}"));
            }
            return;
        }
        if resp.get("raw_http").is_some() && resp["body"].is_null() {
            // Raw wire steps: the bytes are Go's (chunk sizes, header order); status only.
            return;
        }
        self.compare_headers(&resp["headers"], &r.headers, false);
        if let Some(text) = resp.get("body_text").and_then(Value::as_str)
            && text != String::from_utf8_lossy(&r.body)
        {
            self.diff(format!(
                "body text: expected {text:?}, got {:?}",
                String::from_utf8_lossy(&r.body)
            ));
        }
        let expected_body = &resp["body"];
        if expected_body.is_null() {
            if !r.body.is_empty() && resp.get("body_text").is_none() {
                self.diff(format!("expected no body, got {} bytes", r.body.len()));
            }
            return;
        }
        let actual = r.json();
        if self.file == "discovery.json" {
            self.compare_discovery(expected_body, &actual, "body");
        } else {
            self.compare(expected_body, &actual, "body");
        }
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
