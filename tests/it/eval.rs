//! `subcontract eval` and `subcontract::eval`: graders, exit codes, --min-pass, recordings that
//! replay and go stale, the budget cap, pass^k, the judge, and hostile cases files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use subcontract::eval::{
    parse_cases, run_eval, EvalOptions, EvalSpec, Judges, Recording, NOT_RUN, STALE_RECORDING,
};
use subcontract::model::{ScriptStep, ScriptedModel};
use subcontract::{Ctx, SubAgentSpec};

const BIN: &str = env!("CARGO_BIN_EXE_subcontract");

const SPEC: &str = r#"
name = "capital"
description = "Names the capital of a country."
system = "Name the capital city of the country."

[limits]
max_turns = 2
max_tokens_per_turn = 100

[input]
type = "object"
required = ["country"]
additionalProperties = false
properties.country = { type = "string", minLength = 2, maxLength = 60 }

[output]
type = "object"
required = ["city", "population_m", "continent"]
additionalProperties = false
properties.city = { type = "string", maxLength = 60 }
properties.population_m = { type = "number", minimum = 0, maximum = 100 }
properties.continent = { type = "string", enum = ["Europe", "Asia", "Africa"] }

[[examples]]
input = { country = "France" }
output = { city = "Paris", population_m = 2.1, continent = "Europe" }
"#;

/// Every grader holds on the example model's answer (Paris).
const PASSING: &str = r#"{"id": "fr", "input": {"country": "France"}, "expect": {"fields": {"/city": "Paris"}, "contains": {"/city": ["par", "IS"]}, "matches": {"/continent": "^Eur"}, "range": {"/population_m": [1, 3]}, "one_of": {"/continent": ["Europe", "Asia"]}}}"#;
/// Every grader fails on it.
const FAILING: &str = r#"{"id": "jp", "input": {"country": "Japan"}, "expect": {"fields": {"/city": "Tokyo"}, "contains": {"/city": ["tok"]}, "matches": {"/continent": "^Asia$"}, "range": {"/population_m": [10, 20]}, "one_of": {"/continent": ["Asia"]}}}"#;

struct Dir {
    tmp: tempfile::TempDir,
}

impl Dir {
    fn new(cases: &[&str]) -> Dir {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("capital.toml"), SPEC).unwrap();
        let d = Dir { tmp };
        d.cases(cases);
        d
    }
    fn path(&self, p: &str) -> PathBuf {
        self.tmp.path().join(p)
    }
    fn cases(&self, cases: &[&str]) {
        std::fs::write(self.path("capital.cases.jsonl"), cases.join("\n") + "\n").unwrap();
    }
    /// `subcontract eval capital.toml ARGS` in the directory (the example model unless ARGS
    /// say otherwise), offline.
    fn eval(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .current_dir(self.tmp.path())
            .args(["eval", "capital.toml"])
            .args(args)
            .env_remove("SUBCONTRACT_MODEL")
            .env("OPENAI_API_KEY", "")
            .env("ANTHROPIC_API_KEY", "")
            .output()
            .unwrap()
    }
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn report(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not a JSON report ({e}): {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            stderr(o)
        )
    })
}

/// A report without its wall times (the one part that differs between runs).
fn timeless(mut r: Value) -> Value {
    for c in r["cases"].as_array_mut().unwrap() {
        c.as_object_mut().unwrap().remove("wall_ms");
    }
    for s in r["summary"].as_object_mut().unwrap().values_mut() {
        s.as_object_mut().unwrap().remove("wall_ms");
    }
    r
}

