//! Acting sub-agents: working copies, and the changes made in them.
//!
//! An acting run gets its own working copy of the parent's workspace ([`WorkingCopy`]), edits
//! files in it and runs commands in it, and hands back what it changed as a [`Changes`]: a
//! patch the parent accepts ([`Changes::apply`]) or rejects. The parent's files never change
//! unless it accepts. A copy lives outside the workspace, in a lease directory of its own
//! under a copies directory ([`default_copies_dir`]); a copy whose process died is removed by
//! the next [`cleanup_stale`].
//!
//! Every git command runs with an environment of its own (no `GIT_*` variable of the caller's
//! can redirect it, no system config, no hooks, a fixed identity), and the baseline a copy is
//! compared against is kept in a private git directory inside the lease, never in the parent's
//! repository. Everything here blocks; call it from a blocking thread.

mod changes;
mod copy;
mod error;
mod git;
mod lease;
mod policy;

pub use changes::{ApplyError, ChangedFile, Changes, FileStatus, MAX_DIFF_BYTES};
pub use copy::WorkingCopy;
pub use error::ActError;
pub use lease::{cleanup_stale, default_copies_dir};
pub use policy::{Isolation, SandboxMode, WorkspacePolicy};

#[cfg(test)]
mod tests;
