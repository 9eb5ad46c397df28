//! A deserializer adapter that drops `metadata.managedFields` while parsing.
//!
//! k8s-openapi decodes `managedFields` into a tree of `serde_json::Value`s: about a third of a
//! Pod's bytes and of its decode time. When the informer's transform would drop the field anyway,
//! [`StripManagedFields`] skips it inside the parser (the bytes are scanned, nothing is
//! allocated) instead of decoding it and dropping it afterwards.
//!
//! Only two map levels are intercepted: the object's top-level map (to find `metadata`) and the
//! `metadata` map (to skip `managedFields`). Every other value is handed to the wrapped
//! deserializer untouched, so the adapter costs one key comparison per top-level and metadata
//! key.

use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, IgnoredAny, IntoDeserializer, MapAccess, Visitor,
};

/// The field this adapter removes.
const MANAGED_FIELDS: &str = "managedFields";

/// Which map the adapter is looking at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    /// The object's top-level map: watch for the `metadata` key.
    Root,
    /// The `metadata` map: skip `managedFields`.
    Meta,
}

/// Wraps a deserializer so that the object it yields has no `metadata.managedFields`.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use serde::Deserialize;
/// use kcache_client::decode::StripManagedFields;
///
/// let json = br#"{"metadata":{"name":"a","managedFields":[{"manager":"kubectl"}]},"data":{"k":"v"}}"#;
/// let mut de = serde_json::Deserializer::from_slice(json);
/// let cm = ConfigMap::deserialize(StripManagedFields::new(&mut de)).unwrap();
/// assert_eq!(cm.metadata.name.as_deref(), Some("a"));
/// assert!(cm.metadata.managed_fields.is_none());
/// ```
#[derive(Debug)]
pub struct StripManagedFields<D> {
    inner: D,
    level: Level,
}

impl<D> StripManagedFields<D> {
    /// Wraps the deserializer of one whole object.
    pub fn new(inner: D) -> Self {
        Self {
            inner,
            level: Level::Root,
        }
    }
}

