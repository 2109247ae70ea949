//! Both HTTP providers against a real local HTTP/1.1 server that speaks their wire formats and
//! records what it receives.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use subcontract::model::{
    Arguments, Message, Model, ModelError, ModelRequest, StopReason, ToolCall, ToolDefinition,
    ToolResult,
};
use subcontract::provider::{AnthropicModel, ApiKey, OpenAiModel, ProviderConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub(crate) const KEY: &str = "sk-test-SECRET-0123456789";

/// One canned HTTP answer.
#[derive(Clone)]
pub(crate) struct Reply {
    status: u16,
    body: String,
    headers: Vec<(String, String)>,
    delay: Duration,
    /// Sent without a content-length, delimited by closing the connection.
    unsized_body: bool,
}

impl Reply {
    pub(crate) fn json(status: u16, body: Value) -> Self {
        Reply {
            status,
            body: body.to_string(),
            headers: Vec::new(),
            delay: Duration::ZERO,
            unsized_body: false,
        }
    }
    pub(crate) fn raw(status: u16, body: &str) -> Self {
        Reply {
            status,
            body: body.to_string(),
            headers: Vec::new(),
            delay: Duration::ZERO,
            unsized_body: false,
        }
    }
    fn unsized_body(mut self) -> Self {
        self.unsized_body = true;
        self
    }
    pub(crate) fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
    pub(crate) fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) path: String,
    pub(crate) headers: HashMap<String, String>,
    pub(crate) body: Value,
    /// When it was read.
    pub(crate) at: std::time::Instant,
}

/// A local server answering with `replies` in order (the last one repeats).
pub(crate) struct Server {
    pub(crate) base: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Server {
    pub(crate) async fn start(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        tokio::spawn(async move {
            let mut n = 0usize;
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let reply = replies[n.min(replies.len() - 1)].clone();
                n += 1;
                let log = log.clone();
                tokio::spawn(async move {
                    let Some(request) = read_request(&mut socket).await else {
                        return;
                    };
                    log.lock().expect("log lock").push(request);
                    tokio::time::sleep(reply.delay).await;
                    let mut head = format!(
                        "HTTP/1.1 {} X\r\ncontent-type: application/json\r\nconnection: close\r\n",
                        reply.status,
                    );
                    if !reply.unsized_body {
                        head.push_str(&format!("content-length: {}\r\n", reply.body.len()));
                    }
                    for (k, v) in &reply.headers {
                        head.push_str(&format!("{k}: {v}\r\n"));
                    }
                    head.push_str("\r\n");
                    let _ = socket.write_all(head.as_bytes()).await;
                    let _ = socket.write_all(reply.body.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        Server {
            base: format!("http://{addr}"),
            received,
        }
    }

    pub(crate) fn received(&self) -> Vec<Received> {
        self.received.lock().expect("log lock").clone()
    }
}

async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Received> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_string();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers.get("content-length")?.parse().ok()?;
    while buf.len() < header_end + len {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buf[header_end..header_end + len]).ok()?;
    Some(Received {
        path,
        headers,
        body,
        at: std::time::Instant::now(),
    })
}

pub(crate) fn config(server: &Server, base_suffix: &str) -> ProviderConfig {
    ProviderConfig::new(format!("{}{base_suffix}", server.base))
        .api_key(ApiKey::new(KEY))
        .timeout(Duration::from_secs(5))
        .max_retries(2)
        .backoff(Duration::from_millis(1), Duration::from_millis(5))
}

pub(crate) fn openai(server: &Server) -> OpenAiModel {
    OpenAiModel::new("gpt-4.1-mini", config(server, "/v1")).expect("client")
}

/// Without prompt caching, so that bodies compare exactly; `provider_wire` tests the
/// breakpoints.
pub(crate) fn anthropic(server: &Server) -> AnthropicModel {
    AnthropicModel::new("claude-sonnet-4-5", config(server, ""))
        .expect("client")
        .prompt_cache(subcontract::provider::PromptCache::Off)
}

pub(crate) fn tools() -> Vec<ToolDefinition> {
    vec![ToolDefinition {
        name: "read_file".into(),
        description: "Reads a file of the workspace.".into(),
        input_schema: Arc::new(json!({
            "type": "object",
            "properties": {"path": {"type": "string", "maxLength": 200}},
            "required": ["path"],
            "additionalProperties": false
        })),
    }]
}

pub(crate) fn request<'a>(
    messages: &'a [Message],
    tools: &'a [ToolDefinition],
) -> ModelRequest<'a> {
    ModelRequest::new("You are a careful researcher.", messages, tools, 1024)
}

/// Asserts that no rendering of `err` shows the key.
pub(crate) fn assert_no_key(err: &ModelError) {
    assert!(!format!("{err}").contains(KEY), "{err}");
    assert!(!format!("{err:?}").contains(KEY), "{err:?}");
}

/// The conversation of the three-turn exchange, as the run loop would build it.
pub(crate) fn conversation(turn: usize) -> Vec<Message> {
    let mut messages = vec![Message::user("What does lib.rs export?")];
    if turn >= 2 {
        messages.push(Message::Assistant {
            text: Some("Let me look.".into()),
            tool_calls: vec![
                ToolCall {
                    id: "call_1".into(),
                    name: "read_file".into(),
                    arguments: Arguments::Value(json!({"path": "src/lib.rs"})),
                },
                // Held as text, as the OpenAI provider hands arguments over: OpenAI gets the
                // text back verbatim, Anthropic an `input` object.
                ToolCall {
                    id: "call_2".into(),
                    name: "read_file".into(),
                    arguments: Arguments::Text(r#"{"path": "missing.rs"}"#.into()),
                },
            ],
        });
        messages.push(Message::ToolResults {
            results: vec![
                ToolResult {
                    call_id: "call_1".into(),
                    content: "pub mod model;".into(),
                    is_error: false,
                },
                ToolResult {
                    call_id: "call_2".into(),
                    content: "no such file".into(),
                    is_error: true,
                },
            ],
            note: Some("1 of 2 tool calls failed".into()),
        });
    }
    messages
}

// ---------------------------------------------------------------- OpenAI

pub(crate) fn openai_completion(message: Value, finish_reason: &str) -> Value {
    json!({
        "id": "chatcmpl-123",
        "object": "chat.completion",
        "created": 1_741_569_952,
        "model": "gpt-4.1-mini-2025-04-14",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29},
    })
}

pub(crate) fn openai_tool_call_message(calls: &[(&str, &str)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, args)| {
            json!({"id": id, "type": "function", "function": {"name": "read_file", "arguments": args}})
        })
        .collect();
    json!({"role": "assistant", "content": "Let me look.", "tool_calls": calls, "refusal": null})
}

/// Validates an OpenAI request body against `CreateChatCompletionRequest` of OpenAI's
/// published OpenAPI document (the request schema and what it references, kept as a fixture).
pub(crate) fn validate_against_openapi(bodies: &[Value]) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/openai/chat-completion-request.schema.json");
    let text = std::fs::read_to_string(&path).expect("the OpenAPI fixture is in the repository");
    let root: Value = serde_json::from_str(&text).expect("the OpenAPI fixture is JSON");
    let validator = jsonschema::validator_for(&root).expect("the request schema compiles");
    // The schema is not vacuous: a tool message without `tool_call_id` is refused.
    let wrong =
        json!({"model": "m", "messages": [{"role": "tool", "content": "x", "call_id": "c"}]});
    assert!(
        !validator.is_valid(&wrong),
        "the OpenAPI schema accepted {wrong}"
    );
    // The request schema allows fields it does not name, so a misspelt one (`tool_choise`)
    // would pass: every field sent must be one the document names.
    let known = request_fields(&root);
    assert!(
        known.contains("tool_choice") && known.contains("seed"),
        "{known:?}"
    );
    for body in bodies {
        let errors: Vec<String> = validator.iter_errors(body).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:#?}\nbody: {body:#}");
        for field in body.as_object().expect("a JSON object").keys() {
            assert!(
                known.contains(field.as_str()),
                "`{field}` is not a request field"
            );
        }
    }
}

/// The properties `CreateChatCompletionRequest` names, through its `allOf`s and `$ref`s.
fn request_fields(root: &Value) -> std::collections::HashSet<String> {
    fn walk(root: &Value, schema: &Value, out: &mut std::collections::HashSet<String>, depth: u32) {
        if depth > 16 {
            return;
        }
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            if let Some(target) = r.strip_prefix('#').and_then(|p| root.pointer(p)) {
                walk(root, target, out, depth + 1);
            }
        }
        for part in schema
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            walk(root, part, out, depth + 1);
        }
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            out.extend(props.keys().cloned());
        }
    }
    let mut out = std::collections::HashSet::new();
    walk(root, root, &mut out, 0);
    out
}

