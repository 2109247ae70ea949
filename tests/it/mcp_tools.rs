//! Tools from MCP servers against a reference server we did not write: the filesystem server
//! (npm `@modelcontextprotocol/server-filesystem`, pinned), installed into
//! `target/tmp/mcp-servers` on first use and run with `node`. The test fails, with the command
//! that installs it, when it cannot be installed; it never skips.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use subcontract::model::ScriptedModel;
use subcontract::tool::mcp::{parse_mcp_config, McpServers};
use subcontract::{Ctx, ToolSet};

/// The filesystem server's pinned release.
pub(crate) const FS_PACKAGE: &str = "@modelcontextprotocol/server-filesystem@2025.8.21";

/// The reference servers from npm, pinned: installed together, once, by one `npm install`.
const NPM_PACKAGES: [&str; 3] = [
    FS_PACKAGE,
    "@modelcontextprotocol/server-memory@2026.8.31",
    "@modelcontextprotocol/server-everything@2026.8.31",
];

fn servers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp/mcp-servers")
}

/// The entry point of the installed npm server `name` (e.g. `server-filesystem`), installing
/// every pinned server on first use; fails with the command when npm cannot install them.
pub(crate) fn npm_server(name: &str) -> PathBuf {
    static INSTALL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = servers_dir();
    let entry = |pkg: &str| {
        let name = pkg.rsplit_once('@').map_or(pkg, |(n, _)| n);
        dir.join("node_modules").join(name).join("dist/index.js")
    };
    // A version installed earlier that is not the pinned one is installed again.
    let pinned = |pkg: &str| {
        let (name, version) = pkg.rsplit_once('@').expect("pinned");
        std::fs::read_to_string(dir.join("node_modules").join(name).join("package.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|p| p["version"] == version)
    };
    if !NPM_PACKAGES.iter().all(|p| entry(p).exists() && pinned(p)) {
        std::fs::create_dir_all(&dir).expect("target/tmp is writable");
        let status = std::process::Command::new("npm")
            .args(["install", "--prefix"])
            .arg(&dir)
            .args(NPM_PACKAGES)
            .status();
        assert!(
            status.is_ok_and(|s| s.success()) && NPM_PACKAGES.iter().all(|p| entry(p).exists()),
            "cannot install the MCP reference servers; run: npm install --prefix {} {}",
            dir.display(),
            NPM_PACKAGES.join(" ")
        );
    }
    let pkg = NPM_PACKAGES
        .iter()
        .find(|p| p.contains(&format!("/{name}@")))
        .expect("a pinned server");
    entry(pkg)
}

/// The filesystem server's entry point.
pub(crate) fn filesystem_server() -> PathBuf {
    npm_server("server-filesystem")
}

/// An OpenAI chat completion carrying `message`.
pub(crate) fn completion(message: serde_json::Value) -> serde_json::Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000,
        "model": "local", "choices": [{"index": 0, "message": message,
        "finish_reason": "tool_calls", "logprobs": null}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    })
}

/// An assistant message calling `tool` with `args`.
pub(crate) fn tool_call(id: &str, tool: &str, args: serde_json::Value) -> serde_json::Value {
    json!({"role": "assistant", "content": null, "tool_calls": [{
        "id": id, "type": "function",
        "function": {"name": tool, "arguments": args.to_string()}}]})
}

/// The file-reading spec the command-line tests run: one MCP tool, a bounded output.
pub(crate) const READER_SPEC: &str = r#"name = "reader"
description = "Reads one file through the filesystem server and reports its first line."
system = "Read the file with mcp__fs__read_text_file, then submit its first line."
tools = ["mcp__fs__read_text_file"]

[limits]
max_turns = 3
max_tokens_per_turn = 256

[input]
type = "object"
required = ["path"]
additionalProperties = false
properties.path = { type = "string", maxLength = 500 }

[output]
type = "object"
required = ["line"]
additionalProperties = false
properties.line = { type = "string", maxLength = 100 }
"#;

