//! `openai:MODEL`: the Chat Completions API (`POST {base_url}/chat/completions`), spoken by
//! OpenAI and by OpenAI-compatible servers (vLLM, Ollama, llama.cpp server, LM Studio).
//!
//! What a [`ModelRequest`] becomes on the wire:
//!
//! | request | Chat Completions |
//! |---|---|
//! | `sampling` | `temperature`, `top_p`, `seed` (each only when set; a seed past `i64::MAX` is refused) |
//! | `tool_choice` | `Auto`: not sent (the default); `Required`: `"required"`; `Tool(n)`: `{"type": "function", "function": {"name": n}}` |
//! | `response_format` | `{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`: with [`OpenAiModel::strict`], the schema in OpenAI's dialect ([`dialect::openai`]), `strict` when strict mode takes it; without (the default), the full schema and `strict: false` |
//! | `max_tokens` | `max_completion_tokens`, or `max_tokens` ([`MaxTokensField`]) |
//! | (prompt caching) | `prompt_cache_key`: a hash of the tools and system prompt ([`PromptCache`]) |
//! | `stop` | `stop`, when set, to any server but OpenAI's own API (whose reasoning models refuse it) |
//!
//! A tool choice other than `Auto` with no tools offered, or naming a tool not offered, is
//! refused before any request ([`ModelError::Config`]): the API would refuse it, and sending
//! it without the choice would silently let the model answer in text.

mod request;
mod response;

use async_trait::async_trait;
use std::borrow::Cow;

use super::cache::PromptCache;
use super::config::ProviderConfig;
use super::dialect;
use super::transport::Transport;
use crate::model::{Arguments, Model, ModelError, ModelRequest, ModelResponse};

/// The default API root.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Whether the server at `base_url` takes `stop` sequences: OpenAI-compatible servers do
/// (llama.cpp, vLLM, Ollama, LM Studio); OpenAI's own API refuses `stop` for its reasoning
/// models, so it is sent none (nor is Azure's).
fn takes_stop(base_url: &str) -> bool {
    let host = reqwest::Url::parse(base_url.trim())
        .ok()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase));
    !host.is_some_and(|h| h == "api.openai.com" || h.ends_with(".openai.azure.com"))
}

/// Which field carries the output-token limit.
///
/// OpenAI deprecated `max_tokens` in favour of `max_completion_tokens` (its reasoning models
/// reject `max_tokens`), so that is the default. Some older OpenAI-compatible servers know only
/// `max_tokens`: choose [`MaxTokensField::MaxTokens`] for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxTokensField {
    /// `max_completion_tokens` (OpenAI's current field; the default).
    #[default]
    MaxCompletionTokens,
    /// `max_tokens` (the legacy field).
    MaxTokens,
}

/// A model behind the Chat Completions API.
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    id: String,
    model: String,
    max_tokens_field: MaxTokensField,
    strict: bool,
    prompt_cache: PromptCache,
    transport: Transport,
}

impl OpenAiModel {
    /// A client for `model` (`gpt-4.1-mini`, `llama3.1`) with `config`. The key is optional:
    /// local servers need none. A base URL without a scheme is refused here.
    pub fn new(model: impl Into<String>, config: ProviderConfig) -> Result<Self, ModelError> {
        let model = model.into();
        Ok(OpenAiModel {
            id: format!("openai:{model}"),
            model,
            max_tokens_field: MaxTokensField::default(),
            strict: false,
            prompt_cache: PromptCache::default(),
            transport: Transport::new("openai", config)?,
        })
    }

    /// Chooses the field that carries the output-token limit.
    pub fn max_tokens_field(mut self, field: MaxTokensField) -> Self {
        self.max_tokens_field = field;
        self
    }

