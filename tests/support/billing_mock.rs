//! Billing mocks: local HTTP servers speaking Anthropic Messages and OpenAI Chat Completions
//! that implement the providers' documented prompt-cache rules, count tokens
//! deterministically, report usage the way each provider does, and keep a bill.
//!
//! Shared by the integration tests (`tests/it/prompt_cache.rs`) and the benchmark
//! (`examples/bench_cache.rs`, which can also serve a mock to other frameworks); both include
//! this one file.
//!
//! Tokens: a block (or, on OpenAI, the prompt's text) of `n` bytes is `ceil(n / 4)` tokens.
//!
//! **Anthropic** (`POST /v1/messages`), as its prompt-caching guide describes:
//! - The prompt is a sequence of blocks in the order tools → system → messages; a block with
//!   `cache_control` is a breakpoint, and its cache entry holds every block up to it.
//! - Automatic caching: a top-level `cache_control` is a breakpoint on the last block.
//! - At most 4 breakpoints: a 5th is answered 400. `type` must be `ephemeral`, `ttl` `5m` or
//!   `1h`, and a `1h` breakpoint may not follow a `5m` one.
//! - A read: for each breakpoint, the 20 block boundaries ending at it are checked for an
//!   entry, and the longest prefix found is read (`cache_read_input_tokens`); reading
//!   refreshes its TTL.
//! - A write: every breakpoint past the read whose prefix has at least the model's minimum
//!   (1,024 tokens here) is written (`cache_creation_input_tokens`, split by TTL in
//!   `cache_creation`); shorter prefixes are not cached and cost plain input.
//! - An entry is readable only once the response that writes it has begun (after the mock's
//!   time to first token); a request arriving before that misses and writes again.
//! - Entries live 5 minutes (or 1 hour) after their last use.
//! - Billed: input at the input price, reads at 0.1×, 5-minute writes at 1.25×, 1-hour
//!   writes at 2× (the prices are the mock's own, [`Rates`]).
//!
//! **OpenAI** (`POST /chat/completions`), as its prompt-caching guide describes:
//! - Automatic: a prompt of 1,024 tokens or more is cached in prefixes of 1,024 tokens and
//!   then 128-token steps; `prompt_tokens_details.cached_tokens` is the longest cached step.
//! - Routed: requests go to a cache by a hash of the first 256 tokens combined with
//!   `prompt_cache_key`; a prefix cached under one key is not found under another.
//! - Readable once the writing response has begun; 5 minutes after last use.
//! - Billed: uncached input at the input price, cached tokens at the cached price; no write
//!   premium.
//!
//! Both answer `stream: true` with the provider's server-sent events: the first after the time
//! to first token, the rest (and the bill's line) once the answer is done.
//!
//! Not modelled: OpenAI's overflow to other machines past ~15 requests a minute per key, the
//! 24-hour retention option, images and documents.

#![allow(dead_code)] // Each includer uses its own part of it.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The largest request body read (past it, the connection is closed unanswered).
const MAX_BODY: usize = 32 << 20;

/// Which provider a mock speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Anthropic Messages: explicit `cache_control` breakpoints.
    Anthropic,
    /// OpenAI Chat Completions: automatic prefix caching, routed by `prompt_cache_key`.
    OpenAi,
}

/// USD per million tokens, as the mock bills them.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    /// Uncached input.
    pub input: Decimal,
    /// Output.
    pub output: Decimal,
    /// Input read from the cache.
    pub cache_read: Decimal,
    /// Input written to the cache with a 5-minute TTL (OpenAI: the input price).
    pub cache_write_5m: Decimal,
    /// Input written with a 1-hour TTL.
    pub cache_write_1h: Decimal,
}

impl Rates {
    /// The rates of the model the scenarios use on `api`.
    pub fn of(api: Api) -> Rates {
        match api {
            Api::Anthropic => Rates::sonnet_4_5(),
            Api::OpenAi => Rates::gpt_4_1(),
        }
    }

