//! `anthropic:MODEL`: the Messages API (`POST {base_url}/v1/messages`).

use std::borrow::Cow;

use async_trait::async_trait;
use reqwest::header::HeaderName;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::http::{ProviderConfig, Transport};
use super::usage::token_count;
use crate::model::{
    Arguments, Message, Model, ModelError, ModelRequest, ModelResponse, StopReason, ToolCall,
    ToolChoice, ToolDefinition, Usage,
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
    /// mode accepts ([`crate::provider::dialect::anthropic`]: length, number and item bounds moved into
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
                        // `input` must be an object. Arguments held as text (as this provider
                        // and OpenAI's hand them over) are parsed; anything but an object (text
                        // that is not JSON) is wrapped.
                        let input = match c.arguments.parse() {
                            Ok(v) if v.is_object() => v.into_owned(),
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
        let sampling = request.sampling;
        if let Some(t) = sampling.temperature.and_then(super::sampling_number) {
            body.insert("temperature".into(), t);
        }
        if let Some(p) = sampling.top_p.and_then(super::sampling_number) {
            body.insert("top_p".into(), p);
        }
        // The Messages API has no response format: a schema the answer must follow is asked
        // for as the one tool the model must call, whose input is then read back as the text.
        let format_tool = request.response_format.map(|f| ToolDefinition {
            name: f.name.clone(),
            description: "Give your answer as this tool's input.".into(),
            input_schema: f.schema.clone(),
        });
        let tools: Vec<&ToolDefinition> = match &format_tool {
            Some(t) => vec![t],
            None => request.tools.iter().collect(),
        };
        let choice = match (&format_tool, request.tool_choice) {
            (Some(t), _) => Some(json!({"type": "tool", "name": t.name})),
            (None, _) if tools.is_empty() => None,
            (None, ToolChoice::Auto) => None,
            (None, ToolChoice::Required) => Some(json!({"type": "any"})),
            (None, ToolChoice::Tool(name)) => Some(json!({"type": "tool", "name": name})),
        };
        if let Some(choice) = choice {
            body.insert("tool_choice".into(), choice);
        }
        if !tools.is_empty() {
            let tools = tools
                .into_iter()
                .map(|t| {
                    if self.strict {
                        json!({
                            "name": t.name,
                            "description": t.description,
                            "input_schema": crate::provider::dialect::anthropic(&t.input_schema),
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

    fn parse(&self, body: &[u8]) -> Result<ModelResponse, ModelError> {
        let malformed = |m: &str| self.transport.malformed(m);
        let reply: Reply<'_> = serde_json::from_slice(body).map_err(|e| {
            if e.is_data() {
                // JSON, but not a Messages answer (no `content` array, a block without a
                // `type`, a count that is not a number).
                self.transport
                    .malformed(format!("not a Messages answer ({e})"))
            } else {
                self.transport.invalid_json(&e, body.len())
            }
        })?;
        let mut texts = Vec::new();
        let mut tool_calls = Vec::new();
        for block in reply.content {
            match &*block.kind {
                "text" => {
                    let text = block
                        .text
                        .ok_or_else(|| malformed("a text block lacks `text`"))?;
                    texts.push(text);
                }
                "tool_use" => {
                    let (Some(id), Some(name), Some(input)) = (block.id, block.name, block.input)
                    else {
                        return Err(malformed("a tool_use block lacks `id`, `name` or `input`"));
                    };
                    tool_calls.push(ToolCall {
                        id,
                        name,
                        // The input's JSON text as sent: the run loop checks a submitted
                        // output on it without building a `Value`.
                        arguments: Arguments::Text(input.get().to_owned()),
                    });
                }
                // Thinking and other block types carry nothing the run loop uses.
                _ => {}
            }
        }
        let stop_reason = match reply.stop_reason.as_deref() {
            Some("end_turn" | "stop_sequence") => StopReason::EndTurn,
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens") => StopReason::MaxTokens,
            _ => StopReason::Other,
        };
        let u = reply.usage.ok_or_else(|| malformed("no `usage`"))?;
        let count = |field: &str, v: Option<&Value>| {
            token_count(v).map_err(|e| malformed(&format!("`usage.{field}` {e}")))
        };
        let uncached = count("input_tokens", u.input_tokens.as_ref())?;
        let written = count(
            "cache_creation_input_tokens",
            u.cache_creation_input_tokens.as_ref(),
        )?;
        let read = count(
            "cache_read_input_tokens",
            u.cache_read_input_tokens.as_ref(),
        )?;
        // `input_tokens` excludes the cache's tokens; ours counts every token read, and the
        // cache's are priced apart.
        let input = uncached
            .checked_add(written)
            .and_then(|n| n.checked_add(read))
            .ok_or_else(|| malformed("the input token counts in `usage` add up past 2^64"))?;
        let usage = Usage {
            input_tokens: input,
            output_tokens: count("output_tokens", u.output_tokens.as_ref())?,
            cache_read_tokens: read,
            cache_write_tokens: written,
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

/// A Messages API answer: only what the run loop uses. A tool's `input` is kept as the raw
/// JSON text it arrived as.
#[derive(Deserialize)]
struct Reply<'a> {
    #[serde(borrow)]
    content: Vec<Block<'a>>,
    #[serde(default, borrow)]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<ReplyUsage>,
}

/// One content block; the fields each type uses, the rest ignored.
#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, borrow)]
    input: Option<&'a RawValue>,
}

/// Token counts, read by [`token_count`] (a missing or null count is 0).
#[derive(Deserialize)]
struct ReplyUsage {
    #[serde(default)]
    input_tokens: Option<Value>,
    #[serde(default)]
    cache_creation_input_tokens: Option<Value>,
    #[serde(default)]
    cache_read_input_tokens: Option<Value>,
    #[serde(default)]
    output_tokens: Option<Value>,
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
        let answer = self.transport.post("/v1/messages", headers, &body).await?;
        let mut response = self.parse(&answer)?;
        if let Some(f) = request.response_format {
            // The forced call of the format's tool is the answer's text.
            if let Some(i) = response.tool_calls.iter().position(|c| *c.name == *f.name) {
                let call = response.tool_calls.swap_remove(i);
                response.text = Some(match call.arguments {
                    Arguments::Text(t) => t,
                    Arguments::Value(v) => v.to_string(),
                });
                response.stop_reason = StopReason::EndTurn;
            }
        }
        Ok(response)
    }
}
