//! Compact JSON, measured and written fast: the run loop sizes every output against its
//! `max_output_chars` and writes every sub-agent result for its parent, so these run once per
//! sub-agent call on kilobytes of JSON. All agree exactly with `serde_json::to_string`.

pub(crate) mod pointer;
mod scan;
pub(crate) mod tape;

use serde_json::Value;

use tape::{Kind, Tape};

/// Length in characters of `v`'s compact JSON (as `serde_json::to_string` writes it), counted
/// by walking the value: no formatting, no allocation. It runs on every output a sub-agent
/// submits.
pub(crate) fn compact_chars(v: &Value) -> usize {
    compact_len(v, string_chars)
}

/// Length in bytes of `v`'s compact JSON, without building the string.
pub(crate) fn compact_bytes(v: &Value) -> usize {
    compact_len(v, string_bytes)
}

/// The one walk behind every size here: `string` measures a string literal, quotes included;
/// everything else is ASCII, so characters and bytes agree. Iterative and saturating, so a
/// value nested past any stack (a schema's `const`, built in code) is measured too.
fn compact_len(v: &Value, string: fn(&str) -> usize) -> usize {
    let mut total: usize = 0;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        let own = match v {
            Value::Null | Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Number(n) => number_len(n),
            Value::String(s) => string(s),
            Value::Array(a) => {
                stack.extend(a.iter());
                2 + a.len().saturating_sub(1)
            }
            Value::Object(o) => {
                let mut own = 2 + o.len().saturating_sub(1);
                for (k, x) in o {
                    own = own.saturating_add(string(k) + 1);
                    stack.push(x);
                }
                own
            }
        };
        total = total.saturating_add(own);
    }
    total
}

fn number_len(n: &serde_json::Number) -> usize {
    if let Some(u) = n.as_u64() {
        u.checked_ilog10().map_or(1, |d| d as usize + 1)
    } else if let Some(i) = n.as_i64() {
        // Negative (non-negative fits u64): the sign plus the digits of its magnitude.
        1 + i
            .unsigned_abs()
            .checked_ilog10()
            .map_or(1, |d| d as usize + 1)
    } else {
        // Floats are rare in outputs; let serde_json render them exactly as it would.
        n.to_string().len()
    }
}

/// Length in characters of the compact JSON of a parsed document: exactly what
/// [`compact_chars`] gives for the same document read as a `Value`. The tape lists every
/// value and key in one flat run, so this is one pass with no recursion.
pub(crate) fn tape_compact_chars(t: &Tape<'_>) -> usize {
    // An unescaped string holds no quote, backslash or control character (the parser stops
    // at the first), so it is written as is: its characters plus quotes; and in ASCII text
    // (std checks a word at a time) characters are bytes.
    let ascii = t.input().is_ascii();
    let mut n = 0;
    for (i, e) in t.entries().iter().enumerate() {
        n += match e.kind {
            Kind::Null | Kind::True => 4,
            Kind::False => 5,
            Kind::Number => literal_number_len(t.number_at(i)),
            Kind::Str if ascii => 2 + (e.b - e.a) as usize,
            Kind::Str => 2 + t.str_at(i).chars().count(),
            Kind::EscStr => string_chars(t.str_at(i)),
            Kind::Array => 2 + (e.a as usize).saturating_sub(1),
            // Braces, commas between members, and one colon per member (keys are entries).
            Kind::Object => 2 + (e.a as usize).saturating_sub(1) + e.a as usize,
        };
    }
    n
}

/// Whether the compact JSON of a parsed document is at most `max` characters, counted only
/// when the text's own length cannot answer. Compact JSON is never longer than the text it
/// was parsed from unless a number is re-rendered (`1e2` is written `100.0`): whitespace
/// goes, every unescaped string and literal stays, and serde_json's escapes are never longer
/// than the input's (`\u0022` becomes `\"`, `\u00e9` becomes `é`, and a character the
/// input wrote raw needs no escape). So a text of at most `max` bytes, which is at least its
/// characters, with every number as written, is within `max`, without a pass over the tape.
pub(crate) fn tape_compact_within(t: &Tape<'_>, max: usize) -> bool {
    (t.numbers_as_written() && t.input().len() <= max) || tape_compact_chars(t) <= max
}

