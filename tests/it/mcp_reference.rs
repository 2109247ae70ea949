//! Tools from the other reference MCP servers, none of them ours: npm `server-memory` and
//! `server-everything` (over stdio and over streamable HTTP), PyPI `mcp-server-time` and
//! `mcp-server-git`, each pinned and installed into the target's temporary directory on first
//! use (the npm ones by `npm install --prefix`, the Python ones each in its own virtual
//! environment), failing with the install command when they cannot be installed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use subcontract::model::ScriptedModel;
use subcontract::tool::mcp::{parse_mcp_config, McpServers};
use subcontract::{Ctx, ToolSet};

use crate::common::{python_with, PythonPackage};
use crate::mcp_tools::npm_server;

/// The tools of every server of `config`, and a context holding them.
async fn connect(config: Value) -> (ToolSet, Ctx) {
    let config = parse_mcp_config("test.json", &config.to_string(), Path::new("."), &|_| None)
        .expect("the config parses");
    let servers = McpServers::new(config);
    let mut set = ToolSet::new();
    for t in servers
        .all_tools()
        .await
        .expect("the servers list their tools")
    {
        set.insert(t).unwrap();
    }
    let ctx = Ctx::builder(Arc::new(ScriptedModel::queue("scripted:t", vec![])))
        .tools(set.clone())
        .build();
    (set, ctx)
}

async fn call(set: &ToolSet, ctx: &Ctx, tool: &str, args: Value) -> subcontract::ToolOutput {
    let entry = set
        .get(tool)
        .unwrap_or_else(|| panic!("{tool} is offered: {set:?}"));
    entry.tool().call(args, ctx).await
}

/// server-everything's tools, over either transport: a call, a refusal by its `inputSchema`
/// that never reaches the server, an `outputSchema`-checked result and an image described,
/// not inlined.
async fn everything_works(set: &ToolSet, ctx: &Ctx) {
    let out = call(
        set,
        ctx,
        "mcp__everything__get-sum",
        json!({"a": 2, "b": 40}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("42"), "{}", out.content);

    // Refused by us against the published schema: the server's own errors say "MCP server".
    let out = call(
        set,
        ctx,
        "mcp__everything__get-sum",
        json!({"a": "two", "b": 40}),
    )
    .await;
    assert!(out.is_error, "{}", out.content);
    assert!(
        out.content
            .starts_with("invalid arguments for `mcp__everything__get-sum`")
            && out.content.contains("/a")
            && !out.content.contains("MCP server"),
        "{}",
        out.content
    );

    let out = call(
        set,
        ctx,
        "mcp__everything__get-structured-content",
        json!({"location": "Chicago"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    let s = out.structured.expect("structured content");
    assert!(s["temperature"].is_number(), "{s}");

    let out = call(set, ctx, "mcp__everything__get-tiny-image", json!({})).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.contains("[image content, image/png, about"),
        "{}",
        out.content
    );
    assert!(!out.content.contains("iVBOR"), "no base64 inlined");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_stdio() {
    let (set, ctx) = connect(json!({"mcpServers": {"everything": {
        "command": "node", "args": [npm_server("server-everything"), "stdio"],
    }}}))
    .await;
    everything_works(&set, &ctx).await;
}

/// A child process, killed when the test ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_streamable_http() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let _server = Killed(
        std::process::Command::new("node")
            .arg(npm_server("server-everything"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("node runs"),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "server-everything did not listen on {port}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (set, ctx) = connect(json!({"mcpServers": {"everything": {
        "type": "http", "url": format!("http://127.0.0.1:{port}/mcp"),
    }}}))
    .await;
    everything_works(&set, &ctx).await;
}

/// server-memory: entities written by one call are read back by the next, and the graph's
/// `structuredContent` is checked against the tool's published `outputSchema`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_memory_keeps_what_it_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.jsonl");
    let (set, ctx) = connect(json!({"mcpServers": {"memory": {
        "command": "node", "args": [npm_server("server-memory")],
        "env": {"MEMORY_FILE_PATH": file},
    }}}))
    .await;
    let create = set.get("mcp__memory__create_entities").unwrap();
    assert!(create.tool().output_schema().is_some());
    let out = call(
        &set,
        &ctx,
        "mcp__memory__create_entities",
        json!({"entities": [{"name": "subcontract", "entityType": "project",
                             "observations": ["validates outputs"]}]}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    let out = call(&set, &ctx, "mcp__memory__read_graph", json!({})).await;
    assert!(!out.is_error, "{}", out.content);
    let graph = out.structured.expect("structured content");
    assert_eq!(graph["entities"][0]["name"], "subcontract", "{graph}");
    assert_eq!(
        graph["entities"][0]["observations"],
        json!(["validates outputs"])
    );
    // An entity without its required fields is refused before the server sees it.
    let out = call(
        &set,
        &ctx,
        "mcp__memory__create_entities",
        json!({"entities": [{"name": "x"}]}),
    )
    .await;
    assert!(
        out.is_error && out.content.starts_with("invalid arguments"),
        "{}",
        out.content
    );
    assert!(std::fs::read_to_string(&file)
        .unwrap_or_default()
        .lines()
        .all(|l| !l.contains("\"x\"")));
}

fn time_python() -> PathBuf {
    python_with(&PythonPackage {
        test: "MCP time server test",
        requirement: "mcp-server-time==2026.10.19",
        import: "mcp_server_time",
        env_var: "SUBCONTRACT_MCP_TIME_PYTHON",
        venv: "mcp-time-venv",
    })
}

fn git_python() -> PathBuf {
    python_with(&PythonPackage {
        test: "MCP git server test",
        requirement: "mcp-server-git==2026.10.19",
        import: "mcp_server_git",
        env_var: "SUBCONTRACT_MCP_GIT_PYTHON",
        venv: "mcp-git-venv",
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_time_converts_times() {
    let python = tokio::task::spawn_blocking(time_python).await.unwrap();
    let (set, ctx) = connect(json!({"mcpServers": {"time": {
        "command": python, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
    }}}))
    .await;
    let out = call(
        &set,
        &ctx,
        "mcp__time__convert_time",
        json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("21:00"), "{}", out.content);
    let out = call(
        &set,
        &ctx,
        "mcp__time__get_current_time",
        json!({"timezone": 9}),
    )
    .await;
    assert!(
        out.is_error && out.content.starts_with("invalid arguments"),
        "{}",
        out.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_git_reads_a_repository() {
    let python = tokio::task::spawn_blocking(git_python).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().canonicalize().unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .current_dir(&repo)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("notes.txt"), "first\n").unwrap();
    git(&["add", "notes.txt"]);
    git(&["commit", "-q", "-m", "a commit the server reads"]);
    let (set, ctx) = connect(json!({"mcpServers": {"git": {
        "command": python, "args": ["-m", "mcp_server_git", "--repository", &repo],
    }}}))
    .await;
    let out = call(&set, &ctx, "mcp__git__git_log", json!({"repo_path": &repo})).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.contains("a commit the server reads"),
        "{}",
        out.content
    );
    let out = call(&set, &ctx, "mcp__git__git_status", json!({"repo_path": 1})).await;
    assert!(
        out.is_error && out.content.starts_with("invalid arguments"),
        "{}",
        out.content
    );
}
