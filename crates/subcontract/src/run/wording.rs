//! Every text the run loop writes for a model to read: repair requests and how they end,
//! notices added to tool results, the results of calls that did not run, the prompted mode's
//! schema line and what a parent reads of a sub-agent that failed. Kept in one place so that
//! the voice is one and a change of wording is one diff here (and makes recorded exchanges
//! stale, as any change to what a model is sent must).
//!
//! The rejection itself (which value broke which rule) is the contract's
//! ([`repair_message`](crate::contract::repair_message)); grounding's is the ground module's.

use crate::model::SUBMIT_TOOL;
use crate::spec::OutputMode;
use crate::{Failure, Outcome};

/// The prompted mode's system prompt: the spec's, then the schema the answer follows.
pub(super) fn prompted_system(system: &str, schema: &str) -> String {
    format!(
        "{system}\n\nWhen you are done, reply with your final answer as one JSON value that follows this JSON Schema, and nothing else (bare, or in one ```json block):\n{schema}"
    )
}

/// How a repair of ungrounded values ends when a turn is left to read in: call one of `own`
/// (the spec's own tools, each already in backquotes), then answer.
pub(super) fn read_then_answer(own: &[String], left: u32) -> String {
    format!(
        "Next, call {} to read what holds each value; then answer again with every value copied as it is written there ({left} turn(s) left).",
        if own.len() == 1 {
            own[0].clone()
        } else {
            format!("one of {}", own.join(", "))
        }
    )
}

/// How to send the answer again, by mode, as a repair message ends.
pub(super) fn answer_again(mode: Option<OutputMode>) -> String {
    match mode {
        None => "Answer again with corrected text.".to_string(),
        Some(OutputMode::Auto | OutputMode::Tool) => {
            format!("Call `{SUBMIT_TOOL}` with the corrected answer.")
        }
        Some(OutputMode::Native | OutputMode::Prompted) => {
            "Answer again with only the corrected JSON.".to_string()
        }
    }
}

/// How a rejected submission's repair ends.
pub(super) fn submit_again(left: u32) -> String {
    format!("Call `{SUBMIT_TOOL}` again with the corrected answer ({left} turn(s) left).")
}

/// What to tell a model whose text answer held no output (`several`: it held that many JSON
/// blocks, where the answer is one).
pub(super) fn no_output(mode: Option<OutputMode>, several: Option<usize>) -> String {
    let first = match several {
        Some(n) => format!("Your answer holds {n} JSON blocks; the answer is exactly one. "),
        None => String::new(),
    };
    match mode {
        None => format!("{first}Answer now with your final text."),
        Some(OutputMode::Auto | OutputMode::Tool) => format!(
            "{first}You did not submit an answer. Call `{SUBMIT_TOOL}` with your final answer as its arguments."
        ),
        Some(OutputMode::Native) => {
            format!("{first}Give your final answer now, as JSON.")
        }
        Some(OutputMode::Prompted) => format!(
            "{first}Reply with only your final answer: one JSON value that follows the schema in the system prompt."
        ),
    }
}

/// A text answer written as a call of `name` (`{"name": …, "arguments": …}`), before `hint`.
pub(super) fn wrapped_text(name: &str, hint: &str) -> String {
    format!(
        "Your answer is wrapped as a call of `{name}` (`{{\"name\": …, \"arguments\": …}}`): the answer is what the arguments hold, without the wrapper. {hint}"
    )
}

/// A submission whose arguments wrap the answer as a call of `name`, before `hint`.
pub(super) fn wrapped_submission(name: &str, hint: &str) -> String {
    format!(
        "Your answer is wrapped as a call of `{name}`: the arguments of `{SUBMIT_TOOL}` are the answer itself. {hint}"
    )
}

/// The violation of a valid submission that could not be read back to check its grounding.
pub(super) const UNREADABLE_FOR_GROUNDING: &str =
    "the output could not be read back to check its grounded values";

/// The result of a call of a tool the turn did not offer, on a turn that asks for the output.
pub(super) fn not_run_answer_now(mode: Option<OutputMode>) -> String {
    format!(
        "not run: this turn asks for your final answer; {}",
        no_output(mode, None)
    )
}