#[tokio::test]
async fn openai_three_turn_tool_exchange() {
    let server = Server::start(vec![
        Reply::json(
            200,
            openai_completion(
                openai_tool_call_message(&[
                    ("call_1", r#"{"path":"src/lib.rs"}"#),
                    ("call_2", r#"{"path":"missing.rs"}"#),
                ]),
                "tool_calls",
            ),
        ),
        Reply::json(
            200,
            openai_completion(
                json!({"role": "assistant", "content": "It exports `model`.", "refusal": null}),
                "stop",
            ),
        ),
        Reply::json(
            200,
            openai_completion(
                json!({"role": "assistant", "content": "Done.", "refusal": null}),
                "length",
            ),
        ),
    ])
    .await;
    let model = openai(&server);
    let tools = tools();

    let first = conversation(1);
    let r1 = model
        .complete(request(&first, &tools))
        .await
        .expect("turn 1");
    assert_eq!(r1.stop_reason, StopReason::ToolUse);
    assert_eq!(r1.text.as_deref(), Some("Let me look."));
    assert_eq!(r1.tool_calls.len(), 2);
    assert_eq!(r1.tool_calls[0].id, "call_1");
    assert_eq!(r1.tool_calls[0].name, "read_file");
    // Kept as the text the model sent; the run loop parses it when it handles the call.
    let Arguments::Text(args) = &r1.tool_calls[0].arguments else {
        panic!("arguments kept as text: {:?}", r1.tool_calls[0].arguments);
    };
    assert_eq!(
        serde_json::from_str::<Value>(args).expect("JSON"),
        json!({"path": "src/lib.rs"})
    );
    assert_eq!(r1.usage.input_tokens, 19);
    assert_eq!(r1.usage.output_tokens, 10);

    let second = conversation(2);
    let r2 = model
        .complete(request(&second, &tools))
        .await
        .expect("turn 2");
    assert_eq!(r2.stop_reason, StopReason::EndTurn);
    assert_eq!(r2.text.as_deref(), Some("It exports `model`."));
    assert!(r2.tool_calls.is_empty());

    let mut third = second.clone();
    third.push(Message::Assistant {
        text: r2.text.clone(),
        tool_calls: vec![],
    });
    third.push(Message::user("Say done."));
    let r3 = model.complete(request(&third, &[])).await.expect("turn 3");
    assert_eq!(r3.stop_reason, StopReason::MaxTokens);

    let got = server.received();
    assert_eq!(got.len(), 3);
    for r in &got {
        assert_eq!(r.path, "/v1/chat/completions");
        assert_eq!(r.headers["authorization"], format!("Bearer {KEY}"));
        assert_eq!(r.headers["content-type"], "application/json");
        assert_eq!(r.body["model"], "gpt-4.1-mini");
        assert_eq!(r.body["max_completion_tokens"], 1024);
        assert!(r.body.get("max_tokens").is_none());
    }
    let b1 = &got[0].body;
    assert_eq!(
        b1["messages"][0],
        json!({"role": "system", "content": "You are a careful researcher."})
    );
    assert_eq!(
        b1["messages"][1],
        json!({"role": "user", "content": "What does lib.rs export?"})
    );
    let tool = &b1["tools"][0];
    assert_eq!(tool["type"], "function");
    assert_eq!(tool["function"]["name"], "read_file");
    assert_eq!(
        tool["function"]["description"],
        "Reads a file of the workspace."
    );
    assert_eq!(tool["function"]["parameters"], *tools[0].input_schema);

    let m = b1["messages"].as_array().map(Vec::len);
    assert_eq!(m, Some(2));
    let m2 = got[1].body["messages"]
        .as_array()
        .expect("messages")
        .clone();
    let roles: Vec<&str> = m2
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "tool", "user"]
    );
    assert_eq!(m2[2]["content"], "Let me look.");
    let call = &m2[2]["tool_calls"][0];
    assert_eq!(call["id"], "call_1");
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "read_file");
    let args = call["function"]["arguments"]
        .as_str()
        .expect("arguments is a JSON string");
    assert_eq!(
        serde_json::from_str::<Value>(args).expect("JSON"),
        json!({"path": "src/lib.rs"})
    );
    assert_eq!(
        m2[2]["tool_calls"][1]["function"]["arguments"],
        r#"{"path": "missing.rs"}"#
    );
    assert_eq!(
        m2[3],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "pub mod model;"})
    );
    assert_eq!(m2[4]["tool_call_id"], "call_2");
    assert_eq!(m2[4]["content"], "ERROR: no such file");
    assert_eq!(
        m2[5],
        json!({"role": "user", "content": "1 of 2 tool calls failed"})
    );
    assert!(
        got[2].body.get("tools").is_none(),
        "no tools, no `tools` field"
    );

    validate_against_openapi(&got.iter().map(|r| r.body.clone()).collect::<Vec<_>>());
}

