//! [`Transport`]: one JSON POST to a provider, as every HTTP provider of this crate makes it
//! (and a third one can): the key in its header, retries with backoff and jitter, no
//! redirects, a cap on the body read, every failure a redacted [`ModelError`].

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, LOCATION, RETRY_AFTER};
use serde::{Deserialize, Serialize};

use super::config::{shown_url, ProviderConfig};
use crate::model::{ModelError, RetryAfter};

/// How long past a request's deadline an attempt may still run: the caller's own timer at the
/// deadline (a run's `timeout`) ends the call first, and the run ends `timeout`, not
/// `model_error`.
const DEADLINE_GRACE: Duration = Duration::from_secs(1);

/// Where the [`ProviderConfig::api_key`] travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KeyHeader {
    /// `Authorization: Bearer KEY` (OpenAI and most compatible servers).
    #[default]
    Bearer,
    /// The key alone as this header's value (Anthropic's `x-api-key`).
    Named(&'static str),
}

/// The HTTP side of a provider: a client, its [`ProviderConfig`], and one JSON call with
/// retries. Cloning shares the connection pool.
///
/// - **Retries**: 429, 5xx (but 501 and 505), connection errors and timeouts (a timeout
///   against a loopback host only if [`ProviderConfig::retry_timeouts`] says so) are retried
///   up to [`ProviderConfig::max_retries`] times, after `Retry-After` when the server sends
///   one (capped; reported to the request's [`RetryAfter`] so every caller sharing a rate
///   limit waits) or else an exponential backoff with jitter.
/// - **No redirects**: following one would carry the key and the conversation to wherever
///   it points; it is an error naming the target's origin.
/// - **Bounded**: a body past [`ProviderConfig::max_response_bytes`] is refused, whatever
///   length the server announced.
/// - **Redacted**: the request body and every error text pass [`crate::redact`]; the key is
///   sent in a header marked sensitive and appears nowhere else.
///
/// A provider of its own on top of it, for an API this crate does not speak:
///
/// ```no_run
/// use async_trait::async_trait;
/// use serde::{Deserialize, Serialize};
/// use subcontract::model::{Model, ModelError, ModelRequest, ModelResponse, StopReason, Usage};
/// use subcontract::provider::{ApiKey, KeyHeader, ProviderConfig, Transport};
///
/// struct Echo {
///     transport: Transport,
/// }
///
/// #[derive(Serialize)]
/// struct Request<'a> {
///     prompt: &'a str,
///     max_tokens: u32,
/// }
///
/// #[derive(Deserialize)]
/// struct Reply {
///     text: String,
///     tokens_in: u64,
///     tokens_out: u64,
/// }
///
/// #[async_trait]
/// impl Model for Echo {
///     fn id(&self) -> &str {
///         "echo:v1"
///     }
///
///     async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
///         let body = Request { prompt: request.system, max_tokens: request.max_tokens };
///         let bytes = self.transport.post("/generate", &body, request.retry_after).await?;
///         let reply: Reply = self.transport.decode(&bytes, "an Echo answer")?;
///         Ok(ModelResponse {
///             text: Some(reply.text),
///             tool_calls: Vec::new(),
///             usage: Usage::new(reply.tokens_in, reply.tokens_out),
///             stop_reason: StopReason::EndTurn,
///         })
///     }
/// }
///
/// # fn main() -> Result<(), ModelError> {
/// let config = ProviderConfig::new("https://echo.example.com/v1").api_key(ApiKey::new("sk-echo"));
/// let transport = Transport::new("echo", config)?
///     .key_header(KeyHeader::Named("x-echo-key"))
///     .header("echo-version", "2")?;
/// let model = Echo { transport };
/// # let _ = model;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Transport {
    provider: Arc<str>,
    client: reqwest::Client,
    config: Arc<ProviderConfig>,
    key_header: KeyHeader,
    headers: HeaderMap,
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

