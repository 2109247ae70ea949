//! One way to turn a model name into a model, for the command line and for hosts.

use std::sync::Arc;

use serde_json::Value;

use subcontract::model::{Model, ModelError};
use subcontract::SubAgentSpec;

use super::example_model::ExampleModel;

/// Makes the model named `name`:
///
/// - `openai:MODEL`, `anthropic:MODEL`: the HTTP providers (credentials and endpoints from the
///   environment; `base_url` overrides the endpoint);
/// - `replay:PATH`: answers from a recording made with `subcontract run --record PATH`;
/// - `example`: answers each of `specs` with its first contract example (offline demos;
///   `SUBCONTRACT_EXAMPLE_DELAY_MS` adds latency).
pub fn resolve_model(
    name: &str,
    base_url: Option<&str>,
    specs: &[SubAgentSpec<Value, Value>],
) -> Result<Arc<dyn Model>, ModelError> {
    if name == "example" {
        // A documented knob for offline demos and tests: latency to watch a batch by.
        let delay = std::env::var("SUBCONTRACT_EXAMPLE_DELAY_MS")
            .ok()
            .and_then(|ms| ms.trim().parse::<u64>().ok())
            .map_or(std::time::Duration::ZERO, std::time::Duration::from_millis);
        return Ok(Arc::new(ExampleModel::new(specs).with_delay(delay)));
    }
    subcontract::host::resolve_model(name, base_url)
}
