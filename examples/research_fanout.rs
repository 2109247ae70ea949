//! A host agent fans out to three `research_topic` sub-agents over this repository's own
//! files, offline: the models are scripted, the tools, budget, validation and events are real.
//!
//! - one sub-agent greps, reads, and submits findings citing the lines it found;
//! - one first submits an invalid answer, is told what to repair, and repairs it;
//! - one reads whole files until what is left of its 0.50 USD budget pays only for its
//!   answer: it answers with what it read, cut short by its budget, and the host uses it.
//!
//! Run: `cargo run --example research_fanout`

use std::sync::{Arc, Mutex};

use rust_decimal::Decimal;
use serde_json::{json, Value};
use subcontract::events::tree::{build_tree, render_tree};
use subcontract::model::{Message, ModelRequest, Price, PriceTable, ScriptStep, ScriptedModel};
use subcontract::spec::load_spec;
use subcontract::tool::workspace::Workspace;
use subcontract::{Ctx, MemorySink, SubAgentSpec, ToolSet};

const MODEL: &str = "scripted:demo";
const QUESTIONS: [&str; 3] = [
    "Which crate does this project use to validate JSON Schema?",
    "How does a budget charge a child's spend to its ancestors?",
    "Which async runtime drives the run loop, and where is it configured?",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(run())
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let root = env!("CARGO_MANIFEST_DIR");
    let research = load_spec(format!("{root}/specs/research_topic.toml"))?;
    let host = SubAgentSpec::dynamic(
        "host",
        json!({"type": "object"}),
        json!({"type": "string", "maxLength": 3900}),
    )
    .description("Answers the user's questions about this repository.")
    .system("You are the host. Delegate each independent question to research_topic, in parallel.")
    .tools(["research_topic"])
    .max_turns(4)
    .build()?;

    // The host holds the workspace tools and the sub-agent; each sub-agent gets only the
    // tools its spec names (read_file, grep), and nothing it could use to write.
    let mut tools = ToolSet::new();
    for t in Workspace::new(root)?.tools() {
        tools.insert(t)?;
    }
    tools.insert(research.as_tool())?;

    // gpt-4.1's list price, so the costs read like a real run's.
    let mut prices = PriceTable::new();
    prices.insert(
        MODEL,
        Price::per_mtok(Decimal::new(2, 0), Decimal::new(8, 0)),
    );

    let findings: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let model = Arc::new(ScriptedModel::from_fn(MODEL, {
        let findings = findings.clone();
        move |req| script(req, &findings)
    }));
    let events = Arc::new(MemorySink::new());
    let ctx = Ctx::builder(model)
        .tools(tools)
        .prices(prices)
        .events(events.clone())
        .budget(subcontract::Budget::new(Some(Decimal::ONE), None))
        .build();

    let result = host.run(&json!({"questions": QUESTIONS}), &ctx).await;
    println!(
        "== host outcome: {} after {} turns\n",
        result.outcome, result.turns
    );
    println!("== validated findings the host received\n");
    for (call, content) in findings.lock().map_err(|_| "poisoned")?.iter() {
        println!("{call}: {content}\n");
    }
    println!(
        "== host's answer\n\n{}\n",
        result
            .output
            .as_ref()
            .and_then(Value::as_str)
            .unwrap_or("(none)")
    );
    let tree = build_tree(&events.events());
    // The story this demo tells (see `script`): the reader nears the end of its budget and
    // answers with what it read, cut short; the host uses what it found.
    let cut = tree
        .iter()
        .flat_map(|r| &r.children)
        .find(|c| c.cut_short == Some(subcontract::Limit::Budget));
    let answered = result
        .output
        .as_ref()
        .and_then(Value::as_str)
        .is_some_and(|a| a.contains("tokio") && !a.contains("not answered"));
    if cut.is_none_or(|c| c.outcome != Some(subcontract::Outcome::Completed)) || !answered {
        return Err(
            "the reading sub-agent should answer, cut short by its budget, and the host use it"
                .into(),
        );
    }
    println!("== run tree (one line per run: outcome, turns, tokens, own and total cost, share)\n");
    print!("{}", render_tree(&tree));
    if let Some(root) = tree.first() {
        println!(
            "\n== cost share of each sub-agent (of {} USD in all)\n",
            root.total_cost_usd.round_dp(6)
        );
        for c in &root.children {
            println!(
                "{:<28} {:>6.1}%  {}",
                c.run_id,
                c.share * 100.0,
                c.outcome.map_or("?", |o| o.as_str())
            );
        }
    }
    Ok(())
}

fn last_results(req: &ModelRequest<'_>) -> Vec<(String, String, bool)> {
    match req.messages.last() {
        Some(Message::ToolResults { results, .. }) => results
            .iter()
            .map(|r| (r.call_id.clone(), r.content.clone(), r.is_error))
            .collect(),
        _ => Vec::new(),
    }
}

/// Paths (`path:line`) cited in a grep result.
fn cited(grep_output: &str, max: usize) -> Vec<String> {
    grep_output
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (path, line) = (parts.next()?, parts.next()?);
            line.parse::<u32>().ok().map(|n| format!("{path}:{n}"))
        })
        .take(max)
        .collect()
}

