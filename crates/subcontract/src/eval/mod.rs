//! Evals: what a spec *does* on a model. Graded cases (JSON Lines, [`cases`]) run as ordinary
//! runs of the spec, each case once per output mode and repeat, under one budget for the
//! whole eval; each run is graded ([`grade()`]) and the whole summarised per mode ([`report`]):
//! pass@1, pass^k, valid and wrong-but-valid rates, tokens, cost and time. Every model exchange
//! of every attempt can be recorded and replayed offline ([`record`]); a replay whose spec or
//! request changed stops, as stale, and never falls through to a live model.
//!
//! The engine of `subcontract eval` (book chapter *Evals*). From Rust:
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::json;
//! use subcontract::eval::{parse_cases, run_eval, EvalOptions, EvalSpec};
//! use subcontract::model::{ScriptStep, ScriptedModel};
//! use subcontract::{Ctx, SubAgentSpec};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let spec = SubAgentSpec::dynamic("capital",
//!         json!({"type": "object", "properties": {"country": {"type": "string", "maxLength": 60}}}),
//!         json!({"type": "object", "additionalProperties": false,
//!                "properties": {"city": {"type": "string", "maxLength": 60}}}))
//!     .description("Names a capital.").system("Name the capital.").build().unwrap();
//! let cases = parse_cases("capital.cases.jsonl",
//!     r#"{"id": "fr", "input": {"country": "France"}, "expect": {"fields": {"/city": "Paris"}}}"#).unwrap();
//! let model = Arc::new(ScriptedModel::queue("scripted:demo",
//!     vec![ScriptStep::submit(json!({"city": "Paris"}))]));
//! let report = run_eval(
//!     &[EvalSpec::new(spec)],
//!     &cases,
//!     &Default::default(),
//!     Ctx::builder(model),
//!     &EvalOptions::new("scripted:demo"),
//!     None,
//! ).await;
//! assert!(report.all_passed());
//! assert_eq!(report.summary[0].1.pass_at_1, 1.0);
//! # }
//! ```

pub mod cases;
pub mod files;
pub mod grade;
pub mod record;
pub mod report;

pub use cases::{
    can_produce, check_cases, parse_cases, read_cases, Case, CasesError, Expect, MAX_CASES,
    MAX_CASES_BYTES,
};
pub use files::{check_readable, open_report, prepare_recording, write_report, PathError};
pub use grade::grade;
pub use record::{recording_path, RecordedAttempt, RecordedError, RecordingHeader};
pub use report::{AttemptReport, ModeSummary, Report, NOT_RUN, STALE_RECORDING};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::budget::{Budget, BudgetError};
use crate::check::compat::Snapshot;
use crate::model::Model;
use crate::spec::{LoadError, OutputMode, SubAgentSpec};
use crate::{CtxBuilder, Failure, Outcome, RunResult};

use record::{read_recording, write_recording, Tape, Taped};

/// A spec's contract hash, the `contract` of its entry as `subcontract lock` writes it:
/// FNV-1a (hex) of that entry without the hash (name, description, system prompt, tools,
/// model, limits and both schemas, schema keys sorted). Any change a caller could see changes
/// it; the output mode does not.
pub fn contract_hash<I, O>(spec: &SubAgentSpec<I, O>) -> String {
    Snapshot::of(spec).contract.unwrap_or_default()
}

/// Loads the spec file at `path` with its output mode set to `mode` (the file's own mode
/// when `None`), exactly as [`load_spec`](crate::spec::load_spec) loads it otherwise.
pub fn load_spec_as(
    path: &Path,
    mode: Option<OutputMode>,
) -> Result<SubAgentSpec<Value, Value>, LoadError> {
    let spec = crate::spec::load_spec(path)?;
    let Some(mode) = mode else {
        return Ok(spec);
    };
    // The file read again, now that it is known to load: the same text unless it changed
    // in between, and then its errors are reported as for any load.
    let max = crate::spec::file::MAX_SPEC_FILE_BYTES;
    let text = crate::spec::file::read_regular(path, max).map_err(|e| LoadError {
        diagnostics: vec![crate::diag::Diagnostic {
            file: path.display().to_string(),
            line: 1,
            column: 1,
            severity: crate::diag::Severity::Error,
            code: crate::diag::codes::IO_ERROR.to_string(),
            spec: None,
            message: format!("cannot read the file: {e}"),
        }],
    })?;
    let text = String::from_utf8_lossy(&text);
    let (raw, diagnostics) = crate::spec::file::parse_spec(path, &text);
    match raw {
        Some(raw) => crate::spec::load::builder(&raw)
            .output_mode(mode)
            .build()
            .map_err(|e| LoadError {
                diagnostics: crate::spec::load::to_diagnostics(&raw, &e),
            }),
        None => Err(LoadError { diagnostics }),
    }
}

