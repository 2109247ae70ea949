//! Run events and where they go: `tracing`, memory, or a JSON Lines file. One query over the
//! events of a run rebuilds its whole tree, because every run id is `parent.child-n`.

pub mod tree;

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::contract::Violation;
use crate::model::{StopReason, Usage};
use crate::outcome::{Limit, Outcome};

/// One thing that happened in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Milliseconds since the Unix epoch.
    pub ts_ms: u64,
    /// The run it belongs to.
    pub run_id: Arc<str>,
    /// Its parent run, if it is a sub-agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<Arc<str>>,
    /// The spec being run.
    pub spec: Arc<str>,
    /// Depth of the run (host = 0).
    pub depth: u32,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// A run started.
    Started {
        /// The model it uses (shared with the run's context: emitting allocates nothing).
        model: Arc<str>,
    },
    /// A model call finished (successfully or not).
    ModelCall {
        /// 1-based turn.
        turn: u32,
        /// Tokens used.
        usage: Usage,
        /// Cost of this call.
        #[serde(with = "rust_decimal::serde::str")]
        cost_usd: Decimal,
        /// Wall time of the call.
        duration_ms: f64,
        /// Why the model stopped (absent when the call failed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop_reason: Option<StopReason>,
        /// The error, when it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// How much the provider billed beyond what the call had reserved (its worst case),
        /// when it did: the budgets above it are then exhausted.
        #[serde(
            default,
            with = "rust_decimal::serde::str_option",
            skip_serializing_if = "Option::is_none"
        )]
        over_reserved_usd: Option<Decimal>,
        /// How the run's output travels (`auto`, `tool`, `native`, `prompted`); absent for a
        /// run whose output is text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_mode: Option<Cow<'static, str>>,
        /// Why this call asked for the output alone (the submission tool forced, or the
        /// response format with no tools), when it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        forced: Option<Forced>,
        /// What the answer's text was read as, when it was read as more than text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text_read_as: Option<TextRead>,
    },
    /// A tool call finished.
    ToolCall {
        /// 1-based turn.
        turn: u32,
        /// The tool (shared with its tool set entry).
        tool: Arc<str>,
        /// Whether it returned an error result.
        is_error: bool,
        /// Wall time of the call.
        duration_ms: f64,
        /// The model called a tool the run does not hold (a misspelt sub-agent name, say): the
        /// call did not run, and the model was told which tools there are. `tool` is then the
        /// name as called, its characters that are not printable escaped, at most 64 kept.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unknown: bool,
    },
    /// An output was rejected: the sub-agent is asked to repair it (or, on its last turn, the
    /// run ends `invalid_output`). Where and why only, never the output.
    OutputRejected {
        /// 1-based turn.
        turn: u32,
        /// Each violation's path and reason.
        violations: Vec<Violation>,
    },
    /// A valid output was rejected because some value it grounds (`x-grounded`) is backed by
    /// nothing the run read: the sub-agent is asked to repair it (or, on its last turn, the
    /// run ends `invalid_output`). Counted apart from [`EventKind::OutputRejected`], which is
    /// about the output's shape. Where and why only, never the output.
    OutputUngrounded {
        /// 1-based turn.
        turn: u32,
        /// Each ungrounded value's path and reason.
        violations: Vec<Violation>,
    },
    /// An acting run ran a command in its working copy (a model's `run_command`, or one of
    /// its spec's `checks`). What ran and how it ended; never its environment or output.
    Command {
        /// The program (`argv[0]`).
        program: String,
        /// Its exit code, when it exited.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// Whether it was stopped at its timeout.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        timed_out: bool,
        /// Wall time.
        duration_ms: f64,
        /// Bytes it printed, stdout and stderr together.
        output_bytes: u64,
        /// Why it did not run (not allowed, no sandbox), when it did not.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// An acting run's changes: captured when its output was accepted, accepted or discarded
    /// by its parent, or kept as a patch file (a run that failed, changes no one decided on).
    Changes(ChangesEvent),
    /// A run's output was accepted with grounded values (`x-grounded`) found only in the
    /// run's input, which its caller wrote: a parent's own words that came back grounded.
    /// Where only, never the values.
    GroundedFromInput {
        /// The turn the run ended on.
        turn: u32,
        /// The pointer of each such value.
        paths: Vec<String>,
    },
    /// A run ended.
    Finished {
        /// How it ended.
        outcome: Outcome,
        /// Model turns taken: the model calls that were answered (0 when the first failed
        /// before any answer).
        turns: u32,
        /// Tokens used by this run's own model calls.
        usage: Usage,
        /// Cost of this run's own model calls (sub-agents excluded).
        #[serde(with = "rust_decimal::serde::str")]
        cost_usd: Decimal,
        /// Wall time of the run.
        duration_ms: f64,
        /// What went wrong, if it did not complete.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// The limit that cut it short, when it completed with an output asked for before it
        /// was done.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cut_short: Option<Limit>,
    },
}

