//! One run's conversation, turn by turn: offer the tools, call the model (through the steps of
//! [`policy`](super::policy): the budget, the journal, the report), read the
//! answer (a submission, tool calls, or text that holds the output or a call), check an output
//! against the contract (asking for a repair when it fails), and hand the other tool calls to
//! [`fanout`](super::fanout).
//!
//! How the output travels is the spec's [`OutputMode`]; whatever it is, the output is checked
//! against the full contract and repaired the same way. Some turns ask for the output alone
//! ([`Forced`]): the last allowed one, every turn of a spec without tools, and the turn after a
//! repeated tool call or a text answer that held no valid output. With
//! [`require_tool_first`](crate::SpecBuilder::require_tool_first), the first turn of a spec
//! with tools requires a call of one of them instead. A run that keeps repeating calls ends
//! `stalled` ([`repeat`]).

mod repeat;
mod text;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use rust_decimal::Decimal;
use serde_json::Value;

use super::fanout::{run_tool_calls, Prepared};
use super::policy::{call_model, ModelCall};
use super::reserve::{self, Ask, Reserve};
use super::wording::{self, answer_again, no_output};
use super::Rejections;
use super::{Decoded, LoopState, TurnsResult};
use crate::contract::{repair_message, Violation};
use crate::ctx::Ctx;
use crate::events::{EventKind, Forced, TextRead};
use crate::ground::Evidence;
use crate::model::{
    worst_case_at, Arguments, Message, ModelRequest, ModelResponse, PromptCache, Rates,
    ResponseFormat, ToolCall, ToolChoice, ToolDefinition, SUBMIT_TOOL,
};
use crate::outcome::{Failure, Limit};
use crate::spec::core::{with_value, OutputKind, OutputMode, OutputText, SpecCore};
use crate::tool::ToolOutput;

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
                        .map(|c| c.id.len() + c.name.len() + c.arguments.sent_len())
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

/// The conversation of one run: the messages so far, and their size as a provider sees them
/// (with the system prompt and the offered tools), which is what a model call reserves for.
struct Conversation {
    messages: Vec<Message>,
    bytes: usize,
    /// The size of the last turn's two messages.
    last: usize,
}

impl Conversation {
    fn new(spec: &SpecCore, system_bytes: usize, tools_bytes: usize, input: &Value) -> Self {
        // Two messages per turn after the first. Room for four turns: most sub-agent runs are
        // short, and a history allocated for the turn limit would be a large block per run
        // (which makes malloc consolidate its free lists on every child).
        let mut messages = Vec::with_capacity((2 * spec.def.limits.max_turns as usize + 1).min(9));
        // Written into a presized buffer (Display grows its String as it goes); same text.
        messages.push(Message::user(crate::json::to_compact_string(input)));
        let bytes = system_bytes + tools_bytes + message_bytes(&messages[0]);
        Conversation {
            messages,
            bytes,
            last: 0,
        }
    }

    /// Adds the model's turn and the answer to it.
    fn push(&mut self, assistant: Message, answer: Message) {
        self.last = message_bytes(&assistant) + message_bytes(&answer);
        self.bytes += self.last;
        self.messages.push(assistant);
        self.messages.push(answer);
    }

    /// The conversation without its last turn (the model's response and what answered it),
    /// and its size: what an answer call sends when the reserve pays for it only so (see
    /// [`reserve`](super::reserve)).
    fn without_last(&self) -> (&[Message], usize) {
        match self.messages.len() {
            n if n >= 3 => (&self.messages[..n - 2], self.bytes - self.last),
            _ => (&self.messages[..], self.bytes),
        }
    }
}

/// How one run asks for its output, by its mode: built once per run, then each turn is an
/// ordinary one (every tool offered) or one that asks for the output alone.
struct Plan<'s> {
    /// The run's mode; `None` for a text output.
    mode: Option<OutputMode>,
    /// The system prompt: the spec's, and in `prompted` mode the schema after it.
    system: Cow<'s, str>,
    /// The tools of an ordinary turn: the spec's, and the submission tool in the tool modes.
    offered: Vec<ToolDefinition>,
    /// How many of `offered`, from the first, are the spec's own tools.
    own_tools: usize,
    /// The submission tool alone, for a forced turn in the tool modes.
    submit_only: Vec<ToolDefinition>,
    /// The response format of a forced turn in `native` mode (and in `auto` with
    /// [`Levers::native_final`](crate::spec::Levers)).
    format: Option<ResponseFormat>,
    /// Whether a text answer that is one call of an offered tool is taken as that call.
    text_calls: bool,
    /// The prompt-cache setting sent: the spec's, else its host's.
    cache: Option<PromptCache>,
    /// Whether the calls may be cached (that setting, else the model's own, is not off).
    caching: bool,
    /// The model's rates, if priced, and the dearest an input token may be billed at.
    rates: Option<(Rates, Decimal)>,
}

