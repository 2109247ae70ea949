//! The acting tools a model calls: `write_file`, `edit_file` and `run_command` in the run's
//! own working copy, and `accept_changes` / `discard_changes` for the changes its sub-agents
//! handed back. Each finds the run's copy in its context and refuses without one: a tool held
//! by a host acts only inside a copy, never on the host's files.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use validator::Validate;

use super::run::{command, report_changes};
use super::run_copy::RunCopy;
use crate::ctx::Ctx;
use crate::tool::workspace::{EditFileArgs, WriteFileArgs};
use crate::tool::{Tool, TypedTool};

/// The name of the built-in `write_file` tool.
pub const WRITE_FILE: &str = "write_file";
/// The name of the built-in `edit_file` tool.
pub const EDIT_FILE: &str = "edit_file";
/// The name of the built-in `run_command` tool.
pub const RUN_COMMAND: &str = "run_command";
/// The name of the built-in `accept_changes` tool.
pub const ACCEPT_CHANGES: &str = "accept_changes";
/// The name of the built-in `discard_changes` tool.
pub const DISCARD_CHANGES: &str = "discard_changes";

/// The tools that change files or run commands: a spec naming one needs a `[workspace]` with
/// `isolation = "worktree"` or `"copy"`.
pub const ACTING_TOOLS: [&str; 3] = [WRITE_FILE, EDIT_FILE, RUN_COMMAND];

/// Every built-in tool of acting runs, the parent's two included.
pub const ACT_TOOLS: [&str; 5] = [
    WRITE_FILE,
    EDIT_FILE,
    RUN_COMMAND,
    ACCEPT_CHANGES,
    DISCARD_CHANGES,
];

/// Arguments of the `run_command` tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct RunCommandArgs {
    /// The program and its arguments, e.g. ["python3", "-m", "unittest", "-q"]. No shell:
    /// pipes, redirections and `&&` are not interpreted.
    #[validate(length(min = 1, max = 64))]
    pub argv: Vec<String>,
    /// Seconds before the command is stopped (at most the spec's `max_command_secs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 1, max = 3600))]
    pub timeout_secs: Option<u64>,
}

/// Arguments of `accept_changes` and `discard_changes`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct ChangesIdArgs {
    /// The `id` of the changes, as a sub-agent's result gave it.
    #[validate(length(min = 1, max = 512))]
    pub id: String,
}

/// The run's own working copy, or the refusal a model reads.
fn own_copy<'c>(ctx: &'c Ctx, tool: &str) -> Result<&'c Arc<RunCopy>, String> {
    match super::run::own_copy(ctx) {
        Some(c) => Ok(c),
        None => Err(format!(
            "{tool} acts only in a run with a working copy of its own: its spec needs \
             [workspace] isolation = \"worktree\" or \"copy\""
        )),
    }
}

/// The `write_file` tool: writes a whole file in the run's copy.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFileTool;

#[async_trait]
impl TypedTool for WriteFileTool {
    type Args = WriteFileArgs;
    type Output = String;
    fn name(&self) -> &str {
        WRITE_FILE
    }
    fn description(&self) -> &str {
        "Write a whole text file of your working copy (path relative to its root), creating it and its directories if needed. To change part of a file, use edit_file."
    }
    async fn call(&self, args: WriteFileArgs, ctx: &Ctx) -> Result<String, String> {
        let copy = own_copy(ctx, WRITE_FILE)?.clone();
        allowed(&copy, &args.path)?;
        let ws = copy.workspace().clone();
        tokio::task::spawn_blocking(move || ws.write_file(&args))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    }
}

/// The `edit_file` tool: replaces one unique occurrence of a text in a file of the run's copy.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditFileTool;

#[async_trait]
impl TypedTool for EditFileTool {
    type Args = EditFileArgs;
    type Output = String;
    fn name(&self) -> &str {
        EDIT_FILE
    }
    fn description(&self) -> &str {
        "Replace text in a file of your working copy: `old` must occur exactly once in the file (include enough surrounding lines to make it unique); it becomes `new`."
    }
    async fn call(&self, args: EditFileArgs, ctx: &Ctx) -> Result<String, String> {
        let copy = own_copy(ctx, EDIT_FILE)?.clone();
        allowed(&copy, &args.path)?;
        let ws = copy.workspace().clone();
        tokio::task::spawn_blocking(move || ws.edit_file(&args))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    }
}

