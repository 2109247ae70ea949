//! HTTP model providers: [`OpenAiModel`] (Chat Completions, any OpenAI-compatible server)
//! and [`AnthropicModel`] (Messages), both behind the [`Model`] trait, both built on one
//! public [`Transport`] that a third provider can use too.
//!
//! Both share [`ProviderConfig`]: base URL, [`ApiKey`], a per-attempt timeout, and retries with
//! exponential backoff and jitter on 429, 5xx, connection errors and timeouts (a timeout
//! against a loopback host is not retried unless asked for), honouring `Retry-After` and
//! reporting it to the request's [`RetryAfter`](crate::model::RetryAfter). Every failure is a
//! typed [`ModelError`]; the key never appears in one, nor in any `Debug` output or log line
//! (every text leaving the process passes [`crate::redact`]). A redirect is never followed
//! (it would carry the key and the conversation elsewhere): it is an error naming the
//! target's origin. An answer is read up to [`ProviderConfig::max_response_bytes`] and
//! refused past it.
//!
//! Requests and replies are typed wire structs per provider, borrowed from the
//! [`ModelRequest`]: a call serialises the run's own messages,
//! with no copy of the conversation. Each provider's module documentation says how
//! sampling, tool choice and a response format travel.
//!
//! [`model_from_name`] builds either from a `provider:model` name and the environment.

mod anthropic;
mod cache;
mod config;
pub mod dialect;
mod openai;
pub mod shown;
mod transport;
mod usage;

use std::sync::Arc;
use std::time::Duration;

pub use anthropic::{AnthropicModel, ANTHROPIC_DEFAULT_BASE_URL, ANTHROPIC_VERSION};
pub use cache::PromptCache;
pub use config::{
    ApiKey, ProviderConfig, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_MAX_RETRIES,
    DEFAULT_REQUEST_TIMEOUT,
};
pub use openai::{MaxTokensField, OpenAiModel, OPENAI_DEFAULT_BASE_URL};
// MCP servers over HTTP connect with the providers' client.
#[cfg(feature = "mcp-client")]
pub(crate) use transport::http_client;
pub use transport::{tls_config, KeyHeader, Transport};

use crate::model::{Model, ModelError, ModelRequest, ToolChoice};

/// A model from its name, `openai:MODEL` or `anthropic:MODEL`, with credentials and endpoint
/// from the environment:
///
/// - `openai`: key from `OPENAI_API_KEY` (optional: local servers need none); base URL from
///   `base_url`, else `OPENAI_BASE_URL`, else [`OPENAI_DEFAULT_BASE_URL`].
/// - `anthropic`: key from `ANTHROPIC_API_KEY` (required unless a base URL points elsewhere
///   than Anthropic); base URL from `base_url`, else `ANTHROPIC_BASE_URL`, else
///   [`ANTHROPIC_DEFAULT_BASE_URL`].
///
/// Settings of both:
///
/// - `SUBCONTRACT_REQUEST_TIMEOUT`: seconds one attempt may take at most
///   ([`ProviderConfig::timeout`], default 600; decimals allowed); a run's request is given
///   no more than what is left of the run's `timeout` in any case.
/// - `SUBCONTRACT_RETRIES`: retries after a failed attempt ([`ProviderConfig::max_retries`],
///   default 3; `0` for none).
/// - `SUBCONTRACT_PROMPT_CACHE`: `off`, `5m` (the default) or `1h` ([`PromptCache`]).
/// - `SUBCONTRACT_STRICT=1`: each provider's strict mode ([`OpenAiModel::strict`],
///   [`AnthropicModel::strict`]).
///
/// A value that cannot be read is an error naming the variable. Local servers (Ollama,
/// llama.cpp, LM Studio, vLLM) speak the OpenAI API: `ollama:MODEL` and the like are refused
/// with the `openai:MODEL` name and base URL to use instead.
///
/// ```
/// use subcontract::provider::model_from_name;
///
/// let e = model_from_name("ollama:llama3.1", None).err().expect("not a provider");
/// assert!(e.to_string().contains("`openai:llama3.1` with the base URL http://localhost:11434/v1"));
/// ```
pub fn model_from_name(name: &str, base_url: Option<&str>) -> Result<Arc<dyn Model>, ModelError> {
    model_from_env(name, base_url, |var| std::env::var(var).ok())
}

/// Servers that speak the OpenAI API under their own name, and where they usually listen.
const OPENAI_COMPATIBLE: &[(&[&str], &str, Option<&str>)] = &[
    (&["ollama"], "Ollama", Some("http://localhost:11434/v1")),
    (
        &["lmstudio", "lm-studio", "lm_studio"],
        "LM Studio",
        Some("http://localhost:1234/v1"),
    ),
    (
        &[
            "llamacpp",
            "llama.cpp",
            "llama-cpp",
            "llama_cpp",
            "llama-server",
        ],
        "llama.cpp's server",
        Some("http://localhost:8080/v1"),
    ),
    (&["vllm"], "vLLM", Some("http://localhost:8000/v1")),
    (&["localai"], "LocalAI", Some("http://localhost:8080/v1")),
    (&["openrouter"], "OpenRouter", None),
    (&["groq"], "Groq", None),
    (&["together"], "Together", None),
    (&["mistral"], "Mistral", None),
    (&["deepseek"], "DeepSeek", None),
];

