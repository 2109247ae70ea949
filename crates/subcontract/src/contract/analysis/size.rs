//! Sizes of subschemas and how they combine, and the sizes of numbers and literal values.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// Longest rendering of an `f64` by serde_json (shortest round-trip), e.g.
/// "-2.2250738585072014e-308".
pub(super) const NUMBER_CHARS: u64 = 24;

/// The size of one subschema.
#[derive(Debug, Clone)]
pub(super) enum Size {
    /// No instance is valid (`false`, an empty `enum`, an empty integer range).
    Never,
    /// Every valid instance is at most this many characters.
    Bounded(u64),
    /// Unbounded, for the problems with these ids (indices into `Analyzer::problems`, which are
    /// in discovery order). A set, so problems reached through many `$ref`s stay deduplicated.
    Unbounded(BTreeSet<usize>),
}

/// Largest of alternatives (`anyOf`, `oneOf`, type arrays): unbounded if any alternative is.
pub(super) fn max_of(sizes: Vec<Size>) -> Size {
    let mut best: Option<u64> = None;
    let mut problems = BTreeSet::new();
    for size in sizes {
        match size {
            Size::Never => {}
            Size::Bounded(n) => best = Some(best.map_or(n, |b| b.max(n))),
            Size::Unbounded(p) => problems.extend(p),
        }
    }
    if !problems.is_empty() {
        Size::Unbounded(problems)
    } else {
        best.map_or(Size::Never, Size::Bounded)
    }
}

/// Smallest of constraints that must all hold (`allOf`, own keywords beside compositions):
/// any bounded one bounds the instance.
pub(super) fn min_of(sizes: Vec<Size>) -> Size {
    let mut best: Option<u64> = None;
    let mut problems = BTreeSet::new();
    for size in sizes {
        match size {
            Size::Never => return Size::Never,
            Size::Bounded(n) => best = Some(best.map_or(n, |b| b.min(n))),
            Size::Unbounded(p) => problems.extend(p),
        }
    }
    best.map_or(Size::Unbounded(problems), Size::Bounded)
}

/// Size of an `integer` (or integral `number`) from its bounds; a missing bound is the `i64`
/// extreme on that side.
pub(super) fn integer_size(map: &Map<String, Value>) -> Size {
    let mut low = i64::MIN;
    let mut high = i64::MAX;
    if let Some(n) = map.get("minimum").and_then(Value::as_number) {
        low = low.max(ceil_i64(n));
    }
    if let Some(n) = map.get("exclusiveMinimum").and_then(Value::as_number) {
        low = low.max(floor_i64(n).saturating_add(1));
    }
    if let Some(n) = map.get("maximum").and_then(Value::as_number) {
        high = high.min(floor_i64(n));
    }
    if let Some(n) = map.get("exclusiveMaximum").and_then(Value::as_number) {
        high = high.min(ceil_i64(n).saturating_sub(1));
    }
    if low > high {
        return Size::Never;
    }
    // An integral float is an integer to JSON Schema, and comes back longer: `100.0` (or
    // `1e2`) is written `100.0`, two characters more, and from 1e16 on in exponent form, up to
    // the longest number. Text length grows with magnitude on each side of zero, so one of the
    // bounds is longest.
    const EXPONENT_FORM: i64 = 10_000_000_000_000_000;
    if low <= -EXPONENT_FORM || high >= EXPONENT_FORM {
        return Size::Bounded(NUMBER_CHARS);
    }
    Size::Bounded(decimal_len(low).max(decimal_len(high)) + 2)
}

fn floor_i64(n: &serde_json::Number) -> i64 {
    if let Some(i) = n.as_i64() {
        i
    } else if n.as_u64().is_some() {
        i64::MAX
    } else {
        // `as` saturates, which is the clamping wanted here.
        n.as_f64().map_or(0, |f| f.floor() as i64)
    }
}

fn ceil_i64(n: &serde_json::Number) -> i64 {
    if let Some(i) = n.as_i64() {
        i
    } else if n.as_u64().is_some() {
        i64::MAX
    } else {
        n.as_f64().map_or(0, |f| f.ceil() as i64)
    }
}

pub(super) fn decimal_len(n: i64) -> u64 {
    u64::try_from(n.to_string().len()).unwrap_or(u64::MAX)
}

pub(super) fn is_integral(v: &Value) -> bool {
    v.as_i64().is_some() || v.as_u64().is_some() || v.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// A non-negative integer keyword value (`maxLength`, `maxItems`, …); `5.0` counts as 5.
pub(super) fn as_count(v: &Value) -> Option<u64> {
    if let Some(n) = v.as_u64() {
        return Some(n);
    }
    match v.as_f64() {
        // `as` saturates at u64::MAX for huge values.
        Some(f) if f >= 0.0 && f.fract() == 0.0 => Some(f as u64),
        _ => None,
    }
}

pub(super) fn char_count(s: &str) -> u64 {
    u64::try_from(s.chars().count()).unwrap_or(u64::MAX)
}