#[tokio::test]
async fn openai_invalid_arguments_pass_through_as_a_string() {
    let raw = r#"{"path": "src/lib.rs""#;
    let server = Server::start(vec![
        Reply::json(
            200,
            openai_completion(openai_tool_call_message(&[("call_9", raw)]), "tool_calls"),
        ),
        Reply::json(
            200,
            openai_completion(json!({"role": "assistant", "content": "ok"}), "stop"),
        ),
    ])
    .await;
    let model = openai(&server);
    let tools = tools();
    let mut messages = conversation(1);
    let r = model
        .complete(request(&messages, &tools))
        .await
        .expect("turn");
    assert_eq!(r.tool_calls[0].arguments, Arguments::Text(raw.to_string()));
    // The repair turn: the bad call goes back with an error result.
    messages.push(Message::Assistant {
        text: None,
        tool_calls: r.tool_calls.clone(),
    });
    messages.push(Message::ToolResults {
        results: vec![ToolResult {
            call_id: "call_9".into(),
            content: "arguments are not valid JSON".into(),
            is_error: true,
        }],
        note: None,
    });
    model
        .complete(request(&messages, &tools))
        .await
        .expect("repair turn");
    let body = &server.received()[1].body;
    let assistant = &body["messages"][2];
    assert_eq!(assistant["content"], Value::Null);
    // Not JSON, so it goes back as a JSON string literal: `arguments` stays JSON text for
    // servers that parse it.
    let sent = assistant["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .expect("string");
    assert_eq!(
        serde_json::from_str::<Value>(sent).expect("valid JSON text"),
        Value::String(raw.into())
    );
    validate_against_openapi(std::slice::from_ref(body));
}

// ---------------------------------------------------------------- Anthropic

pub(crate) fn anthropic_message(content: Value, stop_reason: &str) -> Value {
    json!({
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": {"input_tokens": 2095, "output_tokens": 503},
    })
}

#[tokio::test]
async fn anthropic_three_turn_tool_exchange() {
    let server = Server::start(vec![
        Reply::json(
            200,
            anthropic_message(
                json!([
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "src/lib.rs"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "missing.rs"}},
                ]),
                "tool_use",
            ),
        ),
        Reply::json(200, anthropic_message(json!([{"type": "text", "text": "It exports `model`."}]), "end_turn")),
        Reply::json(200, anthropic_message(json!([{"type": "text", "text": "Do"}]), "max_tokens")),
    ])
    .await;
    let model = anthropic(&server);
    let tools = tools();

    let first = conversation(1);
    let r1 = model
        .complete(request(&first, &tools))
        .await
        .expect("turn 1");
    assert_eq!(r1.stop_reason, StopReason::ToolUse);
    assert_eq!(r1.text.as_deref(), Some("Let me look."));
    assert_eq!(r1.tool_calls.len(), 2);
    assert_eq!(r1.tool_calls[1].id, "toolu_2");
    // `input` is kept as the JSON text it arrived as.
    let Arguments::Text(input) = &r1.tool_calls[0].arguments else {
        panic!("input kept as text: {:?}", r1.tool_calls[0].arguments);
    };
    assert_eq!(
        serde_json::from_str::<Value>(input).expect("JSON"),
        json!({"path": "src/lib.rs"})
    );
    assert_eq!((r1.usage.input_tokens, r1.usage.output_tokens), (2095, 503));

    let mut second = conversation(2);
    // IDs of this provider.
    if let Message::Assistant { tool_calls, .. } = &mut second[1] {
        tool_calls[0].id = "toolu_1".into();
        tool_calls[1].id = "toolu_2".into();
    }
    if let Message::ToolResults { results, .. } = &mut second[2] {
        results[0].call_id = "toolu_1".into();
        results[1].call_id = "toolu_2".into();
    }
    let r2 = model
        .complete(request(&second, &tools))
        .await
        .expect("turn 2");
    assert_eq!(r2.stop_reason, StopReason::EndTurn);
    assert_eq!(r2.text.as_deref(), Some("It exports `model`."));

    let mut third = second.clone();
    third.push(Message::user("And also say done.")); // follows the tool results: merged
    let r3 = model
        .complete(request(&third, &tools))
        .await
        .expect("turn 3");
    assert_eq!(r3.stop_reason, StopReason::MaxTokens);

    let got = server.received();
    assert_eq!(got.len(), 3);
    for r in &got {
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.headers["x-api-key"], KEY);
        assert_eq!(r.headers["anthropic-version"], "2023-06-01");
        assert_eq!(r.headers["content-type"], "application/json");
        assert!(!r.headers.contains_key("authorization"));
        assert_eq!(r.body["model"], "claude-sonnet-4-5");
        assert_eq!(r.body["max_tokens"], 1024);
        assert_eq!(r.body["system"], "You are a careful researcher.");
        assert_eq!(r.body["tools"][0]["name"], "read_file");
        assert_eq!(
            r.body["tools"][0]["description"],
            "Reads a file of the workspace."
        );
        assert_eq!(r.body["tools"][0]["input_schema"], *tools[0].input_schema);
        let roles: Vec<&str> = r.body["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| m["role"].as_str().unwrap_or("?"))
            .collect();
        assert!(
            roles.windows(2).all(|w| w[0] != w[1]),
            "roles alternate: {roles:?}"
        );
        assert!(!roles.contains(&"system"));
    }
    assert_eq!(
        got[0].body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "What does lib.rs export?"}]}])
    );
    let m2 = &got[1].body["messages"];
    assert_eq!(
        m2[1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "src/lib.rs"}},
            {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "missing.rs"}},
        ]})
    );
    assert_eq!(
        m2[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "pub mod model;", "is_error": false},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no such file", "is_error": true},
            {"type": "text", "text": "1 of 2 tool calls failed"},
        ]})
    );
    let m3 = got[2].body["messages"].as_array().expect("messages");
    assert_eq!(
        m3.len(),
        3,
        "the user text is merged into the tool-result turn"
    );
    assert_eq!(
        m3[2]["content"][3],
        json!({"type": "text", "text": "And also say done."})
    );
}

