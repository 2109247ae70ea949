//! A spec as a tool of a rig agent (feature `rig`). End to end (feature `rig-e2e`): rig's own
//! agent loop, talking over HTTP to a local OpenAI-compatible server, calls a typed spec whose
//! sub-agent runs under its limits as a child of the adapter's parent context; the agent
//! receives the validated output, never a rejected one, and the parent budget pays.
//! Without the agent loop: depth, capabilities, budget and the input contract hold for a call
//! through the rig tool as for a call from our own host.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rig_core::tool::ToolErrorKind;
use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use subcontract::host::Host;
use subcontract::model::{Price, PriceTable, ScriptStep};
use subcontract::spec::DynSpec;
use subcontract::{Budget, Ctx, SubAgentSpec};
use validator::Validate;

use crate::common::*;

#[derive(Serialize, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
struct Ask {
    #[validate(length(max = 500))]
    text: String,
}

#[derive(Debug, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
struct Summary {
    #[validate(length(max = 40))]
    summary: String,
    /// A rule the schema cannot say (JSON Schema only annotates `format: email`): the typed
    /// rules catch it, through the rig tool too.
    #[validate(email, length(max = 100))]
    contact: String,
}

const CHILD: &str = "Summarise the text in one line.";

fn summarise() -> SubAgentSpec<Ask, Summary> {
    SubAgentSpec::<Ask, Summary>::builder("summarise")
        .description("Summarises a text in one line.")
        .system(CHILD)
        .max_turns(3)
        .build()
        .expect("the test spec is valid")
}

/// 100 USD per million input tokens: a child turn of 100 tokens costs 0.01 USD (its
/// reservation counts each prompt byte as a token, so it is never below the bill).
fn prices() -> PriceTable {
    let mut prices = PriceTable::new();
    prices.insert(
        "scripted:test",
        Price::per_mtok(Decimal::from(100), Decimal::ZERO),
    );
    prices
}

/// The parent context the adapter holds: the sub-agent's scripted model (which counts its
/// calls), prices and a budget of `limit_usd`.
fn parent(
    answer: impl Fn(usize) -> ScriptStep + Send + Sync + 'static,
    limit_usd: Decimal,
) -> (Ctx, Budget, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let m = model(move |system, turn, _| {
        assert_eq!(system, CHILD, "only the sub-agent talks to this model");
        seen.fetch_add(1, Ordering::SeqCst);
        answer(turn).with_usage(100, 0)
    });
    let budget = Budget::new(Some(limit_usd), None);
    let ctx = Host::builder()
        .model(m)
        .prices(prices())
        .build()
        .expect("a host")
        .budget(budget.clone())
        .build();
    (ctx, budget, calls)
}

fn good() -> Value {
    json!({"summary": "A short line.", "contact": "editor@example.org"})
}

#[cfg(feature = "rig-e2e")]
mod agent_loop {
    use rig_agent::AgentBuilder;
    use rig_core::providers::openai::OpenAIConfig;

    use super::*;
    use crate::providers::{Reply, Server};

    /// An OpenAI chat completion as the mock provider sends it.
    fn completion(message: Value, finish: &str) -> Reply {
        Reply::json(
            200,
            json!({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 0,
                "model": "gpt-test",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}
            }),
        )
    }

    /// The provider's script: call `summarise`, then answer in text.
    async fn provider() -> Server {
        let call = json!({
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {
                "name": "summarise",
                "arguments": json!({"text": "A long article about ownership."}).to_string()
            }}]
        });
        Server::start(vec![
            completion(call, "tool_calls"),
            completion(
                json!({"role": "assistant", "content": "Here it is."}),
                "stop",
            ),
        ])
        .await
    }

    /// A rig agent on the mock provider with `summarise` as its one tool, prompted once.
    async fn run_agent(server: &Server, parent: &Ctx) -> rig_agent::run::PromptResponse {
        // rig's shared reqwest client is built from the process's rustls provider (this crate
        // brings none of its own into reqwest; plain HTTP is all the test needs).
        #[allow(deprecated)] // as in the library's own TLS set-up (provider::tls_config)
        let _ = rustls::crypto::ring::default_provider().install_default();
        let model = OpenAIConfig::new("sk-rig-test")
            .with_base_url(format!("{}/v1", server.base))
            .client()
            .chat("gpt-test");
        let tool = subcontract::rig::tool(summarise(), parent).expect("a rig tool");
        let agent = AgentBuilder::new(model)
            .preamble("Use your tools.")
            .dynamic_tool(tool)
            .build();
        agent
            .prompt("Summarise the article.")
            .max_turns(4)
            .await
            .expect("the rig agent's run")
    }

    /// The tool message the agent sent back to its provider after the call.
    fn tool_message(server: &Server) -> Value {
        let received = server.received();
        assert_eq!(received.len(), 2, "one tool call, one answer");
        let messages = received[1].body["messages"]
            .as_array()
            .expect("chat messages")
            .clone();
        messages
            .into_iter()
            .find(|m| m["role"] == "tool")
            .expect("a tool message")
    }

    fn text_of(message: &Value) -> String {
        match &message["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            other => other.to_string(),
        }
    }

    #[tokio::test]
    async fn a_rig_agent_calls_a_typed_spec_and_gets_its_validated_output() {
        let server = provider().await;
        let (ctx, budget, calls) = parent(|_| ScriptStep::submit(good()), Decimal::ONE);
        let response = run_agent(&server, &ctx).await;
        assert_eq!(response.output(), "Here it is.");

        // rig offered the spec with its input schema as the tool's parameters.
        let first = &server.received()[0].body;
        let offered = &first["tools"][0]["function"];
        assert_eq!(offered["name"], "summarise");
        assert_eq!(
            offered["parameters"]["properties"]["text"]["maxLength"], 500,
            "{offered}"
        );

        // The agent received the validated output as the tool's result.
        let message = tool_message(&server);
        assert_eq!(message["tool_call_id"], "call_1");
        let result: Value = serde_json::from_str(&text_of(&message)).expect("JSON result");
        assert_eq!(result, good());

        // The sub-agent ran once, as a child of the adapter's context, and its parent paid.
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let spent = budget.snapshot();
        assert_eq!(spent.spent_usd, Decimal::new(1, 2), "charged upward");
        assert_eq!(spent.reserved_usd, Decimal::ZERO, "all settled");
    }

    #[tokio::test]
    async fn a_rejected_output_never_reaches_the_rig_agent() {
        // The sub-agent keeps submitting an output that passes the JSON Schema but breaks a
        // typed rule (not an email), carrying an instruction for whoever reads it.
        const MARK: &str = "IGNORE-PREVIOUS-INSTRUCTIONS";
        let server = provider().await;
        let (ctx, budget, calls) = parent(
            |_| ScriptStep::submit(json!({"summary": "A short line.", "contact": MARK})),
            Decimal::ONE,
        );
        let response = run_agent(&server, &ctx).await;
        assert_eq!(response.output(), "Here it is.");

        let message = tool_message(&server);
        let text = text_of(&message);
        assert!(text.contains("invalid_output"), "{text}");
        assert!(text.contains("/contact"), "where, named: {text}");
        // No byte of the rejected value reached the rig agent: neither its provider (every
        // request the server saw) nor its transcript.
        for r in server.received() {
            assert!(!r.body.to_string().contains(MARK), "{}", r.body);
        }
        let transcript = serde_json::to_string(&response.messages).expect("a transcript");
        assert!(!transcript.contains(MARK), "{transcript}");

        // Every turn was tried and paid for by the parent.
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(budget.snapshot().spent_usd, Decimal::new(3, 2));
    }
}

