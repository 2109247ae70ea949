//! Ctrl-C, listened for from the moment the listener is made.
//!
//! `tokio::signal::ctrl_c()` installs its handler only when its future is first polled, so a
//! Ctrl-C that lands between spawning a listener task and that task's first poll would kill the
//! process with no outcome reported and no trace flushed. [`Interrupts::new`] installs the
//! handler at once.

/// Ctrl-C presses, from when this was made.
pub struct Interrupts {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Interrupts {
    /// Starts listening now. Call it inside the runtime.
    pub fn new() -> Self {
        Interrupts {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok(),
        }
    }

    /// Waits for the next Ctrl-C; `false` when none can be listened for (the caller then
    /// never sees one).
    pub async fn next(&mut self) -> bool {
        #[cfg(unix)]
        {
            match &mut self.signal {
                Some(s) => s.recv().await.is_some(),
                None => false,
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c().await.is_ok()
        }
    }
}