/// What one model call offers and asks for.
struct TurnRequest<'p> {
    tools: &'p [ToolDefinition],
    choice: ToolChoice<'static>,
    format: Option<&'p ResponseFormat>,
    forced: Option<Forced>,
}

impl<'s> Plan<'s> {
    /// The plan for `spec` in `ctx`, and the size of what it offers. A tool the context lacks
    /// ends the run. Definitions are shared, so offering them costs reference counts, not
    /// copies.
    fn new(spec: &'s SpecCore, ctx: &Ctx) -> Result<(Self, usize), Failure> {
        let mode = (spec.output_kind == OutputKind::Json).then_some(spec.def.output_mode);
        let tool_modes = matches!(mode, Some(OutputMode::Auto | OutputMode::Tool));
        let mut offered: Vec<ToolDefinition> = Vec::with_capacity(spec.def.tools.len() + 1);
        let mut bytes = 0;
        // A name may stand for several tools (`mcp__SERVER`: every tool of a server).
        match ctx
            .tools()
            .listed(spec.def.tools.iter().map(String::as_str))
        {
            Ok(entries) => {
                for e in entries {
                    let d = &e.definition;
                    bytes += d.name.len() + d.description.len() + e.schema_bytes;
                    offered.push(d.clone());
                }
            }
            Err(missing) => {
                return Err(Failure::ToolsNotHeld {
                    spec: spec.def.name.clone(),
                    missing,
                })
            }
        }
        let own_tools = offered.len();
        let mut submit_only = Vec::new();
        if let (true, Some(d)) = (tool_modes, &spec.submit_tool) {
            bytes += d.name.len() + d.description.len() + spec.output_schema_bytes;
            offered.push(d.clone());
            submit_only.push(d.clone());
        }
        let native_final = mode == Some(OutputMode::Auto) && spec.def.levers.native_final;
        let format = (mode == Some(OutputMode::Native) || native_final).then(|| {
            bytes += spec.output_schema_bytes;
            ResponseFormat {
                name: spec.name_arc.clone(),
                schema: spec.output.schema().clone(),
            }
        });
        let system = match mode {
            Some(OutputMode::Prompted) => Cow::Owned(wording::prompted_system(
                &spec.def.system,
                &crate::json::to_compact_string(spec.output.schema()),
            )),
            _ => Cow::Borrowed(spec.def.system.as_str()),
        };
        let model = ctx.model();
        let cache = spec.def.prompt_cache.or(ctx.prompt_cache());
        let effective_cache = cache.or(model.prompt_cache());
        let rates = ctx
            .prices()
            .get(model.id())
            .map(|p| (p.rates(), p.dearest_input(effective_cache)));
        Ok((
            Plan {
                mode,
                system,
                offered,
                own_tools,
                submit_only,
                format,
                text_calls: spec.def.levers.text_calls,
                cache,
                caching: effective_cache.is_some_and(|c| c != PromptCache::Off),
                rates,
            },
            bytes,
        ))
    }

