//! One run's conversation, turn by turn: offer the tools, reserve and call the model, check
//! an answer or a submission against the output contract (asking for a repair when it fails),
//! and hand the other tool calls to [`fanout`](super::fanout).

use std::time::Instant;

use rust_decimal::Decimal;
use serde_json::Value;

use super::fanout::run_tool_calls;
use super::{cancelled, LoopState, TurnsResult};
use crate::contract::{repair_message, Violation};
use crate::ctx::Ctx;
use crate::events::EventKind;
use crate::model::{Message, ModelRequest, ModelResponse, ToolDefinition, Usage, SUBMIT_TOOL};
use crate::outcome::Outcome;
use crate::spec::core::{with_value, OutputMode, OutputText, SpecCore};
use crate::tool::ToolOutput;

/// Reports a rejected output (an event with where and why, never the output) and returns the
/// violations as one line, for the run's error should no turn repair them.
pub(super) fn rejected(ctx: &Ctx, turn: u32, v: &[Violation]) -> String {
    ctx.emit(EventKind::OutputRejected {
        turn,
        violations: v.to_vec(),
    });
    join(v)
}

pub(super) fn join(v: &[Violation]) -> String {
    v.iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("; ")
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
                        .map(|c| {
                            // Arguments held as text are sent as that text.
                            let args = match &c.arguments {
                                Value::String(text) => text.len(),
                                v => crate::json::compact_bytes(v),
                            };
                            c.id.len() + c.name.len() + args
                        })
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

pub(super) async fn turns(
    spec: &SpecCore,
    input: Value,
    ctx: &Ctx,
    text_out: OutputText,
    st: &mut LoopState,
) -> TurnsResult {
    // Offered tools: the spec's, each held by the context (a child holds exactly these).
    // Definitions are shared, so offering them costs reference counts, not copies.
    let mut offered: Vec<ToolDefinition> = Vec::with_capacity(spec.tools.len() + 1);
    let mut missing: Vec<&str> = Vec::new();
    let mut tools_bytes = 0;
    for t in &spec.tools {
        match ctx.tools().get(t) {
            Some(e) => {
                let d = &e.definition;
                tools_bytes += d.name.len() + d.description.len() + e.schema_bytes;
                offered.push(d.clone());
            }
            None => missing.push(t),
        }
    }
    if !missing.is_empty() {
        return (
            Outcome::Denied,
            None,
            Some(format!(
                "`{}` asks for tools this context does not hold: {}",
                spec.name,
                missing.join(", ")
            )),
        );
    }
    if let Some(d) = &spec.submit_tool {
        tools_bytes += d.name.len() + d.description.len() + spec.output_schema_bytes;
        offered.push(d.clone());
    }
    let model = ctx.model().clone();
    let price = ctx.prices().get(model.id());
    // Two messages per turn after the first. Room for four turns: most sub-agent runs are
    // short, and a history allocated for the turn limit would be a large block per run
    // (which makes malloc consolidate its free lists on every child).
    let mut messages: Vec<Message> =
        Vec::with_capacity((2 * spec.limits.max_turns as usize + 1).min(9));
    // Written into a presized buffer (Display grows its String as it goes); same text.
    messages.push(Message::user(crate::json::to_compact_string(&input)));
    let mut bytes = spec.system.len() + tools_bytes + message_bytes(&messages[0]);
    let mut last_invalid: Option<String> = None;
    let max_tokens = spec.limits.max_tokens_per_turn;

    for turn in 1..=spec.limits.max_turns {
        // No model call starts once the run is stopping.
        if ctx.cancellation().is_cancelled() {
            return cancelled();
        }
        let worst = price.map_or(Decimal::ZERO, |p| {
            p.worst_case_cost(bytes as u64, u64::from(max_tokens))
        });
        let reservation = match ctx.budget().reserve(worst).await {
            Ok(r) => r,
            Err(e) => return (Outcome::BudgetExhausted, None, Some(e.to_string())),
        };
        st.turns = turn;
        let t0 = Instant::now();
        let chat = crate::telemetry::chat_span(ctx, &spec.system, &messages, max_tokens);
        let call = model.complete(ModelRequest {
            system: &spec.system,
            messages: &messages,
            tools: &offered,
            max_tokens,
        });
        // A call in flight when the run stops is dropped, and its reservation released. Biased,
        // so a call is never first polled (started) after the cancellation.
        let response = tokio::select! {
            biased;
            _ = ctx.cancellation().cancelled() => return cancelled(),
            r = call => r,
        };
        let duration_ms = t0.elapsed().as_secs_f64() * 1000.0;
        let ModelResponse {
            text,
            mut tool_calls,
            usage,
            stop_reason,
        } = match response {
            Ok(r) => r,
            Err(e) => {
                drop(reservation);
                let msg = e.to_string();
                crate::telemetry::chat_failed(chat, &msg);
                ctx.emit(EventKind::ModelCall {
                    turn,
                    usage: Usage::default(),
                    cost_usd: Decimal::ZERO,
                    duration_ms,
                    stop_reason: None,
                    error: Some(msg.clone()),
                    over_reserved_usd: None,
                });
                return (Outcome::ModelError, None, Some(msg));
            }
        };
        let cost = crate::model::cost_at(price, model.id(), usage);
        let reserved = reservation.amount();
        // A cost above the worst case exhausts every limited budget above this run.
        reservation.settle(cost);
        let over = (cost > reserved).then(|| cost - reserved);
        st.usage += usage;
        st.cost = st.cost.saturating_add(cost);
        crate::telemetry::chat_done(
            chat,
            ctx,
            usage,
            cost,
            stop_reason,
            text.as_deref(),
            &tool_calls,
        );
        ctx.emit(EventKind::ModelCall {
            turn,
            usage,
            cost_usd: cost,
            duration_ms,
            stop_reason: Some(stop_reason),
            error: None,
            over_reserved_usd: over,
        });
        if over.is_some() && ctx.budget().remaining_usd().is_some() {
            return (
                Outcome::BudgetExhausted,
                None,
                Some(format!(
                    "the provider billed {} USD for turn {turn}, more than the {} USD reserved for it (its worst case at {max_tokens} output tokens): the budget is exhausted and no further call is made",
                    cost.normalize(),
                    reserved.round_dp(6).normalize()
                )),
            );
        }

        if tool_calls.is_empty() {
            // No tool call: the answer is the text (text mode), or text that is the output
            // as JSON (a model that ignored the submission tool), or a reason to ask again.
            let repair = match spec.output_mode {
                OutputMode::Text => {
                    let v = Value::String(text.clone().unwrap_or_default());
                    match spec.accept_output(&v, text_out) {
                        Ok((t, d)) => {
                            return (Outcome::Completed, Some((t, with_value(d, || v))), None)
                        }
                        Err(viol) => {
                            last_invalid = Some(rejected(ctx, turn, &viol));
                            repair_message(&viol, "Answer again with corrected text.")
                        }
                    }
                }
                OutputMode::Tool => match text.as_deref().and_then(parse_json_lenient) {
                    Some(v) => match spec.accept_output(&v, text_out) {
                        Ok((t, d)) => {
                            return (Outcome::Completed, Some((t, with_value(d, || v))), None)
                        }
                        Err(viol) => {
                            last_invalid = Some(rejected(ctx, turn, &viol));
                            repair_message(&viol, &format!("Call `{SUBMIT_TOOL}` with the corrected answer."))
                        }
                    },
                    None => format!(
                        "You did not submit an answer. Call `{SUBMIT_TOOL}` with your final answer as its arguments."
                    ),
                },
            };
            let a = Message::Assistant {
                text,
                tool_calls: Vec::new(),
            };
            let u = Message::user(repair);
            bytes += message_bytes(&a) + message_bytes(&u);
            messages.push(a);
            messages.push(u);
            continue;
        }

        // A valid submission ends the run; an invalid one is answered with what to repair.
        let mut submit_result: Option<(usize, ToolOutput)> = None;
        if let Some(i) = tool_calls.iter().position(|c| c.name == SUBMIT_TOOL) {
            let checked = match &tool_calls[i].arguments {
                // Arguments as text, as providers receive them: checked on the text itself,
                // so a typed output is decoded from it without ever becoming a `Value`.
                Value::String(s) => spec.accept_output_json(s, text_out).map(|a| (a, false)),
                v => spec.accept_output(v, text_out).map(|a| (a, true)),
            };
            match checked {
                Ok(((t, d), from_value)) => {
                    if tool_calls.len() > 1 {
                        tracing::debug!(
                            run_id = ctx.run_id(),
                            "tool calls made beside a valid submission were not run"
                        );
                    }
                    // The run ends here, so the calls are not kept: an output the provider
                    // sent as an object is moved out, not copied.
                    let d = if from_value {
                        with_value(d, || tool_calls.swap_remove(i).arguments)
                    } else {
                        d
                    };
                    return (Outcome::Completed, Some((t, d)), None);
                }
                Err(viol) => {
                    last_invalid = Some(rejected(ctx, turn, &viol));
                    let left = spec.limits.max_turns - turn;
                    let hint = format!("Call `{SUBMIT_TOOL}` again with the corrected answer ({left} turn(s) left).");
                    submit_result = Some((i, ToolOutput::error(repair_message(&viol, &hint))));
                }
            }
        }

        let (results, note) = run_tool_calls(spec, &tool_calls, submit_result, ctx, turn).await;
        let a = Message::Assistant { text, tool_calls };
        let r = Message::ToolResults { results, note };
        bytes += message_bytes(&a) + message_bytes(&r);
        messages.push(a);
        messages.push(r);
    }
    match last_invalid {
        Some(v) => (
            Outcome::InvalidOutput,
            None,
            Some(format!("the last output was invalid: {v}")),
        ),
        None => (
            Outcome::MaxTurns,
            None,
            Some(format!("no output within {} turns", spec.limits.max_turns)),
        ),
    }
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
