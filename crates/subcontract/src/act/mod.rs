//! Sub-agents that act: a working copy per run, a sandbox around every command, and changes
//! that come back as a typed patch the parent accepts or discards.
//!
//! A spec that names an acting tool (`write_file`, `edit_file`, `run_command`) says how it is
//! isolated in its `[workspace]` table ([`WorkspacePolicy`]). Each of its runs then works in a
//! [`WorkingCopy`] of its own, outside the workspace: a git worktree at the parent's exact
//! HEAD with the parent's uncommitted and untracked files laid over it, or a plain copy. Every
//! tool of that run, the read tools too, sees the copy and never the parent's files; a
//! sub-agent of an acting run copies its parent's copy. Commands run in the OS sandbox
//! ([`sandbox`]): they can write only in the copy and a private temporary directory, reach no
//! network unless the spec allows it, and see none of the host's environment.
//!
//! When the run submits its output, its [`Changes`] against the files as it found them are
//! captured and checked like the output: paths outside `writes`, too many files or lines, or
//! a failing `checks` command go back to the model to repair. A completed run's changes come
//! back in [`RunResult::changes`](crate::RunResult::changes); the parent decides:
//! [`Changes::apply`] (all or nothing), a parent model's `accept_changes` / `discard_changes`,
//! or `subcontract run --apply`. Changes no one applied are kept as patch files, never lost.
//!
//! The guarantees, each held by a test that tries to break it: the parent's files change only
//! by an accepted change; a command reaches nothing outside its copy; nothing is lost;
//! capabilities only narrow (a child's commands, network and limits are within its acting
//! parent's).

pub mod changes;
pub mod copy;
mod host;
mod lease;
pub mod policy;
pub(crate) mod run;
mod run_copy;
pub mod sandbox;
mod tools;

pub use changes::{ApplyError, ChangedFile, Changes, FileStatus};
pub use copy::{cleanup_stale, default_copies_dir, WorkingCopy};
pub use host::ActHost;
pub use policy::{Isolation, SandboxMode, WorkspacePolicy};
pub(crate) use run_copy::RunCopy;
pub use tools::{
    tools, AcceptChangesTool, ChangesIdArgs, DiscardChangesTool, EditFileTool, RunCommandArgs,
    RunCommandTool, WriteFileTool, ACCEPT_CHANGES, ACTING_TOOLS, ACT_TOOLS, DISCARD_CHANGES,
    EDIT_FILE, RUN_COMMAND, WRITE_FILE,
};
