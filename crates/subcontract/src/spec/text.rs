//! Specs whose output is text: `SubAgentSpec<I, String>`, bounded by a `maxLength` given when
//! the spec is built, since a `String` carries no bound of its own.

use std::any::Any;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use validator::Validate;

use super::builder::{schema_of, typed_decoder, SpecBuilder};
use super::core::{Decoder, Source};
use super::SubAgentSpec;
use crate::contract::Violation;

/// The most characters a text output may be given ([`SubAgentSpec::text`]): 1 MiB.
pub const MAX_TEXT_CHARS: usize = 1 << 20;

/// Compact JSON characters a text of `max_chars` characters can take: the quotes, and the
/// widest escape (`\u0000`) of every character. As the output size limit, it leaves the
/// `maxLength` alone to decide.
pub(crate) fn text_json_chars(max_chars: usize) -> usize {
    max_chars.saturating_mul(6).saturating_add(2)
}

impl<I> SubAgentSpec<I, String>
where
    I: Serialize + DeserializeOwned + JsonSchema + Validate + Send + 'static,
{
    /// A builder for a typed spec whose output is the model's final text, at most
    /// `max_chars` characters (the output schema is `{"type": "string", "maxLength":
    /// max_chars}`). [`builder`](SubAgentSpec::builder) cannot make one: it needs `O:
    /// Validate`, which a `String` is not, having no bound.
    ///
    /// The run ends when the model answers in text with no tool call; a longer text is sent
    /// back to be shortened, as any output that breaks its contract. The output size limit
    /// (`max_output_chars`) is set to the most compact JSON such a text can take, with every
    /// character escaped, so that the character count alone decides.
    ///
    /// ```
    /// use schemars::JsonSchema;
    /// use serde::{Deserialize, Serialize};
    /// use validator::Validate;
    /// use subcontract::SubAgentSpec;
    ///
    /// #[derive(Serialize, Deserialize, JsonSchema, Validate)]
    /// #[serde(deny_unknown_fields)]
    /// struct Task { #[validate(length(max = 500))] task: String }
    ///
    /// let spec = SubAgentSpec::<Task, String>::text("summarise", 2000)
    ///     .description("Summarises a text.")
    ///     .system("Summarise it in plain prose.")
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(spec.validate_output_json(r#""Short.""#).unwrap(), "Short.");
    /// assert!(spec.validate_output(&serde_json::json!("x".repeat(2001))).is_err());
    /// // No answer at all is no bound.
    /// assert!(SubAgentSpec::<Task, String>::text("empty", 0).description("…").build().is_err());
    /// ```
    ///
    /// `max_chars` is from 1 to [`MAX_TEXT_CHARS`]; any other is refused when the spec is
    /// built (an empty answer says nothing; a text past a mebibyte is not a small result).
    pub fn text(name: impl Into<String>, max_chars: usize) -> SpecBuilder<I, String> {
        let schema = if (1..=MAX_TEXT_CHARS).contains(&max_chars) {
            Ok(json!({"type": "string", "maxLength": max_chars}))
        } else {
            Err(format!(
                "a text output holds 1 to {MAX_TEXT_CHARS} characters, not {max_chars}"
            ))
        };
        SpecBuilder::new(
            name.into(),
            schema_of::<I>(),
            schema,
            typed_decoder::<I>(),
            text_decoder(),
        )
        .max_output_chars(text_json_chars(max_chars))
    }
}

/// Decodes an output the schema has already checked to be a string.
fn text_decoder() -> Box<Decoder> {
    fn not_text() -> Vec<Violation> {
        vec![Violation {
            path: String::new(),
            message: "expected text".into(),
        }]
    }
    Box::new(|source: Source<'_>| {
        let text = match source {
            Source::Value(Value::String(s)) => s.clone(),
            Source::Value(_) => return Err(not_text()),
            Source::Tape(t) => t.decode::<String>().map_err(|_| not_text())?,
        };
        Ok(Box::new(text) as Box<dyn Any + Send>)
    })
}
