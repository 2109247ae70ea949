//! Prompt caching against the billing mocks (`tests/support/billing_mock.rs`): a sub-agent
//! reads its earlier turns, siblings share their prefix, the recorded cost is the bill, and
//! the requests stay within the providers' rules.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rust_decimal::Decimal;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use subcontract::model::PriceTable;
use subcontract::provider::PromptCache;
use subcontract::{Ctx, SubAgentSpec, ToolSet};

use crate::billing_mock::{self as mock, Api, BillingMock, Latency, Rates};
use crate::cache_scenario::{self as scenario, model, read_file};

const SONNET: &str = "claude-sonnet-4-5";

async fn start(api: Api, latency: Latency) -> BillingMock {
    BillingMock::start(api, Rates::of(api), latency, mock::delegation_script()).await
}

/// A reading sub-agent (a 6,000-token system prompt, `read_file`) that reads `reads` files
/// and then submits, and a host that fans out to it.
fn specs() -> (SubAgentSpec<Value, Value>, SubAgentSpec<Value, Value>) {
    specs_with(3, 200_000)
}

fn specs_with(
    calls_per_turn: usize,
    result_chars: usize,
) -> (SubAgentSpec<Value, Value>, SubAgentSpec<Value, Value>) {
    let reader = SubAgentSpec::dynamic("reader", mock::question_schema(), mock::summary_schema())
        .description("Reads files and summarises them.")
        .system(mock::long_text("reader rules", mock::SYSTEM_BYTES))
        .tools(["read_file"])
        .max_turns(10)
        .max_tool_calls_per_turn(calls_per_turn)
        .max_tool_result_chars_per_turn(result_chars)
        .build()
        .expect("the reader spec is valid");
    let host = scenario::host();
    (reader, host)
}

fn ctx(
    api: Api,
    server: &BillingMock,
    cache: PromptCache,
    reader: &SubAgentSpec<Value, Value>,
) -> Ctx {
    let mut tools = ToolSet::new();
    tools.insert(read_file()).expect("a new tool");
    tools.insert(reader.as_tool()).expect("a new tool");
    Ctx::builder(model(api, server, cache))
        .tools(tools)
        .prices(PriceTable::builtin())
        .build()
}

/// One reader run on its own: `reads` file reads, then the submission.
async fn solo(api: Api, cache: PromptCache, reads: u32) -> (BillingMock, Decimal) {
    let server = start(api, Latency::ZERO).await;
    let (reader, _) = specs();
    let ctx = ctx(api, &server, cache, &reader);
    let question = format!("read {reads} files");
    let result = reader.run(&json!({"question": question}), &ctx).await;
    assert!(result.error.is_none(), "{:?}", result.error);
    assert_eq!(result.turns, reads + 1);
    (server, result.total_cost_usd)
}

#[tokio::test]
async fn an_anthropic_sub_agent_reads_its_earlier_turns_from_the_cache() {
    let (server, _) = solo(Api::Anthropic, PromptCache::FiveMinutes, 5).await;
    let bill = server.bill();
    assert_eq!(bill.len(), 6);
    // The first call writes the tools and system prompt (and its first message); each later
    // call reads every token the call before it sent, and writes only what is new.
    assert_eq!(bill[0].tokens.read, 0);
    assert!(bill[0].tokens.written_5m >= 6_000, "{:?}", bill[0]);
    for w in bill.windows(2) {
        assert_eq!(w[1].tokens.read, w[0].tokens.input(), "{:?}", w[1]);
        assert!(w[1].tokens.uncached < 100, "{:?}", w[1]);
    }
    let (usd, uncached) = server.totals();
    assert!(usd < uncached * Decimal::new(4, 1), "{usd} vs {uncached}");
}

