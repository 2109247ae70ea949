//! OpenTelemetry GenAI spans, through `tracing`: `invoke_agent {spec}` for every run,
//! `chat {model}` for every model call and `execute_tool {tool}` for every tool call, named and
//! attributed after the OpenTelemetry GenAI semantic conventions. A sub-agent's
//! `invoke_agent` is a child of the `execute_tool` span that started it, so the span tree is
//! the run tree. A host with an OpenTelemetry layer (`tracing-opentelemetry`) gets them with
//! no call of its own; with no subscriber they cost a check of a cached flag each. A span is
//! opened where its moment begins; its result is recorded by one function from the moment's
//! event, the same value the event sinks receive.
//!
//! The spans have the target [`TARGET`] and level INFO. Their attributes: `gen_ai.operation.name`,
//! `gen_ai.provider.name`, `gen_ai.agent.name`, `gen_ai.request.model`,
//! `gen_ai.response.model`, `gen_ai.usage.input_tokens` / `output_tokens` (and, when the
//! prompt cache had a share of the input, `gen_ai.usage.cache_read.input_tokens` /
//! `gen_ai.usage.cache_creation.input_tokens`),
//! `gen_ai.response.finish_reasons`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, `error.type`,
//! and under `subcontract.*`: `run_id`, `parent_run_id`, `depth`, `turns`, `cost_usd` (this
//! run's own calls, or this model call), `total_cost_usd` (with its sub-agents),
//! `budget.limit_usd`, `budget.remaining_usd`, `outcome`, `repairs` (outputs the contract
//! rejected), `grounding_rejections` (valid outputs rejected as ungrounded) and `error`
//! (redacted).
//!
//! Message content (the system prompt, messages, tool arguments and results) is recorded only
//! when [`set_capture_content`] turned it on or the convention's environment variable
//! `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` is `true`, and then redacted like
//! every other text that leaves the process.

use std::sync::atomic::{AtomicU8, Ordering};

use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tracing::field::Empty;
use tracing::Span;

use crate::ctx::Ctx;
use crate::events::EventKind;
use crate::model::{Message, StopReason, ToolCall, Usage};
use crate::outcome::Outcome;
use crate::spec::core::SpecCore;

/// The `tracing` target of every GenAI span, for a filter that picks them out.
pub const TARGET: &str = "gen_ai";

/// The convention's switch for message content.
pub const CAPTURE_ENV: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

// 0: not decided yet (the environment decides on first use), 1: off, 2: on.
static CAPTURE: AtomicU8 = AtomicU8::new(0);

/// Records message content (redacted) in the spans from now on, or stops recording it.
/// Without a call, the environment variable [`CAPTURE_ENV`] decides (`true` turns it on).
pub fn set_capture_content(on: bool) {
    CAPTURE.store(if on { 2 } else { 1 }, Ordering::Relaxed);
}

/// Whether spans record message content.
pub fn capture_content() -> bool {
    match CAPTURE.load(Ordering::Relaxed) {
        0 => {
            let on = std::env::var(CAPTURE_ENV)
                .is_ok_and(|v| v.trim().eq_ignore_ascii_case("true") || v.trim() == "1");
            set_capture_content(on);
            on
        }
        v => v == 2,
    }
}

/// `provider:model` split into the convention's provider and model names; an id without a
/// provider prefix names both.
fn provider_model(id: &str) -> (&str, &str) {
    id.split_once(':').unwrap_or((id, id))
}

fn usd(d: Decimal) -> f64 {
    d.to_f64().unwrap_or(f64::NAN)
}

/// Content as the span holds it: compact JSON text, redacted.
fn content(v: &Value) -> String {
    crate::redact::redact(&v.to_string()).into_owned()
}

