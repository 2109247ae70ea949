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

use crate::budget::{Answer, BudgetError, Hold, Reservation};
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

/// What the loop asks about one call: its worst case, and on demand the worst case of an
/// output-only call after it (priced only when a hold is taken: a decimal division the
/// unlimited budgets never need) and of the call without the last turn.
pub(super) struct Ask<A, F> {
    pub(super) call: Decimal,
    pub(super) after: A,
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
    /// The last instants at which one answer, and two, still fit before `end` (`None`: none
    /// does), kept as `slowest` and `check` change: a turn compares the clock with them.
    by: [Option<Instant>; 2],
    /// Whether `by` or `slowest` changed since the run last published them.
    unpublished: bool,
    /// When the model call under way began (from its admission), then when it was answered:
    /// where an output check after it begins. `None` in a run that keeps no reserve.
    mark: Option<Instant>,
    /// Whether an output check began at `mark`: it ends where the next turn's admission
    /// reads the clock (no await comes between), so it costs no clock read of its own.
    checking: bool,
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
        if on {
            // What the run publishes for its sub-agents is counted from here.
            ctx.clocks().0.start(start);
        }
        let mut r = Reserve {
            on,
            limited: on && ctx.budget().is_limited(),
            hold: None,
            cut: None,
            end,
            timeout: end.saturating_duration_since(start),
            slowest,
            check: Duration::ZERO,
            by: [None; 2],
            unpublished: true,
            mark: None,
            checking: false,
        };
        r.times_changed();
        r
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

    /// After `slowest` or `check` changed: when one answer, and two, must start by.
    fn times_changed(&mut self) {
        let answer = self.answer_time();
        // `now + n answers > end` exactly when `now > end - n answers`.
        self.by = [1, 2].map(|n| self.end.checked_sub(answer.saturating_mul(n)));
        self.unpublished = true;
    }

    /// Whether, at `now`, fewer than `answers` (1 or 2) answer times are left.
    fn time_short(&self, now: Instant, answers: usize) -> bool {
        self.by[answers - 1].is_none_or(|by| now > by)
    }

    /// The clock read once for a turn's admission; an output check under way ends here.
    #[inline]
    fn now(&mut self) -> Instant {
        let now = Instant::now();
        if let (true, Some(from)) = (std::mem::take(&mut self.checking), self.mark) {
            let took = now.saturating_duration_since(from);
            if took > self.check {
                self.check = took;
                self.times_changed();
            }
        }
        now
    }

    /// When the last admission read the clock (where the call it admitted began), if it
    /// did: a run that keeps no reserve reads none.
    #[inline]
    pub(super) fn admitted_at(&self) -> Option<Instant> {
        self.mark
    }

    /// After a model call was answered at `at`: the slowest call so far, and when this run
    /// must answer by, for the sub-agents it may start now.
    #[inline]
    pub(super) fn answered(&mut self, ctx: &Ctx, at: Instant) {
        // A run that keeps no reserve times nothing.
        let Some(since) = self.mark else { return };
        self.mark = Some(at);
        // Slower than the slowest so far (an addition, cheaper than a difference of instants).
        if since.checked_add(self.slowest).is_none_or(|t| at > t) {
            let took = at.saturating_duration_since(since);
            if took > self.slowest {
                self.slowest = took;
                self.times_changed();
            }
        }
        // The same figures again would change nothing a reader sees.
        if self.unpublished {
            self.unpublished = false;
            ctx.clocks()
                .0
                .publish(self.by[0].unwrap_or(self.end), self.slowest);
        }
    }

    /// After the last answer's output was checked: the check's time runs until the next
    /// turn's admission.
    pub(super) fn checked(&mut self) {
        self.checking = true;
    }

