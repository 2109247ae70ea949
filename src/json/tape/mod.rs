//! A flat "tape" JSON parser, for validating and decoding outputs without building a
//! `serde_json::Value`.
//!
//! A document parses into one `Vec` of fixed-size entries in document order. Containers record
//! their child count and the index one past their last descendant, so skipping a subtree is one
//! read. Strings without escapes borrow the input; escaped ones are decoded into one side buffer.
//! Parsing is strict like `serde_json`'s (trailing garbage, bad escapes, raw control characters,
//! bad or overflowing numbers, nesting past 127 levels are errors). Unlike `serde_json`, which
//! keeps the last of duplicate object keys, duplicate keys are an error here.
//!
//! The tape is only ever a fast path: a caller falls back to the `Value` path on any tape error
//! and on any rejection, so verdicts and messages are the `Value` path's (the tests check that
//! the two agree on every verdict and every decoded value).

use std::borrow::Cow;
use std::fmt;

use jsonschema::json::{Array, Json, JsonNumber, Node, NodeIdentity, Object};
use jsonschema::types::JsonType;
use serde::de::Visitor;
use serde_json::Value;

const MAX_DEPTH: usize = 128;
/// Most members of one object the tape takes (see `Parser::object`).
const MAX_KEYS: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Null,
    False,
    True,
    /// `a..b` spans the literal in the input.
    Number,
    /// `a..b` spans the contents in the input.
    Str,
    /// `a..b` spans the decoded contents in the side buffer.
    EscStr,
    /// `a` elements, `b` the index one past the last descendant.
    Array,
    /// `a` members (key entry, then value entries), `b` one past the last descendant.
    Object,
}

#[derive(Clone, Copy, Debug)]
pub struct Entry {
    pub kind: Kind,
    pub a: u32,
    pub b: u32,
}

/// A parsed document.
#[derive(Debug)]
pub struct Tape<'s> {
    input: &'s str,
    entries: Vec<Entry>,
    side: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub at: usize,
    pub what: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.at)
    }
}

impl std::error::Error for ParseError {}

struct Parser<'s> {
    input: &'s str,
    bytes: &'s [u8],
    pos: usize,
    depth: usize,
    entries: Vec<Entry>,
    side: String,
    keys: Vec<u32>,
}

#[inline]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

impl<'s> Parser<'s> {
    fn err<T>(&self, what: &'static str) -> Result<T, ParseError> {
        Err(ParseError { at: self.pos, what })
    }

    #[inline]
    fn skip_ws(&mut self) {
        while self.pos < self.bytes.len() && is_ws(self.bytes[self.pos]) {
            self.pos += 1;
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn literal(&mut self, word: &[u8], kind: Kind) -> Result<(), ParseError> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            self.entries.push(Entry { kind, a: 0, b: 0 });
            Ok(())
        } else {
            self.err("expected ident")
        }
    }

    fn value(&mut self) -> Result<(), ParseError> {
        self.skip_ws();
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => self.string(),
            Some(b't') => self.literal(b"true", Kind::True),
            Some(b'f') => self.literal(b"false", Kind::False),
            Some(b'n') => self.literal(b"null", Kind::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => self.err("expected value"),
            None => self.err("EOF while parsing a value"),
        }
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth >= MAX_DEPTH {
            return self.err("recursion limit exceeded");
        }
        Ok(())
    }

