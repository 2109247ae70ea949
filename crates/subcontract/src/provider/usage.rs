//! Token counts as providers send them, read so that a call is never counted as cheaper than
//! it was: a count past `u64::MAX` saturates (its cost then exhausts any budget), and a count
//! that cannot be read makes the usage unreadable, which the run loop charges at the call's
//! whole reservation.

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::Value;

use super::transport::Transport;
use crate::model::{ModelError, Usage};

/// What a count was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Count {
    /// A count, read faithfully.
    Exact(u64),
    /// A whole number past `u64::MAX`: counted as `u64::MAX`.
    Saturated,
}

/// A token count from a provider's `usage`. A missing or null count is 0; a non-negative
/// integer is itself, also when it arrives as an integral float (`5000000.0`, `5e6`) or a
/// numeric string (`"5000000"`), as some OpenAI-compatible servers send it; a whole number
/// past `u64::MAX` (`1e30`) saturates. Anything else (negative, fractional, not a number) is
/// an error saying what is wrong.
pub(super) fn token_count(v: Option<&Value>) -> Result<Count, String> {
    match v {
        None | Some(Value::Null) => Ok(Count::Exact(0)),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(n) => Ok(Count::Exact(n)),
            None => whole(n.as_f64()).ok_or_else(|| format!("is not a token count ({n})")),
        },
        Some(Value::String(s)) => {
            let t = s.trim();
            match t.parse::<u64>() {
                Ok(n) => Ok(Count::Exact(n)),
                // Digits only, too many of them: past u64.
                Err(_) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => {
                    Ok(Count::Saturated)
                }
                Err(_) => whole(t.parse::<f64>().ok()).ok_or_else(|| {
                    let shown = crate::contract::truncate_chars(&crate::redact::redact(s), 40);
                    format!("is not a token count ({shown:?})")
                }),
            }
        }
        Some(other) => Err(format!("is not a token count (a JSON {})", kind(other))),
    }
}

/// `f` as a count when it is a whole, non-negative, finite number.
fn whole(f: Option<f64>) -> Option<Count> {
    // 2^64 is the first f64 past u64::MAX.
    const PAST_U64: f64 = 18_446_744_073_709_551_616.0;
    let f = f.filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0)?;
    Some(if f < PAST_U64 {
        Count::Exact(f as u64)
    } else {
        Count::Saturated
    })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// An answer's `usage` as the provider's usage type: anything but an object of that shape is
/// unreadable usage (serde alone would read an array into the struct by position).
pub(super) fn usage_object<T: DeserializeOwned>(
    transport: &Transport,
    raw: &RawValue,
) -> Result<T, ModelError> {
    let unreadable = |why: String| {
        let shown = crate::contract::truncate_chars(&crate::redact::redact(raw.get()), 60);
        transport.unreadable_usage(format!("`usage` is not a usage object ({why}): {shown}"))
    };
    if !raw.get().starts_with('{') {
        return Err(unreadable("not a JSON object".to_string()));
    }
    serde_json::from_str(raw.get()).map_err(|e| unreadable(e.to_string()))
}

/// Reads the counts of one answer's `usage`, remembering whether any saturated.
pub(super) struct Counts<'t> {
    transport: &'t Transport,
    saturated: Vec<&'static str>,
}

impl<'t> Counts<'t> {
    pub(super) fn new(transport: &'t Transport) -> Self {
        Counts {
            transport,
            saturated: Vec::new(),
        }
    }

    /// The count at `usage.{field}`; a count that cannot be read is a
    /// [`ModelError::UnreadableUsage`] naming it.
    pub(super) fn get(
        &mut self,
        field: &'static str,
        v: Option<&Value>,
    ) -> Result<u64, ModelError> {
        match token_count(v) {
            Ok(Count::Exact(n)) => Ok(n),
            Ok(Count::Saturated) => {
                self.saturated.push(field);
                Ok(u64::MAX)
            }
            Err(e) => Err(self
                .transport
                .unreadable_usage(format!("`usage.{field}` {e}"))),
        }
    }

    /// `a + b`, saturating; a sum past `u64::MAX` is noted like a count past it.
    pub(super) fn add(&mut self, what: &'static str, a: u64, b: u64) -> u64 {
        a.checked_add(b).unwrap_or_else(|| {
            self.saturated.push(what);
            u64::MAX
        })
    }

    /// An unreadable usage: the counts contradict each other.
    pub(super) fn inconsistent(&self, message: &str) -> ModelError {
        self.transport.unreadable_usage(message)
    }

    /// `usage`, after saying (once per answer) which counts saturated.
    pub(super) fn finish(self, usage: Usage) -> Usage {
        if !self.saturated.is_empty() {
            tracing::warn!(
                provider = self.transport.provider(),
                counts = self.saturated.join(", "),
                "token counts past 2^64 in a provider's usage are counted as 2^64 - 1"
            );
        }
        usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_in_any_faithful_form_are_read_and_others_refused() {
        for (v, n) in [
            (json!(5000000), Count::Exact(5_000_000)),
            (json!(5000000.0), Count::Exact(5_000_000)),
            (json!(5e6), Count::Exact(5_000_000)),
            (json!("5000000"), Count::Exact(5_000_000)),
            (json!(" 5000000.0 "), Count::Exact(5_000_000)),
            (json!(u64::MAX), Count::Exact(u64::MAX)),
            (json!(null), Count::Exact(0)),
            // Past u64: saturated, never refused (which would make the call free).
            (json!(1e30), Count::Saturated),
            (json!("1e30"), Count::Saturated),
            (json!("18446744073709551616"), Count::Saturated),
        ] {
            assert_eq!(token_count(Some(&v)), Ok(n), "{v}");
        }
        assert_eq!(token_count(None), Ok(Count::Exact(0)));
        for v in [
            json!(-1),
            json!(2.5),
            json!("-3"),
            json!("lots"),
            json!(""),
            json!("NaN"),
            json!("inf"),
            json!(true),
            json!([1]),
        ] {
            assert!(token_count(Some(&v)).is_err(), "{v}");
        }
    }
}
