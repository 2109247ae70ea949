//! The peers' delegation-overhead scenarios (bench/peers/README.md), run on subcontract's
//! real run loop, budget, validation and events, with zero-latency scripted models.
//!
//! ```sh
//! cargo run --release --example bench_peers                 # all scenarios, 5 reps, table + JSON
//! cargo run --release --example bench_peers -- --reps 7 --json /tmp/subcontract.json
//! cargo run --release --example bench_peers -- --scenario s2   # one scenario, in this process
//! # with line tables, for a profiler (callgrind, perf):
//! cargo build --profile profiling --example bench_peers   # target/profiling/examples/bench_peers
//! ```
//!
//! Parameters are the peers' (`common.py`): T=20, N=100 (3 child tool turns + 1 final), K=50,
//! L=20 ms, cap 10 for S3b, fixed usage 100/20 tokens per response, and the 2,039-byte
//! `Findings` output, handed over as a JSON string as a provider would. Every scenario runs in
//! its own subprocess so its peak RSS is its own. Values: median [min .. max] over reps. S3,
//! S3b and scale are measured with exact model latency and with `tokio::time::sleep` (see
//! [`Latency`]); their "process CPU" includes the exact clock's thread.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use subcontract::events::{Event, EventSink};
use subcontract::model::{
    ModelError, ModelRequest, ModelResponse, Price, PriceTable, StopReason, ToolCall, Usage,
};
use subcontract::{
    Budget, Ctx, FnTool, Model, Outcome, SpecBuilder, SubAgentSpec, ToolOutput, ToolSet,
    SUBMIT_TOOL,
};
use validator::Validate;

const T: usize = 20;
const N: usize = 100;
const CHILD_TOOL_TURNS: usize = 3;
const K: usize = 50;
const L: Duration = Duration::from_millis(20);
const BOUND: usize = 10;
const SCALE: usize = 10_000;
const TOOL_RESULT: &str = "constant-tool-result";

// ---------------------------------------------------------------------------------------
// The workload: the peers' Findings type, schema and 2,039-byte sample.
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
struct Finding {
    #[validate(length(max = 300))]
    claim: String,
    #[validate(length(min = 1))]
    source_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
struct Findings {
    #[validate(length(max = 6), nested)]
    findings: Vec<Finding>,
    #[validate(length(max = 3))]
    gaps: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
struct Query {
    #[validate(length(max = 200))]
    query: String,
}

/// `common.make_sample_findings()`, byte for byte.
fn sample_findings() -> Findings {
    let findings = (0..6)
        .map(|i| {
            let base = format!(
                "Claim {i}: the measured median latency of component {i} rose after the \
                 configuration change, consistent with the cache-miss hypothesis; three \
                 independent sources agree on direction but differ on magnitude by a \
                 factor of up to two, and none controls for the concurrent traffic shift."
            );
            Finding {
                claim: base.chars().take(240).collect(),
                source_ids: vec![
                    format!("src-{i:04}-a"),
                    format!("src-{i:04}-b"),
                    format!("src-{i:04}-c"),
                ],
            }
        })
        .collect();
    Findings {
        findings,
        gaps: vec![
            "No source reports the magnitude under production load.".into(),
            "The configuration diff itself was not available to review.".into(),
            "Only one source covers the period after the rollback.".into(),
        ],
    }
}

/// `TypeAdapter(Findings).json_schema()` as pydantic 2 prints it.
fn pydantic_schema() -> Value {
    json!({
        "$defs": {"Finding": {"properties": {
            "claim": {"maxLength": 300, "title": "Claim", "type": "string"},
            "source_ids": {"items": {"type": "string"}, "minItems": 1, "title": "Source Ids", "type": "array"}},
            "required": ["claim", "source_ids"], "title": "Finding", "type": "object"}},
        "properties": {
            "findings": {"items": {"$ref": "#/$defs/Finding"}, "maxItems": 6, "title": "Findings", "type": "array"},
            "gaps": {"items": {"type": "string"}, "maxItems": 3, "title": "Gaps", "type": "array"}},
        "required": ["findings", "gaps"], "title": "Findings", "type": "object"
    })
}

// ---------------------------------------------------------------------------------------
// Scripted models: a reply is a pure function of the turn, computed in O(1) from the
// history's length, like the peers' FunctionModel / ScriptedModel.
// ---------------------------------------------------------------------------------------

fn usage() -> Usage {
    Usage::new(100, 20)
}

fn call(name: &str, args: String, id: String) -> ModelResponse {
    ModelResponse {
        text: None,
        // Arguments arrive as a JSON string, as from a provider; the run loop parses them.
        tool_calls: vec![ToolCall {
            id,
            name: name.into(),
            arguments: subcontract::model::Arguments::Text(args),
        }],
        usage: usage(),
        stop_reason: StopReason::ToolUse,
    }
}

/// How a scripted model waits out its latency.
///
/// A real model call ends when its socket becomes readable: the reactor wakes the task within
/// microseconds of the bytes arriving. `tokio::time::sleep` instead rounds every deadline up
/// to its 1 ms timer tick and parks in `epoll_wait` with a whole-millisecond timeout, so each
/// simulated 20 ms call takes 21-22 ms. `Exact` wakes the task from a clock thread at the
/// deadline (it sleeps until 200 us before, then spins), through the same cross-thread wake
/// a socket readiness event would take. Both are reported; neither touches the code under test.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Latency {
    TokioTimer,
    Exact,
}

impl Latency {
    async fn wait(self, d: Duration) {
        match self {
            Latency::TokioTimer => tokio::time::sleep(d).await,
            Latency::Exact => exact_clock::sleep(d).await,
        }
    }
    fn label(self) -> &'static str {
        match self {
            Latency::TokioTimer => "tokio_timer",
            Latency::Exact => "exact",
        }
    }
}