#[tokio::test]
async fn anthropic_repair_turn_round_trips_the_bad_call() {
    let server = Server::start(vec![Reply::json(
        200,
        anthropic_message(json!([{"type": "text", "text": "fixed"}]), "end_turn"),
    )])
    .await;
    let model = anthropic(&server);
    let tools = tools();
    // Arguments that arrived as invalid JSON (held as a string) must still go out as an
    // object, which the Messages API requires.
    let messages = vec![
        Message::user("go"),
        Message::Assistant {
            text: None,
            tool_calls: vec![ToolCall {
                id: "toolu_9".into(),
                name: "read_file".into(),
                arguments: Arguments::Text("{\"path\":".into()),
            }],
        },
        Message::ToolResults {
            results: vec![ToolResult {
                call_id: "toolu_9".into(),
                content: "arguments are not valid JSON".into(),
                is_error: true,
            }],
            note: Some("Call the tool again with valid arguments.".into()),
        },
    ];
    let r = model
        .complete(request(&messages, &tools))
        .await
        .expect("repair");
    assert_eq!(r.text.as_deref(), Some("fixed"));
    let body = &server.received()[0].body;
    assert!(body["messages"][1]["content"][0]["input"].is_object());
    assert_eq!(body["messages"][2]["content"][0]["is_error"], true);
}

// ---------------------------------------------------------------- failures, both providers

#[derive(Clone, Copy, Debug)]
enum Provider {
    OpenAi,
    Anthropic,
}

const PROVIDERS: [Provider; 2] = [Provider::OpenAi, Provider::Anthropic];

fn client(provider: Provider, config: ProviderConfig) -> Arc<dyn Model> {
    match provider {
        Provider::OpenAi => Arc::new(OpenAiModel::new("gpt-4.1-mini", config).expect("client")),
        Provider::Anthropic => {
            Arc::new(AnthropicModel::new("claude-sonnet-4-5", config).expect("client"))
        }
    }
}

fn base(provider: Provider) -> &'static str {
    match provider {
        Provider::OpenAi => "/v1",
        Provider::Anthropic => "",
    }
}

fn success(provider: Provider) -> Reply {
    match provider {
        Provider::OpenAi => Reply::json(
            200,
            openai_completion(json!({"role": "assistant", "content": "hi"}), "stop"),
        ),
        Provider::Anthropic => Reply::json(
            200,
            anthropic_message(json!([{"type": "text", "text": "hi"}]), "end_turn"),
        ),
    }
}

