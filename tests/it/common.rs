//! Shared fixtures: a bounded findings contract, host/child specs, and scripted models.

use std::sync::Arc;

use serde_json::{json, Value};
use subcontract::model::{ModelRequest, ScriptStep, ScriptedModel};
use subcontract::{SubAgentSpec, ToolOutput};

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
    SubAgentSpec::dynamic(name, question_schema(), findings_schema())
        .description("Investigate a question and return findings.")
        .system(format!("CHILD {name}"))
        .tools(tools.iter().copied())
        .max_turns(4)
        .build()
        .expect("the test spec is valid")
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
