//! A typed sub-agent with the workspace tools and a tool of its own, on a scripted model
//! (offline), with `subcontract`, `tokio` and `serde_json` only: `cargo run --example first_hour`
use std::sync::Arc;

use serde_json::json;
use subcontract::model::{ScriptStep, ScriptedModel};
use subcontract::{prelude::*, tool::workspace::GREP};

const DIR: &str = env!("CARGO_MANIFEST_DIR");

/// The sub-agent's input and output: a short text (a question, then its answer).
#[contract]
#[derive(Debug, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
struct Text {
    #[validate(length(min = 1, max = 200))]
    text: String,
}

/// The version of a package that Cargo.lock pins.
#[tool]
async fn locked_version(
    /// The package's name, e.g. `tokio`.
    #[validate(length(min = 1, max = 64))]
    package: String,
) -> Result<String, String> {
    let lock = std::fs::read_to_string(format!("{DIR}/Cargo.lock"));
    let lock = lock.map_err(|e| e.to_string())?;
    let (_, rest) = lock.split_once(&format!("name = \"{package}\"\nversion = \"")).ok_or("no")?;
    Ok(rest.split('"').next().unwrap_or_default().to_string())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    print!("{}", report().await?);
    Ok(())
}

pub(crate) async fn report() -> Result<String, Box<dyn std::error::Error>> {
    let spec = SubAgentSpec::<Text, Text>::builder("dependency_version")
        .description("Finds the version of a dependency the project builds with.")
        .system("Find the dependency in Cargo.toml, look its version up, then submit it.")
        .tool(GREP) // the built-in tools by constant, your own by value: no misspelt names
        .tool(&LockedVersionTool)
        .build()?;
    let steps = vec![
        ScriptStep::tool_call("grep", json!({"pattern": "^tokio", "path_glob": "Cargo.toml"})),
        ScriptStep::tool_call("locked_version", json!({"package": "tokio"})),
        ScriptStep::submit(json!({"text": "tokio, at the version Cargo.lock pins"})),
    ];
    // Scripted, offline; a real model is `Host::builder().model_name("openai:gpt-4.1-mini")`.
    let model = Arc::new(ScriptedModel::queue("scripted:demo", steps));
    let host = Host::builder().model(model).workspace(DIR).tool(LockedVersionTool).spec(&spec);
    let root = host.build()?.build(); // a spec naming a tool the host lacks fails here
    let question = Text { text: "Which tokio does this project build with?".into() };
    let run = spec.run_child(&question, &root).await;
    let pinned = locked_version("tokio".into()).await?; // still a plain function
    let line = format!("{} {} in {} turns", run.run_id, run.outcome, run.turns);
    Ok(format!("{line}: {:?}\ntokio {pinned}\n", run.output.ok_or("no output")?))
}
