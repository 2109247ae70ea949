//! `subcontract mcp` end to end, driven by the official MCP Python SDK (a client we did not
//! write): initialize, list, a successful call, an invalid call, a failing run, an unknown tool,
//! concurrent calls, and a call after all of those; then a second connection on the modern
//! (2026-07-28, `server/discover`) lifecycle.
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

fn imports_mcp(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import mcp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A line on the real stderr: libtest captures `eprintln!`, and a first install takes a while.
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "mcp client test: {line}");
}

/// Runs one setup step, its output shown.
fn step(program: &Path, args: &[&str]) -> Result<(), String> {
    let shown = format!("{} {}", program.display(), args.join(" "));
    say(&shown);
    match Command::new(program).args(args).status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("`{shown}` failed ({s})")),
        Err(e) => Err(format!("`{shown}` could not start: {e}")),
    }
}

/// A Python with the `mcp` SDK importable: `$SUBCONTRACT_MCP_PYTHON`, else the test's own
/// virtual environment, made and filled on first use. Panics with the command to run when
/// neither works: a missing client must fail the test, not pass it unseen.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("SUBCONTRACT_MCP_PYTHON").map(PathBuf::from) {
        assert!(
            imports_mcp(&p),
            "SUBCONTRACT_MCP_PYTHON={} cannot import `mcp`; install it with:\n  {} -m pip install {MCP_SDK}",
            p.display(),
            p.display()
        );
        return p;
    }
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-venv");
    let python = venv.join("bin/python");
    if imports_mcp(&python) {
        return python;
    }
    say(&format!(
        "installing the MCP Python SDK ({MCP_SDK}) into {} (once)",
        venv.display()
    ));
    let venv_arg = venv.to_string_lossy();
    let made = (if python.exists() {
        Ok(())
    } else {
        step(Path::new("python3"), &["-m", "venv", &venv_arg])
    })
    .and_then(|()| step(&python, &["-m", "pip", "install", "-q", MCP_SDK]));
    if let Err(e) = made {
        panic!(
            "the real-client MCP test needs the MCP Python SDK and could not install it: {e}\n\
             Install it with:\n  python3 -m venv {venv_arg} && {venv_arg}/bin/pip install {MCP_SDK}\n\
             or point SUBCONTRACT_MCP_PYTHON at a Python that has it."
        );
    }
    assert!(
        imports_mcp(&python),
        "{MCP_SDK} installed but `import mcp` fails"
    );
    python
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
    assert_eq!(names, ["classify", "headline", "no_example"]);
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
    assert_eq!(modern["tools"].as_array().map(Vec::len), Some(3));
    assert_ok(&modern["ok"], &expected, "modern");

    // The trace holds every call's run, each a child of the one server-wide root.
    let events = read_jsonl(&trace).expect("trace readable");
    let finished: Vec<_> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Finished { .. }) && e.depth == 1)
        .collect();
    assert_eq!(finished.len(), 9, "one finished run per call");
    assert!(finished
        .iter()
        .all(|e| e.parent_run_id.as_deref() == Some("mcp")));

    // Logs go to stderr, one line per call.
    assert!(
        stderr.contains("subcontract mcp: serving 3 tool(s)"),
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
