//! One run's conversation, turn by turn: offer the tools, reserve and call the model, check
//! an answer or a submission against the output contract (asking for a repair when it fails),
//! and hand the other tool calls to [`fanout`](super::fanout).

use std::time::Instant;

use rust_decimal::Decimal;
use serde_json::Value;

use super::fanout::run_tool_calls;
use super::{Decoded, LoopState, TurnsResult};
use crate::contract::{repair_message, Violation};
use crate::ctx::Ctx;
use crate::events::EventKind;
use crate::model::{
    Arguments, Message, ModelRequest, ModelResponse, ToolCall, ToolDefinition, Usage, SUBMIT_TOOL,
};
use crate::outcome::Failure;
use crate::spec::core::{with_value, OutputKind, OutputText, SpecCore};
use crate::tool::ToolOutput;

/// Reports a rejected output (an event with where and why, never the output) and returns the
/// violations, for the run's failure should no turn repair them.
fn rejected(ctx: &Ctx, turn: u32, v: &[Violation]) -> Vec<Violation> {
    ctx.emit(EventKind::OutputRejected {
        turn,
        violations: v.to_vec(),
    });
    v.to_vec()
}

/// Bytes of a message as the provider will see them, plus a per-message allowance for
/// framing: a token never spans less than one byte, so bytes bound tokens from above and make
/// a safe reservation.
fn message_bytes(m: &Message) -> usize {
    const OVERHEAD: usize = 16;
    OVERHEAD
        + match m {
            Message::User { text } => text.len(),
            Message::Assistant { text, tool_calls } => {
                text.as_ref().map_or(0, String::len)
                    + tool_calls
                        .iter()
                        .map(|c| c.id.len() + c.name.len() + c.arguments.sent_len())
                        .sum::<usize>()
            }
            Message::ToolResults { results, note } => {
                note.as_ref().map_or(0, String::len)
                    + results
                        .iter()
                        .map(|r| r.call_id.len() + r.content.len() + OVERHEAD)
                        .sum::<usize>()
            }
        }
}

/// The conversation of one run: the messages so far, and their size as a provider sees them
/// (with the system prompt and the offered tools), which is what a model call reserves for.
struct Conversation {
    messages: Vec<Message>,
    bytes: usize,
}

impl Conversation {
    fn new(spec: &SpecCore, tools_bytes: usize, input: &Value) -> Self {
        // Two messages per turn after the first. Room for four turns: most sub-agent runs are
        // short, and a history allocated for the turn limit would be a large block per run
        // (which makes malloc consolidate its free lists on every child).
        let mut messages = Vec::with_capacity((2 * spec.limits.max_turns as usize + 1).min(9));
        // Written into a presized buffer (Display grows its String as it goes); same text.
        messages.push(Message::user(crate::json::to_compact_string(input)));
        let bytes = spec.system.len() + tools_bytes + message_bytes(&messages[0]);
        Conversation { messages, bytes }
    }

    /// Adds the model's turn and the answer to it.
    fn push(&mut self, assistant: Message, answer: Message) {
        self.bytes += message_bytes(&assistant) + message_bytes(&answer);
        self.messages.push(assistant);
        self.messages.push(answer);
    }
}

/// The tools offered to the model: the spec's, each held by the context (a child holds
/// exactly these), plus the submission tool; and their size. Definitions are shared, so
/// offering them costs reference counts, not copies. A tool the context lacks ends the run.
fn offer(spec: &SpecCore, ctx: &Ctx) -> Result<(Vec<ToolDefinition>, usize), Failure> {
    let mut offered: Vec<ToolDefinition> = Vec::with_capacity(spec.tools.len() + 1);
    let mut missing: Vec<&str> = Vec::new();
    let mut bytes = 0;
    for t in &spec.tools {
        match ctx.tools().get(t) {
            Some(e) => {
                let d = &e.definition;
                bytes += d.name.len() + d.description.len() + e.schema_bytes;
                offered.push(d.clone());
            }
            None => missing.push(t),
        }
    }
    if !missing.is_empty() {
        return Err(Failure::ToolsNotHeld {
            spec: spec.name.clone(),
            missing: missing.into_iter().map(str::to_owned).collect(),
        });
    }
    if let Some(d) = &spec.submit_tool {
        bytes += d.name.len() + d.description.len() + spec.output_schema_bytes;
        offered.push(d.clone());
    }
    Ok((offered, bytes))
}

