//! The deep-size estimate: a `serde::Serializer` that writes nothing and sums heap bytes.

use std::{
    fmt,
    mem::{size_of, size_of_val},
};

use serde::ser::{self, Serialize};

mod compound;

#[cfg(test)]
pub(super) use compound::pushed_capacity;
use compound::{Inline, Map, Seq};

/// The estimated bytes `value` holds: its inline size plus [`heap_size`]. What is counted is
/// listed in the [module docs](super).
///
/// ```
/// use std::collections::BTreeMap;
/// use kcache::memory::estimate;
///
/// assert_eq!(estimate(&String::from("abc")), 24 + 3);
/// // A buffer of four 24-byte elements (two pushed: std's first allocation holds four), plus
/// // their heap.
/// assert_eq!(estimate(&vec![String::from("ab"), String::new()]), 24 + 4 * 24 + 2);
/// // One BTreeMap leaf: parent pointer, index, length and 11 slots of 24 + 24 bytes, rounded
/// // up to 8 (544), then the keys' and values' bytes.
/// let labels = BTreeMap::from([("app".to_owned(), "web".to_owned())]);
/// assert_eq!(estimate(&labels), 24 + 544 + 3 + 3);
/// ```
pub fn estimate<T: Serialize + ?Sized>(value: &T) -> usize {
    size_of_val(value) + heap_size(value)
}

/// The estimated heap bytes `value` owns, not counting its inline size.
pub fn heap_size<T: Serialize + ?Sized>(value: &T) -> usize {
    let mut counter = Counter {
        bytes: 0,
        probe: None,
        shape: None,
    };
    // A serializer error (a value whose `Serialize` fails) ends the walk: what was counted
    // until then is the estimate.
    let _ = value.serialize(&mut counter);
    counter.bytes
}

/// The running sum, and what the element being sized showed of itself.
struct Counter {
    bytes: usize,
    /// Set by a sequence before each element: the element's own struct (the first one
    /// serialized) records its fields' names and addresses here.
    probe: Option<Probe>,
    /// The inline size the element's first serializer call implies when it is not a struct.
    shape: Option<usize>,
}

/// A struct element's name and the `(field, address, size)` of its present fields.
#[derive(Default)]
struct Probe {
    armed: bool,
    name: &'static str,
    fields: Vec<(&'static str, usize, usize)>,
}

impl Counter {
    fn shape(&mut self, inline: usize) {
        if self.shape.is_none() {
            self.shape = Some(inline);
            // Not a struct element: a struct inside it must not take the probe.
            if self.probe.as_ref().is_some_and(|p| p.armed) {
                self.probe = None;
            }
        }
    }

    /// Serializes `value` and returns the inline size its first call implies (8 when it
    /// implies none, a struct's say).
    fn shaped<T: Serialize + ?Sized>(&mut self, value: &T) -> (usize, Result<(), Failed>) {
        let (probe, outer) = (self.probe.take(), self.shape.take());
        let result = value.serialize(&mut *self);
        let inline = self.shape.unwrap_or(size_of::<usize>());
        (self.probe, self.shape) = (probe, outer);
        (inline, result)
    }
}

fn address<T: ?Sized>(value: &T) -> usize {
    (value as *const T).cast::<()>() as usize
}

/// Inline sizes of struct elements by serde's struct name, for one-element sequences: the
/// k8s-openapi structs of [`super::seed`], then what sequences of two or more taught.
fn learned() -> &'static parking_lot::RwLock<std::collections::HashMap<&'static str, usize>> {
    static SIZES: std::sync::OnceLock<
        parking_lot::RwLock<std::collections::HashMap<&'static str, usize>>,
    > = std::sync::OnceLock::new();
    SIZES.get_or_init(|| parking_lot::RwLock::new(super::seed::k8s_openapi_sizes()))
}

/// A `Serialize` impl's own error; the counter never fails.
#[derive(Debug)]
pub(super) struct Failed(String);

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failed {}

impl ser::Error for Failed {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self(msg.to_string())
    }
}

