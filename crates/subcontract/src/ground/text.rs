//! How grounded values and evidence are compared: text after Unicode NFKC, case folding and
//! whitespace collapsing; numbers as the numeric tokens of that text.

use unicode_normalization::UnicodeNormalization;

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

/// Calls `found` with every numeric token of normalized text `s`: a decimal number, with an
/// optional sign, fraction and exponent, that stands alone: not part of a longer run of digits
/// or a word (`140` holds no `14`, `x86` no `86`), not one part of a dotted version (`1.63.0`
/// holds no `1.63`). A unit written right after it is allowed (`30s`, `4GB`). Thousands
/// separators are not read (`1,234` is `1` and `234`).
pub(crate) fn numbers(s: &str, mut found: impl FnMut(f64)) {
    let b = s.as_bytes();
    // Whether the character that ends at byte `end` is part of a word or a dotted run.
    let joined = |end: usize| {
        s[..end]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
    };
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let starts =
            c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit));
        if !starts {
            i += 1;
            continue;
        }
        // What stands before the token: a letter, digit or dot makes it part of something else.
        let prev = i.checked_sub(1).map(|p| b[p]);
        let alone_before = !joined(i);
        let mut j = i;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j < b.len() && b[j] == b'.' && b.get(j + 1).is_some_and(u8::is_ascii_digit) {
            j += 1;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
        }
        if j < b.len() && (b[j] == b'e' || b[j] == b'E') {
            let mut k = j + 1;
            if k < b.len() && (b[k] == b'+' || b[k] == b'-') {
                k += 1;
            }
            if k < b.len() && b[k].is_ascii_digit() {
                while k < b.len() && b[k].is_ascii_digit() {
                    k += 1;
                }
                j = k;
            }
        }
        // After it: another dot and digit (a version) or more digits after a word joins it to
        // something longer; a unit's letters do not.
        let alone_after = match b.get(j) {
            None => true,
            Some(b'.') => !b.get(j + 1).is_some_and(u8::is_ascii_digit),
            // A unit's letters may follow, but not letters and then digits (`3a5f`, `0x1f`).
            Some(n) if n.is_ascii_alphabetic() => {
                let mut k = j;
                while k < b.len() && b[k].is_ascii_alphabetic() {
                    k += 1;
                }
                !b.get(k).is_some_and(|c| c.is_ascii_digit() || *c == b'_')
            }
            Some(&n) => !n.is_ascii_digit() && n != b'_',
        };
        if alone_before && alone_after {
            let negative = prev == Some(b'-') && !joined(i - 1);
            let start = if negative { i - 1 } else { i };
            if let Ok(n) = s[start..j].parse::<f64>() {
                if n.is_finite() {
                    found(n);
                }
            }
        }
        // Skip the rest of the word or dotted run the token stood in.
        i = j.max(i + 1);
        if !(alone_before && alone_after) {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
        }
    }
}

/// The key a number is compared by: equal values, written any way, share it.
pub(crate) fn number_key(n: f64) -> u64 {
    // -0 and 0 are one number.
    if n == 0.0 {
        0f64.to_bits()
    } else {
        n.to_bits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nums(s: &str) -> Vec<f64> {
        let mut v = Vec::new();
        numbers(&normalize(s), |n| v.push(n));
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
    fn numbers_stand_alone() {
        assert_eq!(nums("timeout is 14 seconds"), vec![14.0]);
        assert_eq!(nums("14.0 and 1.4e1 and 1.4E+1"), vec![14.0, 14.0, 14.0]);
        assert!(nums("140 1400 2140").iter().all(|&n| n != 14.0));
        assert_eq!(nums("version 1.63.0"), Vec::<f64>::new());
        assert_eq!(nums("v2 x86 sha256"), Vec::<f64>::new());
        assert_eq!(nums("30s, 4GB"), vec![30.0, 4.0]);
        assert_eq!(nums("1,234"), vec![1.0, 234.0]);
        assert_eq!(nums("it is 14."), vec![14.0]);
        assert_eq!(nums("-5 and 3-5"), vec![-5.0, 3.0, 5.0]);
        assert_eq!(nums(".5"), vec![0.5]);
        assert_eq!(nums("１４"), vec![14.0]);
        assert_eq!(nums("\u{2212}14"), vec![-14.0]);
        assert_eq!(nums("3a5f 0x1f 2nd"), vec![2.0]);
        assert_eq!(nums("1e999"), Vec::<f64>::new());
        assert_eq!(number_key(-0.0), number_key(0.0));
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
            "9".repeat(400).as_str(),
        ] {
            numbers(s, |_| {});
        }
    }
}
