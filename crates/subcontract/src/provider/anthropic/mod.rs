//! `anthropic:MODEL`: the Messages API (`POST {base_url}/v1/messages`).
//!
//! What a [`ModelRequest`] becomes on the wire:
//!
//! | request | Messages API |
//! |---|---|
//! | `sampling` | `temperature`, `top_p` (each only when set). The API has no seed: `seed` is not sent. Recent models refuse `temperature` and `top_p` together: set one. |
//! | `tool_choice` | `Auto`: not sent (the default); `Required`: `{"type": "any"}`; `Tool(n)`: `{"type": "tool", "name": n}`; never without tools |
//! | (prompt caching) | `cache_control` on the last tool, the system prompt (then a text block), the latest message's last block and the one the call before marked ([`PromptCache`]); a request's own setting wins over [`AnthropicModel::prompt_cache`] |
//! | `response_format` | structured outputs: `output_config: {"format": {"type": "json_schema", "schema"}}`, the schema in the strict dialect ([`dialect::anthropic`]); the JSON comes back as the answer's text |
//!
//! Structured outputs are generally available in the Messages API (no beta header; the beta's
//! `output_format` field moved to `output_config.format`) on the models that support them
//! (Claude Sonnet 4.5, Opus 4.5, Haiku 4.5 and later, as Anthropic documented it in November
//! 2026). A model without them answers 400, which is a [`ModelError::Http`]; a run loop that
//! must work on such models forces the submission tool instead (`ToolChoice::Tool`).
//!
//! A tool choice other than `Auto` with no tools offered, or naming a tool not offered, is
//! refused before any request ([`ModelError::Config`]).

mod request;
mod response;

use async_trait::async_trait;

use super::cache::PromptCache;
use super::config::ProviderConfig;
use super::transport::{KeyHeader, Transport};
use crate::model::{Model, ModelError, ModelRequest, ModelResponse};

/// The default API root (without `/v1`, as Anthropic's SDKs take it).
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The API version sent in `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A model behind the Messages API.
#[derive(Debug, Clone)]
pub struct AnthropicModel {
    id: String,
    model: String,
    strict: bool,
    prompt_cache: PromptCache,
    transport: Transport,
}

impl AnthropicModel {
    /// A client for `model` (`claude-sonnet-4-5`) with `config`. A base URL without a scheme
    /// is refused here.
    pub fn new(model: impl Into<String>, config: ProviderConfig) -> Result<Self, ModelError> {
        let model = model.into();
        let transport = Transport::new("anthropic", config)?
            .key_header(KeyHeader::Named("x-api-key"))
            .header("anthropic-version", ANTHROPIC_VERSION)?;
        Ok(AnthropicModel {
            id: format!("anthropic:{model}"),
            model,
            strict: false,
            prompt_cache: PromptCache::default(),
            transport,
        })
    }

    /// Strict tool use: each tool carries `strict: true` and its schema in the dialect strict
    /// mode accepts ([`super::dialect::anthropic`]: length, number and item bounds moved into
    /// descriptions). Our own validation still enforces the full schema on what comes back.
    /// Off by default: the full schema is sent as is, which the Messages API accepts.
    pub fn strict(mut self, on: bool) -> Self {
        self.strict = on;
        self
    }

    /// Prompt caching ([`PromptCache`]): on by default, with `cache_control` breakpoints on
    /// the last tool, the system prompt and the latest message, so every turn reads the turns
    /// before it and siblings of one spec share the tools and system prompt; `OneHour` sets
    /// `ttl: "1h"`; `Off` sends none.
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
        let hint = if base.ends_with("/v1") || base.ends_with("/v1/messages") {
            format!(
                "the base URL is the API root without `/v1` (`/v1/messages` is added to it): \
                 try `{}`",
                base.trim_end_matches("/messages").trim_end_matches("/v1")
            )
        } else {
            format!(
                "check that the server at this base URL speaks the Messages API and serves \
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
impl Model for AnthropicModel {
    fn id(&self) -> &str {
        &self.id
    }

    fn prompt_cache(&self) -> Option<PromptCache> {
        Some(self.prompt_cache)
    }

    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        super::check_tool_choice("anthropic", &request)?;
        let cache = request.prompt_cache.unwrap_or(self.prompt_cache);
        let body = request::build(&self.model, self.strict, cache, &request);
        let answer = self
            .transport
            .post_until("/v1/messages", &body, request.retry_after, request.deadline)
            .await
            .map_err(|e| self.not_found(e))?;
        response::parse(&self.transport, &answer)
    }
}
