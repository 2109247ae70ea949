//! The tape is a fast path in front of serde_json's `Value` path, so everything it answers must
//! be what the `Value` path answers: the same documents accepted (except duplicate keys, which
//! the tape rejects on purpose so the caller falls back), the same values read back, the same
//! compact JSON, the same schema verdicts and the same typed decodes. These tests hold it to
//! that on hand-picked edge cases and on seeded random mutations of the peers' `Findings`
//! sample (the checks of the `exp-tape` experiment, sized for a unit test).

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use jsonschema::json::{JsonNumber, Node};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use schemars::JsonSchema;
use serde::de::{DeserializeOwned, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Value};

use super::parse::ParseError;
use super::{Kind, Tape, TapeJson};
use crate::json::{
    compact_chars, literal_is_compact, tape_compact_chars, tape_compact_within, tape_is_compact,
    tape_to_compact_string, write_compact_tape,
};

// ---------------------------------------------------------------------------------------
// Documents: parser verdict, read-back and compact JSON.
// ---------------------------------------------------------------------------------------

/// What serde_json makes of a document, as the tables below state it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Json {
    /// serde_json accepts it, and so must the tape.
    Ok,
    /// serde_json rejects it, and so must the tape.
    Bad,
    /// serde_json accepts it keeping the last of a repeated key; the tape must reject it.
    Dup,
}

/// A document parsed both ways, once, for every check below.
struct Doc<'s> {
    text: &'s str,
    tape: Result<Tape<'s>, ParseError>,
    value: serde_json::Result<Value>,
}