fn provider_error(provider: Provider, kind: &str, message: &str) -> Value {
    match provider {
        Provider::OpenAi => {
            json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
        }
        Provider::Anthropic => {
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
    }
}

async fn call(
    provider: Provider,
    server: &Server,
    config: ProviderConfig,
) -> Result<subcontract::model::ModelResponse, ModelError> {
    let _ = server;
    let model = client(provider, config);
    let messages = [Message::user("hello")];
    model.complete(request(&messages, &[])).await
}

#[tokio::test]
async fn rate_limit_honours_retry_after_then_succeeds() {
    for p in PROVIDERS {
        let server = Server::start(vec![
            Reply::json(429, provider_error(p, "rate_limit_error", "slow down"))
                .header("retry-after", "1"),
            success(p),
        ])
        .await;
        let started = Instant::now();
        let r = call(p, &server, config(&server, base(p)))
            .await
            .expect("retried");
        assert_eq!(r.text.as_deref(), Some("hi"), "{p:?}");
        assert_eq!(server.received().len(), 2, "{p:?}");
        assert!(
            started.elapsed() >= Duration::from_millis(900),
            "{p:?}: Retry-After ignored"
        );
    }
}

#[tokio::test]
async fn server_errors_are_retried_until_exhausted() {
    for p in PROVIDERS {
        let server = Server::start(vec![Reply::json(
            500,
            provider_error(p, "api_error", "internal trouble"),
        )])
        .await;
        let err = call(p, &server, config(&server, base(p)).max_retries(2))
            .await
            .expect_err("fails");
        assert_eq!(server.received().len(), 3, "{p:?}: 1 attempt + 2 retries");
        match &err {
            ModelError::Http {
                status: 500,
                message,
                ..
            } => assert_eq!(message, "internal trouble"),
            other => panic!("{p:?}: {other:?}"),
        }
        assert_no_key(&err);
    }
}

#[tokio::test]
async fn wrong_key_is_not_retried_and_the_key_never_shows() {
    for p in PROVIDERS {
        // The server echoes the key, as some do: it must not reach the error.
        let server = Server::start(vec![Reply::json(
            401,
            provider_error(
                p,
                "authentication_error",
                &format!("Incorrect API key provided: {KEY}"),
            ),
        )])
        .await;
        let cfg = config(&server, base(p));
        assert!(!format!("{cfg:?}").contains(KEY));
        let err = call(p, &server, cfg).await.expect_err("401");
        assert_eq!(server.received().len(), 1, "{p:?}: 401 is not retried");
        match &err {
            ModelError::Http {
                status: 401,
                message,
                ..
            } => {
                assert!(
                    message.starts_with("Incorrect API key provided"),
                    "{message}"
                )
            }
            other => panic!("{p:?}: {other:?}"),
        }
        assert_no_key(&err);
    }
    let openai = OpenAiModel::new(
        "m",
        ProviderConfig::new("http://127.0.0.1:1").api_key(ApiKey::new(KEY)),
    )
    .expect("client");
    let anthropic = AnthropicModel::new(
        "m",
        ProviderConfig::new("http://127.0.0.1:1").api_key(ApiKey::new(KEY)),
    )
    .expect("client");
    assert!(!format!("{openai:?}").contains(KEY));
    assert!(!format!("{anthropic:?}").contains(KEY));
    assert_eq!(format!("{}", ApiKey::new(KEY)), "ApiKey(***)");
}

#[tokio::test]
async fn malformed_and_truncated_bodies_are_errors() {
    for p in PROVIDERS {
        let truncated = match p {
            Provider::OpenAi => {
                r#"{"id":"chatcmpl-1","choices":[{"index":0,"message":{"role":"assis"#
            }
            Provider::Anthropic => r#"{"id":"msg_1","type":"message","content":[{"type":"te"#,
        };
        // JSON of the wrong shape whose parser message would quote the key it echoes.
        let echo = format!(r#"{{"content": "{KEY}", "choices": "{KEY}"}}"#);
        for body in [
            "<html>502 Bad Gateway</html>",
            truncated,
            r#"{"unexpected": true}"#,
            "",
            &echo,
        ] {
            let server = Server::start(vec![Reply::raw(200, body)]).await;
            let err = call(p, &server, config(&server, base(p)))
                .await
                .expect_err("malformed");
            assert!(
                matches!(err, ModelError::MalformedResponse { .. }),
                "{p:?} {body:?}: {err:?}"
            );
            assert_eq!(server.received().len(), 1, "{p:?}: not retried");
            assert_no_key(&err);
        }
    }
}

/// A redirect is never followed: the second server (another origin) receives nothing, neither
/// the key nor the conversation, and the error names where the redirect pointed (its origin
/// only: the path and query may carry a token).
#[tokio::test]
async fn redirects_are_not_followed_and_the_error_names_the_target_origin() {
    for p in PROVIDERS {
        for status in [307, 302, 301, 308] {
            let elsewhere = Server::start(vec![success(p)]).await;
            let target = format!("{}/v1/steal?token=SECRET-QUERY", elsewhere.base);
            let first =
                Server::start(vec![Reply::raw(status, "").header("location", &target)]).await;
            let err = call(p, &first, config(&first, base(p)))
                .await
                .expect_err("a redirect is an error");
            assert!(elsewhere.received().is_empty(), "{p:?} {status}: followed");
            assert_eq!(first.received().len(), 1, "{p:?} {status}: not retried");
            match &err {
                ModelError::Http {
                    status: got,
                    message,
                    ..
                } => {
                    assert_eq!(*got, status);
                    assert!(
                        message.contains(&format!("redirected to {}", elsewhere.base)),
                        "{message}"
                    );
                    assert!(!message.contains("SECRET-QUERY"), "{message}");
                    assert!(!message.contains("/steal"), "{message}");
                }
                other => panic!("{p:?} {status}: {other:?}"),
            }
            assert_no_key(&err);
        }
    }
}

/// A body past `max_response_bytes` is refused, whether its length is announced or it is
/// streamed until the connection closes; one at the cap is read.
#[tokio::test]
async fn response_bodies_are_capped() {
    for p in PROVIDERS {
        let fine = success(p).body;
        let cap = fine.len() + 100;
        // Valid answers padded with whitespace: without a cap they parse and succeed.
        let at_cap = format!("{fine}{}", " ".repeat(100));
        let past_cap = format!("{fine}{}", " ".repeat(20_000));
        for unsized_body in [false, true] {
            let reply = |body: &str| {
                let r = Reply::raw(200, body);
                if unsized_body {
                    r.unsized_body()
                } else {
                    r
                }
            };
            let server = Server::start(vec![reply(&at_cap)]).await;
            let cfg = config(&server, base(p)).max_response_bytes(cap);
            let ok = call(p, &server, cfg)
                .await
                .expect("a body at the cap is read");
            assert_eq!(ok.text.as_deref(), Some("hi"));

            let server = Server::start(vec![reply(&past_cap)]).await;
            let cfg = config(&server, base(p)).max_response_bytes(cap);
            let err = call(p, &server, cfg).await.expect_err("too large");
            match &err {
                ModelError::MalformedResponse { message, .. } => assert!(
                    message.contains(&format!("larger than {cap} bytes")),
                    "{p:?} unsized={unsized_body}: {message}"
                ),
                other => panic!("{p:?} unsized={unsized_body}: {other:?}"),
            }
            assert_eq!(server.received().len(), 1, "{p:?}: not retried");
        }
    }
    assert_eq!(
        ProviderConfig::new("http://x").max_response_bytes,
        subcontract::provider::DEFAULT_MAX_RESPONSE_BYTES
    );
}

#[tokio::test]
async fn slow_servers_time_out() {
    for p in PROVIDERS {
        let server = Server::start(vec![success(p).delayed(Duration::from_secs(3))]).await;
        // The server is on a loopback address, where a timeout is retried only when asked.
        let cfg = config(&server, base(p))
            .timeout(Duration::from_millis(300))
            .max_retries(1)
            .retry_timeouts(true);
        let started = Instant::now();
        let err = call(p, &server, cfg).await.expect_err("timeout");
        assert!(matches!(err, ModelError::Timeout { .. }), "{p:?}: {err:?}");
        assert_eq!(server.received().len(), 2, "{p:?}: a timeout is retried");
        assert!(started.elapsed() < Duration::from_secs(3));
        assert_no_key(&err);
    }
}

#[tokio::test]
async fn refused_connections_are_connection_errors() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    for p in PROVIDERS {
        let cfg = ProviderConfig::new(format!("http://{addr}"))
            .api_key(ApiKey::new(KEY))
            .max_retries(1)
            .backoff(Duration::from_millis(1), Duration::from_millis(2));
        let model = client(p, cfg);
        let messages = [Message::user("hello")];
        let err = model
            .complete(request(&messages, &[]))
            .await
            .expect_err("refused");
        assert!(
            matches!(err, ModelError::Connection { .. }),
            "{p:?}: {err:?}"
        );
        assert_no_key(&err);
    }
}

/// Strict mode: the schema goes out in the dialect strict mode accepts (closed, all required,
/// no length bounds), and the nulls it makes a model send for optional properties are removed
/// from the arguments before our own validation sees them.
#[tokio::test]
async fn openai_strict_mode_sends_the_strict_dialect_and_strips_its_nulls() {
    let server = Server::start(vec![Reply::json(
        200,
        openai_completion(
            json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "read_file", "arguments": "{\"path\":\"src/lib.rs\",\"start_line\":null}"}}]}),
            "tool_calls",
        ),
    )])
    .await;
    let model = openai(&server).strict(true);
    let tools = vec![ToolDefinition {
        name: "read_file".into(),
        description: "Reads a file of the workspace.".into(),
        input_schema: Arc::new(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "maxLength": 200},
                "start_line": {"type": "integer", "minimum": 1}
            },
            "required": ["path"],
            "additionalProperties": false
        })),
    }];
    let convo = conversation(1);
    let r = model
        .complete(request(&convo, &tools))
        .await
        .expect("a response");
    assert_eq!(
        r.tool_calls[0].arguments,
        Arguments::Value(json!({"path": "src/lib.rs"}))
    );
    let body = &server.received()[0].body;
    let f = &body["tools"][0]["function"];
    assert_eq!(f["strict"], true);
    let params = &f["parameters"];
    assert_eq!(params["required"], json!(["path", "start_line"]));
    assert!(params.to_string().find("maxLength").is_none(), "{params}");
    assert!(params["properties"]["path"]["description"]
        .as_str()
        .is_some_and(|d| d.contains("200")));
    validate_against_openapi(std::slice::from_ref(body));
}

