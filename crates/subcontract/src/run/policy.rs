//! The policy every model call and every tool call of a run passes through: a short stack of
//! steps in a fixed order, each in one place, which the turn loop calls as one thing (in the
//! spirit of tower's layers, as plain functions: no boxed future per call). The loop only
//! asks, reads what came back and dispatches it.
//!
//! A model call, outermost step first:
//! 1. **share** ([`share`]): a fan-out sibling's first call waits for the first sibling's, to
//!    read what it cached;
//! 2. **budget**: the call's worst case reserved, beside the run's answer reserve (the turn
//!    loop asks [`Reserve::admit`](super::reserve::Reserve::admit), which also says whether the
//!    call asks for the output alone); afterwards, in [`call_model`], its actual cost settled,
//!    and a provider that billed past the reservation ends the run;
//! 3. **journal**: the spend at stake recorded before the call;
//! 4. **report**: the call's `chat` span opened and its clock started; afterwards its end
//!    [reported](report) once;
//! 5. the model.
//!
//! A tool call ([`call_tool`]), run inside its `execute_tool` span: its arguments checked
//! against the tool's contract, the gate asked, the tool run, its end reported.
//!
//! The end of each model call, tool call and run is reported once, as one [`EventKind`]:
//! [`report`] records its span's result from that value ([`telemetry::record`]), lets the
//! span go, and hands the value to the sinks. (Other events, a run's start and its rejected
//! outputs, mark no span and go to the sinks alone.)

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use rust_decimal::Decimal;
use serde_json::Value;
use tracing::Span;

use super::wording;
use super::LoopState;
use crate::budget::Reservation;
use crate::contract::Contract;
use crate::ctx::Ctx;
use crate::events::{EventKind, Forced, TextRead};
use crate::gate::{ApprovalRequest, Decision};
use crate::model::{ModelError, ModelRequest, ModelResponse, Rates, Usage};
use crate::outcome::Failure;
use crate::telemetry::{self, Detail};
use crate::tool::{Tool, ToolOutput};

/// Reports a moment: its span's result recorded from its event, the span let go (a model
/// call's ends here, so its time is the call's, not the sinks'), then the event handed to the
/// sinks. Both come from the one value, so they cannot disagree.
#[inline]
pub(super) fn report(ctx: &Ctx, span: Span, kind: EventKind, detail: Detail<'_>) {
    telemetry::report(ctx, span, kind, detail);
}

/// One model call as the turn loop asks for it.
pub(super) struct ModelCall<'a> {
    /// The request, as it is sent.
    pub(super) request: ModelRequest<'a>,
    /// Its worst case, reserved before it is sent.
    pub(super) worst: Decimal,
    /// The model's rates, if priced, which its actual cost is counted at.
    pub(super) rates: Option<Rates>,
    /// Its 1-based turn.
    pub(super) turn: u32,
    /// How the run's output travels, for its event (`None` for a text output).
    pub(super) output_mode: Option<Cow<'static, str>>,
    /// Why it asks for the output alone, if it does, for its event.
    pub(super) forced: Option<Forced>,
}

/// The share step, before the reservation (so that a waiting sibling holds no budget others
/// could use), taken for a run's first call only: that call of a fan-out sibling waits for the
/// first sibling's. What it returns is held until the call is over.
pub(super) async fn share(ctx: &Ctx) -> Result<Option<crate::ctx::Opener>, Failure> {
    match ctx.siblings() {
        Some(share) => ctx
            .unless_cancelled(share.enter())
            .await
            .ok_or(Failure::Cancelled),
        None => Ok(None),
    }
}

/// One model call through its steps after the budget's (see the module's documentation),
/// with the `reservation` made for it; the answer, and what `read` makes of it (told when the
/// model answered) before the call is reported (the event says what its text was read as).
/// The turn counts once the model answered. A run that stops during a step ends the call
/// there: what it reserved is released, and no model call starts after the cancellation.
/// `admitted_at` is when the call's admission read the clock, if it did: the call's time
/// starts there (no await comes between, unless a spend journal's), so that a call costs two
/// clock reads for both its event and the answer reserve.
pub(super) async fn call_model<R>(
    ctx: &Ctx,
    call: ModelCall<'_>,
    (reservation, admitted_at): (Reservation, Option<tokio::time::Instant>),
    st: &mut LoopState,
    read: impl FnOnce(&ModelResponse, tokio::time::Instant) -> (R, Option<TextRead>),
) -> Result<(ModelResponse, R), Failure> {
    let ModelCall {
        request,
        worst,
        rates,
        turn,
        output_mode,
        forced,
    } = call;
    debug_assert!(reservation.amount() >= worst || worst.is_sign_negative());
    // 3. Journal (the reservation is released if it fails).
    let t0 = match (ctx.spend_journal(), admitted_at) {
        (None, Some(at)) => at,
        _ => {
            journal(ctx).await?;
            tokio::time::Instant::now()
        }
    };
    // 4. Report, before.
    let max_tokens = request.max_tokens;
    let chat = telemetry::chat_span(ctx, request.system, request.messages, max_tokens);
    // 5. The model. A call in flight when the run stops is dropped, and its reservation
    // released; one is never first polled (started) after the cancellation.
    let model = ctx.model();
    let request = request.with_deadline(st.deadline);
    let answered = ctx.unless_cancelled(model.complete(request)).await;
    let answered = answered.ok_or(Failure::Cancelled)?;
    let answered_at = tokio::time::Instant::now();
    let duration_ms = answered_at.saturating_duration_since(t0).as_secs_f64() * 1000.0;
    let response = match answered {
        Ok(r) => r,
        Err(e) => {
            let failed = FailedCall {
                turn,
                duration_ms,
                output_mode,
                forced,
            };
            return Err(failed.report(e, reservation, st, chat, ctx));
        }
    };
    st.turns = turn;
    // 2. Budget, after.
    let cost = crate::model::cost_at(rates, model.id(), response.usage);
    let (reserved, over) = settle(reservation, cost);
    st.usage += response.usage;
    st.cost = st.cost.saturating_add(cost);
    // 4. Report, after.
    let (read, text_read_as) = read(&response, answered_at);
    let answer = Detail::Answer {
        text: response.text.as_deref(),
        calls: &response.tool_calls,
    };
    let event = EventKind::ModelCall {
        turn,
        usage: response.usage,
        cost_usd: cost,
        duration_ms,
        stop_reason: Some(response.stop_reason),
        error: None,
        over_reserved_usd: over,
        output_mode,
        forced,
        text_read_as,
    };
    report(ctx, chat, event, answer);
    // 2. Budget, last.
    if over.is_some() && ctx.budget().remaining_usd().is_some() {
        return Err(overbilled(response.usage, turn, cost, reserved, max_tokens));
    }
    Ok((response, read))
}

