//! A Chat Completions answer as it comes off the wire: only what the run loop uses, unknown
//! fields ignored, strings borrowed from the body where they need no unescaping.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::model::{Arguments, ModelError, ModelResponse, StopReason, ToolCall, Usage};
use crate::provider::transport::Transport;
use crate::provider::usage::{usage_object, Counts};

#[derive(Deserialize)]
struct Completion<'a> {
    #[serde(borrow)]
    choices: Vec<Choice<'a>>,
    /// Read apart ([`usage`]): a usage that is not an object is unreadable usage, not a
    /// malformed answer, so that the call is still charged.
    #[serde(default, borrow)]
    usage: Option<&'a RawValue>,
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

/// Token counts, read by [`Counts`] (a missing or null count is 0).
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

/// The answer in `body`.
pub(super) fn parse(transport: &Transport, body: &[u8]) -> Result<ModelResponse, ModelError> {
    let reply: Completion<'_> = transport.decode(body, "a Chat Completions answer")?;
    let Some(choice) = reply.choices.into_iter().next() else {
        return Err(transport.malformed("no `choices[0]`"));
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
    Ok(ModelResponse {
        text,
        tool_calls,
        usage: usage(transport, reply.usage)?,
        stop_reason,
    })
}

/// Local servers may omit usage; it then counts as zero. A usage that is there is read
/// faithfully, saturated past `u64`, or unreadable: never free because of its form.
fn usage(transport: &Transport, raw: Option<&RawValue>) -> Result<Usage, ModelError> {
    let Some(raw) = raw.filter(|r| r.get() != "null") else {
        return Ok(Usage::default());
    };
    let u: ReplyUsage = usage_object(transport, raw)?;
    let mut counts = Counts::new(transport);
    let input = counts.get("prompt_tokens", u.prompt_tokens.as_ref())?;
    // Cached tokens are part of `prompt_tokens`, priced lower.
    let cached = counts.get(
        "prompt_tokens_details.cached_tokens",
        u.prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens.as_ref()),
    )?;
    if cached > input {
        return Err(counts.inconsistent(
            "`usage.prompt_tokens_details.cached_tokens` exceeds `usage.prompt_tokens`",
        ));
    }
    let output = counts.get("completion_tokens", u.completion_tokens.as_ref())?;
    Ok(counts.finish(Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: cached,
        cache_write_tokens: 0,
        cache_write_1h_tokens: 0,
    }))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ProviderConfig;
    use serde_json::json;

    fn transport() -> Transport {
        Transport::new("openai", ProviderConfig::new("http://127.0.0.1:9/v1")).expect("a client")
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
        let t = transport();
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
            let r = parse(&t, call_with(wire).as_bytes()).expect("an answer");
            assert_eq!(r.tool_calls[0].arguments, expected, "{wire}");
            assert_eq!(r.stop_reason, StopReason::ToolUse);
        }
    }

    /// JSON that is not a Chat Completions answer is malformed, saying what is wrong.
    #[test]
    fn wrong_shapes_are_malformed() {
        let t = transport();
        for body in [
            r#"{"choices": []}"#,
            r#"{"choices": [{"message": {"content": 5}}]}"#,
            r#"{"choices": [{"message": {"tool_calls": [{"id": "c"}]}}]}"#,
            r#"{"error": "x"}"#,
        ] {
            let e = parse(&t, body.as_bytes()).expect_err(body);
            assert!(
                matches!(e, ModelError::MalformedResponse { .. }),
                "{body}: {e:?}"
            );
        }
    }

    /// Unknown fields anywhere are ignored, as the API adds them over time.
    #[test]
    fn unknown_fields_are_ignored() {
        let body = json!({"id": "x", "system_fingerprint": "fp", "choices": [{"index": 0,
            "message": {"role": "assistant", "content": "hi", "refusal": null, "annotations": [],
                        "audio": null, "reasoning_content": "…"},
            "logprobs": null, "finish_reason": "stop", "extra": {"deep": [1]}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3,
                      "completion_tokens_details": {"reasoning_tokens": 0}},
            "service_tier": "default"});
        let r = parse(&transport(), body.to_string().as_bytes()).expect("an answer");
        assert_eq!(r.text.as_deref(), Some("hi"));
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (1, 2));
    }
}
