//! How a run ends: its [`Outcome`], and the [`RunResult`] a caller gets back.

use std::fmt;
use std::time::Duration;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::budget::BudgetError;
use crate::contract::Violation;
use crate::model::{ModelError, Usage};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// It produced a valid output.
    Completed,
    /// It used every turn without producing an output.
    MaxTurns,
    /// It kept repeating tool calls it had already made (same tool, same arguments), after
    /// being told so, and was stopped before spending its remaining turns.
    Stalled,
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
            Outcome::Stalled => "stalled",
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

/// The limit that cut a run short: it asked the model for its output alone, before it was
/// done, so that it would still answer within that limit. The run completed, and its output
/// passed every check, but it may be incomplete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Limit {
    /// Its turn limit: the last turn asked for the output alone.
    Turns,
    /// Its budget (or an ancestor's): what was left covered only the answer.
    Budget,
    /// Its timeout (or its parent's, which it must answer within).
    Time,
}

impl Limit {
    /// The limit's stable name (`turns`, `budget`, `time`).
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Turns => "turns",
            Limit::Budget => "budget",
            Limit::Time => "time",
        }
    }

    /// The limit as a sentence says it: "its turn limit", "its budget", "its timeout".
    pub fn said(self) -> &'static str {
        match self {
            Limit::Turns => "its turn limit",
            Limit::Budget => "its budget",
            Limit::Time => "its timeout",
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a child context could not be made. The run loop turns it into an error result for the
/// model that asked; nothing panics.
#[derive(Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// The spec asks for tools its parent does not hold (invariant 1: never widen).
    #[error("`{spec}` asks for tools its parent does not hold: {}", missing.join(", "))]
    CapabilityNotHeld {
        /// The spec.
        spec: String,
        /// The tools the parent lacks.
        missing: Vec<String>,
    },
    /// The child would be deeper than the depth limit (invariant 3).
    #[error("`{spec}` would run at depth {depth}, past the limit of {max_depth}; do this work with your own tools instead")]
    TooDeep {
        /// The spec.
        spec: String,
        /// The depth it would have.
        depth: u32,
        /// The limit.
        max_depth: u32,
    },
    /// The spec names a model that cannot be made.
    #[error("`{spec}`: {error}")]
    Model {
        /// The spec.
        spec: String,
        /// Why.
        error: ModelError,
    },
}

crate::debug_as_display!(SpawnError);

