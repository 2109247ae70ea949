//! When a run must answer by, for the sub-agents it starts (see `run::reserve`).

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// When a run must answer by, published for its sub-agents, and its slowest model call so far.
#[derive(Debug, Default)]
pub(crate) struct RunClock {
    published: Mutex<Option<(Instant, Duration)>>,
}

impl RunClock {
    pub(crate) fn publish(&self, answer_by: Instant, slowest: Duration) {
        *self.published.lock().unwrap_or_else(|p| p.into_inner()) = Some((answer_by, slowest));
    }

    pub(crate) fn read(&self) -> Option<(Instant, Duration)> {
        *self.published.lock().unwrap_or_else(|p| p.into_inner())
    }
}