impl<'s> Doc<'s> {
    fn new(text: &'s str) -> Doc<'s> {
        Doc {
            text,
            tape: Tape::parse(text),
            value: serde_json::from_str(text),
        }
    }

    /// Checks the tape against serde_json and returns serde_json's verdict. When both accept,
    /// the tape must read back serde_json's value and write serde_json's compact JSON.
    fn check(&self) -> Json {
        let text = self.text;
        match (&self.tape, &self.value) {
            (Ok(tape), Ok(value)) => {
                assert_eq!(&tape.to_value(0), value, "read-back differs for {text:?}");
                // `Value`'s `Display` is `serde_json::to_string` (the same compact writer), but
                // compiled in serde_json: calling `to_string` would compile its generic
                // serializer here, unoptimised, and triple the fuzz test's time.
                // `check_subtrees` compares with `serde_json::to_string` itself.
                let expected = value.to_string();
                assert_eq!(
                    tape_compact_chars(tape),
                    compact_chars(value),
                    "compact size differs for {text:?}"
                );
                assert_eq!(compact_chars(value), expected.chars().count());
                // The parser's flag is the writer's rule, number by number, and with it the
                // compact JSON is never longer than the text: the bound behind
                // `tape_compact_within`, which must answer as the count does.
                let as_written = (0..tape.entries().len())
                    .filter(|&i| tape.entries()[i].kind == Kind::Number)
                    .all(|i| literal_is_compact(tape.number_at(i)));
                assert_eq!(tape.numbers_as_written(), as_written, "for {text:?}");
                let chars = compact_chars(value);
                assert!(!as_written || chars <= text.chars().count(), "for {text:?}");
                for max in [
                    chars.saturating_sub(1),
                    chars,
                    text.len().saturating_sub(1),
                    text.len(),
                ] {
                    assert_eq!(
                        tape_compact_within(tape, max),
                        chars <= max,
                        "within {max} for {text:?}"
                    );
                }
                let mut out = String::new();
                write_compact_tape(tape, 0, &mut out);
                assert_eq!(out, expected, "compact JSON differs for {text:?}");
                // The shortcut: a text found to be compact is handed on as it is.
                assert_eq!(tape_to_compact_string(tape), expected, "for {text:?}");
                // Sufficient, not necessary: floats are always re-rendered, even `-0.0`.
                assert!(!tape_is_compact(tape) || text == expected, "for {text:?}");
                Json::Ok
            }
            (Err(_), Err(_)) => Json::Bad,
            (Err(e), Ok(_)) if e.what == "duplicate key" => {
                assert!(
                    has_duplicate_keys(text),
                    "the tape claims a duplicate key serde_json did not see in {text:?}"
                );
                Json::Dup
            }
            (tape, serde) => panic!(
                "parsers disagree on {text:?}: tape {:?}, serde_json {:?}",
                tape.as_ref().map(|_| ()),
                serde.as_ref().map(|_| ())
            ),
        }
    }

    /// Compact JSON from every entry (keys included: each is a value `write_compact_tape` can
    /// start from) is serde_json's for that subtree. Every level rewrites what it contains, so
    /// the tables run it and the random mutations (thousands of 2 KB documents) do not.
    fn check_subtrees(&self) {
        let Ok(tape) = &self.tape else { return };
        for idx in 0..tape.entries().len() {
            let mut out = String::new();
            write_compact_tape(tape, idx, &mut out);
            let sub = serde_json::to_string(&tape.to_value(idx)).expect("a Value serialises");
            assert_eq!(
                out, sub,
                "compact JSON of entry {idx} differs for {:?}",
                self.text
            );
        }
    }
}

/// [`Doc::check`] and [`Doc::check_subtrees`] on `text`.
fn check_document(text: &str) -> Json {
    let doc = Doc::new(text);
    let verdict = doc.check();
    doc.check_subtrees();
    verdict
}

/// Runs a table of documents with serde_json's verdict on each.
fn check_table(cases: &[(&str, Json)]) {
    for &(text, want) in cases {
        assert_eq!(
            check_document(text),
            want,
            "serde_json's verdict on {text:?}"
        );
    }
}

/// Whether `text` (which serde_json accepts) repeats a key within one object. serde_json
/// silently keeps the last, so this walks the document with a visitor that looks; it keeps
/// the tape from calling anything it dislikes a duplicate key.
fn has_duplicate_keys(text: &str) -> bool {
    struct Dups(bool);
    struct DupsVisitor;
    impl<'de> Deserialize<'de> for Dups {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(DupsVisitor)
        }
    }
    impl<'de> Visitor<'de> for DupsVisitor {
        type Value = Dups;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<Dups, E> {
            Ok(Dups(false))
        }
        fn visit_i64<E>(self, _: i64) -> Result<Dups, E> {
            Ok(Dups(false))
        }
        fn visit_u64<E>(self, _: u64) -> Result<Dups, E> {
            Ok(Dups(false))
        }
        fn visit_f64<E>(self, _: f64) -> Result<Dups, E> {
            Ok(Dups(false))
        }
        fn visit_str<E>(self, _: &str) -> Result<Dups, E> {
            Ok(Dups(false))
        }
        fn visit_unit<E>(self) -> Result<Dups, E> {
            Ok(Dups(false))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Dups, A::Error> {
            let mut dup = false;
            while let Some(Dups(d)) = seq.next_element()? {
                dup |= d;
            }
            Ok(Dups(dup))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Dups, A::Error> {
            let (mut seen, mut dup) = (HashSet::new(), false);
            while let Some((key, Dups(d))) = map.next_entry::<String, Dups>()? {
                dup |= d | !seen.insert(key);
            }
            Ok(Dups(dup))
        }
    }
    serde_json::from_str::<Dups>(text)
        .expect("serde_json accepted it")
        .0
}

/// `depth` nested containers: `open`, then `inner`, then the matching `close`s.
fn nested(open: &str, inner: &str, close: &str, depth: usize) -> String {
    format!("{}{inner}{}", open.repeat(depth), close.repeat(depth))
}

#[test]
fn the_experiments_edge_cases_agree_with_serde_json() {
    use Json::{Bad, Dup, Ok};
    check_table(&[
        ("null", Ok),
        ("true", Ok),
        ("false", Ok),
        ("0", Ok),
        ("-0", Ok),
        ("1", Ok),
        ("-1", Ok),
        ("01", Bad),
        ("-", Bad),
        ("1.", Bad),
        (".5", Bad),
        ("1.5", Ok),
        ("1e5", Ok),
        ("1E+5", Ok),
        ("1e-5", Ok),
        ("1e", Bad),
        ("1e400", Bad),
        ("-1e400", Bad),
        ("1e-400", Ok),
        ("18446744073709551615", Ok),
        ("18446744073709551616", Ok),
        ("-9223372036854775808", Ok),
        ("-9223372036854775809", Ok),
        ("123456789012345678901234567890", Ok),
        ("1.0", Ok),
        ("[1,]", Bad),
        ("[,1]", Bad),
        ("[1 2]", Bad),
        ("{\"a\":1,}", Bad),
        ("{\"a\" 1}", Bad),
        ("{1:1}", Bad),
        ("{\"a\":1", Bad),
        ("\"abc", Bad),
        ("\"a\\qb\"", Bad),
        ("\"a\\u00e9b\"", Ok),
        ("\"\\ud83e\\udd80\"", Ok),
        ("\"\\ud83e\"", Bad),
        ("\"\\udd80\"", Bad),
        ("\"\\ud83e\\u0041\"", Bad),
        ("\"\\u00G0\"", Bad),
        ("\"\\u12\"", Bad),
        ("\"a\tb\"", Bad),
        ("\"a\u{7f}b\"", Ok),
        ("\"\\/\\b\\f\\n\\r\\t\\\"\\\\\"", Ok),
        (" \t\n\r[ 1 , {\"k\" : [ ] } ] \n", Ok),
        ("[1]\u{a0}", Bad),
        ("{\"a\":1,\"a\":2}", Dup),
        ("{\"a\":1,\"\\u0061\":2}", Dup),
        ("nul", Bad),
        ("truex", Bad),
        ("[true false]", Bad),
        ("\u{feff}1", Bad),
        ("{}", Ok),
        ("[]", Ok),
        ("\"\"", Ok),
        ("{\"\":0}", Ok),
        (&nested("[", "", "]", 127), Ok),
        (&nested("[", "", "]", 128), Bad),
    ]);
}

#[test]
fn structure_and_whitespace_agree_with_serde_json() {
    use Json::{Bad, Dup, Ok};
    check_table(&[
        // JSON's four whitespace characters anywhere between tokens; nothing else counts.
        (
            " \t\n\r{ \t\n\r\"a\" \t\n\r: \t\n\r[ \t\n\r1 \t\n\r, \t\n\rnull \t\n\r] \t\n\r, \"b\":{ } } \t\n\r",
            Ok,
        ),
        ("\u{b}1", Bad),
        ("\u{c}1", Bad),
        ("1\u{0}", Bad),
        ("[1,\u{2028}2]", Bad),
        ("", Bad),
        (" \n", Bad),
        ("1 2", Bad),
        ("{}{}", Bad),
        ("[]]", Bad),
        ("{}}", Bad),
        ("[", Bad),
        ("{", Bad),
        ("]", Bad),
        ("}", Bad),
        ("{,}", Bad),
        ("{\"a\"}", Bad),
        ("{\"a\":}", Bad),
        ("{\"a\":1 \"b\":2}", Bad),
        ("{\"a\":1;}", Bad),
        ("[1:2]", Bad),
        ("[\"a\" \"b\"]", Bad),
        ("{'a':1}", Bad),
        ("[1,2", Bad),
        ("[1,2,", Bad),
        ("{\"a\":1,", Bad),
        ("{\"a\"", Bad),
        // Empty containers, alone and nested, with and without inner whitespace.
        ("[ ]", Ok),
        ("{ }", Ok),
        ("[[],{},[{}],{\"a\":[]}]", Ok),
        ("{\"a\":{},\"b\":[],\"c\":[[]],\"d\":{\"e\":{}}}", Ok),
        // Literals: exact, lowercase, complete.
        ("True", Bad),
        ("tru", Bad),
        ("nulll", Bad),
        ("falsy", Bad),
        ("[null,true,false]", Ok),
        // Duplicate keys are per object: the same key in sibling or nested objects is fine.
        ("[{\"a\":1},{\"a\":2}]", Ok),
        ("{\"a\":{\"a\":1}}", Ok),
        ("{\"a\":{\"b\":1,\"b\":2}}", Dup),
        ("[{\"x\":1,\"y\":2,\"x\":3}]", Dup),
        ("{\"é\":1,\"\\u00e9\":2}", Dup),
        // A duplicate before a syntax error: the tape stops at the first, serde_json at the second.
        ("{\"a\":1,\"a\" :2,}", Bad),
    ]);
}

#[test]
fn nesting_limit_is_serde_jsons() {
    // serde_json allows 127 levels of arrays or objects and rejects the 128th; so must the
    // tape, whatever the containers and whatever sits innermost.
    let object = |depth| nested("{\"k\":", "1", "}", depth);
    let mixed = |depth: usize| {
        let open: String = (0..depth)
            .map(|i| if i % 2 == 0 { "[" } else { "{\"k\":" })
            .collect();
        let close: String = (0..depth)
            .rev()
            .map(|i| if i % 2 == 0 { "]" } else { "}" })
            .collect();
        format!("{open}0{close}")
    };
    for (depth, want) in [
        (2, Json::Ok),
        (126, Json::Ok),
        (127, Json::Ok),
        (128, Json::Bad),
    ] {
        check_table(&[
            (&nested("[", "", "]", depth), want),
            // The innermost `{}` is level `depth`.
            (&nested("[", "[1,{}]", "]", depth - 2), want),
            (&object(depth), want),
            (&mixed(depth), want),
        ]);
    }
    // Far too deep and never closed: both stop at the limit rather than at the end.
    check_table(&[(&"[".repeat(10_000), Json::Bad)]);
}

#[test]
fn strings_and_escapes_agree_with_serde_json() {
    use Json::{Bad, Ok};
    check_table(&[
        // Every short escape and a range of \u escapes, in strings and keys.
        ("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", Ok),
        ("\"\\u0000\\u001f\\u0020\\u007f\\u0080\\uffff\\uFFFE\"", Ok),
        ("{\"\\u00e9\\n\":\"\\u20AC\"}", Ok),
        // Surrogate pairs: the lowest and highest, either case, and every broken shape.
        ("\"\\ud800\\udc00\"", Ok),
        ("\"\\udbff\\udfff\"", Ok),
        ("\"\\uD83D\\uDE00x\"", Ok),
        ("\"\\udc00\"", Bad),
        ("\"\\ud800\\ud800\"", Bad),
        ("\"\\ud800x\"", Bad),
        ("\"\\ud800\\n\"", Bad),
        ("\"\\ud800\\\"", Bad),
        ("\"\\ud800", Bad),
        ("\"\\ud800\\u", Bad),
        ("\"\\ud800\\udc0", Bad),
        ("\"\\u", Bad),
        ("\"\\u12", Bad),
        ("\"\\", Bad),
        ("\"\\x41\"", Bad),
        ("\"\\U0041\"", Bad),
        ("\"\\u+041\"", Bad),
        ("\"\\u-041\"", Bad),
        // Raw control characters are errors, DEL and everything above are not.
        ("\"\u{0}\"", Bad),
        ("\"a\nb\"", Bad),
        ("\"\u{1f}\"", Bad),
        ("\"escaped\\n then raw\u{1}\"", Bad),
        // Raw multibyte UTF-8, in strings and keys, next to escapes.
        ("\"é€😀\"", Ok),
        ("{\"clé\":\"värde 😀\",\"😀\":[\"\\u00e9é\"]}", Ok),
        ("\"\u{10ffff}\u{fffd}\u{feff}\"", Ok),
    ]);
}

#[test]
fn strings_agree_around_the_scan_steps() {
    // The string scanner reads two eight-byte words a step, then one word, then bytes; put
    // every interesting character at every offset of strings on both sides of each, raw and
    // escaped.
    let specials = [
        "\"",
        "\\",
        "\u{1}",
        "\u{1f}",
        "\t",
        " ",
        "~",
        "\u{7f}",
        "é",
        "€",
        "😀",
        "\\n",
        "\\\"",
        "\\\\",
        "\\u00e9",
        "\\ud83d\\ude00",
        "\\q",
    ];
    let filler = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN";
    let mut verdicts = HashSet::new();
    for len in 0..=filler.len() {
        for at in 0..=len {
            for special in specials {
                let text = format!("\"{}{special}{}\"", &filler[..at], &filler[at..len]);
                verdicts.insert(check_document(&text));
                verdicts.insert(check_document(&format!("{{{text}:{text}}}")));
            }
        }
    }
    assert!(verdicts.contains(&Json::Ok) && verdicts.contains(&Json::Bad));
}

#[test]
fn numbers_agree_with_serde_json() {
    use Json::{Bad, Ok};
    let digits = |n| "9".repeat(n);
    check_table(&[
        // Zeros and signs.
        ("-0", Ok),
        ("-0.0", Ok),
        ("0.0", Ok),
        ("0e0", Ok),
        ("0E-0", Ok),
        ("-0e5", Ok),
        ("00", Bad),
        ("-01", Bad),
        ("--1", Bad),
        ("+1", Bad),
        ("- 1", Bad),
        // Float forms.
        ("2e0", Ok),
        ("1.50", Ok),
        ("1E+2", Ok),
        ("123.456e-7", Ok),
        ("0.1", Ok),
        ("0.30000000000000004", Ok),
        ("4.9e-324", Ok),
        ("2.2250738585072014e-308", Ok),
        ("1.e5", Bad),
        ("1e+", Bad),
        ("1e-", Bad),
        ("1.5E", Bad),
        ("1ee2", Bad),
        (".e1", Bad),
        ("0x1", Bad),
        ("1_000", Bad),
        ("Infinity", Bad),
        ("-Infinity", Bad),
        ("NaN", Bad),
        // Integer widths: 18 digits are written back as-is, longer ones go through serde_json.
        ("999999999999999999", Ok),
        ("-999999999999999999", Ok),
        ("1000000000000000000", Ok),
        ("-1000000000000000000", Ok),
        ("9223372036854775807", Ok),
        ("9223372036854775808", Ok),
        ("-9223372036854775808", Ok),
        ("-9223372036854775809", Ok),
        ("12345678901234567890", Ok),
        ("18446744073709551615", Ok),
        ("18446744073709551616", Ok),
        ("-18446744073709551616", Ok),
        // Range: past f64 is an error, whether written as a float or as a long integer. The
        // tape decides with std's parser, serde_json with its own; both round correctly (the
        // `float_roundtrip` feature, which jsonschema turns on), so they agree at the edge:
        // `...793e288` is just below halfway from f64::MAX to 2^1024, `...794e288` just above.
        ("1e308", Ok),
        ("1e309", Bad),
        ("1e400", Bad),
        ("-1e400", Bad),
        ("1e-400", Ok),
        ("0e99999999999", Ok),
        ("1e-99999999999", Ok),
        ("1e99999999999", Bad),
        ("1.7976931348623157e308", Ok),
        ("1.7976931348623158e308", Ok),
        ("1.7976931348623159e308", Bad),
        ("1.79769313486231580e308", Ok),
        ("179769313486231580793e288", Ok),
        ("179769313486231580794e288", Bad),
        (&format!("1{}", "0".repeat(308)), Ok),
        (&format!("1{}", "0".repeat(309)), Bad),
        (&format!("-{}", digits(309)), Bad),
        (&format!("17976931348623157{}", "0".repeat(292)), Ok),
        (&format!("17976931348623159{}", "0".repeat(292)), Bad),
        (&format!("0.{}1", "0".repeat(400)), Ok),
        (&format!("[{}]", digits(40)), Ok),
    ]);
}

#[test]
fn compact_json_matches_serde_json() {
    // `check_document` compares sizes and text for every accepted document; these are the
    // ones where the compact form differs from the input: floats re-rendered by serde_json,
    // integers past 64 bits, `-0` (a float to serde_json), escapes normalised.
    let documents = [
        "2e0",
        "1.50",
        "1E+2",
        "-0",
        "-0.0",
        "0e0",
        "12345678901234567890",
        "-9223372036854775809",
        "123456789012345678901234567890",
        "1e-7",
        "1.5e300",
        "\"\\/\"",
        "\"\\u00e9\"",
        "\"\\u0001\\u001f\\b\\f\\n\\r\\t\\u007f\"",
        "\"say \\\"hi\\\" \\\\ there\"",
        "\"\\ud83d\\ude00 \\u2028\"",
        "{\"\\u00e9\\\"\\\\\":[1.50,-0,{\"\":\"\\/\"}],\"k\\n\":[[],{}]}",
        " [ 1 , 2.0 , \"a b\" , { \"c\" : null } ] ",
    ];
    for text in documents {
        assert_eq!(check_document(text), Json::Ok, "{text:?}");
    }
    // Compact text with no floats and no escapes is recognised as such (and handed on
    // without being rewritten); anything else is not.
    let sample = sample_json();
    for (text, compact) in [
        (sample.as_str(), true),
        ("{\"a\":[1,-2,true,null,\"é\"],\"b\":{}}", true),
        ("{\"a\": 1}", false),
        ("[1.5]", false),
        ("[\"\\n\"]", false),
        ("[-0]", false),
    ] {
        let tape = Tape::parse(text).expect("valid");
        assert_eq!(tape_is_compact(&tape), compact, "{text:?}");
    }
    // And what that means, spelled out for a few.
    for (text, compact) in [
        ("2e0", "2.0"),
        ("1.50", "1.5"),
        ("1E+2", "100.0"),
        ("-0", "-0.0"),
        ("\"\\/\\u00e9\"", "\"/é\""),
        ("\"\\u0001\"", "\"\\u0001\""),
    ] {
        let tape = Tape::parse(text).expect("valid");
        let mut out = String::new();
        write_compact_tape(&tape, 0, &mut out);
        assert_eq!(out, compact, "{text:?}");
    }
}

#[test]
fn number_accessors_are_serde_jsons() {
    // The validator reads numbers through `JsonNumber`; the tape's must answer what
    // serde_json's `Number` answers for the same literal. (`as_str` is the literal itself,
    // not serde_json's re-rendering: only draft 4's integer check reads it, and the crate's
    // contracts are 2020-12.)
    for text in [
        "0",
        "-0",
        "-0.0",
        "0.0",
        "0e0",
        "1",
        "-1",
        "1.0",
        "1.5",
        "-1.5",
        "2e0",
        "1E+2",
        "1e-7",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "123456789012345678901234567890",
        "1e300",
        "4.9e-324",
        "1e-400",
        "0.1",
    ] {
        let tape = Tape::parse(text).expect("a number");
        let ours = tape.root().as_number().expect("a number");
        let Value::Number(theirs) = serde_json::from_str::<Value>(text).expect("a number") else {
            panic!("{text} is a number");
        };
        assert_eq!(
            ours.as_u64(),
            JsonNumber::as_u64(&theirs),
            "as_u64 of {text}"
        );
        assert_eq!(
            ours.as_i64(),
            JsonNumber::as_i64(&theirs),
            "as_i64 of {text}"
        );
        assert_eq!(
            ours.as_f64().map(f64::to_bits),
            JsonNumber::as_f64(&theirs).map(f64::to_bits),
            "as_f64 of {text}"
        );
        assert_eq!(
            ours.is_integer(),
            JsonNumber::is_integer(&theirs),
            "is_integer of {text}"
        );
        assert_eq!(*ours.to_number(), theirs, "to_number of {text}");
    }
}

// ---------------------------------------------------------------------------------------
// Schema verdicts.
// ---------------------------------------------------------------------------------------

/// One schema compiled for both representations.
struct Validators {
    value: jsonschema::Validator,
    tape: jsonschema::Validator<TapeJson>,
}

impl Validators {
    fn new(schema: &Value) -> Validators {
        Validators {
            value: jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .build(schema)
                .expect("the schema compiles"),
            tape: jsonschema::options_for::<TapeJson>()
                .with_draft(jsonschema::Draft::Draft202012)
                .build(schema)
                .expect("the schema compiles for the tape"),
        }
    }

