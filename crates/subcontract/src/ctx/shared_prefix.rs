//! Siblings of one spec started by one model response share one prompt-cache write: the
//! first of them to call its model goes ahead, and the others make their first call once
//! that one has been answered, so they read the tools and system prompt it wrote instead of
//! each writing them again (a provider's cache entry is readable only once the response
//! writing it has begun; a whole answer is the first moment that is known without streaming).
//!
//! On by default where the calls are cached
//! ([`CtxBuilder::share_fanout_prefix`](crate::CtxBuilder::share_fanout_prefix)): the
//! siblings after the first wait one model call, which the measurement in BENCHMARKS.md ("Prompt caching") weighs
//! against what it saves.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

/// One fan-out's siblings of one spec.
#[derive(Debug)]
pub(crate) struct SharedPrefix {
    claimed: AtomicBool,
    open: watch::Sender<bool>,
}

/// Held by the first sibling over its first model call; dropping it (answered, failed or
/// cancelled) lets the others go.
pub(crate) struct Opener(Arc<SharedPrefix>);

impl Drop for Opener {
    fn drop(&mut self) {
        self.0.open.send_replace(true);
    }
}

impl SharedPrefix {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(SharedPrefix {
            claimed: AtomicBool::new(false),
            open: watch::channel(false).0,
        })
    }

    /// Before a sibling's first model call: the first gets the [`Opener`]; every later one
    /// waits until the first's call is over. A sibling that never calls its model claims
    /// nothing, so no one waits for it.
    pub(crate) async fn enter(self: &Arc<Self>) -> Option<Opener> {
        if !self.claimed.swap(true, Ordering::AcqRel) {
            return Some(Opener(self.clone()));
        }
        let mut open = self.open.subscribe();
        // The sender lives in `self`, which this borrow keeps: `wait_for` ends only when the
        // first call is over.
        let _ = open.wait_for(|o| *o).await;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn the_first_goes_and_the_others_wait_for_its_call() {
        let share = SharedPrefix::new();
        let first = share.enter().await;
        assert!(first.is_some());
        let waiting = tokio::spawn({
            let share = share.clone();
            async move { share.enter().await.is_none() }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            !waiting.is_finished(),
            "a sibling waits while the first call runs"
        );
        drop(first);
        assert!(waiting.await.expect("joined"));
        // Once open, later siblings go at once.
        assert!(share.enter().await.is_none());
    }
}
