//! A host fans out two `fix_test` sub-agents to fix a failing test, offline: the models are
//! scripted; the working copies (real git worktrees), the OS sandbox around every command, the
//! checks and the patches are real.
//!
//! - the bundled repository (`examples/fix_fanout/repo`) is copied to a temporary directory
//!   and committed there: the user's workspace, whose test fails;
//! - `fix_test-1` follows "the loop stops one item short": it reads, edits, runs the tests in
//!   its own copy and submits; its checks pass, and its changes go back to the host;
//! - `fix_test-2` follows "the quantity key is read wrongly": its edit does not fix the test,
//!   its submissions fail their checks, and it ends `invalid_output`; its changes are kept as
//!   a patch file, never applied;
//! - the host accepts the first sub-agent's changes into its own copy and answers; its own
//!   check (the tests) passes there. The workspace is still byte for byte as it was: the
//!   example then applies the host's changes and runs the tests in it.
//!
//! Run: `cargo run --example fix_fanout`

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use serde_json::{json, Value};
use subcontract::events::tree::{build_tree, render_tree};
use subcontract::host::Host;
use subcontract::model::{Message, ModelRequest, ScriptStep, ScriptedModel};
use subcontract::spec::load_spec;
use subcontract::{MemorySink, Outcome};

const MODEL: &str = "scripted:fix";
const HYPOTHESES: [&str; 2] = [
    "The loop stops one item short.",
    "The quantity key is read wrongly.",
];

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(run())
}

async fn run() -> Result<(), Error> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fix_fanout");
    let scratch = tempfile::tempdir()?;
    let workspace = scratch.path().join("inventory");
    copy_repo(&here.join("repo"), &workspace)?;
    let before = snapshot(&workspace)?;
    println!("== the workspace's test fails\n");
    println!("{}", tests(&workspace)?.1.trim_end());

    let fix = load_spec(here.join("specs/fix_test.toml"))?;
    let host = load_spec(here.join("specs/host.toml"))?;
    let events = Arc::new(MemorySink::new());
    let model = Arc::new(ScriptedModel::from_fn(MODEL, script));
    // Copies and kept patches live outside the workspace, here in the scratch directory.
    let ctx = Host::builder()
        .model(model)
        .workspace(&workspace)
        .copies_dir(scratch.path().join("copies"))
        .spec(&fix)
        .sink(events.clone())
        .build()?
        .build();
    let result = host.run(&json!({ "hypotheses": HYPOTHESES }), &ctx).await;

    println!("\n== run tree\n");
    let tree = build_tree(&events.events());
    print!("{}", render_tree(&tree));
    println!(
        "\n== host: {} after {} turns\n\n{}",
        result.outcome,
        result.turns,
        result.output.as_ref().and_then(Value::as_str).unwrap_or("")
    );

    // The story, checked: it fails if the run went otherwise.
    let root = tree.first().ok_or("no run tree")?;
    let outcomes: Vec<_> = root.children.iter().map(|c| c.outcome).collect();
    if outcomes != [Some(Outcome::Completed), Some(Outcome::InvalidOutput)] {
        return Err(
            format!("the two fixes should end completed and invalid_output: {outcomes:?}").into(),
        );
    }
    let kept = root.children[1]
        .changes
        .iter()
        .find(|c| c.status == "kept")
        .and_then(|c| c.patch.clone())
        .ok_or("the failed fix's changes should be kept as a patch")?;
    if !root.changes.iter().any(|c| c.status == "accepted") {
        return Err("the host should accept the passing fix".into());
    }
    if snapshot(&workspace)? != before {
        return Err("the workspace changed before the host's changes were applied".into());
    }
    let changes = result
        .changes
        .ok_or("the host should hand back its changes")?;
    println!("\n== the host's changes (the workspace is unchanged until they are applied)\n");
    print!("{}", changes.diff);
    println!(
        "\n(the failed fix's changes were kept in {kept}, in the example's scratch directory)"
    );
    changes.apply(&workspace)?;
    let (passed, out) = tests(&workspace)?;
    println!("\n== applied; the tests now\n\n{}", out.trim_end());
    if !passed {
        return Err("the tests should pass once the changes are applied".into());
    }
    Ok(())
}

