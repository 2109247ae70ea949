//! Built-in, read-only workspace tools for sub-agents: `read_file`, `list_dir`
//! and `grep`.
//!
//! This is the synchronous, pure-Rust layer; the integrator wraps each method
//! as a tool. Every path a model supplies is relative to a canonical root and
//! is refused if it (or a symbolic link along it) leads outside that root.
//! Every output is bounded by [`WorkspaceLimits`], and every cut is announced
//! in the output itself so the model never mistakes a partial answer for a
//! complete one.

use std::io;
use std::path::{Component, Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use validator::Validate;

mod grep;
mod list;
mod read;
mod tools;

pub use tools::{GrepTool, ListDirTool, ReadFileTool, BUILTIN_TOOLS};
#[cfg(test)]
mod tests;

/// Directory names that are never listed nor searched: they are large,
/// machine-generated, and would drown out the sources a model is after.
const SKIPPED_DIRS: [&str; 2] = [".git", "target"];

/// A directory the tools may read, and nothing outside it.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    limits: WorkspaceLimits,
}

/// Bounds on what one tool call may read and return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkspaceLimits {
    /// Most bytes of text `read_file` returns in one call (default 64 KiB).
    pub max_file_bytes: usize,
    /// Most entries `list_dir` shows (default 500).
    pub max_entries: usize,
    /// Hard cap on the matches `grep` reports, whatever the caller asks
    /// (default 200).
    pub max_matches: usize,
    /// Matched lines longer than this many characters are shortened with an
    /// explicit `…[+N chars]` marker (default 400).
    pub max_line_chars: usize,
    /// Files larger than this are skipped by `grep`, and the summary says so
    /// (default 1 MiB).
    pub max_scan_bytes: u64,
    /// Most files `grep` visits while walking the tree (default 20 000).
    pub max_files_scanned: usize,
}

impl Default for WorkspaceLimits {
    fn default() -> Self {
        Self {
            max_file_bytes: 64 * 1024,
            max_entries: 500,
            max_matches: 200,
            max_line_chars: 400,
            max_scan_bytes: 1024 * 1024,
            max_files_scanned: 20_000,
        }
    }
}

/// Arguments of the `read_file` tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// Path of the file, relative to the workspace root (for example `src/lib.rs`).
    #[validate(length(min = 1, max = 1024))]
    pub path: String,
    /// First line to return, 1-based and inclusive. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 1))]
    pub start_line: Option<u32>,
    /// Last line to return, inclusive. Defaults to the end of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 1))]
    pub end_line: Option<u32>,
}

/// Arguments of the `list_dir` tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct ListDirArgs {
    /// Directory to list, relative to the workspace root. Defaults to `.`, the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(length(max = 1024))]
    pub path: Option<String>,
}

/// Arguments of the `grep` tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Rust regex syntax, matched against each line separately
    /// (for example `fn\s+main` or `(?i)todo`).
    #[validate(length(max = 500))]
    pub pattern: String,
    /// Only search files whose path relative to the root matches this glob
    /// (for example `src/**/*.rs`). `*` stays within one directory, `**`
    /// crosses directories; a glob without `/` (such as `*.toml`) matches the
    /// file name at any depth. Defaults to all files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(length(max = 200))]
    pub path_glob: Option<String>,
    /// Stop after this many matching lines. Defaults to 50; capped by the workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 1))]
    pub max_matches: Option<u32>,
}