    /// Claude Sonnet 4.5's list prices: 3 / 15, reads 0.30, writes 3.75 (5 min) and 6 (1 h).
    pub fn sonnet_4_5() -> Rates {
        Rates {
            input: Decimal::new(3, 0),
            output: Decimal::new(15, 0),
            cache_read: Decimal::new(30, 2),
            cache_write_5m: Decimal::new(375, 2),
            cache_write_1h: Decimal::new(6, 0),
        }
    }

    /// GPT-4.1's list prices: 2 / 8, cached input 0.50.
    pub fn gpt_4_1() -> Rates {
        Rates {
            input: Decimal::new(2, 0),
            output: Decimal::new(8, 0),
            cache_read: Decimal::new(50, 2),
            cache_write_5m: Decimal::new(2, 0),
            cache_write_1h: Decimal::new(2, 0),
        }
    }
}

/// How long the mock takes to answer: the response begins (and its cache writes become
/// readable) after `first_token`, and is sent whole after `first_token + rest`.
#[derive(Debug, Clone, Copy)]
pub struct Latency {
    /// Until the response begins.
    pub first_token: Duration,
    /// From then until it is sent.
    pub rest: Duration,
}

impl Latency {
    /// No delay at all.
    pub const ZERO: Latency = Latency {
        first_token: Duration::ZERO,
        rest: Duration::ZERO,
    };
}

/// What the scripted model is shown of a request, the same for both APIs.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The system prompt's text (blocks joined).
    pub system: String,
    /// The first user message's text.
    pub first_user: String,
    /// Assistant messages so far (0 on the first turn).
    pub assistant_turns: usize,
    /// The tools offered, by name, in order.
    pub tools: Vec<String>,
    /// The results of the tool calls answered in the last message, in order.
    pub last_results: Vec<String>,
}

/// What the scripted model answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A text answer.
    Text(String),
    /// Tool calls: `(name, arguments)`.
    Calls(Vec<(String, Value)>),
}

/// A scripted model: what to answer to a request.
pub type Script = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// Token counts of one answered call, as the mock counted them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counted {
    /// Input neither read from nor written to the cache.
    pub uncached: u64,
    /// Input read from the cache.
    pub read: u64,
    /// Input written with a 5-minute TTL.
    pub written_5m: u64,
    /// Input written with a 1-hour TTL.
    pub written_1h: u64,
    /// Output.
    pub output: u64,
}

impl Counted {
    /// All input tokens.
    pub fn input(&self) -> u64 {
        self.uncached + self.read + self.written_5m + self.written_1h
    }
}

/// One line of the bill.
#[derive(Debug, Clone)]
pub struct Billed {
    /// The tokens.
    pub tokens: Counted,
    /// What the call cost.
    pub usd: Decimal,
    /// What it would have cost with no cache (all input at the input price).
    pub uncached_usd: Decimal,
}

/// A request as received: its exact bytes, for byte-stability checks.
#[derive(Debug, Clone)]
pub struct Received {
    /// The request body, byte for byte.
    pub body: Vec<u8>,
    /// The body, parsed.
    pub json: Value,
    /// The HTTP status answered.
    pub status: u16,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The prefix's tokens.
    tokens: u64,
    /// When the response writing it began.
    readable_at: Instant,
    /// After this, gone (refreshed by each read).
    expires_at: Instant,
    ttl: Duration,
}

#[derive(Default)]
struct State {
    entries: HashMap<u64, Entry>,
    bill: Vec<Billed>,
    received: Vec<Received>,
    /// Added to the clock: a test ages the cache without waiting.
    skew: Duration,
}

struct Shared {
    api: Api,
    rates: Rates,
    latency: Latency,
    /// Anthropic's minimum cacheable prefix, in tokens.
    min_tokens: u64,
    script: Script,
    state: Mutex<State>,
    ids: AtomicU64,
}

