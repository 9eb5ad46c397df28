//! A scenario's script: requests against one server in a namespace of its own, each answer
//! written as one normalised transcript line.

use kcache_conformance::{Response, Target, describe, normalise};
use serde_json::{Value, json};

/// One scenario's run against one server.
pub(crate) struct Script<'a> {
    /// The server.
    pub(crate) t: &'a Target,
    /// The scenario's namespace.
    pub(crate) ns: String,
    /// The transcript.
    pub(crate) lines: Vec<String>,
}

impl<'a> Script<'a> {
    pub(crate) fn new(t: &'a Target, ns: String) -> Self {
        Self {
            t,
            ns,
            lines: Vec::new(),
        }
    }

    /// `/api/v1/namespaces/{ns}/{resource}`.
    pub(crate) fn core(&self, resource: &str) -> String {
        format!("/api/v1/namespaces/{}/{resource}", self.ns)
    }

    pub(crate) async fn create_namespace(&mut self) -> anyhow::Result<()> {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}});
        let r = self
            .t
            .send("POST", "/api/v1/namespaces", Some(body))
            .await?;
        anyhow::ensure!(
            r.status == 201,
            "creating namespace {}: {}",
            self.ns,
            r.status
        );
        Ok(())
    }

    /// Sends a JSON request (merge patch for PATCH) and writes `label: status reason/kind`.
    pub(crate) async fn req(
        &mut self,
        label: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Response> {
        let r = self.t.send(method, path, body).await?;
        self.answer(label, &r);
        Ok(r)
    }

    /// Sends a body of `content_type` and writes `label: status reason/kind`.
    pub(crate) async fn raw(
        &mut self,
        label: &str,
        method: &str,
        path: &str,
        content_type: &str,
        body: &str,
    ) -> anyhow::Result<Response> {
        let r = self
            .t
            .send_raw(
                method,
                path,
                Some(content_type),
                Some(body.as_bytes().to_vec()),
            )
            .await?;
        self.answer(label, &r);
        Ok(r)
    }

    fn answer(&mut self, label: &str, r: &Response) {
        let mut line = format!("{label}: {} {}", r.status, describe(&r.body));
        for w in &r.warnings {
            line.push_str(&format!(" [warning: {}]", normalise(w)));
        }
        self.lines.push(line);
    }

    /// Writes `label = value` of the JSON pointer `ptr` in `body` (`-` when absent).
    pub(crate) fn field(&mut self, label: &str, body: &Value, ptr: &str) {
        let v = body
            .pointer(ptr)
            .map_or_else(|| "-".to_owned(), Value::to_string);
        self.lines.push(format!("{label} = {v}"));
    }

    /// Writes `label: true|false`, whether `ptr` is present in `body`.
    pub(crate) fn present(&mut self, label: &str, body: &Value, ptr: &str) {
        let present = body.pointer(ptr).is_some_and(|v| !v.is_null());
        self.lines.push(format!("{label}: {present}"));
    }

    /// Writes a free line.
    pub(crate) fn note(&mut self, line: String) {
        self.lines.push(line);
    }
}

/// A ConfigMap named `name` with `data`.
pub(crate) fn config_map(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}
