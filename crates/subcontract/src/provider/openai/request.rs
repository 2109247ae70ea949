//! A Chat Completions request as it goes on the wire, borrowed from the [`ModelRequest`]: the
//! conversation is serialised from the run's own messages, never copied into a `Value`.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::MaxTokensField;
use crate::model::{Arguments, Message, ModelRequest, ToolChoice, ToolDefinition};
use crate::provider::cache::{prefix_key, PromptCache};
use crate::provider::{dialect, shown};

/// `POST /chat/completions`: the fields this crate sends.
#[derive(Serialize)]
pub(super) struct ChatRequest<'a> {
    pub(super) model: &'a str,
    pub(super) messages: Vec<ChatMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) tools: Vec<ChatTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tool_choice: Option<ChatToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) top_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) response_format: Option<ResponseFormat<'a>>,
    /// Routes every call with this prefix to the same cache ([`super::super::cache`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) prompt_cache_key: Option<String>,
    /// Where generation stops ([`ModelRequest::stop`]), to a server that takes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stop: Option<&'a [&'a str]>,
}

/// One message, tagged by its `role`.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub(super) enum ChatMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        /// `null` beside tool calls; text (empty if none) otherwise.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ChatToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: Cow<'a, str>,
    },
}

#[derive(Serialize)]
pub(super) struct ChatToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: CalledFunction<'a>,
}

#[derive(Serialize)]
struct CalledFunction<'a> {
    name: &'a str,
    /// Always a JSON text: arguments held as the text the model sent go back unchanged when
    /// it is JSON; text that is not goes back as a JSON string literal, which servers that
    /// parse `arguments` (chat templates) accept.
    arguments: Cow<'a, str>,
}

#[derive(Serialize)]
pub(super) struct ChatTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionDefinition<'a>,
}

#[derive(Serialize)]
struct FunctionDefinition<'a> {
    name: &'a str,
    description: &'a str,
    parameters: Cow<'a, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    strict: Option<bool>,
}

/// `tool_choice`: `"required"`, or one named function. `"auto"` is the default and is not
/// sent.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum ChatToolChoice<'a> {
    Mode(&'static str),
    Named {
        #[serde(rename = "type")]
        kind: &'static str,
        function: NamedFunction<'a>,
    },
}

#[derive(Serialize)]
pub(super) struct NamedFunction<'a> {
    name: &'a str,
}

/// `response_format: {type: json_schema, json_schema: {…}}`.
#[derive(Serialize)]
pub(super) struct ResponseFormat<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    json_schema: JsonSchemaFormat<'a>,
}

#[derive(Serialize)]
struct JsonSchemaFormat<'a> {
    name: &'a str,
    schema: Value,
    strict: bool,
}

/// Which tools go with `strict: true` (those whose converted schema strict mode takes).
pub(super) struct Built<'a> {
    pub(super) body: ChatRequest<'a>,
    /// Per offered tool, whether it was sent strict (its arguments then come back with the
    /// nulls strict mode adds for optional properties).
    pub(super) strict_tools: Vec<bool>,
}

