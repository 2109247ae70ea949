//! Every command that runs sub-agents starts the MCP servers their specs name: `batch` over a
//! JSON Lines file and `subcontract mcp` serving a spec to the official MCP Python SDK, each
//! against the real filesystem server (npm, pinned) with a scripted model over HTTP.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::mcp_tools::{completion, filesystem_server, tool_call, READER_SPEC};
use crate::providers::{Reply, Server};

const BIN: &str = env!("CARGO_BIN_EXE_subcontract");

/// A directory with `reader.toml`, a `.mcp.json` beside it serving `data/`, and
/// `data/notes.txt`.
pub(crate) fn project() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let data = root.join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("notes.txt"), "the answer is 42\nand more\n").unwrap();
    std::fs::write(root.join("reader.toml"), READER_SPEC).unwrap();
    let config = json!({"mcpServers": {"fs": {
        "command": "node",
        "args": [filesystem_server(), &data],
    }}});
    std::fs::write(root.join(".mcp.json"), config.to_string()).unwrap();
    (dir, root)
}

/// The model's two answers for one input: read `file` through the server, then submit.
pub(crate) fn read_then_submit(file: &Path) -> Vec<Reply> {
    vec![
        Reply::json(
            200,
            completion(tool_call(
                "call_1",
                "mcp__fs__read_text_file",
                json!({"path": file}),
            )),
        ),
        Reply::json(
            200,
            completion(tool_call(
                "call_2",
                "submit_output",
                json!({"line": "the answer is 42"}),
            )),
        ),
    ]
}

/// The tool names offered in a request, and the tool result it carries back (if any).
pub(crate) fn offered_and_result(body: &Value) -> (Vec<String>, Option<String>) {
    let tools = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect();
    let result = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string());
    (tools, result)
}

/// `subcontract batch`: the spec's sub-agent reads through the filesystem server found in the
/// `.mcp.json` beside the spec, and the result line holds its validated output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_runs_a_spec_that_uses_an_mcp_tool() {
    let (_dir, root) = project();
    let file = root.join("data/notes.txt");
    std::fs::write(
        root.join("in.jsonl"),
        format!("{}\n", json!({"id": "a", "input": {"path": file}})),
    )
    .unwrap();
    let server = Server::start(read_then_submit(&file)).await;
    let base = format!("{}/v1", server.base);
    let dir = root.clone();
    let o = tokio::task::spawn_blocking(move || {
        std::process::Command::new(BIN)
            .current_dir(&dir)
            .args([
                "batch",
                "reader.toml",
                "--inputs",
                "in.jsonl",
                "--out",
                "out.jsonl",
            ])
            .args([
                "--concurrency",
                "1",
                "--model",
                "openai:local",
                "--base-url",
            ])
            .arg(&base)
            .env("OPENAI_API_KEY", "sk-mcp-test-key")
            .env_remove("SUBCONTRACT_MODEL")
            .output()
            .expect("the binary runs")
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let out = std::fs::read_to_string(root.join("out.jsonl")).unwrap();
    let line: Value = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l.get("id").is_some())
        .unwrap_or_else(|| panic!("a result line in {out}"));
    assert_eq!(line["id"], "a", "{line}");
    assert_eq!(line["outcome"], "completed", "{line}");
    assert_eq!(
        line["output"],
        json!({"line": "the answer is 42"}),
        "{line}"
    );
    let got = server.received();
    assert_eq!(got.len(), 2, "{err}");
    let (tools, _) = offered_and_result(&got[0].body);
    assert_eq!(tools, ["mcp__fs__read_text_file", "submit_output"]);
    let (_, result) = offered_and_result(&got[1].body);
    assert!(
        result.as_deref().unwrap_or("").contains("the answer is 42"),
        "{result:?}"
    );
}

/// `subcontract mcp` serves a spec whose sub-agent uses an MCP tool, to the official MCP
/// Python SDK: the call's structured result is the output the sub-agent made from what the
/// filesystem server read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_serves_a_spec_whose_sub_agent_uses_mcp_tools() {
    let python = crate::mcp::python();
    let (_dir, root) = project();
    let file = root.join("data/notes.txt");
    let server = Server::start(read_then_submit(&file)).await;
    let base = format!("{}/v1", server.base);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_tools_client.py");
    let dir = root.clone();
    let o = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .arg(BIN)
            .arg(&dir)
            .arg(json!({"OPENAI_API_KEY": "sk-mcp-test-key"}).to_string())
            .arg("reader")
            .arg(json!({"path": file}).to_string())
            .args(["--model", "openai:local", "--workspace"])
            .arg(&dir)
            .arg("--base-url")
            .arg(&base)
            .output()
            .expect("python runs")
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "client failed:\n{err}");
    let s: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("client summary is JSON ({e}):\n{err}"));
    assert_eq!(s["tools"], json!(["reader"]), "{s}");
    assert_eq!(s["isError"], false, "{s}");
    assert_eq!(
        s["structuredContent"],
        json!({"line": "the answer is 42"}),
        "{s}"
    );
    let got = server.received();
    assert_eq!(got.len(), 2, "{err}");
    let (tools, _) = offered_and_result(&got[0].body);
    assert_eq!(tools, ["mcp__fs__read_text_file", "submit_output"]);
    let (_, result) = offered_and_result(&got[1].body);
    assert!(
        result.as_deref().unwrap_or("").contains("the answer is 42"),
        "{result:?}"
    );
}

