//! The cost of the command sandbox (`subcontract::act::sandbox`) per command: `true` run 200
//! times unconfined (a plain spawn), in the sandbox without Landlock (`SandboxMode::None`:
//! cgroup, rlimits, cleared environment, private temporary directory, output capture) and
//! in the full sandbox (`SandboxMode::Os`: the same plus a Landlock ruleset on a fresh
//! spawning thread). Prints the median and the 90th percentile of each.
//!
//! ```sh
//! cargo run --release --example bench_sandbox
//! ```
//!
//! Needs Linux with Landlock and a writable `pids` cgroup (root).

use std::time::{Duration, Instant};

use subcontract::act::sandbox::{run, CommandLimits, CommandRequest, SandboxMode};
use subcontract::CancellationToken;

const RUNS: usize = 200;

fn stats(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort_unstable();
    (times[times.len() / 2], times[times.len() * 9 / 10])
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if let Err(missing) = subcontract::act::sandbox::probe() {
        eprintln!("{missing}");
        std::process::exit(1);
    }
    let copy = std::env::temp_dir().join(format!("bench-sandbox-{}", std::process::id()));
    std::fs::create_dir_all(&copy).expect("a scratch directory");
    let request = |mode| CommandRequest {
        argv: vec!["true".to_owned()],
        cwd: copy.clone(),
        writable: vec![copy.clone()],
        allowed_programs: vec!["true".to_owned()],
        network: false,
        timeout: Duration::from_secs(10),
        mode,
        limits: CommandLimits::default(),
    };

    let mut rows = Vec::new();
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        let status = tokio::process::Command::new("/usr/bin/true")
            .status()
            .await
            .expect("true runs");
        assert!(status.success());
        times.push(t.elapsed());
    }
    rows.push(("unconfined spawn", stats(times)));
    for (name, mode) in [
        ("sandbox, mode None", SandboxMode::None),
        ("sandbox, mode Os", SandboxMode::Os),
    ] {
        let mut times = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let t = Instant::now();
            let out = run(request(mode), CancellationToken::new())
                .await
                .expect("the sandbox runs true");
            assert_eq!(out.exit_code, Some(0));
            times.push(t.elapsed());
        }
        rows.push((name, stats(times)));
    }
    let _ = std::fs::remove_dir_all(&copy);
    println!("`true`, {RUNS} runs each:");
    for (name, (median, p90)) in rows {
        println!(
            "  {name:<20} median {:>8.3} ms   p90 {:>8.3} ms",
            median.as_secs_f64() * 1e3,
            p90.as_secs_f64() * 1e3
        );
    }
}
