//! The tool calls of one model response: sub-agent calls concurrently under the fan-out
//! limit, ordinary tools in call order, every call settled, and what one turn may add to the
//! conversation bounded.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;

use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tracing::instrument::Instrumented;
use tracing::{Instrument, Span};

use super::policy::call_tool;
use super::wording;
use crate::contract::Contract;
use crate::ctx::{Ctx, SharedPrefix};
use crate::events::EventKind;
use crate::ground::Evidence;
use crate::model::{ToolCall, ToolResult, SUBMIT_TOOL};
use crate::spec::core::{OutputKind, SpecCore};
use crate::tool::{Tool, ToolKind, ToolOutput};

/// Where one tool call of a response stands. One slot per call, in call order, so a turn
/// of ordinary tool calls needs no list beyond this one and the results.
enum Slot {
    /// Its output: answered without running (the submission's repair request, an unknown
    /// tool, unparsable arguments), or run.
    Done(ToolOutput),
    /// An ordinary tool, to run in call order.
    Run(Ready),
    /// A sub-agent call, running as a task.
    Spawned,
    /// The output of a call that ran: what counts towards the turn's result size.
    Ran(ToolOutput),
}

/// One call, ready to run: the tool, its name as called, its input contract and arguments.
struct Ready {
    tool: Arc<dyn Tool>,
    name: Arc<str>,
    contract: Contract,
    args: Value,
}

impl Ready {
    /// The call through the tool-call policy ([`call_tool`]), inside its span: the one place a
    /// turn's calls, ordinary or sub-agent, enter it. The call takes the arguments; the slot
    /// keeps the tool, which the call borrows.
    fn run<'a>(
        &'a mut self,
        ctx: &'a Ctx,
        turn: u32,
        span: Span,
    ) -> Instrumented<impl Future<Output = ToolOutput> + 'a> {
        let args = std::mem::take(&mut self.args);
        call_tool(
            &*self.tool,
            self.name.clone(),
            &self.contract,
            args,
            ctx,
            turn,
        )
        .instrument(span)
    }
}

/// One call of a response as the turn hands it over: answered without running, or its
/// arguments, parsed once for both the repeated-call check and the tool.
pub(super) enum Prepared {
    /// A rejected submission's repair request, a tool the turn did not offer.
    Answered(ToolOutput),
    /// The arguments as a value, or the message for text that is not JSON.
    Args(Result<Value, String>),
}

/// The sub-agent calls of one response, running as tasks, each with its call's index; made
/// on the first sub-agent call, so a turn of ordinary tools pays for none of it.
#[derive(Default)]
struct Spawned {
    set: JoinSet<ToolOutput>,
    index: HashMap<tokio::task::Id, usize>,
}

impl Spawned {
    /// Starts call `i` as a task that waits for one of `permits`, unless the run stops first.
    fn spawn(
        &mut self,
        i: usize,
        mut ready: Ready,
        ctx: Ctx,
        permits: Arc<Semaphore>,
        turn: u32,
        span: Span,
    ) {
        let handle = self.set.spawn(async move {
            // The semaphore is never closed, so acquiring only waits; a call still waiting
            // when the run stops never starts.
            let _permit = tokio::select! {
                biased;
                _ = ctx.cancellation().cancelled() => return not_started(),
                p = permits.acquire_owned() => p,
            };
            // Not raced against the cancellation: a sub-agent stops on its own token (a
            // child of this run's) and is awaited until it has.
            ready.run(&ctx, turn, span).await
        });
        self.index.insert(handle.id(), i);
    }

    /// Every task's output with its call's index, as they finish.
    async fn join(mut self) -> Vec<(usize, ToolOutput)> {
        let mut out = Vec::with_capacity(self.index.len());
        while let Some(joined) = self.set.join_next_with_id().await {
            match joined {
                Ok((id, output)) => {
                    if let Some(&i) = self.index.get(&id) {
                        out.push((i, output));
                    }
                }
                Err(e) => {
                    if let Some(&i) = self.index.get(&e.id()) {
                        let lost = wording::sub_agent_lost(e.is_panic());
                        out.push((i, ToolOutput::error(lost)));
                    }
                }
            }
        }
        out
    }
}

/// Runs the tool calls of one response: sub-agent calls concurrently (at most
/// `ctx.fanout_limit()` at a time), ordinary tools one after another, both groups at once.
/// A call prepared as answered gets that output and does not run. Every call settles;
/// results come back in call order.
pub(super) async fn run_tool_calls(
    spec: &SpecCore,
    calls: &[ToolCall],
    prepared: Vec<Prepared>,
    ctx: &Ctx,
    turn: u32,
    evidence: Option<&mut Evidence>,
) -> (Vec<ToolResult>, Option<String>) {
    let (mut slots, spawned) = dispatch(spec, calls, prepared, ctx, turn);
    let n_sub = spawned.as_ref().map_or(0, |s| s.index.len());
    let max_chars = spec.def.limits.max_tool_result_chars_per_turn;
    let spawned = async {
        match spawned {
            Some(s) => s.join().await,
            None => Vec::new(),
        }
    };
    let ((), finished) = tokio::join!(
        run_in_order(&mut slots, calls, ctx, turn, max_chars),
        spawned
    );
    // Each spawned call reports at most once, so the calls that failed are those that did not
    // report a success.
    let mut failed = n_sub;
    for (i, o) in finished {
        if !o.is_error {
            failed -= 1;
        }
        slots[i] = Slot::Ran(o);
    }
    bound_results(&mut slots, max_chars);
    let results = results(calls, slots, evidence);
    let note = (failed > 0).then(|| wording::sub_agents_failed(failed, n_sub));
    (results, note)
}