#[tokio::test]
async fn an_openai_sub_agent_reads_its_earlier_turns_from_the_cache() {
    let (server, _) = solo(Api::OpenAi, PromptCache::FiveMinutes, 5).await;
    let bill = server.bill();
    assert_eq!(bill.len(), 6);
    assert_eq!(bill[0].tokens.read, 0);
    for w in bill.windows(2) {
        // The whole earlier prompt is a prefix of this one: cached to the 128-token step.
        let before = w[0].tokens.input();
        assert!(
            w[1].tokens.read <= before && w[1].tokens.read + 128 > before,
            "{:?} after {before}",
            w[1]
        );
    }
}

#[tokio::test]
async fn caching_off_sends_no_markers_and_reads_nothing() {
    for api in [Api::Anthropic, Api::OpenAi] {
        let (server, cost) = solo(api, PromptCache::Off, 2).await;
        for r in server.received() {
            let text = String::from_utf8_lossy(&r.body);
            assert!(!text.contains("cache_control") && !text.contains("prompt_cache_key"));
        }
        // OpenAI caches by itself, unrouted; Anthropic only at breakpoints.
        if api == Api::Anthropic {
            assert!(server
                .bill()
                .iter()
                .all(|l| l.tokens.read == 0 && l.tokens.written_5m == 0));
        }
        assert_eq!(cost, server.totals().0);
    }
}

#[tokio::test]
async fn the_recorded_cost_equals_what_the_mock_billed() {
    for api in [Api::Anthropic, Api::OpenAi] {
        // One run, and a fan-out (whose children's costs roll up into the host's total).
        let (server, cost) = solo(api, PromptCache::FiveMinutes, 3).await;
        assert_eq!(cost, server.totals().0, "{api:?}");
        assert!(server.bill().iter().any(|l| l.tokens.read > 0));

        let server = start(api, Latency::ZERO).await;
        let (reader, host) = specs();
        let ctx = ctx(api, &server, PromptCache::FiveMinutes, &reader);
        let result = host.run(&json!({}), &ctx).await;
        assert!(result.error.is_none(), "{:?}", result.error);
        assert_eq!(server.bill().len(), 2 + 3 * 4);
        // To the last decimal: both sides are exact decimals.
        assert_eq!(result.total_cost_usd, server.totals().0, "{api:?}");
    }
}

/// The requests a spec's calls sent, by system prompt: the bytes of `tools` and `system` (or
/// of the system message), as received.
fn prefixes(api: Api, server: &BillingMock) -> HashMap<String, Vec<(String, String)>> {
    let mut out: HashMap<String, Vec<(String, String)>> = HashMap::new();
    for r in server.received() {
        let fields: HashMap<String, Box<RawValue>> =
            serde_json::from_slice(&r.body).expect("a JSON object");
        let tools = fields.get("tools").map_or("", |t| t.get()).to_string();
        let system = match api {
            Api::Anthropic => fields["system"].get().to_string(),
            Api::OpenAi => {
                let messages: Vec<Box<RawValue>> =
                    serde_json::from_str(fields["messages"].get()).expect("messages");
                messages[0].get().to_string()
            }
        };
        let who = if tools.contains("\"read_file\"") {
            "reader"
        } else {
            "host"
        };
        out.entry(who.into()).or_default().push((tools, system));
    }
    out
}

#[tokio::test]
async fn the_prefix_is_byte_stable_across_turns_and_siblings() {
    for api in [Api::Anthropic, Api::OpenAi] {
        let server = start(api, Latency::ZERO).await;
        let (reader, host) = specs();
        let ctx = ctx(api, &server, PromptCache::FiveMinutes, &reader);
        let result = host.run(&json!({}), &ctx).await;
        assert!(result.error.is_none(), "{:?}", result.error);
        let by_spec = prefixes(api, &server);
        assert_eq!(by_spec["reader"].len(), 3 * 4);
        assert_eq!(by_spec["host"].len(), 2);
        for (spec, sent) in &by_spec {
            // No run id, time or budget in what every call of one spec sends first.
            for (tools, system) in sent {
                assert_eq!((tools, system), (&sent[0].0, &sent[0].1), "{api:?} {spec}");
            }
            let text = format!("{}{}", sent[0].0, sent[0].1);
            for per_run in ["root", "reader-", "usd", "USD", "budget"] {
                assert!(
                    !text.contains(per_run),
                    "{api:?} {spec}: `{per_run}` in the prefix"
                );
            }
        }
        if api == Api::OpenAi {
            let keys: Vec<Value> = server
                .received()
                .iter()
                .filter(|r| r.json["tools"].to_string().contains("read_file"))
                .map(|r| r.json["prompt_cache_key"].clone())
                .collect();
            assert!(
                keys.iter().all(|k| k == &keys[0] && k.is_string()),
                "{keys:?}"
            );
        }
    }
}