    /// The `Value` verdict on the document (false for malformed JSON), after checking that
    /// the tape gives the same one wherever it parses (on a tape error the caller falls back).
    fn verdict(&self, doc: &Doc<'_>) -> bool {
        let by_value = doc.value.as_ref().is_ok_and(|v| self.value.is_valid(v));
        if let Ok(tape) = &doc.tape {
            let by_tape = self.tape.is_valid(tape.root());
            assert_eq!(
                by_tape, by_value,
                "verdicts differ (tape {by_tape}, Value {by_value}) on {:.300}",
                doc.text
            );
        }
        by_value
    }

    fn verdict_of(&self, text: &str) -> bool {
        self.verdict(&Doc::new(text))
    }

    /// Both verdicts on every document of the table are `want`.
    fn check(&self, cases: &[(&str, bool)]) {
        for &(text, want) in cases {
            assert_eq!(self.verdict_of(text), want, "verdict on {text:?}");
        }
    }
}

#[test]
fn findings_variants_agree_under_both_schemas() {
    let data = sample_json();
    let (loose, strict) = (
        Validators::new(&pydantic_schema()),
        Validators::new(&strict_schema()),
    );
    let sample: Value = serde_json::from_str(&data).expect("valid");
    let variant = |edit: &dyn Fn(&mut Value)| {
        let mut v = sample.clone();
        edit(&mut v);
        serde_json::to_string(&v).expect("serialisable")
    };
    // The same verdict under both schemas: these edits break (or keep) what both require.
    let both = [
        (data.clone(), true),
        (
            variant(&|v| v["findings"][2]["claim"] = json!("x".repeat(301))),
            false,
        ),
        // maxLength counts characters: 300 two-byte ones fit, 301 do not.
        (
            variant(&|v| v["findings"][2]["claim"] = json!("é".repeat(300))),
            true,
        ),
        (
            variant(&|v| v["findings"][2]["claim"] = json!("é".repeat(301))),
            false,
        ),
        (
            variant(&|v| v["findings"][2]["claim"] = json!("😀".repeat(300))),
            true,
        ),
        (
            variant(&|v| {
                v.as_object_mut().expect("object").remove("gaps");
            }),
            false,
        ),
        (
            variant(&|v| {
                let first = v["findings"][0].clone();
                v["findings"].as_array_mut().expect("array").push(first);
            }),
            false,
        ),
        (variant(&|v| v["gaps"][1] = json!(5)), false),
        (variant(&|v| v["findings"][0]["claim"] = json!(1.5)), false),
        (
            variant(&|v| v["findings"][4]["source_ids"] = json!([])),
            false,
        ),
        (variant(&|v| v["findings"] = json!({})), false),
        (
            variant(&|v| v["gaps"][0] = json!("tab\there \"quoted\" \u{1F980} \u{7}")),
            true,
        ),
        (data[..data.len() - 1].to_owned(), false),
        (data.replacen("]}", "],}", 1), false),
        (format!("{data} x"), false),
        (format!("```json\n{data}\n```"), false),
        (String::new(), false),
    ];
    for (text, want) in &both {
        let doc = Doc::new(text);
        assert_eq!(loose.verdict(&doc), *want, "pydantic schema on {text:.200}");
        assert_eq!(strict.verdict(&doc), *want, "strict schema on {text:.200}");
    }
    // Unknown properties: allowed by pydantic's schema, forbidden by the strict one.
    for text in [
        variant(&|v| v["extra"] = json!(1)),
        variant(&|v| v["findings"][1]["note"] = json!("hi")),
    ] {
        let doc = Doc::new(&text);
        assert!(loose.verdict(&doc), "{text:.200}");
        assert!(!strict.verdict(&doc), "{text:.200}");
    }
}

/// A struct with optional fields, for the schema schemars emits for `Option<T>` (an `anyOf`
/// with a `$ref` for structs) and for typed decoding.
#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Report {
    title: String,
    score: Option<u32>,
    detail: Option<Detail>,
    tags: Option<Vec<String>>,
}

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Detail {
    line: u32,
    note: Option<String>,
}

#[test]
fn schema_keywords_agree() {
    let table: &[(Value, &[(&str, bool)])] = &[
        (
            json!({"enum": ["a", 1, null, [1, 2], {"k": "v"}]}),
            &[
                ("\"a\"", true),
                ("\"\\u0061\"", true),
                ("\"b\"", false),
                ("1", true),
                ("1.0", true),
                ("1e0", true),
                ("2", false),
                ("null", true),
                ("false", false),
                ("[1,2]", true),
                ("[1,2.0]", true),
                ("[2,1]", false),
                ("{\"k\":\"v\"}", true),
                ("{\"k\":\"v\",\"l\":1}", false),
            ],
        ),
        (
            json!({"const": {"x": [0, "é", true]}}),
            &[
                ("{\"x\":[0,\"é\",true]}", true),
                ("{\"x\":[-0,\"\\u00e9\",true]}", true),
                ("{\"x\":[0.0,\"é\",true]}", true),
                ("{\"x\":[0,\"e\",true]}", false),
                ("{\"x\":[0,\"é\"]}", false),
            ],
        ),
        // The crate's specs: enums of strings, bounded strings and integers.
        (
            json!({"type": "object", "additionalProperties": false,
                   "required": ["verdict", "line"],
                   "properties": {
                       "verdict": {"enum": ["supported", "contradicted", "unclear"]},
                       "line": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
                       "claim": {"type": "string", "minLength": 5, "maxLength": 300}}}),
            &[
                ("{\"verdict\":\"unclear\",\"line\":1}", true),
                ("{\"verdict\":\"unsure\",\"line\":1}", false),
                ("{\"verdict\":\"unclear\",\"line\":0}", false),
                ("{\"verdict\":\"unclear\",\"line\":1000000}", true),
                ("{\"verdict\":\"unclear\",\"line\":1000001}", false),
                ("{\"verdict\":\"unclear\",\"line\":1.0}", true),
                ("{\"verdict\":\"unclear\",\"line\":1.5}", false),
                ("{\"verdict\":\"unclear\",\"line\":\"1\"}", false),
                ("{\"verdict\":\"unclear\"}", false),
                ("{\"line\":1}", false),
                (
                    "{\"verdict\":\"unclear\",\"line\":1,\"claim\":\"ééééé\"}",
                    true,
                ),
                (
                    "{\"verdict\":\"unclear\",\"line\":1,\"claim\":\"éééé\"}",
                    false,
                ),
                ("{\"verdict\":\"unclear\",\"line\":1,\"extra\":null}", false),
                ("{\"\\u0076erdict\":\"unclear\",\"line\":1}", true),
                ("[]", false),
            ],
        ),
        (
            json!({"type": "string", "pattern": "^[a-z]+-\\d{2}$"}),
            &[
                ("\"abc-12\"", true),
                ("\"abc-123\"", false),
                ("\"\\u0061bc-12\"", true),
                ("\"ABC-12\"", false),
                ("\"é-12\"", false),
                ("12", false),
            ],
        ),
        (
            json!({"pattern": "é+$"}),
            &[
                ("\"cafe\\u0301\"", false),
                ("\"café\"", true),
                ("\"caf\\u00e9\"", true),
                ("\"\"", false),
                ("1", true),
            ],
        ),
        // Length in characters, whatever their width: the tape decides from the byte length
        // when it can (a character is one to four bytes) and counts otherwise.
        (
            json!({"type": "string", "minLength": 2, "maxLength": 3}),
            &[
                ("\"a\"", false),
                ("\"é\"", false),
                ("\"😀\"", false),
                ("\"ab\"", true),
                ("\"éé\"", true),
                ("\"éab\"", true),
                ("\"ééé\"", true),
                ("\"😀😀😀\"", true),
                ("\"\\ud83d\\ude00\\u00e9\"", true),
                ("\"abcd\"", false),
                ("\"éééa\"", false),
                ("\"😀😀😀😀\"", false),
                ("\"abcdefghijklmnop\"", false),
                ("\"\\n\\t\"", true),
                ("\"\\u0041\"", false),
            ],
        ),
        (
            json!({"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "number"}}),
            &[
                ("[]", false),
                ("[1]", true),
                ("[1,2.5]", true),
                ("[1,2,3]", false),
                ("[[1,2,3]]", false),
                ("[\"1\"]", false),
                ("{\"0\":1}", false),
            ],
        ),
        // Integer means a whole number, however it is written.
        (
            json!({"type": "integer"}),
            &[
                ("1", true),
                ("1.0", true),
                ("-0", true),
                ("-0.0", true),
                ("1e2", true),
                ("1E-2", false),
                ("1.5", false),
                ("18446744073709551616", true),
                ("-9223372036854775809", true),
                ("123456789012345678901234567890", true),
                ("1e300", true),
                ("\"1\"", false),
                ("true", false),
                ("null", false),
            ],
        ),
        (
            json!({"type": "number"}),
            &[
                ("1", true),
                ("-0", true),
                ("1.5e-300", true),
                ("\"1\"", false),
                ("[1]", false),
            ],
        ),
        (
            json!({"minimum": 0, "maximum": 100}),
            &[
                ("0", true),
                ("-0", true),
                ("-0.0", true),
                ("-1e-300", false),
                ("-1", false),
                ("100", true),
                ("100.0", true),
                ("1e2", true),
                ("100.0000000001", false),
                ("18446744073709551615", false),
                ("-9223372036854775809", false),
                ("\"1000\"", true),
            ],
        ),
        (
            json!({"exclusiveMinimum": 0, "exclusiveMaximum": 1.5}),
            &[
                ("0", false),
                ("-0", false),
                ("1e-300", true),
                ("1", true),
                ("1.4999999999999998", true),
                // Rounds to 1.5 as an f64.
                ("1.49999999999999999", false),
                ("1.5", false),
                ("15e-1", false),
            ],
        ),
        (
            json!({"maximum": 18_446_744_073_709_551_615_u64, "minimum": i64::MIN}),
            &[
                ("18446744073709551615", true),
                ("18446744073709551616", false),
                ("-9223372036854775808", true),
                // -2^63 - 1 is read as an f64, which rounds it to -2^63; the next f64 down is
                // 2048 lower.
                ("-9223372036854775809", true),
                ("-9223372036854777856", false),
            ],
        ),
        // Equality for uniqueItems is JSON equality: 1 and 1.0 are the same number, key order
        // and escapes do not matter.
        (
            json!({"uniqueItems": true}),
            &[
                ("[]", true),
                ("[1,2]", true),
                ("[1,1]", false),
                ("[1,1.0]", false),
                ("[1e2,100]", false),
                ("[0,-0]", false),
                ("[0,-0.0]", false),
                ("[\"a\",\"\\u0061\"]", false),
                ("[\"a\",\"A\"]", true),
                ("[{\"a\":1,\"b\":2},{\"b\":2,\"a\":1}]", false),
                ("[{\"a\":1},{\"a\":1,\"b\":2}]", true),
                ("[[1],[1.0]]", false),
                ("[[1,2],[2,1]]", true),
                ("[null,null]", false),
                ("[true,1]", true),
                ("[false,0,\"\",[],{},null]", true),
            ],
        ),
        // A recursive $ref through $defs, with schemars' anyOf for an optional struct.
        (
            json!({
                "$defs": {
                    "pos": {"type": "integer", "minimum": 1},
                    "node": {
                        "type": "object",
                        "properties": {
                            "v": {"$ref": "#/$defs/pos"},
                            "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}
                        },
                        "required": ["v"]
                    }
                },
                "$ref": "#/$defs/node"
            }),
            &[
                ("{\"v\":1}", true),
                ("{\"v\":1,\"next\":null}", true),
                ("{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":3}}}", true),
                ("{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":0}}}", false),
                ("{\"v\":1,\"next\":{}}", false),
                ("{\"v\":1,\"next\":[]}", false),
                ("{\"v\":0}", false),
            ],
        ),
        // Property names are validated as strings of their own (the tape's cold path).
        (
            json!({"propertyNames": {"pattern": "^[a-z]+$", "maxLength": 3}}),
            &[
                ("{}", true),
                ("{\"ab\":1,\"abc\":2}", true),
                ("{\"abcd\":1}", false),
                ("{\"a1\":1}", false),
                ("{\"\\u0061b\":1}", true),
                ("{\"é\":1}", false),
                ("[\"abcd\"]", true),
            ],
        ),
    ];
    for (schema, cases) in table {
        Validators::new(schema).check(cases);
    }

    // Option<T> exactly as schemars writes it for the crate's typed contracts.
    let schema = schemars::schema_for!(Report).to_value();
    Validators::new(&schema).check(&[
        ("{\"title\":\"t\"}", true),
        (
            "{\"title\":\"t\",\"score\":null,\"detail\":null,\"tags\":null}",
            true,
        ),
        (
            "{\"title\":\"t\",\"score\":3,\"detail\":{\"line\":1},\"tags\":[\"a\"]}",
            true,
        ),
        ("{\"title\":\"t\",\"score\":3.0}", true),
        ("{\"title\":\"t\",\"score\":-1}", false),
        ("{\"title\":\"t\",\"score\":\"3\"}", false),
        (
            "{\"title\":\"t\",\"detail\":{\"line\":1,\"note\":null}}",
            true,
        ),
        ("{\"title\":\"t\",\"detail\":{\"note\":\"n\"}}", false),
        ("{\"title\":\"t\",\"detail\":[]}", false),
        ("{\"title\":\"t\",\"tags\":[1]}", false),
        ("{\"score\":3}", false),
    ]);
}

