//! The model abstraction: one object-safe trait that every provider implements.
//!
//! A [`ModelRequest`] borrows the conversation instead of owning it, so the run loop never
//! clones a whole history to make a call. Providers translate it to their wire format.

mod foreign;
mod price;
mod prompt_cache;
mod rate;
mod replay;
mod scripted;

pub use foreign::ForeignError;
pub(crate) use price::{cost_at, worst_case_at, Rates};
pub use price::{Price, PriceError, PriceTable};
pub use prompt_cache::PromptCache;
pub use rate::{RateLimited, RateLimits, RetryAfter};
pub use replay::{RecordedExchange, Recorder, ReplayError, ReplayModel};
pub use scripted::{ScriptStep, ScriptedModel};

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Name of the tool a sub-agent calls to hand back its output; its input schema is the
/// output schema.
pub const SUBMIT_TOOL: &str = "submit_output";

pub(crate) const SUBMIT_DESCRIPTION: &str = "Submit your final answer. Call this exactly once, when you are done; its arguments are the answer and must match this schema.";

/// One tool call requested by a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for this call; echoed back in the matching [`ToolResult`].
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as the model sent them.
    pub arguments: Arguments,
}

/// A tool call's arguments as the model sent them: the text a provider delivered, or a value.
///
/// Both HTTP providers hand over the text as it arrived (OpenAI's `arguments`, Anthropic's
/// `input`). The run loop parses it when it handles the call, so text that is not JSON goes
/// back to the model as an error instead of failing the run, and a submitted output is checked
/// and decoded on its text without building a `Value` first. Text is read once: text that
/// encodes a string (a double-encoded object) is that string, and fails an object schema.
///
/// Recorded (`--record`, replay files) as the JSON string of the text or as the value itself,
/// so a string in a recording reads back as text.
///
/// ```
/// use serde_json::json;
/// use subcontract::model::Arguments;
///
/// let text = Arguments::Text(r#"{"path": "src/lib.rs"}"#.into());
/// assert_eq!(text.parse().unwrap().as_ref(), &json!({"path": "src/lib.rs"}));
/// assert!(Arguments::Text("{\"path\":".into()).parse().is_err());
/// // A JSON string given as a value is text, as a provider would have delivered it.
/// assert_eq!(Arguments::from(json!("{}")), Arguments::Text("{}".into()));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Arguments {
    /// JSON text exactly as the provider delivered it; it may not even be JSON.
    Text(String),
    /// A JSON value (scripted and example models, a server that sent an object).
    Value(Value),
}

impl Arguments {
    /// The arguments as a JSON value, borrowed when they already are one; for text that is
    /// not JSON, the message the model gets back.
    pub fn parse(&self) -> Result<std::borrow::Cow<'_, Value>, String> {
        match self {
            Arguments::Text(s) => serde_json::from_str(s)
                .map(std::borrow::Cow::Owned)
                .map_err(|e| crate::contract::not_json(s, &e)),
            Arguments::Value(v) => Ok(std::borrow::Cow::Borrowed(v)),
        }
    }

    /// Bytes of the arguments as a provider is sent them: text as it is, a value compact.
    pub(crate) fn sent_len(&self) -> usize {
        match self {
            Arguments::Text(s) => s.len(),
            Arguments::Value(v) => crate::json::compact_bytes(v),
        }
    }

    /// The value itself; text is parsed, and text that is not JSON is a JSON string.
    pub fn into_value(self) -> Value {
        match self {
            Arguments::Text(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
            Arguments::Value(v) => v,
        }
    }
}

impl From<Value> for Arguments {
    /// A JSON string is text, as a provider delivers it; any other value is itself.
    fn from(v: Value) -> Self {
        match v {
            Value::String(s) => Arguments::Text(s),
            v => Arguments::Value(v),
        }
    }
}

/// The result of one tool call, sent back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the [`ToolCall`] this answers.
    pub call_id: String,
    /// Text content (compact JSON for structured results).
    pub content: String,
    /// Whether the call failed; the model sees the flag and the text.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

/// One message of a conversation. The system prompt is not a message: it travels in
/// [`ModelRequest::system`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Text from the user (or from the framework speaking for it, such as a repair request).
    User {
        /// The text.
        text: String,
    },
    /// A model turn: optional text and any number of tool calls.
    Assistant {
        /// Text the model produced, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// Tool calls, in the order the model made them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The results of every tool call of the previous assistant turn, in call order, with an
    /// optional note after them (for example "1 of 3 sub-agent calls failed").
    ToolResults {
        /// One result per call.
        results: Vec<ToolResult>,
        /// Text the framework adds after the results.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
}

impl Message {
    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Message::User { text: text.into() }
    }
}