    fn array(&mut self) -> Result<(), ParseError> {
        self.enter()?;
        self.pos += 1;
        let at = self.entries.len();
        self.entries.push(Entry {
            kind: Kind::Array,
            a: 0,
            b: 0,
        });
        let mut count = 0u32;
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
        } else {
            loop {
                self.value()?;
                count += 1;
                self.skip_ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b']') => {
                        self.pos += 1;
                        break;
                    }
                    Some(_) => return self.err("expected `,` or `]`"),
                    None => return self.err("EOF while parsing a list"),
                }
            }
        }
        self.entries[at].a = count;
        self.entries[at].b = self.entries.len() as u32;
        self.depth -= 1;
        Ok(())
    }

    fn object(&mut self) -> Result<(), ParseError> {
        self.enter()?;
        self.pos += 1;
        let at = self.entries.len();
        self.entries.push(Entry {
            kind: Kind::Object,
            a: 0,
            b: 0,
        });
        let keys_start = self.keys.len();
        let mut count = 0u32;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                self.skip_ws();
                match self.peek() {
                    Some(b'"') => {}
                    Some(_) => return self.err("key must be a string"),
                    None => return self.err("EOF while parsing an object"),
                }
                let key = self.entries.len() as u32;
                self.string()?;
                // Duplicate keys: quadratic over this object's keys, fine for the small objects
                // of bounded outputs. A larger object is left to the `Value` path (linear), so
                // text crafted with thousands of keys cannot make this quadratic.
                if self.keys.len() - keys_start >= MAX_KEYS {
                    return self.err("too many members for the fast path");
                }
                let new = self.key_str(key);
                for &other in &self.keys[keys_start..] {
                    if self.key_str(other) == new {
                        return self.err("duplicate key");
                    }
                }
                self.keys.push(key);
                self.skip_ws();
                match self.peek() {
                    Some(b':') => self.pos += 1,
                    Some(_) => return self.err("expected `:`"),
                    None => return self.err("EOF while parsing an object"),
                }
                self.value()?;
                count += 1;
                self.skip_ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    Some(_) => return self.err("expected `,` or `}`"),
                    None => return self.err("EOF while parsing an object"),
                }
            }
        }
        self.keys.truncate(keys_start);
        self.entries[at].a = count;
        self.entries[at].b = self.entries.len() as u32;
        self.depth -= 1;
        Ok(())
    }

    fn key_str(&self, index: u32) -> &str {
        let e = self.entries[index as usize];
        match e.kind {
            Kind::Str => &self.input[e.a as usize..e.b as usize],
            _ => &self.side[e.a as usize..e.b as usize],
        }
    }

    fn string(&mut self) -> Result<(), ParseError> {
        self.pos += 1;
        let start = self.pos;
        let bytes = self.bytes;
        let mut i = self.pos;
        // Eight bytes at a time to the first quote, backslash or control character (the lowest
        // flagged byte is exact; flags above it may be false positives, so rescan bytewise).
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        while let Some(chunk) = bytes.get(i..i + 8) {
            let x = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
            let quote = x ^ (ONES * u64::from(b'"'));
            let slash = x ^ (ONES * u64::from(b'\\'));
            let found = (quote.wrapping_sub(ONES) & !quote)
                | (slash.wrapping_sub(ONES) & !slash)
                | (x.wrapping_sub(ONES * 0x20) & !x);
            let found = found & HIGH;
            if found != 0 {
                i += (found.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        while i < bytes.len() {
            let b = bytes[i];
            if b == b'"' {
                self.entries.push(Entry {
                    kind: Kind::Str,
                    a: start as u32,
                    b: i as u32,
                });
                self.pos = i + 1;
                return Ok(());
            }
            if b == b'\\' {
                self.pos = i;
                return self.escaped_string(start);
            }
            if b < 0x20 {
                self.pos = i;
                return self.err("control character while parsing a string");
            }
            i += 1;
        }
        self.pos = i;
        self.err("EOF while parsing a string")
    }

    fn hex4(&mut self) -> Result<u16, ParseError> {
        if self.pos + 4 > self.bytes.len() {
            self.pos = self.bytes.len();
            return self.err("EOF while parsing a string");
        }
        let mut n = 0u16;
        for _ in 0..4 {
            let d = match self.bytes[self.pos] {
                c @ b'0'..=b'9' => c - b'0',
                c @ b'a'..=b'f' => c - b'a' + 10,
                c @ b'A'..=b'F' => c - b'A' + 10,
                _ => return self.err("invalid escape"),
            };
            n = n * 16 + u16::from(d);
            self.pos += 1;
        }
        Ok(n)
    }

    /// `self.pos` at the first backslash; `start` the first content byte.
    fn escaped_string(&mut self, start: usize) -> Result<(), ParseError> {
        let side_start = self.side.len();
        let input = self.input;
        self.side.push_str(&input[start..self.pos]);
        let mut run = self.pos;
        loop {
            let Some(b) = self.peek() else {
                return self.err("EOF while parsing a string");
            };
            match b {
                b'"' => {
                    self.side.push_str(&input[run..self.pos]);
                    self.pos += 1;
                    break;
                }
                b'\\' => {
                    self.side.push_str(&input[run..self.pos]);
                    self.pos += 1;
                    let Some(e) = self.peek() else {
                        return self.err("EOF while parsing a string");
                    };
                    self.pos += 1;
                    match e {
                        b'"' => self.side.push('"'),
                        b'\\' => self.side.push('\\'),
                        b'/' => self.side.push('/'),
                        b'b' => self.side.push('\u{8}'),
                        b'f' => self.side.push('\u{c}'),
                        b'n' => self.side.push('\n'),
                        b'r' => self.side.push('\r'),
                        b't' => self.side.push('\t'),
                        b'u' => {
                            let n = self.hex4()?;
                            let c = match n {
                                0xDC00..=0xDFFF => {
                                    return self.err("lone leading surrogate in hex escape")
                                }
                                0xD800..=0xDBFF => {
                                    if self.bytes.get(self.pos) != Some(&b'\\')
                                        || self.bytes.get(self.pos + 1) != Some(&b'u')
                                    {
                                        return self.err("unexpected end of hex escape");
                                    }
                                    self.pos += 2;
                                    let low = self.hex4()?;
                                    if !(0xDC00..=0xDFFF).contains(&low) {
                                        return self.err("lone leading surrogate in hex escape");
                                    }
                                    let cp = 0x10000
                                        + ((u32::from(n) - 0xD800) << 10)
                                        + (u32::from(low) - 0xDC00);
                                    char::from_u32(cp).expect("valid surrogate pair")
                                }
                                _ => char::from_u32(u32::from(n)).expect("BMP scalar"),
                            };
                            self.side.push(c);
                        }
                        _ => {
                            self.pos -= 1;
                            return self.err("invalid escape");
                        }
                    }
                    run = self.pos;
                }
                c if c < 0x20 => return self.err("control character while parsing a string"),
                _ => self.pos += 1,
            }
        }
        self.entries.push(Entry {
            kind: Kind::EscStr,
            a: side_start as u32,
            b: self.side.len() as u32,
        });
        Ok(())
    }

    fn digits(&mut self) -> usize {
        let from = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - from
    }

    fn number(&mut self) -> Result<(), ParseError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if matches!(self.peek(), Some(b'0'..=b'9')) {
                    return self.err("invalid number");
                }
            }
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return self.err("invalid number"),
        }
        let int_digits = self.pos - start;
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            float = true;
            if self.digits() == 0 {
                return self.err("invalid number");
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            float = true;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return self.err("invalid number");
            }
        }
        // Accepted exactly when serde_json accepts it (a literal past `f64` is an error,
        // integers past 64 bits become f64), by serde_json's own number parser, which is also
        // what reads it back (`to_value`): so that read-back cannot fail. Integers of up to 19
        // digits always fit a u64 or an f64.
        if (float || int_digits > 19)
            && self.input[start..self.pos]
                .parse::<serde_json::Number>()
                .is_err()
        {
            return self.err("number out of range");
        }
        self.entries.push(Entry {
            kind: Kind::Number,
            a: start as u32,
            b: self.pos as u32,
        });
        Ok(())
    }
}

