//! The deep-size estimate: a `serde::Serializer` that writes nothing and sums heap bytes.

use std::{
    fmt,
    mem::{size_of, size_of_val},
};

use serde::ser::{self, Serialize};

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

/// A sequence: its elements are in its heap buffer.
///
/// Its buffer is counted at [`pushed_capacity`]. serde hands a sequence's elements over by
/// reference (`&&U`), so their inline size is not
/// `size_of_val` of what is given. For an element that is a struct it is the stride between
/// consecutive elements (the distance between the same field of two of them); a one-element
/// sequence takes the size learned for the struct's name from a longer one, else the span of
/// its present fields (a lower bound). Any other element takes the size its first serializer
/// call implies: 24 for a string, sequence or map, the width of a number.
pub(super) struct Seq<'a> {
    counter: &'a mut Counter,
    /// Per element: the struct probe, or the non-struct inline size.
    elements: Vec<Result<Probe, usize>>,
}

impl ser::SerializeSeq for Seq<'_> {
    type Ok = ();
    type Error = Failed;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Failed> {
        let (probe, shape) = (self.counter.probe.take(), self.counter.shape.take());
        self.counter.probe = Some(Probe {
            armed: true,
            ..Probe::default()
        });
        let result = value.serialize(&mut *self.counter);
        let element = match self.counter.probe.take() {
            Some(p) if !p.armed => Ok(p),
            _ => Err(self.counter.shape.unwrap_or(0)),
        };
        self.elements.push(element);
        (self.counter.probe, self.counter.shape) = (probe, shape);
        result
    }
    fn end(self) -> Result<(), Failed> {
        let Some(first) = self.elements.first() else {
            return Ok(());
        };
        let element = match first {
            Ok(p) => struct_stride(&self.elements).unwrap_or_else(|| learned_or_span(p)),
            Err(inline) => *inline,
        };
        self.counter.bytes += pushed_capacity(self.elements.len(), element) * element;
        Ok(())
    }
}

/// The capacity of a `Vec` of `len` elements of `size` bytes grown by pushing them one by one
/// (what serde's and kcache-proto's decoders do): the next power of two, from std's first
/// allocation of 8 elements of 1 byte, 4 of up to 1 KiB, 1 above.
pub(super) fn pushed_capacity(len: usize, size: usize) -> usize {
    let first = match size {
        1 => 8,
        2..=1024 => 4,
        _ => 1,
    };
    if len == 0 {
        0
    } else {
        len.next_power_of_two().max(first)
    }
}

/// The distance between the same field of two struct elements, divided by how far apart they
/// are; learned for the struct's name.
fn struct_stride(elements: &[Result<Probe, usize>]) -> Option<usize> {
    let probes: Vec<(usize, &Probe)> = elements
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.as_ref().ok().map(|p| (i, p)))
        .collect();
    let (first_i, first) = probes.first()?;
    for (i, p) in probes.iter().skip(1) {
        for (name, addr, _) in &p.fields {
            if let Some((_, a0, _)) = first.fields.iter().find(|(n, _, _)| n == name) {
                let stride = addr.checked_sub(*a0)? / (i - first_i);
                if !learned().read().contains_key(first.name) {
                    learned().write().insert(first.name, stride);
                }
                return Some(stride);
            }
        }
    }
    None
}

fn learned_or_span(p: &Probe) -> usize {
    if let Some(size) = learned().read().get(p.name) {
        return *size;
    }
    let start = p.fields.iter().map(|(_, a, _)| *a).min().unwrap_or(0);
    let end = p.fields.iter().map(|(_, a, n)| a + n).max().unwrap_or(0);
    (end - start).next_multiple_of(size_of::<usize>())
}

/// Structs, tuples and variants: their fields are inline in their parent. A sequence
/// element's own struct records its fields in the probe.
pub(super) struct Inline<'a> {
    counter: &'a mut Counter,
    probe: Option<Probe>,
}

impl Inline<'_> {
    fn field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Failed> {
        if is_borrowed_str::<T>() {
            return Ok(());
        }
        value.serialize(&mut *self.counter)
    }

    fn named<T: Serialize + ?Sized>(
        &mut self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Failed> {
        if let Some(p) = &mut self.probe {
            p.fields.push((name, address(value), size_of_val(value)));
        }
        self.field(value)
    }

    fn finish(self) -> Result<(), Failed> {
        if let Some(mut p) = self.probe {
            p.armed = false;
            self.counter.probe = Some(p);
        }
        Ok(())
    }
}

impl ser::SerializeTuple for Inline<'_> {
    type Ok = ();
    type Error = Failed;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Failed> {
        self.field(value)
    }
    fn end(self) -> Result<(), Failed> {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for Inline<'_> {
    type Ok = ();
    type Error = Failed;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Failed> {
        self.field(value)
    }
    fn end(self) -> Result<(), Failed> {
        Ok(())
    }
}

impl ser::SerializeTupleVariant for Inline<'_> {
    type Ok = ();
    type Error = Failed;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Failed> {
        self.field(value)
    }
    fn end(self) -> Result<(), Failed> {
        Ok(())
    }
}

impl ser::SerializeStruct for Inline<'_> {
    type Ok = ();
    type Error = Failed;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Failed> {
        self.named(name, value)
    }
    fn end(self) -> Result<(), Failed> {
        self.finish()
    }
}

impl ser::SerializeStructVariant for Inline<'_> {
    type Ok = ();
    type Error = Failed;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Failed> {
        self.named(name, value)
    }
    fn end(self) -> Result<(), Failed> {
        self.finish()
    }
}

/// A map, taken for a `BTreeMap`: its nodes are counted at the end, once its length and its
/// key and value sizes are known. serde hands entries over by reference, so a key's or value's
/// inline size is the one its first serializer call implies (24 for a string).
pub(super) struct Map<'a> {
    counter: &'a mut Counter,
    len: usize,
    key: usize,
    value: usize,
}

impl ser::SerializeMap for Map<'_> {
    type Ok = ();
    type Error = Failed;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Failed> {
        self.len += 1;
        let result;
        (self.key, result) = self.counter.shaped(key);
        result
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Failed> {
        let result;
        (self.value, result) = self.counter.shaped(value);
        result
    }
    fn end(self) -> Result<(), Failed> {
        self.counter.bytes += btree_bytes(self.len, self.key + self.value);
        Ok(())
    }
}