fn servers(root: &Path) -> Arc<McpServers> {
    let config = json!({"mcpServers": {"fs": {
        "command": "node",
        "args": [filesystem_server(), root],
    }}})
    .to_string();
    let config = parse_mcp_config("test.json", &config, Path::new("."), &|_| None)
        .expect("the config parses");
    McpServers::new(config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_server_tools_are_narrowed_validated_and_called() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "the answer is 42\n").unwrap();
    let servers = servers(&root);
    let mut all = ToolSet::new();
    for t in servers
        .tools_for(["mcp__fs__read_text_file"])
        .await
        .unwrap()
    {
        all.insert(t).unwrap();
    }
    assert!(all.contains("mcp__fs__read_text_file"), "{all:?}");
    assert!(all.contains("mcp__fs__write_file"), "{all:?}");

    // A spec naming one tool gets that tool only; naming the server gets them all.
    let one = all.subset(["mcp__fs__read_text_file"]).unwrap();
    assert_eq!(one.names().collect::<Vec<_>>(), ["mcp__fs__read_text_file"]);
    let every = all.subset(["mcp__fs"]).unwrap();
    assert_eq!(every.len(), all.len());
    assert!(all.subset(["mcp__other"]).is_err());

    let model = Arc::new(ScriptedModel::queue("scripted:t", vec![]));
    let ctx = Ctx::builder(model).tools(one.clone()).build();
    let read = one.get("mcp__fs__read_text_file").unwrap();
    let path = root.join("notes.txt").display().to_string();
    let out = read.tool().call(json!({"path": path}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("the answer is 42"), "{}", out.content);

    // The schema names draft-07 and is compiled as draft-07 (our own contracts refuse it).
    // This pinned server publishes an empty `inputSchema` (zod 4 through zod-to-json-schema
    // 3 in its tree), so it admits any arguments and cannot show a refusal here.
    let schema = &read.definition().input_schema;
    assert_eq!(
        schema["$schema"], "http://json-schema.org/draft-07/schema#",
        "{schema}"
    );
    assert!(subcontract::Contract::compile(schema.clone()).is_err());

    // The server's own refusal (a path outside its root) is an error result naming it.
    let out = read.tool().call(json!({"path": "/etc/passwd"}), &ctx).await;
    assert!(out.is_error, "{}", out.content);
    assert!(out.content.contains("MCP server `fs`"), "{}", out.content);
}

/// `subcontract run --mcp-config`: a TOML spec's sub-agent reads a file through the real
/// filesystem server and submits a validated output; the model is offered only the MCP tool
/// the spec names (never `write_file`), and the tool's result is what the server returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_gives_a_toml_spec_the_mcp_tool_it_names_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let data = root.join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("notes.txt"), "the answer is 42\n").unwrap();
    std::fs::write(root.join("reader.toml"), READER_SPEC).unwrap();
    let config = json!({"mcpServers": {"fs": {
        "command": "node",
        "args": [filesystem_server(), &data],
    }}});
    std::fs::write(root.join("servers.json"), config.to_string()).unwrap();
    // Named by the flag, then found beside the spec without it.
    for flag in [true, false] {
        if !flag {
            std::fs::rename(root.join("servers.json"), root.join(".mcp.json")).unwrap();
        }
        run_reader(&root, &data, flag).await;
    }
}