#[test]
fn every_grader_passes_and_fails_and_the_exit_code_follows() {
    let d = Dir::new(&[PASSING, FAILING]);
    let o = d.eval(&["--model", "example", "--format", "json"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let r = report(&o);
    assert_eq!(r["spec"], "capital");
    assert_eq!(r["model"], "example");
    assert_eq!(r["contract"].as_str().unwrap().len(), 16);
    let cases = r["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    let fr = &cases[0];
    assert_eq!(
        (&fr["id"], &fr["mode"], &fr["attempt"]),
        (&json!("fr"), &json!("auto"), &json!(1))
    );
    assert_eq!(
        (&fr["outcome"], &fr["valid"], &fr["passed"]),
        (&json!("completed"), &json!(true), &json!(true))
    );
    assert_eq!(fr["failed"], json!([]));
    assert_eq!((&fr["turns"], &fr["requests"]), (&json!(1), &json!(1)));
    assert!(fr["input_tokens"].as_u64().unwrap() > 0);
    assert!(fr["output_tokens"].as_u64().unwrap() > 0);
    let jp = &cases[1];
    assert_eq!((&jp["valid"], &jp["passed"]), (&json!(true), &json!(false)));
    let failed: Vec<&str> = jp["failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert_eq!(
        failed,
        [
            "fields /city: expected \"Tokyo\", got \"Paris\"",
            "contains /city: no \"tok\" in \"Paris\"",
            "matches /continent: \"Europe\" does not match /^Asia$/",
            "range /population_m: 2.1 is not a number in [10, 20]",
            "one_of /continent: \"Europe\" is not one of [\"Asia\"]",
        ]
    );
    let s = &r["summary"]["auto"];
    assert_eq!((&s["cases"], &s["attempts"]), (&json!(2), &json!(2)));
    assert_eq!(
        (&s["pass_at_1"], &s["pass_hat_k"]),
        (&json!(0.5), &json!(0.5))
    );
    assert_eq!(
        (&s["valid_rate"], &s["wrong_valid_rate"]),
        (&json!(1.0), &json!(0.5))
    );
    for key in ["input_tokens", "output_tokens", "cost_usd", "wall_ms"] {
        assert!(s.get(key).is_some(), "{key}");
    }
    // --min-pass: half passed.
    assert_eq!(
        code(&d.eval(&["--model", "example", "--min-pass", "0.5"])),
        0
    );
    let o = d.eval(&["--model", "example", "--min-pass", "0.75"]);
    assert_eq!(code(&o), 1);
    assert!(
        stderr(&o).contains("50.0% of attempts passed"),
        "{}",
        stderr(&o)
    );
    assert_eq!(code(&d.eval(&["--model", "example", "--min-pass", "2"])), 2);
    // Every case passing: exit 0.
    d.cases(&[PASSING]);
    let o = d.eval(&["--model", "example"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("every attempt passed"));
}

#[test]
fn outcomes_are_graded_and_an_invalid_input_is_tested_only_when_expected() {
    let d = Dir::new(&[
        r#"{"id": "short", "input": {"country": "X"}, "expect": {"outcome": "invalid_input"}}"#,
        r#"{"id": "turns", "input": {"country": "Peru"}, "expect": {"outcome": "max_turns"}}"#,
    ]);
    let o = d.eval(&["--model", "example", "--format", "json"]);
    assert_eq!(code(&o), 1);
    let r = report(&o);
    let short = &r["cases"][0];
    assert_eq!(
        (&short["outcome"], &short["passed"], &short["requests"]),
        (&json!("invalid_input"), &json!(true), &json!(0))
    );
    assert_eq!(
        r["cases"][1]["failed"],
        json!(["outcome: expected max_turns, got completed"])
    );
    // The same input without expecting it: an error of the file, before any call.
    d.cases(&[r#"{"id": "short", "input": {"country": "X"}}"#]);
    let o = d.eval(&["--model", "example"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o)
            .contains("capital.cases.jsonl:1 (case `short`): the input breaks the input contract"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn table_and_junit_reports_and_several_modes() {
    let d = Dir::new(&[PASSING, FAILING]);
    let o = d.eval(&["--model", "example", "--modes", "auto,tool"]);
    let table = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(table.starts_with("eval capital (contract "), "{table}");
    assert!(table.contains("\nauto "), "{table}");
    assert!(table.contains("\ntool "), "{table}");
    assert!(
        table.contains("  jp [tool #1] completed: fields /city"),
        "{table}"
    );
    let out = d.path("report.xml");
    let o = d.eval(&[
        "--model",
        "example",
        "--modes",
        "auto,tool",
        "--format",
        "junit",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 1);
    assert!(o.stdout.is_empty());
    let xml = std::fs::read_to_string(&out).unwrap();
    assert!(xml.starts_with("<?xml"), "{xml}");
    assert!(
        xml.contains("<testsuites name=\"subcontract eval capital\" tests=\"4\" failures=\"2\">"),
        "{xml}"
    );
    assert!(
        xml.contains("<testsuite name=\"capital.tool\" tests=\"2\" failures=\"1\""),
        "{xml}"
    );
    assert!(
        xml.contains("<testcase classname=\"capital.auto\" name=\"fr\""),
        "{xml}"
    );
    assert!(
        xml.contains("fields /city: expected &quot;Tokyo&quot;"),
        "{xml}"
    );
}

#[test]
fn malformed_cases_files_exit_2_naming_the_line_and_run_nothing() {
    let d = Dir::new(&[PASSING]);
    for (lines, wants) in [
        (vec![PASSING, "{not json"], "capital.cases.jsonl:2: key must be a string"),
        (
            vec![r#"{"id": "a", "input": {"country": "France"}, "expect": {"similar": {"/city": "Paris"}}}"#],
            "capital.cases.jsonl:1: unknown field `similar`",
        ),
        (
            vec![r#"{"id": "a", "input": {"country": "France"}, "expected": {}}"#],
            "capital.cases.jsonl:1: unknown field `expected`",
        ),
        (
            vec![r#"{"id": "a", "input": {"country": "France"}, "expect": {"fields": {"/capital": "Paris"}}}"#],
            "capital.cases.jsonl:1 (case `a`): the pointer `/capital` names nothing the output contract of `capital` can produce",
        ),
        (
            vec![r#"{"id": "a", "input": {"country": "France"}, "expect": {"contains": {"/city/0": ["P"]}}}"#],
            "the pointer `/city/0` names nothing",
        ),
        (vec![PASSING, "", PASSING], "capital.cases.jsonl:3: the case id `fr` is repeated"),
        (
            vec![r#"{"id": "a", "input": {"country": "France"}, "expect": {"matches": {"/city": "(unclosed"}}}"#],
            "capital.cases.jsonl:1: expect.matches `/city`: not a regex",
        ),
    ] {
        d.cases(&lines);
        let rec = d.path("rec");
        let o = d.eval(&["--model", "example", "--record", rec.to_str().unwrap()]);
        assert_eq!(code(&o), 2, "{wants}: {}", stderr(&o));
        assert!(stderr(&o).contains(wants), "wanted {wants:?} in:\n{}", stderr(&o));
        assert!(stderr(&o).contains("nothing was run"), "{}", stderr(&o));
        assert!(o.stdout.is_empty());
        assert!(!rec.exists(), "{wants}: something ran");
    }
    // A missing file is a usage error too.
    let o = d.eval(&["--model", "example", "--cases", "absent.jsonl"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("absent.jsonl: cannot read the cases file"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_hundred_thousand_lines_are_refused_at_once() {
    let d = Dir::new(&[]);
    let mut text = String::with_capacity(100_000 * 60);
    for i in 0..100_000 {
        text.push_str(&format!(
            "{{\"id\": \"c{i}\", \"input\": {{\"country\": \"France\"}}}}\n"
        ));
    }
    std::fs::write(d.path("capital.cases.jsonl"), text).unwrap();
    let started = Instant::now();
    let o = d.eval(&["--model", "example"]);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("100000 cases, over the limit of 10000"),
        "{}",
        stderr(&o)
    );
    // A file over the byte limit is refused without reading it whole.
    let big = d.path("big.jsonl");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(subcontract::eval::MAX_CASES_BYTES + 10).unwrap();
    let o = d.eval(&["--model", "example", "--cases", big.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("the cases file is over 16 MiB"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn record_then_replay_gives_the_same_report_and_a_change_is_stale() {
    let d = Dir::new(&[PASSING, FAILING]);
    let rec = d.path("rec");
    let rec_arg = rec.to_str().unwrap();
    let recorded = d.eval(&[
        "--model", "example", "--repeat", "2", "--format", "json", "--record", rec_arg,
    ]);
    assert_eq!(code(&recorded), 1, "{}", stderr(&recorded));
    // One file per attempt.
    let files = walk(&rec);
    assert_eq!(files.len(), 4, "{files:?}");
    // Replayed with no model named (the recordings name it) and no network.
    let replayed = d.eval(&["--repeat", "2", "--format", "json", "--replay", rec_arg]);
    assert_eq!(code(&replayed), 1, "{}", stderr(&replayed));
    assert_eq!(timeless(report(&recorded)), timeless(report(&replayed)));

    // A changed request (the case's input): stale, exit 3, with the command that records.
    d.cases(&[PASSING, &FAILING.replace("Japan", "Japan!")]);
    let o = d.eval(&["--repeat", "2", "--format", "json", "--replay", rec_arg]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    let r = report(&o);
    assert_eq!(r["cases"][0]["passed"], true);
    assert_eq!(r["cases"][2]["outcome"], STALE_RECORDING);
    assert_eq!(r["cases"][2]["passed"], false);
    let err = stderr(&o);
    assert!(err.contains("differs from every recorded one"), "{err}");
    assert!(
        err.contains(&format!(
            // The very command given, `--record` for `--replay`, and the model it replayed.
            "record them again with:\n  subcontract eval capital.toml --repeat 2 --format json --model example --record {rec_arg}"
        )),
        "{err}"
    );

    // A changed contract: every attempt stale, naming the spec.
    d.cases(&[PASSING, FAILING]);
    std::fs::write(
        d.path("capital.toml"),
        SPEC.replace(
            "maxLength = 60 }\n\n[output]",
            "maxLength = 80 }\n\n[output]",
        ),
    )
    .unwrap();
    let o = d.eval(&["--repeat", "2", "--replay", rec_arg]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("stale recording: spec `capital` changed since it was recorded: contract "),
        "{}",
        stderr(&o)
    );
    // A recording that is not there at all (a new case): stale too, never a live call.
    std::fs::write(d.path("capital.toml"), SPEC).unwrap();
    d.cases(&[PASSING, r#"{"id": "new", "input": {"country": "Spain"}}"#]);
    let o = d.eval(&["--replay", rec_arg, "--format", "json"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    let r = report(&o);
    assert_eq!(r["cases"][0]["passed"], true);
    assert_eq!(r["cases"][1]["outcome"], STALE_RECORDING);
    assert!(
        r["cases"][1]["stale"]
            .as_str()
            .unwrap()
            .contains("no usable recording at"),
        "{r}"
    );
    // Recording and replaying at once is a usage error.
    assert_eq!(
        code(&d.eval(&["--model", "example", "--record", rec_arg, "--replay", rec_arg])),
        2
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn the_budget_is_never_overshot_and_what_it_cannot_afford_is_not_run() {
    let d = Dir::new(&[PASSING, FAILING]);
    // 1,000 USD per million tokens: a call costs ~0.04 USD and reserves its worst case, ~0.7.
    std::fs::write(
        d.path("prices.toml"),
        "[prices.example]\ninput_per_mtok = \"1000\"\noutput_per_mtok = \"1000\"\n",
    )
    .unwrap();
    let limit = 0.85;
    let o = d.eval(&[
        "--model",
        "example",
        "--prices",
        "prices.toml",
        "--repeat",
        "5",
        "--max-cost-usd",
        "0.85",
        "--format",
        "json",
    ]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let r = report(&o);
    let cases = r["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 10);
    let spent: f64 = cases.iter().map(|c| c["cost_usd"].as_f64().unwrap()).sum();
    assert!(spent > 0.0 && spent <= limit, "spent {spent}");
    let ran = cases.iter().filter(|c| c["outcome"] == "completed").count();
    let not_run = cases.iter().filter(|c| c["outcome"] == NOT_RUN).count();
    assert!(ran >= 1 && not_run >= 1, "{r}");
    assert_eq!(ran + not_run, 10, "{r}");
    for c in cases.iter().filter(|c| c["outcome"] == NOT_RUN) {
        assert_eq!(
            (&c["passed"], &c["requests"], &c["cost_usd"]),
            (&json!(false), &json!(0), &json!(0.0))
        );
    }
    // Attempts run in order: the ones not run are the last.
    assert!(
        cases[..ran].iter().all(|c| c["outcome"] == "completed"),
        "{r}"
    );
    let total: u64 = r["summary"]["auto"]["not_run"].as_u64().unwrap();
    assert_eq!(total as usize, not_run);
}

/// A scripted spec: answers `{"answer": …}`.
fn answer_spec(system: &str) -> SubAgentSpec<Value, Value> {
    SubAgentSpec::dynamic(
        "answer",
        json!({"type": "object", "properties": {"q": {"type": "string", "maxLength": 40}}, "additionalProperties": false}),
        json!({"type": "object", "required": ["answer"], "additionalProperties": false,
               "properties": {"answer": {"type": "string", "maxLength": 40}}}),
    )
    .description("Answers.")
    .system(system)
    .max_turns(2)
    .build()
    .unwrap()
}

#[tokio::test]
async fn pass_hat_k_needs_every_attempt_to_pass() {
    let spec = answer_spec("ANSWER");
    let cases = parse_cases(
        "t.jsonl",
        &[
            r#"{"id": "steady", "input": {"q": "steady"}, "expect": {"fields": {"/answer": "yes"}}}"#,
            r#"{"id": "flaky", "input": {"q": "flaky"}, "expect": {"fields": {"/answer": "yes"}}}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    // The flaky case is answered wrongly on every other call.
    let flaky = Arc::new(AtomicUsize::new(0));
    let model = Arc::new(ScriptedModel::from_fn("scripted:k", move |req| {
        let text = serde_json::to_string(req.messages).unwrap();
        let wrong = text.contains("flaky") && flaky.fetch_add(1, Ordering::SeqCst) % 2 == 1;
        ScriptStep::submit(json!({"answer": if wrong { "no" } else { "yes" }}))
    }));
    let mut opts = EvalOptions::new("scripted:k");
    opts.repeat = 4;
    let report = run_eval(
        &[EvalSpec::new(spec)],
        &cases,
        &Judges::new(),
        Ctx::builder(model),
        &opts,
        None,
    )
    .await;
    let s = &report.summary[0].1;
    assert_eq!((s.cases, s.attempts), (2, 8));
    assert_eq!(s.pass_at_1, 0.75);
    assert_eq!(s.pass_hat_k, 0.5);
    assert_eq!(s.valid_rate, 1.0);
    assert_eq!(s.wrong_valid_rate, 0.25);
    assert!(!report.all_passed());
    let attempts: Vec<u32> = report.cases.iter().map(|a| a.attempt).collect();
    assert_eq!(attempts, [1, 2, 3, 4, 1, 2, 3, 4]);
}

/// A judge spec (system prompt `JUDGE`) that outputs `{pass, reason}`.
fn judge_spec(max_turns: u32, max_tokens_per_turn: Option<u32>) -> SubAgentSpec<Value, Value> {
    let b = SubAgentSpec::dynamic(
        "judge",
        json!({"type": "object"}),
        json!({"type": "object", "required": ["pass", "reason"], "additionalProperties": false,
               "properties": {"pass": {"type": "boolean"}, "reason": {"type": "string", "maxLength": 200}}}),
    )
    .description("Judges an answer.")
    .system("JUDGE")
    .max_turns(max_turns);
    match max_tokens_per_turn {
        Some(n) => b.max_tokens_per_turn(n),
        None => b,
    }
    .build()
    .unwrap()
}

#[tokio::test]
async fn a_judge_runs_under_the_same_budget_and_its_reason_is_the_failure() {
    let spec = answer_spec("ANSWER");
    let judge = judge_spec(2, None);
    let cases = parse_cases(
        "t.jsonl",
        &[
            r#"{"id": "good", "input": {"q": "good"}, "expect": {"judge": "judge.toml"}}"#,
            r#"{"id": "bad", "input": {"q": "bad"}, "expect": {"judge": "judge.toml"}}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    let model = Arc::new(ScriptedModel::from_fn("scripted:j", |req| {
        let text = serde_json::to_string(req.messages).unwrap();
        if req.system.starts_with("JUDGE") {
            // The judge sees the case and the output.
            let pass = text.contains("\\\"good\\\"") || text.contains("\"good\"");
            ScriptStep::submit(json!({"pass": pass, "reason": "the answer is vague"}))
        } else {
            ScriptStep::submit(json!({"answer": "maybe"}))
        }
    }));
    let mut judges = Judges::new();
    judges.insert("judge.toml".into(), judge);
    let report = run_eval(
        &[EvalSpec::new(spec)],
        &cases,
        &judges,
        Ctx::builder(model),
        &EvalOptions::new("scripted:j"),
        None,
    )
    .await;
    assert!(report.cases[0].passed, "{:?}", report.cases[0]);
    assert_eq!(report.cases[0].requests, 2, "the answer and the judge");
    assert_eq!(
        report.cases[1].failed,
        ["judge `judge`: the answer is vague"]
    );
    assert!(report.cases[1].valid);
}

#[tokio::test]
async fn a_library_replay_of_a_changed_request_is_stale_and_never_reaches_the_model() {
    let spec = answer_spec("ANSWER");
    let dir = tempfile::tempdir().unwrap();
    let case = r#"{"id": "../../escape", "input": {"q": "one"}, "expect": {"fields": {"/answer": "yes"}}}"#;
    let cases = parse_cases("t.jsonl", case).unwrap();
    let live = Arc::new(ScriptedModel::from_fn("scripted:r", |_| {
        ScriptStep::submit(json!({"answer": "yes"}))
    }));
    let mut opts = EvalOptions::new("scripted:r");
    opts.recording = Recording::Record(dir.path().to_path_buf());
    let recorded = run_eval(
        &[EvalSpec::new(spec.clone())],
        &cases,
        &Judges::new(),
        Ctx::builder(live),
        &opts,
        None,
    )
    .await;
    assert!(recorded.all_passed());
    // The hostile id stayed inside the directory.
    let files = walk(dir.path());
    assert_eq!(files.len(), 1);
    assert!(files[0].starts_with(dir.path()));
    // Replayed by a model that must never be called.
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let never = Arc::new(ScriptedModel::from_fn("scripted:r", move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        ScriptStep::submit(json!({"answer": "yes"}))
    }));
    opts.recording = Recording::Replay(dir.path().to_path_buf());
    let replayed = run_eval(
        &[EvalSpec::new(spec.clone())],
        &cases,
        &Judges::new(),
        Ctx::builder(never.clone()),
        &opts,
        None,
    )
    .await;
    assert!(replayed.all_passed(), "{:?}", replayed.cases);
    let changed = parse_cases("t.jsonl", &case.replace("\"one\"", "\"two\"")).unwrap();
    let stale = run_eval(
        &[EvalSpec::new(spec)],
        &changed,
        &Judges::new(),
        Ctx::builder(never),
        &opts,
        None,
    )
    .await;
    assert_eq!(stale.cases[0].outcome, STALE_RECORDING);
    assert_eq!(stale.stale().count(), 1);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

/// `subcontract eval SPEC` over the recorded real-model cases of `bench/real/eval/`, replayed
/// (the base URL is never reached: a replay makes no call), with `extra` flags.
fn replay_real_eval(spec: &str, extra: &[&str]) -> Output {
    Command::new(BIN)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["eval", spec])
        .args(["--cases", "bench/real/eval/research_topic.cases.jsonl"])
        .args(["--workspace", "bench/real/eval/workspace"])
        .args([
            "--model",
            "openai:local",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ])
        .args(["--replay", "bench/real/eval/recordings", "-q"])
        .args(extra)
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("the binary runs")
}

/// The shipped researcher on the real local model, recorded (`bench/real/eval/`, 2026-12-04)
/// and replayed here with no server and no network: the same report as the live run, case by
/// case. A change to the spec's contract or to what its runs send makes the recording stale:
/// exit 3 and the command that records it again (with the local model; the book's "Evals").
#[test]
fn the_recorded_real_model_eval_replays_offline_with_the_same_report() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = replay_real_eval("specs/research_topic.toml", &["--format", "json"]);
    assert_ne!(code(&o), 3, "the recording is stale: {}", stderr(&o));
    let live: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("bench/real/eval/report.json")).expect("the report"),
    )
    .expect("JSON");
    let replayed = report(&o);
    assert_eq!(timeless(replayed), timeless(live.clone()));
    // Not every case passes on this model: the exit code says so.
    let all = live["cases"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["passed"] == true);
    assert_eq!(code(&o), if all { 0 } else { 1 }, "{}", stderr(&o));
}

/// A change the contract hash does not cover (the sampling temperature, here) still changes
/// what the model is sent: the replay stops, exit 3, and says how to record again with the
/// very flags given.
#[test]
fn a_changed_request_setting_makes_the_real_model_recording_stale() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let spec = std::fs::read_to_string(root.join("specs/research_topic.toml"))
        .unwrap()
        .replace("temperature = 0\n", "temperature = 0.9\n");
    assert!(spec.contains("temperature = 0.9"));
    let copy = dir.path().join("research_topic.toml");
    std::fs::write(&copy, spec).unwrap();
    let o = replay_real_eval(copy.to_str().unwrap(), &[]);
    let err = stderr(&o);
    assert_eq!(code(&o), 3, "{err}");
    assert!(
        err.contains("offers other tools, limits, sampling or output format"),
        "{err}"
    );
    // The command to record again is this one, every flag kept, `--record` for `--replay`.
    assert!(err.contains("--base-url http://127.0.0.1:9/v1"), "{err}");
    assert!(err.contains("--record bench/real/eval/recordings"), "{err}");
    assert!(!err.contains("--replay"), "{err}");
}

/// A model that fails every call with a timeout, as a provider that gave up would.
struct TimesOut;

#[async_trait::async_trait]
impl subcontract::Model for TimesOut {
    fn id(&self) -> &str {
        "scripted:slow"
    }
    async fn complete(
        &self,
        _request: subcontract::model::ModelRequest<'_>,
    ) -> Result<subcontract::model::ModelResponse, subcontract::model::ModelError> {
        Err(subcontract::model::ModelError::Timeout {
            provider: "scripted:slow".into(),
            secs: 30,
        })
    }
}

/// A failed call replays as the same failure (a timeout stays a timeout, with its message),
/// so the replayed report is the recorded one, outcome for outcome.
#[tokio::test]
async fn a_recorded_failure_replays_as_the_same_failure() {
    let spec = answer_spec("ANSWER");
    let dir = tempfile::tempdir().unwrap();
    let cases = parse_cases(
        "t.jsonl",
        r#"{"id": "slow", "input": {"q": "one"}, "expect": {"fields": {"/answer": "yes"}}}"#,
    )
    .unwrap();
    let mut opts = EvalOptions::new("scripted:slow");
    opts.recording = Recording::Record(dir.path().to_path_buf());
    let recorded = run_eval(
        &[EvalSpec::new(spec.clone())],
        &cases,
        &Judges::new(),
        Ctx::builder(Arc::new(TimesOut)),
        &opts,
        None,
    )
    .await;
    let text = std::fs::read_to_string(&walk(dir.path())[0]).unwrap();
    assert!(
        text.contains(r#""failure":{"kind":"timeout","secs":30}"#),
        "{text}"
    );
    opts.recording = Recording::Replay(dir.path().to_path_buf());
    let never = Arc::new(ScriptedModel::from_fn("scripted:slow", |_| {
        panic!("a replay never calls the model")
    }));
    let replayed = run_eval(
        &[EvalSpec::new(spec)],
        &cases,
        &Judges::new(),
        Ctx::builder(never),
        &opts,
        None,
    )
    .await;
    let (a, b) = (&recorded.cases[0], &replayed.cases[0]);
    assert_ne!(a.outcome, STALE_RECORDING, "{a:?}");
    assert_eq!((&a.outcome, &a.failed), (&b.outcome, &b.failed));
    assert!(
        a.failed[0].contains("timed out after 30 s"),
        "{:?}",
        a.failed
    );
}

/// A judge the eval's budget has no room for gives no verdict: the attempt is not run, not a
/// valid-but-wrong answer.
#[tokio::test]
async fn a_judge_the_budget_cannot_afford_leaves_the_attempt_not_run() {
    use rust_decimal::Decimal;
    use subcontract::model::{Price, PriceTable};
    let spec = SubAgentSpec::dynamic(
        "answer",
        json!({"type": "object"}),
        json!({"type": "object", "required": ["answer"], "additionalProperties": false,
               "properties": {"answer": {"type": "string", "maxLength": 40}}}),
    )
    .description("Answers.")
    .system("ANSWER")
    .max_turns(1)
    .max_tokens_per_turn(50)
    .build()
    .unwrap();
    // Its worst case (100,000 output tokens at 1,000 USD a million) is far over the cap.
    let judge = judge_spec(1, Some(100_000));
    let cases = parse_cases(
        "t.jsonl",
        r#"{"id": "a", "input": {"q": "a"}, "expect": {"judge": "judge.toml"}}"#,
    )
    .unwrap();
    let model = Arc::new(ScriptedModel::from_fn("scripted:j", |req| {
        if req.system.starts_with("JUDGE") {
            ScriptStep::submit(json!({"pass": false, "reason": "never asked"}))
        } else {
            ScriptStep::submit(json!({"answer": "maybe"}))
        }
    }));
    let mut prices = PriceTable::new();
    prices.insert(
        "scripted:j",
        Price::per_mtok(Decimal::from(1000), Decimal::from(1000)),
    );
    let mut judges = Judges::new();
    judges.insert("judge.toml".into(), judge.clone());
    let mut opts = EvalOptions::new("scripted:j");
    opts.max_cost_usd = Some(Decimal::from(5));
    let report = run_eval(
        &[EvalSpec::new(spec.clone())],
        &cases,
        &judges,
        Ctx::builder(model.clone()).prices(prices.clone()),
        &opts,
        None,
    )
    .await;
    let a = &report.cases[0];
    assert_eq!(a.outcome, NOT_RUN, "{a:?}");
    assert_eq!(
        a.failed,
        ["not run: the eval's budget has no room for the judge `judge`"]
    );
    assert_eq!(a.requests, 1, "the answer only: {a:?}");
    let s = &report.summary[0].1;
    assert_eq!((s.not_run, s.wrong_valid_rate), (1, 0.0));
    // The judge's own cap refusing it is no verdict either.
    let capped = SubAgentSpec::dynamic(
        "judge",
        json!({"type": "object"}),
        judge.output_contract().schema().as_ref().clone(),
    )
    .description("Judges an answer.")
    .system("JUDGE")
    .max_tokens_per_turn(100_000)
    .max_cost_usd(Decimal::from(5))
    .build()
    .unwrap();
    judges.insert("judge.toml".into(), capped);
    let report = run_eval(
        &[EvalSpec::new(spec)],
        &cases,
        &judges,
        Ctx::builder(model).prices(prices),
        &EvalOptions::new("scripted:j"),
        None,
    )
    .await;
    let a = &report.cases[0];
    assert_eq!(a.outcome, NOT_RUN, "{a:?}");
    assert!(
        a.failed[0].starts_with("not run: the judge `judge` was refused: "),
        "{a:?}"
    );
    assert_eq!(report.summary[0].1.wrong_valid_rate, 0.0);
}

/// A cap on a model with no price would never bind (every call counts as 0 USD): refused,
/// exit 2, before anything runs.
#[test]
fn a_cost_cap_on_an_unpriced_model_is_refused_before_anything_runs() {
    let d = Dir::new(&[PASSING]);
    let o = d.eval(&["--model", "example", "--max-cost-usd", "0.50"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("--max-cost-usd 0.50 cannot bind: no price is known for `example`"),
        "{err}"
    );
    assert!(err.contains("--prices FILE"), "{err}");
    assert!(o.stdout.is_empty());
}

/// The report's contract hash is the one `subcontract lock` writes beside the spec's entry.
#[test]
fn the_report_names_the_contract_hash_of_the_lock_file() {
    let d = Dir::new(&[PASSING]);
    let lock = Command::new(BIN)
        .current_dir(d.tmp.path())
        .args(["lock", "capital.toml"])
        .output()
        .unwrap();
    assert_eq!(code(&lock), 0, "{}", stderr(&lock));
    let lock: Value = serde_json::from_slice(&lock.stdout).unwrap();
    let hash = lock["specs"][0]["contract"]
        .as_str()
        .expect("a contract hash");
    assert_eq!(hash.len(), 16);
    let o = d.eval(&["--model", "example", "--format", "json"]);
    assert_eq!(report(&o)["contract"], json!(hash));
}

/// The real-model suite's eight tasks (`bench/real/suite/`), as the real-model test recorded
/// them on the local model in its default setup, replayed by the command line with no server:
/// each spec file, its cases and its workspace give the same requests the test sent, and every
/// task passes. A change to a task's spec, or to what a run of it sends, makes it stale (exit 3).
#[test]
fn the_real_model_suite_replays_offline_through_the_command_line() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/real/suite");
    let mut specs: Vec<PathBuf> = std::fs::read_dir(root.join("specs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    specs.sort();
    assert_eq!(specs.len(), 8);
    for spec in specs {
        let name = spec.file_stem().unwrap().to_str().unwrap().to_string();
        let mut cmd = Command::new(BIN);
        cmd.current_dir(&root)
            .arg("eval")
            .arg(&spec)
            .args(["--replay", "recordings", "--format", "json", "-q"])
            .env_remove("OPENAI_API_KEY");
        let ws = root.join("workspaces").join(&name);
        if ws.is_dir() {
            cmd.arg("--workspace").arg(&ws);
        }
        let o = cmd.output().unwrap();
        assert_eq!(code(&o), 0, "{name}: {}", stderr(&o));
        let r = report(&o);
        assert_eq!(r["model"], "openai:local", "{name}");
        let case = &r["cases"][0];
        assert_eq!(
            (&case["outcome"], &case["passed"]),
            (&json!("completed"), &json!(true)),
            "{name}: {case}"
        );
        assert!(case["requests"].as_u64().unwrap() >= 1, "{name}: {case}");
    }
}

/// A judge written as a spec file beside the cases, through the command line: it runs after
/// the case on the same model, and its `reason` is the failure when it says `false`.
#[test]
fn a_judge_spec_file_grades_through_the_command_line() {
    let d = Dir::new(&[
        r#"{"id": "fr", "input": {"country": "France"}, "expect": {"judge": "judges/strict.toml"}}"#,
    ]);
    std::fs::create_dir_all(d.path("judges")).unwrap();
    std::fs::write(
        d.path("judges/strict.toml"),
        r#"
name = "strict"
description = "Judges an answer about a capital."
system = "Say whether the output names the capital of the case's country."

[limits]
max_turns = 1
max_tokens_per_turn = 100

[input]
type = "object"

[output]
type = "object"
required = ["pass", "reason"]
additionalProperties = false
properties.pass = { type = "boolean" }
properties.reason = { type = "string", maxLength = 200 }

[[examples]]
input = { case = { id = "fr" }, output = {} }
output = { pass = false, reason = "it gives no district" }
"#,
    )
    .unwrap();
    let o = d.eval(&["--model", "example", "--format", "json"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let r = report(&o);
    let case = &r["cases"][0];
    assert_eq!(case["valid"], true, "{r}");
    assert_eq!(
        case["failed"],
        json!(["judge `strict`: it gives no district"])
    );
    assert_eq!(case["requests"], 2, "the answer and the judge: {r}");
    // A judge that cannot say pass and reason is refused before anything runs.
    std::fs::write(
        d.path("judges/strict.toml"),
        std::fs::read_to_string(d.path("judges/strict.toml"))
            .unwrap()
            .replace(
                "properties.pass = { type = \"boolean\" }",
                "properties.pass = { type = \"string\", maxLength = 5 }",
            )
            .replace("pass = false,", "pass = \"no\","),
    )
    .unwrap();
    let o = d.eval(&["--model", "example"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "the judge `judges/strict.toml` must output {\"pass\": boolean, \"reason\": string}"
        ),
        "{}",
        stderr(&o)
    );
}

/// `subcontract eval ARGS` in `d`, killed (and the test failed) if it runs past 60 s: a path
/// that blocks a read (a FIFO) must be refused, not waited on.
fn eval_bounded(d: &Dir, args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .current_dir(d.tmp.path())
        .args(["eval", "capital.toml"])
        .args(args)
        .env_remove("SUBCONTRACT_MODEL")
        .env("OPENAI_API_KEY", "")
        .env("ANTHROPIC_API_KEY", "")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("eval {args:?} still running after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Exit 2 before anything ran, the path named in the error; no recording written.
fn refused_before_any_call(d: &Dir, args: &[&str], names: &str, why: &str) {
    let rec = d.path("rec-refused");
    let rec_arg = rec.to_str().unwrap();
    let mut all = vec!["--model", "example"];
    all.extend_from_slice(args);
    if !args.contains(&"--record") {
        all.extend_from_slice(&["--record", rec_arg]);
    }
    let o = eval_bounded(d, &all);
    let err = stderr(&o);
    assert_eq!(code(&o), 2, "{args:?}: {err}");
    assert!(err.contains(names), "{args:?}: wanted {names:?} in:\n{err}");
    assert!(err.contains(why), "{args:?}: wanted {why:?} in:\n{err}");
    assert!(err.contains("nothing was run"), "{args:?}: {err}");
    assert!(
        !rec.exists()
            || walk(&rec)
                .iter()
                .all(|p| !p.to_string_lossy().ends_with(".jsonl")),
        "{args:?}: a recording was written"
    );
    let _ = std::fs::remove_dir_all(&rec);
}

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(ok.success(), "mkfifo {}", path.display());
}

fn judged(judge: &str) -> String {
    format!(r#"{{"id": "fr", "input": {{"country": "France"}}, "expect": {{"judge": "{judge}"}}}}"#)
}

/// A cases file's judge path that is a FIFO, a device, a link out of the cases file's
/// directory or a path out of it: refused before the first model call, naming the path, and
/// never opened (a FIFO would block the eval for ever, `/dev/zero` never end it).
#[cfg(unix)]
#[test]
fn hostile_judge_paths_are_refused_before_any_model_call() {
    let d = Dir::new(&[PASSING]);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("judge.toml"), SPEC).unwrap();
    std::fs::create_dir_all(d.path("judges")).unwrap();
    mkfifo(&d.path("judges/fifo.toml"));
    std::os::unix::fs::symlink("/dev/zero", d.path("judges/zero.toml")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("judge.toml"), d.path("judges/out.toml"))
        .unwrap();
    std::os::unix::fs::symlink("fifo.toml", d.path("judges/to-fifo.toml")).unwrap();
    std::fs::create_dir_all(d.path("judges/dir.toml")).unwrap();
    let out = outside.path().join("judge.toml");
    for (judge, why) in [
        ("judges/fifo.toml", "a FIFO, not a regular file"),
        ("judges/to-fifo.toml", "a FIFO, not a regular file"),
        ("judges/dir.toml", "a directory, not a regular file"),
        ("/dev/zero", "outside the cases file's directory"),
        ("judges/zero.toml", "outside the cases file's directory"),
        ("judges/out.toml", "outside the cases file's directory"),
        ("../judge.toml", "cannot be read"),
        (out.to_str().unwrap(), "outside the cases file's directory"),
    ] {
        d.cases(&[&judged(judge)]);
        refused_before_any_call(&d, &[], &format!("the judge `{judge}`"), why);
    }
}

/// The cases file itself: a FIFO and a device are refused without being read, as is a link
/// that leads out of its directory.
#[cfg(unix)]
#[test]
fn a_cases_file_that_is_a_fifo_a_device_or_a_link_out_is_refused() {
    let d = Dir::new(&[PASSING]);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("c.jsonl"), PASSING).unwrap();
    mkfifo(&d.path("fifo.jsonl"));
    std::os::unix::fs::symlink(outside.path().join("c.jsonl"), d.path("out.jsonl")).unwrap();
    for (cases, why) in [
        ("fifo.jsonl", "a FIFO, not a regular file"),
        ("/dev/zero", "a device, not a regular file"),
        ("out.jsonl", "outside its own directory"),
    ] {
        refused_before_any_call(&d, &["--cases", cases], cases, why);
    }
}

/// `--out` is opened before the first model call: a file in a directory that does not exist,
/// a directory, a FIFO or a device is refused then, not after every call was paid for.
#[cfg(unix)]
#[test]
fn an_out_that_cannot_be_written_is_refused_before_any_model_call() {
    let d = Dir::new(&[PASSING]);
    mkfifo(&d.path("fifo.json"));
    std::fs::create_dir_all(d.path("a-dir")).unwrap();
    for (out, why) in [
        ("missing/report.json", "cannot be written"),
        ("a-dir", "a directory, not a regular file"),
        ("fifo.json", "a FIFO, not a regular file"),
        ("/dev/null", "a device, not a regular file"),
    ] {
        refused_before_any_call(&d, &["--out", out], out, why);
    }
    // A file that can be written gets the report, replacing what it held.
    std::fs::write(d.path("report.json"), "x".repeat(100_000)).unwrap();
    let o = eval_bounded(
        &d,
        &[
            "--model",
            "example",
            "--format",
            "json",
            "--out",
            "report.json",
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let written = std::fs::read(d.path("report.json")).unwrap();
    let r: Value = serde_json::from_slice(&written).expect("the whole file is the report");
    assert_eq!(r["cases"][0]["passed"], true, "{r}");
}

/// A recordings' tree with a link in it that leads elsewhere: refused before the first model
/// call, and nothing is written where the link leads.
#[cfg(unix)]
#[test]
fn a_record_tree_linked_outside_is_refused_before_any_model_call() {
    let d = Dir::new(&[PASSING]);
    let outside = tempfile::tempdir().unwrap();
    let rec = d.path("rec");
    let model_dir = rec.join(subcontract::eval::record::safe_name("example"));
    std::fs::create_dir_all(&rec).unwrap();
    // The model's directory is a link out.
    std::os::unix::fs::symlink(outside.path(), &model_dir).unwrap();
    let o = eval_bounded(&d, &["--model", "example", "--record", "rec"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is a symbolic link in the recordings' tree"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("nothing was run"), "{}", stderr(&o));
    assert!(walk(outside.path()).is_empty(), "written through the link");
    // The mode's directory is the link, one level down.
    std::fs::remove_file(&model_dir).unwrap();
    std::fs::create_dir_all(&model_dir).unwrap();
    std::os::unix::fs::symlink(outside.path(), model_dir.join("auto")).unwrap();
    let o = eval_bounded(&d, &["--model", "example", "--record", "rec"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("auto: is a symbolic link"),
        "{}",
        stderr(&o)
    );
    assert!(walk(outside.path()).is_empty(), "written through the link");
    // `--record` naming a file, or a FIFO where a recording goes.
    std::fs::remove_file(model_dir.join("auto")).unwrap();
    std::fs::write(d.path("a-file"), "").unwrap();
    refused_before_any_call(&d, &["--record", "a-file"], "a-file", "not a directory");
    std::fs::create_dir_all(model_dir.join("auto")).unwrap();
    let target = subcontract::eval::recording_path(
        &rec,
        "example",
        subcontract::spec::OutputMode::Auto,
        "fr",
        1,
    );
    mkfifo(&target);
    refused_before_any_call(&d, &["--record", "rec"], "fr", "a FIFO, not a regular file");
    // With the tree clean, the same eval records.
    std::fs::remove_file(&target).unwrap();
    let o = eval_bounded(&d, &["--model", "example", "--record", "rec"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(target.is_file());
}

/// A key given twice in one object of a case (a grader's, an input's) and a case id with a
/// bidi control are errors naming the line: JSON would keep the last of two keys silently,
/// and a bidi override would reorder what a report shows of the id.
#[test]
fn a_repeated_key_and_a_bidi_control_in_an_id_are_refused() {
    let d = Dir::new(&[PASSING]);
    for (line, wants) in [
        (
            r#"{"id": "a", "input": {"country": "France"}, "expect": {"fields": {"/city": "Paris", "/city": "Rome"}}}"#,
            "capital.cases.jsonl:1: the key `/city` is given twice in one object",
        ),
        (
            r#"{"id": "a", "input": {"country": "France"}, "expect": {"contains": {"/city": ["P"], "/city": ["R"]}}}"#,
            "the key `/city` is given twice",
        ),
        (
            r#"{"id": "a", "input": {"country": "France", "country": "Japan"}}"#,
            "the key `country` is given twice",
        ),
        (
            r#"{"id": "a", "input": {"country": "France"}, "expect": {"fields": {"/city": {"x": 1, "x": 2}}}}"#,
            "the key `x` is given twice",
        ),
        (
            "{\"id\": \"a\u{202e}b\", \"input\": {\"country\": \"France\"}}",
            "no control or bidi control character",
        ),
        (
            "{\"id\": \"a\u{2066}b\", \"input\": {\"country\": \"France\"}}",
            "no control or bidi control character",
        ),
    ] {
        d.cases(&[line]);
        refused_before_any_call(&d, &[], "capital.cases.jsonl:1", wants);
    }
}