impl Shared {
    fn now(&self) -> Instant {
        Instant::now() + self.lock().skew
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere does not make the bill unreadable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running billing mock; it stops when the runtime that started it does.
#[derive(Clone)]
pub struct BillingMock {
    base: String,
    shared: Arc<Shared>,
}

impl BillingMock {
    /// Starts a mock of `api` on a free local port, billing at `rates`, answering after
    /// `latency` with what `script` says.
    pub async fn start(api: Api, rates: Rates, latency: Latency, script: Script) -> BillingMock {
        Self::start_on("127.0.0.1:0", api, rates, latency, script)
            .await
            .expect("bind a local port")
    }

    /// As [`start`](Self::start), on `addr`.
    pub async fn start_on(
        addr: &str,
        api: Api,
        rates: Rates,
        latency: Latency,
        script: Script,
    ) -> std::io::Result<BillingMock> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            api,
            rates,
            latency,
            min_tokens: 1024,
            script,
            state: Mutex::default(),
            ids: AtomicU64::new(0),
        });
        let serving = shared.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, serving.clone()));
            }
        });
        let base = match api {
            // Anthropic's base URL is the root; OpenAI's includes `/v1`.
            Api::Anthropic => format!("http://{addr}"),
            Api::OpenAi => format!("http://{addr}/v1"),
        };
        Ok(BillingMock { base, shared })
    }

    /// The base URL to configure a provider with.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Every answered call, in the order answered.
    pub fn bill(&self) -> Vec<Billed> {
        self.shared.lock().bill.clone()
    }

    /// The bill's total and what it would have been with no cache.
    pub fn totals(&self) -> (Decimal, Decimal) {
        self.bill()
            .iter()
            .fold((Decimal::ZERO, Decimal::ZERO), |(a, b), l| {
                (a + l.usd, b + l.uncached_usd)
            })
    }

    /// Every request received, answered or refused.
    pub fn received(&self) -> Vec<Received> {
        self.shared.lock().received.clone()
    }

    /// Ages every cache entry by `by`, as if that much time had passed.
    pub fn advance(&self, by: Duration) {
        self.shared.lock().skew += by;
    }

    /// Forgets the cache, the bill and the requests.
    pub fn reset(&self) {
        *self.shared.lock() = State::default();
    }
}

/// The bill as JSON (`GET /_mock/bill`), for a client in another process.
fn bill_json(shared: &Shared) -> Value {
    let st = shared.lock();
    let lines: Vec<Value> = st
        .bill
        .iter()
        .map(|l| {
            json!({
                "uncached": l.tokens.uncached, "read": l.tokens.read,
                "written_5m": l.tokens.written_5m, "written_1h": l.tokens.written_1h,
                "output": l.tokens.output,
                "usd": l.usd.to_string(), "uncached_usd": l.uncached_usd.to_string(),
            })
        })
        .collect();
    let usd: Decimal = st.bill.iter().map(|l| l.usd).sum();
    let uncached: Decimal = st.bill.iter().map(|l| l.uncached_usd).sum();
    json!({"calls": lines, "usd": usd.to_string(), "uncached_usd": uncached.to_string()})
}

async fn serve(mut socket: TcpStream, shared: Arc<Shared>) {
    let Some((method, path, body)) = read_request(&mut socket).await else {
        return;
    };
    let handler: fn(&Shared, &Value, Instant) -> Handled = match (method.as_str(), path.as_str()) {
        ("GET", "/_mock/bill") => return reply(&mut socket, 200, &bill_json(&shared)).await,
        ("POST", "/_mock/reset") => {
            *shared.lock() = State::default();
            return reply(&mut socket, 200, &json!({})).await;
        }
        ("POST", "/v1/messages") if shared.api == Api::Anthropic => anthropic,
        ("POST", "/v1/chat/completions") if shared.api == Api::OpenAi => openai,
        _ => {
            let e = error(shared.api, "not_found_error", "no such route");
            return reply(&mut socket, 404, &e).await;
        }
    };
    let t0 = shared.now();
    let request = serde_json::from_slice::<Value>(&body);
    let handled = match &request {
        Ok(v) => handler(&shared, v, t0),
        Err(e) => Err((
            400,
            error(shared.api, "invalid_request_error", &format!("body: {e}")),
        )),
    };
    let stream = request.as_ref().is_ok_and(|v| v["stream"] == true);
    shared.lock().received.push(Received {
        body: body.clone(),
        json: request.unwrap_or(Value::Null),
        status: handled.as_ref().map_or_else(|(s, _)| *s, |_| 200),
    });
    let (answer, billed) = match handled {
        Ok(done) => done,
        Err((status, e)) => return reply(&mut socket, status, &e).await,
    };
    let latency = shared.latency;
    if stream {
        // The response begins (its first event) after the time to first token, and ends after
        // the rest.
        let events = match shared.api {
            Api::Anthropic => anthropic_events(&answer),
            Api::OpenAi => openai_events(&answer),
        };
        tokio::time::sleep(latency.first_token).await;
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        let _ = socket.write_all(head.as_bytes()).await;
        let _ = socket.write_all(events[0].as_bytes()).await;
        let _ = socket.flush().await;
        tokio::time::sleep(latency.rest).await;
        shared.lock().bill.push(billed);
        for e in &events[1..] {
            let _ = socket.write_all(e.as_bytes()).await;
        }
        let _ = socket.shutdown().await;
    } else {
        tokio::time::sleep(latency.first_token + latency.rest).await;
        shared.lock().bill.push(billed);
        reply(&mut socket, 200, &answer).await;
    }
}