/// Forwards `deserialize_*` methods that take only a visitor, wrapping the visitor.
macro_rules! forward_wrapped {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
                self.inner.$method(Wrap { inner: visitor, level: self.level })
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for StripManagedFields<D> {
    type Error = D::Error;

    forward_wrapped! {
        deserialize_any deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32
        deserialize_i64 deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32
        deserialize_u64 deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char
        deserialize_str deserialize_string deserialize_bytes deserialize_byte_buf
        deserialize_option deserialize_unit deserialize_seq deserialize_map
        deserialize_identifier deserialize_ignored_any
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let level = self.level;
        self.inner.deserialize_unit_struct(
            name,
            Wrap {
                inner: visitor,
                level,
            },
        )
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let level = self.level;
        self.inner.deserialize_newtype_struct(
            name,
            Wrap {
                inner: visitor,
                level,
            },
        )
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let level = self.level;
        self.inner.deserialize_tuple(
            len,
            Wrap {
                inner: visitor,
                level,
            },
        )
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let level = self.level;
        self.inner.deserialize_tuple_struct(
            name,
            len,
            Wrap {
                inner: visitor,
                level,
            },
        )
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let level = self.level;
        self.inner.deserialize_struct(
            name,
            fields,
            Wrap {
                inner: visitor,
                level,
            },
        )
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        // Enums are not maps: nothing to strip below them.
        self.inner.deserialize_enum(name, variants, visitor)
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// A visitor that wraps the maps it is given.
struct Wrap<V> {
    inner: V,
    level: Level,
}

/// Forwards scalar `visit_*` methods unchanged.
macro_rules! forward_visit {
    ($($method:ident($ty:ty))*) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
                self.inner.$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    forward_visit! {
        visit_bool(bool) visit_i8(i8) visit_i16(i16) visit_i32(i32) visit_i64(i64)
        visit_i128(i128) visit_u8(u8) visit_u16(u16) visit_u32(u32) visit_u64(u64)
        visit_u128(u128) visit_f32(f32) visit_f64(f64) visit_char(char) visit_str(&str)
        visit_borrowed_str(&'de str) visit_string(String) visit_bytes(&[u8])
        visit_borrowed_bytes(&'de [u8]) visit_byte_buf(Vec<u8>)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.inner.visit_some(StripManagedFields {
            inner: d,
            level: self.level,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.inner.visit_newtype_struct(StripManagedFields {
            inner: d,
            level: self.level,
        })
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.inner.visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.inner.visit_map(FilterMap {
            inner: map,
            level: self.level,
            value_is_metadata: false,
        })
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.inner.visit_enum(data)
    }
}

/// A map access that remembers the last key and drops `managedFields` in the metadata map.
struct FilterMap<A> {
    inner: A,
    level: Level,
    value_is_metadata: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for FilterMap<A> {
    type Error = A::Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Self::Error> {
        loop {
            let Some(key) = self.inner.next_key::<Key<'de>>()? else {
                return Ok(None);
            };
            match self.level {
                Level::Meta if key.as_str() == MANAGED_FIELDS => {
                    self.inner.next_value::<IgnoredAny>()?;
                    continue;
                }
                Level::Root => self.value_is_metadata = key.as_str() == "metadata",
                Level::Meta => {}
            }
            return match key {
                Key::Borrowed(s) => seed
                    .deserialize(de::value::BorrowedStrDeserializer::new(s))
                    .map(Some),
                Key::Owned(s) => seed.deserialize(s.into_deserializer()).map(Some),
            };
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<S::Value, Self::Error> {
        if self.level == Level::Root && self.value_is_metadata {
            self.value_is_metadata = false;
            self.inner.next_value_seed(MetaSeed(seed))
        } else {
            self.inner.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// Deserializes the `metadata` value through the adapter at [`Level::Meta`].
struct MetaSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for MetaSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(StripManagedFields {
            inner: d,
            level: Level::Meta,
        })
    }
}

/// A map key, borrowed from the input when it has no escapes.
pub(crate) enum Key<'de> {
    /// Borrowed from the input.
    Borrowed(&'de str),
    /// Unescaped into a new string.
    Owned(String),
}

impl Key<'_> {
    /// The key's text.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use kube_core::DynamicObject;
    use serde::Deserialize;

    use super::*;

    const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns",
        "labels":{"app":"web"},"managedFields":[{"manager":"kubectl","operation":"Update",
        "fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}}}}}],
        "resourceVersion":"7"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}"#;

    fn strip<'de, T: Deserialize<'de>>(json: &'de str) -> T {
        let mut de = serde_json::Deserializer::from_str(json);
        let v = T::deserialize(StripManagedFields::new(&mut de)).unwrap();
        de.end().unwrap();
        v
    }

    #[test]
    fn skips_managed_fields_in_typed_objects_and_keeps_everything_else() {
        let stripped: Pod = strip(POD);
        let full: Pod = serde_json::from_str(POD).unwrap();
        assert!(full.metadata.managed_fields.is_some());
        assert!(stripped.metadata.managed_fields.is_none());
        let mut expected = full;
        expected.metadata.managed_fields = None;
        assert_eq!(stripped, expected);
    }

    #[test]
    fn skips_managed_fields_in_dynamic_objects() {
        let stripped: DynamicObject = strip(POD);
        assert!(stripped.metadata.managed_fields.is_none());
        assert_eq!(stripped.metadata.labels.unwrap()["app"], "web");
        assert_eq!(stripped.data["spec"]["containers"][0]["image"], "nginx");
    }

    #[test]
    fn leaves_managed_fields_outside_metadata_alone() {
        // A field named managedFields anywhere but directly under metadata is data.
        let json = r#"{"metadata":{"name":"x"},"spec":{"managedFields":[1]}}"#;
        let obj: DynamicObject = strip(json);
        assert_eq!(obj.data["spec"]["managedFields"][0], 1);
    }

    #[test]
    fn escaped_keys_still_match() {
        let json = r#"{"meta\u0064ata":{"name":"x","managed\u0046ields":[{}]}}"#;
        let obj: DynamicObject = strip(json);
        assert_eq!(obj.metadata.name.as_deref(), Some("x"));
        assert!(obj.metadata.managed_fields.is_none());
    }
}