impl<'s> Tape<'s> {
    /// Parses `input`, strictly.
    pub fn parse(input: &'s str) -> Result<Tape<'s>, ParseError> {
        let mut p = Parser {
            input,
            bytes: input.as_bytes(),
            pos: 0,
            depth: 0,
            // About one entry per 36 bytes of typical output text, kept under 1 KB for a 2 KB
            // document (larger blocks make glibc consolidate its free lists); it grows if not.
            entries: Vec::with_capacity(input.len() / 32 + 4),
            side: String::new(),
            keys: Vec::new(),
        };
        if input.len() >= u32::MAX as usize {
            return p.err("document too large");
        }
        p.value()?;
        p.skip_ws();
        if p.pos != p.bytes.len() {
            return p.err("trailing characters");
        }
        Ok(Tape {
            input,
            entries: p.entries,
            side: p.side,
        })
    }

    /// The root node.
    pub fn root(&self) -> TapeNode<'_> {
        TapeNode { tape: self, idx: 0 }
    }

    /// The text it was parsed from.
    pub fn input(&self) -> &'s str {
        self.input
    }

    /// Every entry, in document order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The string (decoded) of the string or key entry at `idx`.
    #[inline]
    pub fn str_at(&self, idx: usize) -> &str {
        let e = self.entries[idx];
        match e.kind {
            Kind::Str => &self.input[e.a as usize..e.b as usize],
            _ => &self.side[e.a as usize..e.b as usize],
        }
    }

    /// The literal of the number entry at `idx`, as written in the input.
    #[inline]
    pub fn number_at(&self, idx: usize) -> &str {
        let e = self.entries[idx];
        &self.input[e.a as usize..e.b as usize]
    }

    /// Index one past the subtree at `idx`.
    #[inline]
    pub fn end(&self, idx: usize) -> usize {
        let e = self.entries[idx];
        match e.kind {
            Kind::Array | Kind::Object => e.b as usize,
            _ => idx + 1,
        }
    }

    /// The subtree at `idx` as a `serde_json::Value` (cold paths).
    pub fn to_value(&self, idx: usize) -> Value {
        let e = self.entries[idx];
        match e.kind {
            Kind::Null => Value::Null,
            Kind::False => Value::Bool(false),
            Kind::True => Value::Bool(true),
            Kind::Number => Value::Number(
                self.input[e.a as usize..e.b as usize]
                    .parse()
                    .expect("the parser accepted this literal by the same parse"),
            ),
            Kind::Str | Kind::EscStr => Value::String(self.str_at(idx).to_owned()),
            Kind::Array => {
                let mut out = Vec::with_capacity(e.a as usize);
                let mut i = idx + 1;
                while i < e.b as usize {
                    out.push(self.to_value(i));
                    i = self.end(i);
                }
                Value::Array(out)
            }
            Kind::Object => {
                let mut out = serde_json::Map::with_capacity(e.a as usize);
                let mut i = idx + 1;
                while i < e.b as usize {
                    let key = self.str_at(i).to_owned();
                    out.insert(key, self.to_value(i + 1));
                    i = self.end(i + 1);
                }
                Value::Object(out)
            }
        }
    }
}

