//! A recorded run replays offline to the same result, concurrent sub-agents included.

use std::sync::Arc;

use serde_json::json;
use subcontract::model::{Recorder, ReplayModel, ScriptStep};
use subcontract::{Ctx, Model, Outcome, ToolSet};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_runs_replay_offline() {
    let research = research_spec("research", &[]);
    let live = model(|system, turn, req| match (system, turn) {
        ("HOST", 1) => ScriptStep::tool_calls(vec![
            ("research".into(), json!({"question": "first question"})),
            ("research".into(), json!({"question": "second question"})),
        ]),
        ("HOST", _) => ScriptStep::text(format!("{} messages seen", req.messages.len())),
        (_, 1) => ScriptStep::submit(json!({"findings": "invalid"})).with_usage(10, 5),
        _ => ScriptStep::submit(good_findings()).with_usage(20, 7),
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let recorder: Arc<dyn Model> = Arc::new(Recorder::to_file(live, &path).unwrap());
    let host = host_spec(&["research"]);
    let run = |m: Arc<dyn Model>| {
        let ctx = Ctx::builder(m)
            .tools(ToolSet::new().with(research.as_tool()).unwrap())
            .build();
        let host = host.clone();
        async move { host.run(&json!({}), &ctx).await }
    };
    let recorded = run(recorder).await;
    assert_eq!(recorded.outcome, Outcome::Completed);

    let replay: Arc<dyn Model> = Arc::new(ReplayModel::from_file(&path).unwrap());
    assert_eq!(replay.id(), "scripted:test");
    let replayed = run(replay.clone()).await;
    assert_eq!(replayed.outcome, Outcome::Completed);
    assert_eq!(replayed.output, recorded.output);
    assert_eq!(replayed.turns, recorded.turns);

    // Used up: a third run has nothing left to answer with, and says so.
    let again = run(replay).await;
    assert_eq!(again.outcome, Outcome::ModelError);
    assert!(again
        .error
        .unwrap()
        .to_string()
        .contains("no recorded response"));

    // A corrupt recording is a clear error, not a panic.
    std::fs::write(&path, "{\"not\": \"an exchange\"}\n").unwrap();
    let err = ReplayModel::from_file(&path).unwrap_err().to_string();
    assert!(
        err.contains("run.jsonl:1: not a recorded exchange"),
        "{err}"
    );
}
