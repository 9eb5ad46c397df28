//! Comparing a response with the recorded one: bodies, managed fields, pods, tables,
//! discovery, headers and watch events.

use super::*;

impl Replay {
    pub(super) fn compare(&mut self, exp: &Value, act: &Value, path: &str) {
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
    pub(super) fn compare_managed_fields(&mut self, exp: &Value, act: Option<&Value>, path: &str) {
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
    pub(super) fn compare_pod(
        &mut self,
        e: &Map<String, Value>,
        a: &Map<String, Value>,
        path: &str,
    ) {
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
    pub(super) fn compare_table(
        &mut self,
        e: &Map<String, Value>,
        a: &Map<String, Value>,
        path: &str,
    ) {
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

    pub(super) fn compare_discovery(&mut self, exp: &Value, act: &Value, path: &str) {
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

    pub(super) fn compare_headers(
        &mut self,
        exp: &Value,
        actual: &http::HeaderMap,
        is_watch: bool,
    ) {
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

    pub(super) fn compare_events(&mut self, exp: &[Value], act: &[Value]) {
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
}
