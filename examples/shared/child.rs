//! The child both batch benchmarks run (`bench_batch` locally, `bench_temporal` on Temporal): a
//! scripted sub-agent of [`TURNS`] turns (two `lookup` tool calls, then the output, each
//! checked against its contract), every call `delay` long.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rust_decimal::Decimal;
use serde_json::{json, Value};
use subcontract::model::{ModelRequest, Price, PriceTable, ScriptStep, ScriptedModel};
use subcontract::{Ctx, CtxBuilder, FnTool, SubAgentSpec, ToolOutput, ToolSet};

/// Model turns per child.
pub const TURNS: u64 = 3;

/// A host for the child: its scripted model (`delay` per call), its tool and its prices.
pub fn host(delay: Duration) -> CtxBuilder {
    let model = ScriptedModel::from_fn("scripted:bench", move |req: ModelRequest<'_>| {
        // One user message, then two messages per turn.
        let turn = req.messages.len().div_ceil(2) as u64;
        let step = if turn < TURNS {
            ScriptStep::tool_call("lookup", json!({}))
        } else {
            ScriptStep::submit(json!({"answer": "The build script generates the parser."}))
        };
        step.with_usage(100, 20).delayed(delay)
    });
    let mut tools = ToolSet::new();
    tools.insert(lookup()).expect("one tool");
    let mut prices = PriceTable::new();
    prices.insert(
        "scripted:bench",
        Price::per_mtok(Decimal::new(2, 0), Decimal::new(8, 0)),
    );
    Ctx::builder(Arc::new(model)).tools(tools).prices(prices)
}

/// The child's spec, capped at 0.10 USD (its worst case per call is about 0.034).
pub fn spec() -> SubAgentSpec<Value, Value> {
    SubAgentSpec::dynamic(
        "answer",
        json!({"type": "object", "required": ["question"], "additionalProperties": false,
               "properties": {"question": {"type": "string", "maxLength": 500}}}),
        json!({"type": "object", "required": ["answer"], "additionalProperties": false,
               "properties": {"answer": {"type": "string", "maxLength": 500}}}),
    )
    .description("Answer a question about the code.")
    .system("You answer questions about the code. Use lookup, then submit the answer.")
    .tools(["lookup"])
    .max_turns(4)
    .max_cost_usd(Decimal::new(10, 2))
    .build()
    .expect("the benchmark spec is valid")
}

fn lookup() -> Arc<dyn subcontract::Tool> {
    FnTool::new(
        "lookup",
        "Trivial local tool returning a constant.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        |_| async { ToolOutput::text("component: parser generator") },
    )
}

/// `n` inputs `t-0`… as JSON Lines.
pub fn write_inputs(path: &Path, n: usize) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    for i in 0..n {
        let line = json!({"id": format!("t-{i}"), "input": {"question": format!("What does component {i} do?")}});
        writeln!(f, "{line}").expect("write");
    }
    f.flush().expect("flush");
}
