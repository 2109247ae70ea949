//! Reading spec files as they were at a git revision, by running `git` (lean: no git library
//! in the build), with renames since then followed.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Largest spec file read from a revision: a spec is a few kilobytes; this only stops a
/// hostile or accidental huge blob from filling memory.
const MAX_BLOB: u64 = 16 * 1024 * 1024;

/// Why the old revision could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// `git` is not installed or not on `PATH`.
    #[error("`git` was not found on PATH (needed to read revision `{0}`); install git, or compare with a lock file")]
    Missing(String),
    /// The current directory is not inside a git work tree.
    #[error("not a git repository (or any parent): `--against {0}` needs one; compare with a lock file instead")]
    NotARepo(String),
    /// The revision does not name a commit.
    #[error(
        "unknown revision `{0}` (in CI, fetch it first: actions/checkout with `fetch-depth: 0`)"
    )]
    UnknownRevision(String),
    /// A spec file at the revision is larger than [`MAX_BLOB`].
    #[error("{path} at {rev} is {size} bytes, over the {MAX_BLOB}-byte limit for a spec")]
    TooLarge {
        /// The revision.
        rev: String,
        /// The file.
        path: String,
        /// Its size.
        size: u64,
    },
    /// Any other git failure, with git's own message.
    #[error("git {args}: {message}")]
    Failed {
        /// The arguments given.
        args: String,
        /// git's stderr.
        message: String,
    },
}

/// The spec files (path relative to the current directory, text) under `paths` at `rev`, and
/// the renames (old path, new path) between `rev` and the working tree.
pub struct OldTree {
    /// The `*.toml` files as they were.
    pub files: Vec<(PathBuf, String)>,
    /// Renamed files: (path at `rev`, path now).
    pub renames: Vec<(PathBuf, PathBuf)>,
}

fn git(rev: &str, args: &[&str]) -> Result<std::process::Output, GitError> {
    Command::new("git")
        .args(args)
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => GitError::Missing(rev.to_owned()),
            _ => GitError::Failed {
                args: args.join(" "),
                message: e.to_string(),
            },
        })
}

fn ok(rev: &str, args: &[&str]) -> Result<Vec<u8>, GitError> {
    let out = git(rev, args)?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(GitError::Failed {
            args: args.join(" "),
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// Reads every `*.toml` under `paths` at `rev`.
pub fn read_tree(rev: &str, paths: &[PathBuf]) -> Result<OldTree, GitError> {
    let inside = git(rev, &["rev-parse", "--is-inside-work-tree"])?;
    if !inside.status.success() || inside.stdout.trim_ascii() != b"true" {
        return Err(GitError::NotARepo(rev.to_owned()));
    }
    // Resolved once to a commit id, used from then on: a revision spelled like an option
    // (`--output=…`) must never reach a git command line as one.
    let commit = format!("{rev}^{{commit}}");
    let verify = git(
        rev,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &commit,
        ],
    )?;
    let id = String::from_utf8_lossy(&verify.stdout).trim().to_owned();
    if !verify.status.success() || id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(GitError::UnknownRevision(rev.to_owned()));
    }
    let mut files = Vec::new();
    let mut renames = Vec::new();
    for p in paths {
        let shown = p.display().to_string();
        // Paths relative to the current directory in and out, like the new side's.
        let listing = ok(
            rev,
            &[
                "ls-tree",
                "-r",
                "-l",
                "-z",
                "--end-of-options",
                rev,
                "--",
                &shown,
            ],
        )?;
        for entry in listing.split(|&b| b == 0).filter(|e| !e.is_empty()) {
            let entry = String::from_utf8_lossy(entry);
            let Some((meta, path)) = entry.split_once('\t') else {
                continue;
            };
            let mut meta = meta.split_whitespace();
            let (kind, size) = (meta.nth(1), meta.nth(1));
            if kind != Some("blob") || !path.ends_with(".toml") {
                continue;
            }
            let size: u64 = size.and_then(|s| s.parse().ok()).unwrap_or(0);
            if size > MAX_BLOB {
                return Err(GitError::TooLarge {
                    rev: rev.to_owned(),
                    path: path.to_owned(),
                    size,
                });
            }
            let blob = ok(rev, &["show", &format!("{id}:./{path}")])?;
            files.push((
                PathBuf::from(path),
                String::from_utf8_lossy(&blob).into_owned(),
            ));
        }
        let status = ok(
            rev,
            &[
                "diff",
                "--find-renames",
                "--name-status",
                "--relative",
                "-z",
                &id,
                "--",
                &shown,
            ],
        )?;
        let mut fields = status.split(|&b| b == 0).filter(|e| !e.is_empty());
        while let Some(st) = fields.next() {
            let copied_or_renamed = matches!(st.first(), Some(b'R' | b'C'));
            let Some(first) = fields.next() else { break };
            if copied_or_renamed {
                let Some(second) = fields.next() else { break };
                if st.first() == Some(&b'R') {
                    renames.push((path_of(first), path_of(second)));
                }
            }
        }
    }
    files.sort();
    files.dedup_by(|a, b| a.0 == b.0);
    Ok(OldTree { files, renames })
}

fn path_of(b: &[u8]) -> PathBuf {
    Path::new(&*String::from_utf8_lossy(b)).to_path_buf()
}
