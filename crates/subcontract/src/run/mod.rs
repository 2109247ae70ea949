//! The one run loop, for hosts and sub-agents alike: a fresh conversation, the offered tools,
//! the turn limit, output validation with repair, the timeout, cancellation, and concurrent
//! sub-agent calls. Every run ends with one of the [`Outcome`]s, never silently.
//!
//! This module holds a run's beginning and end (the input check, the timeout and cancellation,
//! the finished event); [`turn`] holds the conversation, [`fanout`] the tool calls of a turn,
//! and [`policy`] the steps every model call and tool call passes through (the budget, the
//! spend journal, the gate) and the one report of each moment, as an event and on its span.

use std::time::Instant;

use rust_decimal::Decimal;
use serde_json::Value;

use crate::ctx::{Ctx, NextRun};
use crate::events::EventKind;
use crate::model::Usage;
use crate::outcome::{Failure, Limit, Outcome, RunResult, RunStats};
use crate::spec::core::{InputCheck, OutputText, SpecCore};
use tracing::Instrument;

mod agent_tool;
mod fanout;
mod policy;
mod reserve;
mod turn;
mod wording;

pub(crate) use agent_tool::AgentTool;
pub(crate) use reserve::growth as answer_growth;
use turn::turns;
// The rig adapter tells a rig agent what our own host tells a parent model.
#[cfg(feature = "rig")]
pub(crate) use wording::ended_without_result;

impl<O> RunResult<O> {
    pub(crate) fn input_not_serialisable(ctx: &Ctx, e: serde_json::Error) -> Self {
        RunResult::ended(
            ctx.run_id().to_string(),
            Err(Failure::InputNotSerialisable(e.to_string())),
            RunStats::default(),
        )
    }
}

/// A validated output: its compact JSON (when a parent reads it) and its value, the spec's
/// type (a `Value` for a spec over JSON values).
type Decoded = crate::spec::core::Accepted;

impl RunResult<Decoded> {
    pub(crate) fn downcast<O: 'static>(self) -> RunResult<O> {
        self.map_output(|(_, any)| {
            crate::spec::core::downcast_output::<O>(any)
                .map_err(|e| Failure::OutputType(e.to_string()))
        })
    }
}

/// The outputs a run rejected, for its span's end (the events that report them mark no span
/// of their own).
#[derive(Debug, Default)]
struct Rejections {
    /// Outputs the contract rejected.
    repairs: u32,
    /// Valid outputs rejected as ungrounded.
    ungrounded: u32,
    /// What the accepted output's grounded values carry up to a parent that reads it (a run
    /// whose output is written for one, of a spec that grounds values).
    carried: Option<crate::ground::CarriedUp>,
}

/// What a run's loop keeps as it goes, for the run's end: the turns taken, this run's own
/// usage and cost, and the outputs it rejected.
#[derive(Default)]
struct LoopState {
    turns: u32,
    usage: Usage,
    cost: Decimal,
    rejections: Rejections,
    /// When the run times out: its model calls are given no longer than what is left.
    deadline: Option<Instant>,
    /// The limit that cut the run short so far, if one did.
    cut_short: Option<Limit>,
}

/// Forks a child of `parent` for `spec` and runs it; a child that cannot be made ends as
/// `denied`, recorded as a finished event of the run that was refused.
pub(crate) async fn run_child(
    spec: &SpecCore,
    input: Value,
    parent: &Ctx,
    text: OutputText,
) -> RunResult<Decoded> {
    run_child_checked(spec, input, parent, text, InputCheck::Full).await
}

/// [`run_child`] for an input whose schema check `check` says is done.
pub(crate) async fn run_child_checked(
    spec: &SpecCore,
    input: Value,
    parent: &Ctx,
    text: OutputText,
    check: InputCheck,
) -> RunResult<Decoded> {
    run_child_carrying(spec, input, parent, text, check).await.0
}