#[tokio::test]
async fn siblings_of_one_spec_share_the_prefix() {
    for api in [Api::Anthropic, Api::OpenAi] {
        let server = start(api, Latency::ZERO).await;
        let (reader, host) = specs();
        let ctx = ctx(api, &server, PromptCache::FiveMinutes, &reader);
        let result = host.run(&json!({}), &ctx).await;
        assert!(result.error.is_none(), "{:?}", result.error);
        // The siblings' first calls: the first to arrive writes the tools and system prompt,
        // the others read them.
        let firsts: Vec<(mock::Counted, bool)> = server
            .received()
            .iter()
            .zip(server.bill())
            .filter(|(r, _)| {
                r.json["tools"].to_string().contains("read_file")
                    && !r.json["messages"].to_string().contains("notes/")
            })
            .map(|(_, l)| (l.tokens, true))
            .collect();
        assert_eq!(firsts.len(), 3, "{api:?}");
        let reading = firsts.iter().filter(|(t, _)| t.read >= 6_000).count();
        assert!(reading >= 2, "{api:?}: {firsts:?}");
    }
}

/// A script that reads `calls` files a turn for `turns` turns, then submits.
fn reads_then_submits(turns: usize, calls: usize, dir: &'static str) -> mock::Script {
    Arc::new(move |seen: &mock::Seen| {
        if seen.assistant_turns < turns {
            mock::Reply::Calls(
                (0..calls)
                    .map(|i| {
                        let path = format!("{dir}{}-{i}", seen.assistant_turns);
                        ("read_file".to_string(), json!({ "path": path }))
                    })
                    .collect(),
            )
        } else {
            mock::Reply::Calls(vec![("submit_output".into(), json!({"summary": "done"}))])
        }
    })
}

#[tokio::test]
async fn more_than_four_breakpoints_are_never_sent() {
    // Tools, a long system prompt and a long conversation: many turns, each with several
    // tool calls.
    let server = BillingMock::start(
        Api::Anthropic,
        Rates::sonnet_4_5(),
        Latency::ZERO,
        reads_then_submits(8, 3, "notes/"),
    )
    .await;
    let (reader, _) = specs();
    let ctx = ctx(Api::Anthropic, &server, PromptCache::OneHour, &reader);
    let result = reader
        .run(&json!({"question": "Read everything."}), &ctx)
        .await;
    assert!(result.error.is_none(), "{:?}", result.error);
    let received = server.received();
    assert_eq!(received.len(), 9);
    for r in &received {
        let n = String::from_utf8_lossy(&r.body)
            .matches("\"cache_control\"")
            .count();
        assert!((1..=4).contains(&n), "{n} breakpoints");
        assert_eq!(r.status, 200);
    }
}

#[tokio::test]
async fn a_turn_of_many_tool_calls_still_reads_the_turns_before() {
    // 12 results and 12 calls: 24 new blocks, past the 20-block lookback of the latest
    // message's breakpoint.
    let server = BillingMock::start(
        Api::Anthropic,
        Rates::sonnet_4_5(),
        Latency::ZERO,
        reads_then_submits(2, 12, "n/"),
    )
    .await;
    let (reader, _) = specs_with(12, 200_000);
    let ctx = ctx(Api::Anthropic, &server, PromptCache::FiveMinutes, &reader);
    let result = reader
        .run(&json!({"question": "Read everything."}), &ctx)
        .await;
    assert!(result.error.is_none(), "{:?}", result.error);
    let bill = server.bill();
    assert_eq!(bill.len(), 3);
    for w in bill.windows(2) {
        assert_eq!(w[1].tokens.read, w[0].tokens.input(), "{:?}", w[1]);
    }
}

