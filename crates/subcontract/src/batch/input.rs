//! Input lines: `{"id": …, "input": {…}}`, or a bare input whose id is its line number.

use std::io::BufRead;

use serde_json::Value;

/// The longest input line read (16 MiB); a longer one is an `invalid_input` result, and is
/// skipped without being held in memory.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// One input of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct InputLine {
    /// Its id: the `id` of a wrapped line (a string, or a number in its JSON spelling), or the
    /// 1-based line number of a bare input.
    pub id: String,
    /// The input the spec runs on.
    pub input: Value,
}

/// A line that holds no input: its id (the line number when none could be read) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidLine {
    /// The id the result line is written under.
    pub id: String,
    /// Why (line number and reason; the line's text is not quoted).
    pub reason: String,
}

/// Parses line `line_no` (1-based). A JSON object with exactly the keys `id` and `input` is a
/// wrapped input; any other JSON value is a bare input with id `line_no`. The id of a wrapped
/// input must be a non-empty string or a number.
pub fn parse_input_line(line_no: u64, text: &str) -> Result<InputLine, InvalidLine> {
    let value: Value = serde_json::from_str(text).map_err(|e| InvalidLine {
        id: line_no.to_string(),
        reason: format!("line {line_no}: not JSON: {e}"),
    })?;
    match value {
        Value::Object(mut map)
            if map.len() == 2 && map.contains_key("id") && map.contains_key("input") =>
        {
            let input = map.remove("input").unwrap_or_default();
            let id = match map.remove("id") {
                Some(Value::String(s)) if !s.is_empty() => s,
                Some(Value::Number(n)) => n.to_string(),
                _ => {
                    return Err(InvalidLine {
                        id: line_no.to_string(),
                        reason: format!(
                            "line {line_no}: `id` is not a non-empty string or a number"
                        ),
                    })
                }
            };
            Ok(InputLine { id, input })
        }
        input => Ok(InputLine {
            id: line_no.to_string(),
            input,
        }),
    }
}

/// One line read by [`read_line`].
pub(crate) enum Line<'a> {
    /// Its text, without the line break.
    Text(&'a str),
    /// Longer than [`MAX_LINE_BYTES`] (or not UTF-8): skipped to its end.
    TooLong,
}

/// Reads the next line into `buf` without ever holding more than [`MAX_LINE_BYTES`] of it;
/// `None` at the end of the input.
pub(crate) fn read_line<'a>(
    r: &mut impl BufRead,
    buf: &'a mut Vec<u8>,
) -> std::io::Result<Option<Line<'a>>> {
    buf.clear();
    let mut too_long = false;
    let mut any = false;
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        any = true;
        let (part, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        if !too_long {
            if buf.len() + part.len() > MAX_LINE_BYTES {
                too_long = true;
                buf.clear();
            } else {
                // Grown by doubling but never past the cap: the buffer stays within it.
                let need = buf.len() + part.len();
                if need > buf.capacity() {
                    let target = need.max(buf.capacity() * 2).min(MAX_LINE_BYTES);
                    buf.reserve_exact(target - buf.len());
                }
                buf.extend_from_slice(part);
            }
        }
        let used = done.unwrap_or(chunk.len());
        r.consume(used);
        if done.is_some() {
            break;
        }
    }
    if !any {
        return Ok(None);
    }
    if too_long {
        return Ok(Some(Line::TooLong));
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Some(match std::str::from_utf8(buf) {
        Ok(s) => Line::Text(s),
        Err(_) => Line::TooLong,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrapped_and_bare_inputs() {
        let l = parse_input_line(3, r#"{"id": "t-1", "input": {"q": 1}}"#).expect("wrapped");
        assert_eq!((l.id.as_str(), l.input), ("t-1", json!({"q": 1})));
        let l = parse_input_line(4, r#"{"id": 17, "input": "x"}"#).expect("numeric id");
        assert_eq!(l.id, "17");
        // A third key: the whole object is the input.
        let l = parse_input_line(5, r#"{"id": 1, "input": 2, "x": 3}"#).expect("bare");
        assert_eq!(l.id, "5");
        assert_eq!(l.input, json!({"id": 1, "input": 2, "x": 3}));
        let bad = parse_input_line(6, r#"{"id": null, "input": 2}"#).expect_err("null id");
        assert_eq!(bad.id, "6");
        let bad = parse_input_line(7, "{not json").expect_err("not JSON");
        assert!(bad.reason.starts_with("line 7: not JSON"), "{}", bad.reason);
    }

    #[test]
    fn lines_are_bounded_and_split() {
        let long = "x".repeat(MAX_LINE_BYTES + 1);
        let text = format!("a\r\n{long}\nb");
        let mut r = std::io::BufReader::with_capacity(64, text.as_bytes());
        let mut buf = Vec::new();
        assert!(matches!(
            read_line(&mut r, &mut buf).unwrap(),
            Some(Line::Text("a"))
        ));
        assert!(matches!(
            read_line(&mut r, &mut buf).unwrap(),
            Some(Line::TooLong)
        ));
        assert!(buf.capacity() <= MAX_LINE_BYTES);
        assert!(matches!(
            read_line(&mut r, &mut buf).unwrap(),
            Some(Line::Text("b"))
        ));
        assert!(read_line(&mut r, &mut buf).unwrap().is_none());
    }
}
