//! `subcontract mcp` end to end, driven by the official MCP Python SDK (a client we did not
//! write): initialize, list, a successful call, an invalid call, a failing run, a run cut short,
//! an unknown tool, concurrent calls, and a call after all of those; then a second connection on
//! the modern (2026-07-28, `server/discover`) lifecycle.
//!
//! The SDK is found at `$SUBCONTRACT_MCP_PYTHON` when that is set; otherwise the test keeps its
//! own virtual environment under `target/tmp/mcp-venv` and installs the SDK there on first use
//! (with a message on stderr). It never passes without having run the client: when the SDK
//! cannot be had, it fails with the command that installs it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use subcontract::events::{read_jsonl, EventKind};
use subcontract::spec::load_spec;

const BIN: &str = env!("CARGO_BIN_EXE_subcontract");

/// The SDK version the client script is written against.
const MCP_SDK: &str = "mcp==2.3.0";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures() -> PathBuf {
    root().join("tests/fixtures/mcp")
}

/// A Python with the `mcp` SDK (see `common::python_with`).
pub(crate) fn python() -> PathBuf {
    crate::common::python_with(&crate::common::PythonPackage {
        test: "mcp client test",
        requirement: MCP_SDK,
        import: "mcp",
        env_var: "SUBCONTRACT_MCP_PYTHON",
        venv: "mcp-venv",
    })
}

/// How many specs the fixtures hold: the tools a server over them lists.
fn fixture_specs() -> usize {
    std::fs::read_dir(fixtures())
        .expect("the fixtures")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "toml"))
        })
        .count()
}

fn example_output(spec: &str) -> Value {
    let spec = load_spec(fixtures().join(format!("{spec}.toml"))).expect("fixture spec loads");
    spec.examples()[0].1.clone()
}

fn tool<'a>(tools: &'a [Value], name: &str) -> &'a Value {
    tools
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("tool {name} listed"))
}

fn assert_ok(call: &Value, expected: &Value, what: &str) {
    assert_eq!(call["isError"], false, "{what}: {call}");
    assert_eq!(&call["structuredContent"], expected, "{what}");
    // The text copy is the same output as compact JSON.
    let text = call["text"][0].as_str().expect("a text copy");
    assert_eq!(
        &serde_json::from_str::<Value>(text).expect("text is JSON"),
        expected
    );
}

#[test]
fn a_real_mcp_client_lists_calls_and_survives_failures() {
    let python = python();
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("trace.jsonl");
    let out = Command::new(&python)
        .arg(root().join("tests/mcp_client.py"))
        .arg(BIN)
        .arg(fixtures())
        .arg(root())
        .arg(&trace)
        .output()
        .expect("python runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "client failed:\n{stderr}");
    let s: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("client summary is JSON ({e}):\n{stderr}"));

    // initialize
    let version = s["protocolVersion"].as_str().expect("protocol version");
    assert!(version >= "2025-06-18", "protocol version {version}");
    assert_eq!(s["serverInfo"]["name"], "subcontract");
    assert!(s["capabilities"]["tools"].is_object());

    // tools/list: every spec, with its own schemas.
    let tools = s["tools"].as_array().expect("tools");
    let mut names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["classify", "digest", "headline", "no_example"]);
    let classify = load_spec(fixtures().join("classify.toml")).expect("fixture loads");
    let t = tool(tools, "classify");
    assert_eq!(t["description"], classify.description());
    assert_eq!(&t["inputSchema"], &**classify.input_contract().schema());
    assert_eq!(&t["outputSchema"], &**classify.output_contract().schema());
    // A string output is served wrapped in an object, as MCP requires.
    let headline = load_spec(fixtures().join("headline.toml")).expect("fixture loads");
    let t = tool(tools, "headline");
    assert_eq!(t["outputSchema"]["type"], "object");
    assert_eq!(
        &t["outputSchema"]["properties"]["result"],
        &**headline.output_contract().schema()
    );

    // A successful call: the validated output, as structured content and text.
    let expected = example_output("classify");
    assert_ok(&s["ok"], &expected, "ok");
    let progress = s["progress"].as_array().expect("progress list");
    assert!(!progress.is_empty(), "progress notifications were sent");
    assert_ok(
        &s["wrapped"],
        &json!({ "result": example_output("headline") }),
        "wrapped",
    );

    // Failures are isError results naming the outcome.
    assert_eq!(s["bad_args"]["isError"], true, "{}", s["bad_args"]);
    let text = s["bad_args"]["text"][0].as_str().unwrap_or("");
    assert!(text.starts_with("invalid_input: "), "{text}");
    assert!(
        text.contains("/sentence") && !text.contains("invalid input:"),
        "{text}"
    );
    assert_eq!(s["failing"]["isError"], true, "{}", s["failing"]);
    let text = s["failing"]["text"][0].as_str().unwrap_or("");
    assert!(text.starts_with("model_error:"), "{text}");
    // A run cut short completes: its output, with the limit in `_meta` and a second text.
    let cut = &s["cut_short"];
    assert_eq!(cut["isError"], false, "{cut}");
    assert_eq!(cut["structuredContent"], example_output("digest"), "{cut}");
    assert_eq!(cut["meta"]["subcontract/cut_short"], "turns", "{cut}");
    assert_eq!(
        cut["text"][1],
        "completed, cut short by its turn limit: the answer may be incomplete"
    );
    // An unknown tool is a protocol error.
    assert_eq!(s["unknown"]["raised"], true, "{}", s["unknown"]);
    assert!(s["unknown"]["error"]
        .as_str()
        .unwrap_or("")
        .contains("no_such_tool"));

    // Concurrent calls and a call after every failure are still served.
    for c in s["concurrent"].as_array().expect("concurrent") {
        assert_ok(c, &expected, "concurrent");
    }
    assert_ok(&s["after"], &expected, "after");

    // The modern lifecycle (no `initialize`, `server/discover`) serves the same tools.
    let modern = &s["modern"];
    let versions = modern["supportedVersions"].as_array().expect("versions");
    assert!(versions.contains(&json!("2025-06-18")), "{versions:?}");
    assert!(versions.contains(&json!("2026-07-28")), "{versions:?}");
    assert_eq!(modern["tools"].as_array().map(Vec::len), Some(names.len()));
    assert_ok(&modern["ok"], &expected, "modern");

    // The trace holds every call's run, each a child of the one server-wide root.
    let events = read_jsonl(&trace).expect("trace readable");
    let finished: Vec<_> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Finished { .. }) && e.depth == 1)
        .collect();
    assert_eq!(finished.len(), 10, "one finished run per call");
    assert!(finished
        .iter()
        .all(|e| e.parent_run_id.as_deref() == Some("mcp")));

    // Logs go to stderr, one line per call.
    assert!(
        stderr.contains(&format!("subcontract mcp: serving {} tool(s)", names.len())),
        "{stderr}"
    );
}