/// Anthropic strict tool use: `strict: true` and a schema without the bounds it refuses.
#[tokio::test]
async fn anthropic_strict_mode_sends_the_strict_dialect() {
    let server = Server::start(vec![Reply::json(
        200,
        anthropic_message(json!([{"type": "text", "text": "Done."}]), "end_turn"),
    )])
    .await;
    let model = anthropic(&server).strict(true);
    let tools = tools();
    let convo = conversation(1);
    model
        .complete(request(&convo, &tools))
        .await
        .expect("a response");
    let tool = &server.received()[0].body["tools"][0];
    assert_eq!(tool["strict"], true);
    assert!(
        tool["input_schema"].to_string().find("maxLength").is_none(),
        "{tool}"
    );
    assert_eq!(tool["input_schema"]["required"], json!(["path"]));
}

/// A submission as each provider sends it, end to end through the run loop: the output's text
/// is checked on the text (a claim too long is sent back for repair, with the bad call in the
/// history in the provider's own form), then a valid one with escapes and spacing completes.
#[tokio::test]
async fn submissions_over_the_wire_are_checked_repaired_and_accepted() {
    let too_long =
        json!({"findings": [{"claim": "x".repeat(301), "source_ids": ["a"]}], "gaps": []});
    let valid = "{ \"findings\": [ { \"claim\": \"caf\\u00e9 \\\"ok\\\"\", \"source_ids\": [\"a\"] } ],\n  \"gaps\": [] }";
    let submit = |p: Provider, id: &str, text: &str| match p {
        Provider::OpenAi => openai_completion(
            json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [
                {"id": id, "type": "function",
                 "function": {"name": "submit_output", "arguments": text}}]}),
            "tool_calls",
        ),
        Provider::Anthropic => anthropic_message(
            json!([{"type": "tool_use", "id": id, "name": "submit_output",
                    "input": serde_json::from_str::<Value>(text).expect("JSON")}]),
            "tool_use",
        ),
    };
    for p in PROVIDERS {
        let server = Server::start(vec![
            Reply::json(200, submit(p, "call_1", &too_long.to_string())),
            Reply::json(200, submit(p, "call_2", valid)),
        ])
        .await;
        let model = client(p, config(&server, base(p)));
        let spec = subcontract::SubAgentSpec::dynamic(
            "research",
            json!({"type": "object"}),
            json!({"type": "object", "additionalProperties": false, "required": ["findings", "gaps"],
                   "properties": {
                       "findings": {"type": "array", "maxItems": 3, "items": {
                           "type": "object", "additionalProperties": false, "required": ["claim", "source_ids"],
                           "properties": {"claim": {"type": "string", "maxLength": 300},
                                          "source_ids": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 20}}}}},
                       "gaps": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 100}}}}),
        )
        .description("d")
        .system("s")
        .build()
        .expect("valid spec");
        let r = spec
            .run(&json!({}), &subcontract::Ctx::builder(model).build())
            .await;
        assert_eq!(r.outcome, subcontract::Outcome::Completed, "{p:?}: {r:?}");
        assert_eq!(r.turns, 2, "{p:?}");
        assert_eq!(
            r.output.expect("an output"),
            json!({"findings": [{"claim": "café \"ok\"", "source_ids": ["a"]}], "gaps": []}),
            "{p:?}"
        );
        // The second request carries the bad call and the repair request.
        let body = &server.received()[1].body;
        let text = body.to_string();
        assert!(text.contains("/findings/0/claim"), "{p:?}: {text:.300}");
        match p {
            Provider::OpenAi => {
                let sent = &body["messages"][2]["tool_calls"][0]["function"]["arguments"];
                assert_eq!(sent, &json!(too_long.to_string()), "verbatim text");
                validate_against_openapi(std::slice::from_ref(body));
            }
            Provider::Anthropic => {
                assert_eq!(body["messages"][1]["content"][0]["input"], too_long);
            }
        }
    }
}

