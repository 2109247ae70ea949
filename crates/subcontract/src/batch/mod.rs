//! Many inputs through one spec, under one budget, resumable: the engine of
//! `subcontract batch`.
//!
//! Inputs are JSON Lines, read lazily; results are JSON Lines ([`ResultLine`]), one per input,
//! appended as each run finishes, so that the output file is also the **ledger** a later run
//! resumes from ([`Ledger::read`]): ids already there are skipped, a torn last line (a write
//! cut short by `kill -9`) is cut off and its input redone, and the USD spent so far is counted
//! against the limit again. At most `concurrency` inputs are in flight; memory does not grow
//! with the file beyond one small entry per id (the ids already seen: a 16-byte hash each).
//! A batch holds an exclusive advisory lock on its output file while it runs: a second batch
//! on the same file fails at once with [`BatchError::Locked`] rather than interleave its lines
//! with the first's (or cut the first's line in progress as torn).
//!
//! ```no_run
//! # async fn demo(spec: subcontract::spec::DynSpec,
//! #               ctx: subcontract::Ctx) -> Result<(), subcontract::batch::BatchError> {
//! use std::sync::Arc;
//! use subcontract::batch::{run_batch, BatchOptions, Ledger, Progress};
//!
//! let out = std::path::Path::new("out.jsonl");
//! let ledger = Ledger::read(out)?;
//! let inputs = std::io::BufReader::new(std::fs::File::open("in.jsonl").expect("in.jsonl"));
//! let summary = run_batch(
//!     Arc::new(spec),
//!     ctx,
//!     inputs,
//!     out,
//!     ledger,
//!     &BatchOptions::default(),
//!     &Progress::default(),
//! )
//! .await?;
//! println!("{} completed", summary.completed);
//! # Ok(()) }
//! ```

pub(crate) mod ids;
pub(crate) mod input;
mod ledger;
mod refusal;

pub use input::{parse_input_line, InputLine, InvalidLine, MAX_LINE_BYTES};
pub use ledger::{Ledger, Owner, ResultLine};
pub use refusal::Refusal;

use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rust_decimal::Decimal;
use serde_json::Value;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::spec::DynSpec;
use crate::{Ctx, Outcome};

/// Why a batch could not run (not why one input failed: that is a [`ResultLine`]).
#[derive(thiserror::Error)]
pub enum BatchError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The output file holds a line that is not a result line (and is not a torn last line).
    #[error("{path}:{line}: not a result line: {reason}")]
    Corrupt {
        /// The file.
        path: String,
        /// 1-based line number.
        line: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// Another batch holds the output file (its exclusive lock): two batches appending to one
    /// file would interleave their lines.
    #[error("another batch is writing to {path}")]
    Locked {
        /// The output file.
        path: String,
    },
    /// The output file belongs to another batch: another spec, other contracts or another
    /// input file ([`Owner`]). Its ids would all be skipped as done.
    #[error("{path} holds the results of {found}, not of {expected}: give this batch another --out (or run the batch it belongs to)")]
    OtherBatch {
        /// The output file.
        path: String,
        /// What this batch is.
        expected: Box<Owner>,
        /// What the file belongs to.
        found: Box<Owner>,
    },
    /// The output file changed between [`Ledger::read`] and the start of the batch (another
    /// batch wrote to it meanwhile): read the ledger again.
    #[error("{path}: changed since it was read (by another batch?): run again")]
    Changed {
        /// The output file.
        path: String,
    },
}

crate::debug_as_display!(BatchError);

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BatchError + '_ {
    move |source| BatchError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// How a batch runs.
#[derive(Debug, Clone)]
pub struct BatchOptions {
    /// Inputs in flight at most (at least 1).
    pub concurrency: usize,
    /// Stop starting inputs when this is cancelled; those in flight finish (cancel the root
    /// context's token to cut them short).
    pub stop: CancellationToken,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            concurrency: 16,
            stop: CancellationToken::new(),
        }
    }
}

/// Live counts of a running batch, for a progress display. Every field only grows, except
/// `running`.
#[derive(Debug, Default)]
pub struct Progress {
    /// Inputs whose result line was written by this run and that completed.
    pub completed: AtomicU64,
    /// Inputs whose result line was written by this run and that did not complete.
    pub failed: AtomicU64,
    /// Inputs in flight.
    pub running: AtomicU64,
    /// Inputs skipped because their id is already in the output.
    pub skipped: AtomicU64,
    spent: Mutex<Decimal>,
}