/// Why a model call's answer was forced. For every reason but [`Forced::FirstTurn`] the call
/// asked for the output alone: in the tool modes it offered only the submission tool and made
/// the model call it (in `auto` with the hidden `Levers::native_final`, as in `native`); in
/// `native` it sent the response format and no tools; in `prompted` (and
/// for text) it offered no tools. [`Forced::FirstTurn`] and [`Forced::Ungrounded`] offered the
/// spec's own tools without the submission and required a call of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Forced {
    /// It was the run's last allowed turn.
    LastTurn,
    /// The spec has no tools: every turn asks for the output.
    NoTools,
    /// The previous turn repeated a tool call it had made before.
    RepeatedCall,
    /// The previous turn answered in text without a valid output.
    TextAnswer,
    /// The first turn of a spec with tools that sets
    /// [`require_tool_first`](crate::SpecBuilder::require_tool_first): a call of one of its
    /// own tools was required, so that the model looks before it answers.
    FirstTurn,
    /// The previous turn's output held values backed by nothing the run had read
    /// (`x-grounded`): a call of one of the spec's own tools was required, so that the model
    /// reads what holds them before it answers again.
    Ungrounded,
    /// What was left of the budget (its own or an ancestor's) covered this call and no other
    /// after it: the answer reserve. The run is cut short by its budget.
    Budget,
    /// The time left was less than two answers' (this call and the answer after it), each
    /// the slowest model call so far times 1.5 plus the slowest output check: the run is cut
    /// short by its timeout.
    Time,
}

impl Forced {
    /// The reason's stable name (`last_turn`, `no_tools`, `repeated_call`, `text_answer`,
    /// `first_turn`, `ungrounded`, `budget`, `time`).
    pub fn as_str(self) -> &'static str {
        match self {
            Forced::LastTurn => "last_turn",
            Forced::NoTools => "no_tools",
            Forced::RepeatedCall => "repeated_call",
            Forced::TextAnswer => "text_answer",
            Forced::FirstTurn => "first_turn",
            Forced::Ungrounded => "ungrounded",
            Forced::Budget => "budget",
            Forced::Time => "time",
        }
    }
}

/// What a text answer (one without a tool call) was read as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "as", rename_all = "snake_case")]
pub enum TextRead {
    /// A JSON value checked as the output.
    Output {
        /// Whether it was in a fenced code block rather than the whole text.
        fenced: bool,
    },
    /// One call of an offered tool written as JSON (`{"name": …, "arguments": {…}}`), run
    /// (or, for the submission tool, checked) as that call.
    Call {
        /// The tool it called.
        tool: Arc<str>,
        /// Whether it was in a fenced code block rather than the whole text.
        fenced: bool,
        /// Characters the model wrote after the call when the call opens its answer, dropped:
        /// a call ends the model's turn, and what a model writes after it (the tool's answer,
        /// as it imagines it) is not part of the conversation.
        #[serde(default, skip_serializing_if = "is_zero_usize")]
        dropped_chars: usize,
    },
}

/// An acting run's changes, as an event reports them ([`EventKind::Changes`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChangesEvent {
    /// The changes' id (the run id of the run that made them).
    pub id: String,
    /// `captured`, `accepted`, `discarded` or `kept`.
    pub status: String,
    /// Files changed.
    pub files: usize,
    /// Lines added.
    pub insertions: u64,
    /// Lines removed.
    pub deletions: u64,
    /// The patch file they were kept in, when kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

impl EventKind {
    /// The event for `changes` now `status` (`captured`, `accepted`, `discarded`, `kept`).
    pub(crate) fn changes(
        changes: &crate::act::Changes,
        status: &str,
        patch: Option<&std::path::Path>,
    ) -> EventKind {
        let (insertions, deletions) = changes.files.iter().fold((0u64, 0u64), |(i, d), f| {
            (i + f.insertions as u64, d + f.deletions as u64)
        });
        EventKind::Changes(ChangesEvent {
            id: changes.id.clone(),
            status: status.to_owned(),
            files: changes.files.len(),
            insertions,
            deletions,
            patch: patch.map(|p| p.display().to_string()),
        })
    }

