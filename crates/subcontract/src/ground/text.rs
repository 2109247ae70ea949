//! How grounded values and evidence are compared: text after Unicode NFKC, case folding and
//! whitespace collapsing, as whole tokens; numbers as exact decimals read from those tokens.
//!
//! A **token** is a word, a number or a version: a run of letters, digits and `_` in which a
//! `.`, `-` or `,` between two of them joins them (`tidepool`, `0.7.3`, `1,000`, `tide-pool`,
//! `snake_case`, `1e-5`, `1.4e+1`). A character of a script written without spaces between
//! words (Han, kana, Thai, Lao, Khmer, Myanmar) is a token of its own, and a `v` right before
//! a version's digits is apart from them (`v1.47.1` holds the version `1.47.1`).
//!
//! Text is held **marked**: each token between two [`MARK`] bytes, and each joining `.`, `-`,
//! `,` or `+` inside one replaced by a byte of its own. A value marked the same way then occurs
//! in marked evidence exactly where it occurs there as whole tokens, so one substring search
//! (SIMD, linear) decides it: `0.7` is not found in `0.7.3`, nor `tide` in `tidepool`, nor `14`
//! in `140`. The marks are bytes no UTF-8 text holds.

use unicode_normalization::UnicodeNormalization;

/// Stands before and after every token of marked text.
pub(crate) const MARK: u8 = 0xFE;
/// Ends each piece in the evidence's text: a match never spans two pieces.
pub(crate) const END: u8 = 0xFF;

/// `s` as grounding compares it: NFKC (full-width digits and letters, ligatures and the like
/// become their plain forms; letters of other scripts that merely look alike stay distinct),
/// case-folded (Unicode lower case, with `ß` as `ss` and a final sigma as `σ`), every run of
/// whitespace one space, no whitespace at either end.
pub(crate) fn normalize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for c in s.nfkc() {
        if c.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        match c {
            'ß' | 'ẞ' => out.push_str("ss"),
            // The minus sign is a minus, as a hyphen-minus is.
            '\u{2212}' => out.push('-'),
            'ς' => out.push('σ'),
            c if c.is_ascii() => out.push(c.to_ascii_lowercase()),
            c => out.extend(c.to_lowercase()),
        }
    }
    out
}

/// A character of a script written without spaces between words: a token of its own.
fn unspaced(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0EFF // Thai, Lao
        | 0x1000..=0x109F // Myanmar
        | 0x1780..=0x17FF // Khmer
        | 0x3040..=0x30FF // Hiragana, Katakana
        | 0x31F0..=0x31FF
        | 0x3400..=0x4DBF // CJK
        | 0x4E00..=0x9FFF
        | 0xF900..=0xFAFF
        | 0x20000..=0x3FFFF)
}

/// A character that makes up words: a letter, a digit, `_`, or a combining mark.
fn word(c: char) -> bool {
    !unspaced(c)
        && (c.is_alphanumeric() || c == '_' || unicode_normalization::char::is_combining_mark(c))
}

/// The byte a joining character is held as inside a token.
fn joined_byte(c: u8) -> Option<u8> {
    match c {
        b'.' => Some(0xF8),
        b'-' => Some(0xF9),
        b',' => Some(0xFA),
        b'+' => Some(0xFB),
        _ => None,
    }
}

/// Calls `found` with the byte range of every token of normalized text `s`, in order.
pub(crate) fn tokens(s: &str, mut found: impl FnMut(std::ops::Range<usize>)) {
    let at = |i: usize| s.get(i..).and_then(|r| r.chars().next());
    let mut i = 0;
    while let Some(c) = at(i) {
        if unspaced(c) {
            found(i..i + c.len_utf8());
            i += c.len_utf8();
            continue;
        }
        if !word(c) {
            i += c.len_utf8();
            continue;
        }
        let start = i;
        let (mut prev2, mut prev) = (None, c);
        let mut j = i + c.len_utf8();
        while let Some(n) = at(j) {
            if word(n) {
                (prev2, prev) = (Some(prev), n);
                j += n.len_utf8();
                continue;
            }
            let Some(after) = at(j + n.len_utf8()).filter(|a| word(*a)) else {
                break;
            };
            let joins = match n {
                '.' | '-' | ',' => true,
                // Only in an exponent: `1.4e+1`.
                '+' => {
                    prev == 'e'
                        && prev2.is_some_and(|p| p.is_ascii_digit())
                        && after.is_ascii_digit()
                }
                _ => false,
            };
            if !joins {
                break;
            }
            (prev2, prev) = (Some(n), after);
            j += n.len_utf8() + after.len_utf8();
        }
        let t = &s[start..j];
        // `v1.47.1`: the `v` of a version stands apart from it.
        let b = t.as_bytes();
        if b.len() > 3 && b[0] == b'v' && b[1].is_ascii_digit() {
            let digits = b[1..].iter().take_while(|d| d.is_ascii_digit()).count();
            if b.get(1 + digits) == Some(&b'.') && b.get(2 + digits).is_some_and(u8::is_ascii_digit)
            {
                found(start..start + 1);
                found(start + 1..j);
                i = j;
                continue;
            }
        }
        found(start..j);
        i = j;
    }
}

