//! Typed readers of TOML values: strings, integers, dollar amounts, and TOML → JSON for the
//! contracts and examples. Each reports a value of the wrong type as a diagnostic at the value.

use std::str::FromStr;

use rust_decimal::Decimal;
use serde_json::{Map, Number, Value};
use toml::de::DeValue;

use super::{shown, Item, Located, Parser, MAX_JSON_DEPTH};
use crate::diag::codes;

impl Parser<'_> {
    pub(super) fn invalid_type(
        &mut self,
        v: &Item<'_>,
        key: &str,
        expected: &str,
        found: &DeValue<'_>,
    ) {
        let message = format!("`{key}` must be {expected}, found {}", found.type_str());
        self.error(v.span(), codes::INVALID_VALUE, message);
    }

    /// A string value, or an `invalid-value` diagnostic. Placeholders left by syntax-error
    /// recovery have empty spans and are skipped silently: they were reported already.
    pub(super) fn string(
        &mut self,
        key: &str,
        v: &Item<'_>,
        expected: &str,
    ) -> Option<Located<String>> {
        if v.span().is_empty() {
            return None;
        }
        match v.get_ref() {
            DeValue::String(s) => Some(self.located(s.to_string(), v.span())),
            other => {
                self.invalid_type(v, key, expected, other);
                None
            }
        }
    }

    /// A boolean.
    pub(super) fn boolean(&mut self, key: &str, v: &Item<'_>) -> Option<Located<bool>> {
        if v.span().is_empty() {
            return None;
        }
        match v.get_ref() {
            DeValue::Boolean(b) => Some(self.located(*b, v.span())),
            other => {
                self.invalid_type(v, key, "true or false", other);
                None
            }
        }
    }

    /// A limit's integer: the type and range of its field, nothing more (zero is passed on:
    /// the spec builder checks limits, once, for files and Rust alike).
    pub(super) fn limit_int(&mut self, key: &str, v: &Item<'_>, max: u64) -> Option<Located<u64>> {
        self.int(key, v, max, codes::BAD_LIMITS)
    }

    /// A non-negative integer up to `max`; anything else is a diagnostic with `code`.
    pub(super) fn int(
        &mut self,
        key: &str,
        v: &Item<'_>,
        max: u64,
        code: &str,
    ) -> Option<Located<u64>> {
        if v.span().is_empty() {
            return None;
        }
        let problem = match v.get_ref() {
            DeValue::Integer(i) => match i128::from_str_radix(i.as_str(), i.radix()) {
                Ok(n) if n < 0 => format!("`{key}` must be a positive integer, found {n}"),
                Ok(n) => match u64::try_from(n) {
                    Ok(n) if n <= max => return Some(self.located(n, v.span())),
                    _ => format!("`{key}` is too large (at most {max}), found {n}"),
                },
                Err(_) => format!("`{key}` is too large (at most {max})"),
            },
            other => format!(
                "`{key}` must be a positive integer, found {}",
                other.type_str()
            ),
        };
        self.error(v.span(), code, problem);
        None
    }

    /// A number (a TOML float or integer) as `f64`; its range is the builder's to check.
    pub(super) fn float(&mut self, key: &str, v: &Item<'_>) -> Option<Located<f64>> {
        if v.span().is_empty() {
            return None;
        }
        let parsed = match v.get_ref() {
            DeValue::Float(f) => f.as_str().parse::<f64>().ok(),
            DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix())
                .ok()
                .map(|n| n as f64),
            other => {
                self.invalid_type(v, key, "a number", other);
                return None;
            }
        };
        match parsed {
            Some(x) => Some(self.located(x, v.span())),
            None => {
                self.error(
                    v.span(),
                    codes::INVALID_VALUE,
                    format!("`{key}` must be a number"),
                );
                None
            }
        }
    }

    /// `max_cost_usd` as an exact decimal; its range is the builder's to check.
    pub(super) fn cost(&mut self, v: &Item<'_>) -> Option<Located<Decimal>> {
        if v.span().is_empty() {
            return None;
        }
        let expected = "`max_cost_usd` must be a decimal number of US dollars such as \"0.20\"";
        let parsed = match v.get_ref() {
            DeValue::String(s) => Decimal::from_str_exact(s.trim())
                .map_err(|_| format!("{expected}, found \"{}\"", shown(s))),
            DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix())
                .ok()
                .and_then(|n| Decimal::from_str_exact(&n.to_string()).ok())
                .ok_or_else(|| format!("{expected}; {i} is out of range")),
            // Go through the float's shortest round-trip text, so 0.2 is 0.2, not
            // 0.200000000000000011102230246251565404236316680908203125.
            DeValue::Float(f) => f
                .as_str()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .and_then(|x| Decimal::from_str(&x.to_string()).ok())
                .ok_or_else(|| format!("{expected}, found {f}")),
            other => Err(format!("{expected}, found {}", other.type_str())),
        };
        match parsed {
            Ok(d) => Some(self.located(d, v.span())),
            Err(message) => {
                self.error(v.span(), codes::BAD_LIMITS, message);
                None
            }
        }
    }

    /// TOML → JSON. Integers stay integers and floats floats; datetimes become their RFC 3339
    /// text. What JSON cannot hold (NaN, infinities, integers past u64) is `invalid-value`.
    pub(super) fn json(&mut self, v: &Item<'_>, depth: usize) -> Option<Value> {
        if depth > MAX_JSON_DEPTH {
            self.error(v.span(), codes::INVALID_VALUE, "value is nested too deeply");
            return None;
        }
        Some(match v.get_ref() {
            DeValue::String(s) => Value::String(s.to_string()),
            DeValue::Integer(i) => {
                let n = i64::from_str_radix(i.as_str(), i.radix())
                    .map(Number::from)
                    .or_else(|_| u64::from_str_radix(i.as_str(), i.radix()).map(Number::from));
                match n {
                    Ok(n) => Value::Number(n),
                    Err(_) => {
                        self.error(
                            v.span(),
                            codes::INVALID_VALUE,
                            format!("integer {i} is out of range"),
                        );
                        return None;
                    }
                }
            }
            DeValue::Float(f) => match f.as_str().parse::<f64>().ok().and_then(Number::from_f64) {
                Some(n) => Value::Number(n),
                None => {
                    self.error(
                        v.span(),
                        codes::INVALID_VALUE,
                        format!("{f} has no JSON equivalent (JSON has no NaN or infinity)"),
                    );
                    return None;
                }
            },
            DeValue::Boolean(b) => Value::Bool(*b),
            DeValue::Datetime(d) => Value::String(d.to_string()),
            DeValue::Array(a) => {
                let mut out = Vec::with_capacity(a.len());
                let mut ok = true;
                for item in a.iter() {
                    // Keep going after a failure, to report every bad value.
                    match self.json(item, depth + 1) {
                        Some(j) => out.push(j),
                        None => ok = false,
                    }
                }
                if !ok {
                    return None;
                }
                Value::Array(out)
            }
            DeValue::Table(t) => {
                let mut out = Map::with_capacity(t.len());
                let mut ok = true;
                for (key, item) in t.iter() {
                    match self.json(item, depth + 1) {
                        Some(j) => {
                            out.insert(key.get_ref().to_string(), j);
                        }
                        None => ok = false,
                    }
                }
                if !ok {
                    return None;
                }
                Value::Object(out)
            }
        })
    }
}
