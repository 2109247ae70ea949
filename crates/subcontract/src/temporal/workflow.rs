//! The batch workflow: the ledger of one batch. It pulls inputs from the starter, reserves
//! each child's cap before scheduling its run on a worker, settles to the child's actual cost
//! when its report comes back, hands finished lines to the starter to write, and continues as
//! new (after draining its children) before its history grows past what Temporal keeps well.
//!
//! Workflow code is replayed: everything here is a function of the history (no clock, no I/O,
//! no randomness). Activities in flight are polled in a fixed order with the workflow's own
//! waker ([`Running`]), so which one is taken next depends only on the history, and every wake
//! comes from the SDK (a combinator with wakers of its own, such as `FuturesUnordered`, is
//! refused by the SDK's nondeterminism detector).

use std::time::Duration;

use std::task::Poll;

use futures::future::LocalBoxFuture;
use rust_decimal::Decimal;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ActivityExecutionError, ActivityOptions, ApplicationFailure, ContinueAsNewOptions,
    WorkflowContext, WorkflowContextView, WorkflowResult,
};

use super::ledger::Admission;
use super::messages::{
    BatchOutcome, Carry, Delivery, LedgerView, ReadReply, ReadRequest, RunReport, RunRequest,
};
use super::starter::StarterActivities;
use super::worker::SubAgentActivities;
use crate::batch::ResultLine;

/// The default of [`BatchParams::history_events`](super::BatchParams): Temporal warns at 10,240
/// events and refuses past 51,200; one child costs about six (its activity's three and its
/// share of workflow tasks). A run also continues as new when Temporal suggests it.
pub const DEFAULT_HISTORY_EVENTS: u32 = 9_000;
/// Inputs read per `read_inputs` (at most), and their bytes (about): well inside Temporal's
/// 2 MB payload limit.
const READ_MAX_ITEMS: u32 = 512;
const READ_MAX_BYTES: u64 = 512 << 10;
/// Result lines per `write_results` (at most), and their bytes (about).
const WRITE_MAX_LINES: usize = 512;
const WRITE_MAX_BYTES: usize = 512 << 10;
/// Input bytes scheduled per workflow activation (at most, after the first input).
const ACTIVATION_BYTES: usize = 1 << 20;
/// Payload bytes per workflow run, those of the children in flight included, before it
/// continues as new (Temporal refuses a history past 50 MB).
const HISTORY_BYTES: usize = 24 << 20;

/// The workflow's state: what a continue-as-new carries, visible to the `ledger` query.
#[workflow]
pub struct BatchWorkflow {
    carry: Carry,
    in_flight: u64,
}

/// One finished activity of the workflow's.
enum Done {
    /// A timer: another activation, to schedule what one activation's byte bound held back.
    Tick,
    Read(Result<ReadReply, ActivityExecutionError>),
    Wrote(Result<(), ActivityExecutionError>),
    Child {
        cap: Option<Decimal>,
        id: String,
        run_id: String,
        result: Result<RunReport, ActivityExecutionError>,
    },
}

#[workflow_methods]
impl BatchWorkflow {
    #[init]
    fn new(_ctx: &WorkflowContextView, carry: Carry) -> Self {
        BatchWorkflow {
            carry,
            in_flight: 0,
        }
    }

    /// The ledger, children in flight and totals, for anyone watching the batch.
    #[query]
    fn ledger(&self, _ctx: &WorkflowContextView) -> LedgerView {
        LedgerView {
            ledger: self.carry.ledger.clone(),
            in_flight: self.in_flight,
            tally: self.carry.tally.clone(),
        }
    }