    /// Structured Outputs' strict mode for tool calls and the response format: the schemas are
    /// sent in the
    /// dialect strict mode accepts ([`dialect::openai`]: every object closed, every property
    /// required — optional ones nullable — and the keywords it refuses moved into
    /// descriptions), with `strict: true` where the converted schema meets strict mode's
    /// limits, and the nulls it makes a model send for optional properties are removed again
    /// from the arguments, so our own validation sees the shape the full schema describes and
    /// still enforces every bound. Off by default: the full schema is sent as is (as a model is
    /// shown it, [`shown`](crate::provider::shown)), with `strict: false`, which non-strict
    /// function calling, non-strict `json_schema` response formats and OpenAI-compatible
    /// servers accept; a server that compiles it into a grammar then holds every bound.
    pub fn strict(mut self, on: bool) -> Self {
        self.strict = on;
        self
    }

    /// Prompt caching ([`PromptCache`]): on by default, as a `prompt_cache_key` that names the
    /// tools and system prompt, so every call of one spec reaches the same cache; `Off` sends
    /// no key.
    pub fn prompt_cache(mut self, cache: PromptCache) -> Self {
        self.prompt_cache = cache;
        self
    }

    /// The error for a 404, saying what the base URL should look like.
    fn not_found(&self, error: ModelError) -> ModelError {
        let (provider, message) = match error {
            ModelError::Http {
                provider,
                status: 404,
                message,
            } => (provider, message),
            other => return other,
        };
        let base = self
            .transport
            .config()
            .base_url
            .trim()
            .trim_end_matches('/');
        let hint = if base.ends_with("/chat/completions") {
            format!(
                "the base URL is the whole endpoint: give the API root, `{}`, and \
                 `/chat/completions` is added to it",
                base.trim_end_matches("/chat/completions")
            )
        } else if !base.ends_with("/v1") {
            format!(
                "OpenAI-compatible servers serve the API under `/v1`: try the base URL `{base}/v1`"
            )
        } else {
            format!(
                "check that the server at this base URL speaks Chat Completions and serves \
                 model `{}`",
                self.model
            )
        };
        ModelError::Http {
            provider,
            status: 404,
            message: crate::redact::redact_string(format!("{message}; {hint}")),
        }
    }
}

#[async_trait]
impl Model for OpenAiModel {
    fn id(&self) -> &str {
        &self.id
    }

    fn prompt_cache(&self) -> Option<PromptCache> {
        Some(self.prompt_cache)
    }

    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        super::check_tool_choice("openai", &request)?;
        if let Some(seed) = request.sampling.seed.filter(|s| i64::try_from(*s).is_err()) {
            // The API's seed is a signed 64-bit integer: wrapping it would send another seed.
            return Err(ModelError::Config(format!(
                "openai: seed {seed} is past the API's range (at most {})",
                i64::MAX
            )));
        }
        let built = request::build(
            &self.model,
            self.max_tokens_field,
            self.strict,
            request.prompt_cache.unwrap_or(self.prompt_cache),
            takes_stop(&self.transport.config().base_url),
            &request,
        );
        let answer = self
            .transport
            .post_until(
                "/chat/completions",
                &built.body,
                request.retry_after,
                request.deadline,
            )
            .await
            .map_err(|e| self.not_found(e))?;
        let mut response = response::parse(&self.transport, &answer)?;
        for call in &mut response.tool_calls {
            let Some(i) = request.tools.iter().position(|t| *t.name == *call.name) else {
                continue;
            };
            if !built.strict_tools[i] {
                continue;
            }
            // The nulls are stripped from the value; text that is not JSON stays text.
            if let Ok(mut v) = call.arguments.parse().map(Cow::into_owned) {
                dialect::strip_optional_nulls(&request.tools[i].input_schema, &mut v);
                call.arguments = Arguments::Value(v);
            }
        }
        // The dialect made optional properties nullable: an answer in the format carries
        // nulls the contract does not allow, removed the same way. Text that is not JSON is
        // left for the run loop to refuse.
        if let (true, Some(format), Some(text)) =
            (self.strict, request.response_format, &mut response.text)
        {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
                let mut stripped = v.clone();
                dialect::strip_optional_nulls(&format.schema, &mut stripped);
                // Rewritten only when a null went: otherwise the text stays as sent.
                if stripped != v {
                    *text = stripped.to_string();
                }
            }
        }
        Ok(response)
    }
}
