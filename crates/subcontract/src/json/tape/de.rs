//! Typed decode straight from the tape: a serde `Deserializer` over a node, mirroring
//! serde_json's `&Value` deserializer hint by hint.

use std::fmt;

use jsonschema::json::{Node, Object};
use serde::de::Visitor;

use super::parse::{Entry, Kind, Tape};
use super::schema::{is_integer_literal, Elements, Members, TapeNode};

/// A decode error (the tape is already valid JSON, so only type mismatches remain).
#[derive(Debug)]
pub(crate) struct DeError(String);

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DeError {}

impl serde::de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError(msg.to_string())
    }
}

impl<'a> Tape<'a> {
    /// Decodes the whole document into `T`.
    pub(crate) fn decode<T: serde::Deserialize<'a>>(&'a self) -> Result<T, DeError> {
        T::deserialize(self.root())
    }
}

impl<'de> TapeNode<'de> {
    /// The literal of a number node.
    fn literal(&self) -> &'de str {
        let e = self.entry();
        &self.tape.input[e.a as usize..e.b as usize]
    }

    fn visit_number<V: serde::de::Visitor<'de>>(&self, visitor: V) -> Result<V::Value, DeError> {
        let s = self.literal();
        if is_integer_literal(s) {
            if s.starts_with('-') {
                // Not `-0`: serde_json reads it as the float -0.0 (so an integer type
                // rejects it, and an f64 gets the sign), which the fallback below does too.
                if let Some(n) = s.parse::<i64>().ok().filter(|&n| n != 0) {
                    return visitor.visit_i64(n);
                }
            } else if let Ok(n) = s.parse::<u64>() {
                return visitor.visit_u64(n);
            }
        }
        visitor.visit_f64(s.parse().map_err(serde::de::Error::custom)?)
    }
}

/// Number hints: a number as `Value` holds it, whatever width is asked for (see `number`).
macro_rules! number_hints {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
            self.number(visitor)
        }
    )*};
}