/// One spec an eval runs: the spec in one output mode.
#[derive(Debug, Clone)]
pub struct EvalSpec {
    /// The mode, as reports name it.
    pub mode: OutputMode,
    /// The spec, built with that mode.
    pub spec: SubAgentSpec<Value, Value>,
}

impl EvalSpec {
    /// The spec in its own mode.
    pub fn new(spec: SubAgentSpec<Value, Value>) -> Self {
        EvalSpec {
            mode: spec.output_mode(),
            spec,
        }
    }
}

/// Where an eval's model exchanges go, or come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Recording {
    /// Neither recorded nor replayed.
    #[default]
    Off,
    /// Every attempt's exchanges written under this directory.
    Record(PathBuf),
    /// Every attempt answered from this directory, with no live model.
    Replay(PathBuf),
}

/// How an eval runs.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// The model's name, as reports and recordings name it.
    pub model: String,
    /// Attempts per case and mode (at least 1).
    pub repeat: u32,
    /// Attempts in flight at once (at least 1).
    pub concurrency: usize,
    /// The budget of the whole eval; attempts it has no room for are [`NOT_RUN`].
    pub max_cost_usd: Option<Decimal>,
    /// Recording or replay.
    pub recording: Recording,
}

impl EvalOptions {
    /// One attempt per case, one at a time, no budget, no recording.
    pub fn new(model: impl Into<String>) -> Self {
        EvalOptions {
            model: model.into(),
            repeat: 1,
            concurrency: 1,
            max_cost_usd: None,
            recording: Recording::Off,
        }
    }
}

/// Judge specs by the path a case names them with.
pub type Judges = HashMap<String, SubAgentSpec<Value, Value>>;

/// Called after each attempt with it, the attempts done and the attempts in all.
pub type OnAttempt = dyn Fn(&AttemptReport, usize, usize) + Send + Sync;

/// Loads the judges the cases name, each path relative to `base` (the cases file's
/// directory). A judge's output must hold `pass` (boolean) and `reason` (string).
pub fn load_judges(cases: &[Case], base: &Path, file: &str) -> Result<Judges, CasesError> {
    let mut judges = Judges::new();
    let mut errors = Vec::new();
    for c in cases {
        let Some(path) = &c.expect.judge else {
            continue;
        };
        if judges.contains_key(path) {
            continue;
        }
        // A judge path is the cases file's to name: it stays in that file's directory, and it
        // is a regular spec file, never a FIFO or a device, checked before it is opened.
        let max = crate::spec::file::MAX_SPEC_FILE_BYTES;
        if let Err(e) = check_readable(&base.join(path), Some(base), max) {
            errors.push(format!("{file}:{}: the judge `{path}`: {e}", c.line));
            continue;
        }
        match crate::spec::load_spec(base.join(path)) {
            Ok(j) => {
                let schema: &Value = j.output_contract().schema();
                let shape = ["/pass", "/reason"]
                    .iter()
                    .all(|p| can_produce(schema, schema, p))
                    && schema.pointer("/properties/pass/type") == Some(&json!("boolean"));
                if shape {
                    judges.insert(path.clone(), j);
                } else {
                    errors.push(format!(
                        "{file}:{}: the judge `{path}` must output {{\"pass\": boolean, \"reason\": string}}",
                        c.line
                    ));
                }
            }
            Err(e) => errors.push(format!("{file}:{}: the judge `{path}`:\n{e}", c.line)),
        }
    }
    if errors.is_empty() {
        Ok(judges)
    } else {
        Err(CasesError { errors })
    }
}

