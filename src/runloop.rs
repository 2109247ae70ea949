//! The one run loop, for hosts and sub-agents alike: a fresh conversation, the offered tools,
//! the turn limit, output validation with repair, the timeout, cancellation, and concurrent
//! sub-agent calls. Every run ends with one of the [`Outcome`]s, never silently.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::contract::{repair_message, Contract, Violation};
use crate::ctx::Ctx;
use crate::events::EventKind;
use crate::gate::{ApprovalRequest, Decision};
use crate::model::{
    Message, ModelRequest, ModelResponse, ToolCall, ToolDefinition, ToolResult, Usage,
};
use crate::spec::{with_value, OutputMode, OutputText, SpecCore};
use crate::tool::{Tool, ToolKind, ToolOutput};

/// Name of the tool a sub-agent calls to hand back its output; its input schema is the
/// output schema.
pub const SUBMIT_TOOL: &str = "submit_output";

pub(crate) const SUBMIT_DESCRIPTION: &str = "Submit your final answer. Call this exactly once, when you are done; its arguments are the answer and must match this schema.";

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It produced a valid output.
    Completed,
    /// It used every turn without producing an output.
    MaxTurns,
    /// Its budget (or an ancestor's) could not afford the next model call.
    BudgetExhausted,
    /// It ran past its timeout.
    Timeout,
    /// It, or an ancestor, was cancelled.
    Cancelled,
    /// Its last output was invalid and no turn was left to repair it.
    InvalidOutput,
    /// Its input did not match the input contract.
    InvalidInput,
    /// The model failed (HTTP error, malformed response, …).
    ModelError,
    /// It could not be started: a capability it asks for is not held, or it would be too deep.
    Denied,
}

impl Outcome {
    /// The outcome's stable name (`budget_exhausted`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::MaxTurns => "max_turns",
            Outcome::BudgetExhausted => "budget_exhausted",
            Outcome::Timeout => "timeout",
            Outcome::Cancelled => "cancelled",
            Outcome::InvalidOutput => "invalid_output",
            Outcome::InvalidInput => "invalid_input",
            Outcome::ModelError => "model_error",
            Outcome::Denied => "denied",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a run returns: its outcome, the validated output when it completed, and what it
/// consumed.
#[derive(Debug)]
pub struct RunResult<O> {
    /// The run's id.
    pub run_id: String,
    /// How it ended.
    pub outcome: Outcome,
    /// The validated output (only when `outcome` is `Completed`).
    pub output: Option<O>,
    /// Model turns taken.
    pub turns: u32,
    /// Tokens used by this run's own model calls.
    pub usage: Usage,
    /// Cost of this run's own model calls.
    pub cost_usd: Decimal,
    /// Cost of this run including every sub-agent below it.
    pub total_cost_usd: Decimal,
    /// Wall time.
    pub duration: Duration,
    /// What went wrong, when it did not complete.
    pub error: Option<String>,
}

impl<O> RunResult<O> {
    /// The output, or an error naming the outcome.
    pub fn into_result(self) -> Result<O, RunError> {
        match self.output {
            Some(o) if self.outcome == Outcome::Completed => Ok(o),
            _ => Err(RunError {
                outcome: self.outcome,
                message: self.error.unwrap_or_else(|| self.outcome.to_string()),
            }),
        }
    }

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

/// A run that ended without an output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("run ended: {outcome}: {message}")]
pub struct RunError {
    /// How it ended.
    pub outcome: Outcome,
    /// Details.
    pub message: String,
}

/// A validated output: its compact JSON (when a parent reads it) and its value, the spec's
/// type (a `Value` for a spec over JSON values).
type Decoded = crate::spec::Accepted;

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
        let (output, error) = match output.map(|(_, any)| crate::spec::downcast_output::<O>(any)) {
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
        Ok(child) => run_core(spec, input, &child, text).await,
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
/// (its parent timed out or was cancelled), so that no run ends silently in a trace.
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
                error: Some("stopped because its parent stopped (timeout or cancellation)".into()),
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
        Ok(()) => {
            let cancel = ctx.cancellation().clone();
            let body = turns(spec, input, ctx, text, &mut st);
            // Dropping `body` on timeout or cancellation drops every in-flight model call and
            // aborts every sub-agent task it spawned.
            tokio::select! {
                biased;
                _ = cancel.cancelled() => (Outcome::Cancelled, None, Some("cancelled".to_string())),
                r = tokio::time::timeout(spec.limits.timeout, body) => match r {
                    Ok(r) => r,
                    Err(_) => (
                        Outcome::Timeout,
                        None,
                        Some(format!("no result within {:?}", spec.limits.timeout)),
                    ),
                },
            }
        }
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
        let worst = price.map_or(Decimal::ZERO, |p| {
            p.worst_case_cost(bytes as u64, u64::from(max_tokens))
        });
        let reservation = match ctx.budget().reserve(worst).await {
            Ok(r) => r,
            Err(e) => return (Outcome::BudgetExhausted, None, Some(e.to_string())),
        };
        st.turns = turn;
        let t0 = Instant::now();
        let response = model
            .complete(ModelRequest {
                system: &spec.system,
                messages: &messages,
                tools: &offered,
                max_tokens,
            })
            .await;
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
                            last_invalid = Some(join(&viol));
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
                            last_invalid = Some(join(&viol));
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
                    last_invalid = Some(join(&viol));
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
    for (i, c) in calls.iter().enumerate() {
        if submit.as_ref().is_some_and(|(s, _)| *s == i) {
            if let Some((_, o)) = submit.take() {
                slots.push(Slot::Done(o));
                continue;
            }
        }
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
                    // The semaphore is never closed, so acquiring only waits.
                    let _permit = permits.acquire_owned().await;
                    invoke(&*tool, name, &contract, args, &ctx, turn).await
                });
                ids.insert(handle.id(), i);
                slots.push(Slot::Spawned);
            }
        }
    }
    let n_sub = tasks.as_ref().map_or(0, |(_, ids)| ids.len());

    let seq = async {
        for slot in &mut slots {
            if let Slot::Run {
                tool,
                name,
                contract,
                args,
            } = slot
            {
                let output = invoke(
                    &**tool,
                    name.clone(),
                    contract,
                    std::mem::take(args),
                    ctx,
                    turn,
                )
                .await;
                *slot = Slot::Done(output);
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
        slots[i] = Slot::Done(o);
    }
    let results = calls
        .iter()
        .zip(slots)
        .map(|(c, slot)| {
            let o = match slot {
                Slot::Done(o) => o,
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
        let decision = ctx
            .gate()
            .approve(ApprovalRequest {
                run_id: ctx.run_id(),
                spec: ctx.spec_name(),
                depth: ctx.depth(),
                tool: tool.name(),
                arguments: &args,
            })
            .await;
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
