//! What every HTTP provider shares: the redacted [`ApiKey`], the [`ProviderConfig`], and one
//! POST-JSON call with retries, backoff and the mapping of every failure to a [`ModelError`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, LOCATION, RETRY_AFTER};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use crate::model::ModelError;

/// An API key, held as a [`SecretString`]: zeroised when dropped, and its `Debug` and
/// `Display` print `ApiKey(***)`, so formatting a client, a config or an error never shows it;
/// only the provider code reads it, to set a header. Making one registers the key with
/// [`crate::redact`], so any text that echoes it is redacted wherever it leaves the process.
#[derive(Clone)]
pub struct ApiKey(SecretString);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        let key = SecretString::from(key.into());
        crate::redact::register(key.expose_secret());
        ApiKey(key)
    }

    /// The key itself, for the request header only.
    pub(crate) fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

impl PartialEq for ApiKey {
    fn eq(&self, other: &Self) -> bool {
        self.expose() == other.expose()
    }
}

impl Eq for ApiKey {}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

/// The default [`ProviderConfig::max_response_bytes`]: 16 MiB, far above any real answer
/// (a completion of 100k tokens is well under 1 MiB) and small enough to hold in memory.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// Connection settings of a provider: endpoint, key, timeout and retry policy.
///
/// ```
/// use std::time::Duration;
/// use subcontract::provider::{ApiKey, ProviderConfig};
///
/// let config = ProviderConfig::new("http://localhost:11434/v1")
///     .api_key(ApiKey::new("sk-test"))
///     .timeout(Duration::from_secs(120))
///     .max_retries(5);
/// assert!(!format!("{config:?}").contains("sk-test"));
/// ```
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// API root as the provider's own SDK takes it (`https://api.openai.com/v1`,
    /// `https://api.anthropic.com`); no trailing slash needed.
    pub base_url: String,
    /// The key, if the endpoint needs one.
    pub api_key: Option<ApiKey>,
    /// Time allowed for one attempt, from connecting to the last byte of the body
    /// (default 60 s).
    pub timeout: Duration,
    /// Retries after the first attempt on 429, 5xx, connection errors and timeouts
    /// (default 3).
    pub max_retries: u32,
    /// Backoff before the first retry; doubles on each retry, with jitter (default 500 ms).
    pub initial_backoff: Duration,
    /// Upper bound of the computed backoff (default 8 s).
    pub max_backoff: Duration,
    /// Upper bound on a server's `Retry-After` (default 30 s): a longer wait is cut to this.
    pub max_retry_after: Duration,
    /// Largest response body read, in bytes (default [`DEFAULT_MAX_RESPONSE_BYTES`]); a longer
    /// one is a [`ModelError::MalformedResponse`], not read further.
    pub max_response_bytes: usize,
}

impl ProviderConfig {
    /// Defaults for `base_url`: no key, 60 s timeout, 3 retries.
    pub fn new(base_url: impl Into<String>) -> Self {
        ProviderConfig {
            base_url: base_url.into(),
            api_key: None,
            timeout: Duration::from_secs(60),
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(30),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// Sets the key.
    pub fn api_key(mut self, key: ApiKey) -> Self {
        self.api_key = Some(key);
        self
    }

    /// Sets the per-attempt timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how many times a failed attempt is retried.
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// Sets the initial and maximum backoff between retries.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }

    /// Sets the cap on a server's `Retry-After`.
    pub fn max_retry_after(mut self, cap: Duration) -> Self {
        self.max_retry_after = cap;
        self
    }

    /// Sets the largest response body read.
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// `base_url` joined with `path` (which starts with `/`).
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url.trim_end_matches('/'), path)
    }
}

