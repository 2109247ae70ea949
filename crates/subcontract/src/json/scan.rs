//! The scan both the tape parser and the compact writer need: where a string stops being
//! text JSON holds as it is.

/// Index of the first byte at or after `from` that a JSON string cannot hold unescaped (`"`,
/// `\\` or a control character), or `bytes.len()` if there is none. Eight bytes at a time with
/// the classic "has a zero byte / has a byte below n" tricks: a flag can be a false positive
/// only above a true one (a borrow), so the lowest flag is exact.
pub(crate) fn find_escape(bytes: &[u8], from: usize) -> usize {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    let mut i = from;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        let quote = x ^ (ONES * u64::from(b'"'));
        let slash = x ^ (ONES * u64::from(b'\\'));
        let found = ((quote.wrapping_sub(ONES) & !quote)
            | (slash.wrapping_sub(ONES) & !slash)
            | (x.wrapping_sub(ONES * 0x20) & !x))
            & HIGH;
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

#[cfg(test)]
mod tests {
    use super::find_escape;

    /// Every special byte at every offset, from every start, against a plain byte search.
    #[test]
    fn finds_the_first_byte_to_escape() {
        let specials = [b'"', b'\\', b'\n', 0x01, 0x1f, 0x00];
        let plain = [b' ', b'~', 0x7f, 0x80, 0xff, b'a'];
        for len in 0..20 {
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
}
