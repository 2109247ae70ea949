//! Running one spec file from the command line: the host context, the model, the workspace
//! tools, traces and recordings. The `subcontract run` command is a thin shell over this.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use subcontract::events::EventSink;
use subcontract::spec::{load_spec, spec_files, LoadError};
use subcontract::{RunResult, SubAgentSpec};

use super::host::HostArgs;
use super::{emit, OK, USAGE, VIOLATIONS};

/// What to run and how.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The spec file.
    pub spec: PathBuf,
    /// Its input.
    pub input: Value,
    /// The host: model, workspace, trace, prices, rate limits.
    pub host: HostArgs,
    /// Record the model exchanges here, for `replay:PATH`.
    pub record: Option<PathBuf>,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// A spec did not load.
    #[error("{0}")]
    Spec(#[from] LoadError),
    /// The model could not be made.
    #[error("{0}")]
    Model(#[from] subcontract::model::ModelError),
    /// The workspace is not a directory.
    #[error("{0}")]
    Workspace(#[from] subcontract::tool::workspace::WorkspaceError),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// One model call of the spec cannot fit its `max_cost_usd`: nothing was spent.
    #[error("{0}")]
    CallOverBudget(String),
    /// Anything else that stops a run from starting.
    #[error("{0}")]
    Other(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RunnerError + '_ {
    move |source| RunnerError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Loads every spec under `paths`; any that fails is reported and the whole set refused, so a
/// host never sees half a tool set.
pub fn load_all(paths: &[PathBuf]) -> Result<Vec<SubAgentSpec<Value, Value>>, String> {
    let mut specs = Vec::new();
    let mut failed = 0usize;
    for path in paths {
        let files = spec_files(path).map_err(|e| format!("{}: {e}", path.display()))?;
        for file in files {
            match load_spec(&file) {
                Ok(s) => specs.push(s),
                Err(e) => {
                    failed += 1;
                    eprintln!("{e}");
                }
            }
        }
    }
    if failed > 0 {
        return Err(format!("{failed} spec file(s) failed to load"));
    }
    if specs.is_empty() {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(format!("no specs (*.toml) under {}", shown.join(", ")));
    }
    Ok(specs)
}

/// What a command that runs a spec over many inputs starts from: its `--max-cost-usd`,
/// checked, and the spec with its siblings ([`load_with_siblings`]); `Err` is the line to
/// print before exiting with a usage error.
#[allow(clippy::type_complexity)]
pub fn limit_and_specs(
    max_cost_usd: Option<rust_decimal::Decimal>,
    spec: &Path,
) -> Result<
    (
        Option<rust_decimal::Decimal>,
        Vec<SubAgentSpec<Value, Value>>,
    ),
    String,
> {
    let limit = max_cost_usd
        .map(subcontract::budget::check_limit_usd)
        .transpose()
        .map_err(|e| format!("error: --max-cost-usd: {e}"))?;
    let specs = load_with_siblings(spec).map_err(|e| match e {
        // A spec's diagnostics are already lines of their own.
        RunnerError::Spec(_) => e.to_string(),
        e => format!("error: {e}"),
    })?;
    Ok((limit, specs))
}

/// The spec at `path` and every other spec in its directory (so that specs naming each other
/// as tools can run), the named one first.
pub fn load_with_siblings(path: &Path) -> Result<Vec<SubAgentSpec<Value, Value>>, RunnerError> {
    // A file that cannot be read is an I/O error (exit 2), not a diagnostic about its TOML.
    std::fs::File::open(path).map_err(io(path))?;
    let main = load_spec(path)?;
    let mut specs = vec![main];
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    for f in spec_files(dir).map_err(io(dir))? {
        if f.canonicalize().ok() == path.canonicalize().ok() {
            continue;
        }
        // A sibling that does not load is not this run's problem; `check` reports it.
        match load_spec(&f) {
            Ok(s) if s.name() != specs[0].name() => specs.push(s),
            Ok(_) => {}
            Err(e) => tracing::debug!(file = %f.display(), error = %e, "sibling spec skipped"),
        }
    }
    Ok(specs)
}

/// Runs the spec as a sub-agent (depth 1) of a host context that holds the workspace tools and
/// every sibling spec, with the spec's own limits and a budget forked from an unlimited root.
/// Cancelling `cancel` (Ctrl-C) stops the run, which then ends `cancelled`.
pub async fn run_spec(
    opts: &RunOptions,
    progress: Option<Arc<dyn EventSink>>,
    cancel: subcontract::CancellationToken,
) -> Result<RunResult<Value>, RunnerError> {
    let specs = load_with_siblings(&opts.spec)?;
    let mut host = opts
        .host
        .host(&specs, 1, std::slice::from_ref(&opts.spec))
        .await
        .map_err(RunnerError::Other)?
        .record(opts.record.clone());
    if let Some(p) = progress {
        host = host.sink(p);
    }
    let ctx = host
        .build()
        .map_err(|e| RunnerError::Other(e.to_string()))?
        .spec_name("cli")
        .cancellation(cancel)
        .build();
    // A first call that no budget of the spec can afford is said in one line, before
    // anything is spent, instead of a run that ends `budget_exhausted` after 0 turns.
    if let Some(over) = specs[0].call_over_budget_in(&ctx, &opts.input) {
        return Err(RunnerError::CallOverBudget(over.to_string()));
    }
    Ok(specs[0].run_child(&opts.input, &ctx).await)
}

/// Arguments of `run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// The spec file (.toml); specs beside it can be called as sub-agents.
    spec: PathBuf,
    /// The input: JSON text, or @FILE to read it from a file.
    #[arg(long, value_name = "JSON|@FILE")]
    input: String,
    #[command(flatten)]
    host: HostArgs,
    /// Record the model exchanges, to replay offline with --model replay:FILE.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// An acting spec's changes: write them as a patch (`git apply` takes it) to FILE. By
    /// default they go to a file outside the workspace, which stderr names.
    #[arg(long, value_name = "FILE")]
    changes_out: Option<PathBuf>,
    /// Apply an acting spec's changes to the workspace when the run completed (all or
    /// nothing: on a conflict nothing is applied and the exit code is 1). Without it the
    /// workspace is left as it was, byte for byte.
    #[arg(long)]
    apply: bool,
    #[command(flatten)]
    pub telemetry: super::telemetry::TelemetryArgs,
}

/// Exit code of a run stopped by Ctrl-C (128 + SIGINT, as shells report it).
const INTERRUPTED: u8 = 130;

/// Runs `run`; returns the exit code. `quiet`: no progress lines, only the outcome.
pub fn main(args: RunArgs, quiet: bool) -> u8 {
    let RunArgs {
        spec,
        input,
        host,
        record,
        changes_out,
        apply,
        telemetry: _,
    } = args;
    if let Some(out) = &changes_out {
        // Found before any model call, not after them all.
        if let Err(e) = super::changes::writable(out) {
            eprintln!("error: --changes-out {}: {e}", out.display());
            return USAGE;
        }
    }
    let workspace = host.workspace.clone();
    let input = match read_input(&input) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
    if let Err(e) = host.model_name() {
        eprintln!("error: {e}");
        return USAGE;
    }
    let opts = RunOptions {
        spec,
        input,
        host,
        record,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return USAGE;
        }
    };
    // Quiet, a run still says where changes no one applied were kept: that is part of how
    // it ended, not progress.
    let progress: Option<std::sync::Arc<dyn subcontract::EventSink>> = if quiet {
        Some(std::sync::Arc::new(KeptPatches))
    } else {
        Some(std::sync::Arc::new(Progress))
    };
    // Ctrl-C cancels the run: it stops, drains its sub-agents and ends `cancelled`, so the
    // outcome is reported and the trace holds every event, flushed when the host is dropped.
    let cancel = subcontract::CancellationToken::new();
    let interrupted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let result = runtime.block_on(async {
        let (stop, flag) = (cancel.clone(), interrupted.clone());
        let mut interrupts = super::interrupt::Interrupts::new();
        let watch = tokio::spawn(async move {
            if interrupts.next().await {
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                eprintln!("\ninterrupted: cancelling the run");
                stop.cancel();
            }
        });
        let r = run_spec(&opts, progress, cancel.clone()).await;
        watch.abort();
        r
    });
    let code = match result {
        // Spec diagnostics carry their own `file:line:col: error[code]:` prefix.
        Err(e @ RunnerError::Spec(_)) => {
            eprintln!("{e}");
            USAGE
        }
        Err(RunnerError::CallOverBudget(line)) => {
            eprintln!("error: {line}");
            VIOLATIONS
        }
        Err(e) => {
            eprintln!("error: {e}");
            USAGE
        }
        Ok(r) => {
            eprintln!(
                "{}: {} after {} turn(s), {}, {} USD in all, {:.0} ms",
                r.run_id,
                r.outcome,
                r.turns,
                r.usage,
                r.total_cost_usd.round_dp(6).normalize(),
                r.duration.as_secs_f64() * 1000.0
            );
            if let Some(limit) = r.cut_short {
                eprintln!(
                    "completed, cut short by {}: the answer may be incomplete",
                    limit.said()
                );
            }
            let applied = match &r.changes {
                Some(c) => super::changes::deliver(c, &workspace, changes_out.as_deref(), apply),
                None if apply => {
                    eprintln!("--apply: no changes to apply (the spec does not act, or the run did not complete)");
                    true
                }
                None => true,
            };
            match (r.outcome, r.output) {
                (subcontract::Outcome::Completed, Some(mut out)) => {
                    // stdout leaves the process too: an output that quotes a key loses it.
                    subcontract::redact::redact_value(&mut out);
                    emit(&format!("{out}\n"));
                    if applied {
                        OK
                    } else {
                        VIOLATIONS
                    }
                }
                (_, _) => {
                    eprintln!(
                        "error: {}",
                        r.error
                            .map_or_else(|| r.outcome.to_string(), |f| f.to_string())
                    );
                    VIOLATIONS
                }
            }
        }
    };
    if interrupted.load(std::sync::atomic::Ordering::SeqCst) {
        INTERRUPTED
    } else {
        code
    }
}

/// The value of `--input`: JSON text, or `@FILE` to read it from a file. Text that is not
/// JSON but names a file gets the hint to write `@`.
fn read_input(input: &str) -> Result<Value, String> {
    let text = match input.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).map_err(|e| format!("--input @{path}: {e}"))?,
        None => input.to_string(),
    };
    serde_json::from_str(&text).map_err(|e| {
        if !input.starts_with('@') && Path::new(input).is_file() {
            format!("--input is not JSON: {e}; to read the file `{input}`, write --input @{input}")
        } else {
            format!("--input is not JSON: {e}")
        }
    })
}