/// [`run_child_checked`], with what its output's grounded values carry up to the parent that
/// reads it (when its spec grounds values and the run completed).
pub(crate) async fn run_child_carrying(
    spec: &SpecCore,
    input: Value,
    parent: &Ctx,
    text: OutputText,
    check: InputCheck,
) -> (RunResult<Decoded>, Option<crate::ground::CarriedUp>) {
    // A host whose tools follow changing sources gives the child the current ones. The
    // child's context is a run's from the start: a spec its tools run in it is its child.
    match parent.for_new_run().await.child_run(spec) {
        // A child context has a cancellation token of its own, so the run may cancel it.
        Ok(child) => {
            let span = crate::telemetry::agent_span(spec, &child);
            run_owned(spec, input, &child, text, check)
                .instrument(span)
                .await
        }
        Err(e) => {
            let error = Failure::Spawn(e);
            let run_id = format!("{}.{}-denied", parent.run_id(), spec.def.name);
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
                    error: Some(error.to_string()),
                    cut_short: None,
                },
            );
            (
                RunResult::ended(run_id, Err(error), RunStats::default()),
                None,
            )
        }
    }
}

/// Emits a `cancelled` finished event for a run whose future was dropped before it finished
/// (its caller stopped waiting for it; a run that stops itself drains its children instead),
/// so that no run ends silently in a trace. The event alone: the span of a run dropped
/// unfinished has always ended unrecorded, and exporters see it as they did.
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
                cut_short: None,
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
    // Started with the context of a run under way (a tool's `ctx.ask`, or `spec.run` with
    // the context a tool was given): a child of that run, under its depth limit, budget and
    // tools. Never a second root at the same depth, which would let a tool recurse without
    // bound.
    let n = match ctx.next_run() {
        NextRun::Child => return run_child(spec, input, ctx, text).await,
        NextRun::Root(n) => n,
    };
    // A host whose tools follow changing sources runs with the current ones, fixed from here.
    // The caller's token is not the run's to cancel: a timeout stops this run through a token
    // of its own, a child of the caller's. The run has an id and a spend count of its own.
    let ctx = ctx.for_new_run().await.for_root_run(&spec.def.tools, n);
    let span = crate::telemetry::agent_span(spec, &ctx);
    run_owned(spec, input, &ctx, text, InputCheck::Full)
        .instrument(span)
        .await
        .0
}

