//! The starter's side: the command that started a batch reads its inputs and writes its
//! results, as activities on a task queue of its own that the workflow calls. So the input
//! and output files never leave the starter's machine, results are written in the same format
//! (and with the same resume rules) as a local batch, and a starter that is restarted simply
//! serves the queue again: the workflow's calls wait for it.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use temporalio_sdk::ApplicationFailure;

use super::messages::{Delivery, Item, LedgerView, ReadReply, ReadRequest};
use crate::batch::ids::IdSet;
use crate::batch::input::{read_line, Line};
use crate::batch::{
    parse_input_line, write_line, InvalidLine, Ledger, Lines, Progress, ResultLine, Summary,
    MAX_LINE_BYTES,
};

/// The largest input a Temporal batch carries (Temporal refuses payloads past 2 MB, and an
/// input travels in one with others); a larger one is an `invalid_input` result.
pub const MAX_INPUT_BYTES: usize = 1 << 20;

/// The starter's activities and what they share: the input file's reader, the output file,
/// the ids already written, the ids already handed out. Cloning shares them.
#[derive(Clone)]
pub struct StarterActivities {
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
    /// Ids read from the input so far (duplicates are reported, not run), complete up to
    /// `seen_upto` lines.
    seen: IdSet,
    seen_upto: u64,
    summary: Summary,
    view: Option<LedgerView>,
    buf: Vec<u8>,
}

impl StarterActivities {
    /// The activities of a starter reading `inputs` and appending to `out` (read as `ledger`).
    pub fn new(
        inputs: PathBuf,
        out: PathBuf,
        ledger: Ledger,
        progress: Arc<Progress>,
    ) -> Result<Self, crate::batch::BatchError> {
        let file = ledger.open_for_append(&out)?;
        Ok(StarterActivities {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    inputs,
                    reader: None,
                    out: Lines::new(file, &out),
                    ledger,
                    written: IdSet::default(),
                    seen: IdSet::default(),
                    seen_upto: 0,
                    summary: Summary::default(),
                    view: None,
                    buf: Vec::new(),
                }),
                progress,
            }),
        })
    }

    /// What this starter wrote and skipped, and the last ledger the workflow sent.
    pub fn report(&self) -> (Summary, Option<LedgerView>) {
        let s = self.lock();
        (s.summary.clone(), s.view.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn failure(e: impl std::fmt::Display) -> ActivityError {
    // Retryable: a full disk or a moved file may be fixed while the workflow waits.
    ApplicationFailure::new(e.to_string()).into()
}

#[activities]
impl StarterActivities {
    /// The next inputs after `cursor` lines. Ids already in the output are skipped, a repeated
    /// id is reported and not run, and a line that holds no input is written at once as an
    /// `invalid_input` result: only runnable inputs go back to the workflow.
    #[activity]
    pub async fn read_inputs(
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
    pub async fn write_results(
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
            // A first call, or a call retried after its answer was lost: read up to `cursor`
            // again, learning the ids handed out before it (a restarted starter's first call).
            let file = File::open(&s.inputs)
                .map_err(|e| failure(format!("{}: {e}", s.inputs.display())))?;
            let mut reader = BufReader::new(file);
            let mut n = 0u64;
            while n < req.cursor {
                let Some(line) = read_line(&mut reader, &mut s.buf).map_err(failure)? else {
                    break;
                };
                n += 1;
                if n > s.seen_upto {
                    if let Line::Text(text) = line {
                        if !text.trim().is_empty() {
                            s.seen.insert(&id_of(n, text));
                        }
                    }
                }
            }
            s.seen_upto = s.seen_upto.max(n);
            s.reader = Some((n, reader));
        }
        let (mut at, mut reader) = s.reader.take().expect("positioned above");
        let mut items = Vec::new();
        let mut bytes = 0u64;
        let mut eof = false;
        while items.len() < req.max_items as usize && bytes < req.max_bytes {
            let Some(line) = read_line(&mut reader, &mut s.buf).map_err(failure)? else {
                eof = true;
                break;
            };
            at += 1;
            let parsed = match line {
                Line::Text(text) if text.trim().is_empty() => continue,
                Line::Text(text) => parse_input_line(at, text),
                Line::TooLong => Err(InvalidLine {
                    id: at.to_string(),
                    reason: format!("line {at}: longer than {MAX_LINE_BYTES} bytes"),
                }),
            };
            let id = match &parsed {
                Ok(l) => l.id.clone(),
                Err(bad) => bad.id.clone(),
            };
            let fresh = at > s.seen_upto;
            s.seen_upto = s.seen_upto.max(at);
            if s.ledger.contains(&id) || s.written.contains(&id) {
                s.summary.skipped += 1;
                self.shared.progress.skipped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if fresh && !s.seen.insert(&id) {
                tracing::warn!(line = at, id = %id, "duplicate id: this input line is not run");
                s.summary.duplicates += 1;
                continue;
            }
            let invalid = match parsed {
                Err(bad) => Some(bad.reason),
                Ok(l) => {
                    let size = l.input.to_string().len();
                    if size > MAX_INPUT_BYTES {
                        Some(format!(
                            "line {at}: an input of {size} bytes; a batch on Temporal carries inputs of at most {MAX_INPUT_BYTES} bytes"
                        ))
                    } else {
                        bytes += size as u64;
                        items.push(Item {
                            id: l.id,
                            input: l.input,
                        });
                        None
                    }
                }
            };
            if let Some(reason) = invalid {
                let line = ResultLine::invalid(id.clone(), reason);
                write_line(&mut s.out, &line, &mut s.summary, &self.shared.progress)
                    .map_err(failure)?;
                s.written.insert(&id);
            }
        }
        s.reader = Some((at, reader));
        s.out.flush().map_err(failure)?;
        Ok(ReadReply {
            items,
            cursor: at,
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
            write_line(&mut s.out, &line, &mut s.summary, &self.shared.progress)
                .map_err(failure)?;
            s.written.insert(&line.id);
        }
        // Written before the activity reports: a line the workflow counts as delivered is in
        // the file.
        s.out.flush().map_err(failure)?;
        self.shared
            .progress
            .running
            .store(delivery.view.in_flight, Ordering::Relaxed);
        s.view = Some(delivery.view);
        Ok(())
    }
}

/// The id a line would run under (its `id`, or its line number), for duplicate detection of
/// lines read before a restart; a line that does not parse is under its line number.
fn id_of(line_no: u64, text: &str) -> String {
    match parse_input_line(line_no, text) {
        Ok(l) => l.id,
        Err(bad) => bad.id,
    }
}