fn unknown_provider(provider: &str, model: &str, name: &str) -> ModelError {
    let known = OPENAI_COMPATIBLE
        .iter()
        .find(|(names, _, _)| names.iter().any(|n| n.eq_ignore_ascii_case(provider)));
    ModelError::Config(match known {
        Some((_, server, Some(url))) => format!(
            "`{provider}` is not a provider name: {server} speaks the OpenAI API, so use \
             `openai:{model}` with the base URL {url}, its usual address (or set \
             OPENAI_BASE_URL)"
        ),
        Some((_, server, None)) => format!(
            "`{provider}` is not a provider name: {server} speaks the OpenAI API, so use \
             `openai:{model}` with its API root as the base URL (or set OPENAI_BASE_URL)"
        ),
        None => format!(
            "unknown provider `{provider}` in `{name}`: expected `openai` or `anthropic` (any \
             OpenAI-compatible server: `openai:{model}` with its API root as the base URL)"
        ),
    })
}

/// Refuses a tool choice the tools on offer cannot satisfy: the APIs refuse it, and leaving it
/// out would silently let the model answer in text.
fn check_tool_choice(provider: &str, request: &ModelRequest<'_>) -> Result<(), ModelError> {
    match request.tool_choice {
        ToolChoice::Required if request.tools.is_empty() => Err(ModelError::Config(format!(
            "{provider}: a tool call is required but no tools are offered"
        ))),
        ToolChoice::Tool(name) if !request.tools.iter().any(|t| *t.name == *name) => {
            Err(ModelError::Config(format!(
                "{provider}: tool `{name}` is required but not among the tools offered"
            )))
        }
        _ => Ok(()),
    }
}