/// Compact length of a number literal as serde_json would write it back.
fn literal_number_len(lit: &str) -> usize {
    if literal_is_compact(lit) {
        return lit.len();
    }
    match lit.parse::<serde_json::Number>() {
        Ok(n) => number_len(&n),
        // Unreachable for a tape (it holds only numbers serde_json accepts); the literal's
        // own length is the honest fallback.
        Err(_) => lit.len(),
    }
}

/// Whether serde_json writes the number literal back unchanged. JSON forbids leading zeros,
/// so an integer of up to 18 digits is already in its compact form, except `-0`, which
/// serde_json reads as the float -0.0 (written `-0.0`). Anything else (floats, huge integers)
/// is re-rendered. The parser asks it of every number ([`Tape::numbers_as_written`]).
pub(crate) fn literal_is_compact(lit: &str) -> bool {
    let digits = lit.len() - usize::from(lit.starts_with('-'));
    digits <= 18 && tape::is_integer_literal(lit) && lit != "-0"
}

/// The compact JSON of a parsed document: the text itself when it already is compact
/// (models and serde_json usually send it so), otherwise written from the tape.
pub(crate) fn tape_to_compact_string(t: &Tape<'_>) -> String {
    if tape_is_compact(t) {
        return t.input().to_owned();
    }
    let mut out = String::with_capacity(t.input().len());
    write_compact_tape(t, 0, &mut out);
    out
}

/// Whether the text a tape was parsed from is exactly its compact JSON. Every unescaped
/// string is written back as it appears, so is every literal and, when the tape has its
/// [`numbers_as_written`](Tape::numbers_as_written), every number; the text can then only
/// differ by whitespace, which makes it longer. So: no escaped string, no re-rendered
/// number, and the compact length in bytes is the text's length.
pub(crate) fn tape_is_compact(t: &Tape<'_>) -> bool {
    if !t.numbers_as_written() {
        return false;
    }
    let mut n = 0;
    for e in t.entries() {
        n += match e.kind {
            Kind::Null | Kind::True => 4,
            Kind::False => 5,
            Kind::Number => (e.b - e.a) as usize,
            Kind::EscStr => return false,
            Kind::Str => 2 + (e.b - e.a) as usize,
            Kind::Array => 2 + (e.a as usize).saturating_sub(1),
            Kind::Object => 2 + (e.a as usize).saturating_sub(1) + e.a as usize,
        };
    }
    n == t.input().len()
}

/// Appends the compact JSON of the tape's value at `idx`: the same text as
/// [`write_compact`] writes for the document read as a `Value`.
pub(crate) fn write_compact_tape(t: &Tape<'_>, idx: usize, out: &mut String) {
    let e = t.entries()[idx];
    match e.kind {
        Kind::Null => out.push_str("null"),
        Kind::True => out.push_str("true"),
        Kind::False => out.push_str("false"),
        Kind::Number => {
            let lit = t.number_at(idx);
            if literal_is_compact(lit) {
                out.push_str(lit);
            } else if let Ok(n) = lit.parse::<serde_json::Number>() {
                use std::fmt::Write;
                let _ = write!(out, "{n}");
            } else {
                out.push_str(lit);
            }
        }
        Kind::Str | Kind::EscStr => write_string(t.str_at(idx), out),
        Kind::Array => {
            out.push('[');
            let mut i = idx + 1;
            while i < e.b as usize {
                if i > idx + 1 {
                    out.push(',');
                }
                write_compact_tape(t, i, out);
                i = t.end(i);
            }
            out.push(']');
        }
        Kind::Object => {
            out.push('{');
            let mut i = idx + 1;
            while i < e.b as usize {
                if i > idx + 1 {
                    out.push(',');
                }
                write_string(t.str_at(i), out);
                out.push(':');
                write_compact_tape(t, i + 1, out);
                i = t.end(i + 1);
            }
            out.push('}');
        }
    }
}

/// Whether any byte of `b` is one JSON escapes (a control character, `"` or `\\`).
fn needs_escape(b: &[u8]) -> bool {
    scan::find_escape(b, 0) < b.len()
}