mod exact_clock {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Condvar, Mutex, OnceLock};
    use std::task::{Context, Poll, Waker};
    use std::time::{Duration, Instant};

    /// How long before a deadline the clock stops sleeping and spins.
    const SPIN: Duration = Duration::from_micros(200);

    struct State {
        done: AtomicBool,
        waker: Mutex<Option<Waker>>,
    }

    struct Entry(Instant, u64, Arc<State>);
    impl PartialEq for Entry {
        fn eq(&self, o: &Self) -> bool {
            (self.0, self.1) == (o.0, o.1)
        }
    }
    impl Eq for Entry {}
    impl PartialOrd for Entry {
        fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(o))
        }
    }
    impl Ord for Entry {
        fn cmp(&self, o: &Self) -> std::cmp::Ordering {
            (self.0, self.1).cmp(&(o.0, o.1))
        }
    }

    struct Clock {
        heap: Mutex<(BinaryHeap<Reverse<Entry>>, u64)>,
        changed: Condvar,
    }

    fn clock() -> &'static Clock {
        static CLOCK: OnceLock<&'static Clock> = OnceLock::new();
        CLOCK.get_or_init(|| {
            let c: &'static Clock = Box::leak(Box::new(Clock {
                heap: Mutex::new((BinaryHeap::new(), 0)),
                changed: Condvar::new(),
            }));
            std::thread::spawn(move || run(c));
            c
        })
    }

    fn run(c: &'static Clock) {
        let mut due = Vec::new();
        let mut g = c.heap.lock().expect("clock lock");
        loop {
            let now = Instant::now();
            while let Some(Reverse(e)) = g.0.peek() {
                if e.0 > now {
                    break;
                }
                if let Some(Reverse(e)) = g.0.pop() {
                    due.push(e.2);
                }
            }
            if !due.is_empty() {
                // Wake outside the lock, so sleepers can register meanwhile.
                drop(g);
                for s in due.drain(..) {
                    s.done.store(true, Ordering::Release);
                    if let Some(w) = s.waker.lock().expect("waker lock").take() {
                        w.wake();
                    }
                }
                g = c.heap.lock().expect("clock lock");
                continue;
            }
            g = match g.0.peek().map(|Reverse(e)| e.0) {
                None => c.changed.wait(g).expect("clock lock"),
                // A futex timeout ends up to ~50 us late (timer slack): sleep until just
                // before the deadline, then spin the rest with the lock released.
                Some(at) if at.saturating_duration_since(now) > SPIN => {
                    c.changed
                        .wait_timeout(g, at.saturating_duration_since(now) - SPIN)
                        .expect("clock lock")
                        .0
                }
                Some(at) => {
                    drop(g);
                    while Instant::now() < at {
                        std::hint::spin_loop();
                    }
                    c.heap.lock().expect("clock lock")
                }
            };
        }
    }

    pub struct Sleep {
        at: Instant,
        state: Option<Arc<State>>,
    }

    pub fn sleep(d: Duration) -> Sleep {
        Sleep {
            at: Instant::now() + d,
            state: None,
        }
    }

    impl Future for Sleep {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if let Some(s) = &self.state {
                if s.done.load(Ordering::Acquire) {
                    return Poll::Ready(());
                }
                *s.waker.lock().expect("waker lock") = Some(cx.waker().clone());
                // The clock may have fired between the check and the registration.
                return if s.done.load(Ordering::Acquire) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                };
            }
            let state = Arc::new(State {
                done: AtomicBool::new(false),
                waker: Mutex::new(Some(cx.waker().clone())),
            });
            let c = clock();
            let mut g = c.heap.lock().expect("clock lock");
            let earliest = g.0.peek().is_none_or(|Reverse(e)| self.at < e.0);
            g.1 += 1;
            let seq = g.1;
            g.0.push(Reverse(Entry(self.at, seq, state.clone())));
            drop(g);
            if earliest {
                c.changed.notify_one();
            }
            self.state = Some(state);
            Poll::Pending
        }
    }
}