/// The `jsonschema` representation marker.
pub struct TapeJson;

/// One node: the tape and an index into it.
#[derive(Clone, Copy)]
pub struct TapeNode<'a> {
    tape: &'a Tape<'a>,
    idx: u32,
}

impl<'a> TapeNode<'a> {
    #[inline]
    fn entry(&self) -> Entry {
        self.tape.entries[self.idx as usize]
    }
}

#[derive(Clone, Copy)]
pub struct TapeContainer<'a>(TapeNode<'a>);

pub struct TapeNumber<'a>(&'a str);

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

pub struct Members<'a> {
    tape: &'a Tape<'a>,
    i: usize,
    end: usize,
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

pub struct Elements<'a> {
    tape: &'a Tape<'a>,
    i: usize,
    end: usize,
    left: usize,
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

// ---------------------------------------------------------------------------------------
// Typed decode straight from the tape: a serde `Deserializer` over a node.
// ---------------------------------------------------------------------------------------

/// A decode error (the tape is already valid JSON, so only type mismatches remain).
#[derive(Debug)]
pub struct DeError(String);

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
    pub fn decode<T: serde::Deserialize<'a>>(&'a self) -> Result<T, DeError> {
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

pub struct MapAccess<'de> {
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

#[cfg(test)]
mod suites;
#[cfg(test)]
mod tests;