/// The TLS configuration every outgoing connection of the library (and of the `subcontract`
/// binary's OTLP exporter) uses: rustls over the `ring` crypto provider and the platform's
/// certificate verifier — no OpenSSL, no process-wide state. The error says what could not be
/// set up.
///
/// ```
/// let tls = subcontract::provider::tls_config().expect("TLS");
/// assert!(tls.alpn_protocols.is_empty());
/// ```
pub fn tls_config() -> Result<rustls::ClientConfig, String> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let err = |what: &str, e: &dyn std::error::Error| format!("cannot set up {what}: {e}");
    // rustls 0.23.48 deprecates its `ring` provider (no post-quantum key exchange) in favour
    // of aws-lc-rs, which builds a C library inside every user's build, or of the provider
    // crates of rustls 0.24. It stays the provider here, with its deprecation kept inside the library:
    // a user's build of subcontract must print no warning.
    #[allow(deprecated)]
    let crypto = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(crypto)
        .with_safe_default_protocol_versions()
        .map_err(|e| err("TLS", &e))?
        .with_platform_verifier()
        .map_err(|e| err("the certificate verifier", &e))?
        .with_no_client_auth())
}

/// The HTTP client every outgoing connection of the library uses (providers, MCP servers over
/// HTTP): [`tls_config`], and no redirects: reqwest would re-send the body (the whole
/// conversation) and headers it does not know to be secret (Anthropic's `x-api-key`, an MCP
/// server's token) to wherever one points. The error says what could not be set up.
pub(crate) fn http_client(connect_timeout: Option<Duration>) -> Result<reqwest::Client, String> {
    let mut b = reqwest::Client::builder()
        .tls_backend_preconfigured(tls_config()?)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("subcontract/", env!("CARGO_PKG_VERSION")));
    if let Some(t) = connect_timeout {
        b = b.connect_timeout(t);
    }
    b.build()
        .map_err(|e| format!("cannot set up the HTTP client: {e}"))
}

impl Transport {
    /// A transport for `provider` (its name in errors and logs: `openai`, `anthropic`) with
    /// rustls over the `ring` crypto provider and the platform's certificate verifier (no
    /// OpenSSL, no process-wide state). The key, if any, goes as a bearer token
    /// ([`Transport::key_header`] to change that). A base URL without an `http://` or
    /// `https://` scheme, or without a host, is refused here, before any request.
    pub fn new(provider: impl Into<Arc<str>>, config: ProviderConfig) -> Result<Self, ModelError> {
        let provider: Arc<str> = provider.into();
        config.checked_base_url(&provider)?;
        let client = http_client(Some(config.timeout))
            .map_err(|e| ModelError::Config(format!("{provider}: {e}")))?;
        let mut headers = HeaderMap::new();
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Ok(Transport {
            provider,
            client,
            config: Arc::new(config),
            key_header: KeyHeader::Bearer,
            headers,
        })
    }

    /// Sends the key in `header` instead.
    pub fn key_header(mut self, header: KeyHeader) -> Self {
        self.key_header = header;
        self
    }

    /// Sends `name: value` with every request (an API version, a beta flag); not for
    /// secrets, which belong in the [`ProviderConfig::api_key`].
    pub fn header(mut self, name: &'static str, value: &str) -> Result<Self, ModelError> {
        let bad = || {
            ModelError::Config(format!(
                "{}: header {name}: {value:?} is not a valid HTTP header",
                self.provider
            ))
        };
        let value = HeaderValue::from_str(value).map_err(|_| bad())?;
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
        self.headers.insert(name, value);
        Ok(self)
    }

    /// The provider's name, as errors carry it.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// The settings it was made with.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The full URL of `path` (which starts with `/`), as requests go to it.
    pub fn url(&self, path: &str) -> String {
        self.config.url(path)
    }

    /// POSTs `body` as JSON to `path` under the base URL, retrying as configured, and
    /// returns the body of a 2xx answer for the caller to decode ([`Transport::decode`]).
    /// A server's `Retry-After` is reported to `retry_after` when given (pass the request's
    /// [`ModelRequest::retry_after`](crate::model::ModelRequest::retry_after)).
    pub async fn post<B: Serialize + ?Sized>(
        &self,
        path: &str,
        body: &B,
        retry_after: Option<&RetryAfter>,
    ) -> Result<Vec<u8>, ModelError> {
        self.post_until(path, body, retry_after, None).await
    }