// ---------------------------------------------------------------- Usage

/// Token counts in forms other than a plain integer are read as the numbers they are, saturate
/// past u64, or make the usage unreadable (charged by the run loop); a call is never counted
/// as free because of an odd count.
#[tokio::test]
async fn openai_usage_is_read_faithfully_or_refused() {
    let with_usage = |usage: Value| {
        let mut body = openai_completion(json!({"role": "assistant", "content": "Hi."}), "stop");
        body["usage"] = usage;
        Reply::json(200, body)
    };
    let messages = conversation(1);
    for (usage, input, output, cached) in [
        (
            json!({"prompt_tokens": 5000000.0, "completion_tokens": 7}),
            5_000_000,
            7,
            0,
        ),
        (
            json!({"prompt_tokens": "5000000", "completion_tokens": "7"}),
            5_000_000,
            7,
            0,
        ),
        (
            json!({"prompt_tokens": 2006, "completion_tokens": 300,
                   "prompt_tokens_details": {"cached_tokens": 1920}}),
            2006,
            300,
            1920,
        ),
    ] {
        let server = Server::start(vec![with_usage(usage.clone())]).await;
        let r = openai(&server)
            .complete(request(&messages, &[]))
            .await
            .expect("counts in any faithful form");
        assert_eq!(
            (
                r.usage.input_tokens,
                r.usage.output_tokens,
                r.usage.cache_read_tokens
            ),
            (input, output, cached),
            "{usage}"
        );
    }
    // A count past u64 saturates: never refused, which would make the call free.
    let server = Server::start(vec![with_usage(
        json!({"prompt_tokens": 1e30, "completion_tokens": 7}),
    )])
    .await;
    let r = openai(&server)
        .complete(request(&messages, &[]))
        .await
        .expect("a count past u64 saturates");
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (u64::MAX, 7));
    for usage in [
        json!({"prompt_tokens": 10, "completion_tokens": -1}),
        json!({"prompt_tokens": 10, "completion_tokens": 2.5}),
        json!({"prompt_tokens": "lots", "completion_tokens": 7}),
        json!({"prompt_tokens": 10, "completion_tokens": 7,
               "prompt_tokens_details": {"cached_tokens": 11}}),
        json!("5000000"),
    ] {
        let server = Server::start(vec![with_usage(usage.clone())]).await;
        let err = openai(&server)
            .complete(request(&messages, &[]))
            .await
            .expect_err("unreadable usage");
        assert!(
            matches!(err, ModelError::UnreadableUsage { .. }) && err.cost_unknown(),
            "{usage}: {err:?}"
        );
    }
}