/// One model call: its worst case reserved first, the call (dropped if the run stops), the
/// actual cost settled and recorded. A provider that billed past the reservation ends the run.
async fn call_model(
    spec: &SpecCore,
    ctx: &Ctx,
    offered: &[ToolDefinition],
    convo: &Conversation,
    turn: u32,
    st: &mut LoopState,
) -> Result<ModelResponse, Failure> {
    let model = ctx.model();
    let price = ctx.prices().get(model.id());
    let max_tokens = spec.limits.max_tokens_per_turn;
    let worst = price.map_or(Decimal::ZERO, |p| {
        p.worst_case_cost(convo.bytes as u64, u64::from(max_tokens))
    });
    // A reservation may wait for calls in flight; a run that stops meanwhile stops waiting
    // (dropping the wait leaves nothing reserved).
    let reserved = tokio::select! {
        biased;
        _ = ctx.cancellation().cancelled() => return Err(Failure::Cancelled),
        r = ctx.budget().reserve(worst) => r,
    };
    let reservation = match reserved {
        Ok(r) => r,
        Err(error) => return Err(Failure::Budget { error, turn }),
    };
    // Recorded before the call, so a process lost during it is still charged for it.
    if let Some(journal) = ctx.spend_journal() {
        let recorded = tokio::select! {
            biased;
            _ = ctx.cancellation().cancelled() => return Err(Failure::Cancelled),
            r = journal.before_call() => r,
        };
        if let Err(e) = recorded {
            drop(reservation);
            return Err(Failure::SpendNotRecorded(e));
        }
    }
    st.turns = turn;
    let t0 = Instant::now();
    let chat = crate::telemetry::chat_span(ctx, &spec.system, &convo.messages, max_tokens);
    let call = model.complete(
        ModelRequest::new(&spec.system, &convo.messages, offered, max_tokens)
            .with_sampling(spec.sampling),
    );
    // A call in flight when the run stops is dropped, and its reservation released. Biased,
    // so a call is never first polled (started) after the cancellation.
    let response = tokio::select! {
        biased;
        _ = ctx.cancellation().cancelled() => return Err(Failure::Cancelled),
        r = call => r,
    };
    let duration_ms = t0.elapsed().as_secs_f64() * 1000.0;
    let response = match response {
        Ok(r) => r,
        Err(e) => {
            // A call answered with a usage that cannot be read happened and is billed: it is
            // charged its whole reservation, its worst case, never nothing.
            let failure = if e.cost_unknown() {
                let charged = reservation.amount();
                reservation.settle(charged);
                st.cost = st.cost.saturating_add(charged);
                Failure::UnreadableUsage { error: e, charged }
            } else {
                drop(reservation);
                Failure::Model(e)
            };
            let (charged, msg) = match &failure {
                Failure::UnreadableUsage { charged, .. } => (*charged, failure.to_string()),
                _ => (Decimal::ZERO, failure.to_string()),
            };
            crate::telemetry::chat_failed(chat, &msg);
            ctx.emit(EventKind::ModelCall {
                turn,
                usage: Usage::default(),
                cost_usd: charged,
                duration_ms,
                stop_reason: None,
                error: Some(msg),
                over_reserved_usd: None,
            });
            return Err(failure);
        }
    };
    let cost = crate::model::cost_at(price, model.id(), response.usage);
    let reserved = reservation.amount();
    // A cost above the worst case exhausts every limited budget above this run.
    reservation.settle(cost);
    let over = (cost > reserved).then(|| cost - reserved);
    st.usage += response.usage;
    st.cost = st.cost.saturating_add(cost);
    crate::telemetry::chat_done(
        chat,
        ctx,
        response.usage,
        cost,
        response.stop_reason,
        response.text.as_deref(),
        &response.tool_calls,
    );
    ctx.emit(EventKind::ModelCall {
        turn,
        usage: response.usage,
        cost_usd: cost,
        duration_ms,
        stop_reason: Some(response.stop_reason),
        error: None,
        over_reserved_usd: over,
    });
    if over.is_some() && ctx.budget().remaining_usd().is_some() {
        let u = response.usage;
        let saturated = [
            u.input_tokens,
            u.output_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
        ]
        .contains(&u64::MAX);
        return Err(Failure::Overbilled {
            turn,
            billed: cost,
            reserved,
            max_tokens,
            saturated,
        });
    }
    Ok(response)
}

/// An output that failed its contract: where and why, reported, and what the model is told.
struct Rejected {
    /// The violations, for the run's failure should no turn repair them.
    summary: Vec<Violation>,
    /// The repair request.
    repair: String,
}

fn reject(ctx: &Ctx, turn: u32, v: &[Violation], hint: &str) -> Rejected {
    Rejected {
        summary: rejected(ctx, turn, v),
        repair: repair_message(v, hint),
    }
}