/// Why a workspace tool call failed. Messages are written for the model:
/// they say what to do next and name paths only as the caller gave them,
/// never as absolute paths.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The workspace root itself is unusable (an operator error, not a model one).
    #[error("workspace root {} is not a usable directory: {reason}", root.display())]
    InvalidRoot {
        /// The root as configured.
        root: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The arguments break their declared bounds.
    #[error("invalid arguments: {message}")]
    InvalidArgs {
        /// The validation failure.
        message: String,
    },
    /// The path is absolute, escapes with `..`, or resolves (through a
    /// symbolic link) outside the workspace.
    #[error(
        "path `{path}` is outside the workspace; use a path relative to the workspace root, \
         without `..` escapes or links leading out of it"
    )]
    OutsideRoot {
        /// The path as given.
        path: String,
    },
    /// Nothing exists at the path.
    #[error("`{path}` does not exist in the workspace; use list_dir to see what is there")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// `read_file` was pointed at something that is not a regular file.
    #[error("`{path}` is {what}, not a regular file; use list_dir to see what it contains")]
    NotAFile {
        /// The path as given.
        path: String,
        /// What it is instead, e.g. "a directory".
        what: &'static str,
    },
    /// `list_dir` was pointed at something that is not a directory.
    #[error("`{path}` is not a directory; use read_file to read a file")]
    NotADirectory {
        /// The path as given.
        path: String,
    },
    /// The file is binary or not valid UTF-8, so it cannot be shown as text.
    #[error("`{path}` is binary or not valid UTF-8 text, so it cannot be shown")]
    NotUtf8 {
        /// The path as given.
        path: String,
    },
    /// The requested line range does not fit the file.
    #[error("bad line range for `{path}`: {detail}")]
    BadRange {
        /// The path as given.
        path: String,
        /// What is wrong, including how many lines the file has when known.
        detail: String,
    },
    /// The grep pattern is not a valid (or is too large a) Rust regex.
    #[error("invalid regex pattern: {message}")]
    BadPattern {
        /// The pattern as given.
        pattern: String,
        /// The regex compiler's explanation.
        message: String,
    },
    /// The grep path glob is not valid.
    #[error("invalid path_glob `{glob}`: {message}")]
    BadGlob {
        /// The glob as given.
        glob: String,
        /// The glob compiler's explanation.
        message: String,
    },
    /// Reading failed for another reason (permissions, I/O).
    #[error("could not read `{path}`: {source}")]
    Io {
        /// The path as given (relative), never the absolute one.
        path: String,
        /// The underlying error; std's messages do not include paths.
        #[source]
        source: io::Error,
    },
}

impl WorkspaceError {
    /// Maps an I/O error on `path` (as the caller gave it) to the variant a
    /// model can act on.
    fn from_io(path: &str, source: io::Error) -> Self {
        match source.kind() {
            // A path through a regular file (`file.txt/x`) is, to the model,
            // simply a path that does not exist.
            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => Self::NotFound {
                path: path.to_owned(),
            },
            _ => Self::Io {
                path: path.to_owned(),
                source,
            },
        }
    }
}

fn validate_args(args: &impl Validate) -> Result<(), WorkspaceError> {
    args.validate().map_err(|e| WorkspaceError::InvalidArgs {
        message: e.to_string(),
    })
}