/// The budget step after an answered call: its actual cost settled. The amount reserved, and
/// what the cost went past it by, if it did (a cost above the worst case exhausts every
/// limited budget above this run).
#[inline]
fn settle(reservation: Reservation, cost: Decimal) -> (Decimal, Option<Decimal>) {
    let reserved = reservation.amount();
    reservation.settle(cost);
    (reserved, (cost > reserved).then(|| cost - reserved))
}

/// The budget step's last word on a call billed past its reservation under a limited budget:
/// the run ends, as that limit can no longer be kept.
#[cold]
fn overbilled(u: Usage, turn: u32, billed: Decimal, reserved: Decimal, max_tokens: u32) -> Failure {
    let saturated = [
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.cache_write_tokens,
    ]
    .contains(&u64::MAX);
    Failure::Overbilled {
        turn,
        billed,
        reserved,
        max_tokens,
        saturated,
    }
}

/// The journal step: the spend at stake recorded before the call, so a process lost during it
/// is still charged for it.
async fn journal(ctx: &Ctx) -> Result<(), Failure> {
    let Some(journal) = ctx.spend_journal() else {
        return Ok(());
    };
    let recorded = ctx.unless_cancelled(journal.before_call()).await;
    recorded
        .ok_or(Failure::Cancelled)?
        .map_err(Failure::SpendNotRecorded)
}

/// A model call that failed, and what its event says of it.
struct FailedCall {
    turn: u32,
    duration_ms: f64,
    output_mode: Option<Cow<'static, str>>,
    forced: Option<Forced>,
}

impl FailedCall {
    /// The budget and report steps of a failed call: its reservation settled, the call
    /// reported, and how the run ends. Cold and out of line, so that the turn loop's hot path
    /// keeps to fewer cache lines.
    #[cold]
    #[inline(never)]
    fn report(
        self,
        e: ModelError,
        reservation: Reservation,
        st: &mut LoopState,
        chat: Span,
        ctx: &Ctx,
    ) -> Failure {
        // A turn counts once the model answered: a call that failed before any answer (a
        // refused connection, an HTTP error) leaves the count as it was, while one answered
        // with a usage that cannot be read happened, and counts. It is billed: it is charged
        // its whole reservation, its worst case, never nothing.
        let (failure, charged) = if e.cost_unknown() {
            st.turns = self.turn;
            let charged = reservation.amount();
            reservation.settle(charged);
            st.cost = st.cost.saturating_add(charged);
            (Failure::UnreadableUsage { error: e, charged }, charged)
        } else {
            drop(reservation);
            (Failure::Model(e), Decimal::ZERO)
        };
        let event = EventKind::ModelCall {
            turn: self.turn,
            usage: Usage::default(),
            cost_usd: charged,
            duration_ms: self.duration_ms,
            stop_reason: None,
            error: Some(failure.to_string()),
            over_reserved_usd: None,
            output_mode: self.output_mode,
            forced: self.forced,
            text_read_as: None,
        };
        report(ctx, chat, event, Detail::None);
        failure
    }
}

/// One tool call through its steps: its arguments checked against the tool's contract, the
/// gate asked, the tool run; its end reported. It runs inside its `execute_tool` span (the
/// caller instruments it with that span), so a sub-agent it starts is that span's child.
pub(super) async fn call_tool(
    tool: &dyn Tool,
    name: Arc<str>,
    contract: &Contract,
    args: Value,
    ctx: &Ctx,
    turn: u32,
) -> ToolOutput {
    let t0 = Instant::now();
    let output = if let Err(v) = contract.validate(&args) {
        ToolOutput::error(wording::invalid_arguments(tool.name(), &v))
    } else {
        // The gate step. A gate may be waiting on a person; a run that stops does not wait
        // for the answer. (Written out here, not as a function of its own: an async step
        // would be one more future to move on every call.)
        let approval = ctx.gate().approve(ApprovalRequest {
            run_id: ctx.run_id(),
            spec: ctx.spec_name(),
            depth: ctx.depth(),
            tool: tool.name(),
            arguments: &args,
        });
        let decision = tokio::select! {
            biased;
            _ = ctx.cancellation().cancelled() => Decision::Deny(wording::RUN_STOPPED.into()),
            d = approval => d,
        };
        match decision {
            Decision::Deny(reason) => ToolOutput::error(wording::denied(&reason)),
            Decision::Allow => tool.call_checked(args, ctx).await,
        }
    };
    let event = EventKind::ToolCall {
        turn,
        tool: name,
        is_error: output.is_error,
        duration_ms: t0.elapsed().as_secs_f64() * 1000.0,
        unknown: false,
    };
    let result = Detail::Result(&output.content);
    report(ctx, Span::current(), event, result);
    output
}