/// A slot per call: answered (prepared so, past the turn's call limit, an unknown tool,
/// arguments that are not JSON), an ordinary tool ready to run, or a sub-agent call spawned
/// under the fan-out limit.
fn dispatch(
    spec: &SpecCore,
    calls: &[ToolCall],
    prepared: Vec<Prepared>,
    ctx: &Ctx,
    turn: u32,
) -> (Vec<Slot>, Option<Spawned>) {
    let max_calls = spec.def.limits.max_tool_calls_per_turn;
    let mut slots: Vec<Slot> = Vec::with_capacity(calls.len());
    let mut spawned: Option<Spawned> = None;
    let mut permits: Option<Arc<Semaphore>> = None;
    let shares = sibling_shares(calls, ctx);
    let mut taken = 0;
    for (i, (c, prepared)) in calls.iter().zip(prepared).enumerate() {
        let args = match prepared {
            Prepared::Answered(o) => {
                slots.push(Slot::Done(o));
                continue;
            }
            Prepared::Args(args) => args,
        };
        if taken == max_calls {
            slots.push(Slot::Done(ToolOutput::error(wording::over_call_limit(
                max_calls,
            ))));
            continue;
        }
        taken += 1;
        let Some(entry) = ctx.offered_tool(&c.name) else {
            let mut offered: Vec<&str> = spec.def.tools.iter().map(String::as_str).collect();
            if spec.output_kind == OutputKind::Json {
                offered.push(SUBMIT_TOOL);
            }
            slots.push(Slot::Done(ToolOutput::error(wording::unknown_tool(
                &c.name, &offered,
            ))));
            // A failed call in the trace and the run tree: a misspelt sub-agent name is
            // otherwise seen only by the model.
            ctx.emit(EventKind::ToolCall {
                turn,
                tool: crate::events::shown_tool_name(&c.name),
                is_error: true,
                duration_ms: 0.0,
                unknown: true,
            });
            continue;
        };
        let args = match args {
            Ok(a) => a,
            Err(msg) => {
                slots.push(Slot::Done(ToolOutput::error(msg)));
                continue;
            }
        };
        let ready = Ready {
            tool: entry.tool.clone(),
            name: entry.definition.name.clone(),
            contract: entry.input.clone(),
            args,
        };
        match entry.tool.kind() {
            ToolKind::Function => slots.push(Slot::Run(ready)),
            ToolKind::SubAgent => {
                let permits = permits
                    .get_or_insert_with(|| Arc::new(Semaphore::new(ctx.fanout_limit())))
                    .clone();
                let ctx = match shares.get(c.name.as_str()) {
                    Some(share) => ctx.with_siblings(share.clone()),
                    None => ctx.clone(),
                };
                let span = crate::telemetry::tool_span(c);
                let s = spawned.get_or_insert_with(Default::default);
                s.spawn(i, ready, ctx, permits, turn, span);
                slots.push(Slot::Spawned);
            }
        }
    }
    (slots, spawned)
}

/// One share per spec called more than once among `calls`, when siblings share their prefix
/// ([`Ctx::shares_fanout_prefix`]).
fn sibling_shares<'c>(calls: &'c [ToolCall], ctx: &Ctx) -> HashMap<&'c str, Arc<SharedPrefix>> {
    let mut shares = HashMap::new();
    if calls.len() < 2 || !ctx.shares_fanout_prefix() {
        return shares;
    }
    let mut seen = HashSet::new();
    for c in calls {
        let sub_agent = ctx
            .tools()
            .get(&c.name)
            .is_some_and(|e| e.tool.kind() == ToolKind::SubAgent);
        // The second call of a spec makes the first and itself siblings.
        if sub_agent && !seen.insert(c.name.as_str()) {
            shares
                .entry(c.name.as_str())
                .or_insert_with(SharedPrefix::new);
        }
    }
    shares
}

