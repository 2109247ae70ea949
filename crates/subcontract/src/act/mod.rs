//! Sub-agents that act: a working copy per run, a sandbox around every command, and changes
//! that come back as a typed patch the parent accepts or discards.
//!
//! A spec that names an acting tool (`write_file`, `edit_file`, `run_command`) says how it is
//! isolated in its `[workspace]` table ([`WorkspacePolicy`]). Each of its runs then works in a
//! [`WorkingCopy`] of its own, outside the workspace, in a lease directory under a copies
//! directory ([`default_copies_dir`]): a git worktree at the parent's exact `HEAD` with the
//! parent's uncommitted and untracked files laid over it, or a plain copy. Every tool of that
//! run, the read tools too, sees the copy and never the parent's files; a sub-agent of an
//! acting run copies its parent's copy. Commands run in the OS sandbox ([`sandbox`]): they can
//! write only in the copy and a private temporary directory, reach no network unless the spec
//! allows it, and see none of the host's environment.
//!
//! When the run submits its output, its [`Changes`] against the files as it found them (kept
//! in a private git directory inside the lease, never in the parent's repository) are captured
//! and checked like the output: paths outside `writes`, too many files or lines, or a failing
//! `checks` command go back to the model to repair. A completed run's changes come back in
//! [`RunResult::changes`](crate::RunResult::changes); the parent decides:
//! [`Changes::apply`] (all or nothing), a parent model's `accept_changes` /
//! `discard_changes`, or `subcontract run --apply`. Changes no one applied are kept as patch
//! files, never lost; a copy whose process died is removed by the next host's first copy
//! ([`cleanup_stale`]).
//!
//! Every git command runs with an environment of its own (no `GIT_*` variable of the caller's
//! can redirect it, no system config, no hooks, a fixed identity). The guarantees, each held by
//! a test that tries to break it: the parent's files change only by an accepted change; a
//! command reaches nothing outside its copy; nothing is lost; capabilities only narrow (a
//! child's commands, network and limits are within its acting parent's).

mod changes;
mod copy;
mod error;
mod git;
mod host;
mod lease;
mod policy;
pub(crate) mod run;
mod run_copy;
pub mod sandbox;
mod tools;

pub use changes::{ApplyError, ChangedFile, Changes, FileStatus, MAX_DIFF_BYTES};
pub use copy::WorkingCopy;
pub use error::ActError;
pub use host::ActHost;
pub use lease::{cleanup_stale, default_copies_dir};
pub use policy::{Isolation, PolicyProblem, SandboxMode, WorkspacePolicy};
pub(crate) use run_copy::RunCopy;
pub use tools::{
    tools, AcceptChangesTool, ChangesIdArgs, DiscardChangesTool, EditFileTool, RunCommandArgs,
    RunCommandTool, WriteFileTool, ACCEPT_CHANGES, ACTING_TOOLS, ACT_TOOLS, DISCARD_CHANGES,
    EDIT_FILE, RUN_COMMAND, WRITE_FILE,
};

#[cfg(test)]
mod tests;
