//! When a run must answer by, for the sub-agents it starts (see `run::reserve`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

/// What a figure holds before the run published one.
const UNSET: u64 = u64::MAX;

/// When a run must answer by, published for its sub-agents, and its slowest model call so far.
///
/// Written by the run as it goes (after a model call that changed them) and read by each
/// sub-agent it starts, so both sides are atomics, not a lock: the instants are kept as
/// nanoseconds after the run's start, which is set once. The two figures are read apart; a
/// reader that sees one of them a call old has an estimate a call old, which is all they are.
#[derive(Debug)]
pub(crate) struct RunClock {
    start: OnceLock<Instant>,
    answer_by: AtomicU64,
    slowest: AtomicU64,
}

impl Default for RunClock {
    fn default() -> Self {
        RunClock {
            start: OnceLock::new(),
            answer_by: AtomicU64::new(UNSET),
            slowest: AtomicU64::new(0),
        }
    }
}

impl RunClock {
    /// Sets the run's start, from which the published instants are counted (the first call
    /// sets it).
    pub(crate) fn start(&self, at: Instant) {
        let _ = self.start.set(at);
    }

    /// Publishes when the run must answer by and its slowest call. An instant before the
    /// run's start is published as its start (both are past: the run must answer now); before
    /// [`start`](Self::start), nothing is.
    pub(crate) fn publish(&self, answer_by: Instant, slowest: Duration) {
        let Some(start) = self.start.get() else {
            return;
        };
        self.slowest.store(nanos(slowest), Ordering::Relaxed);
        let by = nanos(answer_by.saturating_duration_since(*start));
        self.answer_by.store(by, Ordering::Release);
    }

    /// When the run must answer by and its slowest call, if it published them.
    pub(crate) fn read(&self) -> Option<(Instant, Duration)> {
        let by = self.answer_by.load(Ordering::Acquire);
        if by == UNSET {
            return None;
        }
        // An instant past what an `Instant` holds bounds nothing.
        let by = self.start.get()?.checked_add(Duration::from_nanos(by))?;
        let slowest = Duration::from_nanos(self.slowest.load(Ordering::Relaxed));
        Some((by, slowest))
    }
}

/// `d` in nanoseconds, saturating below [`UNSET`] (585 years).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).map_or(UNSET - 1, |n| n.min(UNSET - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_what_was_published_after_the_start() {
        let c = RunClock::default();
        let t0 = Instant::now();
        c.publish(t0 + Duration::from_secs(5), Duration::from_millis(3));
        assert_eq!(c.read(), None, "nothing is published before the start");
        c.start(t0);
        assert_eq!(c.read(), None);
        let by = t0 + Duration::from_millis(1500);
        c.publish(by, Duration::from_millis(7));
        assert_eq!(c.read(), Some((by, Duration::from_millis(7))));
        // An earlier answer time (a slower call) replaces the later one.
        let sooner = t0 + Duration::from_millis(900);
        c.publish(sooner, Duration::from_millis(9));
        assert_eq!(c.read(), Some((sooner, Duration::from_millis(9))));
        // Past the start's other side: the start itself, which is as past as it.
        c.start(t0 + Duration::from_secs(1));
        c.publish(
            t0.checked_sub(Duration::from_secs(1)).unwrap_or(t0),
            Duration::ZERO,
        );
        assert_eq!(c.read(), Some((t0, Duration::ZERO)));
        // Far beyond any run: saturated, never a panic.
        c.publish(t0 + Duration::from_secs(86_400 * 365 * 600), Duration::MAX);
        let (by, slowest) = c.read().expect("published");
        assert!(by > t0 + Duration::from_secs(86_400 * 365 * 500));
        assert!(slowest > Duration::from_secs(86_400 * 365 * 500));
    }
}