/// Appends the marked form of normalized text `s` to `out`, calling `token` with each token.
pub(crate) fn mark(
    s: &str,
    out: &mut Vec<u8>,
    mut token: impl FnMut(&str, std::ops::Range<usize>),
) {
    let b = s.as_bytes();
    let mut last = 0;
    tokens(s, |r| {
        out.extend_from_slice(&b[last..r.start]);
        out.push(MARK);
        out.extend(b[r.clone()].iter().map(|&c| joined_byte(c).unwrap_or(c)));
        out.push(MARK);
        last = r.end;
        token(s, r);
    });
    out.extend_from_slice(&b[last..]);
}

/// A value as it is looked for: its marked normalized form; `None` for an empty or
/// whitespace-only value, which claims nothing and grounds nothing.
pub(crate) fn needle(value: &str) -> Option<Vec<u8>> {
    let n = normalize(value);
    if n.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(n.len() + 8);
    mark(&n, &mut out, |_, _| {});
    Some(out)
}

/// A number as grounding compares it, exactly: `0.DIGITS × 10^exp`, with no leading or
/// trailing zero in `digits` (zero is no digits, positive, exponent 0). `14`, `14.0`,
/// `1.4e1` and `1,4e1`… are one key where they are one number; no float is involved, so two
/// integers past 2^53, or `1e-400` and `0`, stay apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct NumKey {
    negative: bool,
    digits: Box<str>,
    exp: i64,
}

/// The exponent a number may have at most (either way): past it, text is no number.
const MAX_EXP_DIGITS: usize = 15;

/// The number `s` is, written whole: an optional sign, digits (in groups of three after a
/// first of one to three when separated by `,`; `_` between any two), an optional fraction
/// and an optional exponent. `None` for anything else (`1.63.0`, `3,14`, `0x1f`, `inf`).
pub(crate) fn parse_number(s: &str) -> Option<NumKey> {
    let b = s.as_bytes();
    let mut i = 0;
    let negative = match b.first() {
        Some(b'-') => {
            i = 1;
            true
        }
        Some(b'+') => {
            i = 1;
            false
        }
        _ => false,
    };
    let mut int = String::new();
    let int_start = i;
    let mut groups: Vec<usize> = Vec::new();
    let mut run = 0;
    while i < b.len() {
        match b[i] {
            d @ b'0'..=b'9' => {
                int.push(d as char);
                run += 1;
                i += 1;
            }
            sep @ (b',' | b'_') => {
                // Between two digits only.
                if run == 0 || !b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                    return None;
                }
                if sep == b',' {
                    groups.push(run);
                } else if !groups.is_empty() {
                    // `1,000_000`: one kind of separator.
                    return None;
                }
                if sep == b'_' {
                    // `_` joins any digits: not counted as groups.
                    run = 0;
                    i += 1;
                    continue;
                }
                run = 0;
                i += 1;
            }
            _ => break,
        }
    }
    if !groups.is_empty() {
        // `1,000` and `12,345,678`; never `3,14` or `1,2,3`.
        if groups[0] > 3 || groups[1..].iter().any(|&g| g != 3) || run != 3 {
            return None;
        }
        if s[int_start..i].contains('_') {
            return None;
        }
    }
    let mut frac = String::new();
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
            if b[i] == b'_'
                && !(i > start
                    && b[i - 1].is_ascii_digit()
                    && b.get(i + 1).is_some_and(u8::is_ascii_digit))
            {
                return None;
            }
            if b[i] != b'_' {
                frac.push(b[i] as char);
            }
            i += 1;
        }
        if frac.is_empty() && int.is_empty() {
            return None;
        }
    }
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut exp: i64 = 0;
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        let neg = match b.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let digits = s[start..i].trim_start_matches('0');
        if i == start || digits.len() > MAX_EXP_DIGITS {
            return None;
        }
        exp = digits.parse::<i64>().unwrap_or(0);
        if neg {
            exp = -exp;
        }
    }
    if i != b.len() {
        return None;
    }
    Some(key(negative, &int, &frac, exp))
}

