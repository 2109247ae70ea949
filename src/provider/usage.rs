//! Token counts as providers send them.

use serde_json::Value;

/// A token count from a provider's `usage`. A missing or null count is 0; a non-negative
/// integer is itself, also when it arrives as an integral float (`5000000.0`, `5e6`) or a
/// numeric string (`"5000000"`), as some OpenAI-compatible servers send it. Anything else
/// (negative, fractional, past `u64::MAX`, not a number) is an error saying what is wrong,
/// which the caller turns into a malformed response: a call is never counted as free because
/// its count had an odd form.
pub(super) fn token_count(v: Option<&Value>) -> Result<u64, String> {
    match v {
        None | Some(Value::Null) => Ok(0),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(n) => Ok(n),
            None => integral(n.as_f64()).ok_or_else(|| format!("is not a token count ({n})")),
        },
        Some(Value::String(s)) => {
            let t = s.trim();
            t.parse::<u64>()
                .ok()
                .or_else(|| integral(t.parse::<f64>().ok()))
                .ok_or_else(|| {
                    let shown: String = crate::redact::redact(s).chars().take(40).collect();
                    format!("is not a token count ({shown:?})")
                })
        }
        Some(other) => Err(format!("is not a token count (a JSON {})", kind(other))),
    }
}

/// `f` as a `u64` when it is a whole number in range.
fn integral(f: Option<f64>) -> Option<u64> {
    // 2^64 is the first f64 past u64::MAX.
    const PAST_U64: f64 = 18_446_744_073_709_551_616.0;
    let f = f.filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0 && *f < PAST_U64)?;
    Some(f as u64)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_in_any_faithful_form_are_read_and_others_refused() {
        for (v, n) in [
            (json!(5000000), 5_000_000),
            (json!(5000000.0), 5_000_000),
            (json!(5e6), 5_000_000),
            (json!("5000000"), 5_000_000),
            (json!(" 5000000.0 "), 5_000_000),
            (json!(u64::MAX), u64::MAX),
            (json!(null), 0),
        ] {
            assert_eq!(token_count(Some(&v)), Ok(n), "{v}");
        }
        assert_eq!(token_count(None), Ok(0));
        for v in [
            json!(1e30),
            json!(-1),
            json!(2.5),
            json!("1e30"),
            json!("lots"),
            json!("NaN"),
            json!("inf"),
            json!(true),
            json!([1]),
        ] {
            assert!(token_count(Some(&v)).is_err(), "{v}");
        }
    }
}
