//! Why making, capturing or removing a working copy failed.

use std::io;
use std::path::PathBuf;

/// Most bytes of a git command's standard error kept in an error: its tail, where git says
/// what went wrong.
pub(crate) const STDERR_TAIL: usize = 2048;

/// Why a working-copy operation failed. Each names what failed; a failed git command carries
/// the tail of what it printed on standard error.
#[derive(Debug, thiserror::Error)]
pub enum ActError {
    /// `isolation = "none"` has no working copy to make.
    #[error("isolation \"none\" has no working copy; use \"worktree\" or \"copy\"")]
    NoIsolation,
    /// The source directory cannot be copied.
    #[error("source {} is not usable: {reason}", path.display())]
    InvalidSource {
        /// The source as given.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// `isolation = "worktree"` on a directory that is not inside a git repository (or one
    /// without a commit yet).
    #[error(
        "{} is not inside a git repository with a commit ({reason}); \
         use isolation = \"copy\" for a directory without one",
        path.display()
    )]
    NotARepository {
        /// The source as given.
        path: PathBuf,
        /// What git said.
        reason: String,
    },
    /// The copies directory is unusable or not safe to use (a link, or owned by another user).
    #[error("copies directory {} is not usable: {reason}", path.display())]
    CopiesDir {
        /// The copies directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A git command failed.
    #[error("git {args} failed ({status}): {stderr}")]
    Git {
        /// The command's arguments, as run.
        args: String,
        /// How it ended (exit code or signal).
        status: String,
        /// The tail of its standard error (at most 2 KiB).
        stderr: String,
    },
    /// A git command's output could not be understood.
    #[error("unexpected output from git {args}: {detail}")]
    GitOutput {
        /// The command's arguments.
        args: String,
        /// What was unexpected.
        detail: String,
    },
    /// A file operation failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. "copying".
        what: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl ActError {
    /// An I/O error while doing `what` to `path`.
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        ActError::Io {
            what,
            path: path.into(),
            source,
        }
    }
}