/// The span of one run (not entered: the run's future is instrumented with it).
pub(crate) fn agent_span(spec: &SpecCore, ctx: &Ctx) -> Span {
    // Field values are evaluated only when a subscriber wants the span, so the model's id is
    // split there: a run with no subscriber does not pay for it.
    let id: &str = ctx.model_id();
    let span = tracing::info_span!(
        target: TARGET,
        "invoke_agent",
        otel.name = %format_args!("invoke_agent {}", spec.def.name),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.provider.name = provider_model(id).0,
        gen_ai.agent.name = %spec.def.name,
        gen_ai.agent.description = Empty,
        gen_ai.request.model = provider_model(id).1,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        error.type = Empty,
        subcontract.run_id = ctx.run_id(),
        subcontract.parent_run_id = Empty,
        subcontract.depth = ctx.depth(),
        subcontract.turns = Empty,
        subcontract.cost_usd = Empty,
        subcontract.total_cost_usd = Empty,
        subcontract.budget.limit_usd = Empty,
        subcontract.budget.remaining_usd = Empty,
        subcontract.outcome = Empty,
        subcontract.cut_short = Empty,
        subcontract.repairs = Empty,
        subcontract.grounding_rejections = Empty,
        subcontract.error = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if !spec.def.description.is_empty() {
        span.record("gen_ai.agent.description", spec.def.description.as_str());
    }
    if let Some(p) = ctx.parent_run_id() {
        span.record("subcontract.parent_run_id", p);
    }
    if let Some(l) = ctx.budget().nearest_limit_usd() {
        span.record("subcontract.budget.limit_usd", usd(l));
    }
    span
}

/// The span of one model call; `system` and `messages` are recorded only when content is
/// captured.
pub(crate) fn chat_span(ctx: &Ctx, system: &str, messages: &[Message], max_tokens: u32) -> Span {
    // Split where a subscriber wants the span only, as in `agent_span`.
    let id: &str = ctx.model_id();
    let span = tracing::info_span!(
        target: TARGET,
        "chat",
        otel.name = %format_args!("chat {}", provider_model(id).1),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider_model(id).0,
        gen_ai.request.model = provider_model(id).1,
        gen_ai.request.max_tokens = max_tokens,
        gen_ai.response.model = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        gen_ai.system_instructions = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        error.type = Empty,
        subcontract.run_id = ctx.run_id(),
        subcontract.cost_usd = Empty,
        subcontract.error = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if capture_content() {
        let sys = json!([{"type": "text", "content": system}]);
        span.record("gen_ai.system_instructions", content(&sys));
        let msgs: Vec<Value> = messages.iter().map(message_json).collect();
        span.record("gen_ai.input.messages", content(&Value::Array(msgs)));
    }
    span
}

/// The GenAI usage attributes: tokens in and out, and the prompt cache's reads and writes
/// (of the input tokens) when there were any.
fn record_usage(span: &Span, usage: Usage) {
    span.record("gen_ai.usage.input_tokens", usage.input_tokens);
    span.record("gen_ai.usage.output_tokens", usage.output_tokens);
    if usage.cache_read_tokens > 0 {
        span.record(
            "gen_ai.usage.cache_read.input_tokens",
            usage.cache_read_tokens,
        );
    }
    if usage.cache_write_tokens > 0 {
        span.record(
            "gen_ai.usage.cache_creation.input_tokens",
            usage.cache_write_tokens,
        );
    }
}

/// The span of one tool call (the call's future is instrumented with it, so a sub-agent it
/// starts is its child).
pub(crate) fn tool_span(call: &ToolCall) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "execute_tool",
        otel.name = %format_args!("execute_tool {}", call.name),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %crate::redact::redact(&call.id),
        gen_ai.tool.type = "function",
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        error.type = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if capture_content() {
        let args = serde_json::to_value(&call.arguments).unwrap_or(Value::Null);
        span.record("gen_ai.tool.call.arguments", content(&args));
    }
    span
}

/// Reports one moment: its span's attributes recorded from its event, the span let go, then
/// the event to the sinks. Each moment is produced once, here.
pub(crate) fn report(ctx: &Ctx, span: Span, kind: EventKind, detail: Detail<'_>) {
    record(&span, ctx, &kind, detail);
    drop(span);
    ctx.emit(kind);
}

/// The span of one command an acting run runs in its working copy (opened before it starts,
/// recorded from its `command` event when it ends): the program, never its arguments'
/// contents beyond it, nor its environment.
pub(crate) fn command_span(program: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "command",
        otel.name = %format_args!("command {program}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        subcontract.command.program = %program,
        subcontract.command.exit_code = Empty,
        subcontract.command.timed_out = Empty,
        subcontract.command.duration_ms = Empty,
        subcontract.command.output_bytes = Empty,
        error.type = Empty,
    )
}

/// The span of what became of one set of changes (captured, accepted, discarded, kept).
pub(crate) fn changes_span(status: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "changes",
        otel.name = %format_args!("changes {status}"),
        otel.kind = "internal",
        subcontract.changes.id = Empty,
        subcontract.changes.status = %status,
        subcontract.changes.files = Empty,
        subcontract.changes.insertions = Empty,
        subcontract.changes.deletions = Empty,
        subcontract.changes.patch = Empty,
    )
}