// ---------------------------------------------------------------------------------------
// Typed decoding.
// ---------------------------------------------------------------------------------------

/// Decoding `T` from the tape gives what the `Value` path gives (`T::deserialize(&Value)`,
/// what a spec's decoder runs when the tape path falls back): equal values, or an error from
/// both. Returns whether the `Value` path decoded it (`None` if the tape did not parse).
fn typed_agrees_on<T: DeserializeOwned + PartialEq + fmt::Debug>(doc: &Doc<'_>) -> Option<bool> {
    let (Ok(tape), Ok(value), text) = (&doc.tape, &doc.value, doc.text) else {
        return None;
    };
    let ours = tape.decode::<T>();
    let theirs = T::deserialize(value);
    match (ours, theirs) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b, "typed decodes differ on {text:.300}");
            Some(true)
        }
        (Err(_), Err(_)) => Some(false),
        (a, b) => panic!(
            "typed decodes of {} disagree on {text:.300}: tape {a:?}, serde_json {b:?}",
            std::any::type_name::<T>()
        ),
    }
}

fn typed_agrees<T: DeserializeOwned + PartialEq + fmt::Debug>(text: &str) -> Option<bool> {
    typed_agrees_on::<T>(&Doc::new(text))
}

/// Every document decodes (`true`) or fails to (`false`) as stated, the same both ways.
fn check_typed<T: DeserializeOwned + PartialEq + fmt::Debug>(cases: &[(&str, bool)]) {
    for &(text, want) in cases {
        assert_eq!(
            typed_agrees::<T>(text),
            Some(want),
            "decoding {} from {text:?}",
            std::any::type_name::<T>()
        );
    }
}

