//! HTTP model providers: [`OpenAiModel`] (Chat Completions, any OpenAI-compatible server)
//! and [`AnthropicModel`] (Messages), both behind the [`Model`] trait.
//!
//! Both share [`ProviderConfig`]: base URL, [`ApiKey`], a per-attempt timeout, and retries with
//! exponential backoff and jitter on 429, 5xx, connection errors and timeouts, honouring
//! `Retry-After`. Every failure is a typed [`ModelError`]; the key never appears in one, nor
//! in any `Debug` output or log line (every text leaving the process passes
//! [`crate::redact`]). A redirect is never followed (it would carry the key and the
//! conversation elsewhere): it is an error naming the target's origin. An answer is read up to
//! [`ProviderConfig::max_response_bytes`] and refused past it.
//!
//! [`model_from_name`] builds either from a `provider:model` name and the environment.

mod anthropic;
pub mod dialect;
mod http;
mod openai;
mod usage;

use std::sync::Arc;

pub use anthropic::{AnthropicModel, ANTHROPIC_DEFAULT_BASE_URL, ANTHROPIC_VERSION};
pub use http::{ApiKey, ProviderConfig, DEFAULT_MAX_RESPONSE_BYTES};
pub use openai::{MaxTokensField, OpenAiModel, OPENAI_DEFAULT_BASE_URL};

use crate::model::{Model, ModelError};

/// A sampling setting as a JSON number written as it was given (`0.2`, not the nearest `f64`
/// to the `f32`, `0.20000000298023224`); nothing for a value that is not finite.
pub(crate) fn sampling_number(x: f32) -> Option<serde_json::Value> {
    let shortest: f64 = x.to_string().parse().ok()?;
    serde_json::Number::from_f64(shortest).map(serde_json::Value::Number)
}

/// A model from its name, `openai:MODEL` or `anthropic:MODEL`, with credentials and endpoint
/// from the environment:
///
/// - `openai`: key from `OPENAI_API_KEY` (optional: local servers need none); base URL from
///   `base_url`, else `OPENAI_BASE_URL`, else [`OPENAI_DEFAULT_BASE_URL`].
/// - `anthropic`: key from `ANTHROPIC_API_KEY` (required unless a base URL points elsewhere
///   than Anthropic); base URL from `base_url`, else `ANTHROPIC_BASE_URL`, else
///   [`ANTHROPIC_DEFAULT_BASE_URL`].
///
/// `SUBCONTRACT_STRICT=1` turns on each provider's strict mode ([`OpenAiModel::strict`],
/// [`AnthropicModel::strict`]). Other settings are [`ProviderConfig`]'s defaults.
pub fn model_from_name(name: &str, base_url: Option<&str>) -> Result<Arc<dyn Model>, ModelError> {
    model_from_env(name, base_url, |var| std::env::var(var).ok())
}

fn model_from_env(
    name: &str,
    base_url: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Model>, ModelError> {
    let (provider, model) = name.split_once(':').ok_or_else(|| {
        ModelError::Config(format!(
            "model `{name}` is not `provider:model` (`openai:gpt-4.1-mini`, `anthropic:claude-sonnet-4-5`)"
        ))
    })?;
    if model.trim().is_empty() {
        return Err(ModelError::Config(format!("model `{name}` names no model")));
    }
    let non_empty = |var: &str| env(var).filter(|v| !v.trim().is_empty());
    let strict = non_empty("SUBCONTRACT_STRICT")
        .is_some_and(|v| v.trim() == "1" || v.trim().eq_ignore_ascii_case("true"));
    match provider {
        "openai" => {
            let base = base_url
                .map(str::to_string)
                .or_else(|| non_empty("OPENAI_BASE_URL"))
                .unwrap_or_else(|| OPENAI_DEFAULT_BASE_URL.to_string());
            let mut config = ProviderConfig::new(base);
            match non_empty("OPENAI_API_KEY") {
                Some(key) => config = config.api_key(ApiKey::new(key)),
                // The public endpoint answers 401 to every request without a key: refuse now,
                // not after a request. Another base URL (a local server) may need none.
                None if config.base_url.trim_end_matches('/') == OPENAI_DEFAULT_BASE_URL => {
                    return Err(ModelError::Config(
                        "OPENAI_API_KEY is not set (a server that needs no key: pass --base-url \
                         or set OPENAI_BASE_URL)"
                            .to_string(),
                    ))
                }
                None => {}
            }
            Ok(Arc::new(OpenAiModel::new(model, config)?.strict(strict)))
        }
        "anthropic" => {
            let base = base_url
                .map(str::to_string)
                .or_else(|| non_empty("ANTHROPIC_BASE_URL"))
                .unwrap_or_else(|| ANTHROPIC_DEFAULT_BASE_URL.to_string());
            let mut config = ProviderConfig::new(base);
            match non_empty("ANTHROPIC_API_KEY") {
                Some(key) => config = config.api_key(ApiKey::new(key)),
                None if config.base_url.trim_end_matches('/') == ANTHROPIC_DEFAULT_BASE_URL => {
                    return Err(ModelError::Config(
                        "ANTHROPIC_API_KEY is not set".to_string(),
                    ))
                }
                None => {}
            }
            Ok(Arc::new(AnthropicModel::new(model, config)?.strict(strict)))
        }
        other => Err(ModelError::Config(format!(
            "unknown provider `{other}` in `{name}`: expected `openai` or `anthropic`"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn names_are_parsed() {
        let none = env(&[]);
        let keyed = env(&[("OPENAI_API_KEY", "sk-secret")]);
        let m = model_from_env("openai:gpt-4.1-mini", None, &keyed).expect("has a key");
        assert_eq!(m.id(), "openai:gpt-4.1-mini");
        for bad in ["gpt-4", "openai:", "mystery:model"] {
            assert!(
                matches!(model_from_env(bad, None, &none), Err(ModelError::Config(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            model_from_env("anthropic:claude-sonnet-4-5", None, &none),
            Err(ModelError::Config(m)) if m.contains("ANTHROPIC_API_KEY")
        ));
        let keyed = env(&[("ANTHROPIC_API_KEY", "sk-ant-secret")]);
        let m = model_from_env("anthropic:claude-sonnet-4-5", None, &keyed).expect("has a key");
        assert_eq!(m.id(), "anthropic:claude-sonnet-4-5");
        // A proxy elsewhere may need no key.
        let m = model_from_env("anthropic:x", Some("http://127.0.0.1:1"), &none).expect("proxy");
        assert_eq!(m.id(), "anthropic:x");
    }

    #[test]
    fn openai_without_a_key_is_refused_unless_the_endpoint_is_elsewhere() {
        let none = env(&[]);
        for default in [None, Some("https://api.openai.com/v1/")] {
            assert!(matches!(
                model_from_env("openai:gpt-4.1-mini", default, &none),
                Err(ModelError::Config(m)) if m.contains("OPENAI_API_KEY")
            ));
        }
        let default_env = env(&[("OPENAI_BASE_URL", "https://api.openai.com/v1")]);
        assert!(model_from_env("openai:gpt-4.1-mini", None, &default_env).is_err());
        // A local server needs no key, named either way.
        let local = Some("http://localhost:11434/v1");
        assert!(model_from_env("openai:llama3.1", local, &none).is_ok());
        let local_env = env(&[("OPENAI_BASE_URL", "http://localhost:11434/v1")]);
        assert!(model_from_env("openai:llama3.1", None, &local_env).is_ok());
    }
}