#[tokio::test]
async fn the_mock_follows_the_providers_rules() {
    let server = BillingMock::start(
        Api::Anthropic,
        Rates::sonnet_4_5(),
        Latency {
            first_token: Duration::from_millis(300),
            rest: Duration::from_millis(50),
        },
        Arc::new(|_: &mock::Seen| mock::Reply::Text("ok".into())),
    )
    .await;
    let url = format!("{}/v1/messages", server.base_url());
    let mark = json!({"type": "ephemeral"});
    let long = mock::long_text("s", 8_000); // 2,000 tokens
    let body = |n: usize, system: &str| {
        let blocks: Vec<Value> = (0..n)
            .map(|i| json!({"type": "text", "text": format!("{i}"), "cache_control": mark}))
            .collect();
        json!({"model": SONNET, "max_tokens": 10, "system": [{"type": "text", "text": system, "cache_control": mark}],
               "messages": [{"role": "user", "content": blocks}]})
    };
    let post = |b: Value| {
        let url = url.clone();
        async move { mock::post(&url, &b).await }
    };
    // A 5th breakpoint is refused.
    let (status, answer) = post(body(4, &long)).await;
    assert_eq!(status, 400, "{answer}");
    // Below the minimum: nothing cached.
    let (status, answer) = post(body(1, "short")).await;
    assert_eq!(status, 200);
    assert_eq!(answer["usage"]["cache_creation_input_tokens"], 0);
    // A write is not readable before its response begins; then it is.
    let (a, b) = tokio::join!(post(body(1, &long)), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        post(body(1, &long)).await
    });
    assert!(
        a.1["usage"]["cache_creation_input_tokens"].as_u64() > Some(2_000),
        "{}",
        a.1
    );
    assert_eq!(b.1["usage"]["cache_read_input_tokens"], 0, "{}", b.1);
    let (_, c) = post(body(1, &long)).await;
    assert_eq!(
        c["usage"]["cache_read_input_tokens"],
        a.1["usage"]["cache_creation_input_tokens"]
    );
    // Five minutes after its last read, gone.
    server.advance(Duration::from_secs(301));
    let (_, d) = post(body(1, &long)).await;
    assert_eq!(d["usage"]["cache_read_input_tokens"], 0, "{d}");
}

#[tokio::test]
async fn a_specs_prompt_cache_wins_over_its_hosts() {
    let server = start(Api::Anthropic, Latency::ZERO).await;
    let (reader, _) = specs();
    let question = json!({"question": "read 1 files"});
    let marks = |from: usize| -> Vec<Vec<Value>> {
        server.received()[from..]
            .iter()
            .map(|r| {
                let text = String::from_utf8_lossy(&r.body).to_string();
                text.match_indices("\"cache_control\":")
                    .map(|(i, _)| {
                        let rest = &text[i + 16..];
                        serde_json::Deserializer::from_str(rest)
                            .into_iter::<Value>()
                            .next()
                            .and_then(Result::ok)
                            .unwrap_or(Value::Null)
                    })
                    .collect()
            })
            .collect()
    };
    // The host turns caching off; a spec without a setting follows it.
    let host_off = ctx(Api::Anthropic, &server, PromptCache::FiveMinutes, &reader);
    let host_off = Ctx::builder(host_off.model().clone())
        .tools(host_off.tools().clone())
        .prompt_cache(PromptCache::Off)
        .build();
    assert!(reader.run(&question, &host_off).await.error.is_none());
    assert!(marks(0).iter().all(Vec::is_empty));
    // A spec asking for an hour wins over the host's off.
    let hourly = SubAgentSpec::dynamic("reader", mock::question_schema(), mock::summary_schema())
        .description("Reads files and summarises them.")
        .system(mock::long_text("reader rules", mock::SYSTEM_BYTES))
        .tools(["read_file"])
        .prompt_cache(PromptCache::OneHour)
        .build()
        .expect("valid");
    let n = server.received().len();
    assert!(hourly.run(&question, &host_off).await.error.is_none());
    let sent = marks(n);
    assert_eq!(sent.len(), 2);
    for m in sent {
        assert!(
            !m.is_empty()
                && m.iter()
                    .all(|c| c == &json!({"type": "ephemeral", "ttl": "1h"})),
            "{m:?}"
        );
    }
    // The model's own setting applies when neither sets one.
    let n = server.received().len();
    let own = ctx(Api::Anthropic, &server, PromptCache::Off, &reader);
    assert!(reader.run(&question, &own).await.error.is_none());
    assert!(marks(n).iter().all(Vec::is_empty));
}