/// An `f64` compared bit for bit, so `-0.0` and `0.0` (or one rounding apart) differ; ordered
/// (totally) so it can key a map.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
struct ExactF64(f64);

/// The same for `f32`.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
struct ExactF32(f32);

macro_rules! exact_float {
    ($($ty:ident)*) => {$(
        impl PartialEq for $ty {
            fn eq(&self, other: &Self) -> bool {
                self.0.to_bits() == other.0.to_bits()
            }
        }
        impl Eq for $ty {}
        impl PartialOrd for $ty {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }
        impl Ord for $ty {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                self.0.total_cmp(&other.0)
            }
        }
    )*};
}

exact_float!(ExactF64 ExactF32);

/// Every scalar target against one document: the visitor calls must match serde_json's.
fn scalars_agree(text: &str) {
    typed_agrees::<u8>(text);
    typed_agrees::<i8>(text);
    typed_agrees::<u16>(text);
    typed_agrees::<i16>(text);
    typed_agrees::<u32>(text);
    typed_agrees::<i32>(text);
    typed_agrees::<u64>(text);
    typed_agrees::<i64>(text);
    typed_agrees::<u128>(text);
    typed_agrees::<i128>(text);
    typed_agrees::<ExactF32>(text);
    typed_agrees::<ExactF64>(text);
    typed_agrees::<bool>(text);
    typed_agrees::<String>(text);
    typed_agrees::<char>(text);
    typed_agrees::<()>(text);
    typed_agrees::<Option<i64>>(text);
    typed_agrees::<Option<ExactF64>>(text);
    // `Value` through serde: `deserialize_any` all the way down.
    typed_agrees::<Value>(text);
}