/// The recordings an eval of `cases` in `specs` writes with `opts` (none unless it records):
/// what [`prepare_recording`] checks before the eval runs.
pub fn recordings(specs: &[EvalSpec], cases: &[Case], opts: &EvalOptions) -> Vec<PathBuf> {
    let Recording::Record(dir) = &opts.recording else {
        return Vec::new();
    };
    let mut paths = Vec::new();
    for case in cases {
        for s in specs {
            for attempt in 1..=opts.repeat.max(1) {
                paths.push(recording_path(dir, &opts.model, s.mode, &case.id, attempt));
            }
        }
    }
    paths
}

/// Runs every case of `cases` in every spec of `specs` (one per mode), `opts.repeat` times,
/// at most `opts.concurrency` at once, each attempt an ordinary child run of the spec under a
/// root context made from `host` (cloned per attempt, its models wrapped to count, record or
/// replay that attempt), all under one budget of `opts.max_cost_usd`. Nothing is spent past
/// that budget: an attempt it refuses before any spend is [`NOT_RUN`]. Check the cases first
/// ([`check_cases`]).
pub async fn run_eval(
    specs: &[EvalSpec],
    cases: &[Case],
    judges: &Judges,
    host: CtxBuilder,
    opts: &EvalOptions,
    on_attempt: Option<Arc<OnAttempt>>,
) -> Report {
    let first = specs.first().map(|s| &s.spec);
    let name = first.map(|s| s.name().to_string()).unwrap_or_default();
    let contract = first.map(contract_hash).unwrap_or_default();
    let budget = Budget::with_label("eval", opts.max_cost_usd, None);
    let repeat = opts.repeat.max(1);
    let mut jobs = Vec::new();
    for c in 0..cases.len() {
        for s in 0..specs.len() {
            for attempt in 1..=repeat {
                jobs.push((c, s, attempt));
            }
        }
    }
    let total = jobs.len();
    let shared = Arc::new(Shared {
        specs: specs.to_vec(),
        cases: cases.to_vec(),
        judges: judges.clone(),
        host,
        budget,
        contract: contract.clone(),
        opts: opts.clone(),
    });
    let permits = Arc::new(tokio::sync::Semaphore::new(opts.concurrency.max(1)));
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut set = tokio::task::JoinSet::new();
    for (n, (c, s, attempt)) in jobs.iter().copied().enumerate() {
        // Taken here, in order: attempts start in the order of the cases, so a budget that
        // runs out leaves the last ones not run.
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let (shared, done, on_attempt) = (shared.clone(), done.clone(), on_attempt.clone());
        set.spawn(async move {
            let a = run_attempt(&shared, n, c, s, attempt).await;
            drop(permit);
            let finished = done.fetch_add(1, Ordering::SeqCst) + 1;
            if let Some(f) = &on_attempt {
                f(&a, finished, total);
            }
            (n, a)
        });
    }
    let mut results: Vec<Option<AttemptReport>> = vec![None; total];
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((n, a)) => results[n] = Some(a),
            Err(e) => tracing::error!(error = %e, "an eval attempt panicked"),
        }
    }
    let attempts: Vec<AttemptReport> = results
        .into_iter()
        .enumerate()
        .map(|(n, a)| {
            a.unwrap_or_else(|| {
                let (c, s, attempt) = jobs[n];
                let mut a = empty(&cases[c].id, specs[s].mode, attempt, "model_error");
                a.failed.push("the attempt panicked".into());
                a
            })
        })
        .collect();
    let modes: Vec<String> = specs.iter().map(|s| s.mode.as_str().to_string()).collect();
    Report::new(name, contract, opts.model.clone(), &modes, attempts)
}

struct Shared {
    specs: Vec<EvalSpec>,
    cases: Vec<Case>,
    judges: Judges,
    host: CtxBuilder,
    budget: Budget,
    contract: String,
    opts: EvalOptions,
}

