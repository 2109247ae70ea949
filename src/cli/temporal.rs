//! `subcontract batch --engine temporal://…` (the starter) and `subcontract worker`: batches on
//! Temporal (the engine is [`subcontract::temporal`], feature `temporal`). Without the feature
//! the flags still parse, and `--engine` says how to get it.

use std::path::{Path, PathBuf};

use rust_decimal::Decimal;
use serde_json::Value;

use subcontract::SubAgentSpec;

use super::host::HostArgs;
use super::USAGE;

/// Where a batch runs when not in this process.
#[derive(clap::Args, Clone, Default)]
pub struct EngineArgs {
    /// Run the batch on Temporal: temporal://HOST:PORT. Workers (`subcontract worker`) run the
    /// inputs; this command reads them and writes --out. The same command re-attaches.
    #[arg(long, value_name = "temporal://HOST:PORT")]
    pub engine: Option<String>,
    /// Temporal namespace.
    #[arg(long, value_name = "NS", requires = "engine")]
    pub namespace: Option<String>,
    /// The workers' task queue.
    #[arg(long, value_name = "QUEUE", requires = "engine")]
    pub task_queue: Option<String>,
    /// The batch's id on Temporal (default: from the spec's name and --out's full path), so
    /// the same command re-attaches to a batch still running.
    #[arg(long, value_name = "ID", requires = "engine")]
    pub batch_id: Option<String>,
    /// Seconds after which a run that has not recorded its spend is presumed lost (its worker
    /// gone) and retried on another worker.
    #[arg(long, value_name = "SECS", default_value_t = 30, requires = "engine",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub heartbeat_timeout: u64,
    /// History events per workflow run before it continues as new (Temporal keeps at most
    /// 51,200 per run; about six per input).
    #[arg(long, value_name = "N", default_value_t = 9000, requires = "engine",
          value_parser = clap::value_parser!(u32).range(500..=40_000))]
    pub history_events: u32,
}

/// The most inputs in flight on Temporal: the workflow looks at each of them whenever one
/// finishes.
const MAX_CONCURRENCY: u32 = 2_000;

/// Runs a batch on the engine (the starter). Exit codes as a local batch's.
#[allow(clippy::too_many_arguments)]
pub async fn batch(
    engine: &EngineArgs,
    host: &HostArgs,
    spec: &SubAgentSpec<Value, Value>,
    inputs: &Path,
    out: &Path,
    concurrency: u32,
    limit: Option<Decimal>,
    quiet: bool,
) -> u8 {
    let set = host.set_flags();
    if !set.is_empty() {
        eprintln!(
            "error: {} belong to the workers on Temporal: pass them to `subcontract worker` (this command only reads the inputs and writes --out)",
            set.join(", ")
        );
        return USAGE;
    }
    if limit.is_some() && spec.limits().max_cost_usd.is_none() {
        eprintln!(
            "error: spec `{}` has no max_cost_usd: on Temporal each input's cap is reserved before it is scheduled, so a batch with --max-cost-usd needs one (set [limits] max_cost_usd)",
            spec.name()
        );
        return USAGE;
    }
    // One workflow run holds `history_events` plus what its children in flight add while it
    // drains (about six events each) under Temporal's 51,200.
    if concurrency > MAX_CONCURRENCY
        || u64::from(engine.history_events) + 6 * u64::from(concurrency) > 45_000
    {
        eprintln!(
            "error: on Temporal --concurrency is at most {MAX_CONCURRENCY}, and --history-events + 6 × --concurrency at most 45,000 (Temporal keeps 51,200 events per workflow run)"
        );
        return USAGE;
    }
    imp::batch(engine, spec, inputs, out, concurrency, limit, quiet).await
}

#[cfg(not(feature = "temporal"))]
mod imp {
    use super::*;

    pub async fn batch(
        _engine: &EngineArgs,
        _spec: &SubAgentSpec<Value, Value>,
        _inputs: &Path,
        _out: &Path,
        _concurrency: u32,
        _limit: Option<Decimal>,
        _quiet: bool,
    ) -> u8 {
        eprintln!("error: this build has no Temporal engine: build with `cargo build --release --features temporal`");
        USAGE
    }
}

/// Arguments of `worker`.
#[derive(clap::Args)]
pub struct WorkerArgs {
    /// The Temporal service: temporal://HOST:PORT.
    #[arg(long, value_name = "temporal://HOST:PORT")]
    pub engine: String,
    /// Temporal namespace.
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// The task queue to serve.
    #[arg(long, value_name = "QUEUE")]
    pub task_queue: Option<String>,
    /// Sub-agent runs at once on this worker.
    #[arg(long, value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_runs: u32,
    #[command(flatten)]
    pub host: HostArgs,
    /// Spec files or directories (searched recursively for *.toml): the specs batches may name.
    #[arg(default_value = "specs/")]
    pub specs: Vec<PathBuf>,
}

#[cfg(feature = "temporal")]
mod imp {
    use std::sync::Arc;
    use std::time::Duration;

    use subcontract::batch::{Ledger, Progress, Summary};
    use subcontract::temporal::{self, Engine, SubAgentActivities, TemporalBatch};

    use super::*;

