//! `openai:MODEL`: the Chat Completions API (`POST {base_url}/chat/completions`), spoken by
//! OpenAI and by OpenAI-compatible servers (vLLM, Ollama, llama.cpp server, LM Studio).

use async_trait::async_trait;
use reqwest::header::AUTHORIZATION;
use serde_json::{json, Map, Value};

use super::http::{ProviderConfig, Transport};
use super::usage::token_count;
use crate::model::{
    Message, Model, ModelError, ModelRequest, ModelResponse, StopReason, ToolCall, Usage,
};

/// The default API root.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

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
    transport: Transport,
}

impl OpenAiModel {
    /// A client for `model` (`gpt-4.1-mini`, `llama3.1`) with `config`. The key is optional:
    /// local servers need none.
    pub fn new(model: impl Into<String>, config: ProviderConfig) -> Result<Self, ModelError> {
        let model = model.into();
        Ok(OpenAiModel {
            id: format!("openai:{model}"),
            model,
            max_tokens_field: MaxTokensField::default(),
            strict: false,
            transport: Transport::new("openai", config)?,
        })
    }

    /// Chooses the field that carries the output-token limit.
    pub fn max_tokens_field(mut self, field: MaxTokensField) -> Self {
        self.max_tokens_field = field;
        self
    }

    /// Structured Outputs' strict mode for tool calls: the tools' schemas are sent in the
    /// dialect strict mode accepts ([`crate::provider::dialect::openai_strict`]: every object closed,
    /// every property required — optional ones nullable — and the keywords it refuses moved into
    /// descriptions), and the nulls it makes a model send for optional properties are removed
    /// again from the arguments, so our own validation sees the shape the full schema
    /// describes and still enforces every bound. Off by default: the full schema is sent as
    /// is, which non-strict function calling and OpenAI-compatible servers accept.
    pub fn strict(mut self, on: bool) -> Self {
        self.strict = on;
        self
    }

