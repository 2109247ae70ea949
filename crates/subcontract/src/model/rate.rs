//! Provider rate limits shared by every caller of one model: [`RateLimited`] wraps a model with
//! a requests-per-minute and a tokens-per-minute bucket, and pauses every caller when the
//! provider asks to wait: a model reports a server's `Retry-After` through the [`RetryAfter`]
//! handle its request carries ([`ModelRequest::retry_after`]).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::{Model, ModelError, ModelRequest, ModelResponse};

/// The channel from a model to whoever paces its calls: a model whose provider asked to wait
/// (429 or 503 with `Retry-After`) reports the wait here, and every call sharing the handle
/// waits until then, not only the one that is retrying (which alone would just earn more 429s).
///
/// [`RateLimited`] hands its handle to the model it wraps with every request
/// ([`ModelRequest::retry_after`]); the HTTP [`Transport`](crate::provider::Transport)
/// reports through it, and so can a user's own [`Model`]. Cloning shares the handle.
///
/// ```
/// use std::time::Duration;
/// use subcontract::model::RetryAfter;
///
/// let pause = RetryAfter::new();
/// assert_eq!(pause.remaining(), Duration::ZERO);
/// pause.report(Duration::from_secs(5));
/// pause.report(Duration::from_secs(1)); // a shorter wait never cuts a longer one
/// assert!(pause.remaining() > Duration::from_secs(4));
/// ```
#[derive(Clone, Default)]
pub struct RetryAfter {
    until: Arc<Mutex<Option<Instant>>>,
}

impl std::fmt::Debug for RetryAfter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryAfter")
            .field("remaining", &self.remaining())
            .finish()
    }
}

impl RetryAfter {
    /// A handle with no pause.
    pub fn new() -> Self {
        RetryAfter::default()
    }

    /// Reports that the provider asked callers to wait `wait` from now. A later report
    /// extends the pause; a shorter one never cuts it.
    pub fn report(&self, wait: Duration) {
        let now = Instant::now();
        // A wait too long for the clock is the longest the clock can hold.
        let until = now
            .checked_add(wait)
            .unwrap_or(now + Duration::from_secs(86_400 * 365));
        let mut u = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        if u.is_none_or(|p| p < until) {
            tracing::warn!(
                wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                "provider asked to wait; pausing every call sharing this limit"
            );
            *u = Some(until);
        }
    }

    /// How long callers must still wait (zero when there is no pause).
    pub fn remaining(&self) -> Duration {
        let u = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        u.map_or(Duration::ZERO, |until| {
            until.saturating_duration_since(Instant::now())
        })
    }
}

/// Limits of one model, per minute; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateLimits {
    /// Model calls per minute.
    pub rpm: Option<u32>,
    /// Tokens (input + output) per minute.
    pub tpm: Option<u64>,
}

/// A model whose calls share one token bucket per limit, so that any number of concurrent
/// sub-agents together stay under a provider's limits, and a 429 with `Retry-After` seen by
/// one call pauses all of them until then (retrying alone would just earn more 429s).
///
/// The request bucket holds up to `rpm` calls and refills continuously; the token bucket is
/// charged after each call with its actual usage (the cost of a call is not known before it)
/// and a call starts only when it is not in debt. Cloning shares the buckets.
///
/// ```
/// use std::sync::Arc;
/// use subcontract::model::{RateLimited, RateLimits, ScriptedModel};
///
/// let model = RateLimited::new(
///     Arc::new(ScriptedModel::queue("scripted:demo", vec![])),
///     RateLimits { rpm: Some(600), tpm: None },
/// );
/// # let _ = model;
/// ```
#[derive(Clone)]
pub struct RateLimited {
    inner: Arc<dyn Model>,
    limits: RateLimits,
    state: Arc<Mutex<Buckets>>,
    pause: RetryAfter,
}

impl std::fmt::Debug for RateLimited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimited")
            .field("model", &self.inner.id())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Buckets {
    requests: f64,
    tokens: f64,
    refilled: Instant,
}

fn lock(m: &Mutex<Buckets>) -> MutexGuard<'_, Buckets> {
    // The buckets are plain numbers: a panic elsewhere cannot leave them half-updated.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RateLimited {
    /// Wraps `inner`; both buckets start full.
    pub fn new(inner: Arc<dyn Model>, limits: RateLimits) -> Self {
        let state = Buckets {
            requests: limits.rpm.map_or(0.0, f64::from),
            tokens: limits.tpm.map_or(0.0, |t| t as f64),
            refilled: Instant::now(),
        };
        RateLimited {
            inner,
            limits,
            state: Arc::new(Mutex::new(state)),
            pause: RetryAfter::new(),
        }
    }

    /// Waits until a call may start, and takes one request from the bucket.
    async fn admit(&self) {
        loop {
            let wait = {
                let mut b = lock(&self.state);
                let now = Instant::now();
                let elapsed = now.saturating_duration_since(b.refilled).as_secs_f64();
                b.refilled = now;
                if let Some(rpm) = self.limits.rpm {
                    let cap = f64::from(rpm.max(1));
                    b.requests = (b.requests + elapsed * cap / 60.0).min(cap);
                }
                if let Some(tpm) = self.limits.tpm {
                    let cap = tpm.max(1) as f64;
                    b.tokens = (b.tokens + elapsed * cap / 60.0).min(cap);
                }
                let mut wait = self.pause.remaining();
                if let (Some(rpm), true) = (self.limits.rpm, b.requests < 1.0) {
                    let per_sec = f64::from(rpm.max(1)) / 60.0;
                    wait = wait.max(Duration::from_secs_f64((1.0 - b.requests) / per_sec));
                }
                if let (Some(tpm), true) = (self.limits.tpm, b.tokens < 0.0) {
                    let per_sec = tpm.max(1) as f64 / 60.0;
                    // The debt is capped (see `complete`), so this is at most a minute.
                    wait = wait.max(
                        Duration::try_from_secs_f64(-b.tokens / per_sec)
                            .unwrap_or(Duration::from_secs(60)),
                    );
                }
                if wait.is_zero() {
                    if self.limits.rpm.is_some() {
                        b.requests -= 1.0;
                    }
                    return;
                }
                wait
            };
            tokio::time::sleep(wait).await;
        }
    }
}

