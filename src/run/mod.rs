//! The one run loop, for hosts and sub-agents alike: a fresh conversation, the offered tools,
//! the turn limit, output validation with repair, the timeout, cancellation, and concurrent
//! sub-agent calls. Every run ends with one of the [`Outcome`]s, never silently.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::contract::{repair_message, Contract, Violation};
use crate::ctx::Ctx;
use crate::events::EventKind;
use crate::gate::{ApprovalRequest, Decision};
use crate::model::{
    Message, ModelRequest, ModelResponse, ToolCall, ToolDefinition, ToolResult, Usage, SUBMIT_TOOL,
};
use crate::outcome::{Outcome, RunResult};
use crate::spec::core::{with_value, OutputMode, OutputText, SpecCore};
use crate::tool::{Tool, ToolKind, ToolOutput};

mod agent_tool;
pub(crate) use agent_tool::AgentTool;

impl<O> RunResult<O> {
    pub(crate) fn input_not_serialisable(ctx: &Ctx, e: serde_json::Error) -> Self {
        RunResult {
            run_id: ctx.run_id().to_string(),
            outcome: Outcome::InvalidInput,
            output: None,
            turns: 0,
            usage: Usage::default(),
            cost_usd: Decimal::ZERO,
            total_cost_usd: Decimal::ZERO,
            duration: Duration::ZERO,
            error: Some(format!("the input could not be serialised: {e}")),
        }
    }
}

/// A validated output: its compact JSON (when a parent reads it) and its value, the spec's
/// type (a `Value` for a spec over JSON values).
type Decoded = crate::spec::core::Accepted;

impl RunResult<Decoded> {
    pub(crate) fn downcast<O: 'static>(self) -> RunResult<O> {
        let RunResult {
            run_id,
            outcome,
            output,
            turns,
            usage,
            cost_usd,
            total_cost_usd,
            duration,
            error,
        } = self;
        let (output, error) =
            match output.map(|(_, any)| crate::spec::core::downcast_output::<O>(any)) {
                None => (None, error),
                Some(Ok(o)) => (Some(o), error),
                Some(Err(e)) => (None, Some(e.to_string())),
            };
        RunResult {
            run_id,
            outcome,
            output,
            turns,
            usage,
            cost_usd,
            total_cost_usd,
            duration,
            error,
        }
    }
}

#[derive(Default)]
struct LoopState {
    turns: u32,
    usage: Usage,
    cost: Decimal,
}

/// Forks a child of `parent` for `spec` and runs it; a child that cannot be made ends as
/// `denied`, recorded as a finished event of the run that was refused.
pub(crate) async fn run_child(
    spec: &SpecCore,
    input: Value,
    parent: &Ctx,
    text: OutputText,
) -> RunResult<Decoded> {
    match parent.child_of(spec) {
        // A child context has a cancellation token of its own, so the run may cancel it.
        Ok(child) => run_owned(spec, input, &child, text).await,
        Err(e) => {
            let error = e.to_string();
            let run_id = format!("{}.{}-denied", parent.run_id(), spec.name);
            // The refused child still appears in the run tree, as a run that ended `denied`.
            parent.emit_child(
                &run_id,
                &spec.name_arc,
                EventKind::Finished {
                    outcome: Outcome::Denied,
                    turns: 0,
                    usage: Usage::default(),
                    cost_usd: Decimal::ZERO,
                    duration_ms: 0.0,
                    error: Some(error.clone()),
                },
            );
            RunResult {
                run_id,
                outcome: Outcome::Denied,
                output: None,
                turns: 0,
                usage: Usage::default(),
                cost_usd: Decimal::ZERO,
                total_cost_usd: Decimal::ZERO,
                duration: Duration::ZERO,
                error: Some(error),
            }
        }
    }
}

/// Emits a `cancelled` finished event for a run whose future was dropped before it finished
/// (its caller stopped waiting for it; a run that stops itself drains its children instead),
/// so that no run ends silently in a trace.
struct FinishGuard<'a> {
    ctx: &'a Ctx,
    start: Instant,
    finished: bool,
}

impl Drop for FinishGuard<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.ctx.emit(EventKind::Finished {
                outcome: Outcome::Cancelled,
                turns: 0,
                usage: Usage::default(),
                cost_usd: Decimal::ZERO,
                duration_ms: self.start.elapsed().as_secs_f64() * 1000.0,
                error: Some("stopped because its caller stopped waiting for it".into()),
            });
        }
    }
}

/// Runs `spec` on `input` in `ctx`.
pub(crate) async fn run_core(
    spec: &SpecCore,
    input: Value,
    ctx: &Ctx,
    text: OutputText,
) -> RunResult<Decoded> {
    // The caller's token is not the run's to cancel: a timeout stops this run through a token
    // of its own, a child of the caller's.
    run_owned(spec, input, &ctx.with_own_cancellation(), text).await
}