/// Counts scripted-model latency sleeps in flight, like the peers' ConcurrencyGauge.
#[derive(Default)]
struct Gauge {
    current: AtomicUsize,
    peak: AtomicUsize,
}

/// The worker: `tool_turns` turns calling `lookup` (each sleeping `latency`), then the final
/// output.
struct Worker {
    tool_turns: usize,
    latency: Duration,
    clock: Latency,
    gauge: Arc<Gauge>,
    sample: Arc<str>,
}

#[async_trait]
impl Model for Worker {
    fn id(&self) -> &str {
        "scripted:bench"
    }
    async fn complete(&self, req: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let turn = (req.messages.len() - 1) / 2;
        if turn < self.tool_turns {
            if !self.latency.is_zero() {
                let now = self.gauge.current.fetch_add(1, Ordering::Relaxed) + 1;
                self.gauge.peak.fetch_max(now, Ordering::Relaxed);
                self.clock.wait(self.latency).await;
                self.gauge.current.fetch_sub(1, Ordering::Relaxed);
            }
            // Each turn looks up another page: the same call twice in a row is a stall, which the
            // run loop answers with a forced turn (the peers' scripts send `{}` every turn).
            return Ok(call(
                "lookup",
                format!(r#"{{"page":{turn}}}"#),
                format!("c{turn}"),
            ));
        }
        Ok(call(
            SUBMIT_TOOL,
            self.sample.to_string(),
            format!("c{turn}"),
        ))
    }
}

/// The parent: `sequential` = one `research` call per turn for `n` turns; otherwise `n`
/// calls in the first response. Then the final output. Children get the `Worker`.
struct Parent {
    n: usize,
    sequential: bool,
    worker: Worker,
    stamps: Mutex<Vec<Instant>>,
    sample: Arc<str>,
}

#[async_trait]
impl Model for Parent {
    fn id(&self) -> &str {
        "scripted:bench"
    }
    async fn complete(&self, req: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        if req.system != "parent" {
            return self.worker.complete(req).await;
        }
        if let Ok(mut s) = self.stamps.lock() {
            s.push(Instant::now());
        }
        let turn = (req.messages.len() - 1) / 2;
        if self.sequential && turn < self.n {
            return Ok(call(
                "research",
                format!("{{\"query\": \"q{turn}\"}}"),
                format!("p{turn}"),
            ));
        }
        if !self.sequential && turn == 0 {
            let tool_calls = (0..self.n)
                .map(|k| ToolCall {
                    id: format!("p{k}"),
                    name: "research".into(),
                    arguments: subcontract::model::Arguments::Text(format!(
                        "{{\"query\": \"q{k}\"}}"
                    )),
                })
                .collect();
            return Ok(ModelResponse {
                text: None,
                tool_calls,
                usage: usage(),
                stop_reason: StopReason::ToolUse,
            });
        }
        Ok(call(
            SUBMIT_TOOL,
            self.sample.to_string(),
            format!("p{turn}"),
        ))
    }
}

/// A real event sink that keeps a count: events are built and delivered as in production.
#[derive(Default)]
struct CountingSink(AtomicU64);

impl EventSink for CountingSink {
    fn emit(&self, _e: &Event) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn worker_spec(name: &str, system: &str, tools: &[&str]) -> SubAgentSpec<Query, Findings> {
    worker_builder(name, system, tools)
        .build()
        .expect("the benchmark spec is valid")
}

fn worker_builder(name: &str, system: &str, tools: &[&str]) -> SpecBuilder<Query, Findings> {
    SubAgentSpec::<Query, Findings>::builder(name)
        .description("Research worker.")
        .system(system)
        .tools(tools.iter().copied())
        .max_turns(T as u32 + 5)
        .max_output_chars(4000)
        // The peers' schema leaves source ids unbounded; the 4,000-character limit is still
        // enforced on every output.
        .allow_unbounded_output()
}

fn lookup() -> Arc<dyn subcontract::Tool> {
    FnTool::new(
        "lookup",
        "Trivial local tool returning a constant.",
        json!({"type": "object", "additionalProperties": false,
               "properties": {"page": {"type": "integer", "minimum": 0, "maximum": 1000}}}),
        |_| async { ToolOutput::text(TOOL_RESULT) },
    )
}

fn prices() -> PriceTable {
    let mut p = PriceTable::new();
    p.insert(
        "scripted:bench",
        Price::per_mtok(Decimal::new(2, 0), Decimal::new(8, 0)),
    );
    p
}

// ---------------------------------------------------------------------------------------
// Statistics and the process.
// ---------------------------------------------------------------------------------------

fn summarize(mut v: Vec<f64>) -> Value {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    json!({"median": median, "min": v[0], "max": v[n - 1], "n": n})
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn status_kb(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|x| x.parse::<f64>().ok())
        })
        .unwrap_or(-1.0)
}