/// Characters of a JSON string literal: quotes, escapes as serde_json writes them. A string
/// with escapes is counted per byte through a table (UTF-8 continuation bytes count 0).
fn string_chars(s: &str) -> usize {
    // Common case first: nothing to escape, so the literal is the characters plus quotes
    // (std counts characters eight bytes at a time).
    if !needs_escape(s.as_bytes()) {
        return 2 + s.chars().count();
    }
    const TABLE: [u8; 256] = escaped_len_table(0);
    2 + s.bytes().map(|b| TABLE[b as usize] as usize).sum::<usize>()
}

/// Bytes of a JSON string literal, as serde_json writes it.
fn string_bytes(s: &str) -> usize {
    if !needs_escape(s.as_bytes()) {
        return 2 + s.len();
    }
    const TABLE: [u8; 256] = escaped_len_table(1);
    2 + s.bytes().map(|b| TABLE[b as usize] as usize).sum::<usize>()
}

/// What each byte of a string becomes in a JSON literal: escapes as serde_json writes them,
/// and `continuation` for a UTF-8 continuation byte (0 to count characters, 1 to count bytes).
const fn escaped_len_table(continuation: u8) -> [u8; 256] {
    let mut t = [1u8; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = 6; // \u00XX
        b += 1;
    }
    t[0x08] = 2; // \b
    t[0x09] = 2; // \t
    t[0x0a] = 2; // \n
    t[0x0c] = 2; // \f
    t[0x0d] = 2; // \r
    t[b'"' as usize] = 2;
    t[b'\\' as usize] = 2;
    let mut c = 0x80;
    while c < 0xC0 {
        t[c] = continuation;
        c += 1;
    }
    t
}

/// `v` as compact JSON, exactly as `serde_json::to_string` writes it, into a buffer sized
/// once. Strings with nothing to escape (nearly all of them) are copied whole instead of
/// byte by byte through serde_json's escaper.
pub(crate) fn to_compact_string(v: &Value) -> String {
    // A lower bound (escapes uncounted, nothing scanned): the buffer grows at most once.
    let mut out = String::with_capacity(compact_len(v, |s| s.len() + 2));
    write_compact(v, &mut out);
    out
}

/// Appends `v`'s compact JSON to `out`.
pub(crate) fn write_compact(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => {
            use std::fmt::Write;
            // serde_json's Display for Number is its compact form (itoa / ryu).
            let _ = write!(out, "{n}");
        }
        Value::String(s) => write_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_compact(x, out);
            }
            out.push(']');
        }
        Value::Object(o) => {
            out.push('{');
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_compact(x, out);
            }
            out.push('}');
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    if needs_escape(s.as_bytes()) {
        // Rare: let serde_json escape it, so the two never disagree.
        let escaped = serde_json::to_string(s).expect("a str always serialises");
        out.push_str(&escaped);
    } else {
        out.push('"');
        out.push_str(s);
        out.push('"');
    }
}

/// FNV-1a: a hash stable across builds and machines (std's hasher is not promised to be), for
/// ids and file ownership, never for anything an adversary could exploit by colliding.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: &Value) {
        let expected = serde_json::to_string(v).unwrap();
        assert_eq!(to_compact_string(v), expected);
        assert_eq!(compact_chars(v), expected.chars().count(), "{v}");
        assert_eq!(compact_bytes(v), expected.len(), "{v}");
    }

    #[test]
    fn compact_sizes_and_writer_match_serde_json() {
        let values = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(7),
            json!(10),
            json!(-1),
            json!(-10),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(1.5),
            json!(-0.1),
            json!(1e300),
            json!("a\"b\\c\nd\u{1}e\u{7f}é€😀\u{8}\u{c}\t\r/"),
            json!([]),
            json!({}),
            json!([1, "x", {"k": [null, {"é": "ü"}]}]),
        ];
        // Every special byte at every offset of strings longer than the 8-byte fast path.
        let specials = [
            '"', '\\', '\n', '\u{1}', '\u{1f}', ' ', '~', '\u{7f}', 'é', '€', '😀',
        ];
        for len in 0..20 {
            for at in 0..len {
                for &c in &specials {
                    let mut s: String = "abcdefghijklmnopqrst".chars().take(len).collect();
                    s.replace_range(at..at + 1, &c.to_string());
                    check(&json!(s));
                }
            }
        }
        for v in values {
            check(&v);
        }
    }
}