/// Runs `spec` on `input` in `ctx`, whose cancellation token belongs to this run alone.
async fn run_owned(
    spec: &SpecCore,
    input: Value,
    ctx: &Ctx,
    text: OutputText,
) -> RunResult<Decoded> {
    let start = Instant::now();
    let mut guard = FinishGuard {
        ctx,
        start,
        finished: false,
    };
    let spent_before = ctx.budget().snapshot().spent_usd;
    ctx.emit(EventKind::Started {
        model: ctx.model_id().clone(),
    });
    let mut st = LoopState::default();
    let (outcome, output, error) = match spec.accept_input(&input) {
        Err(v) => (
            Outcome::InvalidInput,
            None,
            Some(format!("invalid input: {}", join(&v))),
        ),
        Ok(()) => run_until_stopped(spec, ctx, turns(spec, input, ctx, text, &mut st)).await,
    };
    let duration = start.elapsed();
    let total = ctx.budget().snapshot().spent_usd - spent_before;
    guard.finished = true;
    ctx.emit(EventKind::Finished {
        outcome,
        turns: st.turns,
        usage: st.usage,
        cost_usd: st.cost,
        duration_ms: duration.as_secs_f64() * 1000.0,
        error: error.clone(),
    });
    RunResult {
        run_id: ctx.run_id().to_string(),
        outcome,
        output,
        turns: st.turns,
        usage: st.usage,
        cost_usd: st.cost,
        total_cost_usd: total,
        duration,
        error,
    }
}

/// Drives `body` until it ends, the run times out, or it is cancelled. A run that stops
/// cancels its own token and then drives `body` on until it has wound down: the model call in
/// flight is dropped (its reservation released), no model call starts, and every sub-agent
/// task is awaited, so each has settled its calls and reported how it ended before this run
/// counts its totals and reports.
async fn run_until_stopped(
    spec: &SpecCore,
    ctx: &Ctx,
    body: impl std::future::Future<Output = TurnsResult>,
) -> TurnsResult {
    let cancel = ctx.cancellation();
    tokio::pin!(body);
    let stopped = tokio::select! {
        biased;
        _ = cancel.cancelled() => (Outcome::Cancelled, None, Some("cancelled".to_string())),
        r = &mut body => return r,
        _ = tokio::time::sleep(spec.limits.timeout) => (
            Outcome::Timeout,
            None,
            Some(format!("no result within {:?}", spec.limits.timeout)),
        ),
    };
    cancel.cancel();
    // What the body ends with is moot now; only its winding down matters.
    let _ = body.await;
    stopped
}

/// What a run that noticed its cancellation ends with (a timeout is reported by
/// [`run_until_stopped`], which cancels after the fact).
fn cancelled() -> TurnsResult {
    (Outcome::Cancelled, None, Some("cancelled".to_string()))
}

/// Reports a rejected output (an event with where and why, never the output) and returns the
/// violations as one line, for the run's error should no turn repair them.
fn rejected(ctx: &Ctx, turn: u32, v: &[Violation]) -> String {
    ctx.emit(EventKind::OutputRejected {
        turn,
        violations: v.to_vec(),
    });
    join(v)
}