    /// Runs one generation of the batch (see the module's documentation).
    #[run(name = "subcontract_batch")]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<BatchOutcome> {
        let params = ctx.state(|s| s.carry.params.clone());
        let concurrency = params.concurrency.max(1) as usize;
        let starter = starter_options(&params.starter_queue);
        let child_options = child_options(
            Duration::from_millis(params.attempt_timeout_ms),
            Duration::from_millis(params.heartbeat_timeout_ms),
        );
        // Lines waiting for the starter; while the starter is away they pile up to this many,
        // then no more children start.
        let max_unwritten = concurrency.max(WRITE_MAX_LINES) * 2;
        let mut tasks = Running::default();
        // Run ids stay unique across the workflows of one batch id (a batch started anew
        // numbers its inputs from 1 again): a hash of the first workflow run's id.
        if ctx.state(|s| s.carry.stamp.is_empty()) {
            // Hashed: run ids are time-ordered, so their first characters repeat for runs
            // started close together.
            let stamp = format!("{:08x}", super::fnv1a(ctx.run_id().as_bytes()) as u32);
            ctx.state_mut(|s| s.carry.stamp = stamp);
        }
        let run_stamp: String = ctx.state(|s| s.carry.stamp.clone());
        let mut in_flight = 0usize;
        let mut reading = false;
        let mut writing = false;
        let mut unwritten: Vec<ResultLine> = Vec::new();
        let mut draining = false;
        // Payload bytes this run has put in its history (inputs out, lines back): Temporal
        // also limits a history's size (50 MB), which large inputs reach before its length.
        let mut history_bytes = 0usize;
        let mut largest_line = 0usize;
        let mut ticking = false;
        // A failure the batch cannot work around; it is returned once the children in flight
        // have reported and their lines are written (their spend is in no line otherwise).
        let mut failed: Option<ApplicationFailure> = None;
        loop {
            // Children in flight add their line twice more (their report, its delivery).
            let projected = history_bytes + in_flight * 2 * largest_line;
            if !draining
                && (failed.is_some()
                    || ctx.continue_as_new_suggested()
                    || ctx.history_length() > params.history_events
                    || projected > HISTORY_BYTES)
            {
                draining = true;
            }
            let (pending, eof, broke) =
                ctx.state(|s| (s.carry.pending.len(), s.carry.eof, s.carry.out_of_money));
            if !draining && !reading && !eof && !broke && pending < concurrency {
                reading = true;
                let request = ReadRequest {
                    cursor: ctx.state(|s| s.carry.cursor),
                    offset: ctx.state(|s| s.carry.offset),
                    max_items: READ_MAX_ITEMS
                        .min(
                            u32::try_from(concurrency)
                                .unwrap_or(u32::MAX)
                                .saturating_mul(2),
                        )
                        .max(16),
                    max_bytes: READ_MAX_BYTES,
                };
                let c = ctx.clone();
                let opts = starter.clone();
                tasks.push(Box::pin(async move {
                    Done::Read(
                        c.execute_activity(StarterActivities::read_inputs, request, opts)
                            .await,
                    )
                }));
            }
            // Payload bytes scheduled in this activation: Temporal also bounds one workflow
            // task's commands (4 MB), so large inputs are scheduled over several.
            let mut scheduled_bytes = 0usize;
            while !draining
                && in_flight < concurrency
                && unwritten.len() < max_unwritten
                && scheduled_bytes < ACTIVATION_BYTES
            {
                if ctx.state(|s| s.carry.pending.is_empty() || s.carry.out_of_money) {
                    break;
                }
                let cap = match ctx.state(|s| s.carry.ledger.admit(in_flight)) {
                    Admission::Start(cap) => cap,
                    Admission::Wait => break,
                    Admission::OutOfMoney => {
                        ctx.state_mut(|s| s.carry.out_of_money = true);
                        break;
                    }
                };
                let Some((item, n)) = ctx.state_mut(|s| {
                    let item = s.carry.pending.pop_front()?;
                    s.carry.ledger.reserve(cap);
                    s.carry.started += 1;
                    s.in_flight += 1;
                    Some((item, s.carry.started))
                }) else {
                    break;
                };
                in_flight += 1;
                let size = item.input.to_string().len() + item.id.len();
                // Twice in the history: in the read's reply and in the run's request.
                history_bytes += 2 * size;
                scheduled_bytes += size;
                let request = RunRequest {
                    spec: params.spec.clone(),
                    id: item.id,
                    input: item.input,
                    cap_usd: cap,
                    run_id: format!("{}-{run_stamp}-{n}", params.batch_id),
                };
                let mut opts = child_options.clone();
                opts.activity_id = Some(format!("run-{n}"));
                let c = ctx.clone();
                let (id, run_id) = (request.id.clone(), request.run_id.clone());
                tasks.push(Box::pin(async move {
                    let result = c
                        .execute_activity(SubAgentActivities::run_subagent, request, opts)
                        .await;
                    Done::Child {
                        cap,
                        id,
                        run_id,
                        result,
                    }
                }));
            }
            // Held back by the byte bound with room left: come back in a moment rather than
            // when a child finishes (which may take minutes).
            if scheduled_bytes >= ACTIVATION_BYTES
                && !ticking
                && in_flight < concurrency
                && ctx.state(|s| !s.carry.pending.is_empty())
            {
                ticking = true;
                let c = ctx.clone();
                tasks.push(Box::pin(async move {
                    c.timer(Duration::from_millis(1)).await;
                    Done::Tick
                }));
            }
            if !writing && !unwritten.is_empty() {
                writing = true;
                let lines = take_lines(&mut unwritten);
                let view = ctx.state(|s| LedgerView {
                    ledger: s.carry.ledger.clone(),
                    in_flight: s.in_flight,
                    tally: s.carry.tally.clone(),
                });
                let c = ctx.clone();
                let opts = starter.clone();
                tasks.push(Box::pin(async move {
                    Done::Wrote(
                        c.execute_activity(
                            StarterActivities::write_results,
                            Delivery { lines, view },
                            opts,
                        )
                        .await,
                    )
                }));
            }
            let Some(done) = tasks.next().await else {
                // Nothing in flight and nothing to start: this generation is over.
                if let Some(failure) = failed {
                    return Err(failure.into());
                }
                let mut carry = ctx.state(|s| s.carry.clone());
                let generations = carry.generation;
                if draining && !(carry.out_of_money || carry.eof && carry.pending.is_empty()) {
                    carry.generation += 1;
                    // Inputs read and not started are read again by the next run.
                    if let Some(first) = carry.pending.front() {
                        carry.cursor = first.line - 1;
                        carry.offset = first.offset;
                        carry.eof = false;
                    }
                    carry.pending.clear();
                    return match ctx.continue_as_new(carry, ContinueAsNewOptions::default()) {
                        Err(next) => Err(next),
                        Ok(never) => match never {},
                    };
                }
                return Ok(BatchOutcome {
                    not_started: !(carry.eof && carry.pending.is_empty()),
                    tally: carry.tally,
                    ledger: carry.ledger,
                    generations,
                });
            };
            match done {
                Done::Tick => ticking = false,
                Done::Read(r) => {
                    reading = false;
                    match r {
                        Ok(reply) => ctx.state_mut(|s| {
                            s.carry.pending.extend(reply.items);
                            s.carry.cursor = reply.cursor;
                            s.carry.offset = reply.offset;
                            s.carry.eof = reply.eof;
                        }),
                        // (Retried without end: only a cancellation gets here.)
                        Err(e) => {
                            failed.get_or_insert(fatal("reading the inputs", e));
                        }
                    }
                }
                Done::Wrote(r) => {
                    writing = false;
                    if let Err(e) = r {
                        failed.get_or_insert(fatal("writing the results", e));
                    }
                }
                Done::Child {
                    cap,
                    id,
                    run_id,
                    result,
                } => {
                    in_flight -= 1;
                    let report = match result {
                        Ok(r) => r,
                        Err(e) => {
                            // Attempts are retried without end, so only a cancellation or a
                            // failure nobody planned for gets here, with no report of what the
                            // attempts spent: the input is charged its whole cap (never less
                            // than it spent), recorded, and the batch stops after draining.
                            let failure = fatal("running a sub-agent", e);
                            let line = ResultLine {
                                id: id.clone(),
                                outcome: crate::Outcome::ModelError,
                                output: None,
                                error: Some(format!(
                                    "the run failed on Temporal ({failure}); charged its whole cap, as what it spent is unknown"
                                )),
                                turns: 0,
                                cost_usd: cap.unwrap_or(Decimal::ZERO),
                                usage: crate::model::Usage::default(),
                                run_id: run_id.clone(),
                                changes: None,
                                cut_short: None,
                            };
                            ctx.state_mut(|s| {
                                s.in_flight -= 1;
                                s.carry.ledger.settle(cap, line.cost_usd);
                                s.carry.tally.failed += 1;
                            });
                            unwritten.push(line);
                            failed.get_or_insert(failure);
                            continue;
                        }
                    };
                    if let Some(why) = &report.fatal {
                        failed.get_or_insert(ApplicationFailure::non_retryable(why.clone()));
                    }
                    let size = report.line.to_json().len();
                    history_bytes += 2 * size;
                    largest_line = largest_line.max(size);
                    let written = ctx.state_mut(|s| {
                        s.in_flight -= 1;
                        let c = &mut s.carry;
                        c.ledger.settle(cap, report.line.cost_usd);
                        c.tally.retried_attempts += u64::from(report.lost_attempts);
                        // Refused before any call because the batch lowered its cap: the
                        // batch's money is gone (a spec's own cap refusing is a result).
                        let lowered = match (cap, c.ledger.child_cap_usd) {
                            (Some(cap), Some(spec_cap)) => cap < spec_cap,
                            (Some(_), None) => true,
                            (None, _) => false,
                        };
                        if report.refused_at_start && lowered && report.line.cost_usd.is_zero() {
                            // Nothing spent: not written, so a later batch can run it. (An
                            // input whose lost attempts spent its lowered cap is a result.)
                            c.out_of_money = true;
                            c.tally.refused += 1;
                            return false;
                        }
                        if report.fatal.is_some() && report.line.cost_usd.is_zero() {
                            // Not run and nothing spent: left for the batch started anew.
                            return false;
                        }
                        if report.line.outcome == crate::Outcome::Completed {
                            c.tally.completed += 1;
                        } else {
                            c.tally.failed += 1;
                        }
                        true
                    });
                    if written {
                        unwritten.push(report.line);
                    }
                }
            }
        }
    }
}