/// What a span records of a moment that the moment's event does not hold.
pub(crate) enum Detail<'a> {
    /// Nothing beyond the event.
    None,
    /// A run's end: its cost with its sub-agents', and the outputs it rejected.
    Run {
        /// This run's calls and its sub-agents'.
        total: Decimal,
        /// Outputs the contract rejected.
        repairs: u32,
        /// Valid outputs rejected as ungrounded.
        grounding_rejections: u32,
    },
    /// A model's answer, for its output messages (recorded only when content is captured).
    Answer {
        /// Its text.
        text: Option<&'a str>,
        /// Its tool calls.
        calls: &'a [ToolCall],
    },
    /// A tool's result, likewise.
    Result(&'a str),
}

/// Records a moment on its span from the moment's event, the same value the sinks receive:
/// the one place a span's result is written. A run's end goes on its `invoke_agent` span, a
/// model call on its `chat` span (which ends when its holder drops it), a tool call on its
/// `execute_tool` span; other events mark no span.
///
/// Inlined down to the check, so that a span no subscriber wants costs a branch.
#[inline]
pub(crate) fn record(span: &Span, ctx: &Ctx, kind: &EventKind, detail: Detail<'_>) {
    if !span.is_disabled() {
        record_on(span, ctx, kind, detail);
    }
}

