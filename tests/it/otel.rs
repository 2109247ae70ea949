//! The GenAI spans end to end, on a real observability backend: Arize Phoenix (`phoenix
//! serve`, SQLite, OTLP over HTTP), started here on free ports with a working directory of its
//! own. `subcontract run` runs a host that calls a sub-agent twice (once with a repaired
//! output, once with a tool call) against a local OpenAI-compatible server and exports to
//! Phoenix; the spans are read back through Phoenix's own REST API and checked against the
//! run's JSON Lines trace: one trace, the span tree is the run tree, names and attributes after
//! the GenAI conventions, the same tokens and cost, and no key or message content.
//!
//! Phoenix is found beside `$SUBCONTRACT_PHOENIX_PYTHON` when that is set; otherwise the test
//! keeps its own virtual environment under `target/tmp/phoenix-venv` and installs it there on
//! first use (with a message on stderr). It never passes without Phoenix: when it cannot be
//! had, the test fails with the command that installs it.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use subcontract::events::{read_jsonl, EventKind};

use crate::providers::{Reply, Server};

const BIN: &str = env!("CARGO_BIN_EXE_subcontract");

/// The Phoenix release the test is written against.
const PHOENIX: &str = "arize-phoenix==20.26.1";

const KEY: &str = "sk-otel-test-key-0123456789";
/// Text only the conversation holds: it must not reach a span unless content is captured.
const QUESTION: &str = "Where is the-secret-question-text hashed?";

/// The `phoenix` command, beside a Python with Arize Phoenix (see `common::python_with`).
fn phoenix() -> PathBuf {
    let python = crate::common::python_with(&crate::common::PythonPackage {
        test: "phoenix test",
        requirement: PHOENIX,
        import: "phoenix.server.main",
        env_var: "SUBCONTRACT_PHOENIX_PYTHON",
        venv: "phoenix-venv",
    });
    let phoenix = python.with_file_name("phoenix");
    assert!(
        phoenix.is_file(),
        "{PHOENIX} installed but no `phoenix` beside {}",
        python.display()
    );
    phoenix
}

/// A line on the real stderr (libtest captures `eprintln!`): Phoenix's start-up takes a while.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "phoenix test: {line}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A Phoenix server, stopped (by its own process id) when dropped.
struct Phoenix {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Phoenix {
    fn start() -> Phoenix {
        let bin = phoenix();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("phoenix.log");
        let port = free_port();
        let child = Command::new(&bin)
            .arg("serve")
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", free_port().to_string())
            .env("PHOENIX_HOST", "127.0.0.1")
            .env_remove("PHOENIX_SQL_DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.path().join("phoenix.err")).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("{} serve could not start: {e}", bin.display()));
        let mut p = Phoenix {
            child,
            port,
            log,
            _dir: dir,
        };
        let t = Instant::now();
        loop {
            if let Ok((200, _)) = p.get("/healthz") {
                break;
            }
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!("phoenix serve exited ({status}): {}", p.logs());
            }
            assert!(
                t.elapsed() < Duration::from_secs(180),
                "phoenix serve not up within 180 s: {}",
                p.logs()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        say(&format!(
            "phoenix up on port {port} after {:?}",
            t.elapsed()
        ));
        p
    }

    fn logs(&self) -> String {
        let err = self.log.with_file_name("phoenix.err");
        let tail = |p: &Path| {
            let s = std::fs::read_to_string(p).unwrap_or_default();
            s[s.len().saturating_sub(3000)..].to_string()
        };
        format!("{}\n{}", tail(&self.log), tail(&err))
    }

    /// One GET over HTTP/1.0 (the answer ends with the connection): status and body.
    fn get(&self, path: &str) -> std::io::Result<(u16, String)> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)?;
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        Ok((status, body.to_string()))
    }