/// The key of `±INT.FRAC × 10^exp`.
fn key(negative: bool, int: &str, frac: &str, exp: i64) -> NumKey {
    let all = format!("{int}{frac}");
    let lead = all.len() - all.trim_start_matches('0').len();
    let digits = all.trim_start_matches('0').trim_end_matches('0');
    if digits.is_empty() {
        return NumKey {
            negative: false,
            digits: "".into(),
            exp: 0,
        };
    }
    // |exp| < 10^15 and the digit counts are bounded by the text: no overflow.
    let point = exp + int.len() as i64 - lead as i64;
    NumKey {
        negative,
        digits: digits.into(),
        exp: point,
    }
}

/// The key of a JSON number, as the output holds it (an integer exactly; a float as the
/// shortest decimal that is that float, which is what a reader of the output gets).
pub(crate) fn json_number(n: &serde_json::Number) -> Option<NumKey> {
    parse_number(&n.to_string())
}

/// Calls `found` with every number of normalized text `s`: each token that is a number,
/// whole (`140` holds no `14`, `x86` no `86`, the version `1.63.0` no number, the date
/// `2024-01-05` none), optionally followed by a unit's letters (`30s`, `4GB`, `30-day`), with
/// a sign or a leading point written just before it (`-5`, `.5`).
#[cfg(test)]
fn numbers(s: &str, mut found: impl FnMut(NumKey)) {
    tokens(s, |r| {
        if let Some(n) = token_number(s, r) {
            found(n);
        }
    });
}

