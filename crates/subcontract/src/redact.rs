//! The one redaction every text leaving the process passes: traces, events, progress, errors
//! the CLI prints, MCP replies, recordings, log lines and request bodies.
//!
//! Every [`ApiKey`](crate::provider::ApiKey) registers its key here when it is made, so
//! whatever a provider echoes back (in an error, in a tool call's arguments, in an output) is
//! replaced by `***` wherever it is written. The registry is process-wide because the exits
//! are: a log writer or a trace file does not know which model a line came from. It holds each
//! distinct key once, zeroised when the process ends like any [`SecretString`].
//!
//! Keys shorter than [`MIN_SECRET_LEN`] bytes are not searched for: local servers take
//! placeholders such as `none` or `ollama`, and blanking every such word from every output
//! would destroy the output while protecting nothing.

use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::RwLock;

use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

/// The shortest key that is redacted (bytes).
pub const MIN_SECRET_LEN: usize = 8;

/// What is searched for: each key, and its JSON-escaped form when that differs (so a key with
/// a `"` or `\` is found in serialised JSON too).
static SECRETS: RwLock<Vec<SecretString>> = RwLock::new(Vec::new());

/// Adds `secret` to the texts every exit removes. Idempotent; short secrets are ignored (see
/// the module documentation).
pub fn register(secret: &str) {
    if secret.len() < MIN_SECRET_LEN {
        return;
    }
    let escaped = serde_json::to_string(secret).unwrap_or_default();
    let escaped = escaped
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(secret);
    let mut all = SECRETS.write().unwrap_or_else(|p| p.into_inner());
    for s in [secret, escaped] {
        if !all.iter().any(|k| k.expose_secret() == s) {
            all.push(SecretString::from(s));
        }
    }
}

/// Whether any key is registered: with none, there is nothing to redact.
pub fn any_registered() -> bool {
    !SECRETS.read().unwrap_or_else(|p| p.into_inner()).is_empty()
}

/// `text` with every registered key replaced by `***`; borrowed when there was none.
pub fn redact(text: &str) -> Cow<'_, str> {
    let all = SECRETS.read().unwrap_or_else(|p| p.into_inner());
    let mut out = Cow::Borrowed(text);
    for key in all.iter().map(ExposeSecret::expose_secret) {
        if out.contains(key) {
            out = Cow::Owned(out.replace(key, "***"));
        }
    }
    out
}

/// [`redact`] for a `String` the caller owns.
pub fn redact_string(text: String) -> String {
    match redact(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(clean) => clean,
    }
}

/// Redacts every string (and object key) inside `value`, so it stays valid JSON of the same
/// shape. Returns whether anything was replaced.
pub fn redact_value(value: &mut Value) -> bool {
    match value {
        Value::String(s) => match redact(s) {
            Cow::Owned(clean) => {
                *s = clean;
                true
            }
            Cow::Borrowed(_) => false,
        },
        Value::Array(items) => items.iter_mut().fold(false, |any, v| redact_value(v) | any),
        Value::Object(map) => {
            let dirty = map.keys().any(|k| matches!(redact(k), Cow::Owned(_)));
            if dirty {
                let old = std::mem::take(map);
                for (k, mut v) in old {
                    redact_value(&mut v);
                    map.insert(redact_string(k), v);
                }
                true
            } else {
                map.values_mut().fold(false, |any, v| redact_value(v) | any)
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// A writer that collects what is written and hands it on redacted when flushed or dropped:
/// one log line or event at a time, so a key split across two `write` calls is still found.
/// Bytes that are not UTF-8 are passed on lossily.
#[derive(Debug)]
pub struct RedactingWriter<W: Write> {
    inner: W,
    buf: Vec<u8>,
}

impl<W: Write> RedactingWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        RedactingWriter {
            inner,
            buf: Vec::new(),
        }
    }

    fn pass_on(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&self.buf);
        let result = self.inner.write_all(redact(&text).as_bytes());
        self.buf.clear();
        result
    }
}

impl<W: Write> Write for RedactingWriter<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.pass_on()?;
        self.inner.flush()
    }
}

impl<W: Write> Drop for RedactingWriter<W> {
    fn drop(&mut self) {
        // Nowhere to report a failed log write from a destructor; the next line will try again.
        let _ = self.pass_on();
        let _ = self.inner.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_keys_are_removed_from_text_json_and_writers() {
        register("sk-redact-unit-0123456789");
        register("q\"uote-redact-unit");
        register("short");
        assert_eq!(redact("key sk-redact-unit-0123456789 here"), "key *** here");
        assert!(matches!(redact("nothing secret"), Cow::Borrowed(_)));
        assert_eq!(redact("short stays"), "short stays", "too short to redact");
        let json = serde_json::json!({"q\"uote-redact-unit": ["a sk-redact-unit-0123456789"]});
        assert_eq!(redact(&json.to_string()), r#"{"***":["a ***"]}"#);
        let mut v = json;
        redact_value(&mut v);
        assert_eq!(v, serde_json::json!({"***": ["a ***"]}));
        let mut out = Vec::new();
        {
            let mut w = RedactingWriter::new(&mut out);
            w.write_all(b"split sk-redact-").unwrap();
            w.write_all(b"unit-0123456789\n").unwrap();
        }
        assert_eq!(out, b"split ***\n");
    }
}