    /// The request of a turn: ordinary, or asking for the output alone.
    fn request(&self, forced: Option<Forced>) -> TurnRequest<'_> {
        let Some(forced) = forced else {
            return TurnRequest {
                tools: &self.offered,
                choice: ToolChoice::Auto,
                format: None,
                forced: None,
            };
        };
        if matches!(forced, Forced::FirstTurn | Forced::Ungrounded) {
            // Without the submission: offered with it, a small model submits a guess at once.
            return TurnRequest {
                tools: &self.offered[..self.own_tools],
                choice: ToolChoice::Required,
                format: None,
                forced: Some(forced),
            };
        }
        match self.mode {
            Some(OutputMode::Auto) if self.format.is_some() => TurnRequest {
                tools: &[],
                choice: ToolChoice::Auto,
                format: self.format.as_ref(),
                forced: Some(forced),
            },
            Some(OutputMode::Auto | OutputMode::Tool) => TurnRequest {
                tools: &self.submit_only,
                choice: ToolChoice::Tool(SUBMIT_TOOL),
                format: None,
                forced: Some(forced),
            },
            // The response format, or (prompted, text) no tools: the answer is text.
            _ => TurnRequest {
                tools: &[],
                choice: ToolChoice::Auto,
                format: self.format.as_ref(),
                forced: Some(forced),
            },
        }
    }

    /// The worst case of a call whose prompt is `bytes` long, as the run reserves it.
    fn worst(&self, spec: &SpecCore, bytes: usize) -> Decimal {
        let max_tokens = spec.def.limits.max_tokens_per_turn;
        self.rates.map_or(Decimal::ZERO, |(r, input)| {
            worst_case_at(input, r.output(), bytes as u64, u64::from(max_tokens))
        })
    }

    /// The model call of a turn making `req` over `messages`, whose worst case is `worst`:
    /// the request as it is sent, and what the policy steps need of it (see [`call_model`]).
    // Inlined: its result is moved into the call's future at once, so built in place there.
    #[inline]
    fn call<'a>(
        &'a self,
        spec: &'a SpecCore,
        req: &TurnRequest<'a>,
        messages: &'a [Message],
        worst: Decimal,
        turn: u32,
    ) -> ModelCall<'a> {
        let max_tokens = spec.def.limits.max_tokens_per_turn;
        let mut request = ModelRequest::new(&self.system, messages, req.tools, max_tokens)
            .with_sampling(spec.def.sampling)
            .with_tool_choice(req.choice)
            .with_prompt_cache(self.cache)
            .with_spec(&spec.def.name);
        if let Some(f) = req.format {
            request = request.with_response_format(f);
        }
        if self.text_calls && !req.tools.is_empty() {
            request = request.with_stop(text::TEXT_CALL_STOP);
        }
        ModelCall {
            request,
            worst,
            rates: self.rates.map(|(r, _)| r),
            turn,
            output_mode: self.mode.map(|m| Cow::Borrowed(m.as_str())),
            forced: req.forced,
        }
    }

    /// The mode whose wording a text answer's repair uses: the turn after it asks for the
    /// output alone, in the response format when `auto` sends one there (so it names no
    /// submission tool).
    fn text_answer_mode(&self) -> Option<OutputMode> {
        match self.mode {
            Some(OutputMode::Auto) if self.format.is_some() => Some(OutputMode::Native),
            m => m,
        }
    }

    /// Whether a JSON value in a text answer is taken as the output.
    fn output_in_text(&self) -> bool {
        matches!(
            self.mode,
            Some(OutputMode::Auto | OutputMode::Native | OutputMode::Prompted)
        )
    }
}

/// What an answer was read as, before any check.
enum Reading {
    /// It made tool calls.
    Calls,
    /// Its text is the output (a text output), or holds none.
    Text,
    /// Its text is one call of a tool offered this turn, written as JSON (fenced or not), with
    /// the characters it wrote after the call, dropped.
    TextCall(text::TextCall, bool, usize),
    /// Its text holds a JSON value, to check as the output.
    Output(Value, bool),
    /// Its text holds several JSON blocks.
    Several(usize),
}

impl Reading {
    /// Reads `r`'s text when it made no tool call.
    fn of(r: &ModelResponse, plan: &Plan<'_>, req: &TurnRequest<'_>) -> Reading {
        if !r.tool_calls.is_empty() {
            return Reading::Calls;
        }
        let Some(t) = r.text.as_deref() else {
            return Reading::Text;
        };
        // A first turn's call may still come as text, and as a submission: it is read as what
        // it is.
        let offered = match req.forced {
            Some(Forced::FirstTurn | Forced::Ungrounded) => &plan.offered[..],
            _ => req.tools,
        };
        let call_of_offered = |value: &Value| {
            text::as_text_call(value)
                .filter(|c| plan.text_calls && offered.iter().any(|d| *d.name == *c.name))
        };
        // A call at the start of the text ends the turn: whatever follows it (on a chat template
        // that has the model write the tool's answer next, the answer it imagines) is dropped.
        if let Some((f, dropped)) = text::leading_object(t).filter(|_| plan.text_calls) {
            if let Some(call) = call_of_offered(&f.value) {
                return Reading::TextCall(call, f.fenced, dropped);
            }
        }
        let found = text::json_in_text(t);
        if let Some(call) = found.as_ref().ok().and_then(|f| call_of_offered(&f.value)) {
            let fenced = found.as_ref().is_ok_and(|f| f.fenced);
            return Reading::TextCall(call, fenced, 0);
        }
        match found {
            Ok(found) => {
                if plan.output_in_text() {
                    Reading::Output(found.value, found.fenced)
                } else {
                    Reading::Text
                }
            }
            Err(text::NoJson::Several(n)) if plan.mode.is_some() => Reading::Several(n),
            Err(_) => Reading::Text,
        }
    }

