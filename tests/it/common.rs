//! Shared fixtures: a bounded findings contract, host/child specs, and scripted models.

use std::sync::Arc;

use serde_json::{json, Value};
use subcontract::model::{ModelRequest, ScriptStep, ScriptedModel};
use subcontract::{SpecBuilder, SubAgentSpec, ToolOutput};

pub fn findings_schema() -> Value {
    json!({
        "type": "object", "required": ["findings", "gaps"], "additionalProperties": false,
        "properties": {
            "findings": {"type": "array", "maxItems": 5, "items": {
                "type": "object", "additionalProperties": false, "required": ["claim", "source_ids"],
                "properties": {
                    "claim": {"type": "string", "maxLength": 300},
                    "source_ids": {"type": "array", "minItems": 1, "maxItems": 5, "items": {"type": "string", "maxLength": 64}}
                }}},
            "gaps": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 200}}
        }
    })
}

pub fn question_schema() -> Value {
    json!({"type": "object", "required": ["question"], "additionalProperties": false,
           "properties": {"question": {"type": "string", "minLength": 3, "maxLength": 500}}})
}

pub fn good_findings() -> Value {
    json!({"findings": [{"claim": "It uses tokio.", "source_ids": ["Cargo.toml"]}], "gaps": []})
}

/// A sub-agent spec over JSON with the findings contract.
pub fn research_spec(name: &str, tools: &[&str]) -> SubAgentSpec<Value, Value> {
    research_builder(name, tools)
        .max_turns(4)
        .build()
        .expect("the test spec is valid")
}

/// The builder of [`research_spec`], its limits left to the caller (system prompt `CHILD
/// <name>`, which scripted models answer by).
pub fn research_builder(name: &str, tools: &[&str]) -> SpecBuilder<Value, Value> {
    SubAgentSpec::dynamic(name, question_schema(), findings_schema())
        .description("Investigate a question and return findings.")
        .system(format!("CHILD {name}"))
        .tools(tools.iter().copied())
}

/// A host spec whose output is bounded text.
pub fn host_spec(tools: &[&str]) -> SubAgentSpec<Value, Value> {
    SubAgentSpec::dynamic(
        "host",
        json!({"type": "object"}),
        json!({"type": "string", "maxLength": 2000}),
    )
    .description("The host agent.")
    .system("HOST")
    .tools(tools.iter().copied())
    .max_turns(6)
    .build()
    .expect("the host spec is valid")
}

/// Turn number (1-based) of a request: one user message, then two messages per turn.
pub fn turn_of(req: &ModelRequest<'_>) -> usize {
    req.messages.len().div_ceil(2)
}

/// A scripted model that answers by system prompt: `f(system, turn, request)`.
pub fn model(
    f: impl Fn(&str, usize, &ModelRequest<'_>) -> ScriptStep + Send + Sync + 'static,
) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn("scripted:test", move |req| {
        f(req.system, turn_of(&req), &req)
    }))
}

pub fn lookup_tool(name: &str) -> Arc<dyn subcontract::Tool> {
    subcontract::FnTool::new(
        name.to_string(),
        "Looks something up.",
        json!({"type": "object", "properties": {"q": {"type": "string", "maxLength": 100}}, "additionalProperties": false}),
        |_args| async { ToolOutput::text("constant-tool-result") },
    )
}

/// A Python package an end-to-end test drives (a real client or backend we did not write).
pub struct PythonPackage {
    /// The test's name, prefixed to what it says while installing.
    pub test: &'static str,
    /// The pinned requirement, `name==version`.
    pub requirement: &'static str,
    /// A module that imports only when the package is usable.
    pub import: &'static str,
    /// The variable naming a Python that already has it.
    pub env_var: &'static str,
    /// The test's own virtual environment, under the target's temporary directory.
    pub venv: &'static str,
}

/// A Python with `package` importable: the one its variable names, else the test's own virtual
/// environment, made and filled on first use (what it runs shown on the real stderr: libtest
/// captures `eprintln!`, and a first install takes a while). Panics with the command to run
/// when neither works: a missing client or backend must fail its test, not pass it unseen.
pub fn python_with(package: &PythonPackage) -> std::path::PathBuf {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    let PythonPackage {
        test,
        requirement,
        import,
        env_var,
        venv,
    } = package;
    let say = |line: &str| {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "{test}: {line}");
    };
    let imports = |python: &Path| {
        Command::new(python)
            .args(["-c", &format!("import {import}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let step = |program: &Path, args: &[&str]| -> Result<(), String> {
        let shown = format!("{} {}", program.display(), args.join(" "));
        say(&shown);
        match Command::new(program).args(args).status() {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(format!("`{shown}` failed ({s})")),
            Err(e) => Err(format!("`{shown}` could not start: {e}")),
        }
    };
    if let Some(p) = std::env::var_os(env_var).map(PathBuf::from) {
        assert!(
            imports(&p),
            "{env_var}={} cannot import `{import}`; install it with:\n  {} -m pip install {requirement}",
            p.display(),
            p.display()
        );
        return p;
    }
    // Tests sharing a venv run at once: one installs, the others wait and then find it.
    static INSTALL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join(venv);
    let python = venv.join("bin/python");
    if imports(&python) {
        return python;
    }
    say(&format!(
        "installing {requirement} into {} (once)",
        venv.display()
    ));
    let venv_arg = venv.to_string_lossy();
    let made = (if python.exists() {
        Ok(())
    } else {
        step(Path::new("python3"), &["-m", "venv", &venv_arg])
    })
    .and_then(|()| step(&python, &["-m", "pip", "install", "-q", requirement]));
    if let Err(e) = made {
        panic!(
            "the {test} needs {requirement} and could not install it: {e}\n\
             Install it with:\n  python3 -m venv {venv_arg} && {venv_arg}/bin/pip install {requirement}\n\
             or point {env_var} at a Python that has it."
        );
    }
    assert!(
        imports(&python),
        "{requirement} installed but `import {import}` fails"
    );
    python
}

/// A chat-completions server on a local port that answers request `n` (0-based, with its
/// JSON body) with the tool call `f(n, body)` returns, `(name, arguments)`; `None` holds the
/// connection open without an answer. Returns its `/v1` base URL. For the command line, which
/// takes a provider, not a scripted model.
pub fn chat_server(
    f: impl Fn(usize, &Value) -> Option<(String, Value)> + Send + 'static,
) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a local port");
    let url = format!("http://{}/v1", listener.local_addr().expect("address"));
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(10)));
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length.min(1 << 22)];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let Some((name, args)) = f(n, &req) else {
                held.push(stream);
                continue;
            };
            let reply = json!({
                "id": format!("c{n}"), "object": "chat.completion", "created": 0, "model": "mock",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": null,
                    "tool_calls": [{"id": format!("t{n}"), "type": "function",
                        "function": {"name": name, "arguments": args.to_string()}}]}}],
                "usage": {"prompt_tokens": 400, "completion_tokens": 20, "total_tokens": 420}
            })
            .to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    url
}