/// `SUBCONTRACT_REQUEST_TIMEOUT` and `SUBCONTRACT_RETRIES` applied to `config`.
fn settings_from_env(
    mut config: ProviderConfig,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<ProviderConfig, ModelError> {
    let var = |name: &str| {
        env(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    if let Some(v) = var("SUBCONTRACT_REQUEST_TIMEOUT") {
        let secs = v
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
            .ok_or_else(|| {
                ModelError::Config(format!(
                    "SUBCONTRACT_REQUEST_TIMEOUT is `{v}`: expected seconds, more than 0 and at \
                     most 86400 (a day)"
                ))
            })?;
        config = config.timeout(Duration::from_secs_f64(secs));
    }
    if let Some(v) = var("SUBCONTRACT_RETRIES") {
        let retries = v.parse::<u32>().ok().filter(|n| *n <= 100).ok_or_else(|| {
            ModelError::Config(format!(
                "SUBCONTRACT_RETRIES is `{v}`: expected a whole number from 0 to 100"
            ))
        })?;
        config = config.max_retries(retries);
    }
    Ok(config)
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
    let cache = match non_empty("SUBCONTRACT_PROMPT_CACHE") {
        Some(v) => v
            .parse::<PromptCache>()
            .map_err(|e| ModelError::Config(format!("SUBCONTRACT_PROMPT_CACHE: {e}")))?,
        None => PromptCache::default(),
    };
    match provider {
        "openai" => {
            let base = base_url
                .map(str::to_string)
                .or_else(|| non_empty("OPENAI_BASE_URL"))
                .unwrap_or_else(|| OPENAI_DEFAULT_BASE_URL.to_string());
            let mut config = settings_from_env(ProviderConfig::new(base), &env)?;
            match non_empty("OPENAI_API_KEY") {
                Some(key) => config = config.api_key(ApiKey::new(key)),
                // The public endpoint answers 401 to every request without a key: refuse now,
                // not after a request. Another base URL (a local server) may need none.
                None if config.base_url.trim().trim_end_matches('/') == OPENAI_DEFAULT_BASE_URL => {
                    return Err(ModelError::Config(
                        "OPENAI_API_KEY is not set (a server that needs no key: give its base \
                         URL, or set OPENAI_BASE_URL)"
                            .to_string(),
                    ))
                }
                None => {}
            }
            Ok(Arc::new(
                OpenAiModel::new(model, config)?
                    .strict(strict)
                    .prompt_cache(cache),
            ))
        }
        "anthropic" => {
            let base = base_url
                .map(str::to_string)
                .or_else(|| non_empty("ANTHROPIC_BASE_URL"))
                .unwrap_or_else(|| ANTHROPIC_DEFAULT_BASE_URL.to_string());
            let mut config = settings_from_env(ProviderConfig::new(base), &env)?;
            match non_empty("ANTHROPIC_API_KEY") {
                Some(key) => config = config.api_key(ApiKey::new(key)),
                None if config.base_url.trim().trim_end_matches('/')
                    == ANTHROPIC_DEFAULT_BASE_URL =>
                {
                    return Err(ModelError::Config(
                        "ANTHROPIC_API_KEY is not set".to_string(),
                    ))
                }
                None => {}
            }
            Ok(Arc::new(
                AnthropicModel::new(model, config)?
                    .strict(strict)
                    .prompt_cache(cache),
            ))
        }
        other => Err(unknown_provider(other, model, name)),
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

    #[test]
    fn servers_named_as_providers_point_at_the_openai_name() {
        let none = env(&[]);
        for (name, expected) in [
            (
                "ollama:llama3.1",
                "`openai:llama3.1` with the base URL http://localhost:11434/v1",
            ),
            (
                "lmstudio:qwen",
                "`openai:qwen` with the base URL http://localhost:1234/v1",
            ),
            (
                "llamacpp:q",
                "`openai:q` with the base URL http://localhost:8080/v1",
            ),
            (
                "llama.cpp:q",
                "`openai:q` with the base URL http://localhost:8080/v1",
            ),
            (
                "vllm:m",
                "`openai:m` with the base URL http://localhost:8000/v1",
            ),
            (
                "Ollama:m",
                "`openai:m` with the base URL http://localhost:11434/v1",
            ),
            (
                "openrouter:x/y",
                "`openai:x/y` with its API root as the base URL",
            ),
            ("mystery:m", "`openai:m` with its API root as the base URL"),
        ] {
            let e = model_from_env(name, None, &none)
                .err()
                .expect(name)
                .to_string();
            assert!(e.contains(expected), "{name}: {e}");
        }
    }

    #[test]
    fn timeout_and_retries_come_from_the_environment_or_are_refused() {
        let local = Some("http://localhost:8080/v1");
        let set = env(&[
            ("SUBCONTRACT_REQUEST_TIMEOUT", "300"),
            ("SUBCONTRACT_RETRIES", "0"),
        ]);
        let config = settings_from_env(ProviderConfig::new("http://x"), &set).expect("valid");
        assert_eq!(config.timeout, Duration::from_secs(300));
        assert_eq!(config.max_retries, 0);
        assert!(model_from_env("openai:q", local, &set).is_ok());
        let half = env(&[("SUBCONTRACT_REQUEST_TIMEOUT", " 2.5 ")]);
        let config = settings_from_env(ProviderConfig::new("http://x"), &half).expect("valid");
        assert_eq!(config.timeout, Duration::from_millis(2500));
        assert_eq!(config.max_retries, DEFAULT_MAX_RETRIES);
        for (var, bad) in [
            ("SUBCONTRACT_REQUEST_TIMEOUT", "soon"),
            ("SUBCONTRACT_REQUEST_TIMEOUT", "0"),
            ("SUBCONTRACT_REQUEST_TIMEOUT", "-5"),
            ("SUBCONTRACT_REQUEST_TIMEOUT", "inf"),
            ("SUBCONTRACT_RETRIES", "-1"),
            ("SUBCONTRACT_RETRIES", "two"),
            ("SUBCONTRACT_RETRIES", "1000"),
        ] {
            let vars = [(var, bad)];
            let e = model_from_env("openai:q", local, env(&vars))
                .err()
                .expect(bad);
            assert!(
                matches!(&e, ModelError::Config(m) if m.contains(var)),
                "{var}={bad}: {e}"
            );
            let e = model_from_env("anthropic:q", local, env(&vars))
                .err()
                .expect(bad);
            assert!(
                matches!(&e, ModelError::Config(m) if m.contains(var)),
                "{var}={bad}: {e}"
            );
        }
    }

    #[test]
    fn the_prompt_cache_setting_is_read_or_refused() {
        let local = Some("http://localhost:8080/v1");
        for ok in ["off", "5m", "1h"] {
            let vars = [("SUBCONTRACT_PROMPT_CACHE", ok)];
            assert!(
                model_from_env("anthropic:m", local, env(&vars)).is_ok(),
                "{ok}"
            );
        }
        let vars = [("SUBCONTRACT_PROMPT_CACHE", "always")];
        let e = model_from_env("openai:m", local, env(&vars))
            .err()
            .expect("refused");
        assert!(e.to_string().contains("SUBCONTRACT_PROMPT_CACHE"), "{e}");
    }

    #[test]
    fn a_base_url_without_a_scheme_is_refused_at_once() {
        let none = env(&[]);
        for name in ["openai:m", "anthropic:m"] {
            let e = model_from_env(name, Some("localhost:8080/v1"), &none)
                .err()
                .expect(name);
            assert!(
                matches!(&e, ModelError::Config(m) if m.contains("has no scheme")),
                "{e}"
            );
        }
    }
}