fn rss_mb() -> f64 {
    status_kb("VmRSS:") / 1024.0
}

fn peak_rss_mb() -> f64 {
    status_kb("VmHWM:") / 1024.0
}

/// CPU time of the whole process (user + system, every thread), from
/// `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`.
fn cpu_time() -> Duration {
    cpu_time::ProcessTime::try_now()
        .map(|t| t.as_duration())
        .unwrap_or_default()
}

fn rt() -> tokio::runtime::Runtime {
    // One thread, like asyncio's event loop in the peers.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

// ---------------------------------------------------------------------------------------
// Scenarios.
// ---------------------------------------------------------------------------------------

fn s1(reps: usize, runs_per_rep: usize, tool_turns: usize) -> Value {
    let sample: Arc<str> = serde_json::to_string(&sample_findings())
        .expect("serialisable")
        .into();
    let spec = worker_spec("worker", "You are a research worker.", &["lookup"]);
    let model = Arc::new(Worker {
        tool_turns,
        latency: Duration::ZERO,
        clock: Latency::TokioTimer,
        gauge: Arc::default(),
        sample,
    });
    let events = Arc::new(CountingSink::default());
    let ctx = Ctx::builder(model)
        .tools(ToolSet::new().with(lookup()).expect("one tool"))
        .prices(prices())
        .events(events.clone())
        .build();
    let turns = (tool_turns + 1) as f64;
    let expected = sample_findings();
    rt().block_on(async {
        let input = Query { query: "go".into() };
        let one = || async {
            let c0 = cpu_time();
            let t0 = Instant::now();
            let r = spec.run(&input, &ctx).await;
            let dt = t0.elapsed();
            assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
            assert_eq!(r.output.as_ref(), Some(&expected));
            assert_eq!(r.turns as usize, tool_turns + 1);
            (dt, cpu_time() - c0)
        };
        for _ in 0..5 {
            one().await;
        }
        let setup = rss_mb();
        let (mut per, mut cpu) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let mut runs = Vec::new();
            for _ in 0..runs_per_rep {
                runs.push(one().await);
            }
            per.push(median(runs.iter().map(|r| r.0.as_secs_f64() * 1e6).collect()) / turns);
            cpu.push(median(runs.iter().map(|r| r.1.as_secs_f64() * 1e6).collect()) / turns);
        }
        json!({
            "us_per_model_turn": summarize(per),
            "cpu_us_per_model_turn": summarize(cpu),
            "model_turns_per_run": turns,
            "runs_per_rep": runs_per_rep,
            "events_emitted": events.0.load(Ordering::Relaxed),
            "rss_after_setup_mb": setup,
        })
    })
}