    /// What the trace says the text was read as.
    fn event(&self) -> Option<TextRead> {
        match self {
            Reading::TextCall(c, fenced, dropped) => Some(TextRead::Call {
                tool: Arc::from(c.name.as_str()),
                fenced: *fenced,
                dropped_chars: *dropped,
            }),
            Reading::Output(_, fenced) => Some(TextRead::Output { fenced: *fenced }),
            _ => None,
        }
    }
}

/// An output that failed its contract: where and why, reported, and what the model is told.
struct Rejected {
    /// The violations as one line, for the run's error should no turn repair them.
    summary: Vec<Violation>,
    /// The repair request.
    repair: String,
    /// Whether the output was valid but ungrounded: the next turn then asks for a read.
    ungrounded: bool,
}

/// What a turn's submission (a call of the submission tool) came to.
enum Submission {
    /// There was none.
    None,
    /// It is valid: the run ends with it.
    Accepted(Decoded),
    /// It is invalid: the call at this index is answered with the repair request.
    Rejected(usize, Rejected),
}

/// The judge of one turn's output: the run's spec, context and plan, the turn, and whether
/// the output's compact JSON is kept. It checks an output against the contract and, for a
/// grounded spec, against what the run has read; it reports and counts each rejection.
#[derive(Clone, Copy)]
struct Check<'r, 's> {
    spec: &'r SpecCore,
    ctx: &'r Ctx,
    plan: &'r Plan<'s>,
    turn: u32,
    out: OutputText,
}

impl Check<'_, '_> {
    /// Turns left after this one.
    fn left(&self) -> u32 {
        self.spec.def.limits.max_turns - self.turn
    }

    /// Reports a rejected output (an event with where and why, never the output) and counts it.
    fn reject(&self, tally: &mut Rejections, v: &[Violation], hint: &str) -> Rejected {
        tally.repairs += 1;
        self.ctx.emit(EventKind::OutputRejected {
            turn: self.turn,
            violations: v.to_vec(),
        });
        Rejected {
            summary: v.to_vec(),
            repair: repair_message(v, hint),
            ungrounded: false,
        }
    }

    /// Checks a valid output's grounded values against the run's evidence: the rejection, if
    /// some value is backed by nothing the run read. A spec that grounds nothing keeps no
    /// evidence, and this is `None` at once.
    fn ungrounded(
        &self,
        tally: &mut Rejections,
        evidence: Option<&Evidence>,
        v: &Value,
        hint: impl FnOnce() -> String,
    ) -> Option<Rejected> {
        let (g, ev) = (self.spec.grounding.as_deref()?, evidence?);
        let Err(u) = g.check(v, ev) else {
            // Accepted: a parent that reads it gets the grounded values with their sources.
            if self.out == OutputText::Write {
                tally.carried = Some(g.carried(v, ev));
            }
            return None;
        };
        let violations: Vec<Violation> = u.iter().map(|x| x.violation.clone()).collect();
        tally.ungrounded += 1;
        self.ctx.emit(EventKind::OutputUngrounded {
            turn: self.turn,
            violations: violations.clone(),
        });
        Some(Rejected {
            summary: violations,
            repair: crate::ground::repair_message(&u, &hint()),
            ungrounded: true,
        })
    }

    /// An acting run's changes checked as part of an accepted output (captured, within
    /// `writes` and the size limits, its `checks` passing): the rejection, if they fail. `None`
    /// at once for a run without a working copy of its own.
    async fn changes(&self, tally: &mut Rejections) -> Option<Rejected> {
        let v = crate::act::run::check_submission(self.ctx).await;
        if v.is_empty() {
            return None;
        }
        Some(self.reject(tally, &v, &wording::submit_again(self.left())))
    }

    /// Whether the turn after an ungrounded answer asks for a read: the spec has tools of its
    /// own, and a turn is left after that one to answer in.
    fn reads_next(&self) -> bool {
        self.plan.own_tools > 0 && self.turn + 1 < self.spec.def.limits.max_turns
    }

    /// How a repair of ungrounded values ends: read first (the next turn requires a call of one
    /// of the spec's own tools, when it has any), then answer with the values as written.
    fn read_then_answer(&self, answer: &str) -> String {
        let plan = self.plan;
        let own: Vec<String> = plan.offered[..plan.own_tools]
            .iter()
            .map(|d| format!("`{}`", d.name))
            .collect();
        // With one turn left there is no turn to read in: that turn asks for the answer.
        if own.is_empty() || self.left() <= 1 {
            return answer.to_owned();
        }
        wording::read_then_answer(&own, self.left())
    }

