//! A stdio server's session transport: rmcp's line transport over the child's pipes, with each
//! line the server writes capped. rmcp drops a line past its cap and waits on, so a call whose
//! answer was that line would wait for its timeout; here the line ends the session at once, the
//! call is an error result saying why, and the server is started again for the next call.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use rmcp::RoleClient;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// The longest line (one JSON-RPC message) a stdio server may write: rmcp's own bound.
pub(super) const MAX_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// How long a server gets to exit after its stdin closes before it is killed (the MCP
/// lifecycle's shutdown: close the input, wait, then kill).
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// A running stdio server as an rmcp transport. The child is killed when this is dropped.
pub(super) struct ChildTransport {
    child: Child,
    inner: AsyncRwTransport<RoleClient, Capped<ChildStdout>, ChildStdin>,
}

impl ChildTransport {
    /// The transport over `child`'s pipes (spawned with stdin and stdout piped and
    /// `kill_on_drop`); `over` is set when the server writes a line past [`MAX_LINE`].
    pub(super) fn new(mut child: Child, over: Arc<AtomicBool>) -> io::Result<Self> {
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(io::Error::other(
                "the server's stdin or stdout is not a pipe",
            ));
        };
        let read = Capped {
            inner: stdout,
            line: 0,
            over,
        };
        // Ours binds first: rmcp's cap would drop the line and wait on.
        let inner = AsyncRwTransport::new(read, stdin).with_max_line_length(MAX_LINE + 2);
        Ok(ChildTransport { child, inner })
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(
        &mut self,
    ) -> impl std::future::Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.inner.receive()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let closed = self.inner.close().await;
        if tokio::time::timeout(EXIT_GRACE, self.child.wait())
            .await
            .is_err()
        {
            // Killed, or gone meanwhile: either way it no longer runs.
            let _ = self.child.kill().await;
        }
        closed
    }
}

/// The server's stdout, failing the read that takes a line past [`MAX_LINE`] bytes: the
/// transport then ends, and every call waiting on it is answered at once.
struct Capped<R> {
    inner: R,
    /// Bytes since the last newline.
    line: usize,
    over: Arc<AtomicBool>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Capped<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        for (i, part) in buf.filled()[before..].split(|b| *b == b'\n').enumerate() {
            // The first part goes on the line before it; each later one starts a line.
            this.line = if i == 0 { this.line } else { 0 } + part.len();
            if this.line > MAX_LINE {
                this.over.store(true, Ordering::Release);
                // A read that fails hands over nothing.
                buf.set_filled(before);
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a message line over {} MiB", MAX_LINE >> 20),
                )));
            }
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use tokio::io::AsyncReadExt;

    use super::{Capped, MAX_LINE};

    async fn read_all(bytes: Vec<u8>) -> (std::io::Result<usize>, bool) {
        let over = Arc::new(AtomicBool::new(false));
        let mut r = Capped {
            inner: std::io::Cursor::new(bytes),
            line: 0,
            over: over.clone(),
        };
        let mut sink = Vec::new();
        let n = r.read_to_end(&mut sink).await;
        (n, over.load(Ordering::Acquire))
    }

    #[tokio::test]
    async fn lines_up_to_the_cap_pass_and_one_past_it_fails() {
        let mut at_cap = vec![b'x'; MAX_LINE];
        at_cap.push(b'\n');
        at_cap.extend_from_slice(&vec![b'y'; MAX_LINE]);
        let (n, over) = read_all(at_cap).await;
        assert_eq!(n.unwrap(), 2 * MAX_LINE + 1);
        assert!(!over);

        // Past the cap across many reads, with short lines before it.
        let mut past = b"{}\n{}\n".to_vec();
        past.extend_from_slice(&vec![b'z'; MAX_LINE + 1]);
        let (n, over) = read_all(past).await;
        let e = n.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("16 MiB"), "{e}");
        assert!(over);
    }
}
