//! The prompt-cache scenario's subcontract side, shared by the integration tests
//! (`tests/it/prompt_cache.rs`) and the benchmark (`examples/bench_cache.rs`), which both
//! include this file beside the billing mock: the client of a mock, the `read_file` tool the
//! scripted reader calls, and the host that fans out to the reader.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use subcontract::model::Model;
use subcontract::provider::{AnthropicModel, ApiKey, OpenAiModel, PromptCache, ProviderConfig};
use subcontract::{FnTool, SubAgentSpec, Tool, ToolOutput};

use super::billing_mock::{self as mock, Api, BillingMock};

/// The model the mock of `api` prices: Claude Sonnet 4.5 or GPT-4.1.
pub fn model(api: Api, server: &BillingMock, cache: PromptCache) -> Arc<dyn Model> {
    let config = ProviderConfig::new(server.base_url())
        .api_key(ApiKey::new("sk-test-cache"))
        .timeout(Duration::from_secs(30))
        .max_retries(0);
    // The mock's own loopback URL: a client for it always builds.
    match api {
        Api::Anthropic => Arc::new(
            AnthropicModel::new("claude-sonnet-4-5", config)
                .expect("a client for the mock")
                .prompt_cache(cache),
        ),
        Api::OpenAi => Arc::new(
            OpenAiModel::new("gpt-4.1", config)
                .expect("a client for the mock")
                .prompt_cache(cache),
        ),
    }
}

/// `read_file`: any path, answered with the mock's 2,000-token [`mock::file_text`].
pub fn read_file() -> Arc<dyn Tool> {
    FnTool::new(
        "read_file",
        "Reads a file of the workspace.",
        json!({"type": "object", "required": ["path"], "additionalProperties": false,
               "properties": {"path": {"type": "string", "maxLength": 200}}}),
        |args| async move { ToolOutput::text(mock::file_text(args["path"].as_str().unwrap_or(""))) },
    )
}

/// The host: a 2,000-byte system prompt, delegating to `reader`.
pub fn host() -> SubAgentSpec<Value, Value> {
    SubAgentSpec::dynamic(
        "host",
        json!({"type": "object"}),
        json!({"type": "string", "maxLength": 2000}),
    )
    .description("Delegates the reading.")
    .system(mock::long_text("host rules", 2_000))
    .tools(["reader"])
    .max_turns(3)
    .build()
    .expect("the host spec is valid")
}
