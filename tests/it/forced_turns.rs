//! Which turns force the model's hand: with `require_tool_first`, the first turn of a spec
//! with tools requires a call of one of its own tools; without it (the default) the first turn
//! is an ordinary one, offering what every later turn offers; a spec without tools is asked
//! for its output on every turn.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use subcontract::events::{EventKind, Forced};
use subcontract::model::{Message, ScriptStep, ToolChoice};
use subcontract::spec::Levers;
use subcontract::{Ctx, MemorySink, Outcome, SubAgentSpec, ToolSet};

use crate::common::*;

/// What one request asked of the model.
#[derive(Clone, Debug, PartialEq)]
struct Asked {
    /// Whether it sent a response format.
    format: bool,
    choice: String,
    /// The names of the tools it offered.
    tools: Vec<String>,
    /// The text of its last message, when that is the user's (a repair prompt, say).
    last_user: Option<String>,
}

type Seen = Arc<Mutex<Vec<Asked>>>;

/// A context whose model records every request in `seen`, then answers with `answer(turn)`,
/// and whose tools are one `lookup`.
fn recording(
    seen: &Seen,
    sink: Arc<MemorySink>,
    answer: impl Fn(usize) -> ScriptStep + Send + Sync + 'static,
) -> Ctx {
    let seen = seen.clone();
    let m = model(move |_, turn, req| {
        let choice = match req.tool_choice {
            ToolChoice::Auto => "auto".to_string(),
            ToolChoice::Required => "required".to_string(),
            ToolChoice::Tool(t) => format!("tool {t}"),
        };
        let last_user = match req.messages.last() {
            Some(Message::User { text }) => Some(text.clone()),
            _ => None,
        };
        seen.lock().unwrap().push(Asked {
            format: req.response_format.is_some(),
            choice,
            tools: req.tools.iter().map(|t| t.name.to_string()).collect(),
            last_user,
        });
        answer(turn)
    });
    let mut set = ToolSet::new();
    set.insert(lookup_tool("lookup")).unwrap();
    Ctx::builder(m).tools(set).events(sink).build()
}

/// Per request: its tool choice and the tools it offered.
fn choices(seen: &Seen) -> Vec<(String, Vec<String>)> {
    let seen = seen.lock().unwrap();
    seen.iter()
        .map(|a| (a.choice.clone(), a.tools.clone()))
        .collect()
}

/// Per request: whether it sent a format, its tool choice and the tools it offered.
fn formats(seen: &Seen) -> Vec<(bool, String, Vec<String>)> {
    let seen = seen.lock().unwrap();
    seen.iter()
        .map(|a| (a.format, a.choice.clone(), a.tools.clone()))
        .collect()
}

fn looking_spec() -> SubAgentSpec<Value, Value> {
    SubAgentSpec::dynamic("r", question_schema(), findings_schema())
        .description("Investigate a question and return findings.")
        .system("CHILD r")
        .tools(["lookup"])
        .max_turns(4)
        .require_tool_first(true)
        .build()
        .expect("the test spec is valid")
}