async fn reply(socket: &mut TcpStream, status: u16, answer: &Value) {
    let text = answer.to_string();
    let head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        text.len()
    );
    let _ = socket.write_all(head.as_bytes()).await;
    let _ = socket.write_all(text.as_bytes()).await;
    let _ = socket.shutdown().await;
}

fn sse(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(e) => format!("event: {e}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// A Messages answer as its stream of events (`stream: true`).
fn anthropic_events(answer: &Value) -> Vec<String> {
    let mut start = answer.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    let usage = answer["usage"].clone();
    start["usage"]["output_tokens"] = json!(0);
    let mut out = vec![sse(
        Some("message_start"),
        &json!({"type": "message_start", "message": start}),
    )];
    for (i, block) in answer["content"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let (empty, delta) = if block["type"] == "tool_use" {
            (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            )
        } else {
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block["text"]}),
            )
        };
        out.push(sse(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": i, "content_block": empty}),
        ));
        out.push(sse(
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": i, "delta": delta}),
        ));
        out.push(sse(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": i}),
        ));
    }
    out.push(sse(
        Some("message_delta"),
        &json!({"type": "message_delta", "delta": {"stop_reason": answer["stop_reason"], "stop_sequence": null},
                "usage": {"output_tokens": usage["output_tokens"]}}),
    ));
    out.push(sse(Some("message_stop"), &json!({"type": "message_stop"})));
    out
}

/// A Chat Completions answer as its stream of chunks, usage last (`stream: true`).
fn openai_events(answer: &Value) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": answer["id"], "object": "chat.completion.chunk", "created": 0, "model": answer["model"],
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let message = &answer["choices"][0]["message"];
    let mut delta = json!({"role": "assistant", "content": message["content"]});
    if let Some(calls) = message["tool_calls"].as_array() {
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, c)| json!({"index": i, "id": c["id"], "type": "function", "function": c["function"]}))
            .collect();
        delta["tool_calls"] = Value::Array(calls);
    }
    let mut last = chunk(json!({}), answer["choices"][0]["finish_reason"].clone());
    last["usage"] = answer["usage"].clone();
    vec![
        sse(None, &chunk(delta, Value::Null)),
        sse(None, &last),
        "data: [DONE]\n\n".to_string(),
    ]
}

/// What a provider's handler decided: the answer and its bill line, or a refusal.
type Handled = Result<(Value, Billed), (u16, Value)>;

