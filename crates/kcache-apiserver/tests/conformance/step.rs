//! One recorded step: the request built from the fixture, sent, and its answer compared.

use super::*;

impl Replay {
    pub(super) fn auth_header(auth: &str) -> String {
        if auth.contains("invalid") {
            "Bearer not-the-token".to_owned()
        } else if auth.contains("alice") {
            "Bearer alice-token".to_owned()
        } else {
            format!("Bearer {TOKEN}")
        }
    }

    pub(super) fn build(&mut self, req: &Value) -> Built {
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

    pub(super) async fn run_step(&mut self, step: &Value) {
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
