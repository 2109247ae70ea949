//! One test (at least) per invariant of `src/docs/invariants.md`, through the public API and the real
//! run loop. Each would fail if its invariant broke.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rust_decimal::Decimal;
use serde_json::{json, Value};
use subcontract::events::tree::build_tree;
use subcontract::model::{Message, ModelError, Price, PriceTable, ScriptStep};
use subcontract::{Budget, Ctx, Decision, MemorySink, Outcome, SpawnError, SubAgentSpec, ToolSet};
use subcontract::{DenyTools, FnGate};

use crate::common::*;

fn last_tool_results(req: &subcontract::model::ModelRequest<'_>) -> Vec<(String, String, bool)> {
    match req.messages.last() {
        Some(Message::ToolResults { results, .. }) => results
            .iter()
            .map(|r| (r.call_id.clone(), r.content.clone(), r.is_error))
            .collect(),
        _ => Vec::new(),
    }
}

fn note_of(req: &subcontract::model::ModelRequest<'_>) -> Option<String> {
    match req.messages.last() {
        Some(Message::ToolResults { note, .. }) => note.clone(),
        _ => None,
    }
}

fn tools(list: Vec<Arc<dyn subcontract::Tool>>) -> ToolSet {
    let mut set = ToolSet::new();
    for t in list {
        set.insert(t).expect("distinct valid tools");
    }
    set
}

type Seen = Arc<Mutex<Vec<String>>>;

