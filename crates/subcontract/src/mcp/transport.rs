//! The stdio transport: newline-delimited JSON-RPC over stdin/stdout, with two things rmcp's
//! own stdio transport does not do.
//!
//! * A line over [`MAX_LINE`] bytes is answered, not silently dropped: an Invalid Request error
//!   (`-32600`) whose id is read from the first [`ID_SNIFF`] bytes of the line when the `id`
//!   member comes before any value that does not fit there (as clients write it: `jsonrpc`,
//!   `id`, `method`, then `params`); else the error has no id (as MCP 2026-07-28 says for an
//!   unreadable one). The line itself is never buffered whole.
//! * A request whose params are not even an object is answered as one with malformed params
//!   (Invalid Params for a method this server serves), not as an Invalid Request.
//! * The session ends as soon as the host is gone: stdin at its end, a write to stdout failing,
//!   or (on Unix, where the OS reports it) stdout's reader closing while nothing is being
//!   written. Then [`StdioTransport::closed`] fires, which the server uses to cancel every
//!   in-flight run: nobody is left to read their results, so they must stop spending.

use std::sync::Arc;

use rmcp::model::{CustomRequest, ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::{JsonRpcMessageCodec, JsonRpcMessageCodecError};
use rmcp::transport::Transport;
use rmcp::RoleServer;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::Decoder;
use tokio_util::sync::CancellationToken;

/// Longest line (one JSON-RPC message) read: rmcp's own stdio limit, 16 MiB.
pub const MAX_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// Bytes of an oversized line kept to find its `id`.
const ID_SNIFF: usize = 4096;

/// Newline-delimited JSON-RPC over a reader and a writer (stdin and stdout in the server).
pub struct StdioTransport<R, W> {
    read: BufReader<R>,
    line: Vec<u8>,
    max_line: usize,
    /// Dropping the rest of an oversized line; the first bytes are in `line`.
    discarding: bool,
    write: Arc<Mutex<W>>,
    closed: CancellationToken,
}

/// Outcome of one bounded line read.
enum LineRead {
    /// A whole line is in `line`.
    Line,
    /// The line was over the limit; `line` holds its first bytes.
    Oversized,
    /// The input ended or failed.
    End,
}

impl<R, W> StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// A transport reading `read` and writing `write`, with lines bounded by [`MAX_LINE`].
    pub fn new(read: R, write: W) -> Self {
        Self::with_max_line(read, write, MAX_LINE)
    }

    /// As [`Self::new`], with another line limit.
    pub fn with_max_line(read: R, write: W, max_line: usize) -> Self {
        StdioTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            max_line,
            discarding: false,
            write: Arc::new(Mutex::new(write)),
            closed: CancellationToken::new(),
        }
    }

    /// Fires once the host is gone (input ended, output failed or closed).
    pub fn closed(&self) -> CancellationToken {
        self.closed.clone()
    }

    /// Reads one line into `self.line`, never holding more than `max_line` bytes of it.
    /// Cancel-safe: the service polls `receive` in a `select!`, and a dropped read leaves its
    /// partial line (and discard state) here for the next call, since bytes are copied and
    /// consumed with no await in between.
    async fn read_line(&mut self) -> LineRead {
        loop {
            let available = match self.read.fill_buf().await {
                Ok([]) => return LineRead::End,
                Ok(available) => available,
                Err(e) => {
                    tracing::warn!(error = %e, "reading stdin failed");
                    return LineRead::End;
                }
            };
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let mut done = None;
            if self.discarding {
                if newline.is_some() {
                    self.discarding = false;
                    done = Some(LineRead::Oversized);
                }
            } else if self.line.len() + take > self.max_line {
                // Keep only the head, where the id usually is.
                let room = ID_SNIFF.saturating_sub(self.line.len());
                self.line.truncate(ID_SNIFF);
                self.line
                    .extend_from_slice(&available[..room.min(available.len())]);
                if newline.is_some() {
                    done = Some(LineRead::Oversized);
                } else {
                    self.discarding = true;
                }
            } else {
                self.line.extend_from_slice(&available[..take]);
                if newline.is_some() {
                    done = Some(LineRead::Line);
                }
            }
            self.read.consume(take);
            if let Some(done) = done {
                return done;
            }
        }
    }

    /// Queues a whole-line error reply; written by its own task so that `receive` stays
    /// cancel-safe.
    fn reply_error(&self, error: ErrorData, id: Option<RequestId>) {
        let message: TxJsonRpcMessage<RoleServer> = JsonRpcMessage::error(error, id);
        let send = send_line(self.write.clone(), self.closed.clone(), &message);
        tokio::spawn(async move {
            if let Err(e) = send.await {
                tracing::debug!(error = %e, "error reply not delivered");
            }
        });
    }
}