impl Workspace {
    /// Opens `root` as a workspace. The root is canonicalised once, so later
    /// containment checks compare canonical paths.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, WorkspaceError> {
        let given = root.as_ref();
        let root = given
            .canonicalize()
            .map_err(|e| WorkspaceError::InvalidRoot {
                root: given.to_path_buf(),
                reason: e.to_string(),
            })?;
        if !root.is_dir() {
            return Err(WorkspaceError::InvalidRoot {
                root: given.to_path_buf(),
                reason: "not a directory".to_owned(),
            });
        }
        Ok(Self {
            root,
            limits: WorkspaceLimits::default(),
        })
    }

    /// Replaces the default limits.
    #[must_use]
    pub fn with_limits(mut self, limits: WorkspaceLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The limits in force.
    pub fn limits(&self) -> &WorkspaceLimits {
        &self.limits
    }

    /// Resolves a model-supplied relative path to a canonical path inside the
    /// root, or refuses it.
    ///
    /// The lexical check refuses absolute paths and `..` escapes even when
    /// the target does not exist (so `../nope` is OutsideRoot, not NotFound);
    /// canonicalising then resolves every symbolic link, and the containment
    /// check on the result is what actually keeps links from leading out.
    fn resolve(&self, rel: &str) -> Result<PathBuf, WorkspaceError> {
        let outside = || WorkspaceError::OutsideRoot {
            path: rel.to_owned(),
        };
        if rel.contains('\0') {
            return Err(WorkspaceError::NotFound {
                path: rel.to_owned(),
            });
        }
        let path = Path::new(rel);
        let mut depth: usize = 0;
        for component in path.components() {
            match component {
                Component::Prefix(_) | Component::RootDir => return Err(outside()),
                Component::CurDir => {}
                Component::ParentDir => depth = depth.checked_sub(1).ok_or_else(outside)?,
                Component::Normal(_) => depth += 1,
            }
        }
        let canonical = self
            .root
            .join(path)
            .canonicalize()
            .map_err(|e| WorkspaceError::from_io(rel, e))?;
        if !canonical.starts_with(&self.root) {
            return Err(outside());
        }
        Ok(canonical)
    }

    /// Returns a file's text, one `{line:>5}| {text}` line per file line
    /// (CR of CRLF removed), optionally only lines `start_line..=end_line`.
    ///
    /// Output is bounded by `max_file_bytes`. When cut, the last line is
    /// `… truncated: showing lines A-B of N; ask for start_line=B+1 to
    /// continue`. A partial range ends with `(lines A-B of N)`; an `end_line`
    /// past the end is clamped and said so. An empty file gives
    /// `(empty file)`. A `start_line` past the end is [`WorkspaceError::BadRange`],
    /// binary or non-UTF-8 content is [`WorkspaceError::NotUtf8`].
    pub fn read_file(&self, args: &ReadFileArgs) -> Result<String, WorkspaceError> {
        validate_args(args)?;
        read::read_file(self, args)
    }

    /// Lists a directory: one entry per line, sorted by name, directories
    /// with a trailing `/`, symbolic links as `name (symlink)`.
    ///
    /// Beyond `max_entries` a final `… N more entries not shown (limit M)`
    /// line follows; `.git` and `target` are left out and named in a closing
    /// `(not listed: …)` line. An empty directory gives `(empty directory)`.
    pub fn list_dir(&self, args: &ListDirArgs) -> Result<String, WorkspaceError> {
        validate_args(args)?;
        list::list_dir(self, args)
    }

    /// Searches files for lines matching a regex, printing `path:line: text`
    /// per match (path relative, `/`-separated; lines over `max_line_chars`
    /// shortened around the match with `[+N chars]…` / `…[+N chars]`).
    ///
    /// Files are visited depth-first in name order, skipping `.git`,
    /// `target` and linked directories. At the match cap a line
    /// `… stopped at N matches; narrow the pattern or glob` follows; the
    /// last line is always a summary in parentheses, e.g.
    /// `(3 matches in 2 files; searched 40 files; skipped 1 binary or
    /// non-UTF-8 file; skipped 2 files over 1048576 bytes)`.
    pub fn grep(&self, args: &GrepArgs) -> Result<String, WorkspaceError> {
        validate_args(args)?;
        grep::grep(self, args)
    }
}

/// Shortens `line` to at most `max_chars` characters, keeping the byte range
/// `focus` (a regex match) visible, and marks each cut with the number of
/// characters dropped: `[+N chars]…` at the front, `…[+N chars]` at the end.
fn shorten_line(line: &str, max_chars: usize, focus: Option<(usize, usize)>) -> String {
    let total = line.chars().count();
    if total <= max_chars {
        return line.to_owned();
    }
    // Chars of leading context kept before a match that would otherwise be cut off.
    const CONTEXT: usize = 40;
    let focus_start_char = focus.map_or(0, |(start, _)| line[..start].chars().count());
    let start_char = if focus_start_char < max_chars {
        0
    } else {
        focus_start_char.saturating_sub(CONTEXT.min(max_chars / 2))
    };
    let end_char = (start_char + max_chars).min(total);
    let start_char = end_char.saturating_sub(max_chars);
    let byte_at = |c: usize| line.char_indices().nth(c).map_or(line.len(), |(i, _)| i);
    let mut out = String::new();
    if start_char > 0 {
        out.push_str(&format!("[+{start_char} chars]…"));
    }
    out.push_str(&line[byte_at(start_char)..byte_at(end_char)]);
    if end_char < total {
        out.push_str(&format!("…[+{} chars]", total - end_char));
    }
    out
}

/// Whether a directory entry name is one the walk and listings skip.
fn is_skipped_dir(name: &str) -> bool {
    SKIPPED_DIRS.contains(&name)
}