    /// The request body for `request`.
    fn body(&self, request: ModelRequest<'_>) -> Value {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if !request.system.is_empty() {
            messages.push(json!({"role": "system", "content": request.system}));
        }
        for message in request.messages {
            match message {
                Message::User { text } => messages.push(json!({"role": "user", "content": text})),
                Message::Assistant { text, tool_calls } => {
                    let mut m = Map::new();
                    m.insert("role".into(), "assistant".into());
                    m.insert(
                        "content".into(),
                        match text {
                            Some(t) => Value::String(t.clone()),
                            None if tool_calls.is_empty() => Value::String(String::new()),
                            None => Value::Null,
                        },
                    );
                    if !tool_calls.is_empty() {
                        let calls = tool_calls
                            .iter()
                            .map(|c| {
                                json!({
                                    "id": c.id,
                                    "type": "function",
                                    "function": {
                                        "name": c.name,
                                        // Always a JSON text: arguments held as the text
                                        // the model sent go back unchanged when it is JSON;
                                        // text that is not goes back as a JSON string
                                        // literal, which servers that parse `arguments`
                                        // (chat templates) accept.
                                        "arguments": match &c.arguments {
                                            Value::String(text) if is_json(text) => {
                                                text.clone()
                                            }
                                            v => v.to_string(),
                                        },
                                    },
                                })
                            })
                            .collect();
                        m.insert("tool_calls".into(), Value::Array(calls));
                    }
                    messages.push(Value::Object(m));
                }
                Message::ToolResults { results, note } => {
                    for r in results {
                        // Chat Completions has no error flag on tool messages.
                        let content = if r.is_error {
                            format!("ERROR: {}", r.content)
                        } else {
                            r.content.clone()
                        };
                        messages.push(json!({
                            "role": "tool",
                            "tool_call_id": r.call_id,
                            "content": content,
                        }));
                    }
                    if let Some(note) = note {
                        messages.push(json!({"role": "user", "content": note}));
                    }
                }
            }
        }
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.model.clone()));
        body.insert("messages".into(), Value::Array(messages));
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .map(|t| {
                    if self.strict {
                        json!({
                            "type": "function",
                            "function": {
                                "name": t.name,
                                "description": t.description,
                                "parameters": crate::provider::dialect::openai_strict(&t.input_schema),
                                "strict": true,
                            },
                        })
                    } else {
                        json!({
                            "type": "function",
                            "function": {
                                "name": t.name,
                                "description": t.description,
                                "parameters": *t.input_schema,
                            },
                        })
                    }
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        let field = match self.max_tokens_field {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxTokens => "max_tokens",
        };
        body.insert(field.into(), request.max_tokens.into());
        Value::Object(body)
    }

    fn parse(&self, body: &Value) -> Result<ModelResponse, ModelError> {
        let malformed = |m: &str| self.transport.malformed(m);
        let choice = body
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .ok_or_else(|| malformed("no `choices[0]`"))?;
        let message = choice
            .get("message")
            .and_then(Value::as_object)
            .ok_or_else(|| malformed("no `choices[0].message`"))?;
        let text = match message.get("content") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.is_empty() => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(malformed("`message.content` is not a string")),
        };
        let mut tool_calls = Vec::new();
        match message.get("tool_calls") {
            None | Some(Value::Null) => {}
            Some(Value::Array(calls)) => {
                for call in calls {
                    tool_calls.push(parse_tool_call(call).ok_or_else(|| {
                        malformed("a tool call lacks `id`, `function.name` or `function.arguments`")
                    })?);
                }
            }
            Some(_) => return Err(malformed("`message.tool_calls` is not an array")),
        }
        let stop_reason = match choice.get("finish_reason").and_then(Value::as_str) {
            Some("length") => StopReason::MaxTokens,
            // Some compatible servers say "stop" even when they made tool calls.
            _ if !tool_calls.is_empty() => StopReason::ToolUse,
            Some("stop") => StopReason::EndTurn,
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            _ => StopReason::Other,
        };
        // Local servers may omit usage; it then counts as zero. A count that is there is read
        // faithfully or the answer is malformed: never free because of its form.
        let usage = match body.get("usage") {
            None | Some(Value::Null) => Usage::default(),
            Some(u @ Value::Object(_)) => {
                let count = |path: &str, v: Option<&Value>| {
                    token_count(v).map_err(|e| malformed(&format!("`usage.{path}` {e}")))
                };
                let input = count("prompt_tokens", u.get("prompt_tokens"))?;
                // Cached tokens are part of `prompt_tokens`, priced lower.
                let cached = count(
                    "prompt_tokens_details.cached_tokens",
                    u.get("prompt_tokens_details")
                        .and_then(|d| d.get("cached_tokens")),
                )?;
                if cached > input {
                    return Err(malformed(
                        "`usage.prompt_tokens_details.cached_tokens` exceeds `usage.prompt_tokens`",
                    ));
                }
                Usage {
                    input_tokens: input,
                    output_tokens: count("completion_tokens", u.get("completion_tokens"))?,
                    cache_read_tokens: cached,
                    cache_write_tokens: 0,
                }
            }
            Some(_) => return Err(malformed("`usage` is not an object")),
        };
        Ok(ModelResponse {
            text,
            tool_calls,
            usage,
            stop_reason,
        })
    }
}

/// Whether `text` is one JSON document (checked without building it).
fn is_json(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

/// One `tool_calls[]` entry. `arguments` is a JSON text, kept as the text (a JSON string):
/// the run loop parses it when it handles the call, and checks a submitted output on the
/// text itself.
fn parse_tool_call(call: &Value) -> Option<ToolCall> {
    let id = call.get("id")?.as_str()?.to_string();
    let function = call.get("function")?;
    let name = function.get("name")?.as_str()?.to_string();
    let arguments = match function.get("arguments")? {
        Value::String(raw) if raw.trim().is_empty() => Value::Object(Map::new()),
        Value::String(raw) => Value::String(raw.clone()),
        // Some compatible servers send the object itself.
        other => other.clone(),
    };
    Some(ToolCall {
        id,
        name,
        arguments,
    })
}

#[async_trait]
impl Model for OpenAiModel {
    fn id(&self) -> &str {
        &self.id
    }

    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let body = self.body(request);
        let mut headers = Vec::new();
        if let Some(key) = &self.transport.config().api_key {
            headers.push((AUTHORIZATION, format!("Bearer {}", key.expose())));
        }
        let answer = self
            .transport
            .post_json("/chat/completions", headers, &body)
            .await?;
        let mut response = self.parse(&answer)?;
        if self.strict {
            for call in &mut response.tool_calls {
                if let Some(t) = request.tools.iter().find(|t| *t.name == *call.name) {
                    // The nulls are stripped from the value; text that is not JSON stays text.
                    if let Value::String(text) = &call.arguments {
                        if let Ok(v) = serde_json::from_str(text) {
                            call.arguments = v;
                        }
                    }
                    crate::provider::dialect::strip_optional_nulls(
                        &t.input_schema,
                        &mut call.arguments,
                    );
                }
            }
        }
        Ok(response)
    }
}