/// An answer with no tool call: the output itself (text mode), or text that is the output as
/// JSON (a model that ignored the submission tool). `Err` holds what to tell the model, and
/// the rejection when there was an output to reject.
fn answer_in_text(
    spec: &SpecCore,
    ctx: &Ctx,
    turn: u32,
    text: Option<&str>,
    out: OutputText,
) -> Result<Decoded, (String, Option<Vec<Violation>>)> {
    let v = match spec.output_kind {
        OutputKind::Text => Value::String(text.unwrap_or_default().to_owned()),
        OutputKind::Json => match text.and_then(parse_json_lenient) {
            Some(v) => v,
            None => {
                return Err((
                    format!(
                        "You did not submit an answer. Call `{SUBMIT_TOOL}` with your final answer as its arguments."
                    ),
                    None,
                ))
            }
        },
    };
    match spec.accept_output(&v, out) {
        Ok((t, d)) => Ok((t, with_value(d, || v))),
        Err(viol) => {
            let hint = match spec.output_kind {
                OutputKind::Text => "Answer again with corrected text.".to_string(),
                OutputKind::Json => format!("Call `{SUBMIT_TOOL}` with the corrected answer."),
            };
            let r = reject(ctx, turn, &viol, &hint);
            Err((r.repair, Some(r.summary)))
        }
    }
}

/// What a turn's submission (a call of the submission tool) came to.
enum Submission {
    /// There was none.
    None,
    /// It is valid: the run ends with it.
    Accepted(Decoded),
    /// It is invalid: the call at this index is answered with the repair request.
    Rejected(usize, Rejected),
}

/// Checks the submission among `calls`, if any. Arguments sent as text, as providers send
/// them, are checked on the text itself, so a typed output is decoded from it without ever
/// becoming a `Value`.
fn submission(
    spec: &SpecCore,
    ctx: &Ctx,
    turn: u32,
    calls: &mut Vec<ToolCall>,
    out: OutputText,
) -> Submission {
    let Some(i) = calls.iter().position(|c| c.name == SUBMIT_TOOL) else {
        return Submission::None;
    };
    let checked = match &calls[i].arguments {
        Arguments::Text(s) => spec.accept_output_json(s, out).map(|a| (a, false)),
        Arguments::Value(v) => spec.accept_output(v, out).map(|a| (a, true)),
    };
    match checked {
        Ok(((t, d), from_value)) => {
            if calls.len() > 1 {
                tracing::debug!(
                    run_id = ctx.run_id(),
                    "tool calls made beside a valid submission were not run"
                );
            }
            // The run ends here, so the calls are not kept: an output the provider sent as an
            // object is moved out, not copied.
            let d = if from_value {
                with_value(d, || calls.swap_remove(i).arguments.into_value())
            } else {
                d
            };
            Submission::Accepted((t, d))
        }
        Err(viol) => {
            let left = spec.limits.max_turns - turn;
            let hint = format!(
                "Call `{SUBMIT_TOOL}` again with the corrected answer ({left} turn(s) left)."
            );
            Submission::Rejected(i, reject(ctx, turn, &viol, &hint))
        }
    }
}

/// The run's turns: each a model call, then the output checked (and a repair asked for) or the
/// tool calls run, until an output is accepted, the turns run out or the run stops.
pub(super) async fn turns(
    spec: &SpecCore,
    input: Value,
    ctx: &Ctx,
    out: OutputText,
    st: &mut LoopState,
) -> TurnsResult {
    let (offered, tools_bytes) = offer(spec, ctx)?;
    let mut convo = Conversation::new(spec, tools_bytes, &input);
    let mut last_invalid: Option<Vec<Violation>> = None;
    for turn in 1..=spec.limits.max_turns {
        // No model call starts once the run is stopping.
        if ctx.cancellation().is_cancelled() {
            return Err(Failure::Cancelled);
        }
        let ModelResponse {
            text,
            mut tool_calls,
            ..
        } = call_model(spec, ctx, &offered, &convo, turn, st).await?;
        if tool_calls.is_empty() {
            let repair = match answer_in_text(spec, ctx, turn, text.as_deref(), out) {
                Ok(done) => return Ok(done),
                Err((repair, rejected)) => {
                    last_invalid = rejected.or(last_invalid);
                    repair
                }
            };
            let assistant = Message::Assistant {
                text,
                tool_calls: Vec::new(),
            };
            convo.push(assistant, Message::user(repair));
            continue;
        }
        let repair = match submission(spec, ctx, turn, &mut tool_calls, out) {
            Submission::Accepted(done) => return Ok(done),
            Submission::Rejected(i, r) => {
                last_invalid = Some(r.summary);
                Some((i, ToolOutput::error(r.repair)))
            }
            Submission::None => None,
        };
        let (results, note) = run_tool_calls(spec, &tool_calls, repair, ctx, turn).await;
        let assistant = Message::Assistant { text, tool_calls };
        convo.push(assistant, Message::ToolResults { results, note });
    }
    Err(match last_invalid {
        Some(v) => Failure::InvalidOutput(v),
        None => Failure::MaxTurns {
            turns: spec.limits.max_turns,
        },
    })
}

/// A JSON document in a text answer, possibly inside a ```json fence.
fn parse_json_lenient(text: &str) -> Option<Value> {
    let t = text.trim();
    let t = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .and_then(|s| s.strip_suffix("```"))
        .unwrap_or(t)
        .trim();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return None;
    }
    serde_json::from_str(t).ok()
}