fn empty(id: &str, mode: OutputMode, attempt: u32, outcome: &str) -> AttemptReport {
    AttemptReport {
        id: id.to_string(),
        mode: mode.as_str().to_string(),
        attempt,
        outcome: outcome.to_string(),
        valid: false,
        passed: false,
        failed: Vec::new(),
        turns: 0,
        requests: 0,
        input_tokens: 0,
        output_tokens: 0,
        cost_usd: 0.0,
        wall_ms: 0,
        stale: None,
        output: None,
        cut_short: None,
    }
}

/// Whether a run was refused before any spend by the eval's budget (not by the spec's own:
/// the call asked for no more than the spec's cap allows).
fn refused_by_eval(r: &RunResult<Value>, spec_cap: Option<Decimal>, eval_limited: bool) -> bool {
    if !eval_limited {
        return false;
    }
    match r.error.as_ref().filter(|f| f.refused_before_spend()) {
        Some(f) => match f.budget_error() {
            Some(BudgetError::Usd { requested, .. }) => {
                spec_cap.is_none_or(|cap| *requested <= cap)
            }
            _ => false,
        },
        None => false,
    }
}

async fn run_attempt(shared: &Shared, n: usize, c: usize, s: usize, attempt: u32) -> AttemptReport {
    let case = &shared.cases[c];
    let EvalSpec { mode, spec } = &shared.specs[s];
    let opts = &shared.opts;
    let mut report = empty(&case.id, *mode, attempt, "");
    if shared.budget.remaining_usd() == Some(Decimal::ZERO) {
        report.outcome = NOT_RUN.into();
        report
            .failed
            .push("not run: the eval's budget is spent".into());
        return report;
    }
    let (tape, replay, record_to) = match &opts.recording {
        Recording::Off => (Tape::new(false), false, None),
        Recording::Record(dir) => (
            Tape::new(true),
            false,
            Some(recording_path(dir, &opts.model, *mode, &case.id, attempt)),
        ),
        Recording::Replay(dir) => {
            let path = recording_path(dir, &opts.model, *mode, &case.id, attempt);
            match read_recording(&path) {
                Ok((h, _)) if h.contract != shared.contract => {
                    return stale(
                        report,
                        format!(
                            "spec `{}` changed since it was recorded: contract {} then, {} now",
                            spec.name(),
                            h.contract,
                            shared.contract
                        ),
                    )
                }
                Ok((h, _))
                    if h.case != case.id
                        || h.model != opts.model
                        || h.mode != mode.as_str()
                        || h.attempt != attempt
                        || h.spec != spec.name() =>
                {
                    return stale(
                        report,
                        format!(
                            "{} was recorded for spec `{}`, case `{}`, mode `{}`, attempt {} on `{}`",
                            path.display(),
                            h.spec,
                            h.case,
                            h.mode,
                            h.attempt,
                            h.model
                        ),
                    )
                }
                Ok((_, exchanges)) => (Tape::replaying(exchanges), true, None),
                Err(e) => {
                    return stale(
                        report,
                        format!("no usable recording at {}: {e}", path.display()),
                    )
                }
            }
        }
    };
    let tape = Arc::new(tape);
    let wrap_tape = tape.clone();
    let ctx = shared
        .host
        .clone()
        .budget(shared.budget.clone())
        .run_id(format!("eval-{}", n + 1))
        .spec_name("eval")
        .map_models(move |m: Arc<dyn Model>| {
            let inner: Arc<dyn Model> = if replay {
                wrap_tape.replay_for(m.id())
            } else {
                m
            };
            Arc::new(Taped {
                inner,
                tape: wrap_tape.clone(),
                replay,
            })
        })
        .build();
    let started = Instant::now();
    let r = spec.run_child(&case.input, &ctx).await;
    let mut cost = r.total_cost_usd;
    report.turns = r.turns;
    if refused_by_eval(&r, spec.limits().max_cost_usd, opts.max_cost_usd.is_some()) {
        report.outcome = NOT_RUN.into();
        report
            .failed
            .push("not run: the eval's budget has no room for it".into());
    } else {
        report.outcome = r.outcome.as_str().to_string();
        report.valid = r.outcome == Outcome::Completed && r.output.is_some();
        report.failed = grade(&case.expect, &report.outcome, r.output.as_ref());
        // An unexpected outcome says why the run ended so (at most 500 characters of it, a
        // cut marked: a provider's error may carry a page of text).
        if let (Some(first), Some(err)) = (report.failed.first_mut(), &r.error) {
            if first.starts_with("outcome:") {
                let why = crate::contract::truncate_chars(&err.to_string(), 500);
                first.push_str(&format!(" ({why})"));
            }
        }
        if let (Some(path), Some(output)) = (&case.expect.judge, &r.output) {
            match shared.judges.get(path) {
                Some(judge) => {
                    let limited = opts.max_cost_usd.is_some();
                    let (verdict, spent) = run_judge(judge, case, output, &ctx, limited).await;
                    cost += spent;
                    match verdict {
                        Judged::Verdict(failed) => report.failed.extend(failed),
                        // No verdict is not a wrong answer: the attempt could not be
                        // graded, and is reported as not run.
                        Judged::NotRun(why) => {
                            report.outcome = NOT_RUN.into();
                            report.valid = false;
                            report.failed = vec![why];
                        }
                    }
                }
                None => report.failed.push(format!("judge `{path}`: not loaded")),
            }
        }
        report.passed = report.failed.is_empty();
        report.output = r.output.clone();
        report.cut_short = r.cut_short;
    }
    report.wall_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    report.requests = tape.requests.load(Ordering::Relaxed);
    report.input_tokens = tape.input_tokens.load(Ordering::Relaxed);
    report.output_tokens = tape.output_tokens.load(Ordering::Relaxed);
    report.cost_usd = report::usd(cost);
    if let Some(why) = tape.stale() {
        return stale(report, why);
    }
    if let Some(path) = record_to {
        let header = RecordingHeader {
            eval_recording: record::RECORDING_VERSION,
            spec: spec.name().to_string(),
            contract: shared.contract.clone(),
            model: opts.model.clone(),
            mode: mode.as_str().to_string(),
            case: case.id.clone(),
            attempt,
        };
        if let Err(e) = write_recording(&path, &header, &tape.take_recorded()) {
            report.passed = false;
            report.failed.push(format!(
                "the recording {} could not be written: {e}",
                path.display()
            ));
        }
    }
    report
}