/// Why a run ended without an output: one variant per cause, each naming its [`Outcome`]
/// ([`Failure::outcome`]). Its `Display` is the one-line message traces, result lines and
/// error results carry. Violations say where and why, never what the sub-agent wrote.
///
/// Callers ask it instead of reading text: [`Failure::refused_before_spend`] tells a batch
/// whether an input was turned away by a budget before any money went out.
///
/// ```
/// use subcontract::{Failure, Outcome};
///
/// let f = Failure::MaxTurns { turns: 4 };
/// assert_eq!(f.outcome(), Outcome::MaxTurns);
/// assert_eq!(f.to_string(), "no output within 4 turns");
/// ```
#[derive(Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Failure {
    /// The input broke the input contract.
    #[error("invalid input: {}", join(.0))]
    InvalidInput(Vec<Violation>),
    /// The input could not be serialised to JSON.
    #[error("the input could not be serialised: {0}")]
    InputNotSerialisable(String),
    /// The child could not be made: a capability its parent lacks, too deep, or a model that
    /// cannot be made.
    #[error("{0}")]
    Spawn(SpawnError),
    /// The spec asks for tools the context it runs in does not hold.
    #[error("`{spec}` asks for tools this context does not hold: {}", missing.join(", "))]
    ToolsNotHeld {
        /// The spec.
        spec: String,
        /// The tools the context lacks.
        missing: Vec<String>,
    },
    /// A budget (the run's own or an ancestor's) refused the reservation for the model call
    /// of turn `turn`.
    #[error("{error}")]
    Budget {
        /// The refusal.
        error: BudgetError,
        /// The turn whose call was refused (1 for the first).
        turn: u32,
    },
    /// The budget could not pay for the run's first call and the answer reserve beside it
    /// (for a spec without tools, for even one output-only call), so the run made no call:
    /// `raise_to` is the figure the refusing limit would have to be raised to: for a USD limit
    /// its spend and reservations plus what was asked, rounded up to a hundredth of a cent;
    /// for a model-call limit the calls used or in flight plus the two a working turn and its
    /// answer take.
    #[error("{error}: not enough to start and still answer; raise that limit to at least {raise_to} {}", if matches!(**error, BudgetError::Calls { .. }) { "calls" } else { "USD" })]
    NoRoomToAnswer {
        /// The refusal (boxed: this rare variant would otherwise make every `Failure`, and
        /// every result that may hold one, larger).
        error: Box<BudgetError>,
        /// The limit that one answer needs.
        raise_to: Decimal,
    },
    /// A provider billed more than the call had reserved (its worst case), which exhausts
    /// every limited budget above the run.
    #[error("the provider billed {} USD for turn {turn}, more than the {} USD reserved for it (its worst case at {max_tokens} output tokens){}: the budget is exhausted and no further call is made", billed.normalize(), reserved.round_dp(6).normalize(), if *saturated { ", a token count of its usage being past 2^64 (counted as 2^64 - 1)" } else { "" })]
    Overbilled {
        /// The turn.
        turn: u32,
        /// What the provider billed.
        billed: Decimal,
        /// What the call had reserved.
        reserved: Decimal,
        /// The call's output-token limit.
        max_tokens: u32,
        /// Whether a token count of the usage was past `u64` (counted as `u64::MAX`).
        saturated: bool,
    },
    /// The spend at stake could not be recorded before a call, so the call was not made.
    #[error("the spend at stake could not be recorded, so the call was not made: {0}")]
    SpendNotRecorded(String),
    /// A model call failed.
    #[error("{0}")]
    Model(ModelError),
    /// A model call was answered, but its usage could not be read: the call happened, so it
    /// is charged its whole reservation (its worst case), never nothing.
    #[error("{error}; the call is charged its whole reservation, {} USD", charged.round_dp(6).normalize())]
    UnreadableUsage {
        /// The provider's malformed answer.
        error: ModelError,
        /// What the call was charged.
        charged: Decimal,
    },
    /// Every turn was used without an output.
    #[error("no output within {turns} turns")]
    MaxTurns {
        /// The turn limit.
        turns: u32,
    },
    /// The model kept repeating tool calls it had made before (same tool, same arguments),
    /// so the run stopped before spending its remaining turns.
    #[error("stalled: {repeating_turns} turns repeated a tool call of an earlier turn (same tool, same arguments); stopped after turn {turn} of {max_turns}")]
    Stalled {
        /// Turns that repeated an earlier call.
        repeating_turns: u32,
        /// The turn it stopped after.
        turn: u32,
        /// The turn limit.
        max_turns: u32,
    },
    /// The last output broke the contract and no turn was left to repair it.
    #[error("the last output was invalid: {}", join(.0))]
    InvalidOutput(Vec<Violation>),
    /// The run ran past its timeout.
    #[error("no result within {0:?}")]
    Timeout(Duration),
    /// The run, or an ancestor, was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The output was valid but is not of the type the caller asked for.
    #[error("{0}")]
    OutputType(String),
    /// An acting run could not get its working copy (no workspace to copy, not a git
    /// repository for a worktree, a copy that failed): it did not start.
    #[error("{0}")]
    Workspace(String),
}

crate::debug_as_display!(Failure);