    /// [`admit`](Self::admit) in its usual case, answered at once: a turn that neither a limit
    /// nor the time left makes the last one, in a run that keeps no reserve or whose budgets
    /// have no limit, reserved without waiting. `None` leaves the turn to `admit`, having
    /// reserved nothing and decided nothing: a refusal, a wait, a cut and a timeout are all
    /// `admit`'s, which asks again. No future is made for it, and no error is moved through it.
    ///
    /// It does not look at the run's cancellation: the turn loop did, and the one wait since
    /// (a fan-out sibling's first call, for its cache) stops on it.
    #[inline]
    pub(super) fn admit_now(
        &mut self,
        ctx: &Ctx,
        forced: Option<Forced>,
        call: Decimal,
    ) -> Option<Admitted> {
        // A limited budget takes a hold beside the call; a cut or the last turn is decided
        // by `admit`.
        if self.limited || self.cut.is_some() || forced == Some(Forced::LastTurn) {
            return None;
        }
        let now = if self.on {
            let now = self.now();
            // A turn that may call tools needs two answers' time; one asking for the output
            // alone, one.
            if self.time_short(now, if output_alone(forced) { 1 } else { 2 }) {
                return None;
            }
            Some(now)
        } else {
            None
        };
        let reservation = ctx.budget().reserve_now(call)?.ok()?;
        if now.is_some() {
            self.mark = now;
        }
        Some(Admitted {
            forced,
            reservation,
            worst: call,
            without_last: false,
        })
    }

