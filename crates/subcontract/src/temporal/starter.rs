//! The starter's side: the command that started a batch reads its inputs and writes its
//! results, as activities on a task queue of its own that the workflow calls. So the input
//! and output files never leave the starter's machine, results are written in the same format
//! (and with the same resume rules) as a local batch, and a starter that is restarted simply
//! serves the queue again: the workflow's calls wait for it.

use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use temporalio_sdk::ApplicationFailure;

use super::messages::{Delivery, Item, ReadReply, ReadRequest};
use crate::batch::ids::{IdLines, IdSet};
use crate::batch::input::{read_line, Line};
use crate::batch::{
    parse_input_line, write_line, InvalidLine, Ledger, Lines, Progress, ResultLine, Summary,
    MAX_LINE_BYTES,
};

/// The largest input a Temporal batch carries (Temporal refuses payloads past 2 MB and workflow
/// tasks past 4 MB, and an input travels with others); a larger one is an `invalid_input`
/// result.
pub const MAX_INPUT_BYTES: usize = 256 << 10;
/// The longest id a Temporal batch carries; a longer one is an `invalid_input` result (under
/// its line number).
pub(super) const MAX_ID_BYTES: usize = 512;
/// Input lines one `read_inputs` consumes at most.
const LINES_PER_READ: usize = 10_000;

/// The starter's activities and what they share: the input file's reader, the output file,
/// the ids already written, the ids already handed out. Cloning shares them.
#[derive(Clone)]
pub(crate) struct StarterActivities {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    progress: Arc<Progress>,
}

struct State {
    inputs: PathBuf,
    /// The open input file and how many of its lines it has consumed.
    reader: Option<(u64, BufReader<File>)>,
    /// The output file (held, and locked, for the whole batch).
    out: Lines,
    /// Ids in the output when the starter started.
    ledger: Ledger,
    /// Ids this starter wrote since.
    written: IdSet,
    /// The first line of every id in the input (read once, when the starter starts): a line
    /// whose id an earlier line has is a duplicate, reported and not run.
    first_lines: IdLines,
    /// The furthest line read (lines up to it were counted when first read).
    high_water: u64,
    summary: Summary,
    buf: Vec<u8>,
}

impl StarterActivities {
    /// The activities of a starter reading `inputs` and appending to `out` (read as `ledger`).
    pub(crate) fn new(
        inputs: PathBuf,
        out: PathBuf,
        ledger: Ledger,
        progress: Arc<Progress>,
    ) -> Result<Self, crate::batch::BatchError> {
        let file = ledger.open_for_append(&out)?;
        let mut buf = Vec::new();
        let first_lines = first_lines(&inputs, &mut buf)?;
        Ok(StarterActivities {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    inputs,
                    reader: None,
                    out: Lines::new(file, &out),
                    ledger,
                    written: IdSet::default(),
                    first_lines,
                    high_water: 0,
                    summary: Summary::default(),
                    buf,
                }),
                progress,
            }),
        })
    }

    /// What this starter wrote and skipped.
    pub(crate) fn report(&self) -> Summary {
        self.lock().summary.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn failure(e: impl std::fmt::Display) -> ActivityError {
    // Retryable: a full disk or a moved file may be fixed while the workflow waits (said on
    // stderr, as the workflow retries it every few seconds).
    tracing::warn!(error = %e, "reading the inputs or writing the results failed; retried");
    ApplicationFailure::new(e.to_string()).into()
}

#[activities]
impl StarterActivities {
    /// The next inputs after `cursor` lines. Ids already in the output are skipped, a repeated
    /// id is reported and not run, and a line that holds no input is written at once as an
    /// `invalid_input` result: only runnable inputs go back to the workflow.
    #[activity]
    pub(crate) async fn read_inputs(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: ReadRequest,
    ) -> Result<ReadReply, ActivityError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.read(&req))
            .await
            .map_err(failure)?
    }

    /// Appends finished inputs' lines to the output (one write per line, as a local batch
    /// does); a line whose id is already there (a delivery retried) is not written again.
    #[activity]
    pub(crate) async fn write_results(
        self: Arc<Self>,
        _ctx: ActivityContext,
        delivery: Delivery,
    ) -> Result<(), ActivityError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.write(delivery))
            .await
            .map_err(failure)?
    }
}