/// One `subcontract run` of `reader.toml` in `root`, with `--mcp-config` or without it.
async fn run_reader(root: &Path, data: &Path, flag: bool) {
    use crate::providers::{Reply, Server};
    let file = data.join("notes.txt");
    let call = tool_call("call_1", "mcp__fs__read_text_file", json!({"path": file}));
    let submit = tool_call(
        "call_2",
        "submit_output",
        json!({"line": "the answer is 42"}),
    );
    let server = Server::start(vec![
        Reply::json(200, completion(call)),
        Reply::json(200, completion(submit)),
    ])
    .await;
    let base = format!("{}/v1", server.base);
    let input = json!({"path": file}).to_string();
    let root = root.to_path_buf();
    let o = tokio::task::spawn_blocking(move || {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_subcontract"));
        c.current_dir(&root)
            .args([
                "run",
                "reader.toml",
                "--model",
                "openai:local",
                "--base-url",
            ])
            .arg(&base);
        if flag {
            c.args(["--mcp-config", "servers.json"]);
        }
        c.arg("--input")
            .arg(&input)
            .env("OPENAI_API_KEY", "sk-mcp-test-key")
            .env_remove("SUBCONTRACT_MODEL")
            .output()
            .expect("the binary runs")
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON");
    assert_eq!(out, json!({"line": "the answer is 42"}));
    let got = server.received();
    assert_eq!(got.len(), 2, "flag {flag}: {err}");
    let tools: Vec<&str> = got[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["mcp__fs__read_text_file", "submit_output"]);
    let result = got[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the tool result goes back to the model")["content"]
        .to_string();
    assert!(result.contains("the answer is 42"), "{result}");
}

/// The approval gate is asked about every MCP call, with its name and arguments, before the
/// server sees it: a sub-agent holding the whole filesystem server (`mcp__fs`) is denied
/// `write_file` by the gate, and the file is never written; its read goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_sees_every_mcp_call_before_the_server_does() {
    use std::sync::Mutex;
    use subcontract::model::{Message, ScriptStep};
    use subcontract::{ApprovalRequest, Decision, FnGate, Gate, Outcome};

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "the answer is 42\n").unwrap();
    let servers = servers(&root);
    let mut all = ToolSet::new();
    for t in servers.tools_for(["mcp__fs"]).await.unwrap() {
        all.insert(t).unwrap();
    }
    let (read, written) = (root.join("notes.txt"), root.join("written.txt"));
    let spec = crate::common::research_spec("files", &["mcp__fs"]);
    let results: Arc<Mutex<Vec<(String, bool)>>> = Arc::default();
    let seen = results.clone();
    let calls = vec![
        (
            "mcp__fs__write_file".to_string(),
            json!({"path": written, "content": "x"}),
        ),
        ("mcp__fs__read_text_file".to_string(), json!({"path": read})),
    ];
    let model = crate::common::model(move |_, turn, req| match turn {
        1 => ScriptStep::tool_calls(calls.clone()),
        _ => {
            if let Some(Message::ToolResults { results, .. }) = req.messages.last() {
                seen.lock()
                    .unwrap()
                    .extend(results.iter().map(|r| (r.content.clone(), r.is_error)));
            }
            ScriptStep::submit(crate::common::good_findings())
        }
    });
    let asked: Arc<Mutex<Vec<(String, serde_json::Value)>>> = Arc::default();
    let log = asked.clone();
    let gate = Gate::new(FnGate(move |r: ApprovalRequest<'_>| {
        log.lock()
            .unwrap()
            .push((r.tool.to_string(), r.arguments.clone()));
        if r.tool == "mcp__fs__write_file" {
            Decision::Deny("no writes".into())
        } else {
            Decision::Allow
        }
    }));
    let ctx = Ctx::builder(model).tools(all).gate(gate).build();
    let r = spec
        .run(&json!({"question": "What do the notes say?"}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    let asked = asked.lock().unwrap().clone();
    let names: Vec<&str> = asked.iter().map(|(t, _)| t.as_str()).collect();
    assert!(
        names.contains(&"mcp__fs__write_file") && names.contains(&"mcp__fs__read_text_file"),
        "{asked:?}"
    );
    let write = asked
        .iter()
        .find(|(t, _)| t == "mcp__fs__write_file")
        .unwrap();
    assert_eq!(write.1["content"], "x", "the gate sees the arguments");
    assert!(!written.exists(), "a denied call never reaches the server");
    let results = results.lock().unwrap().clone();
    assert!(
        results.iter().any(|(c, e)| *e && c.contains("no writes")),
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .any(|(c, e)| !*e && c.contains("the answer is 42")),
        "{results:?}"
    );
}