    /// Every span of `project`, once at least `want` have arrived (ingestion is asynchronous).
    fn spans(&self, project: &str, want: usize) -> Vec<Value> {
        let t = Instant::now();
        loop {
            let (status, body) = self
                .get(&format!("/v1/projects/{project}/spans?limit=1000"))
                .expect("phoenix answers");
            let spans = if status == 200 {
                let v: Value = serde_json::from_str(&body).expect("spans as JSON");
                v["data"].as_array().cloned().unwrap_or_default()
            } else {
                Vec::new()
            };
            if spans.len() >= want || t.elapsed() > Duration::from_secs(60) {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

fn completion(message: Value) -> Reply {
    Reply::json(
        200,
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-4.1-mini",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls", "logprobs": null}],
            "usage": {"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280}
        }),
    )
}

fn call(id: &str, name: &str, args: Value) -> Reply {
    completion(
        json!({"role": "assistant", "content": null, "tool_calls": [{
        "id": id, "type": "function",
        "function": {"name": name, "arguments": args.to_string()}}]}),
    )
}

const LOOKUP: &str = r#"name = "lookup"
description = "Find where something is in the workspace."
system = "Use grep, then submit where it is."
tools = ["grep"]
# Two turns: the second lookup's answer comes on its last turn, cut short by the limit (the
# first's is a repair there, which is not).
[limits]
max_turns = 2
[input]
type = "object"
required = ["question"]
properties.question = { type = "string" }
[output]
type = "object"
required = ["where"]
additionalProperties = false
properties.where = { type = "string", maxLength = 20 }
"#;

const HOST: &str = r#"name = "host"
description = "Answers questions about the workspace with the lookup sub-agent."
system = "Ask lookup, then summarise."
tools = ["lookup", "grep"]
[limits]
max_cost_usd = "1.00"
[input]
type = "object"
required = ["question"]
properties.question = { type = "string" }
[output]
type = "object"
required = ["summary"]
additionalProperties = false
properties.summary = { type = "string", maxLength = 200 }
"#;

/// The model's side of the run: host → lookup (rejected once, then repaired) → host → lookup
/// (a grep call, then a submission) → host submits. One request at a time, so in this order.
fn script(question: &str) -> Vec<Reply> {
    let q = json!({"question": question});
    vec![
        call("call_h1", "lookup", q.clone()),
        call("call_l1", "submit_output", json!({"where": "x".repeat(40)})),
        call("call_l2", "submit_output", json!({"where": "Cargo.toml"})),
        call("call_h2", "lookup", q),
        call("call_l3", "grep", json!({"pattern": "argon2"})),
        call("call_l4", "submit_output", json!({"where": "Cargo.toml:2"})),
        call("call_h3", "submit_output", json!({"summary": "Cargo.toml"})),
    ]
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

/// An attribute as a string (OTLP's JSON writes 64-bit integers as strings).
fn attr_str(span: &Value, key: &str) -> String {
    match attr(span, key) {
        Value::String(s) => s.clone(),
        Value::Null => panic!("no `{key}` on {span}"),
        v => v.to_string(),
    }
}

fn attr_u64(span: &Value, key: &str) -> u64 {
    attr_str(span, key)
        .parse()
        .unwrap_or_else(|e| panic!("`{key}` on {span}: {e}"))
}

fn attr_f64(span: &Value, key: &str) -> f64 {
    attr_str(span, key)
        .parse()
        .unwrap_or_else(|e| panic!("`{key}` on {span}: {e}"))
}

/// Runs the script against a fresh fake provider, exporting to Phoenix under `project`.
async fn run_exporting(
    phoenix: &Phoenix,
    project: &str,
    question: &str,
    extra: &[&str],
) -> (std::process::Output, Vec<subcontract::Event>) {
    let server = Server::start(script(question)).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lookup.toml"), LOOKUP).unwrap();
    std::fs::write(dir.path().join("host.toml"), HOST).unwrap();
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[dependencies]\nargon2 = \"0.5\"\n",
    )
    .unwrap();
    let trace = dir.path().join("trace.jsonl");
    let mut args: Vec<String> = [
        "run",
        "host.toml",
        "--model",
        "openai:gpt-4.1-mini",
        "--base-url",
        &format!("{}/v1", server.base),
        "--input",
        &json!({"question": question}).to_string(),
        "--trace",
        trace.to_str().unwrap(),
        "--otlp",
        &format!("http://127.0.0.1:{}", phoenix.port),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let dir_path = dir.path().to_path_buf();
    let project = project.to_string();
    let o = tokio::task::spawn_blocking(move || {
        Command::new(BIN)
            .args(&args)
            .current_dir(&dir_path)
            .env("OPENAI_API_KEY", KEY)
            .env_remove("SUBCONTRACT_MODEL")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
            // Phoenix files spans under the project this resource attribute names.
            .env(
                "OTEL_RESOURCE_ATTRIBUTES",
                format!("openinference.project.name={project}"),
            )
            .output()
            .expect("the binary runs")
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("WARN"), "no export warning: {err}");
    let events = read_jsonl(&trace).expect("the JSONL trace");
    (o, events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phoenix_shows_the_run_tree_with_tokens_and_cost() {
    let phoenix = tokio::task::spawn_blocking(Phoenix::start).await.unwrap();
    let (_, events) = run_exporting(&phoenix, "tree", QUESTION, &[]).await;

    // The run tree of the JSONL trace: run id → parent run id, and its totals.
    let mut runs: HashMap<String, Option<String>> = HashMap::new();
    let (mut input_tokens, mut output_tokens, mut cost, mut model_calls) = (0u64, 0u64, 0f64, 0);
    for e in &events {
        match &e.kind {
            EventKind::Started { .. } => {
                runs.insert(
                    e.run_id.to_string(),
                    e.parent_run_id.as_deref().map(String::from),
                );
            }
            EventKind::ModelCall {
                usage, cost_usd, ..
            } => {
                input_tokens += usage.input_tokens;
                output_tokens += usage.output_tokens;
                cost += cost_usd.to_string().parse::<f64>().unwrap();
                model_calls += 1;
            }
            _ => {}
        }
    }
    assert_eq!(runs.len(), 3, "host and two lookups: {runs:?}");
    assert_eq!(model_calls, 7);
    // 3 agents, 7 model calls, 3 tool calls (two sub-agent calls and a grep).
    let (spans, phoenix) = tokio::task::spawn_blocking(move || {
        let s = phoenix.spans("tree", 13);
        (s, phoenix)
    })
    .await
    .unwrap();
    assert_eq!(spans.len(), 13, "{spans:#?}");

    let traces: HashSet<&str> = spans
        .iter()
        .map(|s| s["context"]["trace_id"].as_str().unwrap())
        .collect();
    assert_eq!(traces.len(), 1, "one trace");
    let by_id: HashMap<&str, &Value> = spans
        .iter()
        .map(|s| (s["context"]["span_id"].as_str().unwrap(), s))
        .collect();
    let parent = |s: &Value| s["parent_id"].as_str().map(|p| by_id[p]);

    // Every agent span's nearest agent ancestor is its parent run; a sub-agent's own parent
    // is the execute_tool span that started it.
    let agents: Vec<&Value> = spans
        .iter()
        .filter(|s| attr_str(s, "gen_ai.operation.name") == "invoke_agent")
        .collect();
    assert_eq!(agents.len(), 3);
    for a in &agents {
        let run_id = attr_str(a, "subcontract.run_id");
        let expected_parent = runs[&run_id].clone();
        let spec = run_id
            .rsplit('.')
            .next()
            .unwrap()
            .rsplit_once('-')
            .unwrap()
            .0;
        assert_eq!(a["name"], format!("invoke_agent {spec}"));
        assert_eq!(attr_str(a, "gen_ai.agent.name"), spec);
        assert_eq!(attr_str(a, "gen_ai.provider.name"), "openai");
        assert_eq!(attr_str(a, "gen_ai.request.model"), "gpt-4.1-mini");
        assert_eq!(attr_str(a, "subcontract.outcome"), "completed");
        match parent(a) {
            // The top run's parent is the host context, which runs no spec of its own.
            None => assert_eq!(expected_parent.as_deref(), Some("root"), "{a}"),
            Some(tool) => {
                assert_eq!(tool["name"], format!("execute_tool {spec}"));
                assert_eq!(attr_str(tool, "gen_ai.tool.name"), spec);
                let caller = parent(tool).expect("a tool span has its run's span as parent");
                assert_eq!(
                    Some(attr_str(caller, "subcontract.run_id")),
                    expected_parent,
                    "the span tree is the run tree"
                );
                assert_eq!(
                    attr_u64(a, "subcontract.depth"),
                    attr_u64(caller, "subcontract.depth") + 1
                );
            }
        }
    }
    let lookup1 = agents
        .iter()
        .find(|a| attr_str(a, "subcontract.run_id").ends_with("lookup-1"))
        .expect("the first lookup");
    assert_eq!(attr_u64(lookup1, "subcontract.repairs"), 1, "one repair");
    assert_eq!(attr_u64(lookup1, "subcontract.turns"), 2);
    // A run cut short says by what; one that was not carries no such attribute.
    assert_eq!(
        attr(lookup1, "subcontract.cut_short"),
        &Value::Null,
        "{lookup1}"
    );
    let lookup2 = agents
        .iter()
        .find(|a| attr_str(a, "subcontract.run_id").ends_with("lookup-2"))
        .expect("the second lookup");
    assert_eq!(attr_str(lookup2, "subcontract.cut_short"), "turns");
    let host = agents.iter().find(|a| parent(a).is_none()).unwrap();
    assert_eq!(attr(host, "subcontract.cut_short"), &Value::Null, "{host}");
    assert_eq!(attr_u64(host, "subcontract.repairs"), 0);
    assert!((attr_f64(host, "subcontract.budget.limit_usd") - 1.0).abs() < 1e-9);
    assert!(
        (attr_f64(host, "subcontract.budget.remaining_usd") - (1.0 - cost)).abs() < 1e-9,
        "{host}"
    );
    assert!((attr_f64(host, "subcontract.total_cost_usd") - cost).abs() < 1e-9);

    // Model calls: one span each, under the run that made it, with its tokens and cost.
    let chats: Vec<&Value> = spans
        .iter()
        .filter(|s| attr_str(s, "gen_ai.operation.name") == "chat")
        .collect();
    assert_eq!(chats.len(), model_calls);
    let (mut span_in, mut span_out, mut span_cost) = (0, 0, 0.0);
    for c in &chats {
        assert_eq!(c["name"], "chat gpt-4.1-mini");
        assert_eq!(attr_str(c, "gen_ai.response.model"), "gpt-4.1-mini");
        assert_eq!(attr_str(c, "gen_ai.response.finish_reasons"), "tool_call");
        let run = parent(c).expect("a chat span has a parent");
        assert_eq!(
            attr_str(run, "subcontract.run_id"),
            attr_str(c, "subcontract.run_id")
        );
        span_in += attr_u64(c, "gen_ai.usage.input_tokens");
        span_out += attr_u64(c, "gen_ai.usage.output_tokens");
        span_cost += attr_f64(c, "subcontract.cost_usd");
    }
    assert_eq!((span_in, span_out), (input_tokens, output_tokens));
    assert!(
        cost > 0.0 && (span_cost - cost).abs() < 1e-9,
        "{span_cost} vs {cost}"
    );
    // The agents' own tokens add up to the same.
    let agent_in: u64 = agents
        .iter()
        .map(|a| attr_u64(a, "gen_ai.usage.input_tokens"))
        .sum();
    assert_eq!(agent_in, input_tokens);

    let tools: Vec<&Value> = spans
        .iter()
        .filter(|s| attr_str(s, "gen_ai.operation.name") == "execute_tool")
        .collect();
    let mut ids: Vec<String> = tools
        .iter()
        .map(|t| attr_str(t, "gen_ai.tool.call.id"))
        .collect();
    ids.sort();
    assert_eq!(ids, ["call_h1", "call_h2", "call_l3"]);

    // No key and no message content anywhere in what the backend holds.
    let all = serde_json::to_string(&spans).unwrap();
    assert!(!all.contains(KEY), "the key never leaves");
    assert!(
        !all.contains("the-secret-question-text") && !all.contains("argon2"),
        "no message content by default"
    );
    for key in [
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.tool.call.arguments",
    ] {
        assert!(!all.contains(key), "no `{key}` by default");
    }

    // The same Phoenix (it takes a while to start), another project.
    content_is_captured_on_request_and_redacted(phoenix).await;
}

async fn content_is_captured_on_request_and_redacted(phoenix: Phoenix) {
    // The key in the conversation itself: captured content is redacted like every other text.
    let question = format!("{QUESTION} {KEY}");
    let _ = run_exporting(&phoenix, "content", &question, &["--otel-capture-content"]).await;
    let (spans, _phoenix) = tokio::task::spawn_blocking(move || {
        let s = phoenix.spans("content", 13);
        (s, phoenix)
    })
    .await
    .unwrap();
    let all = serde_json::to_string(&spans).unwrap();
    assert!(
        all.contains("the-secret-question-text"),
        "content is captured"
    );
    assert!(all.contains("gen_ai.input.messages"));
    assert!(all.contains("gen_ai.tool.call.arguments"));
    assert!(!all.contains(KEY), "the key never leaves, content or not");
    assert!(all.contains("***"), "redacted where it was");
}

/// A collector that is not there costs one warning, not the run, and no wait.
#[test]
fn an_unreachable_collector_costs_one_warning() {
    let port = free_port();
    let t = Instant::now();
    let o = Command::new(BIN)
        .args([
            "run",
            "specs/research_topic.toml",
            "--model",
            "example",
            "--input",
            r#"{"question": "Which library hashes passwords?"}"#,
            "--otlp",
            &format!("http://127.0.0.1:{port}"),
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("SUBCONTRACT_MODEL")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(
        err.matches("cannot export spans").count(),
        1,
        "one warning: {err}"
    );
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
}