/// The body for `request`. `strict` sends each tool in the strict dialect (with `strict: true`
/// where the converted schema allows it); `takes_stop` says whether the server takes `stop`.
pub(super) fn build<'a>(
    model: &'a str,
    field: MaxTokensField,
    strict: bool,
    cache: PromptCache,
    takes_stop: bool,
    request: &ModelRequest<'a>,
) -> Built<'a> {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(ChatMessage::System {
            content: request.system,
        });
    }
    for message in request.messages {
        push_message(&mut messages, message);
    }
    let mut strict_tools = Vec::with_capacity(request.tools.len());
    let tools = request
        .tools
        .iter()
        .map(|t| {
            let shown = shown::tool_schema(&t.input_schema);
            let (parameters, strict) = if strict {
                let converted = dialect::openai(&shown);
                (Cow::Owned(converted.schema), converted.strict)
            } else {
                (Cow::Owned(shown), false)
            };
            strict_tools.push(strict);
            tool(t, parameters, strict)
        })
        .collect();
    let (max_completion_tokens, max_tokens) = match field {
        MaxTokensField::MaxCompletionTokens => (Some(request.max_tokens), None),
        MaxTokensField::MaxTokens => (None, Some(request.max_tokens)),
    };
    let body = ChatRequest {
        model,
        messages,
        tools,
        // Only with tools: the API refuses a tool choice without them (the caller checks that
        // a choice other than `auto` has tools to choose from).
        tool_choice: tool_choice(request.tool_choice).filter(|_| !request.tools.is_empty()),
        max_completion_tokens,
        max_tokens,
        temperature: request.sampling.temperature,
        top_p: request.sampling.top_p,
        seed: request.sampling.seed,
        // As the tools: the strict dialect when strict, else the full schema (as a model is
        // shown it), whose every bound a grammar-compiling server (llama.cpp, vLLM) enforces;
        // the dialect moves string lengths into descriptions, and a 1.5B model then wrote a
        // 500-character summary into a 100-character field three times over.
        response_format: request.response_format.map(|f| {
            let (schema, strict) = if strict {
                let converted = dialect::openai(&f.schema);
                (converted.schema, converted.strict)
            } else {
                (shown::tool_schema(&f.schema), false)
            };
            ResponseFormat {
                kind: "json_schema",
                json_schema: JsonSchemaFormat {
                    name: &f.name,
                    schema,
                    strict,
                },
            }
        }),
        prompt_cache_key: (cache != PromptCache::Off)
            .then(|| prefix_key(request.system, request.tools)),
        stop: Some(request.stop).filter(|s| takes_stop && !s.is_empty()),
    };
    Built { body, strict_tools }
}

fn tool<'a>(t: &'a ToolDefinition, parameters: Cow<'a, Value>, strict: bool) -> ChatTool<'a> {
    ChatTool {
        kind: "function",
        function: FunctionDefinition {
            name: &t.name,
            description: &t.description,
            parameters,
            strict: strict.then_some(true),
        },
    }
}

fn tool_choice(choice: ToolChoice<'_>) -> Option<ChatToolChoice<'_>> {
    match choice {
        ToolChoice::Auto => None,
        ToolChoice::Required => Some(ChatToolChoice::Mode("required")),
        ToolChoice::Tool(name) => Some(ChatToolChoice::Named {
            kind: "function",
            function: NamedFunction { name },
        }),
    }
}

fn push_message<'a>(messages: &mut Vec<ChatMessage<'a>>, message: &'a Message) {
    match message {
        Message::User { text } => messages.push(ChatMessage::User { content: text }),
        Message::Assistant { text, tool_calls } => messages.push(ChatMessage::Assistant {
            content: match text {
                Some(t) => Some(t.as_str()),
                None if tool_calls.is_empty() => Some(""),
                None => None,
            },
            tool_calls: tool_calls
                .iter()
                .map(|c| ChatToolCall {
                    id: &c.id,
                    kind: "function",
                    function: CalledFunction {
                        name: &c.name,
                        arguments: match &c.arguments {
                            Arguments::Text(t) if is_json(t) => Cow::Borrowed(t.as_str()),
                            Arguments::Text(t) => Cow::Owned(Value::from(t.as_str()).to_string()),
                            Arguments::Value(v) => Cow::Owned(v.to_string()),
                        },
                    },
                })
                .collect(),
        }),
        Message::ToolResults { results, note } => {
            for r in results {
                messages.push(ChatMessage::Tool {
                    tool_call_id: &r.call_id,
                    // Chat Completions has no error flag on tool messages.
                    content: if r.is_error {
                        Cow::Owned(format!("ERROR: {}", r.content))
                    } else {
                        Cow::Borrowed(r.content.as_str())
                    },
                });
            }
            if let Some(note) = note {
                messages.push(ChatMessage::User { content: note });
            }
        }
    }
}

/// Whether `text` is one JSON document (checked without building it).
fn is_json(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}