    /// The one question of a turn: whether `turn`'s call may call tools or must ask for the
    /// output alone (`forced` is what the turn's own reasons ask for), and its reservation.
    /// `called` says a model call of this run was made before.
    pub(super) async fn admit<A: FnOnce() -> Decimal, F: FnOnce() -> Decimal>(
        &mut self,
        ctx: &Ctx,
        mut forced: Option<Forced>,
        turn: u32,
        called: bool,
        ask: Ask<A, F>,
    ) -> Result<Admitted, Failure> {
        if forced == Some(Forced::LastTurn) && self.cut.is_none() {
            self.cut = Some(Limit::Turns);
        }
        if !self.on {
            let reservation = match plain_now(ctx, ask.call, turn) {
                Some(reserved) => reserved?,
                None => plain(ctx, ask.call, turn).await?,
            };
            return Ok(Admitted {
                forced,
                reservation,
                worst: ask.call,
                without_last: false,
            });
        }
        let now = self.now();
        // Cut short once, cut short on: a repair asks for the output alone too.
        match self.cut {
            Some(Limit::Budget) if !output_alone(forced) => forced = Some(Forced::Budget),
            Some(Limit::Time) if !output_alone(forced) => forced = Some(Forced::Time),
            _ => {}
        }
        if self.time_short(now, 1) && (!called || self.cut == Some(Limit::Time)) {
            // Not even one answer fits in the time left: no call is started that could not
            // end in time (a sub-agent started too late, or a repair after a cut-short answer).
            return Err(Failure::Timeout(self.timeout));
        }
        if !output_alone(forced) && self.time_short(now, 2) {
            forced = Some(Forced::Time);
            self.cut = Some(Limit::Time);
        }
        // A turn after which another may come keeps room for an answer beside its call: a
        // turn that may call tools, and one that asks for the output for a reason of its own
        // (a repair may follow it). The last turn, and one a limit forced, need none.
        let last = forced == Some(Forced::LastTurn) || self.cut.is_some_and(|l| l != Limit::Turns);
        if !last {
            if !self.limited {
                let (reservation, waited) = match plain_now(ctx, ask.call, turn) {
                    Some(reserved) => (reserved?, false),
                    None => (plain(ctx, ask.call, turn).await?, true),
                };
                self.mark = Some(since(now, waited));
                return Ok(Admitted {
                    forced,
                    reservation,
                    worst: ask.call,
                    without_last: false,
                });
            }
            let own = self.hold.take();
            let hold = Some((ask.after)());
            let (exchanged, waited) = match exchange_now(ctx, own, ask.call, hold) {
                Ok(answer) => (answer?, false),
                Err(own) => {
                    let exchanged = ctx.budget().exchange(own, ask.call, hold);
                    let answer = ctx.unless_cancelled(exchanged).await;
                    (answer.ok_or(Failure::Cancelled)?, true)
                }
            };
            match exchanged {
                Ok((reservation, hold)) => {
                    self.hold = hold;
                    // Without a wait no time passed since `now`, which was checked above.
                    let now = since(now, waited);
                    if waited && !output_alone(forced) && self.time_short(now, 2) {
                        // The reservation waited for calls in flight, and the time went: the
                        // call it reserved is the answer.
                        forced = Some(Forced::Time);
                        self.cut = Some(Limit::Time);
                        self.hold = None;
                    }
                    self.mark = Some(now);
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
        let ask = Ask {
            call: ask.call,
            after: (),
            without_last: ask.without_last,
        };
        self.answer(ctx, (forced, now), turn, called, ask).await
    }

    /// An output-only call, paid from the hold when the run has one; `now` is when the turn's
    /// admission read the clock.
    async fn answer<A, F: FnOnce() -> Decimal>(
        &mut self,
        ctx: &Ctx,
        (forced, now): (Option<Forced>, Instant),
        turn: u32,
        called: bool,
        ask: Ask<A, F>,
    ) -> Result<Admitted, Failure> {
        let budget = ctx.budget();
        let admitted = |reservation, worst, without_last| Admitted {
            forced,
            reservation,
            worst,
            without_last,
        };
        let (exchanged, waited) = match exchange_now(ctx, self.hold.take(), ask.call, None) {
            Ok(answer) => (answer?, false),
            Err(own) => {
                let exchanged = budget.exchange(own, ask.call, None);
                let answer = ctx.unless_cancelled(exchanged).await;
                (answer.ok_or(Failure::Cancelled)?, true)
            }
        };
        let error = match exchanged {
            Ok((r, _)) => {
                self.mark = Some(since(now, waited));
                return Ok(admitted(r, ask.call, false));
            }
            Err((e, Some(own))) if !matches!(e, BudgetError::Overspent { .. }) => {
                // The last turn grew the conversation past what the hold was sized for: made
                // without that turn, the call is no dearer than the one that turn made, which
                // the hold covers, so it takes no room of its own.
                let without = (ask.without_last)();
                if without <= own.amount() {
                    // Takes no room, so it never waits.
                    match budget.exchange(Some(own), without, None).await {
                        Ok((r, _)) => {
                            self.mark = Some(Instant::now());
                            return Ok(admitted(r, without, true));
                        }
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

/// When a call admitted at `now` starts its time: then, or now when its admission waited.
#[inline]
fn since(now: Instant, waited: bool) -> Instant {
    if waited {
        Instant::now()
    } else {
        now
    }
}

/// [`Budget::exchange`](crate::budget::Budget::exchange) in `ctx`'s budget when it is answered
/// without waiting, or `own` handed back to wait for it. Nothing is reserved,
/// and `own` is let go, when the run is stopping. The usual case of every model call: no
/// future, and no time passes.
fn exchange_now(
    ctx: &Ctx,
    own: Option<Hold>,
    call: Decimal,
    hold: Option<Decimal>,
) -> Result<Result<Answer, Failure>, Option<Hold>> {
    if ctx.cancellation().is_cancelled() {
        return Ok(Err(Failure::Cancelled));
    }
    ctx.budget().exchange_now(own, call, hold).map(Ok)
}

/// [`plain`] when it is answered without waiting (`None` when it would wait).
fn plain_now(ctx: &Ctx, worst: Decimal, turn: u32) -> Option<Result<Reservation, Failure>> {
    if ctx.cancellation().is_cancelled() {
        return Some(Err(Failure::Cancelled));
    }
    let reserved = ctx.budget().reserve_now(worst)?;
    Some(reserved.map_err(|error| Failure::Budget { error, turn }))
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
            Failure::NoRoomToAnswer {
                error: Box::new(error),
                raise_to,
            }
        }
        // A model-call limit: the turn's call and the answer's.
        BudgetError::Calls { used, .. } if !called => Failure::NoRoomToAnswer {
            raise_to: Decimal::from(used.saturating_add(2)),
            error: Box::new(error),
        },
        _ => Failure::Budget { error, turn },
    }
}
