//! Whether, and for how long, a provider is asked to cache a request's prefix: a setting of
//! the request ([`ModelRequest::prompt_cache`](super::ModelRequest)), of a spec and of a host,
//! which the providers carry out (`crate::provider`'s cache module says how).

use std::str::FromStr;

/// Whether, and for how long, providers are asked to cache a request's prefix.
///
/// ```
/// use subcontract::provider::PromptCache;
///
/// assert_eq!("1h".parse::<PromptCache>(), Ok(PromptCache::OneHour));
/// assert_eq!(PromptCache::default(), PromptCache::FiveMinutes);
/// assert!("forever".parse::<PromptCache>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PromptCache {
    /// No cache markers, no cache key.
    Off,
    /// Cache for 5 minutes after each read (Anthropic's default TTL); the default.
    #[default]
    FiveMinutes,
    /// Cache for an hour (Anthropic's `ttl: "1h"`, written at a higher price). OpenAI's
    /// only lifetime setting (`prompt_cache_options.ttl`) has one value, its default, and its
    /// `prompt_cache_retention` is deprecated: the key is sent as for five minutes.
    OneHour,
}

impl FromStr for PromptCache {
    type Err = String;

    /// `off`, `5m` or `1h`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "off" => Ok(PromptCache::Off),
            "5m" => Ok(PromptCache::FiveMinutes),
            "1h" => Ok(PromptCache::OneHour),
            other => Err(format!(
                "prompt cache `{other}`: expected `off`, `5m` or `1h`"
            )),
        }
    }
}