/// Invariant 1: a child gets exactly its spec's tools, each held by the parent; asking for
/// more is a spawn error, reported to the calling model.
#[tokio::test]
async fn capabilities_never_widen() {
    let research = research_spec("research", &["lookup"]);
    let greedy = research_spec("greedy", &["lookup", "write_file"]);
    let child_offered: Seen = Arc::default();
    let host_saw: Seen = Arc::default();
    let (co, hs) = (child_offered.clone(), host_saw.clone());
    let m = model(move |system, turn, req| match (system, turn) {
        ("HOST", 1) => ScriptStep::tool_calls(vec![
            ("research".into(), json!({"question": "what runtime?"})),
            ("greedy".into(), json!({"question": "write something"})),
        ]),
        ("HOST", _) => {
            for (_, content, is_error) in last_tool_results(req) {
                hs.lock().unwrap().push(format!("{is_error}:{content}"));
            }
            ScriptStep::text("done")
        }
        (_, 1) => {
            co.lock()
                .unwrap()
                .extend(req.tools.iter().map(|t| t.name.to_string()));
            // Try a tool the parent holds but the spec did not ask for.
            ScriptStep::tool_call("secret", json!({}))
        }
        (_, 2) => {
            let r = last_tool_results(req);
            assert!(r[0].2 && r[0].1.contains("unknown tool `secret`"), "{r:?}");
            ScriptStep::submit(good_findings())
        }
        _ => ScriptStep::text("unexpected"),
    });
    let ctx = Ctx::builder(m)
        .tools(tools(vec![
            research.as_tool(),
            greedy.as_tool(),
            lookup_tool("lookup"),
            lookup_tool("secret"),
        ]))
        .build();
    let r = host_spec(&["research", "greedy"])
        .run(&json!({}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!(
        *child_offered.lock().unwrap(),
        vec!["lookup".to_string(), "submit_output".into()]
    );
    let seen = host_saw.lock().unwrap();
    assert!(seen[0].starts_with("false:{\"findings\""), "{seen:?}");
    assert!(
        seen[1].starts_with("true:") && seen[1].contains("does not hold: write_file"),
        "{seen:?}"
    );

    // And directly: the spawn error names the missing capability.
    match ctx.child(&greedy) {
        Err(SpawnError::CapabilityNotHeld { missing, .. }) => {
            assert_eq!(missing, vec!["write_file"])
        }
        other => panic!("expected a capability error, got {other:?}"),
    }
    let child = ctx.child(&research).unwrap();
    assert_eq!(child.tools().names().collect::<Vec<_>>(), vec!["lookup"]);
}

/// Invariant 1 as `check` and the run loop each apply it, on the same spec files: a spec's
/// callee may use only tools its caller holds, and a sub-agent holds exactly its spec's tools.
/// Where `check` says `tool-not-held`, the run refuses the callee the tool; where `check` is
/// clean, the callee gets it. A spec run as the host itself (a root run, depth 0) holds the
/// host's tools, which `check` cannot know; it checks every spec as the sub-agent it is when a
/// host calls it, the stricter case.
#[tokio::test]
async fn check_and_the_run_agree_on_what_a_child_holds() {
    use subcontract::check::{check_sources, CheckOptions};
    use subcontract::spec::load_spec_str;
    let file = |name: &str, system: &str, tools: &[&str]| {
        let tools: Vec<String> = tools.iter().map(|t| format!("\"{t}\"")).collect();
        let text = format!(
            "name = \"{name}\"\ndescription = \"d\"\nsystem = \"{system}\"\ntools = [{}]\n\
             [input]\ntype = \"object\"\n[output]\ntype = \"object\"\n\
             additionalProperties = false\nproperties.answer = {{ type = \"string\", maxLength = 100 }}\n",
            tools.join(", ")
        );
        (std::path::PathBuf::from(format!("specs/{name}.toml")), text)
    };
    for (lead_tools, root) in [
        (&["helper"][..], false),
        (&["helper", "grep"][..], false),
        (&["helper"][..], true),
    ] {
        let files = [
            file("lead", "LEAD", lead_tools),
            file("helper", "HELPER", &["grep"]),
        ];
        let report = check_sources(&files, &CheckOptions::default());
        let not_held = report.diagnostics.iter().any(|d| d.code == "tool-not-held");
        assert_eq!(not_held, lead_tools.len() == 1, "{report:?}");
        let [lead, helper] = files.map(|(path, text)| load_spec_str(&path, &text).unwrap());

        let helper_offered: Seen = Arc::default();
        let lead_saw: Seen = Arc::default();
        let (ho, ls) = (helper_offered.clone(), lead_saw.clone());
        let m = model(move |system, turn, req| match (system, turn) {
            ("LEAD", 1) => ScriptStep::tool_call("helper", json!({})),
            ("LEAD", _) => {
                for (_, content, is_error) in last_tool_results(req) {
                    ls.lock().unwrap().push(format!("{is_error}:{content}"));
                }
                ScriptStep::submit(json!({"answer": "done"}))
            }
            ("HELPER", _) => {
                ho.lock()
                    .unwrap()
                    .extend(req.tools.iter().map(|t| t.name.to_string()));
                ScriptStep::submit(json!({"answer": "helped"}))
            }
            _ => ScriptStep::text("unexpected"),
        });
        let host = Ctx::builder(m)
            .tools(tools(vec![
                lead.as_tool(),
                helper.as_tool(),
                lookup_tool("grep"),
            ]))
            .build();
        let r = if root {
            lead.run(&json!({}), &host).await
        } else {
            lead.run_child(&json!({}), &host).await
        };
        assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
        let saw = lead_saw.lock().unwrap();
        let refused = saw[0].starts_with("true:") && saw[0].contains("does not hold: grep");
        if root {
            // The host holds `grep`, and lends it: the callee runs with it.
            assert!(saw[0].starts_with("false:"), "{saw:?}");
            assert_eq!(*helper_offered.lock().unwrap(), ["grep", "submit_output"]);
        } else {
            assert_eq!(refused, not_held, "check: {not_held}, run: {saw:?}");
            let offered = helper_offered.lock().unwrap();
            if not_held {
                assert!(offered.is_empty(), "{offered:?}");
            } else {
                assert_eq!(*offered, ["grep", "submit_output"]);
            }
        }
    }
}

/// Invariant 2 through the run loop: a child's spend is charged to the root, a child's limit
/// is min(own, parent remaining), and exhaustion is a distinct outcome.
#[tokio::test]
async fn budgets_fork_and_charge_upward() {
    let mut prices = PriceTable::new();
    // 100 USD per million input tokens and nothing for output: each call of 100 tokens
    // costs 0.01 USD, and a reservation (bytes of the request) stays under the limit.
    prices.insert(
        "scripted:test",
        Price::per_mtok(Decimal::from(100), Decimal::ZERO),
    );
    let spec = SubAgentSpec::dynamic("research", question_schema(), findings_schema())
        .description("d")
        .system("CHILD")
        .max_cost_usd(Decimal::new(25, 2))
        .max_tokens_per_turn(1)
        .build()
        .unwrap();
    let m = model(|_, turn, _| match turn {
        1 => ScriptStep::tool_call("nothing", json!({})).with_usage(100, 0),
        _ => ScriptStep::submit(good_findings()).with_usage(100, 0),
    });
    let root = Budget::new(Some(Decimal::ONE), None);
    let ctx = Ctx::builder(m).budget(root.clone()).prices(prices).build();
    let r = spec.run_child(&json!({"question": "abc?"}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!(r.cost_usd, Decimal::new(2, 2));
    assert_eq!(
        root.snapshot().spent_usd,
        Decimal::new(2, 2),
        "charged upward"
    );
    assert_eq!(root.snapshot().reserved_usd, Decimal::ZERO, "all settled");

    // A child whose limit cannot afford the next worst case stops with budget_exhausted.
    let tight = SubAgentSpec::dynamic("tight", question_schema(), findings_schema())
        .description("d")
        .system("CHILD")
        .max_cost_usd(Decimal::new(1, 3))
        .build()
        .unwrap();
    let r = tight.run_child(&json!({"question": "abc?"}), &ctx).await;
    assert_eq!(r.outcome, Outcome::BudgetExhausted);
    assert!(r
        .error
        .unwrap()
        .to_string()
        .contains("budget exhausted at root.tight-2"));
    assert_eq!(
        root.snapshot().spent_usd,
        Decimal::new(2, 2),
        "nothing spent"
    );
}

/// Invariant 3: past the depth limit the call returns an error result to the calling model.
#[tokio::test]
async fn depth_is_bounded() {
    let c = research_spec("c", &[]);
    let b = research_spec("b", &["c"]);
    let a = research_spec("a", &["b", "c"]);
    let b_saw: Seen = Arc::default();
    let bs = b_saw.clone();
    let m = model(move |system, turn, req| match (system, turn) {
        ("HOST", 1) => ScriptStep::tool_call("a", json!({"question": "go deep"})),
        ("HOST", _) => ScriptStep::text("done"),
        ("CHILD a", 1) => ScriptStep::tool_call("b", json!({"question": "deeper"})),
        ("CHILD b", 1) => ScriptStep::tool_call("c", json!({"question": "deepest"})),
        ("CHILD b", 2) => {
            bs.lock().unwrap().extend(
                last_tool_results(req)
                    .into_iter()
                    .map(|r| format!("{}:{}", r.2, r.1)),
            );
            ScriptStep::submit(good_findings())
        }
        _ => ScriptStep::submit(good_findings()),
    });
    let sink = Arc::new(MemorySink::new());
    let ctx = Ctx::builder(m)
        .tools(tools(vec![a.as_tool(), b.as_tool(), c.as_tool()]))
        .events(sink.clone())
        .build();
    let r = host_spec(&["a"]).run(&json!({}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed);
    let saw = b_saw.lock().unwrap();
    assert_eq!(saw.len(), 1);
    assert!(
        saw[0].starts_with("true:") && saw[0].contains("depth 3, past the limit of 2"),
        "{saw:?}"
    );
    let ids: Vec<String> = sink.events().iter().map(|e| e.run_id.to_string()).collect();
    assert!(ids.contains(&"root.a-1.b-1".to_string()));
    // c never started: its only event is the refusal, a child of b that ended `denied`.
    let c_events: Vec<_> = sink
        .events()
        .into_iter()
        .filter(|e| e.run_id.contains(".c-"))
        .collect();
    assert_eq!(c_events.len(), 1, "{ids:?}");
    let tree = build_tree(&sink.events());
    let b_node = &tree[0].children[0].children[0];
    assert_eq!(b_node.run_id, "root.a-1.b-1");
    assert_eq!(b_node.children[0].run_id, "root.a-1.b-1.c-denied");
    assert_eq!(b_node.children[0].outcome, Some(Outcome::Denied));
}

/// Invariant 4: an invalid output goes back with paths and messages; the parent only ever
/// receives a valid one.
#[tokio::test]
async fn invalid_output_is_repaired_within_the_turn_limit() {
    let repair: Seen = Arc::default();
    let rp = repair.clone();
    let m = model(move |_, turn, req| match turn {
        1 => ScriptStep::submit(
            json!({"findings": [{"claim": "x".repeat(301), "source_ids": []}], "gaps": []}),
        ),
        _ => {
            rp.lock()
                .unwrap()
                .extend(last_tool_results(req).into_iter().map(|r| r.1));
            ScriptStep::submit(good_findings())
        }
    });
    let ctx = Ctx::builder(m).build();
    let r = research_spec("research", &[])
        .run(&json!({"question": "why?"}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(r.turns, 2);
    assert_eq!(r.output.unwrap(), good_findings());
    let msg = repair.lock().unwrap()[0].clone();
    assert!(msg.contains("/findings/0/claim"), "{msg}");
    assert!(msg.contains("/findings/0/source_ids"), "{msg}");
    assert!(msg.contains("turn(s) left"), "{msg}");

    // Never valid: the run ends as invalid_output, not as completed or max_turns.
    let m = model(|_, _, _| ScriptStep::submit(json!({"findings": "nope"})));
    let r = research_spec("research", &[])
        .run(&json!({"question": "why?"}), &Ctx::builder(m).build())
        .await;
    assert_eq!(r.outcome, Outcome::InvalidOutput);
    assert!(r.output.is_none());
}

/// Invariant 4: the size bound holds even for a spec that allowed an unbounded schema, and
/// specs whose worst case is too large or unbounded are refused at build time.
#[tokio::test]
async fn outputs_are_length_bounded() {
    let open = SubAgentSpec::dynamic("open", json!({"type": "object"}), json!({"type": "object"}));
    let err = open.description("d").build().unwrap_err();
    assert!(err.has("open-object"), "{err}");
    let big = SubAgentSpec::dynamic("big", json!({"type": "object"}), findings_schema())
        .description("d")
        .max_output_chars(1000)
        .build();
    let err = big.unwrap_err();
    assert_eq!(err.problems.len(), 1, "{err}");
    assert_eq!(err.problems[0].code, "output-too-large");
    assert_eq!(
        err.problems[0].at,
        subcontract::spec::SpecLocation::MaxOutputChars
    );
    assert!(
        err.problems[0].message.starts_with(
            "the largest valid output is 3947 characters of compact JSON, over max_output_chars = 1000"
        ),
        "{err}"
    );
    let allowed = SubAgentSpec::dynamic(
        "allowed",
        json!({"type": "object"}),
        json!({"type": "object"}),
    )
    .description("d")
    .max_output_chars(50)
    .allow_unbounded_output()
    .build()
    .unwrap();
    let m = model(|_, turn, _| match turn {
        1 => ScriptStep::submit(json!({"long": "y".repeat(100)})),
        _ => ScriptStep::submit(json!({"short": 1})),
    });
    let r = allowed.run(&json!({}), &Ctx::builder(m).build()).await;
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(r.output.unwrap(), json!({"short": 1}));
}

/// Invariant 5: each way a run can end is its own outcome, recorded in a finished event.
#[tokio::test]
async fn nothing_ends_silently() {
    let spec = |timeout_ms: u64| {
        SubAgentSpec::dynamic("research", question_schema(), findings_schema())
            .description("d")
            .system("CHILD")
            .tools(["lookup"])
            .max_turns(3)
            .timeout(Duration::from_millis(timeout_ms))
            .build()
            .unwrap()
    };
    let input = json!({"question": "why?"});
    let run = |m, timeout_ms, cancel: Option<subcontract::CancellationToken>| {
        let sink = Arc::new(MemorySink::new());
        let mut b = Ctx::builder(m)
            .tools(tools(vec![lookup_tool("lookup")]))
            .events(sink.clone());
        if let Some(c) = cancel {
            b = b.cancellation(c);
        }
        let ctx = b.build();
        let input = input.clone();
        async move {
            let r = spec(timeout_ms).run(&input, &ctx).await;
            let finished = sink
                .events()
                .iter()
                .filter(|e| matches!(e.kind, subcontract::EventKind::Finished { .. }))
                .count();
            assert_eq!(finished, 1, "exactly one finished event");
            r
        }
    };
    let r = run(
        model(|_, _, _| ScriptStep::tool_call("lookup", json!({}))),
        5000,
        None,
    )
    .await;
    assert_eq!((r.outcome, r.turns), (Outcome::MaxTurns, 3));
    let r = run(
        model(|_, _, _| ScriptStep::text("x").delayed(Duration::from_secs(5))),
        100,
        None,
    )
    .await;
    assert_eq!(r.outcome, Outcome::Timeout);
    assert!(r.duration < Duration::from_secs(2));
    let token = subcontract::CancellationToken::new();
    let t2 = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        t2.cancel();
    });
    let r = run(
        model(|_, _, _| ScriptStep::text("x").delayed(Duration::from_secs(5))),
        5000,
        Some(token),
    )
    .await;
    assert_eq!(r.outcome, Outcome::Cancelled);
    let r = run(
        model(|_, _, _| {
            ScriptStep::error(ModelError::Http {
                provider: "openai".into(),
                status: 500,
                message: "boom".into(),
            })
        }),
        5000,
        None,
    )
    .await;
    assert_eq!(r.outcome, Outcome::ModelError);
    assert!(r.error.unwrap().to_string().contains("HTTP 500: boom"));
    let r = run(model(|_, _, _| ScriptStep::text("{}")), 5000, None);
    let r = r.await;
    assert_eq!(r.outcome, Outcome::InvalidOutput);
    // Invalid input is refused before any model call.
    let m = model(|_, _, _| panic!("no model call for an invalid input"));
    let r = spec(5000)
        .run(
            &json!({"question": 5}),
            &Ctx::builder(m)
                .tools(tools(vec![lookup_tool("lookup")]))
                .build(),
        )
        .await;
    assert_eq!((r.outcome, r.turns), (Outcome::InvalidInput, 0));
}

/// Invariant 6: sub-agent calls of one response run concurrently under the cap, ordinary
/// tools in order, every call settles, results come back in call order, and the parent is
/// told how many failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_settles_all_in_order() {
    let research = research_spec("research", &[]);
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let order: Seen = Arc::default();
    type Saw = Option<(Vec<(String, String, bool)>, Option<String>)>;
    let host_saw: Arc<Mutex<Saw>> = Arc::default();
    let (order2, hs) = (order.clone(), host_saw.clone());
    let questions = ["q one", "q two", "q fail", "q four", "q five"];
    let m = model(move |system, turn, req| match (system, turn) {
        ("HOST", 1) => {
            let mut calls: Vec<(String, Value)> = questions
                .iter()
                .map(|q| ("research".to_string(), json!({"question": q})))
                .collect();
            calls.insert(2, ("lookup".into(), json!({"q": "first"})));
            calls.push(("lookup".into(), json!({"q": "second"})));
            ScriptStep::tool_calls(calls)
        }
        ("HOST", _) => {
            *hs.lock().unwrap() = Some((last_tool_results(req), note_of(req)));
            ScriptStep::text("done")
        }
        (_, _) => {
            let Some(Message::User { text }) = req.messages.first() else {
                panic!()
            };
            order2.lock().unwrap().push(text.clone());
            let step = if text.contains("fail") {
                ScriptStep::error(ModelError::Connection {
                    provider: "t".into(),
                    message: "down".into(),
                })
            } else {
                ScriptStep::submit(
                    json!({"findings": [{"claim": text, "source_ids": ["s"]}], "gaps": []}),
                )
            };
            step.delayed(Duration::from_millis(60))
        }
    });
    let lookups: Seen = Arc::default();
    let lk = lookups.clone();
    let lookup = subcontract::FnTool::new(
        "lookup",
        "Looks up.",
        json!({"type": "object", "properties": {"q": {"type": "string", "maxLength": 20}}, "additionalProperties": false}),
        move |args| {
            let lk = lk.clone();
            async move {
                lk.lock()
                    .unwrap()
                    .push(args["q"].as_str().unwrap_or("").to_string());
                subcontract::ToolOutput::text(format!("looked up {}", args["q"]))
            }
        },
    );
    // Count model calls in flight exactly: in on entry, out on return.
    let m = Arc::new(Probe {
        inner: m,
        running: running.clone(),
        peak: peak.clone(),
    });
    let ctx = Ctx::builder(m)
        .tools(tools(vec![research.as_tool(), lookup]))
        .fanout_limit(2)
        .build();
    let r = host_spec(&["research", "lookup"])
        .run(&json!({}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!(
        peak.load(Ordering::SeqCst),
        2,
        "the cap of 2 is reached and never passed"
    );
    assert_eq!(
        *lookups.lock().unwrap(),
        vec!["first", "second"],
        "ordinary tools run in order"
    );
    let (results, note) = host_saw.lock().unwrap().clone().unwrap();
    let ids: Vec<&str> = results.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(
        ids,
        vec!["call_0", "call_1", "call_2", "call_3", "call_4", "call_5", "call_6"]
    );
    assert!(results[0].1.contains("q one") && results[1].1.contains("q two"));
    assert!(results[2].1.contains("looked up"));
    assert!(
        results[3].2 && results[3].1.contains("model_error"),
        "{:?}",
        results[3]
    );
    assert!(results[5].1.contains("q five"));
    assert_eq!(note.unwrap(), "1 of 5 sub-agent calls failed; continue with the results you have and say what is missing.");
}

struct Probe {
    inner: Arc<subcontract::model::ScriptedModel>,
    running: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl subcontract::Model for Probe {
    fn id(&self) -> &str {
        self.inner.id()
    }
    async fn complete(
        &self,
        req: subcontract::model::ModelRequest<'_>,
    ) -> Result<subcontract::model::ModelResponse, ModelError> {
        let child = req.system != "HOST";
        if child {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
        }
        let r = self.inner.complete(req).await;
        if child {
            self.running.fetch_sub(1, Ordering::SeqCst);
        }
        r
    }
}

/// Invariant 7: the parent's gate applies to children; a child may add denials, never remove
/// them.
#[tokio::test]
async fn gate_is_inherited_and_only_stricter() {
    let research = research_spec("research", &["lookup"]);
    let child_saw: Seen = Arc::default();
    let cs = child_saw.clone();
    let m = model(move |system, turn, req| match (system, turn) {
        ("HOST", 1) => ScriptStep::tool_call("research", json!({"question": "look it up"})),
        ("HOST", _) => ScriptStep::text("done"),
        (_, 1) => ScriptStep::tool_call("lookup", json!({"q": "x"})),
        (_, _) => {
            cs.lock().unwrap().extend(
                last_tool_results(req)
                    .into_iter()
                    .map(|r| format!("{}:{}", r.2, r.1)),
            );
            ScriptStep::submit(good_findings())
        }
    });
    let ctx = Ctx::builder(m)
        .tools(tools(vec![research.as_tool(), lookup_tool("lookup")]))
        .gate(subcontract::Gate::new(FnGate(
            |r: subcontract::ApprovalRequest<'_>| {
                if r.tool == "lookup" && r.depth > 0 {
                    Decision::Deny("no lookups below the host".into())
                } else {
                    Decision::Allow
                }
            },
        )))
        .build();
    // Adding an allow-everything gate cannot loosen the chain.
    let ctx = ctx.with_stricter_gate(Arc::new(FnGate(|_: subcontract::ApprovalRequest<'_>| {
        Decision::Allow
    })));
    let r = host_spec(&["research"]).run(&json!({}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed);
    let saw = child_saw.lock().unwrap().clone();
    assert!(
        saw[0].starts_with("true:denied by the approval gate: no lookups below the host"),
        "{saw:?}"
    );

    // A stricter gate denies what the parent allowed, for the context that adds it and for
    // every child made from it.
    let host_saw: Seen = Arc::default();
    let hs = host_saw.clone();
    let m2 = model(move |system, turn, req| match (system, turn) {
        ("HOST", 1) => ScriptStep::tool_call("research", json!({"question": "which runtime?"})),
        ("HOST", _) => {
            hs.lock().unwrap().extend(
                last_tool_results(req)
                    .into_iter()
                    .map(|r| format!("{}:{}", r.2, r.1)),
            );
            ScriptStep::text("ok")
        }
        _ => panic!("the denied sub-agent must not run"),
    });
    let strict = Ctx::builder(m2)
        .tools(tools(vec![research.as_tool(), lookup_tool("lookup")]))
        .build()
        .with_stricter_gate(Arc::new(DenyTools::new(["research"])));
    assert_eq!(strict.gate().len(), 1);
    let r = host_spec(&["research"]).run(&json!({}), &strict).await;
    assert_eq!(r.outcome, Outcome::Completed);
    let saw = host_saw.lock().unwrap().clone();
    assert_eq!(
        saw,
        vec!["true:denied by the approval gate: tool `research` is not allowed here"]
    );
    let child = strict.child(&research).unwrap();
    assert_eq!(child.gate().len(), 1, "children inherit the stricter chain");
    // A stricter view is the same run: its children and the original's never share a run id.
    let view = ctx.with_stricter_gate(Arc::new(DenyTools::new(["x"])));
    let a = ctx.child(&research).unwrap();
    let b = view.child(&research).unwrap();
    assert_ne!(a.run_id(), b.run_id());
}

/// Run ids are `parent.child-n`, and the events rebuild the tree with cost shares.
#[tokio::test]
async fn run_ids_rebuild_the_tree() {
    let research = research_spec("research", &[]);
    let mut prices = PriceTable::new();
    prices.insert(
        "scripted:test",
        Price::per_mtok(Decimal::from(1), Decimal::ZERO),
    );
    let m = model(|system, turn, _| match (system, turn) {
        ("HOST", 1) => ScriptStep::tool_calls(vec![
            ("research".into(), json!({"question": "one"})),
            ("research".into(), json!({"question": "two"})),
        ])
        .with_usage(1_000_000, 0),
        ("HOST", _) => ScriptStep::text("done").with_usage(1_000_000, 0),
        _ => ScriptStep::submit(good_findings()).with_usage(1_000_000, 0),
    });
    let sink = Arc::new(MemorySink::new());
    let ctx = Ctx::builder(m)
        .tools(tools(vec![research.as_tool()]))
        .events(sink.clone())
        .prices(prices)
        .build();
    let r = host_spec(&["research"]).run(&json!({}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(r.total_cost_usd, Decimal::from(4));
    let tree = build_tree(&sink.events());
    assert_eq!(tree.len(), 1);
    let root = &tree[0];
    assert_eq!(root.run_id, "root");
    assert_eq!(root.total_cost_usd, Decimal::from(4));
    let mut ids: Vec<&str> = root.children.iter().map(|c| c.run_id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, vec!["root.research-1", "root.research-2"]);
    for c in &root.children {
        assert_eq!(c.outcome, Some(Outcome::Completed));
        assert!((c.share - 0.25).abs() < 1e-9);
    }
    // The same events through a JSON Lines file rebuild the same tree.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let jsonl = subcontract::JsonlSink::create(&path).unwrap();
    for e in sink.events() {
        subcontract::EventSink::emit(&jsonl, &e);
    }
    drop(jsonl);
    let from_file = subcontract::events::read_jsonl(&path).unwrap();
    assert_eq!(from_file, sink.events());
    assert_eq!(build_tree(&from_file), tree);
    let text = subcontract::events::tree::render_tree(&tree);
    assert!(
        text.contains("root.research-2 [research] completed"),
        "{text}"
    );
}

/// Arguments that break a tool's schema never reach it: the model gets an error result.
#[tokio::test]
async fn tool_arguments_are_validated_first() {
    let research = research_spec("research", &[]);
    let m = model(|system, turn, req| match (system, turn) {
        ("HOST", 1) => ScriptStep::tool_calls(vec![
            ("research".into(), json!({"question": 5})),
            ("research".into(), Value::String("{not json".into())),
        ]),
        ("HOST", _) => {
            let r = last_tool_results(req);
            assert!(
                r[0].2
                    && r[0].1.contains("invalid arguments for `research`")
                    && r[0].1.contains("/question"),
                "{r:?}"
            );
            assert!(r[1].2 && r[1].1.contains("not valid JSON"), "{r:?}");
            ScriptStep::text("ok")
        }
        _ => panic!("the child must not run"),
    });
    let ctx = Ctx::builder(m)
        .tools(tools(vec![research.as_tool()]))
        .build();
    let r = host_spec(&["research"]).run(&json!({}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
}

/// Invariant 5 one level down: when a parent times out, its sub-agents in flight are stopped,
/// and each still records how it ended.
#[tokio::test]
async fn a_parent_timeout_stops_its_children_visibly() {
    let research = research_spec("research", &[]);
    let host = SubAgentSpec::dynamic(
        "host",
        json!({"type": "object"}),
        json!({"type": "string", "maxLength": 100}),
    )
    .description("d")
    .system("HOST")
    .tools(["research"])
    .timeout(Duration::from_millis(100))
    .build()
    .unwrap();
    let m = model(|system, _, _| match system {
        "HOST" => ScriptStep::tool_calls(vec![
            ("research".into(), json!({"question": "slow one"})),
            ("research".into(), json!({"question": "slow two"})),
        ]),
        _ => ScriptStep::submit(good_findings()).delayed(Duration::from_secs(10)),
    });
    let sink = Arc::new(MemorySink::new());
    let ctx = Ctx::builder(m)
        .tools(tools(vec![research.as_tool()]))
        .events(sink.clone())
        .build();
    let t0 = std::time::Instant::now();
    let r = host.run(&json!({}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Timeout);
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "children did not hold the parent up"
    );
    // No waiting: the parent drained its children before it reported, and each child's call
    // in flight gave back its reservation.
    let b = ctx.budget().snapshot();
    assert_eq!((b.reserved_calls, b.calls), (0, 1), "{b:?}");
    // The timeout stopped the run through a token of its own, not the caller's.
    assert!(!ctx.cancellation().is_cancelled());
    let tree = build_tree(&sink.events());
    assert_eq!(tree[0].outcome, Some(Outcome::Timeout));
    assert_eq!(tree[0].children.len(), 2);
    for c in &tree[0].children {
        assert_eq!(c.outcome, Some(Outcome::Cancelled), "{c:?}");
    }
}

/// A model whose sub-agent calls hold their worker thread until the gate opens: a child caught
/// in the middle of a poll when its parent stops, which aborting its task cannot interrupt.
/// Every call is priced, and each sub-agent call asks for a lookup (it never submits).
struct Stuck {
    inner: Arc<subcontract::model::ScriptedModel>,
    child_calls: Arc<AtomicUsize>,
    gate: Arc<(Mutex<bool>, std::sync::Condvar)>,
    // Cancelled when a sub-agent call starts (the cancellation case).
    cancel_on_call: Option<tokio_util::sync::CancellationToken>,
}

#[async_trait::async_trait]
impl subcontract::Model for Stuck {
    fn id(&self) -> &str {
        self.inner.id()
    }
    async fn complete(
        &self,
        req: subcontract::model::ModelRequest<'_>,
    ) -> Result<subcontract::model::ModelResponse, ModelError> {
        if req.system != "HOST" {
            self.child_calls.fetch_add(1, Ordering::SeqCst);
            if let Some(t) = &self.cancel_on_call {
                t.cancel();
            }
            let (open, cv) = &*self.gate;
            let mut g = open.lock().unwrap();
            while !*g {
                g = cv.wait(g).unwrap();
            }
        }
        self.inner.complete(req).await
    }
}

/// Invariant 5: a run that times out or is cancelled stops and drains its sub-agents before
/// it reports. Checked for both: once the run has returned, nothing more happens (no event, no
/// charge, no model call), and what it reports is what its budget and its events say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_run_drains_its_children_before_it_reports() {
    for cancel in [false, true] {
        let token = tokio_util::sync::CancellationToken::new();
        let gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let child_calls = Arc::new(AtomicUsize::new(0));
        let m = Arc::new(Stuck {
            inner: model(|system, _, _| {
                match system {
                    "HOST" => ScriptStep::tool_call("research", json!({"question": "stuck one"})),
                    _ => ScriptStep::tool_call("lookup", json!({"q": "x"})),
                }
                .with_usage(1_000, 1_000)
            }),
            child_calls: child_calls.clone(),
            gate: gate.clone(),
            cancel_on_call: cancel.then(|| token.clone()),
        });
        let mut prices = PriceTable::new();
        prices.insert("scripted:test", Price::per_mtok(Decimal::ONE, Decimal::ONE));
        let sink = Arc::new(MemorySink::new());
        let budget = Budget::unlimited();
        let ctx = Ctx::builder(m)
            .tools(tools(vec![
                research_spec("research", &["lookup"]).as_tool(),
                lookup_tool("lookup"),
            ]))
            .prices(prices)
            .budget(budget.clone())
            .events(sink.clone())
            .cancellation(token.clone())
            .build();
        let host = SubAgentSpec::dynamic(
            "host",
            json!({"type": "object"}),
            json!({"type": "string", "maxLength": 100}),
        )
        .description("d")
        .system("HOST")
        .tools(["research"])
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap();
        // Opens the gate well after the host has stopped (at once when cancelled, after 100 ms
        // when timed out). Real time, as the stuck child holds a worker thread: only the old
        // behaviour's failure depends on it; the drained host returns once the gate opens.
        let opener = {
            let gate = gate.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(400));
                *gate.0.lock().unwrap() = true;
                gate.1.notify_all();
            })
        };
        let r = host.run(&json!({}), &ctx).await;
        let expected = if cancel {
            Outcome::Cancelled
        } else {
            Outcome::Timeout
        };
        assert_eq!(r.outcome, expected);
        let events_at_return = sink.events().len();
        let spent_at_return = budget.snapshot().spent_usd;
        let calls_at_return = child_calls.load(Ordering::SeqCst);
        // Whatever the stuck child does once its gate opens, it has had time to do it.
        tokio::task::spawn_blocking(move || opener.join().unwrap())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;

        assert_eq!(
            sink.events().len(),
            events_at_return,
            "events after the report"
        );
        assert_eq!(
            budget.snapshot().spent_usd,
            spent_at_return,
            "charges after the report"
        );
        assert_eq!(budget.snapshot().reserved_usd, Decimal::ZERO);
        assert_eq!(
            child_calls.load(Ordering::SeqCst),
            calls_at_return,
            "a child model call started after the report"
        );
        if cancel {
            // The one call in flight when the host was cancelled; none started after. (When
            // timed out, this holds unless the machine is so slow that the gate opened first.)
            assert_eq!(calls_at_return, 1);
        }
        // The call in flight finished, so it was charged, and the host's total includes it.
        assert_eq!(r.total_cost_usd, spent_at_return);
        let events = sink.events();
        let charged: Decimal = events
            .iter()
            .map(|e| match &e.kind {
                subcontract::EventKind::ModelCall { cost_usd, .. } => *cost_usd,
                _ => Decimal::ZERO,
            })
            .sum();
        assert_eq!(charged, r.total_cost_usd);
        if cancel {
            assert_eq!(
                r.total_cost_usd,
                Decimal::new(4, 3),
                "two calls of 0.002 USD"
            );
        }
        let tree = build_tree(&events);
        assert_eq!(tree[0].outcome, Some(expected));
        assert_eq!(tree[0].total_cost_usd, r.total_cost_usd);
        assert_eq!(tree[0].children.len(), 1);
        assert_eq!(tree[0].children[0].outcome, Some(Outcome::Cancelled));
    }
}

/// What one response's tool calls add to the next request is bounded: 1,000 `read_file` calls
/// of a 10,000-character file would add 10 MB; at most `max_tool_calls_per_turn` run, their
/// results stop at `max_tool_result_chars_per_turn`, and every other call gets an error result
/// saying which limit it met.
#[tokio::test]
async fn tool_results_per_turn_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let line = format!("{}\n", "x".repeat(99));
    std::fs::write(dir.path().join("big.txt"), line.repeat(100)).unwrap();
    type SeenReq = Arc<Mutex<Option<(usize, Vec<(String, String, bool)>)>>>;
    let seen: SeenReq = Arc::default();
    let m = {
        let seen = seen.clone();
        model(move |_, turn, req| {
            if turn == 1 {
                let calls = (0..1_000)
                    .map(|_| ("read_file".to_string(), json!({"path": "big.txt"})))
                    .collect();
                return ScriptStep::tool_calls(calls);
            }
            let size: usize = req
                .messages
                .iter()
                .map(|m| serde_json::to_string(m).unwrap().len())
                .sum();
            *seen.lock().unwrap() = Some((size, last_tool_results(req)));
            ScriptStep::text("done")
        })
    };
    let sink = Arc::new(MemorySink::new());
    let ctx = Ctx::builder(m)
        .tools(tools(
            subcontract::tool::workspace::Workspace::new(dir.path())
                .unwrap()
                .tools(),
        ))
        .events(sink.clone())
        .build();
    let r = host_spec(&["read_file"]).run(&json!({}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    let (size, results) = seen.lock().unwrap().take().expect("a second request");
    assert_eq!(results.len(), 1_000, "every call is answered");
    let ok: Vec<_> = results.iter().filter(|r| !r.2).collect();
    let ok_chars: usize = ok.iter().map(|r| r.1.chars().count()).sum();
    assert!(!ok.is_empty());
    assert!(ok_chars <= 200_000, "{ok_chars}");
    // The results that ran come first, in call order; the first that did not fit is withheld,
    // the tools after it do not run, and calls past 64 are refused.
    assert!(results[..ok.len()].iter().all(|r| !r.2));
    assert!(
        results[ok.len()].1.starts_with("result withheld")
            && results[ok.len()]
                .1
                .contains("max_tool_result_chars_per_turn"),
        "{}",
        results[ok.len()].1
    );
    for r in &results[ok.len() + 1..64] {
        assert!(
            r.2 && r.1.starts_with("not run: this turn's tool results"),
            "{}",
            r.1
        );
    }
    for r in &results[64..] {
        assert!(r.2 && r.1.contains("max_tool_calls_per_turn"), "{}", r.1);
    }
    let ran = sink
        .events()
        .iter()
        .filter(|e| matches!(e.kind, subcontract::EventKind::ToolCall { .. }))
        .count();
    assert_eq!(ran, ok.len() + 1, "only the calls before the cut ran");
    // The 1,000 calls themselves and the short refusals are on top of the results' limit.
    assert!(size < 200_000 + 1_000 * 200, "next request is {size} bytes");
}

/// A root run offers its model the host's tools its spec names, no others, and a tool that
/// asks what the run offers gets that answer too: `grep` points at `read_file` only where the
/// spec lists it, though the host holds it either way.
#[tokio::test]
async fn a_root_run_offers_only_its_specs_tools_and_grep_points_only_at_those() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("config")).unwrap();
    std::fs::write(
        dir.path().join("config/app.toml"),
        "[service]\nport = 8134\n",
    )
    .unwrap();
    for (listed, pointer) in [(&["grep"][..], false), (&["grep", "read_file"][..], true)] {
        let seen: Arc<Mutex<Vec<(String, String, bool)>>> = Arc::default();
        let m = {
            let seen = seen.clone();
            model(move |_, turn, req| match turn {
                1 => ScriptStep::tool_calls(vec![
                    (
                        "grep".to_string(),
                        json!({"pattern": "service", "path_glob": "config/app.toml"}),
                    ),
                    ("read_file".to_string(), json!({"path": "config/app.toml"})),
                ]),
                _ => {
                    *seen.lock().unwrap() = last_tool_results(req);
                    ScriptStep::text("done")
                }
            })
        };
        let held = subcontract::tool::workspace::Workspace::new(dir.path())
            .unwrap()
            .tools();
        let ctx = Ctx::builder(m).tools(tools(held)).build();
        let r = host_spec(listed).run(&json!({}), &ctx).await;
        assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
        let results = seen.lock().unwrap().clone();
        let (grep, read) = (&results[0], &results[1]);
        assert!(!grep.2 && grep.1.contains("[service]"), "{grep:?}");
        assert_eq!(
            grep.1.contains("read_file {"),
            pointer,
            "{listed:?}: {}",
            grep.1
        );
        // The call of a tool the spec does not list is refused, held or not.
        assert_eq!(read.2, !pointer, "{listed:?}: {read:?}");
        if !pointer {
            assert!(read.1.starts_with("unknown tool `read_file`"), "{}", read.1);
        }
    }
}