impl<'de> serde::Deserializer<'de> for TapeNode<'de> {
    type Error = DeError;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.entry().kind {
            Kind::Null => visitor.visit_unit(),
            Kind::False => visitor.visit_bool(false),
            Kind::True => visitor.visit_bool(true),
            Kind::Number => self.visit_number(visitor),
            Kind::Str | Kind::EscStr => {
                visitor.visit_borrowed_str(self.tape.str_at(self.idx as usize))
            }
            // A visitor may stop before the end (a tuple or a struct read from an array with
            // more elements than fields); serde_json then finds no closing bracket and fails
            // ("trailing characters"), so the leftovers are an error here too.
            Kind::Array => {
                let e = self.entry();
                let mut elements = Elements {
                    tape: self.tape,
                    i: self.idx as usize + 1,
                    end: e.b as usize,
                    left: e.a as usize,
                };
                let value = visitor.visit_seq(&mut elements)?;
                if elements.left != 0 {
                    return Err(serde::de::Error::invalid_length(
                        e.a as usize,
                        &"fewer elements in array",
                    ));
                }
                Ok(value)
            }
            Kind::Object => {
                let e = self.entry();
                let mut map = MapAccess {
                    members: Members {
                        tape: self.tape,
                        i: self.idx as usize + 1,
                        end: e.b as usize,
                    },
                    value: None,
                };
                let value = visitor.visit_map(&mut map)?;
                if map.members.i < map.members.end {
                    return Err(serde::de::Error::invalid_length(
                        e.a as usize,
                        &"fewer members in object",
                    ));
                }
                Ok(value)
            }
        }
    }

    fn deserialize_option<V: serde::de::Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        if self.is_null() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        use serde::de::IntoDeserializer;
        match self.entry().kind {
            Kind::Str | Kind::EscStr => {
                visitor.visit_enum(self.tape.str_at(self.idx as usize).into_deserializer())
            }
            Kind::Object if self.entry().a == 1 => visitor.visit_enum(EnumAccess(self)),
            _ => Err(serde::de::Error::custom(
                "expected a string or a one-member object for an enum",
            )),
        }
    }

    // Every typed hint accepts exactly what serde_json's deserializer for `&Value` accepts
    // (`serde_json::value::de`), so a decode from the tape succeeds exactly when the `Value`
    // path's would, with the same value. A number is read as `Value` holds it (u64, i64 or
    // f64, see `visit_number`), whatever width the hint asks for.

    number_hints! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.entry().kind {
            Kind::True | Kind::False => self.deserialize_any(visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.entry().kind {
            Kind::Str | Kind::EscStr => self.deserialize_any(visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }
    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.entry().kind {
            Kind::Str | Kind::EscStr | Kind::Array => self.deserialize_any(visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.entry().kind {
            Kind::Null => visitor.visit_unit(),
            _ => Err(self.invalid_type(&visitor)),
        }
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.entry().kind {
            Kind::Array => self.deserialize_any(visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }
    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.entry().kind {
            Kind::Object => self.deserialize_any(visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self.entry().kind {
            Kind::Object | Kind::Array => self.deserialize_any(visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }
}

impl<'de> TapeNode<'de> {
    /// A number as `Value` holds it; anything else is the wrong type.
    fn number<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.entry().kind {
            Kind::Number => self.visit_number(visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    /// The error for a node of the wrong type. Only its being an error matters: a failed
    /// decode is redone on the `Value` path, whose message the caller reports.
    fn invalid_type(&self, expected: &dyn serde::de::Expected) -> DeError {
        use serde::de::{Error, Unexpected};
        let unexpected = match self.entry().kind {
            Kind::Null => Unexpected::Unit,
            Kind::False => Unexpected::Bool(false),
            Kind::True => Unexpected::Bool(true),
            Kind::Number => Unexpected::Other("number"),
            Kind::Str | Kind::EscStr => Unexpected::Str(self.tape.str_at(self.idx as usize)),
            Kind::Array => Unexpected::Seq,
            Kind::Object => Unexpected::Map,
        };
        DeError::invalid_type(unexpected, expected)
    }
}

/// Runs serde_json's deserializer over `text`, which must be read to its end.
fn via_serde_json<'de, T>(
    text: &'de str,
    read: impl FnOnce(
        &mut serde_json::Deserializer<serde_json::de::StrRead<'de>>,
    ) -> serde_json::Result<T>,
) -> Result<T, DeError> {
    use serde::de::Error;
    let mut de = serde_json::Deserializer::from_str(text);
    let value = read(&mut de).map_err(DeError::custom)?;
    de.end().map_err(DeError::custom)?;
    Ok(value)
}

/// A member name, deserialized as serde_json's `&Value` deserializer reads a key: a string,
/// except that a map keyed by numbers or bools reads the (decoded) key as one number or bool
/// literal filling the whole key.
struct Key<'de> {
    name: &'de str,
}

macro_rules! numeric_key {
    ($($method:ident)*) => {$(
        fn $method<V: serde::de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
            // serde_json requires the literal to start right after the opening quote and end
            // right before the closing one.
            let starts = self.name.starts_with(|c: char| c == '-' || c.is_ascii_digit());
            if !starts || self.name.ends_with([' ', '\t', '\n', '\r']) {
                return Err(serde::de::Error::custom("expected a numeric key"));
            }
            via_serde_json(self.name, |de| de.$method(visitor))
        }
    )*};
}

impl<'de> serde::Deserializer<'de> for Key<'de> {
    type Error = DeError;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_borrowed_str(self.name)
    }

    numeric_key! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64
    }

    fn deserialize_bool<V: serde::de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.name {
            "true" => visitor.visit_bool(true),
            "false" => visitor.visit_bool(false),
            _ => Err(serde::de::Error::invalid_type(
                serde::de::Unexpected::Str(self.name),
                &visitor,
            )),
        }
    }

    fn deserialize_option<V: serde::de::Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        // Keys are never null.
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_enum(serde::de::value::BorrowedStrDeserializer::new(self.name))
    }

    serde::forward_to_deserialize_any! {
        char str string bytes byte_buf unit unit_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

impl<'de> serde::de::SeqAccess<'de> for Elements<'de> {
    type Error = DeError;

    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }

    fn next_element_seed<T: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        match self.next() {
            Some(node) => seed.deserialize(node).map(Some),
            None => Ok(None),
        }
    }
}

pub(super) struct MapAccess<'de> {
    members: Members<'de>,
    value: Option<TapeNode<'de>>,
}

impl<'de> serde::de::MapAccess<'de> for MapAccess<'de> {
    type Error = DeError;

    fn next_key_seed<K: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        match self.members.next() {
            Some((name, value)) => {
                self.value = Some(value);
                seed.deserialize(Key { name }).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, DeError> {
        match self.value.take() {
            Some(value) => seed.deserialize(value),
            None => Err(serde::de::Error::custom("value is missing")),
        }
    }
}

struct EnumAccess<'de>(TapeNode<'de>);

impl<'de> serde::de::EnumAccess<'de> for EnumAccess<'de> {
    type Error = DeError;
    type Variant = TapeNode<'de>;

    fn variant_seed<V: serde::de::DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, TapeNode<'de>), DeError> {
        let (key, value) = self
            .0
            .as_object()
            .expect("deserialize_enum checked: an object")
            .members()
            .next()
            .expect("deserialize_enum checked: one member");
        let variant = seed.deserialize(serde::de::value::BorrowedStrDeserializer::new(key))?;
        Ok((variant, value))
    }
}

impl<'de> serde::de::VariantAccess<'de> for TapeNode<'de> {
    type Error = DeError;

    fn unit_variant(self) -> Result<(), DeError> {
        serde::Deserialize::deserialize(self)
    }

    fn newtype_variant_seed<T: serde::de::DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, DeError> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: serde::de::Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self.entry() {
            // As serde_json does: an empty array is a unit.
            Entry {
                kind: Kind::Array,
                a: 0,
                ..
            } => visitor.visit_unit(),
            Entry {
                kind: Kind::Array, ..
            } => serde::Deserializer::deserialize_any(self, visitor),
            _ => Err(self.invalid_type(&"tuple variant")),
        }
    }

    fn struct_variant<V: serde::de::Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self.entry().kind {
            Kind::Object => serde::Deserializer::deserialize_any(self, visitor),
            _ => Err(self.invalid_type(&"struct variant")),
        }
    }
}