fn script(req: ModelRequest<'_>, seen: &Mutex<Vec<(String, String)>>) -> ScriptStep {
    let turn = req.messages.len().div_ceil(2);
    if req.system.starts_with("You are the host") {
        return match turn {
            1 => ScriptStep::tool_calls(
                QUESTIONS
                    .iter()
                    .map(|q| ("research_topic".to_string(), json!({"question": q})))
                    .collect(),
            )
            .with_usage(900, 120),
            _ => {
                let results = last_results(&req);
                let note = match req.messages.last() {
                    Some(Message::ToolResults { note, .. }) => note.clone(),
                    _ => None,
                };
                let mut answer = String::new();
                for (i, (id, content, is_error)) in results.iter().enumerate() {
                    if let Ok(mut s) = seen.lock() {
                        s.push((format!("{id} ({})", QUESTIONS[i]), content.clone()));
                    }
                    // A sub-agent cut short says so after its output, in a note.
                    let (output, cut_short) = match content.split_once("\n\nNote: ") {
                        Some((output, _)) => (output, true),
                        None => (content.as_str(), false),
                    };
                    let claims: Vec<String> = serde_json::from_str::<Value>(output)
                        .ok()
                        .and_then(|v| v["findings"].as_array().cloned())
                        .unwrap_or_default()
                        .iter()
                        .map(|f| {
                            format!(
                                "{} [{}]",
                                f["claim"].as_str().unwrap_or(""),
                                f["source_ids"][0].as_str().unwrap_or("")
                            )
                        })
                        .collect();
                    let line = if *is_error {
                        "not answered (see the run tree)".to_string()
                    } else if cut_short {
                        format!(
                            "{} (from a sub-agent cut short: it may be incomplete)",
                            claims.join("; ")
                        )
                    } else {
                        claims.join("; ")
                    };
                    answer.push_str(&format!("{}. {} {}\n", i + 1, QUESTIONS[i], line));
                }
                if let Some(n) = note {
                    answer.push_str(&format!("Note: {n}\n"));
                }
                ScriptStep::text(answer).with_usage(2_400, 260)
            }
        };
    }
    // A research_topic sub-agent: which one is in its first (and only) user message.
    let question = match req.messages.first() {
        Some(Message::User { text }) => text.clone(),
        _ => String::new(),
    };
    let results = last_results(&req);
    if question.contains("JSON Schema") {
        match turn {
            1 => ScriptStep::tool_call(
                "grep",
                json!({"pattern": "^jsonschema", "path_glob": "crates/subcontract/Cargo.toml"}),
            )
            .with_usage(1_100, 40),
            _ => {
                let src = cited(&results[0].1, 1);
                ScriptStep::submit(json!({
                    "findings": [{"claim": "JSON Schema validation uses the jsonschema crate, with default features off so no HTTP stack is pulled in.", "source_ids": src}],
                    "gaps": []
                }))
                .with_usage(1_400, 90)
            }
        }
    } else if question.contains("budget") {
        match turn {
            1 => ScriptStep::tool_call("grep", json!({"pattern": "ancestor", "path_glob": "crates/subcontract/src/budget.rs", "max_matches": 3})).with_usage(1_100, 40),
            // First answer: too long a claim and no sources: invalid, sent back for repair.
            2 => ScriptStep::submit(json!({
                "findings": [{"claim": "Reservations are made in the node and every ancestor. ".repeat(8), "source_ids": []}],
                "gaps": []
            }))
            .with_usage(1_500, 400),
            _ => {
                let grep_out = req
                    .messages
                    .iter()
                    .find_map(|m| match m {
                        Message::ToolResults { results, .. } => results.first().map(|r| r.content.clone()),
                        _ => None,
                    })
                    .unwrap_or_default();
                ScriptStep::submit(json!({
                    "findings": [{"claim": "A call reserves its worst-case cost in its node and every ancestor under their locks, then settles to the actual cost in each.", "source_ids": cited(&grep_out, 2)}],
                    "gaps": []
                }))
                .with_usage(2_000, 110)
            }
        }
    } else {
        // Reads whole files and bills every byte of its growing conversation as a token (the
        // most a provider can bill: a token is never less than a byte). Turn 1 is small; each
        // later one carries what was read before it (the library's budget.rs; then its ctx.rs;
        // then Cargo.toml). It would read on, but its 0.50 USD must still pay for its answer:
        // once what is left holds no further turn beside the answer, it is asked for its
        // output alone, and answers with what it read, cut short by its budget.
        let step = if req.tools.len() == 1 && &*req.tools[0].name == "submit_output" {
            ScriptStep::submit(json!({
                "findings": [{"claim": "The run loop runs on tokio: a run's context cancels through tokio-util's CancellationToken.", "source_ids": ["crates/subcontract/src/ctx.rs"]}],
                "gaps": ["Where the runtime is configured: the budget ran out before it was read."]
            }))
        } else {
            match turn {
                1 => ScriptStep::tool_call(
                    "read_file",
                    json!({"path": "crates/subcontract/src/budget.rs"}),
                ),
                2 => ScriptStep::tool_call(
                    "read_file",
                    json!({"path": "crates/subcontract/src/ctx.rs"}),
                ),
                _ => ScriptStep::tool_call("read_file", json!({"path": "Cargo.toml"})),
            }
        };
        step.with_usage(request_bytes(&req), 300)
    }
}

/// Bytes of the request's text: the system prompt and every message, as the provider reads
/// them. A real provider bills at most this many input tokens.
fn request_bytes(req: &ModelRequest<'_>) -> u64 {
    let messages: usize = req
        .messages
        .iter()
        .map(|m| match m {
            Message::User { text } => text.len(),
            Message::Assistant { text, tool_calls } => {
                text.as_ref().map_or(0, String::len)
                    + tool_calls
                        .iter()
                        .map(|c| {
                            c.name.len()
                                + serde_json::to_string(&c.arguments).map_or(0, |a| a.len())
                        })
                        .sum::<usize>()
            }
            Message::ToolResults { results, note } => {
                note.as_ref().map_or(0, String::len)
                    + results.iter().map(|r| r.content.len()).sum::<usize>()
            }
        })
        .sum();
    (req.system.len() + messages) as u64
}