/// Serialises `message` and writes it as one line; a failed write means the host is gone.
fn send_line<W: AsyncWrite + Unpin + Send + 'static>(
    write: Arc<Mutex<W>>,
    closed: CancellationToken,
    message: &TxJsonRpcMessage<RoleServer>,
) -> impl std::future::Future<Output = std::io::Result<()>> + Send + 'static {
    let line = serde_json::to_vec(message).map(|mut v| {
        v.push(b'\n');
        v
    });
    async move {
        let line = line.map_err(std::io::Error::other)?;
        let mut write = write.lock().await;
        let result = async {
            write.write_all(&line).await?;
            write.flush().await
        }
        .await;
        if result.is_err() {
            closed.cancel();
        }
        result
    }
}

impl<R, W> Transport<RoleServer> for StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        send_line(self.write.clone(), self.closed.clone(), &item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let closed = self.closed.clone();
            let read = tokio::select! {
                biased;
                () = closed.cancelled() => return None,
                read = self.read_line() => read,
            };
            match read {
                LineRead::End => {
                    self.closed.cancel();
                    return None;
                }
                LineRead::Oversized => {
                    let id = sniff_id(&self.line);
                    self.line.clear();
                    tracing::warn!(max_line = self.max_line, ?id, "message over the line limit");
                    self.reply_error(
                        ErrorData::invalid_request(
                            format!(
                                "message longer than {} bytes, the server's limit for one line; \
                                 it was not processed",
                                self.max_line
                            ),
                            None,
                        ),
                        id,
                    );
                }
                LineRead::Line => {
                    // rmcp's codec parses the line (BOM, CRLF, non-MCP notifications ignored).
                    let mut buf = BytesMut::from(&self.line[..]);
                    let parsed = JsonRpcMessageCodec::<RxJsonRpcMessage<RoleServer>>::default()
                        .decode(&mut buf);
                    let line = std::mem::take(&mut self.line);
                    match parsed {
                        Ok(Some(message)) => return Some(message),
                        Ok(None) => {}
                        // Not JSON: there is no id to answer, and answering garbage can start an
                        // error storm with a peer that echoes it (rmcp ignores it too).
                        Err(JsonRpcMessageCodecError::Serde(e)) if e.is_syntax() || e.is_eof() => {
                            tracing::debug!(error = %e, "ignoring a line that is not JSON");
                        }
                        Err(e) => {
                            let value = serde_json::from_slice::<Value>(&line).ok();
                            let field = |k: &str| value.as_ref().and_then(|v| v.get(k));
                            let id: Option<RequestId> =
                                field("id").and_then(|id| serde_json::from_value(id.clone()).ok());
                            // A request whose params are not even an object (`"params": "x"`)
                            // fails here rather than in the handler; it gets the same answer.
                            let error = match field("method").and_then(Value::as_str) {
                                Some(method) if id.is_some() => {
                                    super::server::custom_request_error(&CustomRequest::new(
                                        method,
                                        field("params").cloned(),
                                    ))
                                }
                                _ => ErrorData::invalid_request(
                                    format!("not a JSON-RPC message this server understands: {e}"),
                                    None,
                                ),
                            };
                            self.reply_error(error, id);
                        }
                    }
                    // Keep the buffer's capacity for the next line.
                    self.line = line;
                    self.line.clear();
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut write = self.write.lock().await;
        write.shutdown().await
    }
}

/// The `id` of a JSON-RPC message from the first bytes of its line, if the `id` member comes
/// before anything cut off: the members are read in order and the first `"id"` whose value is
/// a number or string wins.
pub(crate) fn sniff_id(head: &[u8]) -> Option<RequestId> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};

    struct FindId<'a>(&'a mut Option<Value>);
    impl<'de> Visitor<'de> for FindId<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON-RPC message object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key == "id" {
                    *self.0 = Some(map.next_value::<Value>()?);
                    // Stop here: the rest may be cut off, which is fine.
                    return Ok(());
                }
                map.next_value::<IgnoredAny>()?;
            }
            Ok(())
        }
    }

    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let mut found = None;
    // The error after the visitor returns (the object goes on, or is cut off) is expected.
    let _ = serde_json::Deserializer::from_slice(head).deserialize_map(FindId(&mut found));
    match found? {
        id @ (Value::Number(_) | Value::String(_)) => serde_json::from_value(id).ok(),
        _ => None,
    }
}