    /// A text answer checked as the output: the text itself (a text output), or the JSON
    /// value it held. A rejected one is returned to be answered.
    fn text_output(
        &self,
        tally: &mut Rejections,
        v: Value,
        evidence: Option<&Evidence>,
    ) -> Result<Decoded, Rejected> {
        let mode = self.plan.text_answer_mode();
        match self.spec.accept_output(&v, self.out) {
            Ok((t, d)) => match self.ungrounded(tally, evidence, &v, || {
                self.read_then_answer(&answer_again(mode))
            }) {
                None => Ok((t, with_value(d, || v))),
                Some(r) => Err(r),
            },
            Err(viol) => {
                let mut hint = answer_again(mode);
                // A wrapper around the answer fails the schema as a whole; say what it is, or
                // the model sends the same wrapper again.
                if let Some(name) = text::wrapper_name(&v) {
                    hint = wording::wrapped_text(name, &hint);
                }
                Err(self.reject(tally, &viol, &hint))
            }
        }
    }

    /// Checks the submission among `calls`, if any. Arguments sent as text, as providers send
    /// them, are checked on the text itself, so a typed output is decoded from it without ever
    /// becoming a `Value`.
    async fn submission(
        &self,
        tally: &mut Rejections,
        calls: &mut Vec<ToolCall>,
        evidence: Option<&Evidence>,
    ) -> Submission {
        let spec = self.spec;
        let Some(i) = calls.iter().position(|c| c.name == SUBMIT_TOOL) else {
            return Submission::None;
        };
        let checked = match &calls[i].arguments {
            Arguments::Text(s) => spec.accept_output_json(s, self.out).map(|a| (a, false)),
            Arguments::Value(v) => spec.accept_output(v, self.out).map(|a| (a, true)),
        };
        let again = || wording::submit_again(self.left());
        match checked {
            Ok(((t, d), from_value)) => {
                if let (Some(_), Some(_)) = (&spec.grounding, evidence) {
                    // Grounding reads the value; text that passed the schema is valid JSON.
                    let parsed;
                    let v = match &calls[i].arguments {
                        Arguments::Value(v) => Some(v),
                        Arguments::Text(s) => {
                            parsed = serde_json::from_str::<Value>(s).ok();
                            parsed.as_ref()
                        }
                    };
                    let Some(v) = v else {
                        // Valid text that cannot be read back (not expected): refused, not
                        // waved through unchecked.
                        let viol = [Violation {
                            path: String::new(),
                            message: wording::UNREADABLE_FOR_GROUNDING.into(),
                        }];
                        return Submission::Rejected(i, self.reject(tally, &viol, &again()));
                    };
                    let hint = || self.read_then_answer(&again());
                    if let Some(r) = self.ungrounded(tally, evidence, v, hint) {
                        return Submission::Rejected(i, r);
                    }
                }
                // An acting run's changes are part of its answer: checked before it ends.
                if let Some(r) = self.changes(tally).await {
                    return Submission::Rejected(i, r);
                }
                // (A grounded spec ran them first: it judges such a submission after them.)
                if calls.len() > 1 && evidence.is_none() {
                    tracing::debug!(
                        run_id = self.ctx.run_id(),
                        "tool calls made beside a valid submission were not run"
                    );
                }
                // The run ends here, so the calls are not kept: an output the provider sent as
                // an object is moved out, not copied.
                let d = if from_value {
                    with_value(d, || calls.swap_remove(i).arguments.into_value())
                } else {
                    d
                };
                Submission::Accepted((t, d))
            }
            Err(viol) => {
                let mut hint = again();
                if let Ok(v) = calls[i].arguments.parse() {
                    if let Some(name) = text::wrapper_name(&v) {
                        hint = wording::wrapped_submission(name, &hint);
                    }
                }
                Submission::Rejected(i, self.reject(tally, &viol, &hint))
            }
        }
    }
}

/// A model's answer as a turn acts on it: text that is (or was to hold) the output, or tool
/// calls to run.
enum Answer {
    /// Text, and the output it holds, or `Err` with the count of JSON blocks when it held
    /// several (`None`: it held none).
    Text {
        text: Option<String>,
        value: Result<Value, Option<usize>>,
    },
    /// Tool calls (a call written as text among them), and any text beside them.
    Calls {
        text: Option<String>,
        calls: Vec<ToolCall>,
    },
}

