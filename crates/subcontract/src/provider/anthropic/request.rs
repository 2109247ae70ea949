//! A Messages request as it goes on the wire, borrowed from the [`ModelRequest`].

use std::borrow::Cow;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::model::{Arguments, Message, ModelRequest, ToolChoice, ToolDefinition};
use crate::provider::cache::PromptCache;
use crate::provider::{dialect, shown};

/// `POST /v1/messages`: the fields this crate sends.
#[derive(Serialize)]
pub(super) struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "System::is_empty")]
    system: System<'a>,
    messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<AnthropicToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<OutputConfig>,
}

/// The system prompt: text, or one text block carrying a cache breakpoint.
#[derive(Serialize)]
#[serde(untagged)]
enum System<'a> {
    Text(&'a str),
    Blocks([Marked<'a>; 1]),
}

impl System<'_> {
    fn is_empty(&self) -> bool {
        matches!(self, System::Text(""))
    }
}

/// `cache_control`: a breakpoint; everything up to and including the block it is on is
/// cached.
#[derive(Serialize, Clone, Copy)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl: Option<&'static str>,
}

impl CacheControl {
    fn of(cache: PromptCache) -> Option<Self> {
        let ttl = match cache {
            PromptCache::FiveMinutes => None,
            PromptCache::OneHour => Some("1h"),
            // `Off`, and any later setting this provider does not know: no breakpoint.
            _ => return None,
        };
        Some(CacheControl {
            kind: "ephemeral",
            ttl,
        })
    }
}

/// A content block with its breakpoint, if any.
#[derive(Serialize)]
struct Marked<'a> {
    #[serde(flatten)]
    block: Block<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

impl<'a> From<Block<'a>> for Marked<'a> {
    fn from(block: Block<'a>) -> Self {
        Marked {
            block,
            cache_control: None,
        }
    }
}

/// One turn: the API wants user and assistant to alternate, so consecutive messages of one
/// role are merged into one turn.
#[derive(Serialize)]
struct Turn<'a> {
    role: &'static str,
    content: Vec<Marked<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Input<'a>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        is_error: bool,
    },
}