fn run_cli(args: &[&str], model_env: Option<&str>) -> (i32, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .stdin(Stdio::null())
        .env_remove("SUBCONTRACT_MODEL");
    if let Some(m) = model_env {
        cmd.env("SUBCONTRACT_MODEL", m);
    }
    let out = cmd.output().expect("binary runs");
    assert!(out.stdout.is_empty(), "nothing on stdout but the protocol");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn mcp_without_a_model_is_a_usage_error() {
    let f = fixtures();
    let (code, err) = run_cli(&["mcp", path(&f)], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("SUBCONTRACT_MODEL"), "{err}");
}

#[test]
fn mcp_refuses_a_cost_limit_a_spec_would_refuse() {
    let f = fixtures();
    for limit in ["0", "-1", "0.00"] {
        let flag = format!("--max-cost-usd={limit}");
        let (code, err) = run_cli(&["mcp", path(&f), "--model", "example", &flag], None);
        assert_eq!(code, 2, "{limit}: {err}");
        assert!(
            err.contains("--max-cost-usd must be greater than 0"),
            "{limit}: {err}"
        );
    }
}

#[test]
fn mcp_refuses_specs_that_do_not_load() {
    let bad = root().join("tests/fixtures/check/invalid_schema");
    let (code, err) = run_cli(&["mcp", path(&bad), "--model", "example"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("error[invalid-schema]"), "{err}");
}

#[test]
fn mcp_refuses_two_specs_with_one_name() {
    let f = fixtures().join("classify.toml");
    let (code, err) = run_cli(&["mcp", path(&f), path(&f), "--model", "example"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("two specs are named `classify`"), "{err}");
}

#[test]
fn mcp_with_no_input_ends_quietly() {
    // A client that connects and hangs up at once: the server exits, printing nothing on stdout.
    let f = fixtures();
    let (code, err) = run_cli(&["mcp", path(&f)], Some("example"));
    assert!(code == 0 || code == 1, "{code}: {err}");
}

fn path(p: &Path) -> &str {
    p.to_str().expect("fixture paths are UTF-8")
}

/// The server binary on piped stdio, with its replies read by a thread so that a reply that
/// never comes fails the test instead of hanging it.
pub(crate) struct Served {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    replies: std::sync::mpsc::Receiver<Value>,
}

impl Served {
    fn start(extra: &[&str]) -> Served {
        let f = fixtures();
        let mut args = vec!["mcp", path(&f)];
        args.extend_from_slice(extra);
        Served::start_args(&args)
    }

    /// `subcontract ARGS…` as an MCP server on stdio, initialized.
    pub(crate) fn start_args(args: &[&str]) -> Served {
        use std::io::BufRead;
        let mut child = Command::new(BIN)
            .args(args)
            .current_dir(root())
            .env_remove("SUBCONTRACT_MODEL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("binary starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, replies) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v = serde_json::from_str(&line).expect("every line the server writes is JSON");
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut served = Served {
            child,
            stdin,
            replies,
        };
        served.initialize();
        served
    }

    fn initialize(&mut self) {
        self.send_line(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}})
            .to_string(),
        );
        let init = self.reply(0);
        assert!(init["result"]["protocolVersion"].is_string(), "{init}");
        self.send_line(
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        );
    }

    pub(crate) fn send_line(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).expect("server reads");
        stdin.write_all(b"\n").expect("server reads");
        stdin.flush().expect("server reads");
    }

    /// The reply to request `id` (`Value::Null`: an error without an id), skipping
    /// notifications.
    pub(crate) fn reply(&self, id: impl Into<Value>) -> Value {
        let id = id.into();
        let wanted = |m: &Value| match m.get("id") {
            Some(got) => *got == id,
            None => id.is_null() && m.get("error").is_some(),
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let m = self
                .replies
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no reply to id {id} within 20 s"));
            if wanted(&m) {
                return m;
            }
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn mcp_malformed_tool_call_params_are_invalid_params() {
    let mut s = Served::start(&["--model", "example"]);
    for (id, params) in [
        (1, json!({"name": 5})),
        (2, json!({"name": "classify", "arguments": "not an object"})),
        (3, json!("a string")),
    ] {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        s.send_line(&call.to_string());
        let r = s.reply(id);
        assert_eq!(r["error"]["code"], -32602, "{r}");
        let message = r["error"]["message"].as_str().unwrap_or("");
        assert!(message.starts_with("invalid tools/call params: "), "{r}");
    }
    // No params at all is malformed too.
    s.send_line(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call"}).to_string());
    assert_eq!(s.reply(4)["error"]["code"], -32602);
    // An unknown method is still "method not found", and the server keeps serving.
    s.send_line(&json!({"jsonrpc": "2.0", "id": 5, "method": "no/such"}).to_string());
    assert_eq!(s.reply(5)["error"]["code"], -32601);
    s.send_line(&json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}).to_string());
    assert_eq!(
        s.reply(6)["result"]["tools"].as_array().map(Vec::len),
        Some(fixture_specs())
    );
}

#[test]
fn mcp_a_message_over_the_line_limit_is_answered() {
    let mut s = Served::start(&["--model", "example"]);
    let huge = "x".repeat(subcontract::mcp::MAX_LINE);
    // The id before the oversized params: the error names it.
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"classify","arguments":{{"sentence":"{huge}"}}}}}}"#
    );
    s.send_line(&line);
    let r = s.reply(7);
    assert_eq!(r["error"]["code"], -32600, "{r}");
    let message = r["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("longer than 16777216 bytes"), "{r}");
    // The id after them cannot be read without buffering the line: the error has no id.
    let line =
        format!(r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"pad":"{huge}"}},"id":8}}"#);
    s.send_line(&line);
    let r = s.reply(Value::Null);
    assert_eq!(r["error"]["code"], -32600, "{r}");
    // The session goes on.
    s.send_line(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}).to_string());
    assert_eq!(
        s.reply(9)["result"]["tools"].as_array().map(Vec::len),
        Some(fixture_specs())
    );
}