/// A tool as offered to a model. Cloning is cheap (shared text and schema): every run offers
/// its tools anew.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Name the model calls it by.
    pub name: Arc<str>,
    /// What it is for; models read this to decide when to call it.
    pub description: Arc<str>,
    /// JSON Schema (draft 2020-12) of the arguments, in full. Providers that accept only a
    /// dialect of JSON Schema convert it (see [`crate::provider::dialect`]); our own validation enforces
    /// the full schema on what comes back.
    pub input_schema: Arc<Value>,
}

/// What the run loop asks of a model for one turn. Everything is borrowed: building a request
/// costs nothing proportional to the history.
///
/// Built with [`ModelRequest::new`] and the `with_*` methods, so that fields added later do
/// not break a caller:
///
/// ```
/// use subcontract::model::{ModelRequest, Sampling, ToolChoice};
///
/// let req = ModelRequest::new("Be brief.", &[], &[], 256)
///     .with_sampling(Sampling { temperature: Some(0.0), ..Sampling::default() })
///     .with_tool_choice(ToolChoice::Required);
/// assert_eq!(req.sampling.temperature, Some(0.0));
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ModelRequest<'a> {
    /// The system prompt.
    pub system: &'a str,
    /// The conversation so far, oldest first.
    pub messages: &'a [Message],
    /// The tools the model may call.
    pub tools: &'a [ToolDefinition],
    /// Upper bound on output tokens for this turn.
    pub max_tokens: u32,
    /// Sampling settings; each one absent leaves the provider's default.
    pub sampling: Sampling,
    /// Whether the model may answer in text, must call a tool, or must call one named tool.
    pub tool_choice: ToolChoice<'a>,
    /// A JSON Schema the answer's text must follow (a provider's structured output), if any.
    pub response_format: Option<&'a ResponseFormat>,
    /// Where to report a provider's request to wait (`Retry-After`) so that every caller
    /// sharing a rate limit waits, not only this one; set by [`RateLimited`].
    pub retry_after: Option<&'a RetryAfter>,
    /// Prompt caching for this call, overriding the provider's own setting when set (a
    /// spec's `prompt_cache`, else its host's).
    pub prompt_cache: Option<PromptCache>,
    /// The name of the spec whose run makes this call (`host` for a host's own
    /// [`ask`](crate::Ctx::ask)), when a run makes it. Providers send nothing of it; a
    /// scripted model answers by it ([`ScriptedModel::per_spec`]).
    pub spec: Option<&'a str>,
    /// When the caller stops waiting for the answer: a run's end (its start and its spec's
    /// `timeout`). A provider gives the request no longer than what is left of it (and its
    /// own ceiling, [`ProviderConfig::timeout`](crate::provider::ProviderConfig::timeout)),
    /// so a request's own timeout never ends a run that its spec would let go on.
    pub deadline: Option<std::time::Instant>,
    /// Text at which the model's generation is to stop, where the provider takes stop
    /// sequences: OpenAI-compatible servers (llama.cpp, vLLM, Ollama) as `stop`; not sent to
    /// OpenAI's own API (its reasoning models refuse it) nor to Anthropic's. The run loop
    /// sets `<tool_response>` on a turn whose calls may come as text.
    pub stop: &'a [&'a str],
}