fn error(api: Api, kind: &str, message: &str) -> Value {
    match api {
        Api::Anthropic => {
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        Api::OpenAi => json!({"error": {"type": kind, "message": message, "code": null}}),
    }
}

fn tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

fn usd(tokens: u64, per_mtok: Decimal) -> Decimal {
    Decimal::from(tokens) * per_mtok / Decimal::from(1_000_000u64)
}

fn bill(rates: &Rates, t: Counted) -> Billed {
    Billed {
        tokens: t,
        usd: usd(t.uncached, rates.input)
            + usd(t.read, rates.cache_read)
            + usd(t.written_5m, rates.cache_write_5m)
            + usd(t.written_1h, rates.cache_write_1h)
            + usd(t.output, rates.output),
        uncached_usd: usd(t.input(), rates.input) + usd(t.output, rates.output),
    }
}

fn chain(h: u64, bytes: &[u8]) -> u64 {
    let mut s = DefaultHasher::new();
    h.hash(&mut s);
    bytes.hash(&mut s);
    s.finish()
}

/// A block's text with its `cache_control` taken out (the cache's key ignores the markers),
/// and the breakpoint's TTL, if it is one.
fn unmark(block: &Value, role: &str) -> Result<(Vec<u8>, Option<Duration>), String> {
    let mut b = block.clone();
    let ttl = match b.as_object_mut().and_then(|o| o.remove("cache_control")) {
        None => None,
        Some(c) => {
            if c["type"] != "ephemeral" {
                return Err(format!(
                    "cache_control.type: expected `ephemeral`, got {}",
                    c["type"]
                ));
            }
            Some(match c.get("ttl").and_then(Value::as_str) {
                None | Some("5m") => Duration::from_secs(300),
                Some("1h") => Duration::from_secs(3600),
                Some(other) => {
                    return Err(format!("cache_control.ttl: `{other}` is not `5m` or `1h`"))
                }
            })
        }
    };
    let mut bytes = role.as_bytes().to_vec();
    bytes.push(b':');
    bytes.extend(serde_json::to_vec(&b).map_err(|e| e.to_string())?);
    Ok((bytes, ttl))
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn anthropic(shared: &Shared, req: &Value, t0: Instant) -> Handled {
    let bad = |m: String| (400, error(Api::Anthropic, "invalid_request_error", &m));
    let model = req["model"]
        .as_str()
        .ok_or_else(|| bad("model: required".into()))?;
    let messages = req["messages"]
        .as_array()
        .ok_or_else(|| bad("messages: required".into()))?;
    // The prompt as blocks, in cache order.
    let mut blocks: Vec<(Vec<u8>, Option<Duration>)> = Vec::new();
    for t in req["tools"].as_array().into_iter().flatten() {
        blocks.push(unmark(t, "tool").map_err(bad)?);
    }
    match &req["system"] {
        Value::Null => {}
        Value::String(s) => {
            blocks.push(unmark(&json!({"type": "text", "text": s}), "system").map_err(bad)?)
        }
        Value::Array(bs) => {
            for b in bs {
                blocks.push(unmark(b, "system").map_err(bad)?);
            }
        }
        _ => return Err(bad("system: a string or blocks".into())),
    }
    for m in messages {
        let role = m["role"].as_str().unwrap_or("?");
        match &m["content"] {
            Value::String(s) => {
                blocks.push(unmark(&json!({"type": "text", "text": s}), role).map_err(bad)?)
            }
            Value::Array(bs) => {
                for b in bs {
                    blocks.push(unmark(b, role).map_err(bad)?);
                }
            }
            _ => return Err(bad("messages.content: a string or blocks".into())),
        }
    }
    // Automatic caching: a top-level `cache_control` puts a breakpoint on the last block,
    // one of the four.
    if let Some(c) = req.get("cache_control").filter(|c| !c.is_null()) {
        let (_, ttl) = unmark(&json!({"cache_control": c}), "").map_err(bad)?;
        if let Some(last) = blocks.last_mut().filter(|b| b.1.is_none()) {
            last.1 = ttl;
        }
    }
    let breakpoints: Vec<usize> = (0..blocks.len())
        .filter(|&i| blocks[i].1.is_some())
        .collect();
    if breakpoints.len() > 4 {
        return Err(bad(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {}.",
            breakpoints.len()
        )));
    }
    if breakpoints
        .windows(2)
        .any(|w| blocks[w[0]].1 < blocks[w[1]].1)
    {
        return Err(bad(
            "a ttl='1h' cache_control block must come before any ttl='5m' one".into(),
        ));
    }
    // Prefix tokens and keys, block by block (the model is part of every key).
    let mut cum = Vec::with_capacity(blocks.len());
    let mut keys = Vec::with_capacity(blocks.len());
    let (mut total, mut h) = (0u64, chain(0, model.as_bytes()));
    for (bytes, _) in &blocks {
        total += tokens(bytes.len());
        h = chain(h, bytes);
        cum.push(total);
        keys.push(h);
    }
    let mut st = shared.lock();
    let live = |e: &Entry| e.readable_at <= t0 && e.expires_at > t0;
    // The read: the longest entry within 20 boundaries of a breakpoint.
    let hit = breakpoints
        .iter()
        .flat_map(|&b| (b.saturating_sub(19)..=b).rev())
        .filter(|&p| st.entries.get(&keys[p]).is_some_and(live))
        .max();
    let read = hit.map_or(0, |p| cum[p]);
    if let Some(p) = hit {
        let e = st.entries.get_mut(&keys[p]).expect("just found");
        e.expires_at = t0 + e.ttl;
    }
    // The writes: every breakpoint past the read, long enough to cache.
    let (mut w5, mut w1, mut from) = (0u64, 0u64, read);
    for &b in breakpoints.iter().filter(|&&b| hit.is_none_or(|p| b > p)) {
        if cum[b] < shared.min_tokens {
            continue;
        }
        let ttl = blocks[b].1.expect("a breakpoint");
        let readable_at = t0 + shared.latency.first_token;
        let e = st.entries.entry(keys[b]).or_insert(Entry {
            tokens: cum[b],
            readable_at,
            expires_at: t0 + ttl,
            ttl,
        });
        e.readable_at = e.readable_at.min(readable_at);
        e.expires_at = e.expires_at.max(t0 + ttl);
        let seg = cum[b] - from;
        from = cum[b];
        if ttl > Duration::from_secs(300) {
            w1 += seg;
        } else {
            w5 += seg;
        }
    }
    drop(st);
    // The scripted answer.
    let mut last_results = Vec::new();
    if let Some(last) = messages.last().filter(|m| m["role"] == "user") {
        for b in last["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_result" {
                last_results.push(text_of(&b["content"]));
            }
        }
    }
    let seen = Seen {
        system: text_of(&req["system"]),
        first_user: messages
            .first()
            .map(|m| text_of(&m["content"]))
            .unwrap_or_default(),
        assistant_turns: messages.iter().filter(|m| m["role"] == "assistant").count(),
        tools: req["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(String::from))
            .collect(),
        last_results,
    };
    let (content, stop) = match (shared.script)(&seen) {
        Reply::Text(t) => (json!([{"type": "text", "text": t}]), "end_turn"),
        Reply::Calls(calls) => (
            Value::Array(
                calls
                    .into_iter()
                    .map(|(name, input)| {
                        let id = shared.ids.fetch_add(1, Ordering::Relaxed);
                        json!({"type": "tool_use", "id": format!("toolu_{id:04}"), "name": name, "input": input})
                    })
                    .collect(),
            ),
            "tool_use",
        ),
    };
    let counted = Counted {
        uncached: total - read - w5 - w1,
        read,
        written_5m: w5,
        written_1h: w1,
        output: tokens(content.to_string().len()).max(1),
    };
    let answer = json!({
        "id": format!("msg_{}", shared.ids.fetch_add(1, Ordering::Relaxed)),
        "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {
            "input_tokens": counted.uncached,
            "cache_creation_input_tokens": w5 + w1,
            "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": w5, "ephemeral_1h_input_tokens": w1},
            "output_tokens": counted.output,
        }
    });
    Ok((answer, bill(&shared.rates, counted)))
}

