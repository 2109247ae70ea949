//! Invariant 2 under concurrency: thousands of randomized budget trees, many tasks reserving
//! (waiting when calls in flight hold the room) and settling at once on every node; no node's
//! spent + reserved ever passes its limit, and every settled spend is recorded in each ancestor
//! exactly once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rust_decimal::Decimal;
use subcontract::Budget;

struct Node {
    budget: Budget,
    parent: Option<usize>,
    /// Settled spend of this node's own calls, in micro-USD.
    own_micros: AtomicU64,
}

fn check_limits(nodes: &[Node]) {
    for n in nodes {
        let s = n.budget.snapshot();
        if let Some(limit) = s.limit_usd {
            assert!(
                s.spent_usd + s.reserved_usd <= limit,
                "node {} over its limit: {} + {} > {}",
                n.budget.label(),
                s.spent_usd,
                s.reserved_usd,
                limit
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_trees_never_exceed_limits() {
    let trees = 2_000;
    let mut rng = SmallRng::seed_from_u64(0x5eed);
    for t in 0..trees {
        // A random tree of 2..12 nodes, some limited, some not.
        let n_nodes = rng.random_range(2..12);
        let mut nodes: Vec<Node> = Vec::with_capacity(n_nodes);
        let root_limit = Decimal::new(rng.random_range(1..200), 2);
        nodes.push(Node {
            budget: Budget::new(Some(root_limit), None),
            parent: None,
            own_micros: AtomicU64::new(0),
        });
        for i in 1..n_nodes {
            let parent = rng.random_range(0..i);
            let limit = rng
                .random_bool(0.7)
                .then(|| Decimal::new(rng.random_range(1..150), 2));
            let budget = nodes[parent].budget.child(format!("t{t}n{i}"), limit, None);
            nodes.push(Node {
                budget,
                parent: Some(parent),
                own_micros: AtomicU64::new(0),
            });
        }
        let nodes = Arc::new(nodes);
        let mut tasks = Vec::new();
        for task in 0..8u64 {
            let nodes = nodes.clone();
            let seed = rng.random::<u64>() ^ task;
            tasks.push(tokio::spawn(async move {
                let mut rng = SmallRng::seed_from_u64(seed);
                for _ in 0..20 {
                    let i = rng.random_range(0..nodes.len());
                    let want = Decimal::new(rng.random_range(0..40), 2);
                    if let Ok(r) = nodes[i].budget.reserve(want).await {
                        check_limits(&nodes);
                        if rng.random_bool(0.5) {
                            tokio::task::yield_now().await;
                        }
                        if rng.random_bool(0.8) {
                            // Settle to at most the reservation (it is a worst case).
                            let actual = Decimal::new(
                                rng.random_range(
                                    0..=(want * Decimal::from(100)).try_into().unwrap_or(0i64),
                                ),
                                2,
                            );
                            let micros: u64 =
                                (actual * Decimal::from(1_000_000)).try_into().unwrap();
                            nodes[i].own_micros.fetch_add(micros, Ordering::Relaxed);
                            r.settle(actual);
                        } else {
                            drop(r); // cancelled: released, not spent
                        }
                        check_limits(&nodes);
                    }
                }
            }));
        }
        for task in tasks {
            task.await.expect("no task panics");
        }
        // Every node's spent = the settled spend of its whole subtree; nothing stays reserved.
        for (i, n) in nodes.iter().enumerate() {
            let mut subtree = 0u64;
            for (j, m) in nodes.iter().enumerate() {
                let mut k = Some(j);
                while let Some(x) = k {
                    if x == i {
                        subtree += m.own_micros.load(Ordering::Relaxed);
                        break;
                    }
                    k = nodes[x].parent;
                }
            }
            let s = n.budget.snapshot();
            assert_eq!(s.reserved_usd, Decimal::ZERO);
            assert_eq!(
                s.spent_usd,
                Decimal::new(subtree as i64, 6).normalize(),
                "tree {t} node {i}"
            );
        }
    }
}

/// Forty calls at once under a 0.02 USD limit, each reserving 0.0048 USD (its worst case) and
/// costing 0.0001 USD. Only four fit in flight at a time; the others wait for them
/// instead of failing, and the limit holds at every moment (a watcher checks it throughout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_wait_for_room_instead_of_failing() {
    let root = Budget::with_label("mcp", Some(Decimal::new(2, 2)), None);
    let nodes = Arc::new(vec![Node {
        budget: root.clone(),
        parent: None,
        own_micros: AtomicU64::new(0),
    }]);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (nodes, done) = (nodes.clone(), done.clone());
        tokio::spawn(async move {
            let mut checks = 0u64;
            while !done.load(Ordering::Relaxed) {
                check_limits(&nodes);
                checks += 1;
                tokio::task::yield_now().await;
            }
            checks
        })
    };
    let mut calls = Vec::new();
    for i in 0..40 {
        // Each call is a child of the server-wide budget, as in `subcontract mcp`.
        let child = root.child(format!("mcp.call-{i}"), Some(Decimal::new(20, 2)), None);
        calls.push(tokio::spawn(async move {
            let r = child.reserve(Decimal::new(48, 4)).await?;
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            r.settle(Decimal::new(1, 4));
            Ok::<_, subcontract::BudgetError>(())
        }));
    }
    let mut ok = 0;
    for c in calls {
        match c.await.expect("no task panics") {
            Ok(()) => ok += 1,
            Err(e) => eprintln!("{e}"),
        }
    }
    done.store(true, Ordering::Relaxed);
    assert!(watcher.await.expect("the watcher ran") > 0);
    assert_eq!(ok, 40, "every call fits once earlier ones settle");
    let s = root.snapshot();
    assert_eq!(s.spent_usd, Decimal::new(40, 4));
    assert_eq!((s.reserved_usd, s.calls), (Decimal::ZERO, 40));
}

/// A provider that bills far past `max_tokens` (0.32 USD under a 0.02 USD limit): that one
/// call cannot be prevented, but the run ends at once as `budget_exhausted` saying so, its
/// event records the overshoot, and no further call starts anywhere under the budget.
#[tokio::test]
async fn a_call_billed_past_its_reservation_exhausts_the_budget_at_once() {
    use std::sync::atomic::AtomicUsize;
    use subcontract::model::{Price, PriceTable, ScriptStep};
    use subcontract::{Ctx, EventKind, MemorySink, Outcome, SubAgentSpec};

    use crate::common::*;

    let mut prices = PriceTable::new();
    prices.insert(
        "scripted:test",
        Price::per_mtok(Decimal::ONE, Decimal::from(10)),
    );
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    // 32,000 output tokens billed under a limit of 100: 0.32 USD.
    let m = model(move |_, _, _| {
        counted.fetch_add(1, Ordering::SeqCst);
        ScriptStep::tool_call("nothing", serde_json::json!({})).with_usage(10, 32_000)
    });
    let spec = SubAgentSpec::dynamic("research", question_schema(), findings_schema())
        .description("d")
        .system("CHILD")
        .max_tokens_per_turn(100)
        .max_turns(4)
        .build()
        .expect("valid spec");
    let root = Budget::new(Some(Decimal::new(2, 2)), None);
    let sink = Arc::new(MemorySink::new());
    let ctx = Ctx::builder(m)
        .budget(root.clone())
        .prices(prices)
        .events(sink.clone())
        .build();
    let input = serde_json::json!({"question": "abc?"});
    let r = spec.run_child(&input, &ctx).await;
    assert_eq!(r.outcome, Outcome::BudgetExhausted, "{:?}", r.error);
    let error = r.error.map(|f| f.to_string()).unwrap_or_default();
    assert!(error.contains("billed 0.32001 USD"), "{error}");
    assert_eq!(r.turns, 1);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let over: Vec<Decimal> = sink
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ModelCall {
                over_reserved_usd, ..
            } => *over_reserved_usd,
            _ => None,
        })
        .collect();
    assert_eq!(over.len(), 1);
    assert_eq!(root.snapshot().spent_usd, Decimal::new(32001, 5));
    // A sibling run under the same budget starts no call at all.
    let r = spec.run_child(&input, &ctx).await;
    assert_eq!(r.outcome, Outcome::BudgetExhausted);
    assert!(r
        .error
        .map(|f| f.to_string())
        .unwrap_or_default()
        .contains("a provider billed"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// The same through the run loop: a host fans out to forty sub-agents at once under a 0.02 USD
/// budget; each call reserves 0.0048 USD (480 output tokens at 10 USD per million) and costs
/// 0.0001. They used to fail when forked or reserving beside calls in flight (38 of 40
/// `budget_exhausted` with 0.0048 USD spent); now they wait their turn and all complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_sub_agents_under_a_small_budget_take_turns() {
    use std::time::Duration;
    use subcontract::model::{Price, PriceTable, ScriptStep};
    use subcontract::{Ctx, EventKind, MemorySink, Outcome, ToolSet};

    use crate::common::*;

    let mut prices = PriceTable::new();
    prices.insert(
        "scripted:test",
        Price::per_mtok(Decimal::ZERO, Decimal::from(10)),
    );
    let child = SubAgentSpecs::child();
    let m = model(|system, turn, _| match (system, turn) {
        ("HOST", 1) => ScriptStep::tool_calls(
            (0..40)
                .map(|i| {
                    (
                        "research".to_string(),
                        serde_json::json!({"question": format!("q{i}?")}),
                    )
                })
                .collect(),
        )
        .with_usage(0, 10),
        ("HOST", _) => ScriptStep::text("done").with_usage(0, 10),
        _ => ScriptStep::submit(good_findings())
            .with_usage(0, 10)
            .delayed(Duration::from_millis(2)),
    });
    let mut set = ToolSet::new();
    set.insert(child.as_tool()).expect("one tool");
    let root = Budget::with_label("mcp", Some(Decimal::new(2, 2)), None);
    let sink = Arc::new(MemorySink::new());
    let ctx = Ctx::builder(m)
        .budget(root.clone())
        .prices(prices)
        .tools(set)
        .fanout_limit(40)
        .events(sink.clone())
        .build();
    let host = SubAgentSpecs::host();
    let r = host.run(&serde_json::json!({}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    let finished: Vec<Outcome> = sink
        .events()
        .iter()
        .filter(|e| e.parent_run_id.is_some())
        .filter_map(|e| match e.kind {
            EventKind::Finished { outcome, .. } => Some(outcome),
            _ => None,
        })
        .collect();
    assert_eq!(finished.len(), 40);
    assert!(
        finished.iter().all(|o| *o == Outcome::Completed),
        "{finished:?}"
    );
    let s = root.snapshot();
    assert_eq!(
        s.spent_usd,
        Decimal::new(42, 4),
        "40 children and 2 host turns"
    );
    assert_eq!(s.reserved_usd, Decimal::ZERO);
}

/// The specs of the fan-out test: a host offering `research`, and `research` itself, both
/// with 480 output tokens per turn.
struct SubAgentSpecs;

impl SubAgentSpecs {
    fn child() -> subcontract::SubAgentSpec<serde_json::Value, serde_json::Value> {
        subcontract::SubAgentSpec::dynamic(
            "research",
            crate::common::question_schema(),
            crate::common::findings_schema(),
        )
        .description("Investigate a question and return findings.")
        .system("CHILD research")
        .max_tokens_per_turn(480)
        .max_turns(2)
        .build()
        .expect("valid spec")
    }

    fn host() -> subcontract::SubAgentSpec<serde_json::Value, serde_json::Value> {
        subcontract::SubAgentSpec::dynamic(
            "host",
            serde_json::json!({"type": "object"}),
            serde_json::json!({"type": "string", "maxLength": 2000}),
        )
        .description("The host agent.")
        .system("HOST")
        .tools(["research"])
        .max_tokens_per_turn(480)
        .max_turns(3)
        .build()
        .expect("valid spec")
    }
}

/// A spend journal is asked before every model call, after the call's worst case is reserved,
/// so what it records always covers the call about to be made; a journal that cannot record
/// stops the run before the call (the model is never called, nothing is spent).
#[tokio::test]
async fn the_spend_journal_records_each_call_before_it_is_made() {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;
    use subcontract::budget::SpendJournal;
    use subcontract::model::{Price, PriceTable, ScriptStep};
    use subcontract::{Ctx, Outcome, SubAgentSpec};

    use crate::common::*;

    /// Records the root's spent + reserved at each call, and the model calls made so far.
    struct Recorder {
        budget: Budget,
        calls: Arc<AtomicUsize>,
        seen: Mutex<Vec<(Decimal, usize)>>,
        fail_at: usize,
    }

    #[async_trait::async_trait]
    impl SpendJournal for Recorder {
        async fn before_call(&self) -> Result<(), String> {
            let s = self.budget.snapshot();
            let mut seen = self.seen.lock().expect("seen");
            seen.push((
                s.spent_usd + s.reserved_usd,
                self.calls.load(Ordering::SeqCst),
            ));
            if seen.len() == self.fail_at {
                return Err("the journal is down".into());
            }
            Ok(())
        }
    }

    let mut prices = PriceTable::new();
    prices.insert(
        "scripted:test",
        Price::per_mtok(Decimal::ONE, Decimal::from(10)),
    );
    let spec = SubAgentSpec::dynamic("research", question_schema(), findings_schema())
        .description("d")
        .system("CHILD")
        .tools(["lookup"])
        .max_tokens_per_turn(100)
        .max_turns(4)
        .build()
        .expect("valid spec");
    let run = |fail_at: usize| {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let m = model(move |_, turn, _| {
            counted.fetch_add(1, Ordering::SeqCst);
            if turn < 3 {
                ScriptStep::tool_call("lookup", serde_json::json!({"q": "x"})).with_usage(10, 10)
            } else {
                ScriptStep::submit(good_findings()).with_usage(10, 10)
            }
        });
        let budget = Budget::new(Some(Decimal::ONE), None);
        let journal = Arc::new(Recorder {
            budget: budget.clone(),
            calls: calls.clone(),
            seen: Mutex::new(Vec::new()),
            fail_at,
        });
        let mut tools = subcontract::ToolSet::new();
        tools.insert(lookup_tool("lookup")).expect("tool");
        let ctx = Ctx::builder(m)
            .budget(budget.clone())
            .prices(prices.clone())
            .tools(tools)
            .spend_journal(journal.clone())
            .build();
        (ctx, journal, calls, budget)
    };
    let input = serde_json::json!({"question": "abc?"});

    let (ctx, journal, calls, budget) = run(usize::MAX);
    let r = spec.run_child(&input, &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    let seen = journal.seen.lock().expect("seen").clone();
    assert_eq!(seen.len(), 3, "one record per call");
    // Each call bills 0.00011 USD (10 tokens in at 1, 10 out at 10 per million).
    let per_call = Decimal::new(11, 5);
    for (i, (at_stake, calls_before)) in seen.iter().enumerate() {
        // Recorded before call i+1 was made, and covering it: more than the calls before it
        // spent, by the reservation of the call about to be made.
        assert_eq!(*calls_before, i);
        assert!(*at_stake > per_call * Decimal::from(i), "{seen:?}");
    }
    let spent = budget.snapshot().spent_usd;
    assert!(
        seen[2].0 >= spent,
        "the last record ({}) covers the spend ({spent})",
        seen[2].0
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);

    // The journal fails before the second call: the run stops, the call is never made.
    let (ctx, _journal, calls, budget) = run(2);
    let r = spec.run_child(&input, &ctx).await;
    assert_eq!(r.outcome, Outcome::ModelError);
    assert!(r
        .error
        .map(|f| f.to_string())
        .unwrap_or_default()
        .contains("the journal is down"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(budget.snapshot().reserved_usd, Decimal::ZERO);
}

/// The answer reserve over random concurrent trees of runs: a host fans out to sub-agents
/// (which may fan out again), each spec with random limits (turns, its own cap, tokens per
/// turn, timeout; a tenth with the reserve off), under a random root budget, on a model that
/// calls tools at random (several at once) until it is asked for its output alone, at a
/// constant delay per tree. Whatever happens, no budget is overshot, nothing stays reserved,
/// and every run with the reserve on that made a model call and ended on its budget or its
/// time ended with an output, `invalid_output` or a provider error: never empty-handed, and
/// no sub-agent ended its parent's answer.
#[tokio::test(start_paused = true)]
async fn random_trees_of_runs_never_end_empty_handed() {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::time::Duration;
    use subcontract::model::{Price, PriceTable, ScriptStep, ScriptedModel, SUBMIT_TOOL};
    use subcontract::{Ctx, EventKind, MemorySink, Outcome, SubAgentSpec, ToolSet};

    use crate::common::*;

    let trees = 10_000;
    let mut rng = SmallRng::seed_from_u64(0xa5e7);
    let mut cut_short: HashMap<&str, usize> = HashMap::new();
    let mut completed_roots = 0usize;
    for t in 0..trees {
        let delay = Duration::from_millis([0, 10, 40][rng.random_range(0..3)]);
        // The specs: `leaf` (tools: lookup), `mid` (lookup, leaf) and the host (lookup, mid,
        // leaf), each with random limits.
        let mut reserve_of: HashMap<&'static str, bool> = HashMap::new();
        let mut limits = |name: &'static str, rng: &mut SmallRng| {
            let on = rng.random_bool(0.9);
            reserve_of.insert(name, on);
            let cap = rng
                .random_bool(0.5)
                .then(|| Decimal::new(rng.random_range(50..10_000), 5));
            (
                rng.random_range(1..8u32),
                cap,
                rng.random_range(20..200u32),
                Duration::from_millis(rng.random_range(100..3_000)),
                on,
            )
        };
        let spec = |name: &'static str,
                    tools: &[&str],
                    output: serde_json::Value,
                    (turns, cap, tokens, timeout, on): (
            u32,
            Option<Decimal>,
            u32,
            Duration,
            bool,
        )| {
            let mut b = SubAgentSpec::dynamic(name, serde_json::json!({"type": "object"}), output)
                .description("A test agent.")
                .system(name.to_uppercase())
                .tools(tools.iter().copied())
                .max_turns(turns)
                .max_tokens_per_turn(tokens)
                .timeout(timeout)
                .answer_reserve(on);
            if let Some(c) = cap {
                b = b.max_cost_usd(c);
            }
            b.build().expect("valid spec")
        };
        let leaf = spec(
            "leaf",
            &["lookup"],
            findings_schema(),
            limits("leaf", &mut rng),
        );
        let mid = spec(
            "mid",
            &["lookup", "leaf"],
            findings_schema(),
            limits("mid", &mut rng),
        );
        let host = spec(
            "host",
            &["lookup", "mid", "leaf"],
            serde_json::json!({"type": "string", "maxLength": 200}),
            limits("host", &mut rng),
        );
        let model_rng = Arc::new(Mutex::new(SmallRng::seed_from_u64(rng.random())));
        let model = Arc::new(ScriptedModel::from_fn("scripted:test", move |req| {
            let mut rng = model_rng.lock().unwrap();
            let alone = req.tools.len() == 1 && &*req.tools[0].name == SUBMIT_TOOL;
            let host = req.system == "HOST";
            let answer = || {
                if host {
                    ScriptStep::text("the answer")
                } else {
                    ScriptStep::submit(good_findings())
                }
            };
            let step = if alone || req.tools.is_empty() || rng.random_bool(0.15) {
                answer()
            } else {
                let n = rng.random_range(1..4);
                let calls = (0..n)
                    .map(|i| {
                        let tool = &req.tools[rng.random_range(0..req.tools.len())].name;
                        let args = if &**tool == "lookup" {
                            serde_json::json!({"q": format!("{i}-{}", rng.random::<u32>())})
                        } else {
                            serde_json::json!({"k": rng.random::<u32>()})
                        };
                        (tool.to_string(), args)
                    })
                    .filter(|(name, _)| name != SUBMIT_TOOL)
                    .collect::<Vec<_>>();
                if calls.is_empty() {
                    answer()
                } else {
                    ScriptStep::tool_calls(calls)
                }
            };
            // Never more than the call's worst case: every prompt here is longer than 100
            // bytes, and each call may write 20 tokens or more.
            step.with_usage(rng.random_range(0..100), rng.random_range(0..20))
                .delayed(delay)
        }));
        let mut prices = PriceTable::new();
        prices.insert(
            "scripted:test",
            Price::per_mtok(Decimal::from(10), Decimal::from(10)),
        );
        let mut tools = ToolSet::new();
        tools.insert(lookup_tool("lookup")).unwrap();
        tools.insert(leaf.as_tool()).unwrap();
        tools.insert(mid.as_tool()).unwrap();
        let limit = Decimal::new(rng.random_range(100..20_000), 5);
        let root = Budget::new(Some(limit), None);
        let sink = Arc::new(MemorySink::new());
        let ctx = Ctx::builder(model)
            .budget(root.clone())
            .prices(prices)
            .tools(tools)
            .fanout_limit(rng.random_range(1..4))
            .events(sink.clone())
            .build();
        let r = host.run(&serde_json::json!({}), &ctx).await;
        completed_roots += usize::from(r.outcome == Outcome::Completed);
        let s = root.snapshot();
        assert!(s.spent_usd <= limit, "tree {t}: {} > {limit}", s.spent_usd);
        assert_eq!(s.reserved_usd, Decimal::ZERO, "tree {t}: left reserved");
        let events = sink.events();
        let mut called: HashMap<&str, bool> = HashMap::new();
        for e in &events {
            if matches!(e.kind, EventKind::ModelCall { .. }) {
                called.insert(&e.run_id, true);
            }
        }
        for e in &events {
            let EventKind::Finished {
                outcome,
                cut_short: cut,
                error,
                ..
            } = &e.kind
            else {
                continue;
            };
            if let Some(l) = cut {
                *cut_short.entry(l.as_str()).or_insert(0usize) += 1;
            }
            let on = reserve_of.get(&*e.spec).copied().unwrap_or(true);
            let empty = matches!(outcome, Outcome::BudgetExhausted | Outcome::Timeout);
            if on && called.get(&*e.run_id).copied().unwrap_or(false) && empty {
                let tree = subcontract::events::tree::render_tree(
                    &subcontract::events::tree::build_tree(&events),
                );
                panic!(
                    "tree {t}: {} ({}) made a call and ended {outcome} empty-handed: {error:?}\n{tree}",
                    e.run_id, e.spec
                );
            }
        }
    }
    // The trees do reach their limits: runs were cut short by each, and most hosts answered.
    for limit in ["budget", "time", "turns"] {
        let n = cut_short.get(limit).copied().unwrap_or(0);
        assert!(
            n > trees / 100,
            "{n} runs cut short by {limit}: {cut_short:?}"
        );
    }
    assert!(
        completed_roots > trees / 2,
        "{completed_roots} hosts answered"
    );
}
