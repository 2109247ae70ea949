//! How a run ends: its [`Outcome`], and the [`RunResult`] a caller gets back.

use std::fmt;
use std::time::Duration;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::model::Usage;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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