#[test]
fn scalars_decode_as_serde_json_does() {
    for text in [
        "0",
        "-0",
        "-0.0",
        "0.0",
        "1",
        "-1",
        "127",
        "128",
        "-128",
        "-129",
        "255",
        "256",
        "65535",
        "65536",
        "-32769",
        "4294967295",
        "4294967296",
        "-2147483649",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "123456789012345678901234567890",
        "1.0",
        "1.5",
        "2e0",
        "1E+2",
        "1e-7",
        "0.1",
        "0.30000000000000004",
        "3.4028235e38",
        "3.5e38",
        "1e300",
        "4.9e-324",
        "1e-400",
        "true",
        "false",
        "null",
        "\"\"",
        "\"a\"",
        "\"é\"",
        "\"😀\"",
        "\"\\u00e9\"",
        "\"ab\"",
        "\"1\"",
        "\"true\"",
        "[]",
        "[1]",
        "{}",
        "{\"a\":1}",
    ] {
        scalars_agree(text);
    }
    // The overflow cases spelled out: both sides must reject, not wrap or saturate.
    check_typed::<u8>(&[("255", true), ("256", false), ("-1", false), ("1.0", false)]);
    check_typed::<i8>(&[
        ("-128", true),
        ("-129", false),
        ("127", true),
        ("128", false),
    ]);
    check_typed::<u32>(&[("4294967295", true), ("4294967296", false)]);
    check_typed::<i64>(&[
        ("-9223372036854775808", true),
        ("-9223372036854775809", false),
        ("9223372036854775808", false),
    ]);
    check_typed::<u64>(&[
        ("18446744073709551615", true),
        ("18446744073709551616", false),
    ]);
    check_typed::<bool>(&[("true", true), ("1", false), ("\"true\"", false)]);
}

/// Integers of every width, a float and a bool in one struct.
#[derive(Debug, PartialEq, Deserialize)]
struct Widths {
    a: u8,
    b: i8,
    c: u16,
    d: i16,
    e: u32,
    f: i32,
    g: u64,
    h: i64,
    x: f64,
    ok: bool,
}

#[test]
fn structs_decode_as_serde_json_does() {
    let widths = |a: &str, h: &str, x: &str| {
        format!(
            "{{\"a\":{a},\"b\":-128,\"c\":65535,\"d\":-32768,\"e\":4294967295,\"f\":-2147483648,\
             \"g\":18446744073709551615,\"h\":{h},\"x\":{x},\"ok\":true}}"
        )
    };
    check_typed::<Widths>(&[
        (&widths("255", "-9223372036854775808", "1.5"), true),
        (&widths("0", "0", "-0"), true),
        (&widths("0", "0", "1e300"), true),
        (&widths("0", "0", "7"), true),
        (&widths("256", "0", "1.5"), false),
        (&widths("-1", "0", "1.5"), false),
        (&widths("1.0", "0", "1.5"), false),
        (&widths("0", "-9223372036854775809", "1.5"), false),
        (&widths("0", "0", "\"1.5\""), false),
        (&widths("0", "0", "null"), false),
        // Field order does not matter; a struct can also be written as an array in order.
        (
            "{\"ok\":false,\"x\":0,\"h\":0,\"g\":0,\"f\":0,\"e\":0,\"d\":0,\"c\":0,\"b\":0,\"a\":0}",
            true,
        ),
        ("[1,2,3,4,5,6,7,8,9.5,true]", true),
        ("[1,2,3,4,5,6,7,8,9.5]", false),
        ("[1,2,3,4,5,6,7,8,9.5,true,null]", false),
        ("{\"a\":1}", false),
        ("null", false),
    ]);

    check_typed::<Report>(&[
        ("{\"title\":\"t\"}", true),
        (
            "{\"title\":\"t\",\"score\":null,\"detail\":null,\"tags\":null}",
            true,
        ),
        (
            "{\"title\":\"t\",\"score\":3,\"detail\":{\"line\":1,\"note\":\"n\"},\"tags\":[]}",
            true,
        ),
        ("{\"title\":\"t\",\"detail\":{\"line\":1}}", true),
        ("{\"title\":\"t\",\"detail\":{\"note\":\"n\"}}", false),
        ("{\"title\":\"t\",\"score\":-1}", false),
        ("{\"title\":\"t\",\"score\":3.0}", false),
        ("{\"title\":\"t\",\"tags\":[null]}", false),
        ("{\"title\":\"\\t\\u00e9\",\"unknown\":[1,{}]}", true),
        ("{\"score\":1}", false),
        ("{\"title\":null}", false),
    ]);

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Strict {
        id: u32,
        name: String,
    }
    check_typed::<Strict>(&[
        ("{\"id\":1,\"name\":\"n\"}", true),
        ("{\"name\":\"n\",\"id\":1}", true),
        ("{\"\\u0069d\":1,\"name\":\"n\"}", true),
        ("{\"id\":1,\"name\":\"n\",\"extra\":null}", false),
        ("{\"id\":1}", false),
        ("{}", false),
    ]);

    check_typed::<Vec<Vec<Option<i32>>>>(&[
        ("[]", true),
        ("[[]]", true),
        ("[[1,null,-2],[],[null]]", true),
        ("[[1,2.5]]", false),
        ("[1]", false),
        ("[[\"1\"]]", false),
        ("{}", false),
    ]);

    check_typed::<BTreeMap<String, Vec<u8>>>(&[
        ("{}", true),
        ("{\"a\":[1],\"\\u00e9\":[]}", true),
        ("{\"a\":[256]}", false),
        ("[]", false),
    ]);
}

