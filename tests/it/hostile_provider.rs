//! A provider that reports its usage in a form that cannot be trusted, through the whole run
//! loop: the call happened, so it is never counted as free. A count that cannot be read
//! charges the call its whole reservation; a count past `u64` saturates, which exhausts the
//! budget; the run's error says which.

use std::sync::Arc;

use rust_decimal::Decimal;
use serde_json::{json, Value};
use subcontract::model::{Model, PriceTable};
use subcontract::{Budget, Ctx, EventKind, MemorySink, Outcome};

use crate::common::research_spec;
use crate::providers::{anthropic_message, config, openai_completion, Reply, Server};

fn openai_with_usage(usage: Value) -> Reply {
    let mut body = openai_completion(json!({"role": "assistant", "content": "thinking"}), "stop");
    body["usage"] = usage;
    Reply::json(200, body)
}

fn anthropic_with_usage(usage: Value) -> Reply {
    let mut body = anthropic_message(json!([{"type": "text", "text": "thinking"}]), "end_turn");
    body["usage"] = usage;
    Reply::json(200, body)
}

struct Ran {
    outcome: Outcome,
    error: String,
    cost: Decimal,
    spent: Decimal,
    charged_in_events: Decimal,
    server_calls: usize,
}

async fn run(model: Arc<dyn Model>, server: &Server, limit: Decimal) -> Ran {
    let budget = Budget::new(Some(limit), None);
    let sink = Arc::new(MemorySink::new());
    let ctx = Ctx::builder(model)
        .budget(budget.clone())
        .prices(PriceTable::builtin())
        .events(sink.clone())
        .build();
    let spec = research_spec("research", &[]);
    let r = spec
        .run(&json!({"question": "What does lib.rs export?"}), &ctx)
        .await;
    let charged_in_events = sink
        .events()
        .iter()
        .map(|e| match &e.kind {
            EventKind::ModelCall { cost_usd, .. } => *cost_usd,
            _ => Decimal::ZERO,
        })
        .sum();
    Ran {
        outcome: r.outcome,
        error: r.error.map(|f| f.to_string()).unwrap_or_default(),
        cost: r.cost_usd,
        spent: budget.snapshot().spent_usd,
        charged_in_events,
        server_calls: server.received().len(),
    }
}

/// Before: each of these made the answer malformed and the call cost 0 USD.
#[tokio::test]
async fn an_unreadable_usage_charges_the_call_its_whole_reservation() {
    let cases = [
        (true, json!({"prompt_tokens": -5, "completion_tokens": 7})),
        (true, json!({"prompt_tokens": 10, "completion_tokens": 2.5})),
        (
            true,
            json!({"prompt_tokens": "lots", "completion_tokens": 7}),
        ),
        (true, json!("5000000")),
        (true, json!([19, 10])),
        (false, json!({"input_tokens": 10, "output_tokens": -1})),
        (
            false,
            json!({"input_tokens": 10, "cache_read_input_tokens": "some"}),
        ),
    ];
    for (is_openai, usage) in cases {
        let (server, model): (Server, Arc<dyn Model>) = if is_openai {
            let server = Server::start(vec![openai_with_usage(usage.clone())]).await;
            let model =
                subcontract::provider::OpenAiModel::new("gpt-4.1-mini", config(&server, "/v1"))
                    .expect("client");
            (server, Arc::new(model))
        } else {
            let server = Server::start(vec![anthropic_with_usage(usage.clone())]).await;
            let model = subcontract::provider::AnthropicModel::new(
                "claude-sonnet-4-5",
                config(&server, ""),
            )
            .expect("client");
            (server, Arc::new(model))
        };
        let r = run(model, &server, Decimal::ONE).await;
        assert_eq!(r.outcome, Outcome::ModelError, "{usage}: {}", r.error);
        assert!(r.error.contains("unreadable usage"), "{usage}: {}", r.error);
        assert!(
            r.error.contains("charged its whole reservation"),
            "{usage}: {}",
            r.error
        );
        assert_eq!(r.server_calls, 1, "{usage}: not retried");
        assert!(r.cost > Decimal::ZERO, "{usage}: the call is not free");
        assert_eq!(r.cost, r.spent, "{usage}: the budget saw the same charge");
        assert_eq!(
            r.cost, r.charged_in_events,
            "{usage}: and so did the events"
        );
        // The charge is the reservation: the worst case of one call (4,096 output tokens at
        // most), far below the limit.
        assert!(r.cost < Decimal::new(1, 1), "{usage}: {}", r.cost);
    }
}

/// A count past `u64` (or a sum of counts past it) saturates: the cost is past any
/// reservation, so a limited budget is exhausted and no further call starts.
#[tokio::test]
async fn a_usage_past_u64_saturates_and_exhausts_the_budget() {
    let openai_server = Server::start(vec![openai_with_usage(
        json!({"prompt_tokens": 1e30, "completion_tokens": 7}),
    )])
    .await;
    let anthropic_server = Server::start(vec![anthropic_with_usage(json!({
        "input_tokens": u64::MAX, "cache_read_input_tokens": 5, "output_tokens": 1
    }))])
    .await;
    let models: [(&Server, Arc<dyn Model>); 2] = [
        (
            &openai_server,
            Arc::new(
                subcontract::provider::OpenAiModel::new(
                    "gpt-4.1-mini",
                    config(&openai_server, "/v1"),
                )
                .expect("client"),
            ),
        ),
        (
            &anthropic_server,
            Arc::new(
                subcontract::provider::AnthropicModel::new(
                    "claude-sonnet-4-5",
                    config(&anthropic_server, ""),
                )
                .expect("client"),
            ),
        ),
    ];
    for (server, model) in models {
        let r = run(model, server, Decimal::ONE).await;
        assert_eq!(r.outcome, Outcome::BudgetExhausted, "{}", r.error);
        assert!(r.error.contains("past 2^64"), "{}", r.error);
        assert!(
            r.cost > Decimal::ONE,
            "the cost is past the limit: {}",
            r.cost
        );
        assert_eq!(r.cost, r.spent);
        assert_eq!(r.server_calls, 1, "no further call");
    }
}

/// A local server that accepts a request and never answers: the run ends `timeout` at its
/// spec's `timeout`, not `model_error` at a request timeout of its own (the request is given
/// what is left of the run's time, under a ceiling of 600 s).
#[tokio::test]
async fn a_silent_server_ends_the_run_at_its_own_timeout() {
    use std::time::{Duration, Instant};
    use subcontract::provider::{OpenAiModel, ProviderConfig, DEFAULT_REQUEST_TIMEOUT};

    assert_eq!(DEFAULT_REQUEST_TIMEOUT, Duration::from_secs(600));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    let config = ProviderConfig::new(format!("http://{addr}/v1"));
    let model = Arc::new(OpenAiModel::new("silent", config).unwrap());
    let ctx = Ctx::builder(model).build();
    let spec = subcontract::SubAgentSpec::dynamic(
        "wait",
        json!({"type": "object"}),
        json!({"type": "string", "maxLength": 10}),
    )
    .description("Waits.")
    .timeout(Duration::from_millis(800))
    .build()
    .unwrap();
    let t0 = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(30), spec.run(&json!({}), &ctx))
        .await
        .expect("the run's timeout ends it");
    assert_eq!(r.outcome, Outcome::Timeout, "{:?}", r.error);
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    held.abort();
}
