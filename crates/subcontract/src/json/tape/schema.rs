//! The tape as `jsonschema` sees it: nodes, containers and numbers over the entries, so a
//! schema validates the tape without a `serde_json::Value`.

use std::borrow::Cow;

use jsonschema::json::{Array, Json, JsonNumber, Node, NodeIdentity, Object};
use jsonschema::types::JsonType;
use serde_json::Value;

use super::parse::{Entry, Kind, Tape};

/// The `jsonschema` representation marker.
pub(crate) struct TapeJson;

/// One node: the tape and an index into it.
#[derive(Clone, Copy)]
pub(crate) struct TapeNode<'a> {
    pub(super) tape: &'a Tape<'a>,
    pub(super) idx: u32,
}

impl<'s> Tape<'s> {
    /// The root node, as `jsonschema` and the decoder see it.
    pub(crate) fn root(&self) -> TapeNode<'_> {
        TapeNode { tape: self, idx: 0 }
    }
}

impl<'a> TapeNode<'a> {
    #[inline]
    pub(super) fn entry(&self) -> Entry {
        self.tape.entries[self.idx as usize]
    }
}

#[derive(Clone, Copy)]
pub(crate) struct TapeContainer<'a>(TapeNode<'a>);

pub(crate) struct TapeNumber<'a>(&'a str);

impl Json for TapeJson {
    type Node<'a> = TapeNode<'a>;
    type PreparedKey = Box<str>;
    type StringBuffer = ();

    const KEYS_PER_LOOKUP: usize = 4;
    const ACYCLIC: bool = true;

    fn prepare_key(key: &str) -> Box<str> {
        key.into()
    }

    fn with_string_node<T>((): &mut (), string: &str, f: impl FnOnce(TapeNode<'_>) -> T) -> T {
        // Cold (`propertyNames` only): a one-entry tape over the name.
        let tape = Tape {
            input: string,
            entries: vec![Entry {
                kind: Kind::Str,
                a: 0,
                b: string.len() as u32,
            }],
            side: String::new(),
            // Its input is the name without quotes, not JSON text, so the size bound the flag
            // stands for does not hold: say so, though this tape is only ever validated.
            numbers_as_written: false,
        };
        f(tape.root())
    }
}

pub(crate) fn is_integer_literal(s: &str) -> bool {
    !s.contains(['.', 'e', 'E'])
}

impl JsonNumber for TapeNumber<'_> {
    fn as_u64(&self) -> Option<u64> {
        if !is_integer_literal(self.0) {
            return None;
        }
        // `-0` included: serde_json reads it as the float -0.0, which is no u64.
        self.0.parse().ok()
    }

    fn as_i64(&self) -> Option<i64> {
        // serde_json reads `-0` as the float -0.0, not as an integer.
        if !is_integer_literal(self.0) || self.0 == "-0" {
            return None;
        }
        self.0.parse().ok()
    }

    fn as_f64(&self) -> Option<f64> {
        self.0.parse().ok()
    }

    fn as_str(&self) -> Cow<'_, str> {
        // jsonschema reads the digits only where an f64 cannot answer (`multipleOf` on a
        // magnitude past 2^53 or one that underflows to zero), and there the literal and the
        // value a `Value` holds differ: `1e-400` is not zero but reads as 0.0, and
        // `18446744073709551620` reads as the f64 18446744073709551616. The digits handed over
        // are therefore those the `Value` path sees, so both paths give one verdict; an integer
        // that fits 64 bits is written the same either way and is lent as it is.
        if self.as_i64().is_some() || self.as_u64().is_some() {
            Cow::Borrowed(self.0)
        } else {
            Cow::Owned(self.to_number().to_string())
        }
    }

    fn to_number(&self) -> Cow<'_, serde_json::Number> {
        Cow::Owned(
            self.0
                .parse()
                .expect("the parser accepted this literal by the same parse"),
        )
    }

    fn is_integer(&self) -> bool {
        if is_integer_literal(self.0) {
            return true;
        }
        self.0.parse::<f64>().is_ok_and(|f| f.fract() == 0.0)
    }
}

