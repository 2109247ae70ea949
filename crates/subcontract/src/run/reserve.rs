//! The answer reserve: a run never spends the money or the time it needs to answer.
//!
//! Before each model call the turn loop asks one question, [`Reserve::admit`]: may this turn
//! call tools, or must it ask for the output alone? The answer is arithmetic on numbers the
//! run already has:
//!
//! - **Money.** A turn after which another may come reserves its call's worst case *and*,
//!   beside it, a [`Hold`] on one output-only call after it: the conversation as it will be
//!   after this turn (its growth counted as [`growth`] says: the model's response at
//!   [`ASSISTANT_BYTES_PER_TOKEN`] bytes for each of its output tokens), plus the output's
//!   worst case. Both come from the budget in one step
//!   ([`Budget::exchange`](crate::budget::Budget::exchange)), so no other spend can come
//!   between them; a hold counts as reserved, so no budget's spent plus reserved passes its
//!   limit. When they do not fit
//!   together, the turn asks for the output alone, paid from the hold. When the last turn grew
//!   the conversation past what the hold was sized for (its tool results), the answer call
//!   takes the difference from what is free; when nothing is, it is made without that turn,
//!   which the hold always pays for: the model answers with what it had read before it.
//! - **Time.** An answer is counted as the slowest model call so far times [`TIME_MARGIN`]
//!   (1.5), plus the slowest output check. A turn that may call tools needs the time of its own
//!   call and of an answer after it: with less than two answers' time left, the turn asks for
//!   the output alone (and a reservation that waited past that point becomes the answer). A run
//!   publishes when it must answer by (its end less one such answer) on its [`RunClock`], and a
//!   sub-agent it starts ends no later than that, so its sub-agents never take its answer's
//!   time; a sub-agent starts with its parent's slowest call as its own first estimate.
//!
//! A run asked for its output this way is cut short ([`Limit`]); later turns (repairs) ask for
//! the output alone too, and a repair that can no longer be paid for, or made in time, ends the
//! run `invalid_output` with the last violations. `[limits] answer_reserve = false` turns all of
//! this off, and a run works until a limit stops it.

use std::time::Duration;

use rust_decimal::{Decimal, RoundingStrategy};
use tokio::time::Instant;

use crate::budget::{BudgetError, Hold, Reservation};
use crate::ctx::{Ctx, RunClock};
use crate::events::Forced;
use crate::outcome::{Failure, Limit};
use crate::spec::core::SpecCore;

/// The margin on the slowest model call so far, as a fraction: 3/2, so a call may take half
/// as long again as the slowest one before it.
pub(crate) const TIME_MARGIN: (u32, u32) = (3, 2);

/// Bytes of conversation each output token of the model's response is counted as, when the
/// reserve sizes the conversation after a turn: a response read back as input is about the
/// tokens it was written as. (The next call's reservation counts its bytes, which may be more;
/// the answer call then takes the difference from what is free, or leaves that turn out.)
pub(crate) const ASSISTANT_BYTES_PER_TOKEN: usize = 1;

/// When a run started at `start` ends: its own `timeout` after it, or sooner, when its parent
/// must answer by then. The second value is the slowest model call its parent has seen, a
/// first estimate of its own.
pub(super) fn run_end(ctx: &Ctx, timeout: Duration, start: Instant) -> (Instant, Duration) {
    let own = start.checked_add(timeout).unwrap_or_else(far_future);
    match ctx.clocks().1.and_then(RunClock::read) {
        Some((by, slowest)) => (own.min(by), slowest),
        None => (own, Duration::ZERO),
    }
}

/// An instant no run reaches (a timeout too large to add to now).
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}

/// Bytes the conversation is expected to grow by in one turn, as the reserve counts it: the
/// model's response at its output-token limit, with its framing. Not a bound (the tool results
/// answering it come on top, and may be large): the hold is sized by it; an answer call that
/// costs more takes the difference from what is free, and when nothing is, it is made without
/// the last turn.
pub(crate) fn growth(spec: &SpecCore) -> usize {
    (spec.def.limits.max_tokens_per_turn as usize)
        .saturating_mul(ASSISTANT_BYTES_PER_TOKEN)
        .saturating_add(64)
}

/// What the loop asks about one call: its worst case, the worst case of an output-only call
/// after it, and (on demand) the worst case of the call without the last turn.
pub(super) struct Ask<F> {
    pub(super) call: Decimal,
    pub(super) after: Decimal,
    pub(super) without_last: F,
}