/// The number token `r` of normalized text `s` is, if it is one.
pub(crate) fn token_number(s: &str, r: std::ops::Range<usize>) -> Option<NumKey> {
    let t = &s[r.clone()];
    if !t.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    // The longest prefix that is a number, then a unit's letters alone.
    let end = t
        .char_indices()
        .find(|&(i, c)| {
            c.is_alphabetic()
                && !(matches!(c, 'e')
                    && t[i + 1..]
                        .trim_start_matches(['-', '+'])
                        .starts_with(|d: char| d.is_ascii_digit()))
        })
        .map_or(t.len(), |(i, _)| i);
    let (num, unit) = t.split_at(end);
    let (num, unit) = match num.strip_suffix('-') {
        Some(n) if !unit.is_empty() => (n, unit),
        _ => (num, unit),
    };
    if !unit.chars().all(char::is_alphabetic) {
        return None;
    }
    let mut before = s[..r.start].chars().rev();
    let mut text = std::borrow::Cow::Borrowed(num);
    let mut back = r.start;
    // `.5`, but not the `5` of `1..5`.
    if before.next() == Some('.') && !before.next().is_some_and(word) {
        text = format!(".{num}").into();
        back -= 1;
    }
    match s[..back].chars().next_back() {
        Some('-') => parse_number(&format!("-{text}")),
        _ => parse_number(&text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nums(s: &str) -> Vec<NumKey> {
        let mut v = Vec::new();
        numbers(&normalize(s), |n| v.push(n));
        v
    }

    fn n(s: &str) -> NumKey {
        parse_number(s).unwrap_or_else(|| panic!("{s} is a number"))
    }

    fn toks(s: &str) -> Vec<String> {
        let n = normalize(s);
        let mut v = Vec::new();
        tokens(&n, |r| v.push(n[r].to_owned()));
        v
    }

    #[test]
    fn normalize_folds_width_case_and_space() {
        assert_eq!(normalize("  Tide\tPOOL \n 0.7.3 "), "tide pool 0.7.3");
        // Full-width digits and letters are their plain forms after NFKC.
        assert_eq!(normalize("ＡＢＣ１２３"), "abc123");
        assert_eq!(normalize("Straße"), "strasse");
        assert_eq!(normalize("ΟΔΟΣ"), "οδοσ");
        assert_eq!(normalize("ﬁle"), "file");
        // A Cyrillic `а` only looks like a Latin `a`: it stays distinct.
        assert_ne!(normalize("tidepool"), normalize("tidepооl"));
    }

    #[test]
    fn tokens_are_words_numbers_and_versions() {
        assert_eq!(
            toks("name = \"tidepool\" version = \"0.7.3\""),
            ["name", "tidepool", "version", "0.7.3"]
        );
        assert_eq!(
            toks("tide-pool tide_pool tide.pool 1,000 3-5 x86 1e-5 1.4e+1 a+b"),
            [
                "tide-pool",
                "tide_pool",
                "tide.pool",
                "1,000",
                "3-5",
                "x86",
                "1e-5",
                "1.4e+1",
                "a",
                "b"
            ]
        );
        // A separator not between two word characters joins nothing.
        assert_eq!(
            toks("end. -5 _x 1, 2 a--b"),
            ["end", "5", "_x", "1", "2", "a", "b"]
        );
        assert_eq!(toks("v1.47.1 v2 vim"), ["v", "1.47.1", "v2", "vim"]);
        assert_eq!(toks("東京タワー"), ["東", "京", "タ", "ワ", "ー"]);
        // A combining mark stays in its word.
        assert_eq!(toks("x\u{0301}y z"), ["x\u{0301}y", "z"]);
    }

    #[test]
    fn marked_text_finds_whole_tokens_only() {
        let hay = {
            let mut v = Vec::new();
            mark(
                &normalize("tidepool 0.7.3 retries = 140; v1.47.1 tide pool 1,000"),
                &mut v,
                |_, _| {},
            );
            v
        };
        let found = |s: &str| {
            let n = needle(s).unwrap();
            memchr::memmem::find(&hay, &n).is_some()
        };
        for yes in [
            "tidepool",
            "0.7.3",
            "140",
            "1.47.1",
            "v1.47.1",
            "tide pool",
            "= 140;",
            "1,000",
            "Pool 1,000",
        ] {
            assert!(found(yes), "{yes}");
        }
        for no in [
            "tidep",
            "pool 0",
            "0.7",
            "7.3",
            "3",
            "14",
            "40",
            "1.4",
            "1.47",
            "47.1",
            "1",
            "000",
            ".7",
            "ol 0.7.3",
            "retries = 14",
        ] {
            assert!(!found(no), "{no}");
        }
        assert_eq!(needle(""), None);
        assert_eq!(needle(" \t\n "), None);
    }

    #[test]
    fn numbers_are_exact_decimals() {
        assert_eq!(n("14"), n("14.0"));
        assert_eq!(n("14"), n("1.4e1"));
        assert_eq!(n("14"), n("1.4E+1"));
        assert_eq!(n("14"), n("140e-1"));
        assert_eq!(n("14"), n("0014.000"));
        assert_eq!(n("1000"), n("1,000"));
        assert_eq!(n("1000000"), n("1_000_000"));
        assert_eq!(n("-0"), n("0"));
        assert_eq!(n("0"), n("0e99"));
        assert_ne!(n("14"), n("-14"));
        assert_ne!(n("9007199254740993"), n("9007199254740992"));
        assert_ne!(n("18446744073709551617"), n("18446744073709551616"));
        assert_ne!(n("1e-400"), n("0"));
        assert_ne!(n("1e-400"), n("1e-401"));
        assert_ne!(n("1e400"), n("1e401"));
        assert_eq!(n("1e400"), n("10e399"));
        for bad in [
            "1.63.0",
            "3,14",
            "1,2,3",
            "1,0000",
            "1000,000",
            "0x1f",
            "inf",
            "NaN",
            "",
            "-",
            ".",
            "1e",
            "1e+",
            "1e99999999999999999",
            "1,000_000",
            "1__0",
            "_1",
            "1_",
            "+-1",
            "1.2.3",
        ] {
            assert_eq!(parse_number(bad), None, "{bad}");
        }
    }

    #[test]
    fn numbers_stand_alone() {
        assert_eq!(nums("timeout is 14 seconds"), [n("14")]);
        assert_eq!(
            nums("14.0 and 1.4e1 and 1.4E+1"),
            [n("14"), n("14"), n("14")]
        );
        assert!(nums("140 1400 2140").iter().all(|x| *x != n("14")));
        assert_eq!(nums("version 1.63.0"), []);
        assert_eq!(nums("v2 x86 sha256"), []);
        assert_eq!(nums("30s, 4GB, a 30-day trial"), [n("30"), n("4"), n("30")]);
        // `1,000` is one number, never 1 or 0.
        assert_eq!(nums("1,000 and 1,234,567.5"), [n("1000"), n("1234567.5")]);
        assert_eq!(nums("3,14 and 1,2"), []);
        assert_eq!(nums("it is 14."), [n("14")]);
        assert_eq!(nums("-5 and 3-5 and 2024-01-05"), [n("-5")]);
        assert_eq!(nums(".5"), [n("0.5")]);
        assert_eq!(nums("１４"), [n("14")]);
        assert_eq!(nums("\u{2212}14"), [n("-14")]);
        assert_eq!(nums("3a5f 0x1f 2nd"), [n("2")]);
        assert_eq!(nums("1e999 1e-400"), [n("1e999"), n("1e-400")]);
    }

    #[test]
    fn numbers_never_panic_on_odd_text() {
        for s in [
            "",
            ".",
            "e",
            "1e",
            "1e+",
            "-",
            "--1",
            "1..2",
            "é1",
            "1é",
            "1e+é",
            "9".repeat(400).as_str(),
            "1e99999999999999999999999",
            "v1.",
            "v1.x",
            "1,",
            "1_",
        ] {
            numbers(&normalize(s), |_| {});
            let _ = needle(s);
        }
    }
}
