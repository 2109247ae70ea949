//! Prompt caching, measured on the billing mocks (`tests/support/billing_mock.rs`), which
//! follow Anthropic's and OpenAI's documented cache rules and bill at list prices:
//!
//! - **A**: one sub-agent, 6 turns (5 file reads of 2,000 tokens, then its answer), with a
//!   6,000-token system prompt;
//! - **B**: a host fanning out to 3 siblings of one spec in one response, 4 turns each (3
//!   reads, then the answer), with and without the siblings sharing one cache write
//!   (`CtxBuilder::share_fanout_prefix`).
//!
//! For each provider and scenario: USD billed, USD if nothing had been cached (every input
//! token at the input price), the saving, and the wall time.
//!
//! Run: `cargo run --example bench_cache [-- --json FILE]`.
//!
//! `cargo run --example bench_cache -- serve anthropic|openai PORT` serves one mock
//! (with the same scripted model) for another framework: `bench/cache/run.sh` drives
//! Pydantic AI against it.

#[path = "../tests/support/billing_mock.rs"]
mod billing_mock;
#[path = "../tests/support/cache_scenario.rs"]
mod cache_scenario;

use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use serde_json::{json, Value};
use subcontract::model::PriceTable;
use subcontract::provider::PromptCache;
use subcontract::{Ctx, SubAgentSpec, ToolSet};

use billing_mock::{Api, BillingMock, Latency, Rates};

/// A scaled-down model call: it begins answering after 200 ms and ends 300 ms later.
const LATENCY: Latency = Latency {
    first_token: Duration::from_millis(200),
    rest: Duration::from_millis(300),
};

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match args.first().map(String::as_str) {
        Some("serve") => rt.block_on(serve(&args[1..])),
        _ => {
            let json = match args.as_slice() {
                [flag, path] if flag == "--json" => Some(path.clone()),
                [] => None,
                _ => {
                    return Err(
                        "usage: bench_cache [--json FILE] | serve anthropic|openai PORT".into(),
                    )
                }
            };
            rt.block_on(bench(json))
        }
    }
}

fn api_named(name: &str) -> Result<Api, Error> {
    match name {
        "anthropic" => Ok(Api::Anthropic),
        "openai" => Ok(Api::OpenAi),
        other => Err(format!("unknown API `{other}`: anthropic or openai").into()),
    }
}

async fn serve(args: &[String]) -> Result<(), Error> {
    let [api, port] = args else {
        return Err("usage: bench_cache serve anthropic|openai PORT".into());
    };
    let api = api_named(api)?;
    let mock = BillingMock::start_on(
        &format!("127.0.0.1:{port}"),
        api,
        Rates::of(api),
        LATENCY,
        billing_mock::delegation_script(),
    )
    .await?;
    println!("{}", mock.base_url());
    // Until killed.
    std::future::pending::<()>().await;
    Ok(())
}

/// One scenario's figures.
struct Figures {
    billed: Decimal,
    uncached: Decimal,
    calls: usize,
    wall: Duration,
}

impl Figures {
    fn saving(&self) -> f64 {
        if self.uncached.is_zero() {
            return 0.0;
        }
        let ratio = self.billed / self.uncached;
        (1.0 - ratio.to_string().parse::<f64>().unwrap_or(1.0)) * 100.0
    }

    fn json(&self) -> Value {
        json!({"usd_billed": self.billed.to_string(), "usd_uncached": self.uncached.to_string(),
               "saving_pct": (self.saving() * 10.0).round() / 10.0, "calls": self.calls,
               "wall_ms": self.wall.as_millis() as u64})
    }
}

fn reader() -> Result<SubAgentSpec<Value, Value>, Error> {
    Ok(SubAgentSpec::dynamic(
        "reader",
        billing_mock::question_schema(),
        billing_mock::summary_schema(),
    )
    .description("Reads files and summarises them.")
    .system(billing_mock::long_text(
        "reader rules",
        billing_mock::SYSTEM_BYTES,
    ))
    .tools(["read_file"])
    .max_turns(8)
    .build()?)
}

async fn scenario(api: Api, fan_out: bool, share: bool) -> Result<Figures, Error> {
    let mock = BillingMock::start(
        api,
        Rates::of(api),
        LATENCY,
        billing_mock::delegation_script(),
    )
    .await;
    let reader = reader()?;
    let mut tools = ToolSet::new();
    tools.insert(cache_scenario::read_file())?;
    tools.insert(reader.as_tool())?;
    let ctx = Ctx::builder(cache_scenario::model(api, &mock, PromptCache::FiveMinutes))
        .tools(tools)
        .prices(PriceTable::builtin())
        .share_fanout_prefix(share)
        .build();
    let t0 = Instant::now();
    let result = if fan_out {
        cache_scenario::host().run(&json!({}), &ctx).await
    } else {
        reader.run(&json!({"question": "read 5 files"}), &ctx).await
    };
    let wall = t0.elapsed();
    if let Some(e) = result.error {
        return Err(format!("the run failed: {e}").into());
    }
    let (billed, uncached) = mock.totals();
    // Every cost figure is the bill: the run's own count must agree to the last decimal.
    if result.total_cost_usd != billed {
        return Err(format!("recorded {} USD, billed {billed}", result.total_cost_usd).into());
    }
    Ok(Figures {
        billed,
        uncached,
        calls: mock.bill().len(),
        wall,
    })
}

async fn bench(json_path: Option<String>) -> Result<(), Error> {
    let mut out = serde_json::Map::new();
    println!("| provider | scenario | USD billed | USD if uncached | saving | calls | wall ms |");
    println!("|---|---|---|---|---|---|---|");
    for (api, name) in [(Api::Anthropic, "anthropic"), (Api::OpenAi, "openai")] {
        for (label, key, fan_out, share) in [
            ("A: 1 sub-agent, 6 turns", "a", false, false),
            ("B: 3 siblings × 4 turns", "b", true, false),
            ("B, siblings share the prefix", "b_shared", true, true),
        ] {
            let f = scenario(api, fan_out, share).await?;
            println!(
                "| {name} | {label} | {} | {} | {:.1}% | {} | {} |",
                f.billed.round_dp(6),
                f.uncached.round_dp(6),
                f.saving(),
                f.calls,
                f.wall.as_millis()
            );
            out.insert(format!("{name}.{key}"), f.json());
        }
    }
    if let Some(path) = json_path {
        std::fs::write(&path, serde_json::to_string_pretty(&Value::Object(out))?)?;
    }
    Ok(())
}