#[test]
fn mcp_closing_stdout_cancels_in_flight_runs() {
    use std::io::BufRead;
    use std::time::{Duration, Instant};
    // A model endpoint that accepts requests and never answers: the run waits on it until its
    // 30 s timeout unless something cancels it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (asked, model_asked) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            let Ok(conn) = conn else { break };
            held.push(conn);
            let _ = asked.send(());
        }
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("trace.jsonl");
    let f = fixtures();
    let mut child = Command::new(BIN)
        .args(["mcp", path(&f), "--model", "openai:gpt-test", "--base-url"])
        .arg(format!("http://127.0.0.1:{port}"))
        .arg("--trace")
        .arg(&trace)
        .env_remove("SUBCONTRACT_MODEL")
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("binary starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut send = |v: Value| {
        use std::io::Write;
        writeln!(stdin, "{v}").expect("server reads");
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}),
    );
    let mut line = String::new();
    stdout.read_line(&mut line).expect("initialize reply");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "classify", "arguments": {"sentence": "It crashes on save."}}}));
    model_asked
        .recv_timeout(Duration::from_secs(20))
        .expect("the run reached the model");
    // The host goes away on the output side only: stdin stays open.
    drop(stdout);
    let t0 = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if t0.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            panic!("the server kept running after its stdout closed");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(stdin);
    let _ = status;
    let events = read_jsonl(&trace).expect("trace readable");
    let outcome = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Finished { outcome, .. } if e.depth == 1 => Some(outcome.to_string()),
            _ => None,
        })
        .expect("the run finished");
    assert_eq!(outcome, "cancelled");
}