    /// [`post`](Self::post), each attempt given at most what is left before `deadline`
    /// (pass the request's [`ModelRequest::deadline`](crate::model::ModelRequest::deadline)),
    /// and no retry started past it.
    pub async fn post_until<B: Serialize + ?Sized>(
        &self,
        path: &str,
        body: &B,
        retry_after: Option<&RetryAfter>,
        deadline: Option<Instant>,
    ) -> Result<Vec<u8>, ModelError> {
        let url = self.config.url(path);
        let text = serde_json::to_string(body).map_err(|e| {
            ModelError::Config(format!("{}: cannot encode request: {e}", self.provider))
        })?;
        // A conversation never needs a key; one echoed by another provider's model (through a
        // sub-agent's output) must not reach this one.
        let bytes = crate::redact::redact_string(text).into_bytes();
        let headers = self.headers_with_key()?;
        let mut attempt = 0u32;
        loop {
            let limit = self.attempt_limit(deadline);
            match self.attempt(&url, &headers, bytes.clone(), limit).await {
                Ok(value) => return Ok(value),
                Err(failed) => {
                    let error = redact(failed.error);
                    if !failed.retryable || attempt >= self.config.max_retries {
                        return Err(with_attempts(error, attempt + 1));
                    }
                    if self.attempt_limit(deadline).is_zero() {
                        return Err(with_attempts(error, attempt + 1));
                    }
                    let wait = match failed.retry_after {
                        Some(after) => {
                            let after = after.min(self.config.max_retry_after);
                            // Every caller sharing a rate limit waits, not this one alone.
                            if let Some(handle) = retry_after {
                                handle.report(after);
                            }
                            after
                        }
                        None => self.backoff(attempt),
                    };
                    tracing::warn!(
                        provider = &*self.provider,
                        attempt = attempt + 1,
                        wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                        error = %error,
                        "model call failed; retrying"
                    );
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
            }
        }
    }

    /// `bytes` (an answer's body) read as `T`: JSON that is not `T` is a malformed answer
    /// saying what was expected (`what`: "a Chat Completions answer") and why, text that is
    /// not JSON says where it broke. Either way a [`ModelError::MalformedResponse`], redacted.
    pub fn decode<'de, T: Deserialize<'de>>(
        &self,
        bytes: &'de [u8],
        what: &str,
    ) -> Result<T, ModelError> {
        serde_json::from_slice(bytes).map_err(|e| {
            if let Some(page) = html_page(bytes) {
                self.malformed(page)
            } else if e.is_data() {
                self.malformed(format!("not {what} ({e})"))
            } else {
                self.malformed(format!("invalid JSON ({e}) in {} bytes", bytes.len()))
            }
        })
    }

    /// A [`ModelError::MalformedResponse`] of this provider, redacted (a parser's message can
    /// quote the answer, and an answer can echo the key).
    pub fn malformed(&self, message: impl Into<String>) -> ModelError {
        redact(ModelError::MalformedResponse {
            provider: self.provider.to_string(),
            message: message.into(),
        })
    }

    /// A [`ModelError::UnreadableUsage`] of this provider, redacted.
    pub fn unreadable_usage(&self, message: impl Into<String>) -> ModelError {
        redact(ModelError::UnreadableUsage {
            provider: self.provider.to_string(),
            message: message.into(),
        })
    }

    /// The configured headers and the key's, marked sensitive.
    fn headers_with_key(&self) -> Result<HeaderMap, ModelError> {
        let mut headers = self.headers.clone();
        let Some(key) = &self.config.api_key else {
            return Ok(headers);
        };
        let (name, mut text) = match self.key_header {
            KeyHeader::Bearer => (AUTHORIZATION, format!("Bearer {}", key.expose())),
            KeyHeader::Named(name) => (
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                    ModelError::Config(format!("{}: {name} is not a header name", self.provider))
                })?,
                key.expose().to_string(),
            ),
        };
        let value = HeaderValue::from_str(&text);
        // The header's copy of the key is the one kept; this one is wiped like the key's own.
        secrecy::zeroize::Zeroize::zeroize(&mut text);
        let mut value = value.map_err(|_| {
            ModelError::Config(format!(
                "{}: the API key has characters HTTP headers do not allow",
                self.provider
            ))
        })?;
        value.set_sensitive(true);
        headers.insert(name, value);
        Ok(headers)
    }

    /// The time one attempt starting now is given: the configured ceiling, or less when less
    /// is left before `deadline`, plus [`DEADLINE_GRACE`] (zero once the deadline is past).
    fn attempt_limit(&self, deadline: Option<Instant>) -> Duration {
        match deadline {
            None => self.config.timeout,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) => self.config.timeout.min(left + DEADLINE_GRACE),
                None => Duration::ZERO,
            },
        }
    }

    async fn attempt(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: Vec<u8>,
        limit: Duration,
    ) -> Result<Vec<u8>, Attempt> {
        if limit.is_zero() {
            return Err(self.timed_out(limit));
        }
        let mut response = self
            .client
            .post(url)
            .headers(headers.clone())
            .timeout(limit)
            .body(body)
            .send()
            .await
            .map_err(|e| self.transport_error(e, limit))?;
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
            .map_err(|e| self.transport_error(e, limit))?
        {
            if chunk.len() > cap - bytes.len() {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let code = status.as_u16();
            let mut message = match html_page(&bytes) {
                Some(page) => page,
                None => error_message(&bytes, status),
            };
            if matches!(code, 404 | 405 | 501) || html_page(&bytes).is_some() {
                message = format!("{message} (POST {})", shown_url(url));
            }
            return Err(Attempt {
                error: ModelError::Http {
                    provider: self.provider.to_string(),
                    status: code,
                    message,
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

    /// An attempt that ran out of its `limit`.
    fn timed_out(&self, limit: Duration) -> Attempt {
        Attempt {
            error: ModelError::Timeout {
                provider: self.provider.to_string(),
                secs: limit.as_secs(),
            },
            retryable: self.config.retries_timeouts(),
            retry_after: None,
        }
        .logged_if_not_retried(&self.provider, limit.as_secs_f64())
    }

    fn transport_error(&self, e: reqwest::Error, limit: Duration) -> Attempt {
        if e.is_timeout() {
            return self.timed_out(limit);
        }
        // The address without its credentials or query, then the cause without the URL
        // reqwest would print whole.
        let at = e
            .url()
            .map_or_else(|| "the provider".to_string(), |u| shown_url(u.as_str()));
        Attempt {
            error: ModelError::Connection {
                provider: self.provider.to_string(),
                message: format!("{} (POST {at})", error_chain(&e.without_url())),
            },
            retryable: true,
            retry_after: None,
        }
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
}

impl Attempt {
    /// Says why a timeout is final when it is: the user may expect retries.
    fn logged_if_not_retried(self, provider: &str, secs: f64) -> Self {
        if !self.retryable {
            tracing::debug!(
                provider,
                timeout_secs = secs,
                "timed out; not retried against a local server (ProviderConfig::retry_timeouts)"
            );
        }
        self
    }
}

/// Removes every key from an error's text ([`crate::redact`]), in case a server echoes one
/// back.
pub(crate) fn redact(error: ModelError) -> ModelError {
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
        ModelError::UnreadableUsage { provider, message } => ModelError::UnreadableUsage {
            provider,
            message: clean(message),
        },
        ModelError::Exhausted(m) => ModelError::Exhausted(clean(m)),
        ModelError::Config(m) => ModelError::Config(clean(m)),
        // Redacted when shown.
        other @ (ModelError::Timeout { .. } | ModelError::Foreign(_)) => other,
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
/// An HTML page where an API answer was due, in one line with the hint that fits: a web page
/// answers at the base URL when it is not the API root (the `/v1` of an OpenAI-compatible
/// server missing, or another service on that port).
fn html_page(body: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(&body[..body.len().min(512)]);
    let head = head.trim_start().to_ascii_lowercase();
    (head.starts_with("<!doctype html") || head.starts_with("<html")).then(|| {
        format!(
            "an HTML page of {} bytes, not an API answer: is the base URL the API root (with `/v1` for an OpenAI-compatible server), on the port the server listens on?",
            body.len()
        )
    })
}

/// A connection error saying how many attempts were made, when there was more than one (an
/// HTTP error keeps the provider's own message as it is).
fn with_attempts(error: ModelError, attempts: u32) -> ModelError {
    match error {
        ModelError::Connection { provider, message } if attempts > 1 => ModelError::Connection {
            provider,
            message: format!("{message} (gave up after {attempts} attempts)"),
        },
        other => other,
    }
}

fn error_message(body: &[u8], status: reqwest::StatusCode) -> String {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Shape<'a> {
        Nested {
            #[serde(borrow)]
            error: Inner<'a>,
        },
        Flat(Inner<'a>),
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Inner<'a> {
        Message {
            #[serde(borrow)]
            message: Cow<'a, str>,
        },
        Text(#[serde(borrow)] Cow<'a, str>),
    }
    if let Ok(Shape::Nested { error: inner } | Shape::Flat(inner)) =
        serde_json::from_slice::<Shape<'_>>(body)
    {
        let (Inner::Message { message } | Inner::Text(message)) = inner;
        return message.into_owned();
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
    crate::contract::truncate_chars(&crate::redact::redact(text), 500)
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
    fn an_attempt_is_given_what_is_left_before_the_deadline_up_to_the_ceiling() {
        let config = ProviderConfig::new("http://x").timeout(Duration::from_secs(600));
        let t = Transport::new("openai", config).expect("invariant: client builds");
        assert_eq!(t.attempt_limit(None), Duration::from_secs(600));
        let far = Instant::now() + Duration::from_secs(3600);
        assert_eq!(t.attempt_limit(Some(far)), Duration::from_secs(600));
        let near = t.attempt_limit(Some(Instant::now() + Duration::from_secs(90)));
        assert!(
            near <= Duration::from_secs(91) && near > Duration::from_secs(89),
            "{near:?}"
        );
        let past = Instant::now().checked_sub(Duration::from_secs(1));
        assert_eq!(t.attempt_limit(past), Duration::ZERO);
    }

    /// A server that accepts and never answers: the attempt ends at the deadline (and its
    /// grace), not at the 600 s ceiling; past the deadline, no attempt is made at all.
    #[tokio::test]
    async fn a_request_to_a_silent_server_ends_at_its_deadline() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                open.push(socket);
            }
        });
        let config = ProviderConfig::new(format!("http://{addr}/v1"))
            .max_retries(3)
            .retry_timeouts(true);
        let t = Transport::new("openai", config).expect("invariant: client builds");
        let t0 = Instant::now();
        let deadline = Some(t0 + Duration::from_millis(200));
        let e = tokio::time::timeout(
            Duration::from_secs(20),
            t.post_until("/chat/completions", &serde_json::json!({}), None, deadline),
        )
        .await
        .expect("bounded by the deadline")
        .unwrap_err();
        let took = t0.elapsed();
        assert!(matches!(e, ModelError::Timeout { secs: 1, .. }), "{e}");
        assert!(took < Duration::from_secs(5), "{took:?}");
        let past = Some(Instant::now());
        let e = t
            .post_until("/chat/completions", &serde_json::json!({}), None, past)
            .await
            .unwrap_err();
        assert!(matches!(e, ModelError::Timeout { secs: 0, .. }), "{e}");
        held.abort();
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
        assert_eq!(error_message(br#"{"error":"flat"}"#, status), "flat");
        assert_eq!(error_message(br#"{"message":"top"}"#, status), "top");
        assert_eq!(error_message(b"", status), "Bad Request");
        assert_eq!(error_message(b"plain text", status), "plain text");
    }

    #[test]
    fn decoding_tells_invalid_json_from_the_wrong_shape() {
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct Answer {
            n: u32,
        }
        let t = Transport::new("openai", ProviderConfig::new("http://x")).expect("client");
        let e = t
            .decode::<Answer>(b"{\"n\": ", "an answer")
            .expect_err("cut");
        assert!(
            e.to_string().contains("invalid JSON") && e.to_string().contains("6 bytes"),
            "{e}"
        );
        let e = t
            .decode::<Answer>(br#"{"m": 1}"#, "an answer")
            .expect_err("shape");
        assert!(
            e.to_string().contains("not an answer (missing field `n`"),
            "{e}"
        );
        assert!(t
            .decode::<Answer>(br#"{"n": 1, "extra": true}"#, "an answer")
            .is_ok());
    }

    #[test]
    fn api_key_is_redacted_everywhere() {
        let key = crate::provider::ApiKey::new("sk-live-abc");
        assert_eq!(format!("{key:?} {key}"), "ApiKey(***) ApiKey(***)");
        let config = ProviderConfig::new("http://x").api_key(key);
        let t = Transport::new("openai", config).expect("invariant: client builds");
        assert!(!format!("{t:?}").contains("sk-live-abc"));
        let e = redact(ModelError::Http {
            provider: "openai".into(),
            status: 401,
            message: "bad key sk-live-abc".into(),
        });
        assert!(!e.to_string().contains("sk-live-abc"));
    }

    #[test]
    fn a_base_url_without_a_scheme_is_refused_before_any_request() {
        let e = Transport::new("openai", ProviderConfig::new("localhost:8080/v1"))
            .expect_err("no scheme");
        assert!(
            matches!(&e, ModelError::Config(m) if m.contains("has no scheme")),
            "{e:?}"
        );
    }
}