impl<'a> ModelRequest<'a> {
    /// A request with the provider's default sampling, free tool choice and no response format.
    pub fn new(
        system: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolDefinition],
        max_tokens: u32,
    ) -> Self {
        ModelRequest {
            system,
            messages,
            tools,
            max_tokens,
            sampling: Sampling::default(),
            tool_choice: ToolChoice::Auto,
            response_format: None,
            retry_after: None,
            prompt_cache: None,
            spec: None,
            deadline: None,
            stop: &[],
        }
    }

    /// The same request, asking the model to stop at any of `stop`.
    pub fn with_stop(mut self, stop: &'a [&'a str]) -> Self {
        self.stop = stop;
        self
    }

    /// The same request, its answer awaited until `deadline` at most.
    pub fn with_deadline(mut self, deadline: Option<std::time::Instant>) -> Self {
        self.deadline = deadline;
        self
    }

    /// The same request, made by a run of the spec `name`.
    pub fn with_spec(mut self, name: &'a str) -> Self {
        self.spec = Some(name);
        self
    }

    /// The same request with these sampling settings.
    pub fn with_sampling(mut self, sampling: Sampling) -> Self {
        self.sampling = sampling;
        self
    }

    /// The same request with this tool choice.
    pub fn with_tool_choice(mut self, tool_choice: ToolChoice<'a>) -> Self {
        self.tool_choice = tool_choice;
        self
    }

    /// The same request asking for text that follows `format`'s schema.
    pub fn with_response_format(mut self, format: &'a ResponseFormat) -> Self {
        self.response_format = Some(format);
        self
    }

    /// The same request with this prompt caching, whatever the provider's own setting.
    pub fn with_prompt_cache(mut self, cache: Option<PromptCache>) -> Self {
        self.prompt_cache = cache;
        self
    }

    /// The same request reporting a provider's `Retry-After` to `handle`.
    pub fn with_retry_after(mut self, handle: &'a RetryAfter) -> Self {
        self.retry_after = Some(handle);
        self
    }
}

/// Sampling settings sent with every model call of a run. `None` sends nothing, leaving the
/// provider's (or local server's) default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sampling {
    /// Sampling temperature (`0` is the most deterministic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling: the probability mass the next token is drawn from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// A seed, for providers that sample reproducibly with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// What a model may do with the tools it is offered this turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ToolChoice<'a> {
    /// Answer in text or call any tool (the providers' default).
    #[default]
    Auto,
    /// Call at least one of the offered tools.
    Required,
    /// Call this tool.
    Tool(&'a str),
}

/// A schema the answer's text must follow: a provider's structured output
/// (`response_format: {type: json_schema}` on OpenAI-compatible servers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseFormat {
    /// A name for the schema (`[A-Za-z0-9_-]{1,64}`), as the APIs require one.
    pub name: Arc<str>,
    /// JSON Schema (draft 2020-12) in full; providers convert it to their dialect.
    pub schema: Arc<Value>,
}

/// Token usage of one model call.
///
/// `input_tokens` counts every token read, cached or not; `cache_read_tokens` and
/// `cache_write_tokens` say how many of them were read from or written to a provider's prompt
/// cache, which are priced apart ([`Price`]). Sums saturate at `u64::MAX` instead of wrapping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Usage {
    /// Tokens read (prompt), including cached ones.
    pub input_tokens: u64,
    /// Tokens produced (completion).
    pub output_tokens: u64,
    /// Of `input_tokens`, those read from the prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Of `input_tokens`, those written to the prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// Of `cache_write_tokens`, those written to last an hour (Anthropic's `ttl: "1h"`),
    /// priced apart.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_1h_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Usage of `input_tokens` uncached input and `output_tokens` output.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Usage {
            input_tokens,
            output_tokens,
            ..Usage::default()
        }
    }
}

/// `1200 in / 30 out tokens`, then the prompt cache's share when it had one:
/// `, cache 900 read / 200 written`.
///
/// ```
/// use subcontract::model::Usage;
///
/// let mut u = Usage::new(1200, 30);
/// assert_eq!(u.to_string(), "1200 in / 30 out tokens");
/// u.cache_read_tokens = 900;
/// u.cache_write_tokens = 200;
/// assert_eq!(u.to_string(), "1200 in / 30 out tokens, cache 900 read / 200 written");
/// ```
impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} in / {} out tokens",
            self.input_tokens, self.output_tokens
        )?;
        if self.cache_read_tokens > 0 || self.cache_write_tokens > 0 {
            write!(
                f,
                ", cache {} read / {} written",
                self.cache_read_tokens, self.cache_write_tokens
            )?;
        }
        Ok(())
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, rhs: Self) {
        self.input_tokens = self.input_tokens.saturating_add(rhs.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(rhs.output_tokens);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(rhs.cache_read_tokens);
        self.cache_write_1h_tokens = self
            .cache_write_1h_tokens
            .saturating_add(rhs.cache_write_1h_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(rhs.cache_write_tokens);
    }
}

/// Why a model stopped producing output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// It finished its turn.
    EndTurn,
    /// It wants tool results.
    ToolUse,
    /// It hit `max_tokens`; the output may be cut off.
    MaxTokens,
    /// Anything else the provider reported (content filter, …).
    Other,
}

/// What a model returned for one turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// Text, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Tool calls, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Tokens used by this call.
    #[serde(default)]
    pub usage: Usage,
    /// Why it stopped.
    pub stop_reason: StopReason,
}