/// Runs the ordinary tools among `slots`, one after another in call order. Once their
/// results alone pass the turn's character limit, so do all results up to there, so the later
/// tools' results would be withheld: they do not run.
async fn run_in_order(
    slots: &mut [Slot],
    calls: &[ToolCall],
    ctx: &Ctx,
    turn: u32,
    max_chars: usize,
) {
    let mut chars = ResultChars::default();
    for (slot, c) in slots.iter_mut().zip(calls) {
        let Slot::Run(ready) = slot else {
            continue;
        };
        if chars.full {
            *slot = Slot::Done(ToolOutput::error(wording::over_chars_limit(max_chars)));
            continue;
        }
        // An ordinary tool spends no budget, so one in progress when the run stops is
        // dropped, and the rest do not start.
        let output = {
            let call = ready.run(ctx, turn, crate::telemetry::tool_span(c));
            let mut call = std::pin::pin!(ctx.unless_cancelled(call));
            // Polled once first: a tool that answers at once (most do) needs no timer. One
            // that does not is stopped when its run must answer by (published by a run that
            // keeps an answer reserve), so that the time left is the answer's; sub-agents end
            // by then on their own, with an answer.
            let first = std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
            match first {
                Poll::Ready(output) => output,
                Poll::Pending => match ctx.clocks().0.read() {
                    None => call.await,
                    // Boxed: a timer is large, and only a tool that did not answer at once
                    // needs one (a turn's future would otherwise hold room for it).
                    Some((by, _)) => match Box::pin(tokio::time::timeout_at(by, call)).await {
                        Ok(output) => output,
                        Err(_) => Some(ToolOutput::error(wording::STOPPED_FOR_ANSWER)),
                    },
                },
            }
        };
        let output = output.unwrap_or_else(not_started);
        chars.admit(&output, max_chars);
        *slot = Slot::Ran(output);
    }
}

/// The results in call order, as the model will read them; each that is not an error added
/// to a grounded run's evidence.
fn results(
    calls: &[ToolCall],
    slots: Vec<Slot>,
    mut evidence: Option<&mut Evidence>,
) -> Vec<ToolResult> {
    calls
        .iter()
        .zip(slots)
        .map(|(c, slot)| {
            let o = match slot {
                Slot::Done(o) | Slot::Ran(o) => o,
                Slot::Run(_) | Slot::Spawned => ToolOutput::error("the call did not run"),
            };
            // What the model reads of a result is evidence for a grounded output; an error
            // (a failed call, a withheld result) is the tool's or the loop's own words.
            if let Some(ev) = evidence.as_deref_mut().filter(|_| !o.is_error) {
                ev.add_result(&o.content, o.structured.as_ref(), o.provenance());
            }
            ToolResult {
                call_id: c.id.clone(),
                content: o.content,
                is_error: o.is_error,
            }
        })
        .collect()
}

/// Characters the results of one turn have added so far, in call order.
#[derive(Default)]
struct ResultChars {
    used: usize,
    /// A result did not fit: every later one is withheld too, so the limit is a cut in call
    /// order, not a packing of whatever fits.
    full: bool,
}

impl ResultChars {
    /// Counts `o` if it fits under `max`; whether it did.
    fn admit(&mut self, o: &ToolOutput, max: usize) -> bool {
        let n = o.content.chars().count();
        if !self.full && self.used.saturating_add(n) <= max {
            self.used += n;
            true
        } else {
            self.full = true;
            false
        }
    }
}

/// Replaces the output of each call that ran, past the turn's character limit in call order,
/// with an error saying so: what one response's calls add to the next request is bounded.
fn bound_results(slots: &mut [Slot], max_chars: usize) {
    // A character is at least one byte, so results whose bytes fit fit: the usual turn, whose
    // results are far under the limit, counts no characters.
    let bytes = slots
        .iter()
        .map(|s| match s {
            Slot::Ran(o) => o.content.len(),
            _ => 0,
        })
        .fold(0, usize::saturating_add);
    if bytes <= max_chars {
        return;
    }
    let mut chars = ResultChars::default();
    for slot in slots {
        if let Slot::Ran(o) = slot {
            if !chars.admit(o, max_chars) {
                let n = o.content.chars().count();
                *o = ToolOutput::error(wording::result_withheld(n, max_chars));
            }
        }
    }
}

/// The result of a tool call the run stopped before it finished.
fn not_started() -> ToolOutput {
    ToolOutput::error(wording::NOT_FINISHED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(text: &str) -> Slot {
        Slot::Ran(ToolOutput::text(text))
    }

    fn withheld(slots: &[Slot]) -> Vec<bool> {
        slots
            .iter()
            .map(|s| matches!(s, Slot::Ran(o) if o.is_error))
            .collect()
    }

    #[test]
    fn the_result_limit_counts_characters_not_bytes() {
        // 4 characters each, 21 bytes in all: their bytes pass a limit of 10 that their
        // characters (8) do not.
        let mut slots = vec![ran("ééé€"), ran("€€€€")];
        bound_results(&mut slots, 10);
        assert_eq!(withheld(&slots), [false, false]);
        // Characters past the limit: the first that does not fit is withheld.
        let mut slots = vec![ran("ééé€"), ran("€€€€"), ran("ab")];
        bound_results(&mut slots, 9);
        assert_eq!(withheld(&slots), [false, false, true]);
        // Under the limit in bytes: nothing is withheld.
        let mut slots = vec![ran("abc"), Slot::Done(ToolOutput::text("x")), ran("de")];
        bound_results(&mut slots, 5);
        assert_eq!(withheld(&slots), [false, false, false]);
    }
}