/// Fires `closed` when stdout's reader goes away, even while nothing is being written (a run
/// waiting on its model writes nothing for minutes). Only where the OS reports it: a pipe on
/// Unix; elsewhere the next failed write does it.
pub(super) fn watch_stdout(closed: CancellationToken) {
    #[cfg(unix)]
    {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        // A thread, not a task: poll blocks, and the process may exit with it still waiting.
        let watch = move || {
            let stdout = std::io::stdout();
            // Wake up now and then to notice a session that ended some other way.
            let tick = Timespec {
                tv_sec: 1,
                tv_nsec: 0,
            };
            while !closed.is_cancelled() {
                // No events asked for: only error and hang-up are reported, which for a pipe
                // means its reader is gone (a file or a terminal never reports them here).
                let mut fds = [PollFd::new(&stdout, PollFlags::empty())];
                match poll(&mut fds, Some(&tick)) {
                    Ok(0) | Err(rustix::io::Errno::INTR) => {}
                    Ok(_) => {
                        if fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP) {
                            tracing::info!("stdout closed by the host");
                            closed.cancel();
                        }
                        return;
                    }
                    Err(_) => return,
                }
            }
        };
        if let Err(e) = std::thread::Builder::new()
            .name("stdout-watch".into())
            .spawn(watch)
        {
            tracing::warn!(error = %e, "cannot watch stdout; a closed stdout is noticed on the next write");
        }
    }
    #[cfg(not(unix))]
    let _ = closed;
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;
    use tokio::io::AsyncReadExt;

    #[test]
    fn ids_are_read_from_the_head_of_a_line() {
        let n = |i| Some(NumberOrString::Number(i));
        assert_eq!(
            sniff_id(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"#),
            n(7)
        );
        assert_eq!(
            sniff_id(br#"{"id":"a-1","params":{"x":"cut"#),
            Some(NumberOrString::String("a-1".into()))
        );
        // The id after a value cut off, a null or object id, or no object at all: unreadable.
        assert_eq!(sniff_id(br#"{"params":{"x":"cut off"#), None);
        assert_eq!(sniff_id(br#"{"id":null,"method":"x"}"#), None);
        assert_eq!(sniff_id(br#"{"id":{"a":1}}"#), None);
        assert_eq!(sniff_id(b"[1,2"), None);
        assert_eq!(sniff_id(b""), None);
        // Complete small members before the id are skipped.
        assert_eq!(
            sniff_id(br#"{"jsonrpc":"2.0","method":"m","id":3,"params":[1,"#),
            n(3)
        );
    }

    #[tokio::test]
    async fn an_oversized_line_is_answered_and_the_next_one_read() {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server);
        let mut transport = StdioTransport::with_max_line(read, write, 100);
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{{\"x\":\"{}\"}}}}\n",
            "y".repeat(500)
        );
        let ping = "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\"}\n";
        let writer = tokio::spawn(async move {
            client.write_all(big.as_bytes()).await.unwrap();
            client.write_all(ping.as_bytes()).await.unwrap();
            let mut reply = vec![0u8; 4096];
            let n = client.read(&mut reply).await.unwrap();
            (client, String::from_utf8_lossy(&reply[..n]).into_owned())
        });
        let next = transport
            .receive()
            .await
            .expect("the ping after the big line");
        let JsonRpcMessage::Request(request) = next else {
            panic!("{next:?}")
        };
        assert_eq!(request.id, NumberOrString::Number(10));
        let (_client, reply) = writer.await.unwrap();
        let reply: Value = serde_json::from_str(reply.trim()).unwrap();
        assert_eq!(reply["id"], 9, "{reply}");
        assert_eq!(reply["error"]["code"], -32600, "{reply}");
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("longer than 100 bytes"),
            "{reply}"
        );
    }
}