/// OpenAI's cache granularity: a first prefix of 1,024 tokens, then steps of 128.
const OPENAI_MIN: u64 = 1024;
const OPENAI_STEP: u64 = 128;

fn openai(shared: &Shared, req: &Value, t0: Instant) -> Handled {
    let bad = |m: String| (400, error(Api::OpenAi, "invalid_request_error", &m));
    let model = req["model"]
        .as_str()
        .ok_or_else(|| bad("model: required".into()))?;
    let messages = req["messages"]
        .as_array()
        .ok_or_else(|| bad("messages: required".into()))?;
    let key = match &req["prompt_cache_key"] {
        Value::Null => "",
        Value::String(k) => k.as_str(),
        _ => return Err(bad("prompt_cache_key: a string".into())),
    };
    // The prompt as one text: tools, then messages, as sent.
    let mut text = Vec::new();
    for t in req["tools"].as_array().into_iter().flatten() {
        text.extend(serde_json::to_vec(t).map_err(|e| bad(e.to_string()))?);
        text.push(b'\n');
    }
    for m in messages {
        text.extend(serde_json::to_vec(m).map_err(|e| bad(e.to_string()))?);
        text.push(b'\n');
    }
    let total = tokens(text.len());
    // The route: the model, the key and the first 256 tokens.
    let route = chain(
        chain(chain(0, model.as_bytes()), key.as_bytes()),
        &text[..text.len().min(1024)],
    );
    // Every cacheable step's key, incrementally: steps[i] = (tokens, key).
    let mut steps = Vec::new();
    let mut h = DefaultHasher::new();
    route.hash(&mut h);
    let mut fed = 0usize;
    let mut n = OPENAI_MIN;
    while n <= total {
        let end = ((n * 4) as usize).min(text.len());
        h.write(&text[fed..end]);
        fed = end;
        steps.push((n, h.finish()));
        n += OPENAI_STEP;
    }
    let mut st = shared.lock();
    let live = |e: &Entry| e.readable_at <= t0 && e.expires_at > t0;
    let hit = steps
        .iter()
        .rev()
        .find(|(_, k)| st.entries.get(k).is_some_and(live))
        .copied();
    let cached = hit.map_or(0, |(n, _)| n);
    let ttl = Duration::from_secs(300);
    for &(n, k) in &steps {
        let readable_at = t0 + shared.latency.first_token;
        let e = st.entries.entry(k).or_insert(Entry {
            tokens: n,
            readable_at,
            expires_at: t0 + ttl,
            ttl,
        });
        e.readable_at = e.readable_at.min(readable_at);
        e.expires_at = t0 + ttl;
    }
    drop(st);
    let mut last_results = Vec::new();
    for m in messages.iter().rev().take_while(|m| m["role"] == "tool") {
        last_results.push(text_of(&m["content"]));
    }
    last_results.reverse();
    let system = messages
        .iter()
        .filter(|m| m["role"] == "system" || m["role"] == "developer")
        .map(|m| text_of(&m["content"]))
        .collect::<Vec<_>>()
        .join("\n");
    let seen = Seen {
        system,
        first_user: messages
            .iter()
            .find(|m| m["role"] == "user")
            .map(|m| text_of(&m["content"]))
            .unwrap_or_default(),
        assistant_turns: messages.iter().filter(|m| m["role"] == "assistant").count(),
        tools: req["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["function"]["name"].as_str().map(String::from))
            .collect(),
        last_results,
    };
    let (message, finish) = match (shared.script)(&seen) {
        Reply::Text(t) => (json!({"role": "assistant", "content": t}), "stop"),
        Reply::Calls(calls) => (
            json!({"role": "assistant", "content": null, "tool_calls": calls.into_iter().map(|(name, args)| {
                let id = shared.ids.fetch_add(1, Ordering::Relaxed);
                json!({"id": format!("call_{id:04}"), "type": "function",
                       "function": {"name": name, "arguments": args.to_string()}})
            }).collect::<Vec<_>>()}),
            "tool_calls",
        ),
    };
    let counted = Counted {
        uncached: total - cached,
        read: cached,
        output: tokens(message.to_string().len()).max(1),
        ..Counted::default()
    };
    let answer = json!({
        "id": format!("chatcmpl-{}", shared.ids.fetch_add(1, Ordering::Relaxed)),
        "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": total,
            "completion_tokens": counted.output,
            "total_tokens": total + counted.output,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
    });
    Ok((answer, bill(&shared.rates, counted)))
}

/// Reads one HTTP/1.1 request: method, path and body (bounded; `None` on a broken one).
async fn read_request(socket: &mut TcpStream) -> Option<(String, String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 << 10 {
            return None;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.lines();
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_string(), first.next()?.to_string());
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    if length > MAX_BODY {
        return None;
    }
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Some((method, path, body))
}

/// The scenarios' system prompt: 6,000 tokens.
pub const SYSTEM_BYTES: usize = 24_000;
/// A file the scenarios read: 2,000 tokens.
pub const FILE_BYTES: usize = 8_000;

/// `bytes` bytes of deterministic text about `topic` (the same in every process and in the
/// Python benchmark, `bench/cache/bench_pydantic_ai.py`, which builds it the same way).
pub fn long_text(topic: &str, bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 80);
    let mut i = 0u32;
    while s.len() < bytes {
        s.push_str(&format!(
            "{topic} {i:05}: the quick brown fox jumps over the lazy dog.\n"
        ));
        i += 1;
    }
    s.truncate(bytes);
    s
}