impl Answer {
    /// `response`, as `reading` read it in `turn`.
    fn of(response: ModelResponse, reading: Reading, plan: &Plan<'_>, turn: u32) -> Answer {
        let ModelResponse {
            text,
            mut tool_calls,
            ..
        } = response;
        let value = match reading {
            Reading::Calls => {
                return Answer::Calls {
                    text,
                    calls: tool_calls,
                }
            }
            Reading::TextCall(call, _, _) => {
                // Kept as the call it is: the history shows the model a real call and its
                // result, in whatever form the server's template gives calls.
                tool_calls.push(ToolCall {
                    id: format!("text-call-{turn}"),
                    name: call.name,
                    arguments: Arguments::Value(call.arguments),
                });
                return Answer::Calls {
                    text: None,
                    calls: tool_calls,
                };
            }
            Reading::Output(v, _) => Ok(v),
            Reading::Several(n) => Err(Some(n)),
            Reading::Text if plan.mode.is_none() => {
                Ok(Value::String(text.clone().unwrap_or_default()))
            }
            Reading::Text => Err(None),
        };
        Answer::Text { text, value }
    }
}

/// What a run carries from one turn to the next.
struct Progress {
    convo: Conversation,
    /// What the run has read, kept only when its output grounds a value.
    evidence: Option<Evidence>,
    /// The violations of the last rejected output: the run's failure, should no turn repair
    /// them.
    last_invalid: Option<Vec<Violation>>,
    /// The tool calls so far, to tell a repeated one.
    calls: repeat::Calls,
    /// Why the next turn asks for the output alone, from what this one did.
    force_next: Option<Forced>,
}

impl Progress {
    /// How the run ends on `f` while an answer that failed its checks waits for its repair:
    /// with the reserve `on`, on those violations when it is the money or the time that ran
    /// out (a stop, here, is the run's time: `run_until_stopped` keeps a cancellation one), so
    /// that it never ends as if it had no answer at all; otherwise on `f`.
    fn stopped(&mut self, f: Failure, on: bool) -> Failure {
        match f {
            Failure::Budget { .. } | Failure::Timeout(_) | Failure::Cancelled if on => {
                match self.last_invalid.take() {
                    Some(v) => Failure::InvalidOutput(v),
                    None => f,
                }
            }
            f => f,
        }
    }

    /// Why `turn` asks for the output alone, if it does (what the turn before asked for is
    /// used up here).
    fn forced(&mut self, spec: &SpecCore, plan: &Plan<'_>, turn: u32) -> Option<Forced> {
        let next = self.force_next.take();
        let max_turns = spec.def.limits.max_turns;
        let first_call = turn == 1 && spec.def.require_tool_first && plan.own_tools > 0;
        if !spec.def.levers.forced_output {
            first_call
                .then_some(Forced::FirstTurn)
                .or(next.filter(|f| *f == Forced::Ungrounded && turn < max_turns))
        } else if spec.def.tools.is_empty() {
            Some(Forced::NoTools)
        } else if turn == max_turns {
            Some(Forced::LastTurn)
        } else if first_call {
            Some(Forced::FirstTurn)
        } else {
            next
        }
    }

    /// A text answer: the run's output, or the conversation told what to send instead (and,
    /// for a JSON output, the next turn asks for it alone, or for a read first).
    async fn text_answer(
        &mut self,
        check: &Check<'_, '_>,
        tally: &mut Rejections,
        text: Option<String>,
        value: Result<Value, Option<usize>>,
    ) -> Option<Decoded> {
        let plan = check.plan;
        let mut read_first = false;
        let repair = match value {
            Ok(v) => match check.text_output(tally, v, self.evidence.as_ref()) {
                Ok(done) => match check.changes(tally).await {
                    None => return Some(done),
                    Some(r) => {
                        self.last_invalid = Some(r.summary);
                        r.repair
                    }
                },
                Err(r) => {
                    read_first = r.ungrounded && check.reads_next();
                    self.last_invalid = Some(r.summary);
                    r.repair
                }
            },
            Err(several) => no_output(plan.text_answer_mode(), several),
        };
        if read_first {
            self.force_next = Some(Forced::Ungrounded);
        } else if plan.mode.is_some() {
            self.force_next = Some(Forced::TextAnswer);
        }
        let assistant = Message::Assistant {
            text,
            tool_calls: Vec::new(),
        };
        self.convo.push(assistant, Message::user(repair));
        None
    }

