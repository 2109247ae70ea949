//! `subcontract eval`: graded cases of one spec on a model, per output mode, as a report
//! (a table, JSON or JUnit). A thin shell over `subcontract::eval`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::ValueEnum;
use rust_decimal::Decimal;
use serde_json::Value;

use subcontract::eval::{
    check_cases, load_judges, load_spec_as, open_report, prepare_recording, read_cases, recordings,
    run_eval, write_report, AttemptReport, EvalOptions, EvalSpec, Recording, Report,
};
use subcontract::model::{Model, ReplayModel};
use subcontract::spec::OutputMode;

use super::host::HostArgs;
use super::run::limit_and_specs;
use super::{emit, OK, USAGE, VIOLATIONS};

/// Exit code: a replay stopped on a recording that no longer fits the spec or its requests.
pub const STALE: u8 = 3;

/// Arguments of `eval`.
#[derive(clap::Args)]
pub struct EvalArgs {
    /// The spec file (.toml); specs beside it can be called as sub-agents.
    spec: PathBuf,
    /// The cases (JSON Lines of {"id", "input", "expect"}); default: SPEC with `.toml`
    /// replaced by `.cases.jsonl`.
    #[arg(long, value_name = "FILE")]
    cases: Option<PathBuf>,
    /// Attempts per case and mode (pass^k is over these).
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
    /// Output modes to run each case in, comma-separated: auto, tool, native, prompted
    /// (default: the spec's own).
    #[arg(long, value_name = "MODES", value_delimiter = ',', value_parser = parse_mode)]
    modes: Vec<OutputMode>,
    /// Keep every model exchange of every attempt under DIR, to replay offline.
    #[arg(long, value_name = "DIR", conflicts_with = "replay")]
    record: Option<PathBuf>,
    /// Answer every model call from the recordings under DIR (no network); a recording
    /// that no longer fits the spec or its requests stops its case (exit 3).
    #[arg(long, value_name = "DIR")]
    replay: Option<PathBuf>,
    /// Total USD limit of the whole eval; attempts it has no room for are `not_run`.
    #[arg(long, value_name = "USD")]
    max_cost_usd: Option<Decimal>,
    /// Attempts in flight at most.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    concurrency: u32,
    /// The report's format.
    #[arg(long, value_enum, default_value_t = EvalFormat::Table)]
    format: EvalFormat,
    /// Write the report to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Exit 0 when at least this share of all attempts passed (0 to 1), not only when all did.
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    min_pass: Option<f64>,
    #[command(flatten)]
    host: HostArgs,
    /// OpenTelemetry export of every attempt's spans (`--otlp URL`, or the `OTEL_*` variables).
    #[command(flatten)]
    pub telemetry: super::telemetry::TelemetryArgs,
}

/// The report's formats.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EvalFormat {
    /// The summary per mode and the attempts that did not pass.
    Table,
    /// The whole report as one JSON object.
    Json,
    /// JUnit XML, one test case per case and mode.
    Junit,
}

fn parse_mode(s: &str) -> Result<OutputMode, String> {
    s.trim().parse::<OutputMode>().map_err(|e| e.to_string())
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("`{s}` is not a rate between 0 and 1")),
    }
}

/// Runs `eval`; returns the exit code: 0 every case passed (or the pass rate reached
/// --min-pass), 1 not, 2 usage or file error, 3 a stale recording.
pub fn main(args: EvalArgs, quiet: bool) -> u8 {
    super::block_on(eval(args, quiet))
}