/// What a scripted model answers: the host by its system prompt, each fixer by its hypothesis.
fn script(req: ModelRequest<'_>) -> ScriptStep {
    let turn = req.messages.len().div_ceil(2);
    if req.system.starts_with("You are the host") {
        return match turn {
            1 => ScriptStep::tool_calls(
                HYPOTHESES
                    .iter()
                    .map(|h| ("fix_test".to_string(), json!({ "hypothesis": h })))
                    .collect(),
            ),
            2 => {
                // Accept the changes of the fix whose result carries them.
                let id = last_results(&req)
                    .into_iter()
                    .find_map(|(content, is_error)| {
                        let v: Value = serde_json::from_str(&content).ok().filter(|_| !is_error)?;
                        v["changes"]["id"].as_str().map(str::to_owned)
                    });
                match id {
                    Some(id) => ScriptStep::tool_call("accept_changes", json!({ "id": id })),
                    None => ScriptStep::text("No fix passed its checks."),
                }
            }
            _ => ScriptStep::text(
                "Fixed: total_quantity's loop skipped the last item; the other hypothesis \
                 did not hold (its fix failed the tests).",
            ),
        };
    }
    let hypothesis = match req.messages.first() {
        Some(Message::User { text }) => text.clone(),
        _ => String::new(),
    };
    if hypothesis.contains("one item short") {
        match turn {
            1 => ScriptStep::tool_call("read_file", json!({ "path": "inventory.py" })),
            2 => ScriptStep::tool_call(
                "edit_file",
                json!({
                    "path": "inventory.py",
                    "old": "range(len(items) - 1)",
                    "new": "range(len(items))"
                }),
            ),
            3 => ScriptStep::tool_call(
                "run_command",
                json!({ "argv": ["python3", "-m", "unittest", "-q"] }),
            ),
            _ => ScriptStep::submit(json!({
                "cause": "total_quantity's loop, range(len(items) - 1), skips the last item.",
                "file": "inventory.py"
            })),
        }
    } else {
        match turn {
            1 => ScriptStep::tool_call(
                "edit_file",
                json!({
                    "path": "inventory.py",
                    "old": "items[i][\"qty\"]",
                    "new": "items[i].get(\"qty\", 0)"
                }),
            ),
            // It submits without running the tests, and again after being told they fail.
            _ => ScriptStep::submit(json!({
                "cause": "The quantity key was read without a default.",
                "file": "inventory.py"
            })),
        }
    }
}

fn last_results(req: &ModelRequest<'_>) -> Vec<(String, bool)> {
    match req.messages.last() {
        Some(Message::ToolResults { results, .. }) => results
            .iter()
            .map(|r| (r.content.clone(), r.is_error))
            .collect(),
        _ => Vec::new(),
    }
}

/// The bundled repository, copied and committed: a workspace of the user's own.
fn copy_repo(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name()))?;
        }
    }
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=demo",
            "-c",
            "user.email=demo@example.invalid",
            "commit",
            "-q",
            "-m",
            "inventory",
        ],
    ] {
        let ok = Command::new("git")
            .args(args)
            .current_dir(to)
            .status()?
            .success();
        if !ok {
            return Err(format!("git {} failed", args.join(" ")).into());
        }
    }
    Ok(())
}

/// Every file of the workspace but `.git`, with its bytes.
fn snapshot(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, Error> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name != ".git" && entry.file_type()?.is_file() {
            out.insert(name, std::fs::read(entry.path())?);
        }
    }
    Ok(out)
}

/// Runs the workspace's tests: whether they passed, and what they printed.
fn tests(dir: &Path) -> Result<(bool, String), Error> {
    let out = Command::new("python3")
        .args(["-m", "unittest", "-q"])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(dir)
        .output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}
