//! The one rule both batch engines (local and Temporal) apply to a run that a budget turned
//! away before it spent anything: such an input is never a final result line.

use rust_decimal::Decimal;

use crate::budget::BudgetError;
use crate::RunResult;

/// Why a batch input was turned away before it spent anything. Either way the input is not
/// written, so that a later run of the same batch does it.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// The batch's own money is gone: what it had left was below the spec's cap (or the spec
    /// has none). No further input starts; a run with a higher `--max-cost-usd` does the rest.
    BatchBudget,
    /// The spec's own limit refused the first model call: one call's worst case does not fit
    /// its `max_cost_usd` (or its model-call limit is spent at once). Every input would be
    /// refused the same way, so the batch stops and says how to fix the spec.
    SpecLimit(BudgetError),
}

impl Refusal {
    /// Whether, and why, `r` was turned away before it spent anything. `spec_cap` is the
    /// spec's own `max_cost_usd`. The run's own budget node is labelled with its run id;
    /// its limit is the spec's cap lowered to what the batch had left, so a refusal there
    /// is the spec's when that limit is the whole cap, and the batch's when it was lowered.
    /// A refusal at any node above the run is the batch's.
    pub fn of<O>(r: &RunResult<O>, spec_cap: Option<Decimal>) -> Option<Refusal> {
        if !r.refused_before_spend() {
            return None;
        }
        let error = r.error.as_ref()?.budget_error()?;
        let spec_own = match error {
            BudgetError::Usd { node, limit, .. } => {
                *node == r.run_id && spec_cap.is_some_and(|cap| *limit >= cap)
            }
            // A batch has no call limit: a call limit that refused is the spec's.
            BudgetError::Calls { node, .. } => *node == r.run_id,
            // Neither can refuse a first call before any spend.
            BudgetError::Overspent { .. } | BudgetError::Waiting { .. } => false,
        };
        Some(if spec_own {
            Refusal::SpecLimit(error.clone())
        } else {
            Refusal::BatchBudget
        })
    }

    /// What the user is told when the spec's own limit refuses every input.
    pub fn fix(&self) -> Option<String> {
        match self {
            Refusal::BatchBudget => None,
            Refusal::SpecLimit(e) => {
                let fix = match e {
                    BudgetError::Calls { .. } => {
                        "raise the spec's `max_model_calls` (a turn that may call tools and the \
                         answer after it take two calls)"
                    }
                    _ => "raise the spec's `max_cost_usd` or lower its `max_tokens_per_turn`",
                };
                Some(format!(
                    "{e}: the spec's own limit refuses the first model call of every input, so \
                     the batch stops and writes no result for them; {fix}, then run the same \
                     command again"
                ))
            }
        }
    }
}