async fn eval(args: EvalArgs, quiet: bool) -> u8 {
    let (limit, specs) = match limit_and_specs(args.max_cost_usd, &args.spec) {
        Ok(found) => found,
        Err(line) => {
            eprintln!("{line}");
            return USAGE;
        }
    };
    let modes: Vec<Option<OutputMode>> = if args.modes.is_empty() {
        vec![None]
    } else {
        // Each mode once, in the order given (`auto,tool,auto` is `auto,tool`).
        let mut m: Vec<OutputMode> = Vec::new();
        for mode in &args.modes {
            if !m.contains(mode) {
                m.push(*mode);
            }
        }
        m.into_iter().map(Some).collect()
    };
    let mut eval_specs = Vec::new();
    for mode in modes {
        match load_spec_as(&args.spec, mode) {
            Ok(s) => eval_specs.push(EvalSpec::new(s)),
            Err(e) => {
                eprintln!("{e}");
                return USAGE;
            }
        }
    }
    let cases_path = args
        .cases
        .clone()
        .unwrap_or_else(|| args.spec.with_extension("cases.jsonl"));
    let shown = cases_path.display().to_string();
    let checked = read_cases(&cases_path).and_then(|cases| {
        check_cases(&eval_specs[0].spec, &shown, &cases)?;
        let base = cases_path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let judges = load_judges(&cases, base, &shown)?;
        Ok((cases, judges))
    });
    let (cases, judges) = match checked {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            eprintln!("error: nothing was run");
            return USAGE;
        }
    };
    if cases.is_empty() {
        eprintln!("error: {shown}: no cases");
        return USAGE;
    }
    let model = match model_name(&args) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
    let recording = match (&args.record, &args.replay) {
        (Some(dir), _) => Recording::Record(dir.clone()),
        (None, Some(dir)) => Recording::Replay(dir.clone()),
        (None, None) => Recording::Off,
    };
    let host = match host(&args, &model, &specs).await {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
    // A cap on an unpriced model would never bind: every call counts as 0 USD. Said before
    // anything runs, not discovered on the bill.
    if let (Some(cap), None) = (limit, args.replay.as_ref()) {
        if host.clone().build().prices().get(&model).is_none() {
            eprintln!(
                "error: --max-cost-usd {cap} cannot bind: no price is known for `{model}`, so every call would count as 0 USD; give it one with --prices FILE"
            );
            eprintln!("error: nothing was run");
            return USAGE;
        }
    }
    let opts = EvalOptions {
        model: model.clone(),
        repeat: args.repeat,
        concurrency: args.concurrency as usize,
        max_cost_usd: limit,
        recording,
    };
    // Everything the eval writes, made ready before its first (paid) model call: the report's
    // file opened, the recordings' tree made and checked for links leading out of it.
    let mut out = match args.out.as_deref().map(open_report).transpose() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("error: --out {e}");
            eprintln!("error: nothing was run");
            return USAGE;
        }
    };
    if let Recording::Record(dir) = &opts.recording {
        if let Err(e) = prepare_recording(dir, &recordings(&eval_specs, &cases, &opts)) {
            eprintln!("error: --record {e}");
            eprintln!("error: nothing was run");
            return USAGE;
        }
    }
    let progress: Option<Arc<subcontract::eval::OnAttempt>> =
        (!quiet && std::io::stderr().is_terminal()).then(|| {
            Arc::new(|a: &AttemptReport, done: usize, total: usize| {
                eprintln!(
                    "[{done}/{total}] {} [{} #{}] {}{}",
                    a.id,
                    a.mode,
                    a.attempt,
                    a.outcome,
                    if a.passed { "" } else { " (not passed)" }
                );
            }) as Arc<subcontract::eval::OnAttempt>
        });
    let report = run_eval(&eval_specs, &cases, &judges, host, &opts, progress).await;
    let text = match args.format {
        EvalFormat::Table => report.to_table(),
        EvalFormat::Json => format!("{}\n", report.to_json()),
        EvalFormat::Junit => report.to_junit(),
    };
    match (&mut out, &args.out) {
        (Some(file), Some(path)) => {
            if let Err(e) = write_report(file, &text) {
                eprintln!("error: {}: {e}", path.display());
                return USAGE;
            }
        }
        _ => emit(&text),
    }
    verdict(&args, &report, &model, &cases_path)
}

