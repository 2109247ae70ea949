//! What each provider sends for sampling, tool choice and a response format, read from the
//! body a local server received; the errors that say the fix (a 404 from a wrong base URL, a
//! base URL without a scheme); the timeout and retry settings; `Retry-After` reaching every
//! caller of a rate limit; and a third provider on the public transport.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use subcontract::model::{
    Message, Model, ModelError, RateLimited, RateLimits, ResponseFormat, RetryAfter, Sampling,
    ToolChoice,
};
use subcontract::provider::{
    AnthropicModel, ApiKey, KeyHeader, OpenAiModel, PromptCache, ProviderConfig, Transport,
};

use crate::providers::{
    anthropic, anthropic_message, config, conversation, openai, openai_completion, request, tools,
    validate_against_openapi, Reply, Server, KEY,
};

fn text_answer() -> Reply {
    Reply::json(
        200,
        openai_completion(json!({"role": "assistant", "content": "ok"}), "stop"),
    )
}

fn anthropic_text_answer() -> Reply {
    Reply::json(
        200,
        anthropic_message(json!([{"type": "text", "text": "ok"}]), "end_turn"),
    )
}

fn output_format() -> ResponseFormat {
    ResponseFormat {
        name: "research_output".into(),
        schema: Arc::new(json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["claim"],
            "properties": {
                "claim": {"type": "string", "maxLength": 300},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1}
            }
        })),
    }
}

const SAMPLING: Sampling = Sampling {
    temperature: Some(0.2),
    top_p: Some(0.9),
    seed: Some(42),
};

// ---------------------------------------------------------------- OpenAI

/// Sampling, each tool choice and a response format go out under the names Chat Completions
/// defines, and every body validates against OpenAI's published request schema.
#[tokio::test]
async fn openai_sends_sampling_tool_choice_and_response_format_as_the_api_defines() {
    let server = Server::start(vec![text_answer()]).await;
    let model = openai(&server);
    let tools = tools();
    let messages = [Message::user("hello")];
    let format = output_format();
    for choice in [
        ToolChoice::Auto,
        ToolChoice::Required,
        ToolChoice::Tool("read_file"),
    ] {
        model
            .complete(
                request(&messages, &tools)
                    .with_tool_choice(choice)
                    .with_sampling(SAMPLING),
            )
            .await
            .expect("answered");
    }
    // Strict: the format in the strict dialect.
    openai(&server)
        .strict(true)
        .complete(request(&messages, &[]).with_response_format(&format))
        .await
        .expect("answered");
    model
        .complete(request(&messages, &[]))
        .await
        .expect("answered");
    // Not strict (the default): the full schema, every bound in it.
    model
        .complete(request(&messages, &[]).with_response_format(&format))
        .await
        .expect("answered");
    let got = server.received();
    assert_eq!(got.len(), 6);
    let bodies: Vec<Value> = got.iter().map(|r| r.body.clone()).collect();
    for b in &bodies[..3] {
        // f32 values as the shortest decimal that reads back: 0.2, not 0.20000000298023224.
        assert_eq!(b["temperature"], json!(0.2), "{b}");
        assert_eq!(b["top_p"], json!(0.9));
        assert_eq!(b["seed"], 42);
    }
    assert!(
        bodies[0].get("tool_choice").is_none(),
        "auto is the default, not sent"
    );
    assert_eq!(bodies[1]["tool_choice"], "required");
    assert_eq!(
        bodies[2]["tool_choice"],
        json!({"type": "function", "function": {"name": "read_file"}})
    );
    let rf = &bodies[3]["response_format"];
    assert_eq!(rf["type"], "json_schema");
    assert_eq!(rf["json_schema"]["name"], "research_output");
    assert_eq!(
        rf["json_schema"]["strict"], true,
        "the dialect is strict-compatible"
    );
    let schema = &rf["json_schema"]["schema"];
    assert_eq!(
        schema["required"],
        json!(["claim", "confidence"]),
        "strict: all required"
    );
    assert_eq!(
        schema["properties"]["confidence"]["type"],
        json!(["number", "null"])
    );
    assert!(!schema.to_string().contains("maxLength"), "{schema}");
    let full = &bodies[5]["response_format"]["json_schema"];
    assert_eq!(full["strict"], false);
    assert_eq!(&full["schema"], &*output_format().schema);
    // Nothing set, nothing sent.
    for field in [
        "temperature",
        "top_p",
        "seed",
        "tool_choice",
        "response_format",
    ] {
        assert!(bodies[4].get(field).is_none(), "{field}");
        assert!(
            bodies[3].get("tool_choice").is_none(),
            "no tools, no choice"
        );
    }
    validate_against_openapi(&bodies);
}

