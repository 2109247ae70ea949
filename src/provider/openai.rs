//! `openai:MODEL`: the Chat Completions API (`POST {base_url}/chat/completions`), spoken by
//! OpenAI and by OpenAI-compatible servers (vLLM, Ollama, llama.cpp server, LM Studio).

use async_trait::async_trait;
use reqwest::header::AUTHORIZATION;
use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::http::{ProviderConfig, Transport};
use super::usage::token_count;
use crate::model::{
    Arguments, Message, Model, ModelError, ModelRequest, ModelResponse, StopReason, ToolCall,
    ToolChoice, Usage,
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
                                            Arguments::Text(t) if is_json(t) => t.clone(),
                                            Arguments::Text(t) => Value::from(t.as_str()).to_string(),
                                            Arguments::Value(v) => v.to_string(),
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
        let sampling = request.sampling;
        if let Some(t) = sampling.temperature.and_then(super::sampling_number) {
            body.insert("temperature".into(), t);
        }
        if let Some(p) = sampling.top_p.and_then(super::sampling_number) {
            body.insert("top_p".into(), p);
        }
        if let Some(seed) = sampling.seed {
            body.insert("seed".into(), seed.into());
        }
        // A choice only means something with tools; `auto` is the default and is not sent.
        if !request.tools.is_empty() {
            match request.tool_choice {
                ToolChoice::Auto => {}
                ToolChoice::Required => {
                    body.insert("tool_choice".into(), "required".into());
                }
                ToolChoice::Tool(name) => {
                    body.insert(
                        "tool_choice".into(),
                        json!({"type": "function", "function": {"name": name}}),
                    );
                }
            }
        }
        if let Some(f) = request.response_format {
            let schema = if self.strict {
                crate::provider::dialect::openai_strict(&f.schema)
            } else {
                (*f.schema).clone()
            };
            let mut spec = json!({"name": f.name, "schema": schema});
            if self.strict {
                spec["strict"] = true.into();
            }
            body.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": spec}),
            );
        }
        let field = match self.max_tokens_field {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxTokens => "max_tokens",
        };
        body.insert(field.into(), request.max_tokens.into());
        Value::Object(body)
    }

    fn parse(&self, body: &[u8]) -> Result<ModelResponse, ModelError> {
        let malformed = |m: &str| self.transport.malformed(m);
        let reply: Completion<'_> = serde_json::from_slice(body).map_err(|e| {
            if e.is_data() {
                // JSON, but not a Chat Completions answer (no `choices`, a content that is
                // not a string, a tool call without its function).
                self.transport
                    .malformed(format!("not a Chat Completions answer ({e})"))
            } else {
                self.transport.invalid_json(&e, body.len())
            }
        })?;
        let Some(choice) = reply.choices.into_iter().next() else {
            return Err(malformed("no `choices[0]`"));
        };
        let text = choice.message.content.filter(|s| !s.is_empty());
        let tool_calls: Vec<ToolCall> = choice
            .message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(|c| ToolCall {
                id: c.id,
                name: c.function.name,
                arguments: arguments(c.function.arguments),
            })
            .collect();
        let stop_reason = match choice.finish_reason.as_deref() {
            Some("length") => StopReason::MaxTokens,
            // Some compatible servers say "stop" even when they made tool calls.
            _ if !tool_calls.is_empty() => StopReason::ToolUse,
            Some("stop") => StopReason::EndTurn,
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            _ => StopReason::Other,
        };
        // Local servers may omit usage; it then counts as zero. A count that is there is read
        // faithfully or the answer is malformed: never free because of its form.
        let usage = match reply.usage {
            None => Usage::default(),
            Some(u) => {
                let count = |path: &str, v: Option<&Value>| {
                    token_count(v).map_err(|e| malformed(&format!("`usage.{path}` {e}")))
                };
                let input = count("prompt_tokens", u.prompt_tokens.as_ref())?;
                // Cached tokens are part of `prompt_tokens`, priced lower.
                let cached = count(
                    "prompt_tokens_details.cached_tokens",
                    u.prompt_tokens_details
                        .as_ref()
                        .and_then(|d| d.cached_tokens.as_ref()),
                )?;
                if cached > input {
                    return Err(malformed(
                        "`usage.prompt_tokens_details.cached_tokens` exceeds `usage.prompt_tokens`",
                    ));
                }
                Usage {
                    input_tokens: input,
                    output_tokens: count("completion_tokens", u.completion_tokens.as_ref())?,
                    cache_read_tokens: cached,
                    cache_write_tokens: 0,
                }
            }
        };
        Ok(ModelResponse {
            text,
            tool_calls,
            usage,
            stop_reason,
        })
    }
}