fn s2(reps: usize, runs_per_rep: usize) -> Value {
    let sample: Arc<str> = serde_json::to_string(&sample_findings())
        .expect("serialisable")
        .into();
    let child = worker_spec("research", "You are a research worker.", &["lookup"]);
    let parent_spec = SubAgentSpec::<Query, Findings>::builder("parent")
        .description("Lead researcher.")
        .system("parent")
        .tools(["research"])
        .max_turns(N as u32 + 2)
        .max_output_chars(4000)
        .allow_unbounded_output()
        .build()
        .expect("the benchmark spec is valid");
    let model = Arc::new(Parent {
        n: N,
        sequential: true,
        worker: Worker {
            tool_turns: CHILD_TOOL_TURNS,
            latency: Duration::ZERO,
            clock: Latency::TokioTimer,
            gauge: Arc::default(),
            sample: sample.clone(),
        },
        stamps: Mutex::new(Vec::new()),
        sample,
    });
    let tools = ToolSet::new()
        .with(lookup())
        .and_then(|t| t.with(child.as_tool()))
        .expect("two tools");
    let expected = sample_findings();
    rt().block_on(async {
        let one = || async {
            model.stamps.lock().expect("not poisoned").clear();
            let budget = Budget::unlimited();
            let ctx = Ctx::builder(model.clone())
                .tools(tools.clone())
                .prices(prices())
                .budget(budget.clone())
                .events(Arc::new(CountingSink::default()))
                .build();
            let c0 = cpu_time();
            let t0 = Instant::now();
            let r = parent_spec.run(&Query { query: "go".into() }, &ctx).await;
            let dt = t0.elapsed();
            let dc = cpu_time() - c0;
            assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
            assert_eq!(r.output.as_ref(), Some(&expected));
            // Shared usage: the root budget counts every model call of the tree.
            let calls = budget.snapshot().calls;
            assert_eq!(calls as usize, (N + 1) + N * (CHILD_TOOL_TURNS + 1));
            let stamps = model.stamps.lock().expect("not poisoned").clone();
            let gaps: Vec<f64> = stamps
                .windows(2)
                .map(|w| (w[1] - w[0]).as_secs_f64() * 1e6)
                .collect();
            let early = median(gaps[..10].to_vec());
            let late = median(gaps[gaps.len() - 10..].to_vec());
            (dt, early, late, dc, calls)
        };
        one().await;
        let setup = rss_mb();
        let (mut per, mut run_ms, mut early, mut late, mut cpu) =
            (vec![], vec![], vec![], vec![], vec![]);
        let mut calls = 0;
        for _ in 0..reps {
            let mut runs = Vec::new();
            for _ in 0..runs_per_rep {
                runs.push(one().await);
            }
            let m = median(runs.iter().map(|r| r.0.as_secs_f64() * 1e6).collect());
            per.push(m / N as f64);
            run_ms.push(m / 1000.0);
            early.push(median(runs.iter().map(|r| r.1).collect()));
            late.push(median(runs.iter().map(|r| r.2).collect()));
            cpu.push(median(runs.iter().map(|r| r.3.as_secs_f64() * 1e6).collect()) / N as f64);
            calls = runs[0].4;
        }
        json!({
            "us_per_subagent_call": summarize(per),
            "ms_per_parent_run": summarize(run_ms),
            "cpu_us_per_subagent_call": summarize(cpu),
            "us_per_call_first10": summarize(early),
            "us_per_call_last10": summarize(late),
            "subagent_calls": N,
            "model_calls_counted_by_root_budget": calls,
            "rss_after_setup_mb": setup,
        })
    })
}

/// S3 / S3b / scale: `k` sub-agents in one response under a fan-out cap of `cap`, each with
/// 3 turns of `L` latency. Measured twice, with exact latency (the headline figures) and with
/// tokio's timer (under `"tokio_timer"`); each beside its floor, bare tokio tasks waiting the
/// same latency the same way with no framework at all.
fn s3(reps: usize, k: usize, cap: usize, runtime: tokio::runtime::Runtime) -> Value {
    let mut v = s3_with(reps, k, cap, Latency::Exact, &runtime);
    v["tokio_timer"] = s3_with(reps, k, cap, Latency::TokioTimer, &runtime);
    v
}