fn join(v: &[Violation]) -> String {
    v.iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

type TurnsResult = (Outcome, Option<Decoded>, Option<String>);

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

async fn turns(
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

/// Arguments as a JSON value, borrowed when they already are one. Providers pass arguments
/// that were not valid JSON as a string, so that the model hears about it instead of the run
/// failing.
fn normalize_args(args: &Value) -> Result<Cow<'_, Value>, String> {
    match args {
        Value::String(s) => serde_json::from_str(s)
            .map(Cow::Owned)
            .map_err(|e| crate::contract::not_json(s, &e)),
        v => Ok(Cow::Borrowed(v)),
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

/// Where one tool call of a response stands. One slot per call, in call order, so a turn
/// of ordinary tool calls needs no list beyond this one and the results.
enum Slot {
    /// Its output: answered without running (the submission's repair request, an unknown
    /// tool, unparsable arguments), or run.
    Done(ToolOutput),
    /// An ordinary tool, to run in call order.
    Run {
        tool: Arc<dyn Tool>,
        name: Arc<str>,
        contract: Contract,
        args: Value,
    },
    /// A sub-agent call, running as a task.
    Spawned,
    /// The output of a call that ran: what counts towards the turn's result size.
    Ran(ToolOutput),
}

/// Runs the tool calls of one response: sub-agent calls concurrently (at most
/// `ctx.fanout_limit()` at a time), ordinary tools one after another, both groups at once.
/// Every call settles; results come back in call order.
async fn run_tool_calls(
    spec: &SpecCore,
    calls: &[ToolCall],
    submit: Option<(usize, ToolOutput)>,
    ctx: &Ctx,
    turn: u32,
) -> (Vec<ToolResult>, Option<String>) {
    let mut submit = submit;
    let mut slots: Vec<Slot> = Vec::with_capacity(calls.len());
    // Sub-agent tasks, their call indices, and the fan-out permits; made on the first
    // sub-agent call, so a turn of ordinary tools pays for none of it.
    let mut tasks: Option<(JoinSet<ToolOutput>, HashMap<tokio::task::Id, usize>)> = None;
    let mut permits: Option<Arc<Semaphore>> = None;
    let mut taken = 0;
    for (i, c) in calls.iter().enumerate() {
        if submit.as_ref().is_some_and(|(s, _)| *s == i) {
            if let Some((_, o)) = submit.take() {
                slots.push(Slot::Done(o));
                continue;
            }
        }
        if taken == spec.limits.max_tool_calls_per_turn {
            slots.push(Slot::Done(over_call_limit(
                spec.limits.max_tool_calls_per_turn,
            )));
            continue;
        }
        taken += 1;
        let entry = if spec.tools.iter().any(|t| t == &c.name) {
            ctx.tools().get(&c.name)
        } else {
            None
        };
        let Some(entry) = entry else {
            let mut offered: Vec<&str> = spec.tools.iter().map(String::as_str).collect();
            if spec.output_mode == OutputMode::Tool {
                offered.push(SUBMIT_TOOL);
            }
            slots.push(Slot::Done(ToolOutput::error(format!(
                "unknown tool `{}`; available: {}",
                c.name,
                offered.join(", ")
            ))));
            continue;
        };
        let args = match normalize_args(&c.arguments) {
            // The call stays in the history, so the tool gets its own copy.
            Ok(a) => a.into_owned(),
            Err(msg) => {
                slots.push(Slot::Done(ToolOutput::error(msg)));
                continue;
            }
        };
        let (tool, name, contract) = (
            entry.tool.clone(),
            entry.definition.name.clone(),
            entry.input.clone(),
        );
        match entry.tool.kind() {
            ToolKind::Function => slots.push(Slot::Run {
                tool,
                name,
                contract,
                args,
            }),
            ToolKind::SubAgent => {
                let permits = permits
                    .get_or_insert_with(|| Arc::new(Semaphore::new(ctx.fanout_limit())))
                    .clone();
                let ctx = ctx.clone();
                let (set, ids) = tasks.get_or_insert_with(Default::default);
                let handle = set.spawn(async move {
                    // The semaphore is never closed, so acquiring only waits; a call still
                    // waiting when the run stops never starts.
                    let _permit = tokio::select! {
                        biased;
                        _ = ctx.cancellation().cancelled() => return not_started(),
                        p = permits.acquire_owned() => p,
                    };
                    // Not raced against the cancellation: a sub-agent stops on its own token
                    // (a child of this run's) and is awaited until it has.
                    invoke(&*tool, name, &contract, args, &ctx, turn).await
                });
                ids.insert(handle.id(), i);
                slots.push(Slot::Spawned);
            }
        }
    }
    let n_sub = tasks.as_ref().map_or(0, |(_, ids)| ids.len());

    let max_chars = spec.limits.max_tool_result_chars_per_turn;
    let seq = async {
        // What these results alone add; once they pass the limit, so do all results up to
        // here, so the later tools' results would be withheld: they do not run.
        let mut seq_chars = ResultChars::default();
        for slot in &mut slots {
            if seq_chars.full {
                if let Slot::Run { .. } = slot {
                    *slot = Slot::Done(over_chars_limit(max_chars));
                }
                continue;
            }
            if let Slot::Run {
                tool,
                name,
                contract,
                args,
            } = slot
            {
                // An ordinary tool spends no budget, so one in progress when the run stops is
                // dropped, and the rest do not start.
                let call = invoke(
                    &**tool,
                    name.clone(),
                    contract,
                    std::mem::take(args),
                    ctx,
                    turn,
                );
                let output = tokio::select! {
                    biased;
                    _ = ctx.cancellation().cancelled() => not_started(),
                    o = call => o,
                };
                seq_chars.admit(&output, max_chars);
                *slot = Slot::Ran(output);
            }
        }
    };
    let conc = async {
        let mut out = Vec::new();
        let Some((set, ids)) = tasks.as_mut() else {
            return out;
        };
        out.reserve_exact(ids.len());
        while let Some(joined) = set.join_next_with_id().await {
            match joined {
                Ok((id, output)) => {
                    if let Some(&i) = ids.get(&id) {
                        out.push((i, output));
                    }
                }
                Err(e) => {
                    if let Some(&i) = ids.get(&e.id()) {
                        let what = if e.is_panic() {
                            "panicked"
                        } else {
                            "was aborted"
                        };
                        out.push((i, ToolOutput::error(format!("the sub-agent call {what}"))));
                    }
                }
            }
        }
        out
    };
    let ((), finished) = tokio::join!(seq, conc);
    // Each spawned call reports at most once, so the calls that failed are those that did not
    // report a success.
    let mut failed = n_sub;
    for (i, o) in finished {
        if !o.is_error {
            failed -= 1;
        }
        slots[i] = Slot::Ran(o);
    }
    bound_results(&mut slots, max_chars);
    let results = calls
        .iter()
        .zip(slots)
        .map(|(c, slot)| {
            let o = match slot {
                Slot::Done(o) | Slot::Ran(o) => o,
                Slot::Run { .. } | Slot::Spawned => ToolOutput::error("the call did not run"),
            };
            ToolResult {
                call_id: c.id.clone(),
                content: o.content,
                is_error: o.is_error,
            }
        })
        .collect();
    let note = (failed > 0).then(|| {
        format!("{failed} of {n_sub} sub-agent calls failed; continue with the results you have and say what is missing.")
    });
    (results, note)
}

/// Characters the results of one turn have added so far, in call order.
#[derive(Default)]
struct ResultChars {
    used: usize,
    /// A result did not fit: every later one is withheld too, so the limit is a cut in call
    /// order, not a packing of whatever fits.
    full: bool,
}

impl ResultChars {
    /// Counts `o` if it fits under `max`; whether it did.
    fn admit(&mut self, o: &ToolOutput, max: usize) -> bool {
        let n = o.content.chars().count();
        if !self.full && self.used.saturating_add(n) <= max {
            self.used += n;
            true
        } else {
            self.full = true;
            false
        }
    }
}

/// Replaces the output of each call that ran, past the turn's character limit in call order,
/// with an error saying so: what one response's calls add to the next request is bounded.
fn bound_results(slots: &mut [Slot], max_chars: usize) {
    let mut chars = ResultChars::default();
    for slot in slots {
        if let Slot::Ran(o) = slot {
            if !chars.admit(o, max_chars) {
                let n = o.content.chars().count();
                *o = ToolOutput::error(format!(
                    "result withheld: it is {n} characters, and this turn's tool results may add at most {max_chars} (limit `max_tool_result_chars_per_turn`); ask for less (a narrower read or search), or call it in a later turn"
                ));
            }
        }
    }
}

/// The result of a call past the turn's tool-call limit; short, as there may be many.
fn over_call_limit(max: usize) -> ToolOutput {
    ToolOutput::error(format!(
        "not run: at most {max} tool calls run per turn (limit `max_tool_calls_per_turn`)"
    ))
}

/// The result of an ordinary tool not run because the turn's results were already full.
fn over_chars_limit(max: usize) -> ToolOutput {
    ToolOutput::error(format!(
        "not run: this turn's tool results reached their limit of {max} characters (`max_tool_result_chars_per_turn`); call it in a later turn"
    ))
}

/// The result of a tool call the run stopped before it finished.
fn not_started() -> ToolOutput {
    ToolOutput::error("the run was stopped (timeout or cancellation) before this call finished")
}

/// One tool call: arguments validated, gate asked, then the tool run.
async fn invoke(
    tool: &dyn Tool,
    name: Arc<str>,
    contract: &Contract,
    args: Value,
    ctx: &Ctx,
    turn: u32,
) -> ToolOutput {
    let t0 = Instant::now();
    let output = if let Err(v) = contract.validate(&args) {
        ToolOutput::error(format!(
            "invalid arguments for `{}`:\n{}",
            tool.name(),
            v.iter()
                .map(|v| format!("- {v}"))
                .collect::<Vec<_>>()
                .join("\n")
        ))
    } else {
        let approval = ctx.gate().approve(ApprovalRequest {
            run_id: ctx.run_id(),
            spec: ctx.spec_name(),
            depth: ctx.depth(),
            tool: tool.name(),
            arguments: &args,
        });
        // A gate may be waiting on a person; a run that stops does not wait for the answer.
        let decision = tokio::select! {
            biased;
            _ = ctx.cancellation().cancelled() => Decision::Deny("the run was stopped".into()),
            d = approval => d,
        };
        match decision {
            Decision::Deny(reason) => {
                ToolOutput::error(format!("denied by the approval gate: {reason}"))
            }
            Decision::Allow => tool.call(args, ctx).await,
        }
    };
    ctx.emit(EventKind::ToolCall {
        turn,
        tool: name,
        is_error: output.is_error,
        duration_ms: t0.elapsed().as_secs_f64() * 1000.0,
    });
    output
}