/// The model's name: `--model` (or `$SUBCONTRACT_MODEL`); for a replay without one, the one
/// model its recordings were made on.
fn model_name(args: &EvalArgs) -> Result<String, String> {
    if let Ok(m) = args.host.model_name() {
        return Ok(m);
    }
    let Some(dir) = &args.replay else {
        return args.host.model_name();
    };
    let models = subcontract::eval::record::recorded_models(dir);
    match models.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(format!(
            "no recordings under {}; pass --model, or record them with --record",
            dir.display()
        )),
        many => Err(format!(
            "{} holds recordings of several models ({}); pass --model",
            dir.display(),
            many.join(", ")
        )),
    }
}

/// The root context: the same host as `run` builds; for a replay, with models that answer
/// nothing (each attempt's replay answers instead), so no call can reach the network.
async fn host(
    args: &EvalArgs,
    model: &str,
    specs: &[subcontract::SubAgentSpec<Value, Value>],
) -> Result<subcontract::CtxBuilder, String> {
    let spec_paths = std::slice::from_ref(&args.spec);
    let builder = if args.replay.is_some() {
        let mut offline = args.host.clone();
        offline.model = Some("example".into());
        offline.base_url = None;
        offline
            .host(specs, 1, spec_paths)
            .await?
            .model(silent(model))
            .resolver(|name| Ok(silent(name)))
    } else {
        let mut host = args.host.clone();
        host.model = Some(model.to_string());
        host.host(specs, 1, spec_paths).await?
    };
    builder
        .build()
        .map(|b| b.spec_name("eval"))
        .map_err(|e| e.to_string())
}

/// A model named `id` that answers nothing.
fn silent(id: &str) -> Arc<dyn Model> {
    Arc::new(ReplayModel::new(id, []))
}

/// The exit code, and on stderr what a stale recording needs.
fn verdict(args: &EvalArgs, report: &Report, model: &str, cases: &Path) -> u8 {
    let stale: Vec<&AttemptReport> = report.stale().collect();
    if !stale.is_empty() {
        let mut reasons: Vec<&str> = stale.iter().filter_map(|a| a.stale.as_deref()).collect();
        reasons.sort_unstable();
        reasons.dedup();
        for r in reasons.iter().take(5) {
            eprintln!("stale recording: {r}");
        }
        if reasons.len() > 5 {
            eprintln!("… and {} more", reasons.len() - 5);
        }
        let dir = args.replay.as_deref().unwrap_or(Path::new("DIR"));
        eprintln!(
            "error: {} attempt(s) of spec `{}` stopped on stale recordings; record them again with:\n  {}",
            stale.len(),
            report.spec,
            rerecord(args, model, cases, dir)
        );
        return STALE;
    }
    let rate = report.pass_rate();
    if report.all_passed() || args.min_pass.is_some_and(|min| report.passes_at_least(min)) {
        OK
    } else {
        if let Some(min) = args.min_pass {
            eprintln!(
                "error: {:.1}% of attempts passed, under --min-pass {min}",
                rate * 100.0
            );
        }
        VIOLATIONS
    }
}

/// The command that records this eval again: this very command line, every flag as given,
/// with `--replay DIR` turned into `--record DIR` (and the model named, if it came from the
/// recordings).
fn rerecord(_args: &EvalArgs, model: &str, _cases: &Path, dir: &Path) -> String {
    let q = |s: &str| -> String {
        if !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./:@=,+".contains(c))
        {
            s.to_string()
        } else {
            format!("'{}'", s.replace('\'', "'\\''"))
        }
    };
    let given: Vec<String> = std::env::args().skip(1).collect();
    let mut out: Vec<String> = vec!["subcontract".into()];
    let mut named_model = false;
    let mut i = 0;
    while i < given.len() {
        let a = &given[i];
        if a == "--replay" {
            i += 2;
            continue;
        }
        if a.starts_with("--replay=") {
            i += 1;
            continue;
        }
        named_model |= a == "--model" || a.starts_with("--model=");
        out.push(q(a));
        i += 1;
    }
    if !named_model {
        out.push("--model".into());
        out.push(q(model));
    }
    out.push("--record".into());
    out.push(q(&dir.display().to_string()));
    out.join(" ")
}