fn s3_with(
    reps: usize,
    k: usize,
    cap: usize,
    clock: Latency,
    runtime: &tokio::runtime::Runtime,
) -> Value {
    let sample: Arc<str> = serde_json::to_string(&sample_findings())
        .expect("serialisable")
        .into();
    let child = worker_spec("research", "You are a research worker.", &["lookup"]);
    // One response fans out to all K children: the per-turn bounds (64 calls by default) are
    // raised to hold them, as a host that means such a fan-out would.
    let parent_spec = worker_builder("parent", "parent", &["research"])
        .max_tool_calls_per_turn(k)
        .max_tool_result_chars_per_turn(usize::MAX)
        .build()
        .expect("the benchmark spec is valid");
    let gauge = Arc::new(Gauge::default());
    let model = Arc::new(Parent {
        n: k,
        sequential: false,
        worker: Worker {
            tool_turns: CHILD_TOOL_TURNS,
            latency: L,
            clock,
            gauge: gauge.clone(),
            sample: sample.clone(),
        },
        stamps: Mutex::new(Vec::new()),
        sample,
    });
    let tools = ToolSet::new()
        .with(lookup())
        .and_then(|t| t.with(child.as_tool()))
        .expect("two tools");
    let waves = k.div_ceil(cap) as f64;
    let ideal_ms = waves * CHILD_TOOL_TURNS as f64 * L.as_secs_f64() * 1000.0;
    runtime.block_on(async {
        let one = || async {
            gauge.current.store(0, Ordering::Relaxed);
            gauge.peak.store(0, Ordering::Relaxed);
            let budget = Budget::unlimited();
            let ctx = Ctx::builder(model.clone())
                .tools(tools.clone())
                .prices(prices())
                .budget(budget.clone())
                .fanout_limit(cap)
                .events(Arc::new(CountingSink::default()))
                .build();
            let c0 = cpu_time();
            let t0 = Instant::now();
            // The host runs as a task of the runtime, as a server's request handler does; on
            // the multi-threaded runtime a future driven by `block_on` sits outside the worker
            // pool, and every child that finishes would wake it with a futex call.
            let spec = parent_spec.clone();
            let r =
                tokio::spawn(async move { spec.run(&Query { query: "go".into() }, &ctx).await })
                    .await
                    .expect("the host task does not panic");
            let dt = t0.elapsed();
            assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
            assert_eq!(
                budget.snapshot().calls as usize,
                2 + k * (CHILD_TOOL_TURNS + 1)
            );
            (dt, gauge.peak.load(Ordering::Relaxed), cpu_time() - c0)
        };
        one().await;
        let setup = rss_mb();
        let (mut walls, mut over, mut cpus, mut peaks) = (vec![], vec![], vec![], vec![]);
        for _ in 0..reps {
            let (dt, peak, dc) = one().await;
            let ms = dt.as_secs_f64() * 1000.0;
            walls.push(ms);
            over.push(ms - ideal_ms);
            cpus.push(dc.as_secs_f64() * 1000.0);
            peaks.push(peak);
        }
        // The floor: the same waves of 3 waits of L under the same cap, with no framework.
        let mut floors = vec![];
        for _ in 0..reps {
            let permits = Arc::new(tokio::sync::Semaphore::new(
                cap.min(tokio::sync::Semaphore::MAX_PERMITS),
            ));
            let t0 = Instant::now();
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..k {
                let permits = permits.clone();
                set.spawn(async move {
                    let _p = permits.acquire_owned().await;
                    for _ in 0..CHILD_TOOL_TURNS {
                        clock.wait(L).await;
                    }
                });
            }
            while set.join_next().await.is_some() {}
            floors.push(t0.elapsed().as_secs_f64() * 1000.0);
        }
        let ratio = median(walls.clone()) / ideal_ms;
        let floor = median(floors.clone());
        let wall_over_floor = median(walls.clone()) / floor;
        json!({
            "wall_ms": summarize(walls),
            "overhead_ms_vs_ideal": summarize(over),
            "cpu_ms": summarize(cpus),
            "ideal_ms": ideal_ms,
            "wall_over_ideal": ratio,
            "latency": clock.label(),
            "floor_ms": summarize(floors),
            "wall_over_floor": wall_over_floor,
            "peak_concurrent_child_model_calls": peaks.iter().max(),
            "fanout": k,
            "cap": cap,
            "rss_after_setup_mb": setup,
        })
    })
}

fn s4(reps: usize, iters: usize) -> Value {
    let data = serde_json::to_string(&sample_findings()).expect("serialisable");
    assert_eq!(data.len(), 2039, "the peers' sample is 2,039 bytes");
    let contract = subcontract::Contract::compile(Arc::new(pydantic_schema())).expect("compiles");
    // What the run loop does with a submitted output: size check, schema, typed decode, rules.
    let spec = worker_spec("worker", "w", &[]);
    let time_per = |f: &dyn Fn()| {
        for _ in 0..200 {
            f();
        }
        let t0 = Instant::now();
        for _ in 0..iters {
            f();
        }
        t0.elapsed().as_secs_f64() * 1e6 / iters as f64
    };
    // The headline figures take JSON text, as pydantic's `validate_json` does.
    let parse_schema = || assert!(contract.validate_json(&data).is_ok());
    let pipeline = || assert!(spec.validate_output_json(&data).is_ok());
    // The same through a `serde_json::Value` (what a caller holding a Value pays).
    let value_parse_schema = || {
        let v: Value = serde_json::from_str(&data).expect("valid JSON");
        assert!(contract.is_valid(&v));
    };
    let value_pipeline = || {
        let v: Value = serde_json::from_str(&data).expect("valid JSON");
        assert!(spec.validate_output(&v).is_ok());
    };
    let typed = || {
        let f: Findings = serde_json::from_str(&data).expect("valid");
        assert!(f.validate().is_ok());
    };
    let parse_only = || {
        let v: Value = serde_json::from_str(&data).expect("valid JSON");
        std::hint::black_box(v);
    };
    let mut figures: [Vec<f64>; 6] = Default::default();
    for _ in 0..reps {
        for (out, f) in figures.iter_mut().zip([
            &parse_schema as &dyn Fn(),
            &pipeline,
            &value_parse_schema,
            &value_pipeline,
            &typed,
            &parse_only,
        ]) {
            out.push(time_per(f));
        }
    }
    let [a, b, c, d, e, f] = figures;
    json!({
        "json_bytes": data.len(),
        "parse_and_schema_validate_us": summarize(a),
        "full_output_pipeline_us": summarize(b),
        "value_parse_and_schema_validate_us": summarize(c),
        "value_full_output_pipeline_us": summarize(d),
        "serde_typed_parse_and_rules_us": summarize(e),
        "value_parse_only_us": summarize(f),
    })
}

