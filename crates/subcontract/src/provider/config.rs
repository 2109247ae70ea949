//! How a provider is reached: the redacted [`ApiKey`] and the [`ProviderConfig`] (endpoint,
//! timeout, retry policy, body cap).

use std::fmt;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use crate::model::ModelError;

/// An API key, held as a [`SecretString`]: zeroised when dropped, and its `Debug` and
/// `Display` print `ApiKey(***)`, so formatting a client, a config or an error never shows it;
/// only the [`Transport`](super::Transport) reads it, to set a header. Making one registers
/// the key with [`crate::redact`], so any text that echoes it is redacted wherever it leaves
/// the process.
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

/// The default [`ProviderConfig::timeout`]: ten minutes, as the providers' official clients
/// wait. A run's own `timeout` is what bounds a request made by a run: the request is given
/// what is left of the run's time, up to this ceiling.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// The default [`ProviderConfig::max_retries`].
pub const DEFAULT_MAX_RETRIES: u32 = 3;

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
/// // A local server: a timeout is not retried unless asked for.
/// assert!(!config.retries_timeouts());
/// assert!(ProviderConfig::new("https://api.openai.com/v1").retries_timeouts());
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProviderConfig {
    /// API root as the provider's own SDK takes it (`https://api.openai.com/v1`,
    /// `https://api.anthropic.com`), with its scheme; no trailing slash needed.
    pub base_url: String,
    /// The key, if the endpoint needs one.
    pub api_key: Option<ApiKey>,
    /// Time allowed for one attempt, from connecting to the last byte of the body, at most
    /// (default [`DEFAULT_REQUEST_TIMEOUT`], 600 s). A request with a
    /// [`deadline`](crate::model::ModelRequest::deadline), as every request of a run has, is
    /// given less when less is left before it.
    pub timeout: Duration,
    /// Retries after the first attempt on 429, 5xx, connection errors and timeouts
    /// (default [`DEFAULT_MAX_RETRIES`], 3).
    pub max_retries: u32,
    /// Whether an attempt that timed out is retried: `None` (the default) retries it unless
    /// the base URL's host is a loopback address. A local model that is slow to answer is
    /// slow on the next attempt too, and four attempts would quadruple the wait.
    pub retry_timeouts: Option<bool>,
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
    /// Defaults for `base_url`: no key, 600 s timeout, 3 retries.
    pub fn new(base_url: impl Into<String>) -> Self {
        ProviderConfig {
            base_url: base_url.into(),
            api_key: None,
            timeout: DEFAULT_REQUEST_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            retry_timeouts: None,
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

    /// Sets whether an attempt that timed out is retried, whatever the host.
    pub fn retry_timeouts(mut self, retry: bool) -> Self {
        self.retry_timeouts = Some(retry);
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

    /// Whether an attempt that timed out is retried: [`retry_timeouts`](Self::retry_timeouts)
    /// if set, else whether the base URL's host is not a loopback address.
    pub fn retries_timeouts(&self) -> bool {
        self.retry_timeouts
            .unwrap_or_else(|| !is_loopback(&self.base_url))
    }

    /// The base URL, checked: an `http` or `https` URL with a host. Anything else is refused
    /// at once, saying what to write, instead of failing on every attempt of every call.
    pub(crate) fn checked_base_url(&self, provider: &str) -> Result<reqwest::Url, ModelError> {
        let base = self.base_url.trim();
        let refuse = |why: String| {
            ModelError::Config(crate::redact::redact_string(format!(
                "{provider}: base URL `{base}` {why}"
            )))
        };
        if !base.contains("://") {
            return Err(refuse(format!(
                "has no scheme: write `http://{base}` (a local server) or `https://{base}`"
            )));
        }
        let url = reqwest::Url::parse(base).map_err(|e| refuse(format!("is not a URL ({e})")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(refuse(format!(
                "has the scheme `{}`: providers are reached over `http://` or `https://`",
                url.scheme()
            )));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(refuse("names no host".to_string()));
        }
        Ok(url)
    }

    /// `base_url` joined with `path` (which starts with `/`).
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url.trim().trim_end_matches('/'), path)
    }
}

/// Whether `url`'s host is `localhost` (or under it) or a loopback IP address.
fn is_loopback(url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(url.trim()) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.to_ascii_lowercase().ends_with(".localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `url` as it may be shown: scheme, host, port and path, without credentials or query.
pub(crate) fn shown_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            crate::redact::redact_string(u.to_string())
        }
        Err(_) => "an address that is not a valid URL".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_do_not_retry_timeouts_by_default() {
        for local in [
            "http://localhost:8080/v1",
            "http://LOCALHOST/v1",
            "http://127.0.0.1:11434/v1",
            "http://127.8.9.10/v1",
            "http://[::1]:8000/v1",
            "http://api.localhost/v1",
        ] {
            assert!(!ProviderConfig::new(local).retries_timeouts(), "{local}");
            assert!(
                ProviderConfig::new(local)
                    .retry_timeouts(true)
                    .retries_timeouts(),
                "{local}: asked for"
            );
        }
        for remote in [
            "https://api.openai.com/v1",
            "http://10.0.0.5:8000/v1",
            "http://localhost.example.com/v1",
            "not a url",
        ] {
            assert!(ProviderConfig::new(remote).retries_timeouts(), "{remote}");
            assert!(
                !ProviderConfig::new(remote)
                    .retry_timeouts(false)
                    .retries_timeouts(),
                "{remote}: turned off"
            );
        }
    }

    #[test]
    fn base_urls_without_a_scheme_or_host_are_refused_saying_what_to_write() {
        let check = |u: &str| ProviderConfig::new(u).checked_base_url("openai");
        for ok in [
            "http://localhost:8080/v1",
            "https://api.openai.com/v1/",
            " http://h ",
        ] {
            assert!(check(ok).is_ok(), "{ok}");
        }
        let e = check("localhost:8080/v1")
            .expect_err("no scheme")
            .to_string();
        assert!(
            e.contains("has no scheme") && e.contains("`http://localhost:8080/v1`"),
            "{e}"
        );
        let e = check("ftp://files.example.com")
            .expect_err("ftp")
            .to_string();
        assert!(e.contains("`ftp`"), "{e}");
        assert!(check("http://").is_err());
        assert!(check("").is_err());
    }

    #[test]
    fn shown_urls_drop_credentials_and_queries() {
        assert_eq!(
            shown_url("http://user:pw@localhost:8080/v1/chat/completions?key=abc#x"),
            "http://localhost:8080/v1/chat/completions"
        );
    }
}
