//! One way to turn a model name into a model, for the command line and for hosts.

use std::sync::Arc;

use serde_json::Value;

use subcontract::model::{Model, ModelError, ReplayModel};
use subcontract::SubAgentSpec;

use super::example_model::ExampleModel;

/// Makes the model named `name`:
///
/// - `openai:MODEL`, `anthropic:MODEL`: the HTTP providers (credentials and endpoints from the
///   environment; `base_url` overrides the endpoint);
/// - `replay:PATH`: answers from a recording made with `subcontract run --record PATH`;
/// - `example`: answers each of `specs` with its first contract example (offline demos).
pub fn resolve_model(
    name: &str,
    base_url: Option<&str>,
    specs: &[SubAgentSpec<Value, Value>],
) -> Result<Arc<dyn Model>, ModelError> {
    if name == "example" {
        return Ok(Arc::new(ExampleModel::new(specs)));
    }
    if let Some(path) = name.strip_prefix("replay:") {
        return ReplayModel::from_file(path)
            .map(|m| Arc::new(m) as Arc<dyn Model>)
            .map_err(|e| ModelError::Config(e.to_string()));
    }
    subcontract::provider::model_from_name(name, base_url)
}