/// With strict mode on, `strict` is claimed only when it would take the converted schema: a root that is
/// not an object goes without it (the request would fail otherwise).
#[tokio::test]
async fn openai_response_format_is_strict_only_when_the_dialect_allows() {
    let server = Server::start(vec![text_answer()]).await;
    let model = openai(&server).strict(true);
    let messages = [Message::user("hello")];
    let list = ResponseFormat {
        name: "list".into(),
        schema: Arc::new(json!({"type": "array", "maxItems": 3, "items": {"type": "string"}})),
    };
    model
        .complete(request(&messages, &[]).with_response_format(&list))
        .await
        .expect("answered");
    let body = &server.received()[0].body;
    assert_eq!(body["response_format"]["json_schema"]["strict"], false);
    assert_eq!(
        body["response_format"]["json_schema"]["schema"]["type"],
        "array"
    );
    validate_against_openapi(std::slice::from_ref(body));
}

/// The nulls the strict dialect makes a model send for optional properties (strict mode on) are taken out of
/// an answer in the format, so the run loop checks the shape the contract describes.
#[tokio::test]
async fn openai_response_format_answers_lose_the_dialects_nulls() {
    let answer = |content: &str| {
        Reply::json(
            200,
            openai_completion(json!({"role": "assistant", "content": content}), "stop"),
        )
    };
    let server = Server::start(vec![
        answer(r#"{"claim": "It uses tokio.", "confidence": null}"#),
        answer(r#"{"claim":  "spaced as sent"}"#),
        answer("not JSON"),
    ])
    .await;
    let model = openai(&server).strict(true);
    let messages = [Message::user("hello")];
    let format = output_format();
    let mut texts = Vec::new();
    for _ in 0..3 {
        let r = model
            .complete(request(&messages, &[]).with_response_format(&format))
            .await
            .expect("answered");
        texts.push(r.text.expect("text"));
    }
    assert_eq!(
        serde_json::from_str::<Value>(&texts[0]).expect("JSON"),
        json!({"claim": "It uses tokio."})
    );
    assert_eq!(
        texts[1], r#"{"claim":  "spaced as sent"}"#,
        "no null: the text as sent"
    );
    assert_eq!(texts[2], "not JSON", "left for the run loop to refuse");
}

/// A seed past the API's signed 64-bit range is refused before any request, not wrapped.
#[tokio::test]
async fn openai_refuses_a_seed_past_its_range() {
    let server = Server::start(vec![text_answer()]).await;
    let messages = [Message::user("hello")];
    let sampling = Sampling {
        seed: Some(u64::MAX),
        ..Sampling::default()
    };
    let err = openai(&server)
        .complete(request(&messages, &[]).with_sampling(sampling))
        .await
        .expect_err("out of range");
    assert!(
        matches!(&err, ModelError::Config(m) if m.contains("seed")),
        "{err}"
    );
    assert!(server.received().is_empty());
}

// ---------------------------------------------------------------- Anthropic

/// Temperature and top_p under their names, no seed (the API has none), `any` and `tool`
/// choices, and structured outputs as `output_config.format` in the strict dialect.
#[tokio::test]
async fn anthropic_sends_sampling_tool_choice_and_output_format_as_the_api_defines() {
    let server = Server::start(vec![anthropic_text_answer()]).await;
    let model = anthropic(&server);
    let tools = tools();
    let messages = [Message::user("hello")];
    let format = output_format();
    for choice in [
        ToolChoice::Auto,
        ToolChoice::Required,
        ToolChoice::Tool("read_file"),
    ] {
        model
            .complete(
                request(&messages, &tools)
                    .with_tool_choice(choice)
                    .with_sampling(SAMPLING),
            )
            .await
            .expect("answered");
    }
    model
        .complete(request(&messages, &tools).with_response_format(&format))
        .await
        .expect("answered");
    let got = server.received();
    let bodies: Vec<&Value> = got.iter().map(|r| &r.body).collect();
    for b in &bodies[..3] {
        assert_eq!(b["temperature"], json!(0.2));
        assert_eq!(b["top_p"], json!(0.9));
        assert!(b.get("seed").is_none(), "the Messages API has no seed");
    }
    assert!(bodies[0].get("tool_choice").is_none());
    assert_eq!(bodies[1]["tool_choice"], json!({"type": "any"}));
    assert_eq!(
        bodies[2]["tool_choice"],
        json!({"type": "tool", "name": "read_file"})
    );
    let format_sent = &bodies[3]["output_config"]["format"];
    assert_eq!(format_sent["type"], "json_schema");
    let schema = &format_sent["schema"];
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(schema["required"], json!(["claim"]));
    assert!(!schema.to_string().contains("maxLength"), "{schema}");
    assert!(!schema.to_string().contains("minimum"), "{schema}");
    assert!(
        bodies[3].get("output_format").is_none(),
        "the beta's field is not used"
    );
    // No beta header is needed for it.
    assert!(!got[3].headers.contains_key("anthropic-beta"));
}

/// A tool choice with no tools to choose from is refused before any request, by both
/// providers: never sent, and never silently dropped.
#[tokio::test]
async fn a_tool_choice_without_its_tools_is_refused_before_any_request() {
    let messages = [Message::user("hello")];
    let tools = tools();
    for anthropic_side in [false, true] {
        let server = Server::start(vec![text_answer()]).await;
        let model: Arc<dyn Model> = if anthropic_side {
            Arc::new(anthropic(&server))
        } else {
            Arc::new(openai(&server))
        };
        for (tools, choice) in [
            (&[][..], ToolChoice::Required),
            (&[][..], ToolChoice::Tool("read_file")),
            (&tools[..], ToolChoice::Tool("write_file")),
        ] {
            let err = model
                .complete(request(&messages, tools).with_tool_choice(choice))
                .await
                .expect_err("nothing to choose");
            assert!(matches!(err, ModelError::Config(_)), "{choice:?}: {err}");
        }
        assert!(server.received().is_empty(), "anthropic={anthropic_side}");
    }
}

// ---------------------------------------------------------------- errors that say the fix

/// A 404 names the URL tried and what the base URL should be: `/v1` missing, or the whole
/// endpoint given as the base URL.
#[tokio::test]
async fn a_404_names_the_url_tried_and_the_likely_fix() {
    let not_found = Reply::raw(404, "404 page not found");
    let messages = [Message::user("hello")];
    let server = Server::start(vec![not_found.clone()]).await;
    for (suffix, tried, fix) in [
        ("", "/chat/completions", "try the base URL `http://"),
        (
            "/v1/chat/completions",
            "/v1/chat/completions/chat/completions",
            "the base URL is the whole endpoint",
        ),
        ("/v1", "/v1/chat/completions", "serves model `gpt-4.1-mini`"),
    ] {
        let model = OpenAiModel::new("gpt-4.1-mini", config(&server, suffix)).expect("client");
        let err = model
            .complete(request(&messages, &[]))
            .await
            .expect_err("404");
        let text = err.to_string();
        assert!(
            matches!(err, ModelError::Http { status: 404, .. }),
            "{text}"
        );
        assert!(text.contains("404 page not found"), "{text}");
        assert!(
            text.contains(&format!("{}{tried}", server.base)),
            "{suffix}: {text}"
        );
        assert!(text.contains(fix), "{suffix}: {text}");
        if suffix.is_empty() {
            assert!(text.contains(&format!("`{}/v1`", server.base)), "{text}");
        }
    }
    let model = AnthropicModel::new("claude-sonnet-4-5", config(&server, "/v1")).expect("client");
    let err = model
        .complete(request(&messages, &[]))
        .await
        .expect_err("404");
    let text = err.to_string();
    assert!(
        text.contains(&format!("{}/v1/v1/messages", server.base)),
        "{text}"
    );
    assert!(text.contains(&format!("try `{}`", server.base)), "{text}");
    assert!(!text.contains(KEY));
}

/// A base URL without a scheme is refused when the model is made: no request, no retries.
#[tokio::test]
async fn a_base_url_without_a_scheme_is_refused_at_once() {
    for base in [
        "localhost:8080/v1",
        "127.0.0.1:11434/v1",
        "api.openai.com/v1",
    ] {
        let started = Instant::now();
        let e = OpenAiModel::new("m", ProviderConfig::new(base)).expect_err(base);
        assert!(
            matches!(&e, ModelError::Config(m) if m.contains("has no scheme") && m.contains(&format!("`http://{base}`"))),
            "{e}"
        );
        assert!(AnthropicModel::new("m", ProviderConfig::new(base)).is_err());
        assert!(started.elapsed() < Duration::from_millis(500));
    }
}

// ---------------------------------------------------------------- timeouts and retries

/// Against a loopback host a timeout is final by default (a slow local model must not make
/// the wait four times as long); other failures are still retried.
#[tokio::test]
async fn a_timeout_against_a_local_server_is_not_retried_by_default() {
    let slow = text_answer().delayed(Duration::from_secs(3));
    let server = Server::start(vec![slow]).await;
    let cfg = config(&server, "/v1")
        .timeout(Duration::from_millis(300))
        .max_retries(3);
    let model = OpenAiModel::new("m", cfg).expect("client");
    let messages = [Message::user("hello")];
    let started = Instant::now();
    let err = model
        .complete(request(&messages, &[]))
        .await
        .expect_err("timeout");
    assert!(matches!(err, ModelError::Timeout { .. }), "{err:?}");
    assert_eq!(server.received().len(), 1, "not retried");
    assert!(started.elapsed() < Duration::from_secs(1));
    // A 503 is still retried against the same host.
    let server = Server::start(vec![Reply::raw(503, "busy"), text_answer()]).await;
    let model = OpenAiModel::new("m", config(&server, "/v1")).expect("client");
    model
        .complete(request(&messages, &[]))
        .await
        .expect("retried");
    assert_eq!(server.received().len(), 2);
}

// ---------------------------------------------------------------- Retry-After

/// A `Retry-After` seen by one call pauses every call of the same rate limit: a second call
/// started while the first waits reaches the server only once the wait is over.
#[tokio::test]
async fn a_retry_after_seen_by_one_call_pauses_every_caller() {
    let server = Server::start(vec![
        Reply::json(429, json!({"error": {"message": "slow down"}})).header("retry-after", "1"),
        text_answer(),
    ])
    .await;
    let cfg = config(&server, "/v1").max_retry_after(Duration::from_secs(1));
    let model = Arc::new(RateLimited::new(
        Arc::new(OpenAiModel::new("m", cfg).expect("client")),
        RateLimits::default(),
    ));
    let first = {
        let model = model.clone();
        tokio::spawn(async move {
            let messages = [Message::user("first")];
            model.complete(request(&messages, &[])).await.map(|_| ())
        })
    };
    // Until the first call has seen its 429.
    let t0 = Instant::now();
    while server.received().is_empty() && t0.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let messages = [Message::user("second")];
    model
        .complete(request(&messages, &[]))
        .await
        .expect("second");
    first.await.expect("joined").expect("first");
    let got = server.received();
    assert_eq!(got.len(), 3);
    for later in &got[1..] {
        let after = later.at.duration_since(got[0].at);
        assert!(
            after >= Duration::from_millis(900),
            "{after:?}: {}",
            later.body["messages"]
        );
    }
}

/// The handle is the API: a request given one reports the server's wait to it.
#[tokio::test]
async fn a_transport_reports_retry_after_to_the_requests_handle() {
    let server = Server::start(vec![
        Reply::raw(503, "overloaded").header("retry-after", "0.3"),
        text_answer(),
    ])
    .await;
    let model = openai(&server);
    let handle = RetryAfter::new();
    let messages = [Message::user("hello")];
    let watcher = handle.clone();
    let seen = tokio::spawn(async move {
        let t0 = Instant::now();
        while watcher.remaining().is_zero() && t0.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        !watcher.remaining().is_zero()
    });
    model
        .complete(request(&messages, &[]).with_retry_after(&handle))
        .await
        .expect("retried");
    assert!(seen.await.expect("joined"), "the wait was reported");
}

// ---------------------------------------------------------------- a third provider

/// The transport is public: a provider this crate does not know gets the key in its own
/// header, its fixed headers, a redacted body and typed decoding.
#[tokio::test]
async fn a_third_provider_on_the_public_transport() {
    let server = Server::start(vec![Reply::json(
        200,
        json!({"text": "hi", "n": 3, "new": true}),
    )])
    .await;
    let cfg = ProviderConfig::new(format!("{}/api", server.base)).api_key(ApiKey::new(KEY));
    let transport = Transport::new("echo", cfg)
        .expect("transport")
        .key_header(KeyHeader::Named("x-echo-key"))
        .header("echo-version", "2")
        .expect("a valid header");
    #[derive(serde::Deserialize)]
    struct Answer<'a> {
        text: &'a str,
        n: u32,
    }
    let bytes = transport
        .post(
            "/generate",
            &json!({"prompt": format!("leaked {KEY}")}),
            None,
        )
        .await
        .expect("answered");
    let answer: Answer<'_> = transport.decode(&bytes, "an echo answer").expect("decoded");
    assert_eq!((answer.text, answer.n), ("hi", 3));
    let got = &server.received()[0];
    assert_eq!(got.path, "/api/generate");
    assert_eq!(got.headers["x-echo-key"], KEY);
    assert_eq!(got.headers["echo-version"], "2");
    assert!(!got.headers.contains_key("authorization"));
    assert_eq!(got.body["prompt"], "leaked ***");
    let wrong = transport.decode::<Answer<'_>>(br#"{"text": 1}"#, "an echo answer");
    assert!(matches!(wrong, Err(ModelError::MalformedResponse { .. })));
    assert!(transport.clone().header("bad\nname", "x").is_err());
}

// ---------------------------------------------------------------- prompt caching

/// Every `cache_control` in a body, with where it is.
fn breakpoints(body: &Value, at: &str, out: &mut Vec<(String, Value)>) {
    match body {
        Value::Object(m) => {
            for (k, v) in m {
                if k == "cache_control" {
                    out.push((at.to_string(), v.clone()));
                } else {
                    breakpoints(v, &format!("{at}/{k}"), out);
                }
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                breakpoints(v, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// On by default: breakpoints on the last tool, the system prompt, the latest message's
/// last block and the one the call before marked, on every turn, never more than the four the API takes; the tools and the
/// system prompt are the same bytes on every turn; `1h` sets the TTL; `Off` sends none.
#[tokio::test]
async fn anthropic_marks_the_stable_prefix_and_the_latest_message() {
    let server = Server::start(vec![anthropic_text_answer()]).await;
    let model = AnthropicModel::new("claude-sonnet-4-5", config(&server, "")).expect("client");
    let mut tools = tools();
    tools.push(subcontract::model::ToolDefinition {
        name: "grep".into(),
        description: "Searches the workspace.".into(),
        input_schema: Arc::new(json!({"type": "object"})),
    });
    let (first, second) = (conversation(1), conversation(2));
    for convo in [&first, &second] {
        model
            .complete(request(convo, &tools))
            .await
            .expect("answered");
    }
    let got = server.received();
    for (r, last_message) in got.iter().zip([0, 2]) {
        let mut marks = Vec::new();
        breakpoints(&r.body, "", &mut marks);
        let places: Vec<&str> = marks.iter().map(|(at, _)| at.as_str()).collect();
        let last_block = r.body["messages"][last_message]["content"]
            .as_array()
            .map_or(0, |c| c.len() - 1);
        let mut expected = vec!["/system/0".to_string()];
        if last_message >= 2 {
            // Where the call before put its latest breakpoint.
            let before = r.body["messages"][last_message - 2]["content"]
                .as_array()
                .map_or(0, |c| c.len() - 1);
            expected.push(format!("/messages/{}/content/{before}", last_message - 2));
        }
        expected.push(format!("/messages/{last_message}/content/{last_block}"));
        expected.push("/tools/1".to_string());
        assert_eq!(places, expected, "{}", r.body);
        assert!(marks.len() <= 4);
        assert!(marks
            .iter()
            .all(|(_, m)| *m == json!({"type": "ephemeral"})));
        assert_eq!(r.body["system"][0]["text"], "You are a careful researcher.");
    }
    // The cached prefix is byte-stable across turns.
    assert_eq!(
        got[0].body["tools"].to_string(),
        got[1].body["tools"].to_string()
    );
    assert_eq!(
        got[0].body["system"].to_string(),
        got[1].body["system"].to_string()
    );

    let long = AnthropicModel::new("claude-sonnet-4-5", config(&server, ""))
        .expect("client")
        .prompt_cache(PromptCache::OneHour);
    long.complete(request(&second, &tools))
        .await
        .expect("answered");
    let off = AnthropicModel::new("claude-sonnet-4-5", config(&server, ""))
        .expect("client")
        .prompt_cache(PromptCache::Off);
    off.complete(request(&second, &tools))
        .await
        .expect("answered");
    let got = server.received();
    let mut marks = Vec::new();
    breakpoints(&got[2].body, "", &mut marks);
    assert_eq!(marks.len(), 4);
    assert!(marks
        .iter()
        .all(|(_, m)| *m == json!({"type": "ephemeral", "ttl": "1h"})));
    let mut marks = Vec::new();
    breakpoints(&got[3].body, "", &mut marks);
    assert!(marks.is_empty(), "{marks:?}");
    assert_eq!(got[3].body["system"], "You are a careful researcher.");
}

/// OpenAI-compatible: one `prompt_cache_key` per prefix (tools and system prompt), the same
/// on every turn, another for another system prompt, none when off.
#[tokio::test]
async fn openai_routes_one_prefix_to_one_cache_key() {
    let server = Server::start(vec![text_answer()]).await;
    let model = openai(&server);
    let tools = tools();
    let (first, second) = (conversation(1), conversation(2));
    model
        .complete(request(&first, &tools))
        .await
        .expect("answered");
    model
        .complete(request(&second, &tools))
        .await
        .expect("answered");
    model
        .complete(subcontract::model::ModelRequest::new(
            "Another spec.",
            &first,
            &tools,
            64,
        ))
        .await
        .expect("answered");
    model
        .clone()
        .prompt_cache(PromptCache::Off)
        .complete(request(&first, &tools))
        .await
        .expect("answered");
    let got = server.received();
    let key = got[0].body["prompt_cache_key"]
        .as_str()
        .expect("a key")
        .to_string();
    assert!(key.starts_with("subcontract-"), "{key}");
    assert_eq!(
        got[1].body["prompt_cache_key"],
        key.as_str(),
        "same prefix, same key"
    );
    assert_ne!(
        got[2].body["prompt_cache_key"],
        key.as_str(),
        "another system prompt"
    );
    assert!(got[3].body.get("prompt_cache_key").is_none());
    validate_against_openapi(&got.iter().map(|r| r.body.clone()).collect::<Vec<_>>());
}
