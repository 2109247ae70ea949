//! The scan both the tape parser and the compact writer need: where a string stops being
//! text JSON holds as it is.

/// Index of the first byte at or after `from` that a JSON string cannot hold unescaped (`"`,
/// `\\` or a control character), or `bytes.len()` if there is none (`from` past the end is
/// returned as it is; the callers never pass one). Eight bytes to a word with
/// the classic "has a zero byte / has a byte below n" tricks: a flag can be a false positive
/// only above a true one (a borrow), so the lowest flag is exact. Two words a step: one
/// branch per 16 bytes, and the two words' arithmetic overlaps.
pub(crate) fn find_escape(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    while let Some(pair) = bytes.get(i..i + 16) {
        let (lo, hi) = pair.split_at(8);
        let (lo, hi) = (flags(lo), flags(hi));
        if lo | hi != 0 {
            let (at, word) = if lo != 0 { (i, lo) } else { (i + 8, hi) };
            return at + (word.trailing_zeros() / 8) as usize;
        }
        i += 16;
    }
    if let Some(word) = bytes.get(i..i + 8) {
        let found = flags(word);
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    let rest = bytes.get(i..).unwrap_or_default();
    i + rest
        .iter()
        .position(|&c| c < 0x20 || c == b'"' || c == b'\\')
        .unwrap_or(rest.len())
}

/// The high bit of each byte of an eight-byte `word` that must be escaped (exact for the
/// lowest one only).
#[inline(always)]
fn flags(word: &[u8]) -> u64 {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(word);
    let x = u64::from_le_bytes(bytes);
    let quote = x ^ (ONES * u64::from(b'"'));
    let slash = x ^ (ONES * u64::from(b'\\'));
    ((quote.wrapping_sub(ONES) & !quote)
        | (slash.wrapping_sub(ONES) & !slash)
        | (x.wrapping_sub(ONES * 0x20) & !x))
        & HIGH
}

#[cfg(test)]
mod tests {
    use super::find_escape;

    /// Every special byte at every offset, from every start, against a plain byte search.
    #[test]
    fn finds_the_first_byte_to_escape() {
        let specials = [b'"', b'\\', b'\n', 0x01, 0x1f, 0x00];
        let plain = [b' ', b'~', 0x7f, 0x80, 0xff, b'a'];
        for len in 0..40 {
            for at in 0..len {
                for &c in specials.iter().chain(&plain) {
                    let mut b = vec![b'x'; len];
                    b[at] = c;
                    for from in 0..=len {
                        let expected = (from..len)
                            .find(|&i| b[i] < 0x20 || b[i] == b'"' || b[i] == b'\\')
                            .unwrap_or(len);
                        assert_eq!(find_escape(&b, from), expected, "{b:?} from {from}");
                    }
                }
            }
        }
    }

    /// A special byte borrows into the byte above it, which can then look special too: `#`
    /// above `"`, `]` above `\\`, a space above a control character. The first is still found
    /// wherever the pair sits across the two words of a step.
    #[test]
    fn a_borrow_never_hides_the_first_byte() {
        for (special, above) in [(b'"', b'#'), (b'\\', b']'), (0x1f, b' '), (0x00, 0x01)] {
            for len in 2..40 {
                for at in 0..len - 1 {
                    let mut b = vec![b'x'; len];
                    b[at] = special;
                    b[at + 1] = above;
                    assert_eq!(find_escape(&b, 0), at, "{b:?}");
                }
            }
        }
    }
}