/// A failed model call. Every provider maps its failures to one of these; none panics.
#[derive(Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The provider answered with an HTTP error status.
    #[error("{provider} returned HTTP {status}: {message}")]
    Http {
        /// Provider name (`openai`, `anthropic`).
        provider: String,
        /// HTTP status code.
        status: u16,
        /// The provider's own error message (never contains credentials).
        message: String,
    },
    /// The request could not be sent or the connection failed.
    #[error("{provider}: connection failed: {message}")]
    Connection {
        /// Provider name.
        provider: String,
        /// What went wrong.
        message: String,
    },
    /// The provider did not answer in time.
    #[error("{provider}: request timed out after {secs} s")]
    Timeout {
        /// Provider name.
        provider: String,
        /// The timeout that elapsed.
        secs: u64,
    },
    /// The provider's answer could not be understood (malformed or truncated JSON, missing
    /// fields).
    #[error("{provider}: malformed response: {message}")]
    MalformedResponse {
        /// Provider name.
        provider: String,
        /// What was wrong with it.
        message: String,
    },
    /// The provider answered, so the call happened and is billed, but the token counts of
    /// its `usage` cannot be read (negative, fractional, not a number, inconsistent, missing
    /// where the API always sends them). Its cost is unknown, so the run loop charges the call
    /// its whole reservation ([`ModelError::cost_unknown`]). A count past `u64::MAX` is not
    /// this error: it saturates, and its cost exhausts any budget.
    #[error("{provider}: unreadable usage: {message}")]
    UnreadableUsage {
        /// Provider name.
        provider: String,
        /// Which count, and what was wrong with it.
        message: String,
    },
    /// A scripted or replay model has no answer for this request.
    #[error("{0}")]
    Exhausted(String),
    /// Configuration is missing or wrong (no API key, unknown provider, bad URL).
    #[error("model configuration: {0}")]
    Config(String),
    /// The error of a client this crate does not know, from a user's own [`Model`] built on
    /// another library; its text is redacted when shown.
    #[error(transparent)]
    Foreign(ForeignError),
}

crate::debug_as_display!(ModelError);

impl ModelError {
    /// Whether the call was answered, and so billed, but its cost cannot be known: the
    /// caller charges it its whole reservation rather than nothing.
    pub fn cost_unknown(&self) -> bool {
        matches!(self, ModelError::UnreadableUsage { .. })
    }

    /// `error`, from another client library, as a [`ModelError::Foreign`].
    pub fn foreign(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        ModelError::Foreign(ForeignError::new(error))
    }
}

/// A language model. Object-safe: the run loop holds an `Arc<dyn Model>`.
///
/// Implementations must be cheap to call concurrently (`&self`), must not panic on any input
/// from the network, and must report usage when the provider does.
#[async_trait]
pub trait Model: Send + Sync {
    /// The model's id as `provider:model` (`openai:gpt-4.1-mini`, `scripted:demo`); used to
    /// look up its price and in traces.
    fn id(&self) -> &str;

    /// Runs one turn.
    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError>;

    /// The prompt caching this model asks its provider for when a request sets none; `None`
    /// (the default) for a model with no provider cache (scripted, replayed). A wrapper
    /// answers for the model it wraps.
    fn prompt_cache(&self) -> Option<PromptCache> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::Usage;

    #[test]
    fn usage_sums_saturate_instead_of_wrapping() {
        let mut total = Usage {
            input_tokens: u64::MAX - 1,
            output_tokens: u64::MAX,
            cache_read_tokens: u64::MAX,
            cache_write_tokens: 1,
            cache_write_1h_tokens: 0,
        };
        total += Usage {
            input_tokens: 5,
            output_tokens: 5,
            cache_read_tokens: 5,
            cache_write_tokens: 5,
            cache_write_1h_tokens: 5,
        };
        assert_eq!(
            total,
            Usage {
                input_tokens: u64::MAX,
                output_tokens: u64::MAX,
                cache_read_tokens: u64::MAX,
                cache_write_tokens: 6,
                cache_write_1h_tokens: 5,
            }
        );
        // Cache counts are left out of JSON when zero and default to zero when absent.
        let json = serde_json::to_string(&Usage::new(3, 4)).expect("serialises");
        assert_eq!(json, r#"{"input_tokens":3,"output_tokens":4}"#);
        assert_eq!(
            serde_json::from_str::<Usage>(&json).ok(),
            Some(Usage::new(3, 4))
        );
    }
}