impl StarterActivities {
    fn read(&self, req: &ReadRequest) -> Result<ReadReply, ActivityError> {
        let mut guard = self.lock();
        let s = &mut *guard;
        let positioned = matches!(&s.reader, Some((at, _)) if *at == req.cursor);
        if !positioned {
            // A first call, a restarted starter, or a call retried after its answer was lost:
            // seek to where the workflow says its next line starts.
            let mut file = File::open(&s.inputs)
                .map_err(|e| failure(format!("{}: {e}", s.inputs.display())))?;
            file.seek(SeekFrom::Start(req.offset)).map_err(failure)?;
            s.reader = Some((req.cursor, BufReader::new(file)));
        }
        let (mut at, mut reader) = s.reader.take().expect("positioned above");
        let mut items = Vec::new();
        let mut bytes = 0u64;
        let mut eof = false;
        let mut consumed = 0usize;
        // Bounded in lines too (skipped, duplicate and invalid lines return no item), so one
        // call stays short whatever the file holds.
        while items.len() < req.max_items as usize
            && bytes < req.max_bytes
            && consumed < LINES_PER_READ
        {
            let offset = reader.stream_position().map_err(failure)?;
            let Some(line) = read_line(&mut reader, &mut s.buf).map_err(failure)? else {
                eof = true;
                break;
            };
            at += 1;
            consumed += 1;
            // Lines read before (a read retried, or read again after a continue-as-new) were
            // counted then.
            let new = at > s.high_water;
            s.high_water = s.high_water.max(at);
            let parsed = match line {
                Line::Text(text) if text.trim().is_empty() => continue,
                Line::Text(text) => parse_input_line(at, text),
                Line::TooLong => Err(InvalidLine {
                    id: at.to_string(),
                    reason: format!("line {at}: longer than {MAX_LINE_BYTES} bytes, or not UTF-8"),
                }),
            };
            let id = key(at, &parsed);
            if s.ledger.contains(&id) {
                if new {
                    s.summary.skipped += 1;
                    self.shared.progress.skipped.fetch_add(1, Ordering::Relaxed);
                }
                continue;
            }
            if s.first_lines.first(&id, at) < at {
                if new {
                    tracing::warn!(line = at, id = %id, "duplicate id: this input line is not run");
                    s.summary.duplicates += 1;
                }
                continue;
            }
            if s.written.contains(&id) {
                // Read again (a read retried, or after a continue-as-new): already done.
                continue;
            }
            let (id, invalid) = match parsed {
                Err(bad) => (id, Some(bad.reason)),
                Ok(l) if l.id.len() > MAX_ID_BYTES => (
                    id,
                    Some(format!(
                        "line {at}: an id of {} bytes; a batch on Temporal carries ids of at most {MAX_ID_BYTES} bytes",
                        l.id.len()
                    )),
                ),
                Ok(l) => {
                    let size = l.input.to_string().len();
                    if size > MAX_INPUT_BYTES {
                        (
                            id,
                            Some(format!(
                                "line {at}: an input of {size} bytes; a batch on Temporal carries inputs of at most {MAX_INPUT_BYTES} bytes"
                            )),
                        )
                    } else {
                        bytes += (size + l.id.len()) as u64;
                        items.push(Item {
                            id: l.id,
                            input: l.input,
                            line: at,
                            offset,
                        });
                        (id, None)
                    }
                }
            };
            if let Some(reason) = invalid {
                let line = ResultLine::invalid(id.clone(), reason);
                // Marked written first: a failed flush is retried, never written twice.
                s.written.insert(&id);
                write_line(&mut s.out, &line, &mut s.summary, &self.shared.progress)
                    .map_err(failure)?;
            }
        }
        let offset = reader.stream_position().map_err(failure)?;
        s.reader = Some((at, reader));
        s.out.flush().map_err(failure)?;
        Ok(ReadReply {
            items,
            cursor: at,
            offset,
            eof,
        })
    }

    fn write(&self, delivery: Delivery) -> Result<(), ActivityError> {
        let mut guard = self.lock();
        let s = &mut *guard;
        for line in delivery.lines {
            if s.ledger.contains(&line.id) || s.written.contains(&line.id) {
                continue;
            }
            // Marked written first: a line that failed to flush stays pending and goes out with
            // the next flush; the retried delivery does not add it again.
            s.written.insert(&line.id);
            write_line(&mut s.out, &line, &mut s.summary, &self.shared.progress)
                .map_err(failure)?;
        }
        // Written before the activity reports: a line the workflow counts as delivered is in
        // the file.
        s.out.flush().map_err(failure)?;
        self.shared
            .progress
            .running
            .store(delivery.view.in_flight, Ordering::Relaxed);
        Ok(())
    }
}

/// The first line of every id in `inputs` (a line that does not parse is under its line
/// number, as it is when it is read for the batch).
fn first_lines(inputs: &Path, buf: &mut Vec<u8>) -> Result<IdLines, crate::batch::BatchError> {
    let io = crate::batch::io_err(inputs);
    let mut reader = BufReader::new(File::open(inputs).map_err(io)?);
    let mut lines = IdLines::default();
    let mut at = 0u64;
    while let Some(line) = read_line(&mut reader, buf).map_err(crate::batch::io_err(inputs))? {
        at += 1;
        let id = match line {
            Line::Text(text) if text.trim().is_empty() => continue,
            Line::Text(text) => key(at, &parse_input_line(at, text)),
            Line::TooLong => at.to_string(),
        };
        lines.first(&id, at);
    }
    Ok(lines)
}

/// The id line `at` is known by here: its own, or its line number when it holds no input or
/// its id is too long to carry (its result is written under that number).
fn key(at: u64, parsed: &Result<crate::batch::InputLine, InvalidLine>) -> String {
    match parsed {
        Ok(l) if l.id.len() <= MAX_ID_BYTES => l.id.clone(),
        Ok(_) => at.to_string(),
        Err(bad) => bad.id.clone(),
    }
}