    /// The turn's submission judged against the evidence as it stands: `Err` with the output
    /// that ends the run, or the index and repair request of a rejected one (an ungrounded
    /// one makes the next turn ask for a read), or nothing.
    async fn judge(
        &mut self,
        check: &Check<'_, '_>,
        tally: &mut Rejections,
        calls: &mut Vec<ToolCall>,
    ) -> Result<Option<(usize, String)>, Decoded> {
        match check.submission(tally, calls, self.evidence.as_ref()).await {
            Submission::Accepted(done) => Err(done),
            Submission::Rejected(i, r) => {
                if r.ungrounded && check.reads_next() {
                    self.force_next = Some(Forced::Ungrounded);
                }
                self.last_invalid = Some(r.summary);
                Ok(Some((i, r.repair)))
            }
            Submission::None => Ok(None),
        }
    }

    /// A turn of tool calls: the submission judged, the other calls run, their results added
    /// to the conversation. The run's output if a submission was accepted; a run that keeps
    /// repeating its calls ends stalled.
    async fn tool_calls(
        &mut self,
        check: &Check<'_, '_>,
        tally: &mut Rejections,
        req: &TurnRequest<'_>,
        text: Option<String>,
        mut calls: Vec<ToolCall>,
    ) -> Result<Option<Decoded>, Failure> {
        let Check {
            spec, ctx, turn, ..
        } = *check;
        // A grounded submission made beside other calls is judged after they run: what they
        // return is read in this run, so a model may read and answer in one response.
        let deferred = if self.evidence.is_some() && calls.len() > 1 {
            calls.iter().position(|c| c.name == SUBMIT_TOOL)
        } else {
            None
        };
        let rejected = match deferred {
            Some(i) => Some((i, ToolOutput::error("checked after the other calls"))),
            None => match self.judge(check, tally, &mut calls).await {
                Err(done) => return Ok(Some(done)),
                Ok(repair) => repair.map(|(i, text)| (i, ToolOutput::error(text))),
            },
        };
        let (prepared, repeated) = self.prepare(check, req, &calls, rejected);
        let (mut results, note) =
            run_tool_calls(spec, &calls, prepared, ctx, turn, self.evidence.as_mut()).await;
        if let Some(i) = deferred {
            match self.judge(check, tally, &mut calls).await {
                Err(done) => return Ok(Some(done)),
                Ok(Some((_, text))) => results[i].content = text,
                Ok(None) => {}
            }
        }
        for &(i, first) in &repeated {
            results[i].content.push_str(&wording::repeated_note(first));
        }
        let assistant = Message::Assistant {
            text,
            tool_calls: calls,
        };
        self.convo
            .push(assistant, Message::ToolResults { results, note });
        if !repeated.is_empty() {
            if self.calls.repeated_in_turn() {
                return Err(Failure::Stalled {
                    repeating_turns: self.calls.repeating_turns,
                    turn,
                    max_turns: spec.def.limits.max_turns,
                });
            }
            self.force_next = Some(Forced::RepeatedCall);
        }
        Ok(None)
    }

    /// The calls as the tool loop takes them: the rejected submission answered with its
    /// repair request, a call of a tool this turn did not offer (a forced turn offers the
    /// output alone) answered without running, the rest with their arguments parsed; and the
    /// calls that repeat one of an earlier turn, with that turn.
    fn prepare(
        &mut self,
        check: &Check<'_, '_>,
        req: &TurnRequest<'_>,
        calls: &[ToolCall],
        mut rejected: Option<(usize, ToolOutput)>,
    ) -> (Vec<Prepared>, Vec<(usize, u32)>) {
        let output_alone = req
            .forced
            .is_some_and(|f| !matches!(f, Forced::FirstTurn | Forced::Ungrounded));
        let mut repeated: Vec<(usize, u32)> = Vec::new();
        let mut prepared = Vec::with_capacity(calls.len());
        for (i, c) in calls.iter().enumerate() {
            if let Some((_, o)) = rejected.take_if(|(r, _)| *r == i) {
                prepared.push(Prepared::Answered(o));
                continue;
            }
            if output_alone && !req.tools.iter().any(|d| *d.name == *c.name) {
                prepared.push(Prepared::Answered(ToolOutput::error(
                    wording::not_run_answer_now(check.plan.text_answer_mode()),
                )));
                continue;
            }
            // The history keeps the call as sent, so the tool gets its own copy of a value.
            let args = c.arguments.parse().map(Cow::into_owned);
            if let Ok(args) = &args {
                if let Some(first) = self.calls.record(&c.name, args, check.turn) {
                    repeated.push((i, first));
                }
            }
            prepared.push(Prepared::Args(args));
        }
        (prepared, repeated)
    }
}

