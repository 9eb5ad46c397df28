//! Behaviour of the REST API: CRUD, lists, watches, errors. Each test starts its own
//! server on 127.0.0.1:0.

#[path = "../common/mod.rs"]
mod common;

use common::{Watch, delete, get, outline, patch, post, put};
use kcache_apiserver::{ApiServer, RunningServer};
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

async fn server() -> RunningServer {
    ApiServer::builder()
        .build()
        .start()
        .await
        .expect("server starts")
}

fn cm(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

mod reads;
mod robustness;
mod writes;
