//! MCP servers at their worst: killed mid-call, never answering, answering with one huge
//! line, and the process that started them killed with SIGKILL; and what a server can see of
//! our environment. The reference servers (npm, pinned) where they show it, a small stdio
//! script of ours (`tests/fixtures/mcp/hostile_server.py`) for the edges they do not.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use subcontract::model::ScriptedModel;
use subcontract::tool::mcp::{parse_mcp_config, McpServers};
use subcontract::{Ctx, ToolSet};

use crate::mcp_tools::{completion, filesystem_server, npm_server, tool_call};
use crate::providers::{Reply, Server};

const BIN: &str = env!("CARGO_BIN_EXE_subcontract");

/// Writes `NAME.toml` into `root`: a spec whose sub-agent may use `tools` (a TOML array's
/// items, e.g. `"mcp__h"`), takes any object and submits `{"done": bool}`. `limits` are more
/// `[limits]` lines.
pub(crate) fn write_done_spec(root: &Path, name: &str, system: &str, tools: &str, limits: &str) {
    let toml = format!(
        r#"name = "{name}"
description = "A test spec using MCP tools."
system = "{system}"
tools = [{tools}]

[limits]
max_turns = 4
max_tokens_per_turn = 256
{limits}
[input]
type = "object"

[output]
type = "object"
required = ["done"]
additionalProperties = false
properties.done = {{ type = "boolean" }}
"#
    );
    std::fs::write(root.join(format!("{name}.toml")), toml).expect("the spec file is written");
}

pub(crate) fn hostile_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/hostile_server.py")
}

pub(crate) fn servers(config: Value) -> Arc<McpServers> {
    let config = parse_mcp_config("test.json", &config.to_string(), Path::new("."), &|_| None)
        .expect("the config parses");
    McpServers::new(config)
}

async fn tools(servers: &Arc<McpServers>, names: &[&str]) -> ToolSet {
    let mut set = ToolSet::new();
    for t in servers.tools_for(names.iter().copied()).await.unwrap() {
        set.insert(t).unwrap();
    }
    set
}

fn ctx(tools: &ToolSet) -> Ctx {
    Ctx::builder(Arc::new(ScriptedModel::queue("scripted:t", vec![])))
        .tools(tools.clone())
        .build()
}

/// A process id of ours is still a live process (a zombie waiting for its reaper is not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(") ")
                .map(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X'))
        })
        .unwrap_or(false)
}

/// The processes whose environment holds `VAR=value`: the servers a test started, told apart
/// from other tests' by a variable of their config's `env`.
fn processes_with_env(var: &str, value: &str) -> Vec<u32> {
    let want = format!("{var}={value}");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if env.split(|&b| b == 0).any(|kv| kv == want.as_bytes()) && alive(pid) {
            out.push(pid);
        }
    }
    out
}

fn kill9(pid: u32) {
    let ok = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -9 {pid}");
}

fn tag() -> String {
    format!("{}-{}", std::process::id(), fastrand::u64(..))
}