impl Progress {
    /// USD spent by the inputs this run wrote.
    pub fn spent_usd(&self) -> Decimal {
        *self.spent.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn add_spent(&self, usd: Decimal) {
        let mut s = self.spent.lock().unwrap_or_else(|p| p.into_inner());
        *s = s.saturating_add(usd);
    }
}

/// What a batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Result lines written by this run that completed.
    pub completed: u64,
    /// Result lines written by this run that did not complete (including `invalid_input`).
    pub failed: u64,
    /// Inputs skipped because their id was already in the output (done by an earlier run).
    pub skipped: u64,
    /// Input lines whose id an earlier line of the same file already had: not run, reported.
    pub duplicates: u64,
    /// Inputs not started: the batch was stopped or its budget has no room left. A later run
    /// with the same output file does them.
    pub not_started: bool,
    /// Inputs the batch's budget refused before their first model call: not written (nothing
    /// was spent), so a later run with a higher limit does them.
    pub refused: u64,
    /// Set when the spec's own limit refused an input's first model call ([`Refusal::SpecLimit`]):
    /// what to change. No further input starts, and the refused ones are not written.
    pub spec_refused: Option<String>,
    /// Runs cut short by cancelling the root context: not written (a later run redoes them).
    pub cancelled: u64,
    /// USD spent by cancelled runs, which no result line records.
    pub cancelled_usd: Decimal,
    /// USD recorded by the result lines this run wrote.
    pub spent_usd: Decimal,
}

