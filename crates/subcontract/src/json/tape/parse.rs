//! The strict flat parser: text to one `Vec` of entries in document order.

use std::fmt;

use serde_json::Value;

const MAX_DEPTH: usize = 128;
/// Most members of one object the tape takes (see `Parser::object`).
const MAX_KEYS: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
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
pub(crate) struct Entry {
    pub kind: Kind,
    pub a: u32,
    pub b: u32,
}

/// A parsed document.
#[derive(Debug)]
pub(crate) struct Tape<'s> {
    pub(super) input: &'s str,
    pub(super) entries: Vec<Entry>,
    pub(super) side: String,
    /// No number literal that serde_json writes back otherwise (see `Parser::number`).
    pub(super) numbers_as_written: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError {
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
    numbers_as_written: bool,
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
        // To the first quote, backslash or control character, sixteen bytes a step.
        i = crate::json::scan::find_escape(bytes, i);
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
        // A re-rendered number may come out longer than written (`1e2` is written `100.0`).
        if !crate::json::literal_is_compact(&self.input[start..self.pos]) {
            self.numbers_as_written = false;
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
    pub(crate) fn parse(input: &'s str) -> Result<Tape<'s>, ParseError> {
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
            numbers_as_written: true,
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
            numbers_as_written: p.numbers_as_written,
        })
    }

    /// The text it was parsed from.
    pub(crate) fn input(&self) -> &'s str {
        self.input
    }

    /// Whether serde_json writes every number of the document back as it is written here.
    /// Then no part of the compact JSON is longer than the text it came from.
    pub(crate) fn numbers_as_written(&self) -> bool {
        self.numbers_as_written
    }

    /// Every entry, in document order.
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The string (decoded) of the string or key entry at `idx`.
    #[inline]
    pub(crate) fn str_at(&self, idx: usize) -> &str {
        let e = self.entries[idx];
        match e.kind {
            Kind::Str => &self.input[e.a as usize..e.b as usize],
            _ => &self.side[e.a as usize..e.b as usize],
        }
    }

    /// The literal of the number entry at `idx`, as written in the input.
    #[inline]
    pub(crate) fn number_at(&self, idx: usize) -> &str {
        let e = self.entries[idx];
        &self.input[e.a as usize..e.b as usize]
    }

    /// Index one past the subtree at `idx`.
    #[inline]
    pub(crate) fn end(&self, idx: usize) -> usize {
        let e = self.entries[idx];
        match e.kind {
            Kind::Array | Kind::Object => e.b as usize,
            _ => idx + 1,
        }
    }

    /// The subtree at `idx` as a `serde_json::Value` (cold paths).
    pub(crate) fn to_value(&self, idx: usize) -> Value {
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