impl<'a> Node<'a, TapeJson> for TapeNode<'a> {
    type Object = TapeContainer<'a>;
    type Array = TapeContainer<'a>;
    type Number = TapeNumber<'a>;

    #[inline]
    fn as_object(&self) -> Option<TapeContainer<'a>> {
        (self.entry().kind == Kind::Object).then_some(TapeContainer(*self))
    }

    #[inline]
    fn as_array(&self) -> Option<TapeContainer<'a>> {
        (self.entry().kind == Kind::Array).then_some(TapeContainer(*self))
    }

    #[inline]
    fn as_string(&self) -> Option<Cow<'a, str>> {
        match self.entry().kind {
            Kind::Str | Kind::EscStr => Some(Cow::Borrowed(self.tape.str_at(self.idx as usize))),
            _ => None,
        }
    }

    fn as_number(&self) -> Option<TapeNumber<'a>> {
        let e = self.entry();
        (e.kind == Kind::Number).then(|| TapeNumber(&self.tape.input[e.a as usize..e.b as usize]))
    }

    fn as_boolean(&self) -> Option<bool> {
        match self.entry().kind {
            Kind::True => Some(true),
            Kind::False => Some(false),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        self.entry().kind == Kind::Null
    }

    fn is_number(&self) -> bool {
        self.entry().kind == Kind::Number
    }

    fn is_string(&self) -> bool {
        matches!(self.entry().kind, Kind::Str | Kind::EscStr)
    }

    #[inline]
    fn json_type(&self) -> JsonType {
        match self.entry().kind {
            Kind::Null => JsonType::Null,
            Kind::False | Kind::True => JsonType::Boolean,
            Kind::Number => JsonType::Number,
            Kind::Str | Kind::EscStr => JsonType::String,
            Kind::Array => JsonType::Array,
            Kind::Object => JsonType::Object,
        }
    }

    fn string_length(&self) -> Option<u64> {
        self.as_string().map(|s| s.chars().count() as u64)
    }

    fn string_length_within(&self, min: u64, max: u64) -> Option<bool> {
        let s = self.as_string()?;
        let bytes = s.len() as u64;
        let fewest = bytes.div_ceil(4);
        if bytes < min || fewest > max {
            return Some(false);
        }
        if min <= fewest && bytes <= max {
            return Some(true);
        }
        Some((min..=max).contains(&(s.chars().count() as u64)))
    }

    fn equals_value(&self, expected: &Value) -> bool {
        match (self.entry().kind, expected) {
            (Kind::Str | Kind::EscStr, Value::String(s)) => {
                self.tape.str_at(self.idx as usize) == s
            }
            (Kind::Str | Kind::EscStr, _) => false,
            (Kind::Null, e) => e.is_null(),
            (Kind::True, e) => e.as_bool() == Some(true),
            (Kind::False, e) => e.as_bool() == Some(false),
            _ => jsonschema::json::cmp::equal(&self.to_value(), expected),
        }
    }

    fn to_value(&self) -> Cow<'a, Value> {
        Cow::Owned(self.tape.to_value(self.idx as usize))
    }

    fn identity(&self) -> Option<NodeIdentity> {
        Some(NodeIdentity::tagged(
            std::ptr::from_ref::<Tape<'_>>(self.tape) as usize,
            self.idx,
        ))
    }
}

pub(crate) struct Members<'a> {
    pub(super) tape: &'a Tape<'a>,
    pub(super) i: usize,
    pub(super) end: usize,
}

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, TapeNode<'a>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.i >= self.end {
            return None;
        }
        let key = self.tape.str_at(self.i);
        let value = TapeNode {
            tape: self.tape,
            idx: (self.i + 1) as u32,
        };
        self.i = self.tape.end(self.i + 1);
        Some((key, value))
    }
}

pub(crate) struct Elements<'a> {
    pub(super) tape: &'a Tape<'a>,
    pub(super) i: usize,
    pub(super) end: usize,
    pub(super) left: usize,
}

impl<'a> Iterator for Elements<'a> {
    type Item = TapeNode<'a>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.i >= self.end {
            return None;
        }
        let node = TapeNode {
            tape: self.tape,
            idx: self.i as u32,
        };
        self.i = self.tape.end(self.i);
        self.left -= 1;
        Some(node)
    }
}

impl<'a> Object<'a, TapeJson> for TapeContainer<'a> {
    type Node = TapeNode<'a>;
    type MemberName = &'a str;
    type MembersIter = Members<'a>;

    fn len(&self) -> usize {
        self.0.entry().a as usize
    }

    fn get(&self, key: &Box<str>) -> Option<TapeNode<'a>> {
        self.members()
            .find(|(name, _)| *name == &**key)
            .map(|(_, value)| value)
    }

    fn members(&self) -> Members<'a> {
        let e = self.0.entry();
        Members {
            tape: self.0.tape,
            i: self.0.idx as usize + 1,
            end: e.b as usize,
        }
    }
}

impl<'a> Array<'a, TapeJson> for TapeContainer<'a> {
    type Node = TapeNode<'a>;
    type ElementsIter = Elements<'a>;

    fn len(&self) -> usize {
        self.0.entry().a as usize
    }

    fn elements(&self) -> Elements<'a> {
        let e = self.0.entry();
        Elements {
            tape: self.0.tape,
            i: self.0.idx as usize + 1,
            end: e.b as usize,
            left: e.a as usize,
        }
    }
}