/// The answer to [`Reserve::admit`]: why the call asks for the output alone (if it does), its
/// reservation, its worst case, and whether it is made without the last turn.
pub(super) struct Admitted {
    pub(super) forced: Option<Forced>,
    pub(super) reservation: Reservation,
    pub(super) worst: Decimal,
    pub(super) without_last: bool,
}

/// One run's answer reserve.
pub(super) struct Reserve {
    on: bool,
    /// Whether any budget of the chain has a limit: an unlimited chain holds nothing.
    limited: bool,
    hold: Option<Hold>,
    cut: Option<Limit>,
    end: Instant,
    /// The time the run had, from its start to `end`.
    timeout: Duration,
    slowest: Duration,
    check: Duration,
}

/// Whether `forced` asks for the output alone (the two that require a read do not).
fn output_alone(forced: Option<Forced>) -> bool {
    forced.is_some_and(|f| !matches!(f, Forced::FirstTurn | Forced::Ungrounded))
}

impl Reserve {
    /// The reserve of a run of `spec` in `ctx` that started at `start` and ends at `end`;
    /// `slowest` is the first estimate of a model call's time.
    pub(super) fn new(
        spec: &SpecCore,
        ctx: &Ctx,
        (start, end): (Instant, Instant),
        slowest: Duration,
    ) -> Self {
        let on = spec.def.limits.answer_reserve;
        Reserve {
            on,
            limited: on && ctx.budget().is_limited(),
            hold: None,
            cut: None,
            end,
            timeout: end.saturating_duration_since(start),
            slowest,
            check: Duration::ZERO,
        }
    }

    /// The limit that cut the run short, if one did.
    pub(super) fn cut_short(&self) -> Option<Limit> {
        self.cut
    }

    /// Whether the run keeps a reserve at all.
    pub(super) fn is_on(&self) -> bool {
        self.on
    }

    /// The time an answer takes, as the reserve counts it: the slowest call with its margin,
    /// and the slowest output check.
    fn answer_time(&self) -> Duration {
        let (num, den) = TIME_MARGIN;
        (self.slowest * num / den).saturating_add(self.check)
    }

    /// Whether fewer than `answers` answer times are left.
    fn time_short(&self, answers: u32) -> bool {
        let needed = self.answer_time().saturating_mul(answers);
        Instant::now()
            .checked_add(needed)
            .is_none_or(|t| t > self.end)
    }

    /// After a model call that took `took`: the slowest call so far, and when this run must
    /// answer by, for the sub-agents it may start now.
    pub(super) fn answered(&mut self, ctx: &Ctx, took: Duration) {
        self.slowest = self.slowest.max(took);
        if self.on {
            let by = self.end.checked_sub(self.answer_time()).unwrap_or(self.end);
            ctx.clocks().0.publish(by, self.slowest);
        }
    }

    /// After an output was checked, which took `took`.
    pub(super) fn checked(&mut self, took: Duration) {
        self.check = self.check.max(took);
    }