/// A Chat Completions answer: only what the run loop uses.
#[derive(Deserialize)]
struct Completion<'a> {
    #[serde(borrow)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<ReplyUsage>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    message: ReplyMessage<'a>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ReplyMessage<'a> {
    #[serde(default)]
    content: Option<String>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<ReplyCall<'a>>>,
}

#[derive(Deserialize)]
struct ReplyCall<'a> {
    id: String,
    #[serde(borrow)]
    function: ReplyFunction<'a>,
}

#[derive(Deserialize)]
struct ReplyFunction<'a> {
    name: String,
    /// A JSON string holding JSON text, as OpenAI sends it; some compatible servers send the
    /// object itself. Kept raw, so the text is read once, by [`arguments`].
    #[serde(borrow)]
    arguments: &'a RawValue,
}

/// Token counts, read by [`token_count`] (a missing or null count is 0).
#[derive(Deserialize)]
struct ReplyUsage {
    #[serde(default)]
    prompt_tokens: Option<Value>,
    #[serde(default)]
    completion_tokens: Option<Value>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<Value>,
}

/// A call's arguments as the text the model sent: the string's contents (empty text is no
/// arguments, `{}`), or the JSON text of anything else a server put there. The run loop parses
/// the text when it handles the call, and checks a submitted output on the text itself.
fn arguments(raw: &RawValue) -> Arguments {
    match serde_json::from_str::<Cow<'_, str>>(raw.get()) {
        Ok(s) if s.trim().is_empty() => Arguments::Value(Value::Object(Map::new())),
        Ok(s) => Arguments::Text(s.into_owned()),
        Err(_) => Arguments::Text(raw.get().to_owned()),
    }
}

/// Whether `text` is one JSON document (checked without building it).
fn is_json(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
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
            .post("/chat/completions", headers, &body)
            .await?;
        let mut response = self.parse(&answer)?;
        if self.strict {
            for call in &mut response.tool_calls {
                if let Some(t) = request.tools.iter().find(|t| *t.name == *call.name) {
                    // The nulls are stripped from the value; text that is not JSON stays text.
                    if let Ok(mut v) = call.arguments.parse().map(Cow::into_owned) {
                        crate::provider::dialect::strip_optional_nulls(&t.input_schema, &mut v);
                        call.arguments = Arguments::Value(v);
                    }
                }
            }
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> OpenAiModel {
        OpenAiModel::new("m", ProviderConfig::new("http://127.0.0.1:9/v1")).expect("a client")
    }

    fn call_with(arguments: &str) -> String {
        format!(
            r#"{{"choices": [{{"message": {{"content": null, "tool_calls": [{{"id": "c1",
               "type": "function", "function": {{"name": "t", "arguments": {arguments}}}}}]}},
               "finish_reason": "tool_calls"}}]}}"#
        )
    }

    /// Arguments are the text the model sent, read once: a JSON string's contents, empty
    /// text as no arguments, and an object a server sent as is as its own JSON text.
    #[test]
    fn arguments_are_kept_as_the_text_sent() {
        let m = model();
        for (wire, expected) in [
            (
                r#""{\"path\": \"a\"}""#,
                Arguments::Text(r#"{"path": "a"}"#.into()),
            ),
            (r#""{\"path\":""#, Arguments::Text(r#"{"path":"#.into())),
            (r#""  ""#, Arguments::Value(json!({}))),
            (
                r#"{"path": "a"}"#,
                Arguments::Text(r#"{"path": "a"}"#.into()),
            ),
        ] {
            let r = m.parse(call_with(wire).as_bytes()).expect("an answer");
            assert_eq!(r.tool_calls[0].arguments, expected, "{wire}");
            assert_eq!(r.stop_reason, StopReason::ToolUse);
        }
    }

    /// JSON that is not a Chat Completions answer is malformed, saying what is wrong.
    #[test]
    fn wrong_shapes_are_malformed() {
        let m = model();
        for body in [
            r#"{"choices": []}"#,
            r#"{"choices": [{"message": {"content": 5}}]}"#,
            r#"{"choices": [{"message": {"tool_calls": [{"id": "c"}]}}]}"#,
            r#"{"error": "x"}"#,
        ] {
            let e = m.parse(body.as_bytes()).expect_err(body);
            assert!(
                matches!(e, ModelError::MalformedResponse { .. }),
                "{body}: {e:?}"
            );
        }
    }
}