/// A server killed while a call is in flight: that call is an error result naming the
/// server, at once (not at the timeout), and the next call starts it again and works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_call_is_an_error_and_the_next_call_works() {
    let tag = tag();
    let servers = servers(json!({"mcpServers": {"everything": {
        "command": "node", "args": [npm_server("server-everything"), "stdio"],
        "env": {"SUBCONTRACT_TEST_TAG": tag}, "timeout": 30_000,
    }}}));
    let set = tools(&servers, &["mcp__everything"]).await;
    let ctx = ctx(&set);
    let long = set
        .get("mcp__everything__trigger-long-running-operation")
        .expect("the long-running tool")
        .tool()
        .clone();
    let c = ctx.clone();
    let call = tokio::spawn(async move {
        let started = Instant::now();
        let out = long.call(json!({"duration": 25, "steps": 25}), &c).await;
        (out, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let pids = processes_with_env("SUBCONTRACT_TEST_TAG", &tag);
    assert_eq!(pids.len(), 1, "one server process: {pids:?}");
    kill9(pids[0]);
    let (out, took) = call.await.unwrap();
    assert!(out.is_error, "{}", out.content);
    assert!(
        out.content.contains("MCP server `everything`"),
        "{}",
        out.content
    );
    assert!(
        took < Duration::from_secs(15),
        "the dead server was noticed after {took:?}"
    );

    let sum = set
        .get("mcp__everything__get-sum")
        .expect("get-sum")
        .tool()
        .clone();
    let out = sum.call(json!({"a": 2, "b": 40}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("42"), "{}", out.content);
    let now = processes_with_env("SUBCONTRACT_TEST_TAG", &tag);
    assert!(
        now.len() == 1 && now != pids,
        "started again: {now:?} after {pids:?}"
    );
}

/// A server that takes a call and never answers: the call ends at the server's `timeout`
/// with an error result saying so, and the server still answers the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_hits_the_timeout() {
    let servers = servers(json!({"mcpServers": {"hostile": {
        "command": "python3", "args": [hostile_script()], "timeout": 1500,
    }}}));
    let set = tools(&servers, &["mcp__hostile"]).await;
    let ctx = ctx(&set);
    let hang = set.get("mcp__hostile__hang").unwrap().tool().clone();
    let started = Instant::now();
    let out = hang.call(json!({}), &ctx).await;
    let took = started.elapsed();
    assert!(out.is_error, "{}", out.content);
    assert!(
        out.content
            .contains("MCP server `hostile` did not answer within 1.5 s"),
        "{}",
        out.content
    );
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(10),
        "{took:?}"
    );
    let echo = set.get("mcp__hostile__echo").unwrap().tool().clone();
    let out = echo.call(json!({"text": "still here"}), &ctx).await;
    assert!(
        !out.is_error && out.content == "still here",
        "{}",
        out.content
    );
}

/// `structuredContent` that breaks the tool's own `outputSchema` is an error result for the
/// model, not data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_schema_violation_is_an_error_result() {
    let servers = servers(json!({"mcpServers": {"hostile": {
        "command": "python3", "args": [hostile_script()],
    }}}));
    let set = tools(&servers, &["mcp__hostile__bad_output"]).await;
    let bad = set.get("mcp__hostile__bad_output").unwrap();
    assert!(bad.tool().output_schema().is_some());
    let out = bad.tool().call(json!({}), &ctx(&set)).await;
    assert!(out.is_error, "{}", out.content);
    assert!(
        out.content.contains("breaks its outputSchema") && out.content.contains("/n"),
        "{}",
        out.content
    );
    assert!(out.structured.is_none());
}

/// One answer line far over the 16 MiB cap: the line ends the server's session at once (not
/// at the call's 60 s timeout), the call is an error result saying so, the server is started
/// again for the next call, and memory stays bounded; a large answer under the cap is withheld
/// from the model by the per-turn limit, with a message, never cut silently. Measured in the
/// `subcontract run` process itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_answers_are_bounded_and_never_cut_silently() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    write_done_spec(
        &root,
        "edge",
        "Call the tools.",
        r#""mcp__hostile""#,
        "max_tool_result_chars_per_turn = 100000\n",
    );
    // No `timeout`: a call that waited for the default one would say so, not why it ended.
    let config = json!({"mcpServers": {"hostile": {
        "command": "python3", "args": [hostile_script()],
    }}});
    std::fs::write(root.join(".mcp.json"), config.to_string()).unwrap();
    const OVER_CAP: u64 = 256 << 20;
    const UNDER_CAP: u64 = 4 << 20;
    let model = Server::start(vec![
        Reply::json(
            200,
            completion(tool_call(
                "c1",
                "mcp__hostile__huge",
                json!({"bytes": OVER_CAP}),
            )),
        ),
        Reply::json(
            200,
            completion(tool_call(
                "c2",
                "mcp__hostile__huge",
                json!({"bytes": UNDER_CAP}),
            )),
        ),
        // Held back, so the process can be measured while it is still running.
        Reply::json(
            200,
            completion(tool_call("c3", "submit_output", json!({"done": true}))),
        )
        .delayed(Duration::from_secs(2)),
    ])
    .await;
    let child = std::process::Command::new(BIN)
        .current_dir(&root)
        .args([
            "run",
            "edge.toml",
            "--input",
            "{}",
            "--model",
            "openai:local",
        ])
        .arg("--base-url")
        .arg(format!("{}/v1", model.base))
        .env("OPENAI_API_KEY", "sk-mcp-test-key")
        .env_remove("SUBCONTRACT_MODEL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(120);
    while model.received().len() < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let peak_kib: u64 = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .expect("the run's peak memory");
    let o = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let got = model.received();
    assert_eq!(got.len(), 3, "{err}");
    let results: Vec<String> = got[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[0].contains("MCP server `hostile` answered with a message over 16 MiB")
            && results[0].len() < 1000,
        "{}",
        &results[0][..results[0].len().min(500)]
    );
    assert!(
        results[1].contains("result withheld") && results[1].len() < 1000,
        "{}",
        &results[1][..results[1].len().min(500)]
    );
    // 256 MiB sent on one line; the process never held it.
    assert!(peak_kib < 160 << 10, "peak memory {} MiB", peak_kib >> 10);
    eprintln!(
        "huge MCP answers: peak memory of the run {} MiB",
        peak_kib >> 10
    );
}