/// Bytes of std's `BTreeMap` nodes for `len` entries whose key and value take `kv` bytes
/// inline: one leaf (parent pointer, parent index, length, 11 slots) up to 11 entries; beyond,
/// one leaf per 7 entries and internal nodes (a leaf plus 12 edges) above them.
pub(super) fn btree_bytes(len: usize, kv: usize) -> usize {
    const CAPACITY: usize = 11;
    if len == 0 {
        return 0;
    }
    let ptr = size_of::<usize>();
    let leaf = (ptr + 2 + 2 + CAPACITY * kv).next_multiple_of(ptr);
    let internal = leaf + (CAPACITY + 1) * ptr;
    if len <= CAPACITY {
        return leaf;
    }
    let leaves = len.div_ceil(7);
    let (mut level, mut internals) = (leaves, 0);
    while level > 1 {
        level = if level <= CAPACITY + 1 {
            1
        } else {
            level.div_ceil(7)
        };
        internals += level;
    }
    leaves * leaf + internals * internal
}

/// Whether `T` is a borrowed `str` (k8s-openapi serializes a top-level object's `apiVersion`
/// and `kind` from `&'static str` constants: nothing the object owns).
fn is_borrowed_str<T: ?Sized>() -> bool {
    std::any::type_name::<T>() == "str"
}

impl<'a> ser::Serializer for &'a mut Counter {
    type Ok = ();
    type Error = Failed;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Inline<'a>;
    type SerializeTupleStruct = Inline<'a>;
    type SerializeTupleVariant = Inline<'a>;
    type SerializeMap = Map<'a>;
    type SerializeStruct = Inline<'a>;
    type SerializeStructVariant = Inline<'a>;

    fn serialize_bool(self, _: bool) -> Result<(), Failed> {
        self.shape(1);
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Result<(), Failed> {
        self.shape(1);
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Result<(), Failed> {
        self.shape(2);
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Result<(), Failed> {
        self.shape(4);
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> Result<(), Failed> {
        self.shape(8);
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> Result<(), Failed> {
        self.shape(1);
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Result<(), Failed> {
        self.shape(2);
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Result<(), Failed> {
        self.shape(4);
        Ok(())
    }
    fn serialize_u64(self, _: u64) -> Result<(), Failed> {
        self.shape(8);
        Ok(())
    }
    fn serialize_f32(self, _: f32) -> Result<(), Failed> {
        self.shape(4);
        Ok(())
    }
    fn serialize_f64(self, _: f64) -> Result<(), Failed> {
        self.shape(8);
        Ok(())
    }
    fn serialize_char(self, _: char) -> Result<(), Failed> {
        self.shape(4);
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Failed> {
        self.shape(size_of::<String>());
        self.bytes += v.len();
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Failed> {
        self.shape(size_of::<Vec<u8>>());
        self.bytes += v.len();
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Failed> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Failed> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Failed> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Failed> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), Failed> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Failed> {
        match name {
            // An inline timestamp, formatted as a string only to be serialized.
            "Time" | "MicroTime" => Ok(()),
            _ => value.serialize(self),
        }
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<(), Failed> {
        value.serialize(self)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Seq<'a>, Failed> {
        self.shape(size_of::<Vec<u8>>());
        Ok(Seq {
            counter: self,
            elements: Vec::new(),
        })
    }
    fn serialize_tuple(self, _: usize) -> Result<Inline<'a>, Failed> {
        Ok(Inline {
            counter: self,
            probe: None,
        })
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Inline<'a>, Failed> {
        Ok(Inline {
            counter: self,
            probe: None,
        })
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Inline<'a>, Failed> {
        Ok(Inline {
            counter: self,
            probe: None,
        })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Map<'a>, Failed> {
        self.shape(size_of::<std::collections::BTreeMap<u8, u8>>());
        Ok(Map {
            counter: self,
            len: 0,
            key: 0,
            value: 0,
        })
    }
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Inline<'a>, Failed> {
        // The element's own struct takes the probe; the structs inside it do not see it.
        let probe = self.probe.take().filter(|p| p.armed).map(|mut p| {
            p.name = name;
            p
        });
        Ok(Inline {
            counter: self,
            probe,
        })
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Inline<'a>, Failed> {
        Ok(Inline {
            counter: self,
            probe: None,
        })
    }
}