fn join(v: &[Violation]) -> String {
    v.iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

impl Failure {
    /// The outcome this failure ends a run with.
    pub fn outcome(&self) -> Outcome {
        match self {
            Failure::InvalidInput(_) | Failure::InputNotSerialisable(_) => Outcome::InvalidInput,
            Failure::Spawn(_) | Failure::ToolsNotHeld { .. } | Failure::Workspace(_) => {
                Outcome::Denied
            }
            Failure::Budget { .. }
            | Failure::Overbilled { .. }
            | Failure::NoRoomToAnswer { .. } => Outcome::BudgetExhausted,
            Failure::SpendNotRecorded(_) | Failure::Model(_) | Failure::UnreadableUsage { .. } => {
                Outcome::ModelError
            }
            Failure::MaxTurns { .. } => Outcome::MaxTurns,
            Failure::Stalled { .. } => Outcome::Stalled,
            Failure::InvalidOutput(_) | Failure::OutputType(_) => Outcome::InvalidOutput,
            Failure::Timeout(_) => Outcome::Timeout,
            Failure::Cancelled => Outcome::Cancelled,
        }
    }

    /// The violations of a rejected input or output, if that is what this is.
    pub fn violations(&self) -> Option<&[Violation]> {
        match self {
            Failure::InvalidInput(v) | Failure::InvalidOutput(v) => Some(v),
            _ => None,
        }
    }

    /// The budget refusal, when a reservation was refused.
    pub fn budget_error(&self) -> Option<&BudgetError> {
        match self {
            Failure::Budget { error, .. } => Some(error),
            Failure::NoRoomToAnswer { error, .. } => Some(error),
            _ => None,
        }
    }

    /// Whether a budget refused the run's first model call: the run was turned away before
    /// any spend (a run whose later call was refused has spent, and is a result).
    pub fn refused_before_spend(&self) -> bool {
        match self {
            Failure::NoRoomToAnswer { .. } => true,
            Failure::Budget { turn: 1, error } => !matches!(error, BudgetError::Overspent { .. }),
            _ => false,
        }
    }
}

/// What a run returns: its outcome, the validated output when it completed, and what it
/// consumed.
#[derive(Debug)]
#[non_exhaustive]
pub struct RunResult<O> {
    /// The run's id.
    pub run_id: String,
    /// How it ended.
    pub outcome: Outcome,
    /// The validated output (only when `outcome` is `Completed`).
    pub output: Option<O>,
    /// Model turns taken: the model calls that were answered. A run whose first call failed
    /// before any answer (a refused connection, an HTTP error) or was refused by a budget
    /// took 0 turns.
    pub turns: u32,
    /// Tokens used by this run's own model calls.
    pub usage: Usage,
    /// Cost of this run's own model calls.
    pub cost_usd: Decimal,
    /// Cost of this run including every sub-agent below it.
    pub total_cost_usd: Decimal,
    /// Wall time.
    pub duration: Duration,
    /// Why it did not complete (`None` exactly when it did).
    pub error: Option<Failure>,
    /// An acting run's changes to its working copy, when it completed: checked like its
    /// output (within `writes`, the size limits, its `checks` passing), and applied to
    /// nothing yet: [`Changes::apply`](crate::act::Changes::apply) them or drop them. `None`
    /// for a run that does not act, and for one that did not complete (whose changes are
    /// kept as a patch file, never applied; its `changes` event names the file).
    pub changes: Option<crate::act::Changes>,
    /// The limit that cut it short, when it completed with an output it was asked for before
    /// it was done (see [`Limit`]); `None` otherwise.
    pub cut_short: Option<Limit>,
}

/// What a run consumed, however it ended.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RunStats {
    pub(crate) turns: u32,
    pub(crate) usage: Usage,
    pub(crate) cost_usd: Decimal,
    pub(crate) total_cost_usd: Decimal,
    pub(crate) duration: Duration,
    pub(crate) cut_short: Option<Limit>,
}

impl<O> RunResult<O> {
    /// The one way the library makes a result: its outcome, output and error all come from
    /// `ended`, so they agree by construction.
    pub(crate) fn ended(run_id: String, ended: Result<O, Failure>, stats: RunStats) -> Self {
        let (outcome, output, error, cut_short) = match ended {
            Ok(o) => (Outcome::Completed, Some(o), None, stats.cut_short),
            Err(f) => (f.outcome(), None, Some(f), None),
        };
        RunResult {
            run_id,
            outcome,
            output,
            turns: stats.turns,
            usage: stats.usage,
            cost_usd: stats.cost_usd,
            total_cost_usd: stats.total_cost_usd,
            duration: stats.duration,
            error,
            changes: None,
            cut_short,
        }
    }