    /// This event with every registered key ([`crate::redact`]) removed from its texts, so no
    /// sink, ours or a caller's, ever receives one. Through JSON, so a field added later is
    /// covered too; free when no key is registered (offline models, tests).
    pub(crate) fn redacted(self) -> Self {
        if !crate::redact::any_registered() {
            return self;
        }
        let Ok(mut value) = serde_json::to_value(&self) else {
            return self;
        };
        if !crate::redact::redact_value(&mut value) {
            return self;
        }
        // Same shape, only string contents changed: it reads back (the exits this crate
        // writes redact their text again in any case).
        serde_json::from_value(value).unwrap_or(self)
    }
}

/// A tool name as a model called it, fit for a trace, a run tree and a terminal: at most 64
/// characters (then `…`), each that is not printable (a control, a bidi override, a zero-width
/// character) escaped as `\u{…}`.
pub(crate) fn shown_tool_name(name: &str) -> Arc<str> {
    const MAX: usize = 64;
    let mut s = String::with_capacity(name.len().min(4 * MAX));
    for (i, c) in name.chars().enumerate() {
        if i == MAX {
            s.push('…');
            break;
        }
        let invisible = matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}');
        if invisible || c.is_control() {
            s.extend(c.escape_unicode());
        } else {
            s.extend(c.escape_debug());
        }
    }
    s.into()
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Receives events. Implementations must be cheap and must not block for long: they are
/// called from the run loop.
pub trait EventSink: Send + Sync {
    /// Handles one event.
    fn emit(&self, event: &Event);

    /// Whether this sink handles events at all. When it does not, runs skip building them (a
    /// clock read, copies of ids, redaction): some 10% of a cheap run's CPU.
    fn wants_events(&self) -> bool {
        true
    }
}

/// Drops every event.
#[derive(Debug, Clone, Copy, Default)]
pub struct NullSink;

impl EventSink for NullSink {
    fn emit(&self, _event: &Event) {}

    fn wants_events(&self) -> bool {
        false
    }
}

/// Logs events through `tracing` (target `subcontract::events`), their errors
/// [redacted](crate::redact) whatever subscriber writes them.
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingSink;

impl EventSink for TracingSink {
    fn emit(&self, e: &Event) {
        let parent = e.parent_run_id.as_deref().unwrap_or("");
        let redacted = |error: &Option<String>| {
            crate::redact::redact(error.as_deref().unwrap_or("")).into_owned()
        };
        match &e.kind {
            EventKind::Started { model } => {
                tracing::info!(target: "subcontract::events", run_id = %e.run_id, parent_run_id = parent, spec = %e.spec, depth = e.depth, model = %model, "started")
            }
            EventKind::ModelCall {
                turn,
                usage,
                cost_usd,
                duration_ms,
                error,
                ..
            } => {
                tracing::debug!(target: "subcontract::events", run_id = %e.run_id, spec = %e.spec, turn, input_tokens = usage.input_tokens, output_tokens = usage.output_tokens, cost_usd = %cost_usd, duration_ms, error = redacted(error), "model_call")
            }
            EventKind::ToolCall {
                turn,
                tool,
                is_error,
                duration_ms,
                unknown,
            } => {
                tracing::debug!(target: "subcontract::events", run_id = %e.run_id, spec = %e.spec, turn, tool = %tool, is_error, duration_ms, unknown, "tool_call")
            }
            EventKind::OutputRejected { turn, violations } => {
                let first = violations
                    .first()
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                tracing::debug!(target: "subcontract::events", run_id = %e.run_id, spec = %e.spec, turn, violations = violations.len(), first = %first, "output_rejected")
            }
            EventKind::OutputUngrounded { turn, violations } => {
                let first = violations
                    .first()
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                tracing::debug!(target: "subcontract::events", run_id = %e.run_id, spec = %e.spec, turn, violations = violations.len(), first = %first, "output_ungrounded")
            }
            EventKind::Command {
                program,
                exit_code,
                timed_out,
                duration_ms,
                output_bytes,
                error,
            } => {
                tracing::debug!(target: "subcontract::events", run_id = %e.run_id, spec = %e.spec, program = %program, exit_code = ?exit_code, timed_out, duration_ms, output_bytes, error = redacted(error), "command")
            }
            EventKind::Changes(c) => {
                tracing::info!(target: "subcontract::events", run_id = %e.run_id, spec = %e.spec, id = %c.id, status = %c.status, files = c.files, insertions = c.insertions, deletions = c.deletions, patch = c.patch.as_deref().unwrap_or(""), "changes")
            }
            EventKind::GroundedFromInput { turn, paths } => {
                tracing::debug!(target: "subcontract::events", run_id = %e.run_id, spec = %e.spec, turn, paths = %paths.join(", "), "grounded_from_input")
            }
            EventKind::Finished {
                outcome,
                turns,
                usage,
                cost_usd,
                duration_ms,
                error,
                cut_short,
            } => {
                let cut_short = cut_short.map(Limit::as_str);
                tracing::info!(target: "subcontract::events", run_id = %e.run_id, parent_run_id = parent, spec = %e.spec, outcome = %outcome, cut_short, turns, input_tokens = usage.input_tokens, output_tokens = usage.output_tokens, cost_usd = %cost_usd, duration_ms, error = redacted(error), "finished")
            }
        }
    }
}

