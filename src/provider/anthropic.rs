//! `anthropic:MODEL`: the Messages API (`POST {base_url}/v1/messages`).

use async_trait::async_trait;
use reqwest::header::HeaderName;
use serde_json::{json, Map, Value};

use super::http::{ProviderConfig, Transport};
use crate::model::{
    Message, Model, ModelError, ModelRequest, ModelResponse, StopReason, ToolCall, Usage,
};

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
    transport: Transport,
}

impl AnthropicModel {
    /// A client for `model` (`claude-sonnet-4-5`) with `config`.
    pub fn new(model: impl Into<String>, config: ProviderConfig) -> Result<Self, ModelError> {
        let model = model.into();
        Ok(AnthropicModel {
            id: format!("anthropic:{model}"),
            model,
            strict: false,
            transport: Transport::new("anthropic", config)?,
        })
    }

    /// Strict tool use: each tool carries `strict: true` and its schema in the dialect strict
    /// mode accepts ([`crate::dialect::anthropic`]: length, number and item bounds moved into
    /// descriptions). Our own validation still enforces the full schema on what comes back.
    /// Off by default: the full schema is sent as is, which the Messages API accepts.
    pub fn strict(mut self, on: bool) -> Self {
        self.strict = on;
        self
    }

    fn body(&self, request: ModelRequest<'_>) -> Value {
        // (role, content blocks); consecutive turns of one role are merged, since the API
        // wants user and assistant to alternate.
        let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
        for message in request.messages {
            let (role, blocks) = match message {
                Message::User { text } => ("user", vec![text_block(text)]),
                Message::Assistant { text, tool_calls } => {
                    let mut blocks = Vec::with_capacity(tool_calls.len() + 1);
                    if let Some(t) = text.as_deref().filter(|t| !t.is_empty()) {
                        blocks.push(text_block(t));
                    }
                    for c in tool_calls {
                        // `input` must be an object. Arguments held as text (from another
                        // provider's recording) are parsed; anything but an object is wrapped.
                        let parsed = match &c.arguments {
                            Value::String(text) => serde_json::from_str(text).ok(),
                            _ => None,
                        };
                        let input = match parsed.as_ref().unwrap_or(&c.arguments) {
                            v @ Value::Object(_) => v.clone(),
                            _ => json!({ "raw_arguments": c.arguments }),
                        };
                        blocks.push(json!({
                            "type": "tool_use",
                            "id": c.id,
                            "name": c.name,
                            "input": input,
                        }));
                    }
                    if blocks.is_empty() {
                        // The API rejects empty content and empty text blocks.
                        blocks.push(text_block("(no output)"));
                    }
                    ("assistant", blocks)
                }
                Message::ToolResults { results, note } => {
                    let mut blocks: Vec<Value> = results
                        .iter()
                        .map(|r| {
                            json!({
                                "type": "tool_result",
                                "tool_use_id": r.call_id,
                                "content": r.content,
                                "is_error": r.is_error,
                            })
                        })
                        .collect();
                    if let Some(note) = note.as_deref().filter(|n| !n.is_empty()) {
                        blocks.push(text_block(note));
                    }
                    ("user", blocks)
                }
            };
            match turns.last_mut() {
                Some((last, content)) if *last == role => content.extend(blocks),
                _ => turns.push((role, blocks)),
            }
        }
        let messages: Vec<Value> = turns
            .into_iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect();
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.model.clone()));
        body.insert("max_tokens".into(), request.max_tokens.into());
        if !request.system.is_empty() {
            body.insert("system".into(), Value::String(request.system.to_string()));
        }
        body.insert("messages".into(), Value::Array(messages));
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .map(|t| {
                    if self.strict {
                        json!({
                            "name": t.name,
                            "description": t.description,
                            "input_schema": crate::dialect::anthropic(&t.input_schema),
                            "strict": true,
                        })
                    } else {
                        json!({
                            "name": t.name,
                            "description": t.description,
                            "input_schema": *t.input_schema,
                        })
                    }
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        Value::Object(body)
    }

    fn parse(&self, body: &Value) -> Result<ModelResponse, ModelError> {
        let malformed = |m: &str| self.transport.malformed(m);
        let content = body
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| malformed("no `content` array"))?;
        let mut texts = Vec::new();
        let mut tool_calls = Vec::new();
        for block in content {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    let text = block
                        .get("text")
                        .and_then(Value::as_str)
                        .ok_or_else(|| malformed("a text block lacks `text`"))?;
                    texts.push(text);
                }
                Some("tool_use") => {
                    let call = (|| {
                        Some(ToolCall {
                            id: block.get("id")?.as_str()?.to_string(),
                            name: block.get("name")?.as_str()?.to_string(),
                            arguments: block.get("input")?.clone(),
                        })
                    })()
                    .ok_or_else(|| malformed("a tool_use block lacks `id`, `name` or `input`"))?;
                    tool_calls.push(call);
                }
                // Thinking and other block types carry nothing the run loop uses.
                Some(_) => {}
                None => return Err(malformed("a content block has no `type`")),
            }
        }
        let stop_reason = match body.get("stop_reason").and_then(Value::as_str) {
            Some("end_turn" | "stop_sequence") => StopReason::EndTurn,
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens") => StopReason::MaxTokens,
            _ => StopReason::Other,
        };
        let usage = body.get("usage").ok_or_else(|| malformed("no `usage`"))?;
        let count = |field: &str| usage.get(field).and_then(Value::as_u64).unwrap_or(0);
        // Cache reads and writes are counted as input at the full input price: this
        // overestimates cost a little when caching is in use, never underestimates it.
        let usage = Usage {
            input_tokens: count("input_tokens")
                + count("cache_creation_input_tokens")
                + count("cache_read_input_tokens"),
            output_tokens: count("output_tokens"),
        };
        let text = (!texts.is_empty()).then(|| texts.concat());
        Ok(ModelResponse {
            text,
            tool_calls,
            usage,
            stop_reason,
        })
    }
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

#[async_trait]
impl Model for AnthropicModel {
    fn id(&self) -> &str {
        &self.id
    }

    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let body = self.body(request);
        let mut headers = vec![(
            HeaderName::from_static("anthropic-version"),
            ANTHROPIC_VERSION.to_string(),
        )];
        if let Some(key) = &self.transport.config().api_key {
            headers.push((
                HeaderName::from_static("x-api-key"),
                key.expose().to_string(),
            ));
        }
        let answer = self
            .transport
            .post_json("/v1/messages", headers, &body)
            .await?;
        self.parse(&answer)
    }
}