/// Records every unsigned field recorded on a span, by span name.
#[derive(Clone, Default)]
struct SpanFields(Arc<std::sync::Mutex<Vec<(String, String, u64)>>>);

struct Visit<'a>(&'a SpanFields, &'static str);

impl tracing::field::Visit for Visit<'_> {
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        let mut v = self.0 .0.lock().expect("lock");
        v.push((self.1.to_string(), field.name().to_string(), value));
    }
    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}

impl<S> tracing_subscriber::Layer<S> for SpanFields
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if let Some(span) = ctx.span(id) {
            values.record(&mut Visit(self, span.name()));
        }
    }
}

#[tokio::test]
async fn the_spans_carry_cache_reads_and_writes() {
    use tracing_subscriber::layer::SubscriberExt;
    let fields = SpanFields::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(fields.clone()));
    let (server, _) = solo(Api::Anthropic, PromptCache::FiveMinutes, 2).await;
    let got = fields.0.lock().expect("lock").clone();
    let of = |span: &str, field: &str| -> Vec<u64> {
        got.iter()
            .filter(|(s, f, _)| s == span && f == field)
            .map(|(_, _, v)| *v)
            .collect()
    };
    let bill = server.bill();
    let reads: Vec<u64> = bill
        .iter()
        .map(|l| l.tokens.read)
        .filter(|&n| n > 0)
        .collect();
    let writes: Vec<u64> = bill
        .iter()
        .map(|l| l.tokens.written_5m)
        .filter(|&n| n > 0)
        .collect();
    assert_eq!(of("chat", "gen_ai.usage.cache_read.input_tokens"), reads);
    assert_eq!(
        of("chat", "gen_ai.usage.cache_creation.input_tokens"),
        writes
    );
    // The run's span: its calls' sums.
    assert_eq!(
        of("invoke_agent", "gen_ai.usage.cache_read.input_tokens"),
        [reads.iter().sum::<u64>()]
    );
    assert_eq!(
        of("invoke_agent", "gen_ai.usage.cache_creation.input_tokens"),
        [writes.iter().sum::<u64>()]
    );
}