#[async_trait]
impl Model for RateLimited {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn prompt_cache(&self) -> Option<crate::model::PromptCache> {
        self.inner.prompt_cache()
    }

    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        self.admit().await;
        let result = self
            .inner
            .complete(request.with_retry_after(&self.pause))
            .await;
        if let (Some(tpm), Ok(r)) = (self.limits.tpm, &result) {
            let used = r.usage.input_tokens.saturating_add(r.usage.output_tokens);
            // A debt of at most one minute's tokens: a provider that reports absurd usage
            // must not stall (or overflow the wait of) every later call.
            let cap = tpm.max(1) as f64;
            let mut s = lock(&self.state);
            s.tokens = (s.tokens - used as f64).max(-cap);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ScriptStep, ScriptedModel, Usage};

    fn model(n: usize, usage: Usage) -> Arc<dyn Model> {
        let steps = (0..n)
            .map(|_| ScriptStep::text("ok").with_usage(usage.input_tokens, usage.output_tokens))
            .collect();
        Arc::new(ScriptedModel::queue("scripted:rate", steps))
    }

    fn request() -> ModelRequest<'static> {
        ModelRequest::new("", &[], &[], 10)
    }

    #[tokio::test(start_paused = true)]
    async fn rpm_spaces_calls_after_the_burst() {
        let m = RateLimited::new(
            model(5, Usage::default()),
            RateLimits {
                rpm: Some(60),
                tpm: None,
            },
        );
        let start = Instant::now();
        for _ in 0..5 {
            m.complete(request()).await.expect("scripted");
        }
        // 60 per minute: a burst of up to 60, so five calls pass at once.
        assert!(start.elapsed() < Duration::from_millis(10));
        let m = RateLimited::new(
            model(4, Usage::default()),
            RateLimits {
                rpm: Some(2),
                tpm: None,
            },
        );
        let start = Instant::now();
        for _ in 0..4 {
            m.complete(request()).await.expect("scripted");
        }
        // Two at once, then one every 30 s.
        let took = start.elapsed();
        assert!(
            took >= Duration::from_secs(59) && took < Duration::from_secs(61),
            "{took:?}"
        );
    }

    /// A provider reporting absurd usage neither panics the next call's wait nor stalls it
    /// for ever: the debt is capped at one minute of tokens.
    #[tokio::test(start_paused = true)]
    async fn absurd_usage_costs_at_most_a_minute_of_waiting() {
        let m = RateLimited::new(
            model(2, Usage::new(u64::MAX, u64::MAX)),
            RateLimits {
                rpm: None,
                tpm: Some(60),
            },
        );
        let start = Instant::now();
        m.complete(request()).await.expect("scripted");
        m.complete(request()).await.expect("scripted");
        let took = start.elapsed();
        assert!(took <= Duration::from_secs(61), "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn tpm_waits_out_a_debt() {
        let m = RateLimited::new(
            model(2, Usage::new(90, 30)),
            RateLimits {
                rpm: None,
                tpm: Some(60),
            },
        );
        let start = Instant::now();
        m.complete(request()).await.expect("scripted");
        // 120 tokens used of a 60-token bucket: 60 in debt, one minute to pay back.
        m.complete(request()).await.expect("scripted");
        let took = start.elapsed();
        assert!(
            took >= Duration::from_secs(59) && took < Duration::from_secs(61),
            "{took:?}"
        );
    }

    /// A model of this crate's user that reports a wait through the request's handle: the
    /// next call through the same limiter waits it out.
    #[tokio::test(start_paused = true)]
    async fn a_retry_after_reported_by_any_model_pauses_every_caller() {
        struct AsksToWait;
        #[async_trait]
        impl Model for AsksToWait {
            fn id(&self) -> &str {
                "mine:waits"
            }
            async fn complete(
                &self,
                request: ModelRequest<'_>,
            ) -> Result<ModelResponse, ModelError> {
                let pause = request.retry_after.expect("RateLimited passes its handle");
                pause.report(Duration::from_secs(7));
                Err(ModelError::Exhausted("429".into()))
            }
        }
        let m = RateLimited::new(Arc::new(AsksToWait), RateLimits::default());
        let start = Instant::now();
        assert!(m.complete(request()).await.is_err());
        assert!(
            start.elapsed() < Duration::from_millis(10),
            "the first call is not held"
        );
        let clone = m.clone();
        let _ = clone.complete(request()).await;
        assert!(
            start.elapsed() >= Duration::from_secs(7),
            "{:?}",
            start.elapsed()
        );
        // Called directly, outside a limiter, a request carries no handle.
        assert!(request().retry_after.is_none());
    }
}
