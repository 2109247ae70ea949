//! A Messages answer as it comes off the wire: only what the run loop uses, unknown fields
//! and block types ignored, a tool's `input` kept as the JSON text it arrived as.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::model::{Arguments, ModelError, ModelResponse, StopReason, ToolCall, Usage};
use crate::provider::transport::Transport;
use crate::provider::usage::{usage_object, Counts};

#[derive(Deserialize)]
struct Reply<'a> {
    #[serde(borrow)]
    content: Vec<Block<'a>>,
    #[serde(default, borrow)]
    stop_reason: Option<Cow<'a, str>>,
    /// Read apart ([`usage`]), so that a usage of the wrong shape is unreadable usage (the
    /// call is charged), not a malformed answer.
    #[serde(default, borrow)]
    usage: Option<&'a RawValue>,
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

/// Token counts, read by [`Counts`] (a missing or null count is 0).
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
    /// The writes by TTL.
    #[serde(default)]
    cache_creation: Option<CacheCreation>,
}

#[derive(Deserialize)]
struct CacheCreation {
    #[serde(default)]
    ephemeral_1h_input_tokens: Option<Value>,
}

/// The answer in `body`.
pub(super) fn parse(transport: &Transport, body: &[u8]) -> Result<ModelResponse, ModelError> {
    let reply: Reply<'_> = transport.decode(body, "a Messages answer")?;
    let mut texts = Vec::new();
    let mut tool_calls = Vec::new();
    for block in reply.content {
        match &*block.kind {
            "text" => {
                let text = block
                    .text
                    .ok_or_else(|| transport.malformed("a text block lacks `text`"))?;
                texts.push(text);
            }
            "tool_use" => {
                let (Some(id), Some(name), Some(input)) = (block.id, block.name, block.input)
                else {
                    return Err(
                        transport.malformed("a tool_use block lacks `id`, `name` or `input`")
                    );
                };
                tool_calls.push(ToolCall {
                    id,
                    name,
                    // The input's JSON text as sent: the run loop checks a submitted output
                    // on it without building a `Value`.
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
    let usage = usage(transport, reply.usage)?;
    let text = (!texts.is_empty()).then(|| texts.concat());
    Ok(ModelResponse {
        text,
        tool_calls,
        usage,
        stop_reason,
    })
}

/// The Messages API always reports usage: an answer without one is unreadable usage, charged.
fn usage(transport: &Transport, raw: Option<&RawValue>) -> Result<Usage, ModelError> {
    let raw = raw
        .filter(|r| r.get() != "null")
        .ok_or_else(|| transport.unreadable_usage("the answer has no `usage`"))?;
    let u: ReplyUsage = usage_object(transport, raw)?;
    let mut counts = Counts::new(transport);
    let uncached = counts.get("input_tokens", u.input_tokens.as_ref())?;
    let written = counts.get(
        "cache_creation_input_tokens",
        u.cache_creation_input_tokens.as_ref(),
    )?;
    let read = counts.get(
        "cache_read_input_tokens",
        u.cache_read_input_tokens.as_ref(),
    )?;
    let output = counts.get("output_tokens", u.output_tokens.as_ref())?;
    let hourly = counts.get(
        "cache_creation.ephemeral_1h_input_tokens",
        u.cache_creation
            .as_ref()
            .and_then(|c| c.ephemeral_1h_input_tokens.as_ref()),
    )?;
    if hourly > written {
        return Err(counts.inconsistent(
            "`usage.cache_creation.ephemeral_1h_input_tokens` exceeds `usage.cache_creation_input_tokens`",
        ));
    }
    // `input_tokens` excludes the cache's tokens; ours counts every token read, and the
    // cache's are priced apart. A sum past u64 saturates, like a count past it.
    let input = counts.add("the input token counts' sum", uncached, written);
    let input = counts.add("the input token counts' sum", input, read);
    Ok(counts.finish(Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: read,
        cache_write_tokens: written,
        cache_write_1h_tokens: hourly,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ProviderConfig;
    use serde_json::json;

    fn transport() -> Transport {
        Transport::new("anthropic", ProviderConfig::new("http://127.0.0.1:9")).expect("a client")
    }

    #[test]
    fn unknown_fields_and_blocks_are_ignored() {
        let body = json!({"id": "msg", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "thinking", "thinking": "…", "signature": "s"},
                        {"type": "text", "text": "hi", "citations": null},
                        {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}],
            "stop_reason": "end_turn", "stop_sequence": null, "container": null,
            "usage": {"input_tokens": 3, "output_tokens": 4, "service_tier": "standard",
                      "cache_creation": {"ephemeral_5m_input_tokens": 0}}});
        let r = parse(&transport(), body.to_string().as_bytes()).expect("an answer");
        assert_eq!(r.text.as_deref(), Some("hi"));
        assert!(r.tool_calls.is_empty());
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (3, 4));
    }

    #[test]
    fn wrong_shapes_are_malformed_and_odd_usage_unreadable() {
        let t = transport();
        for body in [
            r#"{"content": "text"}"#,
            r#"{"content": [{"text": "no type"}]}"#,
            r#"{"content": [{"type": "text"}], "usage": {}}"#,
            "{\"content\": [",
        ] {
            let e = parse(&t, body.as_bytes()).expect_err(body);
            assert!(
                matches!(e, ModelError::MalformedResponse { .. }),
                "{body}: {e:?}"
            );
        }
        for body in [
            r#"{"content": []}"#,
            r#"{"content": [], "usage": "lots"}"#,
            r#"{"content": [], "usage": {"input_tokens": -1}}"#,
        ] {
            let e = parse(&t, body.as_bytes()).expect_err(body);
            assert!(e.cost_unknown(), "{body}: {e:?}");
        }
    }
}