/// The run's turns: each a model call, then the output checked (and a repair asked for) or the
/// tool calls run, until an output is accepted, the turns run out, the run stalls or it stops.
///
/// `times` are the run's start and end and the first estimate of a model call's time, of
/// which its [`Reserve`] is made here. (Made by the caller and moved in, it and `input` would
/// take their room in this future twice: as its argument and as its local.)
pub(super) async fn turns(
    spec: &SpecCore,
    input: &Value,
    ctx: &Ctx,
    out: OutputText,
    st: &mut LoopState,
    times: (Instant, Instant, Duration),
) -> TurnsResult {
    let (plan, tools_bytes) = Plan::new(spec, ctx)?;
    let (start, end, slowest) = times;
    let mut reserve = Reserve::new(spec, ctx, (start, end), slowest);
    let mut progress = Progress {
        convo: Conversation::new(spec, plan.system.len(), tools_bytes, input),
        evidence: spec.grounding.as_ref().map(|g| {
            let mut ev = Evidence::for_run(g, spec.def.levers.grounding_pointers);
            ev.add_input(input);
            ev
        }),
        last_invalid: None,
        calls: repeat::Calls::default(),
        force_next: None,
    };
    let on = reserve.is_on();
    for turn in 1..=spec.def.limits.max_turns {
        // No model call starts once the run is stopping.
        if ctx.cancellation().is_cancelled() {
            return Err(progress.stopped(Failure::Cancelled, on));
        }
        let forced = progress.forced(spec, &plan, turn);
        // The share step comes before the reservation (see `policy`), and is held until the
        // call is over.
        // (Only a run's first call may wait: no future is made for the others.)
        let _opener = if st.turns == 0 && plan.caching {
            match super::policy::share(ctx).await {
                Ok(opener) => opener,
                Err(f) => return Err(progress.stopped(f, on)),
            }
        } else {
            None
        };
        let bytes = progress.convo.bytes;
        let ask = Ask {
            call: plan.worst(spec, bytes),
            after: || plan.worst(spec, bytes.saturating_add(reserve::growth(spec))),
            without_last: || plan.worst(spec, progress.convo.without_last().1),
        };
        let admitted = match reserve.admit_now(ctx, forced, ask.call) {
            Some(admitted) => admitted,
            None => match reserve.admit(ctx, forced, turn, st.turns > 0, ask).await {
                Ok(a) => a,
                Err(f) => return Err(progress.stopped(f, on)),
            },
        };
        let req = plan.request(admitted.forced);
        let messages = if admitted.without_last {
            progress.convo.without_last().0
        } else {
            &progress.convo.messages[..]
        };
        let call = plan.call(spec, &req, messages, admitted.worst, turn);
        let reserved = (admitted.reservation, reserve.admitted_at());
        let reserve = &mut reserve;
        let answered = call_model(ctx, call, reserved, st, |r, at| {
            reserve.answered(ctx, at);
            let reading = Reading::of(r, &plan, &req);
            let read_as = reading.event();
            (reading, read_as)
        })
        .await;
        let (response, reading) = match answered {
            Ok(answered) => answered,
            Err(f) => return Err(progress.stopped(f, on)),
        };
        // A last turn that repairs an answer the model already gave did not cut the run
        // short: it had finished its work.
        let repair = forced == Some(Forced::LastTurn) && progress.last_invalid.is_some();
        st.cut_short = reserve
            .cut_short()
            .filter(|l| !(repair && *l == Limit::Turns));
        let check = Check {
            spec,
            ctx,
            plan: &plan,
            turn,
            out,
        };
        let tally = &mut st.rejections;
        let done = match Answer::of(response, reading, &plan, turn) {
            Answer::Text { text, value } => {
                let done = progress.text_answer(&check, tally, text, value).await;
                reserve.checked();
                done
            }
            Answer::Calls { text, calls } => {
                let submits_alone = calls.iter().all(|c| c.name == SUBMIT_TOOL);
                let done = progress
                    .tool_calls(&check, tally, &req, text, calls)
                    .await?;
                if submits_alone {
                    reserve.checked();
                }
                done
            }
        };
        if let Some(done) = done {
            return Ok(done);
        }
    }
    Err(match progress.last_invalid.take() {
        Some(v) => Failure::InvalidOutput(v),
        None => Failure::MaxTurns {
            turns: spec.def.limits.max_turns,
        },
    })
}