/// Runs `spec` on `input` in `ctx`, whose cancellation token belongs to this run alone; with
/// what its output's grounded values carry up, when a parent reads it.
async fn run_owned(
    spec: &SpecCore,
    input: Value,
    ctx: &Ctx,
    text: OutputText,
    check: InputCheck,
) -> (RunResult<Decoded>, Option<crate::ground::CarriedUp>) {
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
    // The run's end: its timeout, or sooner, when its parent must answer by then.
    let t_start = tokio::time::Instant::now();
    let (end, slowest) = reserve::run_end(ctx, spec.def.limits.timeout, t_start);
    let mut st = LoopState {
        // Its model calls are given no longer than what is left until then.
        deadline: Some(end.into_std()),
        ..LoopState::default()
    };
    // An acting spec's run works in a copy of its own, which its context carries from here.
    let mut copy = None;
    let ended = match spec.accept_input(&input, check) {
        Err(v) => Err(Failure::InvalidInput(v)),
        Ok(()) => match acting(spec, ctx).await {
            Err(e) => Err(Failure::Workspace(e.to_string())),
            Ok(acting) => {
                let ctx = match acting {
                    Some(c) => &*copy.insert(c),
                    None => ctx,
                };
                // Pinned here and lent, not moved in: an async fn keeps a future it takes by
                // value twice (its argument and the pinned local), and this one is most of a
                // run's size.
                let times = (t_start, end, slowest);
                let body = std::pin::pin!(turns(spec, &input, ctx, text, &mut st, times));
                run_until_stopped(ctx, (t_start, end), body).await
            }
        },
    };
    // The copy's changes are captured (and kept as a patch when the run failed) before it is
    // removed.
    let changes = match &copy {
        Some(c) => crate::act::run::finish(c, ended.is_ok()).await,
        None => None,
    };
    let cut_short = ended.as_ref().ok().and(st.cut_short);
    let outcome = ended
        .as_ref()
        .map_or_else(Failure::outcome, |_| Outcome::Completed);
    let carried = st.rejections.carried.take().filter(|_| ended.is_ok());
    // A grounded value its caller wrote into its input comes back grounded: the trace says
    // which (where, never the value).
    if let Some(paths) = carried
        .as_ref()
        .map(|c| c.from_input.clone())
        .filter(|p| !p.is_empty())
    {
        ctx.emit(EventKind::GroundedFromInput {
            turn: st.turns,
            paths,
        });
    }
    let error_text = ended.as_ref().err().map(Failure::to_string);
    let duration = start.elapsed();
    let total = ctx.budget().snapshot().spent_usd - spent_before;
    guard.finished = true;
    let finished = EventKind::Finished {
        outcome,
        turns: st.turns,
        usage: st.usage,
        cost_usd: st.cost,
        duration_ms: duration.as_secs_f64() * 1000.0,
        error: error_text,
        cut_short,
    };
    // The run's span is the current one: its future is instrumented with it.
    let detail = crate::telemetry::Detail::Run {
        total,
        repairs: st.rejections.repairs,
        grounding_rejections: st.rejections.ungrounded,
    };
    policy::report(ctx, tracing::Span::current(), finished, detail);
    let mut result = RunResult::ended(
        ctx.run_id().to_string(),
        ended,
        RunStats {
            turns: st.turns,
            usage: st.usage,
            cost_usd: st.cost,
            total_cost_usd: total,
            duration,
            cut_short,
        },
    );
    result.changes = changes;
    (result, carried)
}

/// The context an acting spec's run works in: `ctx` with a working copy of its own
/// (`Ok(None)` for a spec that does not act).
async fn acting(spec: &SpecCore, ctx: &Ctx) -> Result<Option<Ctx>, crate::act::run::CopyError> {
    let policy = &spec.def.workspace;
    if !policy.acts() {
        return Ok(None);
    }
    crate::act::run::start(&spec.def.name, policy, ctx)
        .await
        .map(Some)
}

/// Drives `body` until it ends, the run times out at `end` (its timeout after `start`, or its
/// parent's answer time, whichever is first), or it is cancelled. A run that stops
/// cancels its own token and then drives `body` on until it has wound down: the model call in
/// flight is dropped (its reservation released), no model call starts, and every sub-agent
/// task is awaited, so each has settled its calls and reported how it ended before this run
/// counts its totals and reports.
async fn run_until_stopped(
    ctx: &Ctx,
    (start, end): (tokio::time::Instant, tokio::time::Instant),
    mut body: std::pin::Pin<&mut impl std::future::Future<Output = TurnsResult>>,
) -> TurnsResult {
    let cancel = ctx.cancellation();
    let stopped = tokio::select! {
        biased;
        _ = cancel.cancelled() => Failure::Cancelled,
        r = body.as_mut() => return r,
        _ = tokio::time::sleep_until(end) => Failure::Timeout(end.saturating_duration_since(start)),
    };
    cancel.cancel();
    // What the body ends with is moot now, but for one case: a run whose time ran out while
    // an answer that failed its checks waited for its repair ends on those violations
    // (`invalid_output`, as when its turns run out), never as if it had no answer at all.
    match (stopped, body.await) {
        (Failure::Timeout(_), Err(Failure::InvalidOutput(v))) => Err(Failure::InvalidOutput(v)),
        (stopped, _) => Err(stopped),
    }
}

/// How a run's turns end: its validated output, or why there is none.
type TurnsResult = Result<Decoded, Failure>;
