//! The serializer's compound states: sequences (their buffer at the capacity pushing gives,
//! struct elements by stride), structs and tuples (inline fields), and maps (B-tree nodes).

use std::mem::{size_of, size_of_val};

use serde::ser::{self, Serialize};

use super::{Counter, Failed, Probe, address, btree_bytes, is_borrowed_str, learned};

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
    pub(super) counter: &'a mut Counter,
    /// Per element: the struct probe, or the non-struct inline size.
    pub(super) elements: Vec<Result<Probe, usize>>,
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
pub(in crate::memory) fn pushed_capacity(len: usize, size: usize) -> usize {
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
    pub(super) counter: &'a mut Counter,
    pub(super) probe: Option<Probe>,
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
    pub(super) counter: &'a mut Counter,
    pub(super) len: usize,
    pub(super) key: usize,
    pub(super) value: usize,
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