/// The HTTP side of a provider: a client and its config, and one JSON call with retries.
#[derive(Clone)]
pub(crate) struct Transport {
    provider: &'static str,
    client: reqwest::Client,
    config: Arc<ProviderConfig>,
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("provider", &self.provider)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A failure of one attempt, and whether another attempt could succeed.
struct Attempt {
    error: ModelError,
    retryable: bool,
    retry_after: Option<Duration>,
}

impl Transport {
    /// A transport for `provider` (`openai`, `anthropic`) with rustls over the `ring` crypto
    /// provider and the platform's certificate verifier (no OpenSSL, no process-wide state).
    pub(crate) fn new(provider: &'static str, config: ProviderConfig) -> Result<Self, ModelError> {
        use rustls_platform_verifier::BuilderVerifierExt;
        let config_err = |what: &str, e: &dyn std::error::Error| {
            ModelError::Config(format!("{provider}: cannot set up {what}: {e}"))
        };
        let crypto = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(crypto)
            .with_safe_default_protocol_versions()
            .map_err(|e| config_err("TLS", &e))?
            .with_platform_verifier()
            .map_err(|e| config_err("the certificate verifier", &e))?
            .with_no_client_auth();
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            // A redirect is never followed: reqwest would re-send the body (the whole
            // conversation) and headers it does not know to be secret (Anthropic's
            // `x-api-key`) to wherever it points. `attempt` turns it into an error instead.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(config.timeout)
            .user_agent(concat!("subcontract/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| config_err("the HTTP client", &e))?;
        Ok(Transport {
            provider,
            client,
            config: Arc::new(config),
        })
    }

    pub(crate) fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The error for an answer that is not the JSON expected (`bytes` long).
    pub(crate) fn invalid_json(&self, e: &serde_json::Error, bytes: usize) -> ModelError {
        self.malformed(format!("invalid JSON ({e}) in {bytes} bytes"))
    }

    /// POSTs `body` to `path` with `headers` (marked sensitive), retrying as configured, and
    /// returns the body of a 2xx answer, which each provider reads into its own types.
    pub(crate) async fn post(
        &self,
        path: &str,
        headers: Vec<(HeaderName, String)>,
        body: &Value,
    ) -> Result<Vec<u8>, ModelError> {
        let url = self.config.url(path);
        let text = serde_json::to_string(body).map_err(|e| {
            ModelError::Config(format!("{}: cannot encode request: {e}", self.provider))
        })?;
        // A conversation never needs a key; one echoed by another provider's model (through a
        // sub-agent's output) must not reach this one.
        let bytes = crate::redact::redact_string(text).into_bytes();
        let mut header_map = HeaderMap::new();
        header_map.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        for (name, mut text) in headers {
            let value = HeaderValue::from_str(&text);
            // The header's copy of the key is the one kept; this one is wiped like the key's own.
            secrecy::zeroize::Zeroize::zeroize(&mut text);
            let mut value = value.map_err(|_| {
                ModelError::Config(format!(
                    "{}: header {name} has characters HTTP does not allow",
                    self.provider
                ))
            })?;
            value.set_sensitive(true);
            header_map.insert(name, value);
        }
        let mut attempt = 0u32;
        loop {
            match self.attempt(&url, &header_map, bytes.clone()).await {
                Ok(value) => return Ok(value),
                Err(failed) => {
                    let error = self.redact(failed.error);
                    if !failed.retryable || attempt >= self.config.max_retries {
                        return Err(error);
                    }
                    let wait = match failed.retry_after {
                        Some(after) => {
                            let after = after.min(self.config.max_retry_after);
                            // Every caller sharing a rate limit waits, not this one alone.
                            crate::model::note_retry_after(after);
                            after
                        }
                        None => self.backoff(attempt),
                    };
                    tracing::warn!(
                        provider = self.provider,
                        attempt = attempt + 1,
                        wait_ms = wait.as_millis() as u64,
                        error = %error,
                        "model call failed; retrying"
                    );
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
            }
        }
    }

    async fn attempt(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: Vec<u8>,
    ) -> Result<Vec<u8>, Attempt> {
        let mut response = self
            .client
            .post(url)
            .headers(headers.clone())
            .timeout(self.config.timeout)
            .body(body)
            .send()
            .await
            .map_err(|e| self.transport_error(e))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        if status.is_redirection() {
            let target = response
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .map_or_else(|| "nowhere (no Location)".to_string(), |l| origin(url, l));
            return Err(Attempt {
                error: ModelError::Http {
                    provider: self.provider.to_string(),
                    status: status.as_u16(),
                    message: format!(
                        "redirected to {target}; provider calls do not follow redirects, \
                         which would carry the key and the conversation elsewhere: set the \
                         base URL to the address that answers"
                    ),
                },
                retryable: false,
                retry_after: None,
            });
        }
        let cap = self.config.max_response_bytes;
        let too_large = || Attempt {
            error: self.malformed(format!(
                "the answer is larger than {cap} bytes (ProviderConfig::max_response_bytes)"
            )),
            retryable: false,
            retry_after: None,
        };
        if response.content_length().is_some_and(|n| n > cap as u64) {
            return Err(too_large());
        }
        // Read in chunks against the cap: the announced length may be absent or a lie.
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.transport_error(e))?
        {
            if chunk.len() > cap - bytes.len() {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let code = status.as_u16();
            return Err(Attempt {
                error: ModelError::Http {
                    provider: self.provider.to_string(),
                    status: code,
                    message: error_message(&bytes, status),
                },
                // 429 and 5xx may pass on a later attempt (529: Anthropic overloaded); 501 and
                // 505 will not, nor will any other 4xx.
                retryable: code == 429
                    || ((500..600).contains(&code) && !matches!(code, 501 | 505)),
                retry_after,
            });
        }
        Ok(bytes)
    }

    fn transport_error(&self, e: reqwest::Error) -> Attempt {
        let error = if e.is_timeout() {
            ModelError::Timeout {
                provider: self.provider.to_string(),
                secs: self.config.timeout.as_secs(),
            }
        } else {
            ModelError::Connection {
                provider: self.provider.to_string(),
                message: error_chain(&e.without_url()),
            }
        };
        Attempt {
            error,
            retryable: true,
            retry_after: None,
        }
    }

    /// A [`ModelError::MalformedResponse`] of this provider.
    pub(crate) fn malformed(&self, message: impl Into<String>) -> ModelError {
        // Redacted: a parser's message can quote the answer, and an answer can echo the key.
        self.redact(ModelError::MalformedResponse {
            provider: self.provider.to_string(),
            message: message.into(),
        })
    }

    /// `initial * 2^attempt`, capped, with "equal jitter": half fixed, half random.
    fn backoff(&self, attempt: u32) -> Duration {
        let base = self
            .config
            .initial_backoff
            .saturating_mul(2u32.saturating_pow(attempt))
            .min(self.config.max_backoff);
        let half = base / 2;
        half + half.mul_f64(fastrand::f64())
    }

    /// Removes every key from an error's text ([`crate::redact`]), in case a server echoes one
    /// back.
    fn redact(&self, error: ModelError) -> ModelError {
        let clean = crate::redact::redact_string;
        match error {
            ModelError::Http {
                provider,
                status,
                message,
            } => ModelError::Http {
                provider,
                status,
                message: clean(message),
            },
            ModelError::Connection { provider, message } => ModelError::Connection {
                provider,
                message: clean(message),
            },
            ModelError::MalformedResponse { provider, message } => ModelError::MalformedResponse {
                provider,
                message: clean(message),
            },
            ModelError::Exhausted(m) => ModelError::Exhausted(clean(m)),
            ModelError::Config(m) => ModelError::Config(clean(m)),
            other @ ModelError::Timeout { .. } => other,
        }
    }
}

/// The origin (scheme, host, port) of `location` resolved against `url`: enough to say where a
/// redirect pointed without repeating a path or query that may carry a token.
fn origin(url: &str, location: &str) -> String {
    match reqwest::Url::parse(url).and_then(|base| base.join(location)) {
        Ok(target) if target.origin().is_tuple() => target.origin().ascii_serialization(),
        _ => "an address that is not a valid URL".to_string(),
    }
}

/// `Retry-After` in seconds (integer or decimal). HTTP dates are ignored: backoff applies.
fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

/// The provider's `error.message` (both OpenAI and Anthropic use that shape), else a short
/// prefix of the body, else the status' reason phrase.
fn error_message(body: &[u8], status: reqwest::StatusCode) -> String {
    if let Ok(json) = serde_json::from_slice::<Value>(body) {
        let error = json.get("error").unwrap_or(&json);
        if let Some(message) = error.get("message").and_then(Value::as_str) {
            return message.to_string();
        }
        if let Some(message) = error.as_str() {
            return message.to_string();
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return status
            .canonical_reason()
            .unwrap_or("no message")
            .to_string();
    }
    // Redacted before it is cut: a key cut in half would no longer be recognised.
    crate::redact::redact(text).chars().take(500).collect()
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let config = ProviderConfig::new("http://x")
            .backoff(Duration::from_millis(100), Duration::from_millis(700));
        let t = Transport::new("openai", config).expect("invariant: client builds");
        for (attempt, base) in [(0, 100), (1, 200), (2, 400), (3, 700), (30, 700)] {
            for _ in 0..20 {
                let wait = t.backoff(attempt).as_millis();
                assert!((base / 2..=base).contains(&wait), "{attempt}: {wait}");
            }
        }
    }

    #[test]
    fn retry_after_is_seconds() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn error_messages_come_from_the_body() {
        let status = reqwest::StatusCode::BAD_REQUEST;
        let openai = br#"{"error":{"message":"bad tools","type":"invalid_request_error"}}"#;
        assert_eq!(error_message(openai, status), "bad tools");
        let anthropic = br#"{"type":"error","error":{"type":"x","message":"bad block"}}"#;
        assert_eq!(error_message(anthropic, status), "bad block");
        assert_eq!(error_message(b"", status), "Bad Request");
        assert_eq!(error_message(b"plain text", status), "plain text");
    }

    #[test]
    fn api_key_is_redacted_everywhere() {
        let key = ApiKey::new("sk-live-abc");
        assert_eq!(format!("{key:?} {key}"), "ApiKey(***) ApiKey(***)");
        let config = ProviderConfig::new("http://x").api_key(key);
        let t = Transport::new("openai", config).expect("invariant: client builds");
        assert!(!format!("{t:?}").contains("sk-live-abc"));
        let e = t.redact(ModelError::Http {
            provider: "openai".into(),
            status: 401,
            message: "bad key sk-live-abc".into(),
        });
        assert!(!e.to_string().contains("sk-live-abc"));
    }
}
