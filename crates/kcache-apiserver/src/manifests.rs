//! Preloading a server from manifests: every `*.json`, `*.yaml` and `*.yml` file of a
//! directory (in name order; multi-document YAML and `List` objects allowed), with
//! CustomResourceDefinitions and Namespaces created first so that the objects that need them
//! find them. `kcache serve --manifests DIR` uses it; so can tests.
//!
//! ```
//! # async fn demo() -> anyhow::Result<()> {
//! let dir = tempfile_dir();
//! std::fs::write(dir.join("cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n")?;
//! let server = kcache_apiserver::ApiServer::builder().build().start().await?;
//! let loaded = kcache_apiserver::manifests::load_dir(server.handle(), &dir)?;
//! assert_eq!(loaded, 1);
//! assert!(server.handle().get("/api/v1/namespaces/default/configmaps/a").is_ok());
//! # server.shutdown().await;
//! # Ok(())
//! # }
//! # fn tempfile_dir() -> std::path::PathBuf {
//! #     let d = std::env::temp_dir().join(format!("kcache-manifests-doc-{}", std::process::id()));
//! #     std::fs::create_dir_all(&d).unwrap();
//! #     d
//! # }
//! # tokio::runtime::Runtime::new().unwrap().block_on(demo()).unwrap();
//! ```

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::ServerHandle;

/// Why manifests could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or the directory could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file is neither JSON nor YAML of objects.
    #[error("{path}: not a JSON or YAML manifest: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said (its first line).
        message: String,
    },
    /// The server refused an object.
    #[error("{path}: creating {kind} {name:?}: {source}")]
    Create {
        /// The file.
        path: PathBuf,
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// The server's answer.
        source: Box<crate::ApiError>,
    },
}

/// The objects of one manifest file: its documents, `List`s flattened.
fn objects(path: &Path, text: &str) -> Result<Vec<Value>, Error> {
    let docs: Vec<Value> = if let Ok(v) = serde_json::from_str::<Value>(text) {
        vec![v]
    } else {
        serde_saphyr::from_multiple::<Value>(text).map_err(|e| Error::Parse {
            path: path.to_owned(),
            message: e.to_string().lines().next().unwrap_or("").to_owned(),
        })?
    };
    let mut out = Vec::new();
    for doc in docs {
        match doc {
            Value::Null => {}
            Value::Object(ref m)
                if m.get("kind")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.ends_with("List"))
                    && m.get("items").is_some_and(Value::is_array) =>
            {
                out.extend(m["items"].as_array().into_iter().flatten().cloned());
            }
            v @ Value::Object(_) => out.push(v),
            _ => {
                return Err(Error::Parse {
                    path: path.to_owned(),
                    message: "a document is not an object".into(),
                });
            }
        }
    }
    Ok(out)
}

/// Creation order: CustomResourceDefinitions, then Namespaces, then the rest.
fn rank(obj: &Value) -> u8 {
    match obj.get("kind").and_then(Value::as_str) {
        Some("CustomResourceDefinition") => 0,
        Some("Namespace") => 1,
        _ => 2,
    }
}

/// Creates the objects of every manifest in `dir` (see the module docs); returns how many.
///
/// # Errors
/// An [`Error`] naming the file (and the object) that failed; objects created before it stay.
pub fn load_dir(handle: &ServerHandle, dir: &Path) -> Result<usize, Error> {
    let read_err = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Read { path, source }
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_err(dir))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e, "json" | "yaml" | "yml"))
        })
        .collect();
    files.sort();
    let mut all = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).map_err(read_err(&path))?;
        for obj in objects(&path, &text)? {
            all.push((path.clone(), obj));
        }
    }
    all.sort_by_key(|(_, o)| rank(o));
    let count = all.len();
    for (path, obj) in all {
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        handle.create_object(obj).map_err(|source| Error::Create {
            path,
            kind,
            name,
            source: Box::new(source),
        })?;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_documents_and_lists_are_split_into_objects() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata:\n    name: s\n";
        let objs = objects(Path::new("x.yaml"), text).unwrap();
        let kinds: Vec<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["ConfigMap", "Secret"]);
    }

    #[test]
    fn a_scalar_document_is_refused_with_the_file_name() {
        let e = objects(Path::new("bad.yaml"), "just a string\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("bad.yaml: not a JSON or YAML manifest"),
            "{e}"
        );
    }
}
