//! A flat "tape" JSON parser, for validating and decoding outputs without building a
//! `serde_json::Value`.
//!
//! A document parses into one `Vec` of fixed-size entries in document order. Containers record
//! their child count and the index one past their last descendant, so skipping a subtree is one
//! read. Strings without escapes borrow the input; escaped ones are decoded into one side buffer.
//! Parsing is strict like `serde_json`'s (trailing garbage, bad escapes, raw control characters,
//! bad or overflowing numbers, nesting past 127 levels are errors). Unlike `serde_json`, which
//! keeps the last of duplicate object keys, duplicate keys are an error here.
//!
//! The tape is only ever a fast path: a caller falls back to the `Value` path on any tape error
//! and on any rejection, so verdicts and messages are the `Value` path's (the tests check that
//! the two agree on every verdict and every decoded value).

mod de;
mod parse;
mod schema;
#[cfg(test)]
mod suites;
#[cfg(test)]
mod tests;

pub(crate) use parse::{Kind, Tape};
pub(crate) use schema::is_integer_literal;
pub(crate) use schema::TapeJson;