/// [`record`] on a span a subscriber wants.
fn record_on(span: &Span, ctx: &Ctx, kind: &EventKind, detail: Detail<'_>) {
    match kind {
        EventKind::Finished {
            outcome,
            turns,
            usage,
            cost_usd,
            error,
            cut_short,
            ..
        } => {
            record_usage(span, *usage);
            if let Some(l) = cut_short {
                span.record("subcontract.cut_short", l.as_str());
            }
            span.record("subcontract.turns", *turns);
            span.record("subcontract.cost_usd", usd(*cost_usd));
            if let Detail::Run {
                total,
                repairs,
                grounding_rejections,
            } = detail
            {
                span.record("subcontract.total_cost_usd", usd(total));
                span.record("subcontract.repairs", repairs);
                span.record("subcontract.grounding_rejections", grounding_rejections);
            }
            if let Some(r) = ctx.budget().remaining_usd() {
                span.record("subcontract.budget.remaining_usd", usd(r));
            }
            span.record("subcontract.outcome", outcome.as_str());
            if *outcome != Outcome::Completed {
                span.record("error.type", outcome.as_str());
                span.record("otel.status_code", "error");
            }
            if let Some(e) = error {
                span.record("subcontract.error", crate::redact::redact(e).as_ref());
            }
        }
        EventKind::ModelCall { error: Some(e), .. } => {
            span.record("error.type", "model_error");
            span.record("otel.status_code", "error");
            span.record("subcontract.error", crate::redact::redact(e).as_ref());
        }
        EventKind::ModelCall {
            usage,
            cost_usd,
            stop_reason,
            ..
        } => {
            let reason = stop_reason.map_or("other", finish_reason);
            // The model that answered is the one asked: a provider's echo of it is not kept.
            span.record("gen_ai.response.model", provider_model(ctx.model().id()).1);
            span.record("gen_ai.response.finish_reasons", reason);
            record_usage(span, *usage);
            span.record("subcontract.cost_usd", usd(*cost_usd));
            if let (Detail::Answer { text, calls }, true) = (detail, capture_content()) {
                let mut m = assistant_json(text, calls);
                m["finish_reason"] = Value::from(reason);
                span.record("gen_ai.output.messages", content(&Value::Array(vec![m])));
            }
        }
        EventKind::Command {
            exit_code,
            timed_out,
            duration_ms,
            output_bytes,
            error,
            ..
        } => {
            if let Some(code) = exit_code {
                span.record("subcontract.command.exit_code", *code);
            }
            span.record("subcontract.command.timed_out", *timed_out);
            span.record("subcontract.command.duration_ms", *duration_ms);
            span.record("subcontract.command.output_bytes", *output_bytes);
            if error.is_some() || *timed_out || *exit_code != Some(0) {
                let why = if error.is_some() {
                    "refused"
                } else {
                    "command_failed"
                };
                span.record("error.type", why);
                span.record("otel.status_code", "error");
            }
        }
        EventKind::Changes(c) => {
            span.record("subcontract.changes.id", c.id.as_str());
            span.record("subcontract.changes.files", c.files as u64);
            span.record("subcontract.changes.insertions", c.insertions);
            span.record("subcontract.changes.deletions", c.deletions);
            if let Some(p) = &c.patch {
                span.record("subcontract.changes.patch", p.as_str());
            }
        }
        EventKind::ToolCall { is_error, .. } => {
            if *is_error {
                span.record("error.type", "tool_error");
                span.record("otel.status_code", "error");
            }
            if let (Detail::Result(result), true) = (detail, capture_content()) {
                span.record(
                    "gen_ai.tool.call.result",
                    crate::redact::redact(result).as_ref(),
                );
            }
        }
        _ => {}
    }
}

/// The convention's finish reason for ours.
fn finish_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "stop",
        StopReason::ToolUse => "tool_call",
        StopReason::MaxTokens => "length",
        StopReason::Other => "other",
    }
}

fn assistant_json(text: Option<&str>, calls: &[ToolCall]) -> Value {
    let mut parts: Vec<Value> = Vec::with_capacity(calls.len() + 1);
    if let Some(t) = text {
        parts.push(json!({"type": "text", "content": t}));
    }
    for c in calls {
        let args = serde_json::to_value(&c.arguments).unwrap_or(Value::Null);
        parts.push(json!({"type": "tool_call", "id": c.id, "name": c.name, "arguments": args}));
    }
    json!({"role": "assistant", "parts": parts})
}

/// One message in the convention's shape (`role`, `parts`).
fn message_json(m: &Message) -> Value {
    match m {
        Message::User { text } => {
            json!({"role": "user", "parts": [{"type": "text", "content": text}]})
        }
        Message::Assistant { text, tool_calls } => assistant_json(text.as_deref(), tool_calls),
        Message::ToolResults { results, note } => {
            let mut parts: Vec<Value> = results
                .iter()
                .map(|r| json!({"type": "tool_call_response", "id": r.call_id, "response": r.content}))
                .collect();
            if let Some(n) = note {
                parts.push(json!({"type": "text", "content": n}));
            }
            json!({"role": "tool", "parts": parts})
        }
    }
}