/// Anthropic's `input_tokens` excludes the cache's tokens: ours counts all of them, with the
/// cache's apart so they are priced at their own rates; odd counts are read or unreadable, and
/// counts or sums past u64 saturate.
#[tokio::test]
async fn anthropic_usage_counts_cache_tokens_apart_and_never_wraps() {
    let with_usage = |usage: Value| {
        let mut body = anthropic_message(json!([{"type": "text", "text": "Hi."}]), "end_turn");
        body["usage"] = usage;
        Reply::json(200, body)
    };
    let messages = conversation(1);
    for (usage, expected) in [
        (
            json!({"input_tokens": 50, "cache_creation_input_tokens": 1000,
                   "cache_read_input_tokens": 2000, "output_tokens": 503}),
            (3050, 503, 2000, 1000),
        ),
        (
            json!({"input_tokens": 5000000.0, "output_tokens": "7"}),
            (5_000_000, 7, 0, 0),
        ),
    ] {
        let server = Server::start(vec![with_usage(usage.clone())]).await;
        let r = anthropic(&server)
            .complete(request(&messages, &[]))
            .await
            .expect("valid usage");
        let u = r.usage;
        assert_eq!(
            (
                u.input_tokens,
                u.output_tokens,
                u.cache_read_tokens,
                u.cache_write_tokens
            ),
            expected,
            "{usage}"
        );
    }
    // Past u64, a count or a sum saturates.
    for usage in [
        json!({"input_tokens": u64::MAX, "cache_read_input_tokens": 1, "output_tokens": 1}),
        json!({"input_tokens": 1e30, "output_tokens": 1}),
    ] {
        let server = Server::start(vec![with_usage(usage.clone())]).await;
        let r = anthropic(&server)
            .complete(request(&messages, &[]))
            .await
            .expect("saturated");
        assert_eq!(r.usage.input_tokens, u64::MAX, "{usage}");
    }
    for usage in [
        json!({"input_tokens": 1, "output_tokens": -3}),
        json!({"input_tokens": "many", "output_tokens": 3}),
        json!([1, 2]),
    ] {
        let server = Server::start(vec![with_usage(usage.clone())]).await;
        let err = anthropic(&server)
            .complete(request(&messages, &[]))
            .await
            .expect_err("unreadable usage");
        assert!(err.cost_unknown(), "{usage}: {err:?}");
    }
}

/// Events reach sinks this crate does not know (a caller's own): an event whose error quotes a
/// registered key carries `***` instead, to every sink.
#[tokio::test]
async fn events_never_carry_a_key() {
    use subcontract::model::{ScriptStep, ScriptedModel};
    use subcontract::{Ctx, MemorySink};
    const ECHOED: &str = "sk-event-echo-SECRET-0123456789";
    let _key = ApiKey::new(ECHOED);
    let model = Arc::new(ScriptedModel::from_fn("scripted:echo", |_| {
        ScriptStep::error(ModelError::Exhausted(format!("the server said: {ECHOED}")))
    }));
    let sink = Arc::new(MemorySink::new());
    let ctx = Ctx::builder(model).events(sink.clone()).build();
    let spec = crate::common::research_spec("echo", &[]);
    let r = spec.run(&json!({"question": "Anything here?"}), &ctx).await;
    assert!(r.error.is_some(), "the run failed");
    let events = sink.events();
    let text = serde_json::to_string(&events).unwrap();
    assert!(!text.contains(ECHOED), "{text}");
    assert!(text.contains("the server said: ***"), "{text}");
}

/// A conversation never carries a key to a provider: one that reached it (a sub-agent's output
/// quoting what another provider's model echoed) is sent as `***`; the header still has it.
#[tokio::test]
async fn request_bodies_never_carry_a_key() {
    for p in PROVIDERS {
        let server = Server::start(vec![success(p)]).await;
        let model = client(p, config(&server, base(p)));
        let messages = [Message::user(format!("the other agent said {KEY}"))];
        model
            .complete(request(&messages, &[]))
            .await
            .expect("answered");
        let got = server.received();
        let body = got[0].body.to_string();
        assert!(!body.contains(KEY), "{p:?}: {body}");
        assert!(body.contains("the other agent said ***"), "{p:?}: {body}");
        let auth = got[0]
            .headers
            .get("x-api-key")
            .or_else(|| got[0].headers.get("authorization"))
            .expect("the key header");
        assert!(auth.ends_with(KEY), "{p:?}");
    }
}

/// A user meets these first: a closed port, a base URL without `/v1` that a web page answers.
/// The error names the address (never its key or query) and how many attempts were made, and
/// an HTML page is one line with the hint that fits, not the page.
#[tokio::test]
async fn connection_and_html_errors_say_where_and_what_to_fix() {
    use subcontract::Model;
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let closed = ProviderConfig::new(format!("http://user:sekrit@127.0.0.1:{port}/v1"))
        .api_key(ApiKey::new(KEY))
        .max_retries(2)
        .backoff(Duration::from_millis(1), Duration::from_millis(5));
    let err = OpenAiModel::new("m", closed)
        .unwrap()
        .complete(request(&[Message::user("hi")], &[]))
        .await
        .unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.contains(&format!("POST http://127.0.0.1:{port}/v1/chat/completions")),
        "{shown}"
    );
    assert!(shown.contains("gave up after 3 attempts"), "{shown}");
    assert!(!shown.contains("sekrit"), "{shown}");
    assert_no_key(&err);

    let page = format!(
        "<!DOCTYPE HTML>\n<html><body>{}</body></html>",
        "<p>Directory listing</p>".repeat(200)
    );
    for status in [501, 200] {
        let server = Server::start(vec![Reply::raw(status, &page)]).await;
        let err = openai(&server)
            .complete(request(&[Message::user("hi")], &[]))
            .await
            .unwrap_err();
        let shown = err.to_string();
        assert!(shown.contains("an HTML page of"), "{status}: {shown}");
        assert!(
            shown.contains("with `/v1` for an OpenAI-compatible server"),
            "{status}: {shown}"
        );
        assert!(!shown.contains("Directory listing"), "{status}: {shown}");
        assert!(shown.len() < 400, "{status}: {shown}");
    }
}