#[test]
fn map_keys_decode_as_serde_json_does() {
    // serde_json reads a key as a number or a bool when the map's key type asks for one, from
    // the key's text as written: exactly one literal between the quotes, no escapes.
    let numeric = [
        "{\"1\":0,\"-2\":0,\"300\":0}",
        "{\"0\":0}",
        "{\"-0\":0}",
        "{\"1.5\":0}",
        "{\"1e2\":0}",
        "{\"256\":0}",
        "{\"18446744073709551616\":0}",
        "{\"3.5e38\":0}",
        "{\"1e400\":0}",
        "{\"a\":0}",
        "{\"\":0}",
        "{\" 1\":0}",
        "{\"1 \":0}",
        "{\"+1\":0}",
        "{\"01\":0}",
        "{\"1x\":0}",
        "{\"\\u0031\":0}",
        "{\"1\\u0030\":0}",
        "{\"1\":0,\"01\":0}",
    ];
    for text in numeric {
        typed_agrees::<BTreeMap<u8, u8>>(text);
        typed_agrees::<BTreeMap<i8, u8>>(text);
        typed_agrees::<BTreeMap<u32, u8>>(text);
        typed_agrees::<BTreeMap<i64, u8>>(text);
        typed_agrees::<BTreeMap<u64, u8>>(text);
        typed_agrees::<BTreeMap<u128, u8>>(text);
        typed_agrees::<BTreeMap<i128, u8>>(text);
        typed_agrees::<BTreeMap<ExactF32, u8>>(text);
        typed_agrees::<BTreeMap<ExactF64, u8>>(text);
        typed_agrees::<Vec<(String, u8)>>(text);
        typed_agrees::<BTreeMap<char, u8>>(text);
        typed_agrees::<BTreeMap<Option<String>, u8>>(text);
    }
    check_typed::<BTreeMap<i32, String>>(&[
        ("{\"1\":\"a\",\"-2\":\"b\"}", true),
        ("{\"1.0\":\"a\"}", false),
        ("{\"one\":\"a\"}", false),
    ]);
    check_typed::<BTreeMap<bool, u8>>(&[
        ("{\"true\":1,\"false\":0}", true),
        ("{\"True\":1}", false),
        ("{\"true \":1}", false),
        // The Value path reads the decoded key.
        ("{\"tru\\u0065\":1}", true),
        ("{\"1\":1}", false),
    ]);
    // Keys as unit enum variants and as strings, escapes decoded.
    #[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
    enum Color {
        Red,
        Blue,
    }
    check_typed::<BTreeMap<Color, u8>>(&[
        ("{\"Red\":1,\"Blue\":2}", true),
        ("{\"\\u0052ed\":1}", true),
        ("{\"Green\":1}", false),
    ]);
}

#[test]
fn floats_decode_as_serde_json_does() {
    // The Value path holds every float as an f64 and narrows it for an `f32` (so a literal
    // past f32's range becomes infinity, and some round twice); the tape must do the same.
    let halfway_above_one = "1.000000059604644775390625000000001";
    for text in [
        halfway_above_one,
        "1.000000059604644775390625",
        "1.0000000596046447",
        "3.4028235e38",
        "3.4028236e38",
        "3.5e38",
        "-3.5e38",
        "1e39",
        "1.5e-45",
        "7e-46",
        "1e-50",
        "16777217",
        "16777217.0",
        "340282356779733661637539395458142568448",
        "340282356779733661637539395458142568447",
        "-9223372036854775809",
        "-18446744073709551615",
        "-18446744073709551617",
        "1e400",
        "0e99999999999",
        "1e-99999999999",
    ] {
        scalars_agree(text);
        scalars_agree(&format!("[{text}]"));
        typed_agrees::<Vec<ExactF32>>(&format!("[{text},1.5]"));
        typed_agrees::<BTreeMap<String, ExactF32>>(&format!("{{\"k\":{text}}}"));
    }
    check_typed::<ExactF32>(&[("3.4028235e38", true), ("3.5e38", true), ("\"1\"", false)]);
    check_typed::<ExactF64>(&[("-0", true), ("1e308", true), ("\"1\"", false)]);
}

/// Reads the first element of an array and stops: serde_json then finds the array unfinished
/// and fails, which the tape must do too.
#[derive(Debug, PartialEq)]
struct FirstElement(Option<u8>);

impl<'de> Deserialize<'de> for FirstElement {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct First;
        impl<'de> Visitor<'de> for First {
            type Value = FirstElement;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<FirstElement, A::Error> {
                Ok(FirstElement(seq.next_element()?))
            }
        }
        d.deserialize_seq(First)
    }
}

/// The same for the first member of an object.
#[derive(Debug, PartialEq)]
struct FirstMember(Option<(String, u8)>);

impl<'de> Deserialize<'de> for FirstMember {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct First;
        impl<'de> Visitor<'de> for First {
            type Value = FirstMember;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FirstMember, A::Error> {
                Ok(FirstMember(map.next_entry()?))
            }
        }
        d.deserialize_map(First)
    }
}

#[test]
fn sequences_must_be_read_to_their_end() {
    // A tuple reads as many elements as it has fields and stops; serde_json then requires the
    // array to end, so a longer array is an error rather than silently truncated.
    #[derive(Debug, PartialEq, Deserialize)]
    struct Point(i32, i32);
    let pairs = [
        ("[1,\"a\"]", true),
        ("[1]", false),
        ("[]", false),
        ("[1,\"a\",2]", false),
        ("[1,\"a\",[]]", false),
    ];
    check_typed::<(u8, String)>(&pairs);
    check_typed::<(u8, String, Option<u8>)>(&[("[1,\"a\"]", false), ("[1,\"a\",null]", true)]);
    check_typed::<[u8; 2]>(&[("[1,2]", true), ("[1]", false), ("[1,2,3]", false)]);
    check_typed::<Point>(&[("[1,-2]", true), ("[1,-2,3]", false), ("{}", false)]);
    check_typed::<Vec<(u8, u8)>>(&[("[[1,2],[3,4]]", true), ("[[1,2],[3,4,5]]", false)]);
    check_typed::<FirstElement>(&[("[]", true), ("[7]", true), ("[7,8]", false)]);
    check_typed::<FirstMember>(&[
        ("{}", true),
        ("{\"a\":7}", true),
        ("{\"a\":7,\"b\":8}", false),
    ]);
}

/// Externally tagged, as serde writes enums by default.
#[derive(Debug, PartialEq, Deserialize)]
enum Action {
    Stop,
    Wait(u32),
    Move { x: i16, y: i16 },
    Pair(u8, String),
}

#[test]
fn enums_decode_as_serde_json_does() {
    check_typed::<Action>(&[
        ("\"Stop\"", true),
        ("\"\\u0053top\"", true),
        ("{\"Stop\":null}", true),
        ("{\"Stop\":{}}", false),
        ("{\"Stop\":[]}", false),
        ("\"Wait\"", false),
        ("{\"Wait\":5}", true),
        ("{\"Wait\":-1}", false),
        ("{\"Wait\":5.0}", false),
        ("{\"Wait\":[5]}", false),
        ("{\"Move\":{\"x\":1,\"y\":-2}}", true),
        ("{\"Move\":{\"y\":-2,\"x\":1}}", true),
        // A struct variant from an array: serde_json's text parser takes it, its Value
        // deserializer (the reference here) does not.
        ("{\"Move\":[1,-2]}", false),
        ("{\"Move\":{\"x\":1}}", false),
        ("{\"Move\":{\"x\":1,\"y\":40000}}", false),
        ("{\"Pair\":[1,\"a\"]}", true),
        ("{\"Pair\":[1]}", false),
        ("{\"Pair\":[1,\"a\",2]}", false),
        ("{\"Pair\":{\"0\":1,\"1\":\"a\"}}", false),
        ("\"Nope\"", false),
        ("{\"Nope\":1}", false),
        ("{}", false),
        ("{\"Stop\":null,\"Wait\":1}", false),
        ("[\"Stop\"]", false),
        ("1", false),
        ("null", false),
    ]);
    check_typed::<Vec<Action>>(&[
        (
            "[\"Stop\",{\"Wait\":1},{\"Move\":{\"x\":0,\"y\":0}},{\"Pair\":[0,\"\"]}]",
            true,
        ),
        ("[\"Stop\",\"Go\"]", false),
    ]);
}

