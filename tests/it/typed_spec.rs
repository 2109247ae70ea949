//! A typed Rust spec — typed input and output, with a `validator` rule no JSON Schema states —
//! served by `subcontract::mcp` to rmcp's MCP client, and batched by `subcontract::batch`. Both
//! take the spec erased ([`SubAgentSpec::erase`]); both hand on only an output that passed its
//! typed rules, and the rejected one goes back to the sub-agent to repair. (A typed spec as a
//! rig tool: `tests/it/rig.rs`.)

use std::sync::Arc;

use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use subcontract::host::Host;
use subcontract::model::ScriptStep;
use subcontract::{Budget, SubAgentSpec};
use validator::Validate;

use crate::common::*;

#[derive(Serialize, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
struct Claim {
    #[validate(length(max = 200))]
    text: String,
}

#[derive(Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Supported,
    Unsupported,
}

#[derive(Debug, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
struct Verdict {
    verdict: Kind,
    /// JSON Schema only annotates `format: email`: the typed rule is what refuses a bad one.
    #[validate(email, length(max = 100))]
    reviewer: String,
}

const SYSTEM: &str = "Judge the claim.";

fn spec() -> SubAgentSpec<Claim, Verdict> {
    SubAgentSpec::<Claim, Verdict>::builder("judge_claim")
        .description("Judges whether a claim is supported.")
        .system(SYSTEM)
        .max_turns(3)
        .build()
        .expect("the test spec is valid")
}

const BAD: &str = "not-an-address";

/// Each run's first answer breaks the typed rule (the schema accepts it); the second is good.
fn host() -> subcontract::host::HostBuilder {
    let m = model(|system, turn, _| {
        assert_eq!(system, SYSTEM);
        let reviewer = if turn == 1 { BAD } else { "judge@example.org" };
        ScriptStep::submit(json!({"verdict": "supported", "reviewer": reviewer}))
    });
    Host::builder().model(m).spec(spec().erase())
}

#[cfg(feature = "mcp")]
#[tokio::test]
async fn an_mcp_client_gets_a_typed_specs_validated_output() {
    use rmcp::model::CallToolRequestParams;
    use rmcp::ServiceExt as _;
    use subcontract::mcp::{McpConfig, StdioTransport, SubcontractServer};

    let server = SubcontractServer::new(McpConfig::new(host())).expect("a server");
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(ours);
    let serving = tokio::spawn(async move {
        let running = server
            .serve(StdioTransport::new(read, write))
            .await
            .expect("serves");
        let _ = running.waiting().await;
    });
    let client = ().serve(tokio::io::split(theirs)).await.expect("initialised");
    let tools = client.list_all_tools().await.expect("tools/list");
    let tool = tools
        .iter()
        .find(|t| t.name == "judge_claim")
        .expect("the typed spec is a tool");
    // The tool's schemas are the typed spec's: the enum is there.
    let out_schema =
        serde_json::to_string(tool.output_schema.as_ref().expect("outputSchema")).expect("JSON");
    assert!(out_schema.contains("unsupported"), "{out_schema}");

    let mut params = CallToolRequestParams::new("judge_claim");
    params.arguments = json!({"text": "The budget is charged upward."})
        .as_object()
        .cloned();
    let r = client.call_tool(params).await.expect("tools/call");
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert!(
        !format!("{r:?}").contains(BAD),
        "the rejected output leaked"
    );
    let out = r.structured_content.expect("structuredContent");
    let v: Verdict = serde_json::from_value(out).expect("a Verdict");
    assert_eq!(
        v,
        Verdict {
            verdict: Kind::Supported,
            reviewer: "judge@example.org".into()
        }
    );

    // Arguments the typed input refuses are an error result, and the server keeps serving.
    let mut params = CallToolRequestParams::new("judge_claim");
    params.arguments = json!({"text": "x".repeat(201)}).as_object().cloned();
    let r = client.call_tool(params).await.expect("tools/call");
    assert_eq!(r.is_error, Some(true), "{r:?}");
    client.cancel().await.expect("closes");
    serving.await.expect("the server ends");
}

#[tokio::test]
async fn a_batch_of_a_typed_spec_writes_only_validated_outputs() {
    use subcontract::batch::{run_batch, BatchOptions, Ledger, Progress};

    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    let inputs = [
        json!({"id": "a", "input": {"text": "Budgets charge upward."}}),
        json!({"id": "b", "input": {"text": "Capabilities only narrow."}}),
        // The typed input's own rule refuses it: a final invalid_input line, no model call.
        json!({"id": "c", "input": {"text": "x".repeat(201)}}),
    ]
    .iter()
    .map(Value::to_string)
    .collect::<Vec<_>>()
    .join("\n");
    let ctx = host()
        .build()
        .expect("a host")
        .budget(Budget::new(Some(Decimal::ONE), None))
        .build();
    let summary = run_batch(
        Arc::new(spec().erase()),
        ctx,
        std::io::Cursor::new(inputs),
        &out,
        Ledger::read(&out).expect("no ledger yet"),
        &BatchOptions::default(),
        &Progress::default(),
    )
    .await
    .expect("the batch runs");
    assert_eq!(summary.completed, 2, "{summary:?}");
    let text = std::fs::read_to_string(&out).expect("the output file");
    assert!(!text.contains(BAD), "a rejected output reached the file");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .filter(|l: &Value| l.get("id").is_some())
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    for l in &lines {
        match l["id"].as_str() {
            Some("c") => assert_eq!(l["outcome"], "invalid_input", "{l}"),
            _ => {
                assert_eq!(l["outcome"], "completed", "{l}");
                assert_eq!(l["turns"], 2, "repaired on the second turn: {l}");
                let v: Verdict = serde_json::from_value(l["output"].clone()).expect("a Verdict");
                v.validate().expect("the typed rules hold");
            }
        }
    }
}