fn scale(reps: usize) -> Value {
    // One thread, like every other scenario (and asyncio). SCALE_MULTI_THREAD=1 uses both
    // cores instead: today no faster, from lock contention in the allocator (see BENCHMARKS.md).
    let rt = if std::env::var_os("SCALE_MULTI_THREAD").is_some() {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    } else {
        rt()
    };
    let before = rss_mb();
    let mut v = s3(reps, SCALE, SCALE, rt);
    let peak = peak_rss_mb();
    v["peak_rss_per_child_kb"] = json!((peak - before).max(0.0) * 1024.0 / SCALE as f64);
    v
}

fn run_scenario(name: &str, reps: usize) -> Value {
    match name {
        "s0" => s1(reps, 100, 0),
        "s1" => s1(reps, 40, T),
        "s2" => s2(reps, 3),
        "s3" => s3(reps, K, tokio::sync::Semaphore::MAX_PERMITS, rt()),
        "s3b" => s3(reps, K, BOUND, rt()),
        "s4" => s4(reps, 20_000),
        "scale" => scale(reps.min(3)),
        other => {
            eprintln!("unknown scenario {other}; one of s0 s1 s2 s3 s3b s4 scale");
            std::process::exit(2);
        }
    }
}

const SCENARIOS: [&str; 7] = ["s0", "s1", "s2", "s3", "s3b", "s4", "scale"];

