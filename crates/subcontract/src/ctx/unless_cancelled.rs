//! A future raced against a run's cancellation, the cancellation first, with the wait for it
//! set up only when the future is not done at its first poll: most reservations and many calls
//! are, and a waiter costs a lock on the token's tree to register and again to drop, on every
//! turn's several waits. A hand-written future rather than an `async fn`, which would hold the
//! future twice (its argument and the pinned local): the turn loop's are most of a run's size.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

pin_project_lite::pin_project! {
    /// `fut`'s output, or `None` when `token` is cancelled first; `fut` is never polled, so
    /// never started, once it is.
    pub(crate) struct UnlessCancelled<'a, F> {
        #[pin]
        fut: F,
        #[pin]
        cancelled: Option<WaitForCancellationFuture<'a>>,
        token: &'a CancellationToken,
        polled: bool,
    }
}

impl<'a, F> UnlessCancelled<'a, F> {
    pub(crate) fn new(token: &'a CancellationToken, fut: F) -> Self {
        UnlessCancelled {
            fut,
            cancelled: None,
            token,
            polled: false,
        }
    }
}

impl<F: Future> Future for UnlessCancelled<'_, F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let first = !*this.polled;
        if first {
            *this.polled = true;
            if this.token.is_cancelled() {
                return Poll::Ready(None);
            }
            if let Poll::Ready(out) = this.fut.as_mut().poll(cx) {
                return Poll::Ready(Some(out));
            }
            // Pending: from here on the cancellation is watched, and polled first.
            this.cancelled.set(Some(this.token.cancelled()));
        }
        if let Some(c) = this.cancelled.as_pin_mut() {
            if c.poll(cx).is_ready() {
                return Poll::Ready(None);
            }
        }
        if first {
            // `fut` was polled above and holds this waker.
            return Poll::Pending;
        }
        this.fut.poll(cx).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use tokio_util::sync::CancellationToken;

    use super::UnlessCancelled;

    #[tokio::test]
    async fn a_ready_future_a_pending_one_cancelled_and_one_never_started() {
        let token = CancellationToken::new();
        assert_eq!(UnlessCancelled::new(&token, async { 1 }).await, Some(1));

        // Pending at its first poll, then cancelled: ends with None, promptly.
        let stop = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            stop.cancel();
        });
        // Bounded: a cancellation that was never watched would leave it waiting for ever.
        let waited = UnlessCancelled::new(&token, std::future::pending::<()>());
        let waited = tokio::time::timeout(std::time::Duration::from_secs(5), waited).await;
        assert_eq!(waited, Ok(None), "the cancellation ends the wait");

        // Cancelled before: never polled.
        let started = Arc::new(AtomicBool::new(false));
        let s = started.clone();
        let fut = async move { s.store(true, Ordering::SeqCst) };
        assert_eq!(UnlessCancelled::new(&token, fut).await, None);
        assert!(!started.load(Ordering::SeqCst));
    }
}