/// The workflow's activities in flight.
#[derive(Default)]
struct Running(Vec<LocalBoxFuture<'static, Done>>);

impl Running {
    fn push(&mut self, f: LocalBoxFuture<'static, Done>) {
        self.0.push(f);
    }

    /// The first finished activity in the order of the list (`None` when none is in flight).
    async fn next(&mut self) -> Option<Done> {
        if self.0.is_empty() {
            return None;
        }
        std::future::poll_fn(|cx| {
            for i in 0..self.0.len() {
                if let Poll::Ready(done) = self.0[i].as_mut().poll(cx) {
                    drop(self.0.swap_remove(i));
                    return Poll::Ready(Some(done));
                }
            }
            Poll::Pending
        })
        .await
    }
}

/// Up to [`WRITE_MAX_LINES`] lines of about [`WRITE_MAX_BYTES`] from the front of `lines`.
fn take_lines(lines: &mut Vec<ResultLine>) -> Vec<ResultLine> {
    let mut bytes = 0usize;
    let mut n = 0usize;
    for line in lines.iter() {
        let size = line.to_json().len();
        if n > 0 && (n == WRITE_MAX_LINES || bytes + size > WRITE_MAX_BYTES) {
            break;
        }
        bytes += size;
        n += 1;
    }
    lines.drain(..n).collect()
}

/// A failure the workflow cannot work around (a worker without the spec, a starter that
/// cannot write): the batch fails with it, and the same command starts it anew once fixed.
fn fatal(doing: &str, e: ActivityExecutionError) -> ApplicationFailure {
    let why = e
        .reason()
        .map(|r| r.to_string())
        .unwrap_or_else(|| e.to_string());
    ApplicationFailure::non_retryable(format!("{doing}: {why}"))
}

/// The starter's activities: retried until the starter is back (it may be restarted).
fn starter_options(queue: &str) -> ActivityOptions {
    // Short: a starter killed mid-call is noticed after this, and its replacement takes over.
    let mut opts = ActivityOptions::with_start_to_close_timeout(Duration::from_secs(30))
        .retry_policy(
            temporalio_common::RetryPolicy::builder()
                .initial_interval(Duration::from_millis(200))
                .maximum_interval(Duration::from_secs(5))
                .build(),
        )
        .build();
    opts.task_queue = Some(queue.to_string());
    opts
}

/// A sub-agent run: retried (on another worker) whenever an attempt is lost; an attempt that
/// stops recording its spend for `heartbeat` is presumed lost.
fn child_options(attempt: Duration, heartbeat: Duration) -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(attempt)
        .heartbeat_timeout(heartbeat)
        .retry_policy(
            temporalio_common::RetryPolicy::builder()
                .initial_interval(Duration::from_millis(200))
                .maximum_interval(Duration::from_secs(5))
                .build(),
        )
        .build()
}
