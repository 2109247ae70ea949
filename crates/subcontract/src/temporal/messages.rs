//! What the workflow, the starter's activities and the workers' activity send each other (as
//! JSON payloads, so every field is plain data).

use std::collections::VecDeque;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ledger::SpendLedger;
use crate::batch::ResultLine;

/// How a batch was started: fixed for its whole life, continue-as-new included.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchParams {
    /// The batch's id (the workflow id is `subcontract-batch-{id}`).
    pub batch_id: String,
    /// The spec every input runs through, by name; workers load it from their spec directories.
    pub spec: String,
    /// Inputs in flight at most.
    pub concurrency: u32,
    /// The starter's own task queue: its `read_inputs` and `write_results` activities.
    pub starter_queue: String,
    /// A sub-agent attempt that has not recorded its spend for this long is presumed lost
    /// (its worker killed) and is retried elsewhere.
    pub heartbeat_timeout_ms: u64,
    /// One attempt at one sub-agent run takes at most this long.
    pub attempt_timeout_ms: u64,
    /// History events past which a workflow run stops starting children, drains, and continues
    /// as new.
    pub history_events: u32,
    /// The input file, as the starter named it (full path): a starter re-attaching with
    /// another file is refused.
    pub inputs: String,
    /// The output file, `host:full path`: a second starter writing elsewhere is refused (the
    /// results would be split between two files).
    pub out: String,
}

/// One input: its id, its value, and where it is in the input file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// Its id (the input line's, or its line number).
    pub id: String,
    /// The input.
    pub input: Value,
    /// Its 1-based line number.
    pub line: u64,
    /// The byte offset where its line starts.
    pub offset: u64,
}

/// Running totals of one batch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Results with outcome `completed`.
    pub completed: u64,
    /// Other results.
    pub failed: u64,
    /// Inputs the batch's money could not start (not written: a later batch may run them).
    pub refused: u64,
    /// Attempts of sub-agent runs that were lost and retried (a worker killed mid-run).
    pub retried_attempts: u64,
}

/// The workflow's input, and what it carries over a continue-as-new.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Carry {
    /// How the batch was started.
    pub params: BatchParams,
    /// The money.
    pub ledger: SpendLedger,
    /// Input lines consumed so far (the starter's read position).
    pub cursor: u64,
    /// The byte offset of line `cursor + 1`.
    pub offset: u64,
    /// Every input line has been read.
    pub eof: bool,
    /// Inputs read and not yet started (never carried over a continue-as-new: the read
    /// position goes back to the first of them instead, so the carry stays small).
    pub pending: VecDeque<Item>,
    /// Sub-agent runs started so far (numbers run ids).
    pub started: u64,
    /// Running totals.
    pub tally: Tally,
    /// The batch's money is gone: no more inputs start.
    pub out_of_money: bool,
    /// How many times the workflow continued as new.
    pub generation: u32,
    /// Part of every run id: a hash of the first workflow run's id (run ids stay unique when a
    /// batch id is started anew).
    pub stamp: String,
}

/// `read_inputs`: the next inputs after `cursor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadRequest {
    /// Lines consumed so far.
    pub cursor: u64,
    /// The byte offset of line `cursor + 1` (where to seek when the reader is elsewhere).
    pub offset: u64,
    /// At most this many inputs.
    pub max_items: u32,
    /// At most about this many bytes of inputs (one input is always returned whole).
    pub max_bytes: u64,
}

/// What `read_inputs` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadReply {
    /// Inputs to run (ids already in the output, duplicates and invalid lines are handled by
    /// the starter and never come here).
    pub items: Vec<Item>,
    /// Lines consumed after these.
    pub cursor: u64,
    /// The byte offset of line `cursor + 1`.
    pub offset: u64,
    /// The file is read to its end.
    pub eof: bool,
}

/// The ledger as the starter shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerView {
    /// The money.
    pub ledger: SpendLedger,
    /// Sub-agent runs in flight.
    pub in_flight: u64,
    /// Running totals.
    pub tally: Tally,
}

/// `write_results`: finished inputs for the output file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// Result lines, in the order they finished.
    pub lines: Vec<ResultLine>,
    /// The ledger when they were sent.
    pub view: LedgerView,
}

/// `run_subagent`: one input through one spec, with a cap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    /// The spec's name.
    pub spec: String,
    /// The input's id.
    pub id: String,
    /// The input.
    pub input: Value,
    /// The most this input may cost, every attempt included (`None`: no limit).
    pub cap_usd: Option<Decimal>,
    /// The run id of the host context the sub-agent runs under.
    pub run_id: String,
}

/// What one input's run came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Its result line; `cost_usd` counts every attempt, lost ones at their last record.
    pub line: ResultLine,
    /// Refused by its budget before its first model call: nothing spent in this attempt.
    pub refused_at_start: bool,
    /// Earlier attempts of this input that were lost.
    pub lost_attempts: u32,
    /// Why the batch cannot go on (a worker without the spec): it stops once the runs in
    /// flight have reported, after recording this line if it cost anything.
    pub fatal: Option<String>,
}

/// The spend an attempt records before each model call: its heartbeat's details.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendRecord {
    /// What this input may have cost so far, earlier attempts and the call about to be made
    /// (at its worst case) included.
    pub charged_usd: Decimal,
}

/// How a batch ended (the workflow's result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchOutcome {
    /// Running totals.
    pub tally: Tally,
    /// The money.
    pub ledger: SpendLedger,
    /// Inputs were left unstarted (the money ran out).
    pub not_started: bool,
    /// Continue-as-new count.
    pub generations: u32,
}
