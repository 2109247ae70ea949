//! `subcontract batch` through the real binary: resume after SIGKILL, torn lines, invalid
//! inputs, the budget read back, rate limits, a provider's Retry-After, exit codes.

use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::providers::{Reply, Server};

const BIN: &str = env!("CARGO_BIN_EXE_subcontract");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const SPEC: &str = "specs/research_topic.toml";

fn command(args: &[&str], envs: &[(&str, &str)]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("batch")
        .arg(SPEC)
        .args(args)
        .current_dir(ROOT)
        .env_remove("SUBCONTRACT_MODEL")
        .env_remove("SUBCONTRACT_EXAMPLE_DELAY_MS");
    for (k, v) in envs {
        c.env(k, v);
    }
    c
}

fn batch(args: &[&str], envs: &[(&str, &str)]) -> Output {
    command(args, envs).output().expect("the binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `n` wrapped inputs `q-0000`…, all of the same length (so each costs the same).
pub(crate) fn write_inputs(path: &Path, n: usize) {
    let text: String = (0..n)
        .map(|i| {
            format!(
                "{}\n",
                json!({"id": format!("q-{i:04}"), "input": {"question": format!("Question {i:04} about the code?")}})
            )
        })
        .collect();
    std::fs::write(path, text).expect("write inputs");
}

/// Prices for the `example` model: input tokens only (a call reserves its worst case, every
/// byte of the request a token: some 50 times what it costs).
pub(crate) fn write_prices(path: &Path) {
    std::fs::write(
        path,
        "[prices.\"example\"]\ninput_per_mtok = \"10\"\noutput_per_mtok = \"0\"\n",
    )
    .expect("write prices");
}

/// The result lines of an output file (its first line, naming the batch it belongs to, left
/// out).
pub(crate) fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .filter(|v| v.get("batch").is_none())
        .collect()
}

fn cost(line: &Value) -> Decimal {
    line["cost_usd"]
        .as_str()
        .expect("cost is a decimal string")
        .parse()
        .expect("a decimal")
}

fn model_calls(trace: &Path) -> usize {
    std::fs::read_to_string(trace)
        .expect("read trace")
        .lines()
        .filter(|l| l.contains("\"event\":\"model_call\""))
        .count()
}

/// Complete result lines of an output file (the owner line left out).
pub(crate) fn complete_lines(path: &Path) -> usize {
    let b = std::fs::read(path).unwrap_or_default();
    let n = b.iter().filter(|&&c| c == b'\n').count();
    n - usize::from(b.starts_with(b"{\"batch\":") && n > 0)
}

#[test]
fn a_batch_killed_with_sigkill_resumes_without_rerunning_or_double_charging() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (inputs, out, prices) = (
        dir.path().join("in.jsonl"),
        dir.path().join("out.jsonl"),
        dir.path().join("prices.toml"),
    );
    let (trace1, trace2) = (dir.path().join("t1.jsonl"), dir.path().join("t2.jsonl"));
    write_inputs(&inputs, 1000);
    write_prices(&prices);
    let p = |p: &Path| p.to_str().expect("utf-8 path").to_string();
    let args = |trace: &Path| {
        vec![
            "--inputs".to_string(),
            p(&inputs),
            "--out".into(),
            p(&out),
            "--model".into(),
            "example".into(),
            "--prices".into(),
            p(&prices),
            "--max-cost-usd".into(),
            "5".into(),
            "--concurrency".into(),
            "10".into(),
            "--trace".into(),
            p(trace),
            "-q".into(),
        ]
    };
    let a1 = args(&trace1);
    let a1: Vec<&str> = a1.iter().map(String::as_str).collect();
    // 30 ms per call, 10 at a time: about 3 s for the whole file; killed at 300 lines.
    let mut child = command(&a1, &[("SUBCONTRACT_EXAMPLE_DELAY_MS", "30")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(60);
    while complete_lines(&out) < 300 {
        assert!(Instant::now() < deadline, "no progress");
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the batch ended before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    // A write cut short: the torn line must be cut off, and its input done.
    let mut text = std::fs::read(&out).expect("read");
    if text.last() == Some(&b'\n') {
        text.extend_from_slice(br#"{"id":"q-0999","outcome":"compl"#);
        std::fs::write(&out, &text).expect("tear");
    }
    let kept = complete_lines(&out);
    assert!((300..1000).contains(&kept), "{kept} lines after the kill");
    let kept_lines = String::from_utf8_lossy(&text)
        .lines()
        .filter(|l| !l.starts_with("{\"batch\":"))
        .take(kept)
        .map(|l| serde_json::from_str::<Value>(l).expect("complete lines parse"))
        .collect::<Vec<_>>();
    let per_input = cost(&kept_lines[0]);
    assert!(per_input > Decimal::ZERO, "a priced model costs something");

    let a2 = args(&trace2);
    let a2: Vec<&str> = a2.iter().map(String::as_str).collect();
    let o = batch(&a2, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    let all = lines(&out);
    let ids: Vec<&str> = all.iter().map(|l| l["id"].as_str().expect("id")).collect();
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(ids.len(), 1000, "one line per input");
    assert_eq!(unique.len(), 1000, "every id exactly once");
    assert!(all.iter().all(|l| l["outcome"] == "completed"));
    // No finished input ran again: the resumed run called the model once per input left.
    assert_eq!(model_calls(&trace2), 1000 - kept);
    // Every input cost the same; the total is the sum of the lines, each counted once.
    let total: Decimal = all.iter().map(cost).sum();
    assert!(all.iter().all(|l| cost(l) == per_input));
    assert_eq!(total, per_input * Decimal::from(1000));
    // The resumed run read back what the killed one spent (and only that).
    let err = stderr(&o);
    let before = (per_input * Decimal::from(kept)).normalize();
    assert!(
        err.contains(&format!("resuming: {kept} input(s) already in")),
        "{err}"
    );
    assert!(err.contains(&format!("({before} USD spent)")), "{err}");
    assert!(err.contains("its torn last line is redone"), "{err}");
}

#[test]
fn the_budget_is_read_back_and_never_exceeded_across_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (inputs, out, prices) = (
        dir.path().join("in.jsonl"),
        dir.path().join("out.jsonl"),
        dir.path().join("prices.toml"),
    );
    write_inputs(&inputs, 300);
    write_prices(&prices);
    let p = |p: &Path| p.to_str().expect("utf-8 path").to_string();
    let run = |limit: &str| {
        batch(
            &[
                "--inputs",
                &p(&inputs),
                "--out",
                &p(&out),
                "--model",
                "example",
                "--prices",
                &p(&prices),
                "--concurrency",
                "1",
                "--max-cost-usd",
                limit,
            ],
            &[],
        )
    };
    // One input first, to learn what each costs.
    let probe = run("1");
    assert_eq!(probe.status.code(), Some(0), "{}", stderr(&probe));
    let per_input = cost(&lines(&out)[0]);
    std::fs::remove_file(&out).expect("reset");
    // What a run needs to start, its first call and the answer reserve beside it, found by
    // halving: the least limit under which one input is written.
    let (mut lo, mut hi) = (Decimal::ZERO, Decimal::ONE);
    while hi - lo > Decimal::new(1, 5) {
        let mid = (lo + hi) / Decimal::TWO;
        run(&mid.round_dp(6).normalize().to_string());
        let wrote = out.exists() && !lines(&out).is_empty();
        std::fs::remove_file(&out).ok();
        if wrote {
            hi = mid.round_dp(6);
        } else {
            lo = mid.round_dp(6);
        }
    }
    let start = hi;
    let limit = (start + per_input * Decimal::from(150))
        .normalize()
        .to_string();

    let o = run(&limit);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("refused by the budget, not written"),
        "{}",
        stderr(&o)
    );
    let first = lines(&out);
    let spent: Decimal = first.iter().map(cost).sum();
    assert!(
        !first.is_empty() && first.len() < 300,
        "{} lines",
        first.len()
    );
    assert!(
        spent <= start + per_input * Decimal::from(150),
        "over the limit: {spent}"
    );
    assert!(
        first.iter().all(|l| l["outcome"] == "completed"),
        "{first:?}"
    );

    // The same limit again: what is spent counts, so nothing more fits.
    let o = run(&limit);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(lines(&out).len(), first.len(), "{}", stderr(&o));

    // A higher limit does the rest, each input once.
    let o = run("10");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let all = lines(&out);
    let ids: HashSet<&str> = all.iter().map(|l| l["id"].as_str().expect("id")).collect();
    assert_eq!((all.len(), ids.len()), (300, 300));
    let total: Decimal = all.iter().map(cost).sum();
    assert_eq!(total, per_input * Decimal::from(300));
}

#[test]
fn invalid_lines_are_results_duplicates_are_reported_and_exit_codes_hold() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (inputs, out) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    let text = [
        r#"{"id": "a", "input": {"question": "What does the build script do?"}}"#,
        "{not json at all: sk-live-1234567890abcdef",
        "",
        r#"{"question": "short"}"#,
        r#"{"id": "a", "input": {"question": "The same id as the first line?"}}"#,
        r#"{"question": "A bare input whose id is its line number?"}"#,
        r#"{"id": [1], "input": {"question": "An id that is not a string?"}}"#,
    ]
    .join("\n");
    std::fs::write(&inputs, text).expect("write");
    let p = |p: &Path| p.to_str().expect("utf-8 path").to_string();
    let args = |inputs: &Path, out: &Path| {
        vec![
            "--inputs".to_string(),
            p(inputs),
            "--out".into(),
            p(out),
            "--model".into(),
            "example".into(),
        ]
    };
    let a = args(&inputs, &out);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let o = batch(&a, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("duplicate id"), "{err}");
    assert!(err.contains("1 duplicate id(s) not run"), "{err}");
    let all = lines(&out);
    let by_id = |id: &str| {
        all.iter()
            .find(|l| l["id"] == id)
            .unwrap_or_else(|| panic!("no line for {id}: {all:?}"))
    };
    assert_eq!(all.len(), 5, "{all:?}");
    assert_eq!(by_id("a")["outcome"], "completed");
    assert_eq!(by_id("6")["outcome"], "completed");
    let not_json = by_id("2");
    assert_eq!(not_json["outcome"], "invalid_input");
    let reason = not_json["error"].as_str().expect("error");
    assert!(reason.starts_with("line 2: not JSON"), "{reason}");
    assert!(
        !reason.contains("sk-live"),
        "the line's text is not quoted: {reason}"
    );
    let short = by_id("4");
    assert_eq!(short["outcome"], "invalid_input");
    assert!(
        short["error"]
            .as_str()
            .expect("error")
            .contains("/question"),
        "{short}"
    );
    assert!(!short["error"].as_str().expect("error").contains("short\""));
    assert_eq!(by_id("7")["outcome"], "invalid_input");

    // Every input completed: exit 0, and again (all skipped) on a second run.
    let good = dir.path().join("good.jsonl");
    let good_out = dir.path().join("good_out.jsonl");
    write_inputs(&good, 3);
    let a = args(&good, &good_out);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    for _ in 0..2 {
        let o = batch(&a, &[]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    assert_eq!(lines(&good_out).len(), 3);

    // Usage errors: exit 2, nothing written.
    let missing = dir.path().join("missing.jsonl");
    let fresh = dir.path().join("fresh.jsonl");
    let a = args(&missing, &fresh);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let o = batch(&a, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("missing.jsonl"), "{}", stderr(&o));
    let a = args(&good, &fresh);
    let mut a: Vec<&str> = a.iter().map(String::as_str).collect();
    a.extend(["--max-cost-usd", "-1"]);
    assert_eq!(batch(&a, &[]).status.code(), Some(2));
    assert!(!fresh.exists());
    // An output file that is not ours (garbage before its last line) is refused, untouched.
    std::fs::write(&fresh, "garbage\n{}\n").expect("write");
    let a = args(&good, &fresh);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let o = batch(&a, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("fresh.jsonl:1: not a result line"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_to_string(&fresh).expect("read"),
        "garbage\n{}\n"
    );
}

#[test]
fn rpm_limits_the_whole_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (inputs, out) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    // 600 per minute: a burst of 600, then one every 100 ms; 620 inputs take about 2 s more
    // than they would unlimited.
    write_inputs(&inputs, 620);
    let p = |p: &Path| p.to_str().expect("utf-8 path").to_string();
    let start = Instant::now();
    let o = batch(
        &[
            "--inputs",
            &p(&inputs),
            "--out",
            &p(&out),
            "--model",
            "example",
            "--concurrency",
            "50",
            "--rpm",
            "600",
        ],
        &[],
    );
    let took = start.elapsed();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(lines(&out).len(), 620);
    assert!(took >= Duration::from_millis(1800), "{took:?}: not limited");
    assert!(took < Duration::from_secs(30), "{took:?}");
}

fn completion() -> Value {
    // The spec grounds its citations: the answer reads the file it cites beside it.
    let submit = json!({"role": "assistant", "content": null, "tool_calls": [{
        "id": "call_0", "type": "function",
        "function": {"name": "read_file", "arguments": "{\"path\": \"Cargo.toml\"}"}}, {
        "id": "call_1", "type": "function",
        "function": {"name": "submit_output", "arguments": json!({"findings": [{"claim": "ok", "source_ids": ["Cargo.toml"]}], "gaps": []}).to_string()}}]});
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-4.1-mini",
        "choices": [{"index": 0, "message": submit, "finish_reason": "tool_calls", "logprobs": null}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_pauses_every_run_of_the_batch() {
    // Two runs start at once: one is answered after 300 ms, the other gets a 429 asking to
    // wait 1 s. The next input starts at 300 ms, but its call must wait out the pause (with no
    // --rpm or --tpm given: the pause is always shared).
    let server = Server::start(vec![
        Reply::json(200, completion()).delayed(Duration::from_millis(300)),
        Reply::json(
            429,
            json!({"error": {"message": "slow down", "type": "rate_limit"}}),
        )
        .header("retry-after", "1"),
        Reply::json(200, completion()),
    ])
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (inputs, out) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    write_inputs(&inputs, 4);
    let base = format!("{}/v1", server.base);
    let (i, o) = (
        inputs.to_str().expect("utf-8").to_string(),
        out.to_str().expect("utf-8").to_string(),
    );
    let result = tokio::task::spawn_blocking(move || {
        batch(
            &[
                "--inputs",
                &i,
                "--out",
                &o,
                "--model",
                "openai:gpt-4.1-mini",
                "--base-url",
                &base,
                "--concurrency",
                "2",
            ],
            &[("OPENAI_API_KEY", "sk-batch-test-key")],
        )
    })
    .await
    .expect("joined");
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
    assert_eq!(lines(&out).len(), 4);
    let received = server.received();
    assert_eq!(received.len(), 5, "4 calls and one retry");
    let paused_at = received[1].at;
    for later in &received[2..] {
        let after = later.at.saturating_duration_since(paused_at);
        assert!(
            after >= Duration::from_millis(900),
            "a call went out {after:?} after the 429 asked for 1 s"
        );
    }
}

#[test]
fn ctrl_c_stops_starting_inputs_and_writes_those_in_flight() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (inputs, out) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    write_inputs(&inputs, 200);
    let p = |p: &Path| p.to_str().expect("utf-8 path").to_string();
    let args = [
        "--inputs".to_string(),
        p(&inputs),
        "--out".into(),
        p(&out),
        "--model".into(),
        "example".into(),
        "--concurrency".into(),
        "5".into(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // 300 ms per call, 5 at a time: 12 s for the file; interrupted after the first lines.
    let child = command(&args, &[("SUBCONTRACT_EXAMPLE_DELAY_MS", "300")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(30);
    while complete_lines(&out) < 5 {
        assert!(Instant::now() < deadline, "no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    let sent = Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    // On a loaded machine more lines land between the poll above and the signal: what counts
    // is what was written once the signal was sent.
    let at_signal = complete_lines(&out);
    let o = child.wait_with_output().expect("exits");
    // The runs in flight finish (one more call each), nothing new starts.
    assert!(
        sent.elapsed() < Duration::from_secs(3),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("interrupted: starting no more inputs"),
        "{err}"
    );
    assert!(err.contains("run the same command to resume"), "{err}");
    // The 5 in flight finish; at most one more round may have started before the signal
    // handler ran.
    let first = lines(&out).len();
    assert!(
        (at_signal..=at_signal + 10).contains(&first),
        "{first} lines, {at_signal} when signalled"
    );
    // Resumed: the rest, each input once.
    let o = batch(&args, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let all = lines(&out);
    let ids: HashSet<&str> = all.iter().map(|l| l["id"].as_str().expect("id")).collect();
    assert_eq!((all.len(), ids.len()), (200, 200));
}

/// A batch locks its output file: a second batch on the same file exits 2 at once, naming the
/// file, and writes nothing (not even cutting what looks like a torn last line, which may be
/// the first batch's line in progress).
#[test]
fn a_second_batch_on_the_same_out_file_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (inputs, out) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    write_inputs(&inputs, 200);
    let p = |p: &Path| p.to_str().expect("utf-8 path").to_string();
    let (inputs_s, out_s) = (p(&inputs), p(&out));
    let args = [
        "--inputs",
        inputs_s.as_str(),
        "--out",
        out_s.as_str(),
        "--model",
        "example",
        "--concurrency",
        "10",
        "-q",
    ];
    // The lock held by this test: the batch leaves the file as it is, torn line included.
    let torn = br#"{"id":"q-0000","outcome":"compl"#;
    std::fs::write(&out, torn).expect("write");
    let held = std::fs::File::open(&out).expect("open");
    held.try_lock().expect("the lock is free");
    let t0 = Instant::now();
    let o = batch(&args, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("another batch is writing to {out_s}")),
        "{}",
        stderr(&o)
    );
    assert!(t0.elapsed() < Duration::from_secs(20), "refused at once");
    assert_eq!(std::fs::read(&out).expect("read"), torn);
    drop(held);

    // Two batches: the second is refused while the first runs; the first writes every line.
    let mut first = command(&args, &[("SUBCONTRACT_EXAMPLE_DELAY_MS", "30")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(60);
    while complete_lines(&out) < 10 {
        assert!(Instant::now() < deadline, "no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    let second = batch(&args, &[]);
    assert_eq!(second.status.code(), Some(2), "{}", stderr(&second));
    assert!(
        stderr(&second).contains("another batch is writing to"),
        "{}",
        stderr(&second)
    );
    assert!(first.wait().expect("wait").success());
    let all = lines(&out);
    let ids: HashSet<&str> = all.iter().map(|l| l["id"].as_str().expect("id")).collect();
    assert_eq!((all.len(), ids.len()), (200, 200), "every id exactly once");
}

/// A spec whose cap cannot afford one call: no input is written as a final line, the batch
/// stops at once and says what to change, and the same command finishes once the cap is
/// raised.
#[test]
fn a_spec_cap_below_one_call_poisons_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (inputs, out, prices) = (
        dir.path().join("in.jsonl"),
        dir.path().join("out.jsonl"),
        dir.path().join("prices.toml"),
    );
    write_inputs(&inputs, 50);
    write_prices(&prices);
    let spec_text = std::fs::read_to_string(Path::new(ROOT).join(SPEC)).expect("spec");
    let spec = dir.path().join("research_topic.toml");
    let tight: String = spec_text
        .lines()
        .map(|l| {
            if l.starts_with("max_cost_usd") {
                "max_cost_usd = \"0.000001\"\n".to_owned()
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert_ne!(tight, spec_text, "the cap was lowered");
    std::fs::write(&spec, &tight).expect("write spec");
    let p = |p: &Path| p.to_str().expect("utf-8 path").to_string();
    let run = || {
        Command::new(BIN)
            .args([
                "batch",
                &p(&spec),
                "--inputs",
                &p(&inputs),
                "--out",
                &p(&out),
            ])
            .args(["--model", "example", "--prices", &p(&prices), "-q"])
            .env_remove("SUBCONTRACT_MODEL")
            .output()
            .expect("the binary runs")
    };
    let o = run();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(lines(&out).is_empty(), "no final line: {:?}", lines(&out));
    assert!(
        stderr(&o).contains("raise the spec's `max_cost_usd` or lower its `max_tokens_per_turn`"),
        "{}",
        stderr(&o)
    );
    std::fs::write(&spec, &spec_text).expect("write spec");
    let o = run();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let all = lines(&out);
    assert_eq!(all.len(), 50);
    assert!(all.iter().all(|l| l["outcome"] == "completed"));
}

/// An output file belongs to one spec over one input file: reused with another, it is refused
/// instead of skipping every id as done.
#[test]
fn an_out_file_of_another_batch_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (inputs, other_inputs, out) = (
        dir.path().join("in.jsonl"),
        dir.path().join("other.jsonl"),
        dir.path().join("out.jsonl"),
    );
    write_inputs(&inputs, 5);
    write_inputs(&other_inputs, 5);
    let p = |p: &Path| p.to_str().expect("utf-8 path").to_string();
    let run = |spec: &str, inputs: &Path| {
        Command::new(BIN)
            .args(["batch", spec, "--inputs", &p(inputs), "--out", &p(&out)])
            .args(["--model", "example", "-q"])
            .current_dir(ROOT)
            .env_remove("SUBCONTRACT_MODEL")
            .output()
            .expect("the binary runs")
    };
    let o = run(SPEC, &inputs);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let first = std::fs::read_to_string(&out).expect("out");
    assert!(
        first.starts_with("{\"batch\":{\"spec\":\"research_topic\""),
        "{first}"
    );
    // The same command resumes (nothing left to do).
    let o = run(SPEC, &inputs);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for (spec, inputs) in [("specs/check_claim.toml", &inputs), (SPEC, &other_inputs)] {
        let o = run(spec, inputs);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("holds the results of spec `research_topic`"),
            "{}",
            stderr(&o)
        );
        assert_eq!(
            std::fs::read_to_string(&out).expect("out"),
            first,
            "left as it was"
        );
    }
}