    pub async fn batch(
        engine: &EngineArgs,
        spec: &SubAgentSpec<Value, Value>,
        inputs: &Path,
        out: &Path,
        concurrency: u32,
        limit: Option<Decimal>,
        quiet: bool,
    ) -> u8 {
        let url = engine.engine.as_deref().unwrap_or_default();
        let e = match Engine::parse(
            url,
            engine.namespace.as_deref(),
            engine.task_queue.as_deref(),
        ) {
            Ok(e) => e,
            Err(err) => {
                eprintln!("error: --engine {err}");
                return USAGE;
            }
        };
        if let Err(err) = std::fs::File::open(inputs) {
            eprintln!("error: {}: {err}", inputs.display());
            return USAGE;
        }
        let ledger = match Ledger::read(out).and_then(|mut l| {
            l.bind(out, subcontract::batch::Owner::new(&spec.erase(), inputs))?;
            Ok(l)
        }) {
            Ok(l) => l,
            Err(err) => {
                eprintln!("error: {err}");
                return USAGE;
            }
        };
        let batch_id = engine
            .batch_id
            .clone()
            .unwrap_or_else(|| temporal::default_batch_id(spec.name(), out));
        let b = TemporalBatch {
            batch_id,
            spec: spec.name().to_string(),
            spec_cap_usd: spec.limits().max_cost_usd,
            limit_usd: limit,
            concurrency,
            heartbeat_timeout: Duration::from_secs(engine.heartbeat_timeout),
            // A whole attempt: the spec's own timeout when it has one, with room to report.
            attempt_timeout: spec.limits().timeout + Duration::from_secs(60),
            history_events: engine.history_events,
            inputs: inputs.to_path_buf(),
            out: out.to_path_buf(),
        };
        eprintln!(
            "batch {} on Temporal at {} (workflow {}, task queue {}){}",
            b.batch_id,
            e.target,
            temporal::workflow_id(&b.batch_id),
            e.task_queue,
            if ledger.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} input(s) already in {} ({} USD spent)",
                    ledger.len(),
                    out.display(),
                    ledger.spent_usd().round_dp(6).normalize()
                )
            }
        );
        let progress = Arc::new(Progress::default());
        let stop = subcontract::CancellationToken::new();
        let interrupt = {
            let stop = stop.clone();
            let mut interrupts = super::super::interrupt::Interrupts::new();
            tokio::spawn(async move {
                if interrupts.next().await {
                    stop.cancel();
                }
            })
        };
        let ticker = (!quiet).then(|| {
            tokio::spawn(super::super::batch::show_progress(
                progress.clone(),
                super::super::batch::count_lines(inputs),
                ledger.spent_usd(),
                limit,
            ))
        });
        let before = ledger.failed();
        // Lines already in --out when this starter started (a re-attached starter does not read
        // the inputs before the workflow's position, so its own count of skips is partial).
        let already = ledger.len() as u64;
        let result = temporal::run_batch(&e, &b, ledger, progress, stop.clone()).await;
        interrupt.abort();
        super::super::batch::stop_progress(ticker).await;
        match result {
            Err(err) => {
                eprintln!("error: {err}");
                USAGE
            }
            Ok(None) => {
                eprintln!(
                    "detached: batch {} goes on on Temporal; run the same command to collect its results",
                    b.batch_id
                );
                super::super::VIOLATIONS
            }
            Ok(Some(t)) => {
                let o = &t.outcome;
                eprintln!(
                    "on Temporal: {} USD spent of {} in all; {} lost attempt(s) retried; {} generation(s)",
                    o.ledger.spent_usd.round_dp(6).normalize(),
                    o.ledger
                        .limit_usd
                        .map_or("no limit".to_string(), |l| format!("{} USD", l.normalize())),
                    o.tally.retried_attempts,
                    o.generations + 1
                );
                let summary = Summary {
                    skipped: already,
                    refused: o.tally.refused,
                    not_started: o.not_started,
                    ..t.summary
                };
                super::super::batch::report(&summary, before, out, limit, false)
            }
        }
    }

    /// Runs `worker` until Ctrl-C; exit 0 after a clean stop, 1 when the worker failed, 2 on
    /// usage errors.
    pub fn worker(args: WorkerArgs) -> u8 {
        super::super::block_on(async move {
            let engine = match Engine::parse(
                &args.engine,
                args.namespace.as_deref(),
                args.task_queue.as_deref(),
            ) {
                Ok(e) => e,
                Err(err) => {
                    eprintln!("error: --engine {err}");
                    return USAGE;
                }
            };
            let specs = match super::super::run::load_all(&args.specs) {
                Ok(s) => s,
                Err(err) => {
                    eprintln!("error: {err}");
                    return USAGE;
                }
            };
            let host = match args
                .host
                .host(&specs, specs.len(), &args.specs)
                .await
                .and_then(|h| h.build().map_err(|e| e.to_string()))
            {
                Ok(h) => h,
                Err(err) => {
                    eprintln!("error: {err}");
                    return USAGE;
                }
            };
            let names: Vec<&str> = specs.iter().map(|s| s.name()).collect();
            eprintln!(
                "worker on Temporal at {} (namespace {}, task queue {}): specs {}",
                engine.target,
                engine.namespace,
                engine.task_queue,
                names.join(", ")
            );
            let activities = SubAgentActivities::new(specs, host.spec_name("worker"));
            let stop = subcontract::CancellationToken::new();
            {
                let stop = stop.clone();
                let mut interrupts = super::super::interrupt::Interrupts::new();
                tokio::spawn(async move {
                    if interrupts.next().await {
                        eprintln!("stopping: finishing the runs this worker holds");
                        stop.cancel();
                    }
                });
            }
            match temporal::run_worker(&engine, activities, args.max_runs as usize, stop).await {
                Ok(()) => super::super::OK,
                Err(err) => {
                    eprintln!("error: {err}");
                    super::super::VIOLATIONS
                }
            }
        })
    }
}

#[cfg(feature = "temporal")]
pub use imp::worker;