/// The text of the file at `path`: 2,000 tokens.
pub fn file_text(path: &str) -> String {
    long_text(path, FILE_BYTES)
}

/// The sub-agent's input.
pub fn question_schema() -> Value {
    json!({"type": "object", "required": ["question"], "additionalProperties": false,
           "properties": {"question": {"type": "string", "maxLength": 500}}})
}

/// The sub-agent's output.
pub fn summary_schema() -> Value {
    json!({"type": "object", "required": ["summary"], "additionalProperties": false,
           "properties": {"summary": {"type": "string", "maxLength": 500}}})
}

/// Tools that submit a final answer, in the frameworks the benchmark compares.
const SUBMIT_TOOLS: [&str; 2] = ["submit_output", "final_result"];

/// The scenarios' scripted model, the same for every framework:
/// - a **reader** (offered `read_file`) reads `notes/{n}.md` on each turn while its question
///   asks for more (`read N files`, default 3), then submits `{"summary"}` through the
///   submission tool offered (as text JSON when there is none);
/// - a **host** (offered another tool) calls it three times in one response (questions
///   `q1`…`q3`), then answers with text.
pub fn delegation_script() -> Script {
    Arc::new(|seen: &Seen| {
        let submit = seen
            .tools
            .iter()
            .find(|t| SUBMIT_TOOLS.contains(&t.as_str()));
        if seen.tools.iter().any(|t| t == "read_file") {
            let reads = seen
                .first_user
                .split("read ")
                .nth(1)
                .and_then(|r| r.split(' ').next())
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(3);
            if seen.assistant_turns < reads {
                let path = format!("notes/{}.md", seen.assistant_turns + 1);
                return Reply::Calls(vec![("read_file".into(), json!({"path": path}))]);
            }
            let summary = json!({"summary": format!("Read {} files.", seen.assistant_turns)});
            return match submit {
                Some(tool) => Reply::Calls(vec![(tool.clone(), summary)]),
                None => Reply::Text(summary.to_string()),
            };
        }
        let worker = seen
            .tools
            .iter()
            .find(|t| !SUBMIT_TOOLS.contains(&t.as_str()));
        match (seen.assistant_turns, worker) {
            (0, Some(worker)) => Reply::Calls(
                (1..=3)
                    .map(|i| {
                        (
                            worker.clone(),
                            json!({"question": format!("q{i}: what do the notes say?")}),
                        )
                    })
                    .collect(),
            ),
            _ => Reply::Text(format!("Done: {} answers.", seen.last_results.len())),
        }
    })
}

/// Posts `body` to `url` (`http://host:port/path`) and reads the JSON answer: a client with
/// no TLS and no dependencies, for tests of the mock itself.
pub async fn post(url: &str, body: &Value) -> (u16, Value) {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut socket = TcpStream::connect(host).await.expect("connect");
    let body = body.to_string();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).await.expect("write");
    socket.write_all(body.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    socket.read_to_end(&mut answer).await.expect("read");
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    (status, serde_json::from_str(body).expect("a JSON body"))
}