/// With `--quiet`: only where each set of changes no one applied was kept.
struct KeptPatches;

impl subcontract::EventSink for KeptPatches {
    fn emit(&self, e: &subcontract::Event) {
        if let subcontract::EventKind::Changes(c) = &e.kind {
            if c.patch.is_some() {
                eprintln!("{}", changes_line(&e.run_id, c));
            }
        }
    }
}

/// A run's `changes` event as its stderr line, with where they were kept if they were.
fn changes_line(run_id: &str, c: &subcontract::events::ChangesEvent) -> String {
    format!(
        "[{run_id}] changes {} ({}): {} file(s), +{} -{}{}",
        c.status,
        c.id,
        c.files,
        c.insertions,
        c.deletions,
        c.patch
            .as_deref()
            .map_or(String::new(), |p| format!(", kept in {p}"))
    )
}

/// Progress on stderr: one line per model call, tool call and finished run.
struct Progress;

impl subcontract::EventSink for Progress {
    fn emit(&self, e: &subcontract::Event) {
        use subcontract::EventKind;
        match &e.kind {
            EventKind::Started { model } => eprintln!("[{}] started ({model})", e.run_id),
            EventKind::ModelCall {
                turn, usage, error, ..
            } => match error {
                Some(err) => eprintln!("[{}] turn {turn}: model error: {err}", e.run_id),
                None => eprintln!("[{}] turn {turn}: {usage}", e.run_id),
            },
            EventKind::ToolCall {
                turn,
                tool,
                is_error,
                unknown,
                ..
            } => eprintln!(
                "[{}] turn {turn}: {tool}{}",
                e.run_id,
                match (unknown, is_error) {
                    (true, _) => " (no such tool)",
                    (false, true) => " (error)",
                    (false, false) => "",
                }
            ),
            EventKind::OutputRejected { turn, violations } => {
                let all: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
                eprintln!(
                    "[{}] turn {turn}: output rejected: {}",
                    e.run_id,
                    all.join("; ")
                )
            }
            EventKind::OutputUngrounded { turn, violations } => {
                let all: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
                eprintln!(
                    "[{}] turn {turn}: output ungrounded: {}",
                    e.run_id,
                    all.join("; ")
                )
            }
            EventKind::Command {
                program,
                exit_code,
                timed_out,
                error,
                ..
            } => match (error, exit_code, timed_out) {
                (Some(err), _, _) => eprintln!("[{}] $ {program}: refused: {err}", e.run_id),
                (_, _, true) => eprintln!("[{}] $ {program}: timed out", e.run_id),
                (_, Some(code), _) => eprintln!("[{}] $ {program}: exit {code}", e.run_id),
                (_, None, _) => eprintln!("[{}] $ {program}: stopped", e.run_id),
            },
            EventKind::Changes(c) => eprintln!("{}", changes_line(&e.run_id, c)),
            EventKind::GroundedFromInput { turn, paths } => eprintln!(
                "[{}] turn {turn}: grounded only by its input: {}",
                e.run_id,
                paths.join(", ")
            ),
            EventKind::Finished {
                outcome, cut_short, ..
            } => match cut_short {
                Some(l) => eprintln!("[{}] {outcome}, cut short by {}", e.run_id, l.said()),
                None => eprintln!("[{}] {outcome}", e.run_id),
            },
            // Kinds added later are not progress this view knows how to show.
            _ => {}
        }
    }
}