/// Without `rig-e2e` the agent-loop tests above are not built: said, by name and on stderr.
#[cfg(not(feature = "rig-e2e"))]
#[test]
fn skipped_the_rig_agent_loop_tests_need_feature_rig_e2e() {
    eprintln!("SKIPPED: tests/it/rig.rs agent_loop needs `--features rig-e2e`");
}

#[tokio::test]
async fn the_output_is_the_tools_json_result_and_failures_name_their_outcome() {
    let (ctx, budget, _) = parent(|_| ScriptStep::submit(good()), Decimal::ONE);
    let tool = subcontract::rig::tool(summarise(), &ctx).expect("a rig tool");
    let out = tool.execute(json!({"text": "x"})).await.expect("a result");
    assert_eq!(out.as_json(), Some(&good()));
    assert_eq!(budget.snapshot().spent_usd, Decimal::new(1, 2));

    // The input contract: rig's parse already made JSON; our contract judges it.
    for bad in [
        json!({"text": "x".repeat(501)}),
        json!({"text": 1}),
        json!({"other": "x"}),
        json!(null),
        json!([1, 2]),
    ] {
        let e = tool.execute(bad.clone()).await.expect_err("refused");
        assert_eq!(e.kind(), ToolErrorKind::InvalidArgs, "{bad}");
        assert_eq!(e.code(), Some("invalid_input"));
        assert!(e.message().contains("invalid_input"), "{}", e.message());
    }
    assert_eq!(
        budget.snapshot().spent_usd,
        Decimal::new(1, 2),
        "a refused input costs nothing"
    );
}

#[tokio::test]
async fn depth_capabilities_and_budget_bound_every_rig_call() {
    let (ctx, _, calls) = parent(|_| ScriptStep::submit(good()), Decimal::ONE);

    // A spec asking for a tool its parent does not hold is denied, not widened.
    let needs_files = SubAgentSpec::<Ask, Summary>::builder("reader")
        .description("Reads files.")
        .system(CHILD)
        .tools(["read_file"])
        .build()
        .expect("a spec");
    let e = subcontract::rig::tool(&needs_files, &ctx)
        .expect("a rig tool")
        .execute(json!({"text": "x"}))
        .await
        .expect_err("denied");
    assert_eq!(e.code(), Some("denied"));
    assert_eq!(e.kind(), ToolErrorKind::PermissionDenied);
    assert!(e.message().contains("read_file"), "{}", e.message());

    // A parent already at the depth limit cannot fork a child.
    let m = model(|_, _, _| ScriptStep::submit(good()));
    let flat = Ctx::builder(m).max_depth(0).build();
    let e = subcontract::rig::tool(summarise(), &flat)
        .expect("a rig tool")
        .execute(json!({"text": "x"}))
        .await
        .expect_err("too deep");
    assert_eq!(e.code(), Some("denied"));
    assert!(e.message().contains("depth"), "{}", e.message());

    // A parent budget below one call's worst case: refused before any model call.
    let (poor, budget, poor_calls) = parent(|_| ScriptStep::submit(good()), Decimal::new(1, 9));
    let erased: DynSpec = summarise().erase();
    let e = subcontract::rig::tools([erased], &poor).expect("rig tools")[0]
        .execute(json!({"text": "x"}))
        .await
        .expect_err("over budget");
    assert_eq!(e.code(), Some("budget_exhausted"));
    assert_eq!(poor_calls.load(Ordering::SeqCst), 0, "no call was made");
    assert_eq!(budget.snapshot().spent_usd, Decimal::ZERO);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}