/// `subcontract check` with the `.mcp.json` beside the specs (or `--mcp-config`) lists the
/// filesystem server's tools: a tool it does not offer is `unknown-tool` with did-you-mean,
/// one it offers passes, and only without a config is a name `mcp-unchecked`.
#[test]
fn check_lists_the_servers_tools() {
    let (_dir, root) = project();
    let check = |args: &[&str]| {
        let o = std::process::Command::new(BIN)
            .current_dir(&root)
            .arg("check")
            .args(args)
            .output()
            .expect("the binary runs");
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    let (code, out) = check(&["reader.toml"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("mcp-unchecked"), "{out}");

    let typo = READER_SPEC.replace(
        "tools = [\"mcp__fs__read_text_file\"]",
        "tools = [\"mcp__fs__read_txt_file\"]",
    );
    std::fs::write(root.join("reader.toml"), typo).unwrap();
    let (code, out) = check(&["reader.toml"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("unknown-tool") && out.contains("did you mean `mcp__fs__read_text_file`?"),
        "{out}"
    );

    // The same config named by the flag, from elsewhere; without any, `mcp-unchecked`.
    std::fs::rename(root.join(".mcp.json"), root.join("servers.json")).unwrap();
    let (code, out) = check(&["reader.toml", "--mcp-config", "servers.json"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("did you mean `mcp__fs__read_text_file`?"),
        "{out}"
    );
    let (code, out) = check(&["reader.toml"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("mcp-unchecked"), "{out}");
}

/// The fetch server's pinned release, as `examples/mcp/.mcp.json` names it.
const FETCH_PACKAGE: &str = "mcp-server-fetch==2026.10.24";

/// A Python with the fetch server.
fn fetch_python() -> PathBuf {
    crate::common::python_with(&crate::common::PythonPackage {
        test: "MCP fetch server test",
        requirement: FETCH_PACKAGE,
        import: "mcp_server_fetch",
        env_var: "SUBCONTRACT_MCP_FETCH_PYTHON",
        venv: "mcp-fetch-venv",
    })
}

/// `examples/mcp/`: its `.mcp.json` loads and pins the servers the tests install, and its
/// spec names only tools those real servers offer (`check --deny-warnings` with their
/// listing passes).
#[test]
fn the_shipped_mcp_example_names_tools_the_real_servers_offer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shipped = root.join("examples/mcp/.mcp.json");
    let config = subcontract::tool::mcp::load_mcp_config(&shipped).expect("the example loads");
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["fetch", "fs"]);
    let text = std::fs::read_to_string(&shipped).unwrap();
    assert!(text.contains(crate::mcp_tools::FS_PACKAGE), "{text}");
    assert!(text.contains(FETCH_PACKAGE), "{text}");

    // The same servers, as installed here (npx and uvx would fetch them again).
    let fetch_python = fetch_python();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("servers.json");
    let config = json!({"mcpServers": {
        "fs": {"command": "node", "args": [filesystem_server(), root]},
        "fetch": {"command": fetch_python, "args": ["-m", "mcp_server_fetch"]},
    }});
    std::fs::write(&local, config.to_string()).unwrap();
    let o = std::process::Command::new(BIN)
        .current_dir(root)
        .args(["check", "examples/mcp/research_web.toml", "--deny-warnings"])
        .arg("--mcp-config")
        .arg(&local)
        .output()
        .expect("the binary runs");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("0 errors, 0 warnings in 1 spec"), "{out}");
}

/// A web server answering every GET with one HTML page, recording the paths asked for.
async fn page_server(
    html: &'static str,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let paths = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = paths.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf);
                let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
                seen.lock().unwrap().push(path);
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{html}",
                    html.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (base, paths)
}

/// The shipped `examples/mcp/research_web.toml`, run: its sub-agent reads a file through the
/// real filesystem server and a web page through the real fetch server (allowed to reach a
/// loopback page here), then submits findings citing both; it is offered exactly the tools
/// its spec names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_mcp_example_reads_a_file_and_fetches_a_page() {
    let fetch_python = tokio::task::spawn_blocking(fetch_python).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mcp/research_web.toml");
    std::fs::copy(spec, root.join("research_web.toml")).unwrap();
    std::fs::write(root.join("notes.txt"), "The notes point at the page.\n").unwrap();
    let config = json!({"mcpServers": {
        "fs": {"command": "node", "args": [filesystem_server(), &root]},
        "fetch": {"command": fetch_python, "args": ["-m", "mcp_server_fetch", "--allow-private-ips"]},
    }});
    std::fs::write(root.join(".mcp.json"), config.to_string()).unwrap();
    let (web, paths) =
        page_server("<html><body><h1>Answer</h1><p>The page says 42.</p></body></html>").await;
    let page = format!("{web}/answer.html");
    let file = root.join("notes.txt");
    let findings = json!({"findings": [{"claim": "The page says 42.",
        "source_ids": [file, page]}], "gaps": []});
    let model = Server::start(vec![
        Reply::json(
            200,
            completion(tool_call(
                "c1",
                "mcp__fs__read_text_file",
                json!({"path": file}),
            )),
        ),
        Reply::json(
            200,
            completion(tool_call("c2", "mcp__fetch__fetch", json!({"url": page}))),
        ),
        Reply::json(
            200,
            completion(tool_call("c3", "submit_output", findings.clone())),
        ),
    ])
    .await;
    let base = format!("{}/v1", model.base);
    let cwd = root.clone();
    let o = tokio::task::spawn_blocking(move || {
        std::process::Command::new(BIN)
            .current_dir(&cwd)
            .args([
                "run",
                "research_web.toml",
                "--model",
                "openai:local",
                "--base-url",
            ])
            .arg(&base)
            .args([
                "--input",
                r#"{"question": "What number does the page give?"}"#,
            ])
            .env("OPENAI_API_KEY", "sk-mcp-test-key")
            .env_remove("SUBCONTRACT_MODEL")
            .output()
            .expect("the binary runs")
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let out: Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON");
    assert_eq!(out, findings);
    let got = model.received();
    assert_eq!(got.len(), 3, "{err}");
    let (tools, _) = offered_and_result(&got[0].body);
    assert_eq!(
        tools,
        [
            "grep",
            "mcp__fs__read_text_file",
            "mcp__fetch__fetch",
            "submit_output"
        ]
    );
    let results: Vec<String> = got[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect();
    assert!(
        results[0].contains("The notes point at the page."),
        "{results:?}"
    );
    assert!(results[1].contains("The page says 42."), "{results:?}");
    assert!(
        paths.lock().unwrap().iter().any(|p| p == "/answer.html"),
        "{:?}",
        paths.lock().unwrap()
    );
}

/// `subcontract mcp` is a long-lived process: a server that changes its tools between two
/// calls (the hostile script's `toggle` sends `tools/list_changed`) is listed again for the
/// second, whose sub-agent is offered the new list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_offers_the_tools_a_server_lists_after_it_changed_them() {
    let python = crate::mcp::python();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    crate::mcp_hostile::write_done_spec(
        &root,
        "lister",
        "Use the tools, then submit.",
        r#""mcp__h""#,
        "",
    );
    let hostile =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/hostile_server.py");
    let config = json!({"mcpServers": {"h": {"command": "python3", "args": [hostile]}}});
    std::fs::write(root.join(".mcp.json"), config.to_string()).unwrap();
    let submit = || {
        Reply::json(
            200,
            completion(tool_call("c2", "submit_output", json!({"done": true}))),
        )
    };
    let server = Server::start(vec![
        // The first call's sub-agent has the server change its list, then submits.
        Reply::json(
            200,
            completion(tool_call("c1", "mcp__h__toggle", json!({}))),
        ),
        submit(),
        // The second call's sub-agent only submits: what it was offered is the test.
        submit(),
    ])
    .await;
    let base = format!("{}/v1", server.base);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_tools_client.py");
    let cwd = root.clone();
    let o = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .arg(BIN)
            .arg(&cwd)
            .arg(json!({"OPENAI_API_KEY": "sk-mcp-test-key"}).to_string())
            .arg("lister")
            .arg(json!([{}, {}]).to_string())
            .args(["--model", "openai:local", "--workspace"])
            .arg(&cwd)
            .arg("--base-url")
            .arg(&base)
            .output()
            .expect("python runs")
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "client failed:\n{err}");
    let s: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("client summary is JSON ({e}):\n{err}"));
    for call in s["calls"].as_array().unwrap() {
        assert_eq!(call["isError"], false, "{s}");
    }
    let got = server.received();
    assert_eq!(got.len(), 3, "{err}");
    let (first, _) = offered_and_result(&got[0].body);
    let (_, toggled) = offered_and_result(&got[1].body);
    let (second, _) = offered_and_result(&got[2].body);
    assert!(
        toggled.as_deref().unwrap_or("").contains("extra"),
        "{toggled:?}"
    );
    assert!(first.contains(&"mcp__h__echo".to_string()), "{first:?}");
    assert!(!first.contains(&"mcp__h__extra".to_string()), "{first:?}");
    assert!(second.contains(&"mcp__h__extra".to_string()), "{second:?}");
    assert!(!second.contains(&"mcp__h__echo".to_string()), "{second:?}");
}