#[tokio::test]
async fn model_call_events_and_the_run_tree_show_the_cache() {
    let server = start(Api::Anthropic, Latency::ZERO).await;
    let (reader, host) = specs();
    let events = Arc::new(subcontract::MemorySink::new());
    let base = ctx(Api::Anthropic, &server, PromptCache::FiveMinutes, &reader);
    let ctx = Ctx::builder(base.model().clone())
        .tools(base.tools().clone())
        .prices(PriceTable::builtin())
        .events(events.clone())
        .build();
    assert!(host.run(&json!({}), &ctx).await.error.is_none());
    let events = events.events();
    let mut read = 0;
    let mut written = 0;
    for e in &events {
        if let subcontract::events::EventKind::ModelCall { usage, .. } = &e.kind {
            read += usage.cache_read_tokens;
            written += usage.cache_write_tokens;
            // As a JSON Lines trace has them.
            let line = serde_json::to_value(e).expect("serialisable");
            if usage.cache_read_tokens > 0 {
                assert_eq!(
                    line["usage"]["cache_read_tokens"], usage.cache_read_tokens,
                    "{line}"
                );
            }
        }
    }
    let bill = server.bill();
    assert_eq!(read, bill.iter().map(|l| l.tokens.read).sum::<u64>());
    assert_eq!(
        written,
        bill.iter().map(|l| l.tokens.written_5m).sum::<u64>()
    );
    assert!(read > 0 && written > 0);
    let tree =
        subcontract::events::tree::render_tree(&subcontract::events::tree::build_tree(&events));
    let readers: Vec<&str> = tree.lines().filter(|l| l.contains("[reader]")).collect();
    assert_eq!(readers.len(), 3, "{tree}");
    assert!(
        readers
            .iter()
            .all(|l| l.contains(" read / ") && l.contains(" written")),
        "{tree}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_flag_sets_the_hosts_cache_and_the_summary_shows_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("notes")).expect("mkdir");
    for n in 1..=2 {
        let path = format!("notes/{n}.md");
        std::fs::write(ws.join(&path), mock::file_text(&path)).expect("write");
    }
    std::fs::write(
        dir.path().join("system.txt"),
        mock::long_text("reader rules", mock::SYSTEM_BYTES),
    )
    .expect("write");
    let spec = dir.path().join("reader.toml");
    let toml = r#"name = "reader"
description = "Reads files and summarises them."
system_file = "system.txt"
tools = ["read_file"]
PROMPT_CACHE
[input]
type = "object"
required = ["question"]
additionalProperties = false
properties = { question = { type = "string", maxLength = 500 } }
[output]
type = "object"
required = ["summary"]
additionalProperties = false
properties = { summary = { type = "string", maxLength = 500 } }
"#;
    let server = start(Api::Anthropic, Latency::ZERO).await;
    let run = |flag: Option<&'static str>, in_spec: &'static str| {
        std::fs::write(&spec, toml.replace("PROMPT_CACHE", in_spec)).expect("write");
        let trace = dir.path().join("trace.jsonl");
        let _ = std::fs::remove_file(&trace);
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_subcontract"));
        c.args([
            "run",
            spec.to_str().unwrap(),
            "--model",
            &format!("anthropic:{SONNET}"),
        ])
        .args([
            "--base-url",
            server.base_url(),
            "--workspace",
            ws.to_str().unwrap(),
        ])
        .args(["--trace", trace.to_str().unwrap()])
        .args(["--input", r#"{"question": "read 2 files"}"#])
        .env("ANTHROPIC_API_KEY", "sk-test-cache")
        .env_remove("SUBCONTRACT_PROMPT_CACHE");
        if let Some(f) = flag {
            c.args(["--prompt-cache", f]);
        }
        let trace_path = trace.clone();
        async move {
            let o = tokio::task::spawn_blocking(move || c.output().expect("the binary runs"))
                .await
                .expect("joined");
            let err = String::from_utf8_lossy(&o.stderr).to_string();
            assert_eq!(o.status.code(), Some(0), "{err}");
            let tree = std::process::Command::new(env!("CARGO_BIN_EXE_subcontract"))
                .args(["trace", trace_path.to_str().unwrap()])
                .output()
                .expect("trace runs");
            (err, String::from_utf8_lossy(&tree.stdout).to_string())
        }
    };
    let sent_marks = |from: usize| {
        server.received()[from..]
            .iter()
            .map(|r| {
                String::from_utf8_lossy(&r.body)
                    .matches("cache_control")
                    .count()
            })
            .collect::<Vec<_>>()
    };
    // The default: cached, and the summary and the trace say how much.
    let (err, tree) = run(None, "").await;
    assert!(
        err.contains(", cache ") && err.contains(" read / "),
        "{err}"
    );
    assert!(
        tree.contains(", cache ") && tree.contains(" written"),
        "{tree}"
    );
    assert!(sent_marks(0).iter().all(|&n| n > 0));
    // The flag turns it off.
    let n = server.received().len();
    let (err, _) = run(Some("off"), "").await;
    assert!(!err.contains(", cache "), "{err}");
    assert!(sent_marks(n).iter().all(|&n| n == 0));
    // The spec's own setting wins over the flag.
    let n = server.received().len();
    run(Some("off"), "prompt_cache = \"1h\"").await;
    let hourly = server.received()[n..]
        .iter()
        .all(|r| String::from_utf8_lossy(&r.body).contains(r#""ttl":"1h""#));
    assert!(hourly);
    // A value the flag does not know is refused.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_subcontract"))
        .args(["run", spec.to_str().unwrap(), "--prompt-cache", "forever"])
        .output()
        .expect("the binary runs");
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected `off`, `5m` or `1h`"));
}

/// The siblings' first calls of a fan-out on a mock that takes `first_token` to begin
/// answering: how many read the tools and system prompt from the cache, and how many wrote
/// them.
async fn sibling_firsts(api: Api, share: bool) -> (usize, usize) {
    let latency = Latency {
        first_token: Duration::from_millis(150),
        rest: Duration::from_millis(50),
    };
    let server = start(api, latency).await;
    let (reader, host) = specs();
    let base = ctx(api, &server, PromptCache::FiveMinutes, &reader);
    let ctx = Ctx::builder(base.model().clone())
        .tools(base.tools().clone())
        .prices(PriceTable::builtin())
        .share_fanout_prefix(share)
        .build();
    let result = host.run(&json!({}), &ctx).await;
    assert!(result.error.is_none(), "{:?}", result.error);
    assert_eq!(result.total_cost_usd, server.totals().0);
    let firsts: Vec<mock::Counted> = server
        .received()
        .iter()
        .zip(server.bill())
        .filter(|(r, _)| {
            r.json["tools"].to_string().contains("read_file")
                && !r.json["messages"].to_string().contains("notes/")
        })
        .map(|(_, l)| l.tokens)
        .collect();
    assert_eq!(firsts.len(), 3);
    let read = firsts.iter().filter(|t| t.read >= 6_000).count();
    let wrote = firsts
        .iter()
        .filter(|t| t.written_5m >= 6_000 || (api == Api::OpenAi && t.read == 0))
        .count();
    (read, wrote)
}

#[tokio::test]
async fn siblings_started_together_miss_each_others_write_unless_they_share() {
    for api in [Api::Anthropic, Api::OpenAi] {
        // Started at once, no sibling's write is readable yet: each writes the prefix.
        assert_eq!(sibling_firsts(api, false).await, (0, 3), "{api:?}");
        // Sharing: the first writes it, the others wait for its answer and read it.
        assert_eq!(sibling_firsts(api, true).await, (2, 1), "{api:?}");
    }
}

#[tokio::test]
async fn an_hour_long_cache_is_charged_what_it_is_billed() {
    // 1-hour writes cost twice the input price, not the 5-minute 1.25 times; with a budget,
    // the reservation must cover them too.
    let server = start(Api::Anthropic, Latency::ZERO).await;
    let (reader, _) = specs();
    let base = ctx(Api::Anthropic, &server, PromptCache::OneHour, &reader);
    let ctx = Ctx::builder(base.model().clone())
        .tools(base.tools().clone())
        .prices(PriceTable::builtin())
        .budget(subcontract::Budget::new(Some(Decimal::ONE), None))
        .build();
    let result = reader.run(&json!({"question": "read 2 files"}), &ctx).await;
    assert!(result.error.is_none(), "{:?}", result.error);
    assert!(server.bill().iter().all(|l| l.tokens.written_5m == 0));
    assert!(server.bill().iter().any(|l| l.tokens.written_1h > 0));
    assert_eq!(result.total_cost_usd, server.totals().0);
}