    /// The same result with its output turned into another type by `f`; an output `f`
    /// refuses ends the result with that failure instead.
    pub(crate) fn map_output<P>(self, f: impl FnOnce(O) -> Result<P, Failure>) -> RunResult<P> {
        let stats = RunStats {
            turns: self.turns,
            usage: self.usage,
            cost_usd: self.cost_usd,
            total_cost_usd: self.total_cost_usd,
            duration: self.duration,
            cut_short: self.cut_short,
        };
        let changes = self.changes;
        let ended = match (self.output, self.error) {
            (Some(o), None) => f(o),
            (_, Some(e)) => Err(e),
            // Unreachable from the library, whose results come from `ended`; kept total since
            // the fields are public.
            (None, None) => Err(Failure::OutputType(format!(
                "the run ended {} without an output",
                self.outcome
            ))),
        };
        let mut r = RunResult::ended(self.run_id, ended, stats);
        // Changes belong to a completed run only.
        r.changes = changes.filter(|_| r.outcome == Outcome::Completed);
        r
    }

    /// The output, or the failure with its outcome.
    pub fn into_result(self) -> Result<O, RunError> {
        match (self.output, self.error) {
            (Some(o), None) if self.outcome == Outcome::Completed => Ok(o),
            (_, Some(failure)) => Err(RunError {
                outcome: failure.outcome(),
                failure,
            }),
            (_, None) => Err(RunError {
                outcome: self.outcome,
                failure: Failure::OutputType(format!(
                    "the run ended {} without an output",
                    self.outcome
                )),
            }),
        }
    }

    /// Whether a budget turned the run away before it spent anything: its first model call
    /// was refused and nothing below it was charged. Both batch engines leave such an input
    /// for a later run instead of recording it as final.
    pub fn refused_before_spend(&self) -> bool {
        self.total_cost_usd.is_zero()
            && self
                .error
                .as_ref()
                .is_some_and(Failure::refused_before_spend)
    }
}

/// A run that ended without an output. It reads `run ended: <outcome>: <why>`, or `run ended:
/// <why>` when the why already begins with the outcome (`cancelled`, `stalled: …`).
#[derive(Clone, PartialEq, thiserror::Error)]
#[error("run ended: {}", self.said())]
pub struct RunError {
    /// How it ended.
    pub outcome: Outcome,
    /// Why.
    pub failure: Failure,
}

crate::debug_as_display!(RunError);

impl RunError {
    /// The failure, after its outcome unless it names the outcome itself.
    fn said(&self) -> String {
        let why = self.failure.to_string();
        let outcome = self.outcome.as_str();
        if why
            .strip_prefix(outcome)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
        {
            why
        } else {
            format!("{outcome}: {why}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(failure: Failure) -> String {
        RunError {
            outcome: failure.outcome(),
            failure,
        }
        .to_string()
    }

    #[test]
    fn a_run_error_names_its_outcome_once() {
        assert_eq!(said(Failure::Cancelled), "run ended: cancelled");
        let stalled = said(Failure::Stalled {
            repeating_turns: 2,
            turn: 3,
            max_turns: 8,
        });
        assert!(
            stalled.starts_with("run ended: stalled: 2 turns"),
            "{stalled}"
        );
        assert_eq!(
            said(Failure::MaxTurns { turns: 4 }),
            "run ended: max_turns: no output within 4 turns"
        );
    }

    #[test]
    fn a_result_agrees_with_how_it_ended() {
        let ok = RunResult::ended("r".into(), Ok(7), RunStats::default());
        assert_eq!(
            (ok.outcome, ok.output, ok.error.is_none()),
            (Outcome::Completed, Some(7), true)
        );
        let failed: RunResult<i32> =
            RunResult::ended("r".into(), Err(Failure::Cancelled), RunStats::default());
        assert_eq!(failed.outcome, Outcome::Cancelled);
        assert!(failed.output.is_none());
        assert_eq!(
            failed.into_result().unwrap_err().failure,
            Failure::Cancelled
        );
    }
}