/// A stdio server's environment is ours cleared but for an allow-list and its own `env`:
/// server-everything's `get-env` prints what it got, and neither the API key nor any other
/// variable of ours is in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_environment_holds_no_key_of_ours() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    write_done_spec(
        &root,
        "env",
        "Call get-env.",
        r#""mcp__everything__get-env""#,
        "",
    );
    let config = json!({"mcpServers": {"everything": {
        "command": "node", "args": [npm_server("server-everything"), "stdio"],
        "env": {"DECLARED_FOR_THE_SERVER": "yes"},
    }}});
    std::fs::write(root.join(".mcp.json"), config.to_string()).unwrap();
    let model = Server::start(vec![
        Reply::json(
            200,
            completion(tool_call("c1", "mcp__everything__get-env", json!({}))),
        ),
        Reply::json(
            200,
            completion(tool_call("c2", "submit_output", json!({"done": true}))),
        ),
    ])
    .await;
    let base = format!("{}/v1", model.base);
    let o = tokio::task::spawn_blocking(move || {
        std::process::Command::new(BIN)
            .current_dir(&root)
            .args([
                "run",
                "env.toml",
                "--input",
                "{}",
                "--model",
                "openai:local",
            ])
            .arg("--base-url")
            .arg(&base)
            .env("OPENAI_API_KEY", "sk-mcp-test-key-0123456789")
            .env("ANTHROPIC_API_KEY", "sk-ant-test-key-0123456789")
            .env("SUBCONTRACT_NOT_FOR_SERVERS", "private")
            .env_remove("SUBCONTRACT_MODEL")
            .output()
            .expect("the binary runs")
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let got = model.received();
    assert_eq!(got.len(), 2, "{err}");
    let result = got[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the tool result")["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // The tool did print an environment: the allow-listed PATH and the declared variable.
    assert!(
        result.contains("\"PATH\"") && result.contains("DECLARED_FOR_THE_SERVER"),
        "{result}"
    );
    for name in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "SUBCONTRACT_NOT_FOR_SERVERS",
    ] {
        assert!(
            !result.contains(name),
            "{name} reached the server: {result}"
        );
    }
}

/// `subcontract run` stopped by a signal while its MCP server is up: SIGKILL (no destructor
/// runs: the server sees its stdin end and exits), SIGTERM (the default action, the same) and
/// SIGINT (Ctrl-C: the run is cancelled and the process ends cleanly). No child outlives us.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_server_outlives_a_killed_subcontract() {
    for signal in ["KILL", "TERM", "INT"] {
        server_outlives_no_signal(signal).await;
    }
}

async fn server_outlives_no_signal(signal: &str) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("reader.toml"), crate::mcp_tools::READER_SPEC).unwrap();
    let tag = tag();
    let config = json!({"mcpServers": {"fs": {
        "command": "node", "args": [filesystem_server(), &root],
        "env": {"SUBCONTRACT_TEST_TAG": tag},
    }}});
    std::fs::write(root.join(".mcp.json"), config.to_string()).unwrap();
    // The model never answers in time: the run is mid-flight when it is killed.
    let model = Server::start(vec![Reply::json(
        200,
        completion(tool_call("c1", "submit_output", json!({"line": "x"}))),
    )
    .delayed(Duration::from_secs(120))])
    .await;
    let mut child = std::process::Command::new(BIN)
        .current_dir(&root)
        .args([
            "run",
            "reader.toml",
            "--model",
            "openai:local",
            "--base-url",
        ])
        .arg(format!("{}/v1", model.base))
        .arg("--input")
        .arg(json!({"path": root.join("reader.toml")}).to_string())
        .env("OPENAI_API_KEY", "sk-mcp-test-key")
        .env_remove("SUBCONTRACT_MODEL")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the binary runs");
    let deadline = Instant::now() + Duration::from_secs(60);
    while model.received().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        model.received().len(),
        1,
        "the run reached its first model call"
    );
    let servers = processes_with_env("SUBCONTRACT_TEST_TAG", &tag);
    assert_eq!(servers.len(), 1, "the filesystem server runs: {servers:?}");
    let sent = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .is_ok_and(|s| s.success());
    assert!(sent, "kill -{signal}");
    child.wait().expect("reaped");
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(servers[0]) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !alive(servers[0]),
        "the MCP server {} outlived subcontract stopped by SIG{signal}",
        servers[0]
    );
}