fn fmt(v: &Value, digits: usize) -> String {
    match (v["median"].as_f64(), v["min"].as_f64(), v["max"].as_f64()) {
        (Some(m), Some(a), Some(b)) => format!("{m:.digits$} [{a:.digits$} .. {b:.digits$}]"),
        _ => "-".into(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let get = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let reps: usize = get("--reps").and_then(|r| r.parse().ok()).unwrap_or(5);
    if let Some(name) = get("--scenario") {
        let setup_rss = rss_mb();
        let mut res = run_scenario(&name, reps);
        if res.get("rss_after_setup_mb").is_none() {
            res["rss_after_setup_mb"] = json!(setup_rss);
        }
        res["peak_rss_mb"] = json!(peak_rss_mb());
        if args.iter().any(|a| a == "--child") {
            println!("@@RESULT@@{res}");
        } else {
            println!(
                "{}",
                serde_json::to_string_pretty(&res).expect("serialisable")
            );
        }
        return;
    }
    let exe = std::env::current_exe().expect("own path");
    let mut all = serde_json::Map::new();
    for name in SCENARIOS {
        let t0 = Instant::now();
        let out = std::process::Command::new(&exe)
            .args(["--scenario", name, "--reps", &reps.to_string(), "--child"])
            .output()
            .expect("the benchmark can run itself");
        let text = String::from_utf8_lossy(&out.stdout);
        let res = text
            .lines()
            .find_map(|l| l.strip_prefix("@@RESULT@@"))
            .and_then(|l| serde_json::from_str::<Value>(l).ok())
            .unwrap_or_else(|| json!({"error": String::from_utf8_lossy(&out.stderr).to_string()}));
        eprintln!("  finished {name} in {:.1}s", t0.elapsed().as_secs_f64());
        all.insert(name.to_string(), res);
    }
    // A scenario that failed its own checks fails the benchmark, after the table shows which.
    let failed: Vec<&str> = SCENARIOS
        .iter()
        .copied()
        .filter(|n| all[*n].get("error").is_some())
        .collect();
    let s = |n: &str| &all[n];
    let rows: Vec<(String, String, String)> = vec![
        (
            "s0".into(),
            "us / run of 1 turn (final output only), wall".into(),
            fmt(&s("s0")["us_per_model_turn"], 1),
        ),
        (
            "s0".into(),
            "  same, process CPU time".into(),
            fmt(&s("s0")["cpu_us_per_model_turn"], 1),
        ),
        (
            "s1".into(),
            "us / model turn (21 turns/run), wall".into(),
            fmt(&s("s1")["us_per_model_turn"], 2),
        ),
        (
            "s1".into(),
            "  same, process CPU time".into(),
            fmt(&s("s1")["cpu_us_per_model_turn"], 2),
        ),
        (
            "s2".into(),
            "us / sub-agent call (4 child turns + 1 parent turn), wall".into(),
            fmt(&s("s2")["us_per_subagent_call"], 1),
        ),
        (
            "s2".into(),
            "  same, process CPU time".into(),
            fmt(&s("s2")["cpu_us_per_subagent_call"], 1),
        ),
        (
            "s2".into(),
            "us / call, calls 1-10 (short parent history)".into(),
            fmt(&s("s2")["us_per_call_first10"], 1),
        ),
        (
            "s2".into(),
            "us / call, calls 91-100 (long parent history)".into(),
            fmt(&s("s2")["us_per_call_last10"], 1),
        ),
        (
            "s4".into(),
            "us / parse + JSON Schema validate (2039 B)".into(),
            fmt(&s("s4")["parse_and_schema_validate_us"], 2),
        ),
        (
            "s4".into(),
            "us / full output pipeline (size, schema, typed decode, rules)".into(),
            fmt(&s("s4")["full_output_pipeline_us"], 2),
        ),
        (
            "s4".into(),
            "  same two through a serde_json Value: parse + schema".into(),
            fmt(&s("s4")["value_parse_and_schema_validate_us"], 2),
        ),
        (
            "s4".into(),
            "  full pipeline".into(),
            fmt(&s("s4")["value_full_output_pipeline_us"], 2),
        ),
        (
            "s4".into(),
            "us / serde typed parse + validator rules".into(),
            fmt(&s("s4")["serde_typed_parse_and_rules_us"], 2),
        ),
        // (scale rows are inserted below, with the other latency scenarios)
        (
            "scale".into(),
            "peak RSS KB per child".into(),
            format!(
                "{:.1}",
                s("scale")["peak_rss_per_child_kb"].as_f64().unwrap_or(-1.0)
            ),
        ),
    ];
    // S3, S3b and scale: with exact latency (headline) and with tokio's timer, each beside
    // its no-framework floor.
    let mut rows = rows;
    let scale_tail = rows.split_off(rows.len() - 1);
    for (scen, what, digits) in [
        ("s3", "K=50 unbounded".to_string(), 2),
        ("s3b", "K=50 cap 10".to_string(), 2),
        ("scale", format!("{SCALE} sub-agents, cap {SCALE}"), 1),
    ] {
        let v = s(scen);
        let t = &v["tokio_timer"];
        rows.extend([
            (
                scen.to_string(),
                format!("wall ms, {what}, ideal {} ms, exact latency", v["ideal_ms"]),
                fmt(&v["wall_ms"], digits),
            ),
            (
                scen.to_string(),
                "  floor: bare tokio tasks, same waits, no framework".into(),
                fmt(&v["floor_ms"], digits),
            ),
            (
                scen.to_string(),
                "  process CPU ms during the run".into(),
                fmt(&v["cpu_ms"], digits),
            ),
            (
                scen.to_string(),
                "wall ms, same, latency by tokio::time::sleep".into(),
                fmt(&t["wall_ms"], digits),
            ),
            (
                scen.to_string(),
                "  floor: bare tokio tasks, tokio sleeps".into(),
                fmt(&t["floor_ms"], digits),
            ),
            (
                scen.to_string(),
                "peak concurrent child model calls".into(),
                v["peak_concurrent_child_model_calls"].to_string(),
            ),
        ]);
    }
    rows.extend(scale_tail);
    println!("\n== subcontract {} ==", env!("CARGO_PKG_VERSION"));
    println!("values: median [min .. max] over {reps} reps; each scenario in its own process\n");
    println!(
        "{:<6} {:<62} {:<34} peak RSS MB",
        "scen.", "metric", "value"
    );
    let mut last = String::new();
    for (scen, metric, value) in rows {
        let rss = if scen != last {
            format!("{:.1}", s(&scen)["peak_rss_mb"].as_f64().unwrap_or(-1.0))
        } else {
            String::new()
        };
        println!("{scen:<6} {metric:<62} {value:<34} {rss}");
        last = scen;
    }
    if let Some(path) = get("--json") {
        let doc = json!({"framework": "subcontract", "version": env!("CARGO_PKG_VERSION"), "reps": reps, "scenarios": all});
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&doc).expect("serialisable"),
        )
        .expect("writable --json path");
        println!("\nwrote {path}");
    }
    if !failed.is_empty() {
        for n in &failed {
            eprintln!("scenario {n} failed: {}", all[*n]["error"]);
        }
        std::process::exit(1);
    }
}
