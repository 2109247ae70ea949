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

const FS_PACKAGE: &str = "@modelcontextprotocol/server-filesystem@2025.8.21";

fn servers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp/mcp-servers")
}

/// The filesystem server's entry point, installed once.
fn filesystem_server() -> PathBuf {
    let dir = servers_dir();
    let entry = dir.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    if !entry.exists() {
        std::fs::create_dir_all(&dir).expect("target/tmp is writable");
        let status = std::process::Command::new("npm")
            .args(["install", "--prefix"])
            .arg(&dir)
            .arg(FS_PACKAGE)
            .status();
        assert!(
            status.is_ok_and(|s| s.success()) && entry.exists(),
            "cannot install the MCP filesystem server; run: npm install --prefix {} {FS_PACKAGE}",
            dir.display()
        );
    }
    entry
}

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
    let out = read.tool.call(json!({"path": path}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("the answer is 42"), "{}", out.content);

    // The schema names draft-07 and is compiled as draft-07 (our own contracts refuse it).
    // This pinned server publishes an empty `inputSchema` (zod 4 through zod-to-json-schema
    // 3 in its tree), so it admits any arguments and cannot show a refusal here.
    let schema = &read.definition.input_schema;
    assert_eq!(
        schema["$schema"], "http://json-schema.org/draft-07/schema#",
        "{schema}"
    );
    assert!(subcontract::Contract::compile(schema.clone()).is_err());

    // The server's own refusal (a path outside its root) is an error result naming it.
    let out = read.tool.call(json!({"path": "/etc/passwd"}), &ctx).await;
    assert!(out.is_error, "{}", out.content);
    assert!(out.content.contains("MCP server `fs`"), "{}", out.content);
}
