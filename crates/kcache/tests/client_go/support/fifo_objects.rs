//! The FIFO ports' test object, key function and known-objects lister (client-go's
//! `testFifoObject`, `mkFifoObj`, `testFifoObjectKeyFunc`, `literalListerGetter`), shared by
//! `real_fifo.rs` and `delta_fifo.rs` through `#[path]`.
#![allow(dead_code, reason = "each test target uses its own subset")]

use std::sync::Arc;

use kcache::store::{KeyFunc, KeyListerGetter, ObjectKey};

// ---------------------------------------------------------------------------------------------
// Test object, key function and known-objects lister (Go: testFifoObject, mkFifoObj,
// testFifoObjectKeyFunc, literalListerGetter).

/// What a Go `testFifoObject.val` holds in these tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Val {
    Int(i64),
    Uint(u64),
    /// Go's `*rvAndXfrm`: a resource version and how often the object was transformed.
    Xfrm {
        rv: i64,
        xfrm: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TestObj {
    pub(crate) name: String,
    pub(crate) val: Val,
}

pub(crate) fn mk(name: &str, val: i64) -> Arc<TestObj> {
    Arc::new(TestObj {
        name: name.to_owned(),
        val: Val::Int(val),
    })
}

pub(crate) fn mk_uint(name: &str, val: u64) -> Arc<TestObj> {
    Arc::new(TestObj {
        name: name.to_owned(),
        val: Val::Uint(val),
    })
}

/// The key is the name.
pub(crate) fn key_func() -> KeyFunc<TestObj> {
    Arc::new(|o: &TestObj| Ok(ObjectKey::new(None, &o.name)))
}

/// A consumer's store that always lists the same objects, in the given order.
pub(crate) struct Literal(pub(crate) Vec<Arc<TestObj>>);

impl KeyListerGetter<TestObj> for Literal {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0
            .iter()
            .map(|o| ObjectKey::new(None, &o.name))
            .collect()
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<TestObj>> {
        self.0.iter().find(|o| o.name == key).cloned()
    }
}
