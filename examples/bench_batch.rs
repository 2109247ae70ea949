//! A local batch at scale: 10,000 inputs through `subcontract::batch` (the engine of
//! `subcontract batch`) with a scripted model of 3 turns of 20 ms (two tool calls, then the
//! output), 1,000 in flight, against its lower bound `max(ideal, n × CPU per child / cores)`;
//! and its peak memory at 10,000 inputs against that at 1,000.
//!
//! ```sh
//! cargo run --release --example bench_batch
//! ```
//!
//! Each configuration runs in its own subprocess (so its peak RSS is its own): the inputs are
//! written to a file, read back lazily by the batch, and every result is appended to an output
//! file, as the command line does. CPU per child is measured on the same batch with zero model
//! latency; `ideal` is `ceil(n / concurrency) × turns × latency`.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use serde_json::{json, Value};
use subcontract::batch::{run_batch, BatchOptions, Ledger, Progress};
use subcontract::Budget;

#[path = "shared/child.rs"]
mod child;

use child::TURNS;
const CONCURRENCY: usize = 1000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        let n: usize = args[2].parse().expect("n");
        let latency_ms: u64 = args[3].parse().expect("latency");
        println!("{}", child(n, latency_ms));
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let run = |n: usize, latency: u64| -> Value {
        let exe = std::env::current_exe().expect("own path");
        let out = Command::new(exe)
            .args(["--child", &n.to_string(), &latency.to_string()])
            .output()
            .expect("the child runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("a JSON line")
    };
    let cpu = run(10_000, 0);
    let big = run(10_000, 20);
    let small = run(1_000, 20);
    let cpu_per_child = cpu["cpu_s"].as_f64().expect("cpu") / 10_000.0;
    let ideal = (10_000f64 / CONCURRENCY as f64).ceil() * TURNS as f64 * 0.020;
    let bound = ideal.max(10_000.0 * cpu_per_child / cores as f64);
    let wall = big["wall_s"].as_f64().expect("wall");
    println!("cores: {cores}; concurrency {CONCURRENCY}; {TURNS} turns of 20 ms per child");
    println!(
        "CPU per child (0 ms latency): {:.1} µs; ideal {:.3} s; lower bound {:.3} s",
        cpu_per_child * 1e6,
        ideal,
        bound
    );
    println!(
        "10,000 inputs: {:.3} s wall ({:.2}× the lower bound), {:.2} s CPU, peak RSS {:.1} MB",
        wall,
        wall / bound,
        big["cpu_s"].as_f64().expect("cpu"),
        big["peak_rss_mb"].as_f64().expect("rss")
    );
    println!(
        " 1,000 inputs: {:.3} s wall, peak RSS {:.1} MB; ratio of peaks 10,000 / 1,000: {:.2}",
        small["wall_s"].as_f64().expect("wall"),
        small["peak_rss_mb"].as_f64().expect("rss"),
        big["peak_rss_mb"].as_f64().expect("rss") / small["peak_rss_mb"].as_f64().expect("rss")
    );
    println!(
        "{}",
        json!({"cpu": cpu, "n10000": big, "n1000": small, "bound_s": bound})
    );
}

fn child(n: usize, latency_ms: u64) -> Value {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let inputs = dir.path().join("in.jsonl");
    let out = dir.path().join("out.jsonl");
    child::write_inputs(&inputs, n);
    let ctx = child::host(Duration::from_millis(latency_ms))
        .budget(Budget::new(Some(Decimal::new(1000, 0)), None))
        .build();
    let spec = Arc::new(child::spec().erase());
    let c0 = cpu_time();
    let t0 = Instant::now();
    let summary = runtime
        .block_on(run_batch(
            spec,
            ctx,
            std::io::BufReader::new(std::fs::File::open(&inputs).expect("inputs")),
            &out,
            Ledger::read(&out).expect("no ledger yet"),
            &BatchOptions {
                concurrency: CONCURRENCY,
                ..BatchOptions::default()
            },
            &Progress::default(),
        ))
        .expect("the batch runs");
    let wall = t0.elapsed().as_secs_f64();
    let cpu = (cpu_time() - c0).as_secs_f64();
    assert_eq!(summary.completed as usize, n, "{summary:?}");
    json!({
        "n": n, "latency_ms": latency_ms, "wall_s": wall, "cpu_s": cpu,
        "peak_rss_mb": status_kb("VmHWM:") / 1024.0,
        "spent_usd": summary.spent_usd.to_string(),
    })
}

fn status_kb(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|x| x.parse::<f64>().ok())
        })
        .unwrap_or(-1.0)
}

/// CPU time of the whole process (user + system, every thread).
fn cpu_time() -> Duration {
    cpu_time::ProcessTime::try_now()
        .map(|t| t.as_duration())
        .unwrap_or_default()
}
