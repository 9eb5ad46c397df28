//! Object keys: the `namespace/name` identity every cache structure is keyed by.

use std::{borrow::Borrow, fmt, sync::Arc};

use kube_core::Resource;

/// The identity of an object in a cache: `namespace/name`, or `name` for cluster-scoped objects.
///
/// This is client-go's `MetaNamespaceKeyFunc` string, held in one shared allocation so that a
/// clone is a reference-count increment. The `ns/name` form is only its [`Display`](fmt::Display)
/// and [`as_str`](Self::as_str); use [`namespace`](Self::namespace) and [`name`](Self::name) to
/// take it apart.
///
/// ```
/// use kcache::store::ObjectKey;
/// let key = ObjectKey::new(Some("default"), "web-0");
/// assert_eq!(key.to_string(), "default/web-0");
/// assert_eq!(key.namespace(), Some("default"));
/// assert_eq!(key.name(), "web-0");
/// assert_eq!(ObjectKey::new(None, "node-1").namespace(), None);
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(Arc<str>);

impl ObjectKey {
    /// Builds a key from an optional namespace and a name. An empty namespace means
    /// cluster-scoped, as in client-go.
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        match namespace {
            Some(ns) if !ns.is_empty() => {
                // Join on the stack when short, so that the key costs one allocation (the Arc).
                const STACK: usize = 128;
                let len = ns.len() + 1 + name.len();
                if len <= STACK {
                    let mut buf = [0u8; STACK];
                    buf[..ns.len()].copy_from_slice(ns.as_bytes());
                    buf[ns.len()] = b'/';
                    buf[ns.len() + 1..len].copy_from_slice(name.as_bytes());
                    if let Ok(joined) = std::str::from_utf8(&buf[..len]) {
                        return Self(Arc::from(joined));
                    }
                }
                let mut s = String::with_capacity(len);
                s.push_str(ns);
                s.push('/');
                s.push_str(name);
                Self(Arc::from(s))
            }
            _ => Self(Arc::from(name)),
        }
    }

    /// Parses a key in client-go's string form (`ns/name` or `name`).
    ///
    /// # Errors
    /// [`KeyError::Malformed`] when the string has more than one `/` or an empty part.
    pub fn parse(key: &str) -> Result<Self, KeyError> {
        let mut parts = key.split('/');
        let ok = match (parts.next(), parts.next(), parts.next()) {
            (Some(name), None, None) => !name.is_empty(),
            (Some(ns), Some(name), None) => !ns.is_empty() && !name.is_empty(),
            _ => false,
        };
        if ok {
            Ok(Self(Arc::from(key)))
        } else {
            Err(KeyError::Malformed(key.to_owned()))
        }
    }

    /// The namespace, or `None` for a cluster-scoped object.
    pub fn namespace(&self) -> Option<&str> {
        self.0.split_once('/').map(|(ns, _)| ns)
    }

    /// The name.
    pub fn name(&self) -> &str {
        match self.0.split_once('/') {
            Some((_, name)) => name,
            None => &self.0,
        }
    }

    /// The key in client-go's string form.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectKey({:?})", &*self.0)
    }
}

impl Borrow<str> for ObjectKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ObjectKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Why a key could not be computed or parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The object has no `metadata.name` (client-go: "object has no meta").
    #[error("object has no name: cannot compute its key")]
    MissingName,
    /// A key string that is not `ns/name` or `name`.
    #[error("malformed object key {0:?}: expected \"namespace/name\" or \"name\"")]
    Malformed(String),
    /// A user key function failed.
    #[error("key function failed: {0}")]
    Custom(String),
}

/// Computes an object's key. Stores and queues take one so that they work for any `K`.
pub type KeyFunc<K> = Arc<dyn Fn(&K) -> Result<ObjectKey, KeyError> + Send + Sync>;

/// client-go's `MetaNamespaceKeyFunc`: `namespace/name`, or `name` when cluster-scoped.
///
/// # Errors
/// [`KeyError::MissingName`] when `metadata.name` is unset or empty.
pub fn meta_namespace_key<K: Resource>(obj: &K) -> Result<ObjectKey, KeyError> {
    let meta = obj.meta();
    match meta.name.as_deref() {
        Some(name) if !name.is_empty() => Ok(ObjectKey::new(meta.namespace.as_deref(), name)),
        _ => Err(KeyError::MissingName),
    }
}

/// [`meta_namespace_key`] as a [`KeyFunc`].
pub fn meta_namespace_key_func<K: Resource + 'static>() -> KeyFunc<K> {
    Arc::new(meta_namespace_key::<K>)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_round_trips_and_rejects_malformed_keys() {
        assert_eq!(
            ObjectKey::parse("a/b").unwrap(),
            ObjectKey::new(Some("a"), "b")
        );
        assert_eq!(ObjectKey::parse("b").unwrap(), ObjectKey::new(None, "b"));
        for bad in ["", "/b", "a/", "a/b/c"] {
            assert!(ObjectKey::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn long_and_short_keys_join_the_same_way() {
        let long_ns = "n".repeat(200);
        let key = ObjectKey::new(Some(&long_ns), "x");
        assert_eq!(key.as_str(), format!("{long_ns}/x"));
        assert_eq!(key.namespace(), Some(long_ns.as_str()));
        let key = ObjectKey::new(Some("ns-é"), "nàme");
        assert_eq!(key.as_str(), "ns-é/nàme");
        assert_eq!(key.name(), "nàme");
    }

    #[test]
    fn empty_namespace_is_cluster_scoped() {
        let key = ObjectKey::new(Some(""), "n");
        assert_eq!(key.as_str(), "n");
        assert_eq!(key.namespace(), None);
    }
}