#[test]
fn findings_decode_as_serde_json_does() {
    let data = sample_json();
    assert_eq!(typed_agrees::<Findings>(&data), Some(true));
    let sample: Value = serde_json::from_str(&data).expect("valid");
    let variant = |edit: &dyn Fn(&mut Value)| {
        let mut v = sample.clone();
        edit(&mut v);
        serde_json::to_string(&v).expect("serialisable")
    };
    check_typed::<Findings>(&[
        // The schema's limits are not the type's: these decode.
        (
            &variant(&|v| v["findings"][2]["claim"] = json!("é".repeat(301))),
            true,
        ),
        (
            &variant(&|v| v["findings"][4]["source_ids"] = json!([])),
            true,
        ),
        (&variant(&|v| v["extra"] = json!({"a": [1]})), true),
        (&variant(&|v| v["findings"][1]["note"] = json!("hi")), true),
        (
            &variant(&|v| v["gaps"][0] = json!("tab\there \"quoted\" \u{1F980} \u{7}")),
            true,
        ),
        // Wrong types and missing fields do not.
        (
            &variant(&|v| {
                v.as_object_mut().expect("object").remove("gaps");
            }),
            false,
        ),
        (&variant(&|v| v["gaps"][1] = json!(5)), false),
        (&variant(&|v| v["findings"][0]["claim"] = json!(1.5)), false),
        (&variant(&|v| v["findings"] = json!({})), false),
        (&variant(&|v| v["findings"][0] = json!(null)), false),
    ]);
}

// ---------------------------------------------------------------------------------------
// The peers' Findings workload, and random mutations of it.
// ---------------------------------------------------------------------------------------

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Finding {
    claim: String,
    source_ids: Vec<String>,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Findings {
    findings: Vec<Finding>,
    gaps: Vec<String>,
}

/// `common.make_sample_findings()` of the peers' benchmark, as compact JSON, byte for byte.
fn sample_json() -> String {
    let findings = (0..6)
        .map(|i| {
            let base = format!(
                "Claim {i}: the measured median latency of component {i} rose after the \
                 configuration change, consistent with the cache-miss hypothesis; three \
                 independent sources agree on direction but differ on magnitude by a \
                 factor of up to two, and none controls for the concurrent traffic shift."
            );
            Finding {
                claim: base.chars().take(240).collect(),
                source_ids: (0..3)
                    .map(|c| format!("src-{i:04}-{}", ["a", "b", "c"][c]))
                    .collect(),
            }
        })
        .collect();
    let sample = Findings {
        findings,
        gaps: vec![
            "No source reports the magnitude under production load.".into(),
            "The configuration diff itself was not available to review.".into(),
            "Only one source covers the period after the rollback.".into(),
        ],
    };
    let data = serde_json::to_string(&sample).expect("serialisable");
    assert_eq!(data.len(), 2039, "the peers' sample is 2,039 bytes");
    data
}

/// `TypeAdapter(Findings).json_schema()` as pydantic 2 prints it.
fn pydantic_schema() -> Value {
    json!({
        "$defs": {"Finding": {"properties": {
            "claim": {"maxLength": 300, "title": "Claim", "type": "string"},
            "source_ids": {"items": {"type": "string"}, "minItems": 1, "title": "Source Ids", "type": "array"}},
            "required": ["claim", "source_ids"], "title": "Finding", "type": "object"}},
        "properties": {
            "findings": {"items": {"$ref": "#/$defs/Finding"}, "maxItems": 6, "title": "Findings", "type": "array"},
            "gaps": {"items": {"type": "string"}, "maxItems": 3, "title": "Gaps", "type": "array"}},
        "required": ["findings", "gaps"], "title": "Findings", "type": "object"
    })
}

/// The same with unknown properties forbidden at both levels (the crate's strict contracts).
fn strict_schema() -> Value {
    let mut s = pydantic_schema();
    s["additionalProperties"] = json!(false);
    s["$defs"]["Finding"]["additionalProperties"] = json!(false);
    s
}

/// One to three random edits of `data`: a character replaced, deleted or inserted, drawn
/// mostly from JSON's syntax (so documents break in every way and sometimes stay valid) plus
/// a few multibyte characters.
fn mutate(rng: &mut SmallRng, data: &str) -> String {
    const ALPHABET: &[char] = &[
        ' ', '\t', '\n', '"', '\\', '{', '}', '[', ']', ':', ',', '0', '1', '2', '5', '9', '-',
        '+', '.', 'e', 'E', 't', 'r', 'u', 'f', 'a', 'l', 's', 'n', '/', 'x', '\u{1}', 'é', '😀',
    ];
    let mut text = data.to_owned();
    for _ in 0..rng.random_range(1..=3) {
        let mut at = rng.random_range(0..text.len());
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        let c = ALPHABET[rng.random_range(0..ALPHABET.len())];
        match rng.random_range(0..3) {
            0 => {
                text.remove(at);
                text.insert(at, c);
            }
            1 => {
                text.remove(at);
            }
            _ => text.insert(at, c),
        }
    }
    text
}

#[test]
fn random_mutations_of_the_findings_sample_agree() {
    let data = sample_json();
    let (loose, strict) = (
        Validators::new(&pydantic_schema()),
        Validators::new(&strict_schema()),
    );
    let mut rng = SmallRng::seed_from_u64(7);
    let (mut parsed, mut valid, mut decoded) = (0, 0, 0);
    for _ in 0..3_000 {
        let text = mutate(&mut rng, &data);
        let doc = Doc::new(&text);
        parsed += usize::from(doc.check() == Json::Ok);
        valid += usize::from(loose.verdict(&doc));
        strict.verdict(&doc);
        decoded += usize::from(typed_agrees_on::<Findings>(&doc) == Some(true));
    }
    // The mutations must reach every branch. Most land in the long claims and keep the
    // document intact; the rest break its syntax, its schema or its type. With seed 7: 2,168
    // of 3,000 still parse, 1,930 of those are valid and decode.
    assert!((1_000..2_500).contains(&parsed), "{parsed} of 3,000 parse");
    assert!(valid > 1_000 && valid < parsed, "{valid} valid of {parsed}");
    assert!(
        decoded > 1_000 && decoded < parsed,
        "{decoded} decoded of {parsed}"
    );
}

/// An object of more than 64 members is left to the `Value` path, so crafted text cannot make
/// the duplicate-key check quadratic; 64 are still taken.
#[test]
fn objects_past_the_member_cap_are_left_to_the_value_path() {
    let object = |n: usize| {
        let members: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{i}")).collect();
        format!("{{{}}}", members.join(","))
    };
    assert!(Tape::parse(&object(64)).is_ok());
    let e = Tape::parse(&object(65)).expect_err("past the cap");
    assert_eq!(e.what, "too many members for the fast path");
}

/// `Decimal` (this crate's money type) reads through `deserialize_str` with the features
/// the crate turns on: the tape must refuse and accept what the `Value` path does.
#[test]
fn decimals_decode_as_the_value_path_does() {
    use rust_decimal::Decimal;
    for text in ["\"1.5\"", "1.5", "\"-0.000001\"", "\"x\"", "[1]", "null"] {
        typed_agrees::<Decimal>(text);
        typed_agrees::<Option<Decimal>>(text);
    }
    assert_eq!(typed_agrees::<Decimal>("\"1.5\""), Some(true));
}