/// The result of a call of a tool the run does not offer.
pub(super) fn unknown_tool(name: &str, offered: &[&str]) -> String {
    format!("unknown tool `{name}`; available: {}", offered.join(", "))
}

/// The result of a sub-agent call that panicked or was aborted.
pub(super) fn sub_agent_lost(panicked: bool) -> String {
    let what = if panicked { "panicked" } else { "was aborted" };
    format!("the sub-agent call {what}")
}

/// The notice after a turn whose sub-agent calls partly failed.
pub(super) fn sub_agents_failed(failed: usize, of: usize) -> String {
    format!("{failed} of {of} sub-agent calls failed; continue with the results you have and say what is missing.")
}

/// The result of a call that ran but did not fit under the turn's result limit.
pub(super) fn result_withheld(chars: usize, max: usize) -> String {
    format!(
        "result withheld: it is {chars} characters, and this turn's tool results may add at most {max} (limit `max_tool_result_chars_per_turn`); ask for less (a narrower read or search), or call it in a later turn"
    )
}

/// The result of a call past the turn's tool-call limit; short, as there may be many.
pub(super) fn over_call_limit(max: usize) -> String {
    format!("not run: at most {max} tool calls run per turn (limit `max_tool_calls_per_turn`)")
}

/// An ordinary tool stopped, or not started, because the run's time left is what its answer
/// needs (the answer reserve in time).
pub(super) const STOPPED_FOR_ANSWER: &str = "stopped: the run's remaining time is kept for its answer, so this tool was stopped (or not started); answer with what you have";

/// The result of a call not run because the turn's results were already full.
pub(super) fn over_chars_limit(max: usize) -> String {
    format!(
        "not run: this turn's tool results reached their limit of {max} characters (`max_tool_result_chars_per_turn`); call it in a later turn"
    )
}

/// The result of a call the run stopped before it finished.
pub(super) const NOT_FINISHED: &str =
    "the run was stopped (timeout or cancellation) before this call finished";

/// The gate's answer for a run that stopped while it waited.
pub(super) const RUN_STOPPED: &str = "the run was stopped";

/// The result of a call whose arguments broke the tool's input schema.
pub(super) fn invalid_arguments(tool: &str, violations: &[impl std::fmt::Display]) -> String {
    format!(
        "invalid arguments for `{tool}`:\n{}",
        violations
            .iter()
            .map(|v| format!("- {v}"))
            .collect::<Vec<_>>()
            .join("\n")
    )
}

/// The result of a call the approval gate denied.
pub(super) fn denied(reason: &str) -> String {
    format!("denied by the approval gate: {reason}")
}

/// What a repeated call's result says after its own content.
pub(crate) fn repeated_note(first: u32) -> String {
    format!(
        "\n\nNote: this is the same call, with the same arguments, as in turn {first}, and the result is the same. Do not repeat it: use what you have and give your answer."
    )
}

/// What a parent is told of a sub-agent that ended without a result, by every host that
/// runs specs as tools: the outcome's name, the turns, and the failure, whose text names
/// where and why an output was rejected, never what it held.
pub(crate) fn ended_without_result(
    spec: &str,
    outcome: Outcome,
    turns: u32,
    error: Option<&Failure>,
) -> String {
    format!(
        "sub-agent `{spec}` ended without a result: {outcome} after {turns} turn(s){}",
        error.map(|e| format!(": {e}")).unwrap_or_default()
    )
}

/// What a parent model is told beside a sub-agent's output that was cut short: by which
/// limit, and that it may ask again with more of it.
pub(crate) fn cut_short_note(limit: crate::outcome::Limit) -> String {
    let more = match limit {
        crate::outcome::Limit::Turns => "more turns",
        crate::outcome::Limit::Budget => "a larger budget",
        crate::outcome::Limit::Time => "more time",
    };
    format!(
        "\n\nNote: this sub-agent was cut short by {}: it answered with what it had, and the answer may be incomplete. Ask again with {more} if you need more.",
        limit.said()
    )
}