/// Keeps every event in memory, for tests and for rendering a run tree afterwards.
#[derive(Debug, Default)]
pub struct MemorySink {
    events: Mutex<Vec<Event>>,
}

impl MemorySink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of the events so far.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl EventSink for MemorySink {
    fn emit(&self, event: &Event) {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event.clone());
    }
}

/// Appends events to a JSON Lines file. Lines are buffered and flushed whenever a run
/// finishes, so a trace is complete at the end of every run. Every line is
/// [redacted](crate::redact) first: an error may quote a key a provider echoed.
pub struct JsonlSink {
    out: Mutex<Box<dyn Write + Send>>,
}

impl std::fmt::Debug for JsonlSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlSink").finish_non_exhaustive()
    }
}

impl JsonlSink {
    /// Creates (truncates) `path`.
    pub fn create(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let f = std::fs::File::create(path)?;
        Ok(Self::new(Box::new(std::io::BufWriter::new(f))))
    }

    /// Writes to any writer.
    pub fn new(out: Box<dyn Write + Send>) -> Self {
        JsonlSink {
            out: Mutex::new(out),
        }
    }
}

impl EventSink for JsonlSink {
    fn emit(&self, event: &Event) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let mut res = serde_json::to_string(event)
            .map_err(std::io::Error::from)
            .and_then(|line| out.write_all(crate::redact::redact(&line).as_bytes()))
            .and_then(|_| out.write_all(b"\n"));
        if matches!(event.kind, EventKind::Finished { .. }) {
            res = res.and_then(|_| out.flush());
        }
        if let Err(e) = res {
            // A trace that cannot be written must not fail the run; say so.
            tracing::error!(error = %e, "could not write a trace event");
        }
    }
}

/// Sends every event to several sinks.
#[derive(Default, Clone)]
pub struct Sinks(pub Vec<Arc<dyn EventSink>>);

impl EventSink for Sinks {
    fn emit(&self, event: &Event) {
        for s in &self.0 {
            s.emit(event);
        }
    }

    fn wants_events(&self) -> bool {
        self.0.iter().any(|s| s.wants_events())
    }
}

/// Reads a JSON Lines trace.
pub fn read_jsonl(path: impl AsRef<Path>) -> std::io::Result<Vec<Event>> {
    let text = std::fs::read_to_string(path)?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let e: Event = serde_json::from_str(line).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("line {}: not a trace event: {e}", i + 1),
            )
        })?;
        out.push(e);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::model::{ScriptStep, ScriptedModel};
    use crate::Ctx;

    /// Counts what it is handed, though it wants nothing.
    struct Refusing(AtomicUsize);

    impl EventSink for Refusing {
        fn emit(&self, _event: &Event) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }

        fn wants_events(&self) -> bool {
            false
        }
    }

    /// Events no sink wants are not built nor handed over; one sink that wants them is enough.
    #[test]
    fn events_go_only_to_sinks_that_want_them() {
        let refusing = Arc::new(Refusing(AtomicUsize::new(0)));
        let memory = Arc::new(MemorySink::new());
        let model = || Arc::new(ScriptedModel::queue("s", vec![ScriptStep::text("x")]));
        let started = || EventKind::Started { model: "s".into() };
        let none = Sinks(vec![refusing.clone()]);
        assert!(!none.wants_events() && !Sinks::default().wants_events());
        Ctx::builder(model())
            .events(Arc::new(none))
            .build()
            .emit(started());
        assert_eq!(refusing.0.load(Ordering::Relaxed), 0);
        let both = Sinks(vec![refusing.clone(), memory.clone()]);
        Ctx::builder(model())
            .events(Arc::new(both))
            .build()
            .emit(started());
        assert_eq!(memory.events().len(), 1);
        assert_eq!(refusing.0.load(Ordering::Relaxed), 1);
    }
}