/// A tool call's `input`, which must be an object: the text the model sent when it is one
/// (passed through without being parsed into a `Value`), the value, or anything else wrapped.
#[derive(Serialize)]
#[serde(untagged)]
enum Input<'a> {
    Text(&'a RawValue),
    Value(&'a Value),
    Wrapped { raw_arguments: &'a Arguments },
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: Cow<'a, Value>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    strict: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum AnthropicToolChoice<'a> {
    Any,
    Tool { name: &'a str },
}

/// Structured outputs: `output_config: {format: {type: json_schema, schema}}`.
#[derive(Serialize)]
struct OutputConfig {
    format: OutputFormat,
}

#[derive(Serialize)]
struct OutputFormat {
    #[serde(rename = "type")]
    kind: &'static str,
    schema: Value,
}

/// The body for `request`; `strict` sends each tool in the strict dialect, `strict: true`;
/// `cache` places the breakpoints ([`crate::provider::cache`]): the last tool, the system
/// prompt, the latest message's last block and the previous call's latest. Four, the API's
/// most.
pub(super) fn build<'a>(
    model: &'a str,
    strict: bool,
    cache: PromptCache,
    request: &ModelRequest<'a>,
) -> MessagesRequest<'a> {
    let mark = CacheControl::of(cache);
    let mut turns: Vec<Turn<'a>> = Vec::new();
    for message in request.messages {
        let (role, blocks) = blocks(message);
        let blocks = blocks.into_iter().map(Marked::from);
        match turns.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => turns.push(Turn {
                role,
                content: blocks.collect(),
            }),
        }
    }
    if let Some(last) = turns.last_mut().and_then(|t| t.content.last_mut()) {
        last.cache_control = mark;
    }
    // Also where the call before this one put its latest breakpoint (the end of the turn two
    // back, as turns alternate): the API looks back only 20 blocks from a breakpoint for an
    // entry, and one turn of many tool calls and results adds more than that.
    if let Some(i) = turns.len().checked_sub(3) {
        if let Some(last) = turns[i].content.last_mut() {
            last.cache_control = mark;
        }
    }
    let mut tools: Vec<Tool<'a>> = request.tools.iter().map(|t| tool(t, strict)).collect();
    if let Some(last) = tools.last_mut() {
        last.cache_control = mark;
    }
    let system = match mark {
        Some(mark) if !request.system.is_empty() => System::Blocks([Marked {
            block: Block::Text {
                text: request.system,
            },
            cache_control: Some(mark),
        }]),
        _ => System::Text(request.system),
    };
    MessagesRequest {
        model,
        max_tokens: request.max_tokens,
        system,
        messages: turns,
        tools,
        tool_choice: match request.tool_choice {
            // Never without tools: the API refuses it (the caller refuses a choice there is
            // nothing to choose from).
            _ if request.tools.is_empty() => None,
            ToolChoice::Auto => None,
            ToolChoice::Required => Some(AnthropicToolChoice::Any),
            ToolChoice::Tool(name) => Some(AnthropicToolChoice::Tool { name }),
        },
        temperature: request.sampling.temperature,
        top_p: request.sampling.top_p,
        output_config: request.response_format.map(|f| OutputConfig {
            format: OutputFormat {
                kind: "json_schema",
                schema: dialect::anthropic(&f.schema),
            },
        }),
    }
}

fn tool(t: &ToolDefinition, strict: bool) -> Tool<'_> {
    Tool {
        name: &t.name,
        description: &t.description,
        input_schema: Cow::Owned(if strict {
            dialect::anthropic(&shown::tool_schema(&t.input_schema))
        } else {
            shown::tool_schema(&t.input_schema)
        }),
        strict,
        cache_control: None,
    }
}

fn blocks(message: &Message) -> (&'static str, Vec<Block<'_>>) {
    match message {
        Message::User { text } => ("user", vec![Block::Text { text }]),
        Message::Assistant { text, tool_calls } => {
            let mut blocks = Vec::with_capacity(tool_calls.len() + 1);
            if let Some(t) = text.as_deref().filter(|t| !t.is_empty()) {
                blocks.push(Block::Text { text: t });
            }
            for c in tool_calls {
                blocks.push(Block::ToolUse {
                    id: &c.id,
                    name: &c.name,
                    input: input(&c.arguments),
                });
            }
            if blocks.is_empty() {
                // The API rejects empty content and empty text blocks.
                blocks.push(Block::Text {
                    text: "(no output)",
                });
            }
            ("assistant", blocks)
        }
        Message::ToolResults { results, note } => {
            let mut blocks: Vec<Block<'_>> = results
                .iter()
                .map(|r| Block::ToolResult {
                    tool_use_id: &r.call_id,
                    content: &r.content,
                    is_error: r.is_error,
                })
                .collect();
            if let Some(note) = note.as_deref().filter(|n| !n.is_empty()) {
                blocks.push(Block::Text { text: note });
            }
            ("user", blocks)
        }
    }
}

/// Arguments held as text (as this provider and OpenAI's hand them over) go as the text when
/// it is a JSON object; anything else (text that is not JSON, a JSON array) is wrapped.
fn input(arguments: &Arguments) -> Input<'_> {
    match arguments {
        Arguments::Text(t) => match serde_json::from_str::<&RawValue>(t) {
            Ok(raw) if raw.get().trim_start().starts_with('{') => Input::Text(raw),
            _ => Input::Wrapped {
                raw_arguments: arguments,
            },
        },
        Arguments::Value(v) if v.is_object() => Input::Value(v),
        Arguments::Value(_) => Input::Wrapped {
            raw_arguments: arguments,
        },
    }
}