fn stale(mut report: AttemptReport, why: String) -> AttemptReport {
    report.outcome = STALE_RECORDING.into();
    report.valid = false;
    report.passed = false;
    report.failed = vec![format!("stale recording: {why}")];
    report.stale = Some(why);
    report
}

/// What a judge said.
enum Judged {
    /// The failures it reports (none: the output passed).
    Verdict(Vec<String>),
    /// A budget refused it before any spend (the eval's, its own cap, a call cap): why, as
    /// the attempt's one failure.
    NotRun(String),
}

/// Runs the judge on `{case, output}` under the attempt's context (its budget, its model);
/// returns its verdict and what it cost.
async fn run_judge(
    judge: &SubAgentSpec<Value, Value>,
    case: &Case,
    output: &Value,
    ctx: &crate::Ctx,
    eval_limited: bool,
) -> (Judged, Decimal) {
    let input = json!({"case": {"id": case.id, "input": case.input}, "output": output});
    let r = judge.run_child(&input, ctx).await;
    let name = judge.name();
    if refused_by_eval(&r, judge.limits().max_cost_usd, eval_limited) {
        let why = format!("not run: the eval's budget has no room for the judge `{name}`");
        return (Judged::NotRun(why), r.total_cost_usd);
    }
    if let Some(f @ (Failure::Budget { .. } | Failure::NoRoomToAnswer { .. })) = &r.error {
        if f.refused_before_spend() {
            let why = format!("not run: the judge `{name}` was refused: {f}");
            return (Judged::NotRun(why), r.total_cost_usd);
        }
    }
    let verdict = match (&r.outcome, &r.output) {
        (Outcome::Completed, Some(v)) => match v.get("pass").and_then(Value::as_bool) {
            Some(true) => Vec::new(),
            _ => vec![format!(
                "judge `{}`: {}",
                judge.name(),
                v.get("reason").and_then(Value::as_str).unwrap_or("failed")
            )],
        },
        (o, _) => vec![format!("judge `{}`: ended {o}", judge.name())],
    };
    (Judged::Verdict(verdict), r.total_cost_usd)
}