#[tokio::test]
async fn by_default_the_first_turn_offers_what_every_turn_offers() {
    let seen: Seen = Arc::default();
    let ctx = recording(&seen, Arc::default(), |turn| match turn {
        1 => ScriptStep::tool_call("lookup", json!({"q": "x"})),
        _ => ScriptStep::submit(good_findings()),
    });
    let r = research_spec("r", &["lookup"])
        .run(&json!({"question": "what?"}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    let all = vec!["lookup".to_string(), "submit_output".into()];
    assert_eq!(
        choices(&seen),
        vec![("auto".to_string(), all.clone()), ("auto".to_string(), all)]
    );
}

#[tokio::test]
async fn require_tool_first_makes_the_first_turn_call_one_of_the_spec_tools() {
    let seen: Seen = Arc::default();
    let sink = Arc::new(MemorySink::new());
    let ctx = recording(&seen, sink.clone(), |turn| match turn {
        1 => ScriptStep::tool_call("lookup", json!({"q": "x"})),
        _ => ScriptStep::submit(good_findings()),
    });
    let r = looking_spec()
        .run(&json!({"question": "what?"}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!(
        choices(&seen),
        vec![
            ("required".to_string(), vec!["lookup".to_string()]),
            (
                "auto".to_string(),
                vec!["lookup".to_string(), "submit_output".into()]
            )
        ],
        "the first turn offers the spec's own tools and requires a call of one"
    );
    let forced: Vec<Option<Forced>> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::ModelCall { forced, .. } => Some(forced),
            _ => None,
        })
        .collect();
    assert_eq!(forced, vec![Some(Forced::FirstTurn), None]);
}

#[tokio::test]
async fn a_submission_on_a_required_first_turn_still_ends_the_run() {
    let seen: Seen = Arc::default();
    let ctx = recording(&seen, Arc::default(), |_| {
        ScriptStep::submit(good_findings())
    });
    let r = looking_spec()
        .run(&json!({"question": "what?"}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!(r.output, Some(good_findings()));
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_spec_without_tools_is_asked_for_its_output_from_the_first_turn() {
    let seen: Seen = Arc::default();
    let ctx = recording(&seen, Arc::default(), |_| {
        ScriptStep::submit(good_findings())
    });
    let spec = SubAgentSpec::dynamic("r", question_schema(), findings_schema())
        .description("Investigate a question and return findings.")
        .system("CHILD r")
        .require_tool_first(true)
        .build()
        .expect("the test spec is valid");
    let r = spec.run(&json!({"question": "what?"}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!(
        choices(&seen),
        vec![(
            "tool submit_output".to_string(),
            vec!["submit_output".to_string()]
        )]
    );
}

/// A spec with the `lookup` tool, two turns, and `levers`.
fn two_turn_spec(levers: Levers) -> SubAgentSpec<Value, Value> {
    SubAgentSpec::dynamic("r", question_schema(), findings_schema())
        .description("Investigate a question and return findings.")
        .system("CHILD r")
        .tools(["lookup"])
        .max_turns(2)
        .levers(levers)
        .build()
        .expect("the test spec is valid")
}

#[tokio::test]
async fn with_native_final_the_last_turn_of_auto_sends_the_schema_and_no_tools() {
    let seen: Seen = Arc::default();
    let ctx = recording(&seen, Arc::default(), |turn| match turn {
        1 => ScriptStep::tool_call("lookup", json!({"q": "x"})),
        _ => ScriptStep::text(good_findings().to_string()),
    });
    let levers = Levers {
        native_final: true,
        ..Levers::default()
    };
    let r = two_turn_spec(levers)
        .run(&json!({"question": "what?"}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!(r.output, Some(good_findings()));
    assert_eq!(
        formats(&seen),
        vec![
            (
                false,
                "auto".to_string(),
                vec!["lookup".to_string(), "submit_output".into()]
            ),
            (true, "auto".to_string(), vec![]),
        ]
    );
}

#[tokio::test]
async fn an_answer_to_a_native_final_turn_that_breaks_the_contract_is_never_returned() {
    let seen: Seen = Arc::default();
    let ctx = recording(&seen, Arc::default(), |turn| match turn {
        1 => ScriptStep::tool_call("lookup", json!({"q": "x"})),
        // Valid JSON, not the contract: a server that ignores the format, or a grammar that
        // does not hold the bounds.
        _ => ScriptStep::text(json!({"findings": "none", "gaps": []}).to_string()),
    });
    let levers = Levers {
        native_final: true,
        ..Levers::default()
    };
    let r = two_turn_spec(levers)
        .run(&json!({"question": "what?"}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::InvalidOutput, "{:?}", r.error);
    assert_eq!(r.output, None);
}

#[tokio::test]
async fn by_default_the_last_turn_forces_the_submission_tool_and_off_it_is_ordinary() {
    for (forced_output, last) in [
        (
            true,
            (
                false,
                "tool submit_output".to_string(),
                vec!["submit_output".to_string()],
            ),
        ),
        (
            false,
            (
                false,
                "auto".to_string(),
                vec!["lookup".to_string(), "submit_output".into()],
            ),
        ),
    ] {
        let seen: Seen = Arc::default();
        let ctx = recording(&seen, Arc::default(), |turn| match turn {
            1 => ScriptStep::tool_call("lookup", json!({"q": "x"})),
            _ => ScriptStep::submit(good_findings()),
        });
        let levers = Levers {
            forced_output,
            ..Levers::default()
        };
        let r = two_turn_spec(levers)
            .run(&json!({"question": "what?"}), &ctx)
            .await;
        assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
        assert_eq!(formats(&seen)[1], last, "forced_output {forced_output}");
    }
}

#[tokio::test]
async fn with_text_calls_off_a_call_written_as_text_is_not_run() {
    for (text_calls, lookups) in [(true, 1), (false, 0)] {
        let sink = Arc::new(MemorySink::new());
        let ctx = recording(&Seen::default(), sink.clone(), |turn| match turn {
            1 => ScriptStep::text(r#"{"name": "lookup", "arguments": {"q": "x"}}"#),
            _ => ScriptStep::submit(good_findings()),
        });
        let levers = Levers {
            text_calls,
            ..Levers::default()
        };
        let r = two_turn_spec(levers)
            .run(&json!({"question": "what?"}), &ctx)
            .await;
        assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
        let ran = sink
            .events()
            .into_iter()
            .filter(|e| matches!(&e.kind, EventKind::ToolCall { tool, .. } if &**tool == "lookup"))
            .count();
        assert_eq!(ran, lookups, "text_calls {text_calls}");
    }
}

#[tokio::test]
async fn a_submission_written_as_text_with_its_braces_doubled_is_taken() {
    // Qwen2.5 under its own chat template writes `{{"name": …, "arguments": …}}}`: the
    // submission, read as such, and then validated like any other (one bad, one good here).
    let doubled = |v: Value| {
        let call = json!({"name": "submit_output", "arguments": v}).to_string();
        ScriptStep::text(format!("{{{call}}}"))
    };
    let seen: Seen = Arc::default();
    let ctx = recording(&seen, Arc::default(), move |turn| match turn {
        1 => doubled(json!({"findings": "none"})),
        _ => doubled(good_findings()),
    });
    let r = SubAgentSpec::dynamic("r", question_schema(), findings_schema())
        .description("Answer a question and return findings.")
        .system("CHILD r")
        .max_turns(3)
        .build()
        .expect("the test spec is valid")
        .run(&json!({"question": "what?"}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!(r.output, Some(good_findings()));
    // The bad one was rejected (its repair goes back as the call's result) and repaired.
    assert_eq!(formats(&seen).len(), 2);
}

#[tokio::test]
async fn with_native_final_a_repair_asks_for_json_and_names_no_submission_tool() {
    let seen: Seen = Arc::default();
    let ctx = recording(&seen, Arc::default(), |turn| match turn {
        1 => ScriptStep::text(json!({"findings": "none"}).to_string()),
        _ => ScriptStep::text(good_findings().to_string()),
    });
    let levers = Levers {
        native_final: true,
        ..Levers::default()
    };
    let r = two_turn_spec(levers)
        .run(&json!({"question": "what?"}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    let (format, repair) = (
        seen[1].format,
        seen[1].last_user.clone().unwrap_or_default(),
    );
    assert!(format, "the turn after the rejected text sends the format");
    assert!(repair.contains("/findings"), "{repair}");
    assert!(repair.contains("only the corrected JSON"), "{repair}");
    assert!(!repair.contains("submit_output"), "{repair}");
}

/// On Qwen's chat template (llama.cpp), a model writes its call as text and goes on to write
/// the tool's answer itself. The call ends its turn: it runs, what follows it is dropped (the
/// trace says how many characters), the conversation holds the call alone, and every turn
/// that offers tools asks the server to stop at `<tool_response>`.
#[tokio::test]
async fn a_call_written_as_text_ends_the_turn_and_what_follows_is_dropped() {
    let call = r#"{"name": "lookup", "arguments": {"q": "x"}}"#;
    let cases = [
        (
            format!("<tool_call>\n{call}\n</tool_call>\n<tool_response> ERROR: src/lib.rs does not exist"),
            "<tool_response> ERROR: src/lib.rs does not exist",
            false,
        ),
        (
            format!("{{{call}}}\n<tool_response>\n{{\"cargo_version\": \"1.0\"}}\n</tool_response>"),
            "<tool_response>\n{\"cargo_version\": \"1.0\"}\n</tool_response>",
            false,
        ),
        (
            format!("```json\n{call}\n```\nThe tool says: 1.0"),
            "The tool says: 1.0",
            true,
        ),
        (format!("<tool_call>{call}</tool_call>"), "", false),
    ];
    for (text, dropped, fenced) in cases {
        let sink = Arc::new(MemorySink::new());
        let stops: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
        let history: Arc<Mutex<String>> = Arc::default();
        let (s, h, t) = (stops.clone(), history.clone(), text.clone());
        let m = model(move |_, turn, req| {
            s.lock()
                .unwrap()
                .push(req.stop.iter().map(|x| x.to_string()).collect());
            match turn {
                1 => ScriptStep::text(t.clone()),
                _ => {
                    *h.lock().unwrap() = serde_json::to_string(req.messages).unwrap();
                    ScriptStep::submit(good_findings())
                }
            }
        });
        let mut set = ToolSet::new();
        set.insert(lookup_tool("lookup")).unwrap();
        let ctx = Ctx::builder(m).tools(set).events(sink.clone()).build();
        let r = two_turn_spec(Levers::default())
            .run(&json!({"question": "what?"}), &ctx)
            .await;
        assert_eq!(r.outcome, Outcome::Completed, "{text}: {:?}", r.error);
        let events = sink.events();
        let ran = events
            .iter()
            .filter(|e| matches!(&e.kind, EventKind::ToolCall { tool, .. } if &**tool == "lookup"))
            .count();
        assert_eq!(ran, 1, "{text}");
        let read = events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::ModelCall {
                    turn: 1,
                    text_read_as,
                    ..
                } => text_read_as.clone(),
                _ => None,
            })
            .expect("the first turn's text was read as a call");
        assert_eq!(
            read,
            subcontract::events::TextRead::Call {
                tool: "lookup".into(),
                fenced,
                dropped_chars: dropped.chars().count(),
            },
            "{text}"
        );
        let history = history.lock().unwrap().clone();
        assert!(history.contains("constant-tool-result"), "{history}");
        for imagined in [
            "tool_response",
            "does not exist",
            "cargo_version",
            "The tool says",
        ] {
            assert!(!history.contains(imagined), "{text}: {history}");
        }
        // The first turn offers `lookup`: the server is asked to stop at a tool's answer.
        let stops = stops.lock().unwrap().clone();
        assert_eq!(stops[0], ["<tool_response>"], "{text}");
    }
}