/// Runs `spec` on every input line of `inputs` whose id is not in `ledger`, each as a child of
/// `ctx` (whose budget is the batch's: give it what is left of the limit after
/// [`Ledger::spent_usd`]), at most `options.concurrency` at once, and appends one
/// [`ResultLine`] per input to `out` as each finishes (`out` is first cut to
/// [`Ledger::valid_len`], dropping a torn last line). `out` is locked for the whole batch:
/// [`BatchError::Locked`] when another batch holds it, [`BatchError::Changed`] when it changed
/// since `ledger` was read.
///
/// Input lines that are not JSON, and inputs that break the input contract, become
/// `invalid_input` lines. Blank lines are skipped (they keep their line number). A line whose
/// id an earlier line already had is reported in a warning and in [`Summary::duplicates`],
/// and not run: an id names one result. An input the batch's budget refuses before its first
/// model call is not written either, and no further input starts ([`Summary::refused`]).
pub async fn run_batch(
    spec: Arc<DynSpec>,
    ctx: Ctx,
    mut inputs: impl BufRead,
    out: &Path,
    ledger: Ledger,
    options: &BatchOptions,
    progress: &Progress,
) -> Result<Summary, BatchError> {
    let mut lines = Lines::new(ledger.open_for_append(out)?, out);
    let mut summary = Summary::default();
    // Ids run by this batch (those in the ledger are not added): to refuse a duplicate.
    let mut seen = ids::IdSet::default();
    let mut in_flight: JoinSet<(String, crate::RunResult<Value>)> = JoinSet::new();
    let concurrency = options.concurrency.max(1);
    let mut line_no: u64 = 0;
    let mut eof = false;
    let mut out_of_money = false;
    let mut buf = Vec::new();
    loop {
        while in_flight.len() < concurrency && !eof {
            if options.stop.is_cancelled() || out_of_money || no_room(&ctx) {
                summary.not_started = true;
                break;
            }
            let Some(line) =
                input::read_line(&mut inputs, &mut buf).map_err(io_err(Path::new("inputs")))?
            else {
                eof = true;
                break;
            };
            line_no += 1;
            let parsed = match line {
                input::Line::Text(text) if text.trim().is_empty() => continue,
                input::Line::Text(text) => parse_input_line(line_no, text),
                input::Line::TooLong => Err(InvalidLine {
                    id: line_no.to_string(),
                    reason: format!("line {line_no}: longer than {MAX_LINE_BYTES} bytes"),
                }),
            };
            let id = match &parsed {
                Ok(l) => &l.id,
                Err(bad) => &bad.id,
            };
            if ledger.contains(id) {
                summary.skipped += 1;
                progress.skipped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if !seen.insert(id) {
                tracing::warn!(line = line_no, id = %id, "duplicate id: this input line is not run");
                summary.duplicates += 1;
                continue;
            }
            match parsed {
                Err(bad) => {
                    let line = ResultLine::invalid(bad.id, bad.reason);
                    write_line(&mut lines, &line, &mut summary, progress)?;
                }
                Ok(InputLine { id, input }) => {
                    let spec = spec.clone();
                    let ctx = ctx.clone();
                    progress.running.fetch_add(1, Ordering::Relaxed);
                    // Boxed here, on the thread that runs the batch, not in the task: the
                    // run's state (some KB) is then a plain allocation of one size, from one
                    // malloc arena, reused as runs finish. In the task it would be carved
                    // out by memalign (tokio's task cells are 128-byte aligned), and its
                    // memory spread over the arenas of whichever worker threads polled it
                    // first: the heap grew with the number of inputs, not the concurrency.
                    let run = Box::pin(async move {
                        let r = spec.call_json(input, &ctx).await;
                        (id, r)
                    });
                    in_flight.spawn(run);
                }
            }
        }
        lines.flush()?;
        let Some(mut joined) = in_flight.join_next().await else {
            break;
        };
        loop {
            progress.running.fetch_sub(1, Ordering::Relaxed);
            match joined {
                Ok((id, r))
                    if r.outcome == Outcome::Cancelled && ctx.cancellation().is_cancelled() =>
                {
                    // Cut short by the batch's own cancellation: left for a later run to redo.
                    summary.cancelled += 1;
                    summary.cancelled_usd = summary.cancelled_usd.saturating_add(r.total_cost_usd);
                    tracing::debug!(id = %id, "cancelled run not written");
                }
                Ok((id, r)) => match Refusal::of(&r, spec.limits().max_cost_usd) {
                    // Refused before any model call: nothing spent, so nothing to record, and
                    // a later run with a higher limit can still do it. No input could start
                    // now (the batch's money is gone, or the spec's cap refuses every first
                    // call): stop.
                    Some(refusal) => {
                        summary.refused += 1;
                        out_of_money = true;
                        if let Some(fix) = refusal.fix() {
                            summary.spec_refused.get_or_insert(fix);
                        }
                        tracing::debug!(id = %id, "input refused by a budget before any spend; not written");
                    }
                    None => {
                        let kept = r
                            .changes
                            .as_ref()
                            .filter(|c| !c.is_empty())
                            .map(|c| crate::act::run::keep_for_caller(&ctx, c));
                        let mut line = ResultLine::from_run(id, r);
                        line.changes = kept;
                        write_line(&mut lines, &line, &mut summary, progress)?;
                    }
                },
                // A run that panicked is a bug; its input is not written, so a later run redoes it.
                Err(e) => tracing::error!(error = %e, "a batch run panicked"),
            }
            // Runs that finished meanwhile: their lines go out in the same write.
            match in_flight.try_join_next() {
                Some(next) => joined = next,
                None => break,
            }
        }
        lines.flush()?;
    }
    lines.flush()?;
    Ok(summary)
}

/// Whether the batch's budget cannot afford anything more: starting more inputs would only
/// write `budget_exhausted` lines that a later run with a higher limit could not redo.
fn no_room(ctx: &Ctx) -> bool {
    // Settled spends only: calls in flight may settle for less than they reserved.
    let s = ctx.budget().snapshot();
    s.limit_usd.is_some_and(|limit| s.spent_usd >= limit)
}

/// The output file and the lines not yet written to it. Lines are written before the batch
/// waits for anything (and whenever 64 KiB are pending), with one write for all the runs that
/// finished together: once a run is finished its line is in the kernel before the next await,
/// so a `kill -9` of this process cannot lose it (and its input is never run again); no
/// user-space buffer outlives that.
pub(crate) struct Lines {
    file: std::fs::File,
    path: std::path::PathBuf,
    pending: Vec<u8>,
}

impl Lines {
    /// Lines for `file`, named `path` in errors.
    pub(crate) fn new(file: std::fs::File, path: &Path) -> Lines {
        Lines {
            file,
            path: path.to_path_buf(),
            pending: Vec::new(),
        }
    }

    /// Writes the pending lines (one write).
    pub(crate) fn flush(&mut self) -> Result<(), BatchError> {
        if !self.pending.is_empty() {
            self.file
                .write_all(&self.pending)
                .map_err(io_err(&self.path))?;
            self.pending.clear();
        }
        Ok(())
    }
}

pub(crate) fn write_line(
    lines: &mut Lines,
    line: &ResultLine,
    summary: &mut Summary,
    progress: &Progress,
) -> Result<(), BatchError> {
    // Straight into the pending bytes: no string per line. (Strings, numbers and JSON values:
    // this cannot fail; if it did, no partial line would be left behind.)
    let start = lines.pending.len();
    if let Err(e) = serde_json::to_writer(&mut lines.pending, line) {
        lines.pending.truncate(start);
        return Err(io_err(&lines.path)(e.into()));
    }
    lines.pending.push(b'\n');
    if lines.pending.len() >= 64 << 10 {
        lines.flush()?;
    }
    summary.spent_usd = summary.spent_usd.saturating_add(line.cost_usd);
    progress.add_spent(line.cost_usd);
    if line.outcome == Outcome::Completed {
        summary.completed += 1;
        progress.completed.fetch_add(1, Ordering::Relaxed);
    } else {
        summary.failed += 1;
        progress.failed.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}