    /// The one question of a turn: whether `turn`'s call may call tools or must ask for the
    /// output alone (`forced` is what the turn's own reasons ask for), and its reservation.
    /// `called` says a model call of this run was made before.
    pub(super) async fn admit<F: FnOnce() -> Decimal>(
        &mut self,
        ctx: &Ctx,
        mut forced: Option<Forced>,
        turn: u32,
        called: bool,
        ask: Ask<F>,
    ) -> Result<Admitted, Failure> {
        if forced == Some(Forced::LastTurn) && self.cut.is_none() {
            self.cut = Some(Limit::Turns);
        }
        if !self.on {
            let reservation = plain(ctx, ask.call, turn).await?;
            return Ok(Admitted {
                forced,
                reservation,
                worst: ask.call,
                without_last: false,
            });
        }
        // Cut short once, cut short on: a repair asks for the output alone too.
        match self.cut {
            Some(Limit::Budget) if !output_alone(forced) => forced = Some(Forced::Budget),
            Some(Limit::Time) if !output_alone(forced) => forced = Some(Forced::Time),
            _ => {}
        }
        if self.time_short(1) && (!called || self.cut == Some(Limit::Time)) {
            // Not even one answer fits in the time left: no call is started that could not
            // end in time (a sub-agent started too late, or a repair after a cut-short answer).
            return Err(Failure::Timeout(self.timeout));
        }
        if !output_alone(forced) && self.time_short(2) {
            forced = Some(Forced::Time);
            self.cut = Some(Limit::Time);
        }
        // A turn after which another may come keeps room for an answer beside its call: a
        // turn that may call tools, and one that asks for the output for a reason of its own
        // (a repair may follow it). The last turn, and one a limit forced, need none.
        let last = forced == Some(Forced::LastTurn) || self.cut.is_some_and(|l| l != Limit::Turns);
        if !last {
            if !self.limited {
                let reservation = plain(ctx, ask.call, turn).await?;
                return Ok(Admitted {
                    forced,
                    reservation,
                    worst: ask.call,
                    without_last: false,
                });
            }
            let own = self.hold.take();
            let exchanged = ctx.budget().exchange(own, ask.call, Some(ask.after));
            match ctx
                .unless_cancelled(exchanged)
                .await
                .ok_or(Failure::Cancelled)?
            {
                Ok((reservation, hold)) => {
                    self.hold = hold;
                    if !output_alone(forced) && self.time_short(2) {
                        // The reservation waited for calls in flight, and the time went: the
                        // call it reserved is the answer.
                        forced = Some(Forced::Time);
                        self.cut = Some(Limit::Time);
                        self.hold = None;
                    }
                    return Ok(Admitted {
                        forced,
                        reservation,
                        worst: ask.call,
                        without_last: false,
                    });
                }
                Err((error @ BudgetError::Overspent { .. }, _)) => {
                    return Err(Failure::Budget { error, turn })
                }
                Err((error, own)) => {
                    self.hold = own;
                    if !called && !output_alone(forced) {
                        // A run that has not started cannot pay for one turn of work and the
                        // answer after it: it is turned away before it spends anything (an
                        // answer written blind is no answer), with the figure that would do.
                        return Err(refusal(error, turn, called));
                    }
                    if !output_alone(forced) {
                        forced = Some(Forced::Budget);
                        self.cut = Some(Limit::Budget);
                    }
                }
            }
        }
        self.answer(ctx, forced, turn, called, ask).await
    }

    /// An output-only call, paid from the hold when the run has one.
    async fn answer<F: FnOnce() -> Decimal>(
        &mut self,
        ctx: &Ctx,
        forced: Option<Forced>,
        turn: u32,
        called: bool,
        ask: Ask<F>,
    ) -> Result<Admitted, Failure> {
        let budget = ctx.budget();
        let admitted = |reservation, worst, without_last| Admitted {
            forced,
            reservation,
            worst,
            without_last,
        };
        let exchanged = budget.exchange(self.hold.take(), ask.call, None);
        let error = match ctx
            .unless_cancelled(exchanged)
            .await
            .ok_or(Failure::Cancelled)?
        {
            Ok((r, _)) => return Ok(admitted(r, ask.call, false)),
            Err((e, Some(own))) if !matches!(e, BudgetError::Overspent { .. }) => {
                // The last turn grew the conversation past what the hold was sized for: made
                // without that turn, the call is no dearer than the one that turn made, which
                // the hold covers, so it takes no room of its own.
                let without = (ask.without_last)();
                if without <= own.amount() {
                    // Takes no room, so it never waits.
                    match budget.exchange(Some(own), without, None).await {
                        Ok((r, _)) => return Ok(admitted(r, without, true)),
                        Err((e, _)) => e,
                    }
                } else {
                    e
                }
            }
            Err((e, _)) => e,
        };
        Err(refusal(error, turn, called))
    }
}

/// A call's reservation without a reserve beside it.
async fn plain(ctx: &Ctx, worst: Decimal, turn: u32) -> Result<Reservation, Failure> {
    let reserved = ctx.unless_cancelled(ctx.budget().reserve(worst)).await;
    reserved
        .ok_or(Failure::Cancelled)?
        .map_err(|error| Failure::Budget { error, turn })
}

/// How a refused call ends the run; before any call, with the figure the refusing limit
/// would have to be raised to for it (and the hold beside it).
fn refusal(error: BudgetError, turn: u32, called: bool) -> Failure {
    match &error {
        BudgetError::Usd {
            spent,
            reserved,
            requested,
            ..
        } if !called => {
            let raise_to = spent
                .saturating_add(*reserved)
                .saturating_add(*requested)
                .round_dp_with_strategy(4, RoundingStrategy::AwayFromZero)
                .normalize();
            Failure::NoRoomToAnswer { error, raise_to }
        }
        _ => Failure::Budget { error, turn },
    }
}