/// Refuses a write the run's `writes` globs do not allow, before it is made, so that a model
/// learns the rule at the write and not only at its submission.
fn allowed(copy: &RunCopy, path: &str) -> Result<(), String> {
    if copy.policy.allows_write(path) {
        Ok(())
    } else {
        Err(format!(
            "`{path}` is outside what this run may change ({}); change only files there",
            if copy.policy.writes.is_empty() {
                "everything but .git".to_owned()
            } else {
                copy.policy.writes.join(", ")
            }
        ))
    }
}

/// The `run_command` tool: runs a program in the run's copy, in the OS sandbox.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunCommandTool;

#[async_trait]
impl TypedTool for RunCommandTool {
    type Args = RunCommandArgs;
    type Output = String;
    fn name(&self) -> &str {
        RUN_COMMAND
    }
    fn description(&self) -> &str {
        "Run a program in your working copy (no shell): argv is the program and its arguments. Returns its exit code, duration, and the output it printed (cut when long, and said so)."
    }
    async fn call(&self, args: RunCommandArgs, ctx: &Ctx) -> Result<String, String> {
        let copy = own_copy(ctx, RUN_COMMAND)?;
        let timeout = args.timeout_secs.map(Duration::from_secs);
        let ran = command(ctx, copy, args.argv, timeout).await;
        match ran {
            Ok(o) => Ok(o.to_tool_text()),
            // Each error already says it was `run_command` that refused or failed.
            Err(e) => Err(e.to_string()),
        }
    }
}

/// The `accept_changes` tool: merges a sub-agent's changes into this run's copy (never
/// further up: this run's own parent decides on this run's changes).
#[derive(Debug, Clone, Copy, Default)]
pub struct AcceptChangesTool;

#[async_trait]
impl TypedTool for AcceptChangesTool {
    type Args = ChangesIdArgs;
    type Output = String;
    fn name(&self) -> &str {
        ACCEPT_CHANGES
    }
    fn description(&self) -> &str {
        "Apply the changes a sub-agent handed back (its result's changes.id) to your working copy, all or nothing. A conflict applies nothing and names the files."
    }
    async fn call(&self, args: ChangesIdArgs, ctx: &Ctx) -> Result<String, String> {
        let copy = own_copy(ctx, ACCEPT_CHANGES)?.clone();
        let changes = pending(&copy, &args.id)?;
        let root = copy.root().to_path_buf();
        let (changes, applied) = tokio::task::spawn_blocking(move || {
            let r = changes.apply(&root);
            (changes, r)
        })
        .await
        .map_err(|e| e.to_string())?;
        match applied {
            Ok(()) => {
                report_changes(ctx, &changes, "accepted", None);
                Ok(format!(
                    "applied the changes {} to your working copy: {}",
                    changes.id,
                    file_list(&changes)
                ))
            }
            Err(e) => {
                let text = format!(
                    "the changes {} were not applied (nothing was changed): {e}; \
                     discard them with discard_changes, or make the change yourself",
                    changes.id
                );
                copy.hold(changes);
                Err(text)
            }
        }
    }
}

/// The `discard_changes` tool: drops a sub-agent's changes.
#[derive(Debug, Clone, Copy, Default)]
pub struct DiscardChangesTool;

#[async_trait]
impl TypedTool for DiscardChangesTool {
    type Args = ChangesIdArgs;
    type Output = String;
    fn name(&self) -> &str {
        DISCARD_CHANGES
    }
    fn description(&self) -> &str {
        "Drop the changes a sub-agent handed back (its result's changes.id): they are not applied."
    }
    async fn call(&self, args: ChangesIdArgs, ctx: &Ctx) -> Result<String, String> {
        let copy = own_copy(ctx, DISCARD_CHANGES)?;
        let changes = pending(copy, &args.id)?;
        report_changes(ctx, &changes, "discarded", None);
        Ok(format!("discarded the changes {}", changes.id))
    }
}

fn pending(copy: &RunCopy, id: &str) -> Result<super::Changes, String> {
    copy.take_pending(id).ok_or_else(|| {
        let ids = copy.pending_ids();
        if ids.is_empty() {
            format!("no changes with id `{id}` are waiting: none are")
        } else {
            format!(
                "no changes with id `{id}` are waiting; these are: {}",
                ids.join(", ")
            )
        }
    })
}

fn file_list(changes: &super::Changes) -> String {
    let mut s = String::new();
    for (i, f) in changes.files.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&format!("{} (+{} -{})", f.path, f.insertions, f.deletions));
    }
    if s.is_empty() {
        s.push_str("no files");
    }
    s
}

/// The acting tools, for a host that lends its runs working copies: what its acting
/// sub-agents may be given.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        WriteFileTool.into_tool(),
        EditFileTool.into_tool(),
        RunCommandTool.into_tool(),
        AcceptChangesTool.into_tool(),
        DiscardChangesTool.into_tool(),
    ]
}
