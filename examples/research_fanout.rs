//! A host agent fans out to three `research_topic` sub-agents over this repository's own
//! files, offline: the models are scripted, the tools, budget, validation and events are real.
//!
//! - one sub-agent greps, reads, and submits findings citing the lines it found;
//! - one first submits an invalid answer, is told what to repair, and repairs it;
//! - one reads too much and exhausts its 0.50 USD budget.
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
    // The story this demo tells (see `script`): the reader exhausts its budget after 4 turns.
    let exhausted = tree
        .iter()
        .flat_map(|r| &r.children)
        .find(|c| c.outcome == Some(subcontract::Outcome::BudgetExhausted));
    if exhausted.map(|c| c.turns) != Some(4) {
        return Err("the reading sub-agent should exhaust its budget after 4 turns".into());
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
                    let claims: Vec<String> = serde_json::from_str::<Value>(content)
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
        // later one carries what was read before it (the library's budget.rs, 30 KB; then its
        // ctx.rs; then Cargo.toml again and again). After 4 turns it has spent about 0.33 USD, and the
        // fifth call's worst case (about 0.20 USD at 2,048 output tokens) no longer fits in
        // what is left of the 0.50, so that call is refused before it starts:
        // budget_exhausted after 4 turns.
        let step = match turn {
            1 => ScriptStep::tool_call(
                "read_file",
                json!({"path": "crates/subcontract/src/budget.rs"}),
            ),
            2 => ScriptStep::tool_call(
                "read_file",
                json!({"path": "crates/subcontract/src/ctx.rs"}),
            ),
            _ => ScriptStep::tool_call("read_file", json!({"path": "Cargo.toml"})),
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
