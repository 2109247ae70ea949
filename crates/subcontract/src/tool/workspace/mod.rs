//! Built-in, read-only workspace tools for sub-agents: `read_file`, `list_dir`
//! and `grep`; and, for acting runs in a working copy of their own,
//! [`Workspace::write_file`] and [`Workspace::edit_file`], contained the same
//! way and stricter (they never follow a link; see `write.rs`).
//!
//! This is the synchronous, pure-Rust layer; the integrator wraps each method
//! as a tool. Every path a model supplies is relative to a canonical root and
//! is refused if it (or a symbolic link along it) leads outside that root.
//! Every output is bounded by [`WorkspaceLimits`], and every cut is announced
//! in the output itself so the model never mistakes a partial answer for a
//! complete one.
//!
//! # Containment
//!
//! The root is opened once as a directory handle ([`cap_std::fs::Dir`]) and
//! every later open, listing and `stat` is made relative to that handle, with
//! the path resolved beneath it at the moment of the open (by the kernel where
//! it can, `openat2(RESOLVE_BENEATH)` on Linux). Checking a path and then
//! opening it by name would leave a window in which a concurrent writer swaps
//! a checked file for a link pointing out; resolving beneath the handle has
//! no such window.
//!
//! Symbolic links: a link whose target is relative and, resolved step by
//! step from the link's own directory, stays inside the root is followed
//! (`alias.txt -> src/lib.rs`, `docs -> ../shared/docs` within the root). A
//! link that leads outside, and any link with an absolute target (even one
//! naming a path inside the root), is refused as outside the workspace.
//! `grep` searches linked files under the link's name but never enters linked
//! directories, so a link cycle cannot make it loop.
//!
//! # Names in output
//!
//! A file name is shown as it is unless it contains a control character
//! (such as a newline), a `"`, a `\`, or a Unicode line or paragraph
//! separator (for `grep`, also a `:`); then it is shown as a JSON string,
//! `"a\nb.txt"`, so a crafted name can never add a line to a listing or a
//! fake `path:line:` prefix to a search result.

use std::borrow::Cow;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use cap_std::fs::{Dir, File, OpenOptions};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use validator::Validate;

mod grep;
mod list;
mod read;
mod tools;
mod write;

pub use tools::{GrepTool, ListDirTool, ReadFileTool, BUILTIN_TOOLS, GREP, LIST_DIR, READ_FILE};
pub use write::{EditFileArgs, WriteFileArgs, MAX_EDIT_FILE_BYTES, MAX_WRITE_BYTES};
#[cfg(test)]
mod tests;

/// Directory names that are never listed nor searched: they are large,
/// machine-generated, and would drown out the sources a model is after.
const SKIPPED_DIRS: [&str; 2] = [".git", "target"];

/// A directory the tools may read, and nothing outside it.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    /// The root, opened once; every access goes through it (see the module docs).
    dir: Arc<Dir>,
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
    /// (default 1 MiB). `read_file` reads at most this much past the lines it
    /// returns to count the file's lines; a larger file's total is reported as
    /// unknown rather than scanned to the end.
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
    // Shown to the model, so that leaving it out is the obvious way to read from the top.
    #[schemars(extend("default" = 1))]
    pub start_line: Option<u32>,
    /// Last line to return, inclusive. Defaults to the end of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 1))]
    // Not shown to a model (accepted when sent): a small one sets it to 1 and reads one line.
    #[schemars(extend("x-subcontract-hidden" = true))]
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
    // Not shown to a model (accepted when sent): a small one sets it to 1 and sees one match.
    #[schemars(extend("default" = 50, "x-subcontract-hidden" = true))]
    pub max_matches: Option<u32>,
}

/// Why a workspace tool call failed. Messages are written for the model:
/// they say what to do next and name paths only as the caller gave them,
/// never as absolute paths.
#[derive(thiserror::Error)]
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
    /// The file is longer than a caller's limit ([`Workspace::read_to_string`]).
    #[error("`{path}` is longer than {max_bytes} bytes")]
    TooLarge {
        /// The path as given.
        path: String,
        /// The limit.
        max_bytes: u64,
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
    /// A write was aimed under `.git`, which no tool may change.
    #[error("`{path}` is under .git, which may not be written; write elsewhere in the workspace")]
    GitDir {
        /// The path as given.
        path: String,
    },
    /// A write would pass through or replace a symbolic link; writes never follow links.
    #[error(
        "`{path}` is or passes through a symbolic link, which writes never follow; \
         write to the path the link points to instead"
    )]
    Link {
        /// The path as given.
        path: String,
    },
    /// `edit_file`'s `old` does not occur exactly once in the file.
    #[error("{}", edit_mismatch(.path, *.count))]
    EditMismatch {
        /// The path as given.
        path: String,
        /// How many times `old` occurs.
        count: usize,
    },
    /// Writing failed for another reason (permissions, a full disk).
    #[error("could not write `{path}`: {source}")]
    Write {
        /// The path as given (relative).
        path: String,
        /// The underlying error.
        #[source]
        source: io::Error,
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

crate::debug_as_display!(WorkspaceError);

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

/// The message of [`WorkspaceError::EditMismatch`].
fn edit_mismatch(path: &str, count: usize) -> String {
    if count == 0 {
        format!(
            "`old` occurs 0 times in `{path}`; read the file and copy the exact text to replace, \
             whitespace included"
        )
    } else {
        format!(
            "`old` occurs {count} times in `{path}`; include more of the surrounding text so it \
             occurs exactly once"
        )
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
        // The one use of ambient authority: everything after goes through this handle.
        let dir = Dir::open_ambient_dir(&root, cap_std::ambient_authority()).map_err(|e| {
            WorkspaceError::InvalidRoot {
                root: given.to_path_buf(),
                reason: e.to_string(),
            }
        })?;
        Ok(Self {
            root,
            dir: Arc::new(dir),
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

    /// Checks a model-supplied path lexically and returns it as a path
    /// relative to the root handle.
    ///
    /// The lexical check refuses absolute paths and `..` escapes even when
    /// the target does not exist (so `../nope` is OutsideRoot, not NotFound).
    /// It is only for the message: what keeps links and races from leading
    /// out is that every open resolves the path beneath [`Self::dir`].
    fn resolve<'a>(&self, rel: &'a str) -> Result<&'a Path, WorkspaceError> {
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
        Ok(path)
    }

    /// Opens `rel` for reading beneath the root, following links only while
    /// they stay inside. Opens never block: a FIFO or device is opened
    /// non-blocking and then refused by the caller's type check.
    fn open_file(&self, rel: &str) -> Result<File, WorkspaceError> {
        let path = self.resolve(rel)?;
        self.dir
            .open_with(path, &read_options(false))
            .map_err(|e| open_error(rel, e))
    }

    /// Opens the regular file `rel` for reading, contained in the workspace as the built-in
    /// tools are: `rel` is relative to the root, and neither `..`, a symbolic link leading out,
    /// nor a concurrent rename can make it open anything outside (the path is resolved beneath
    /// the root's handle at the moment of the open). A directory, FIFO or device is refused
    /// without blocking. For a tool of your own that reads files a model names:
    ///
    /// ```
    /// use std::io::Read;
    /// use subcontract::tool::workspace::{Workspace, WorkspaceError};
    ///
    /// let dir = tempfile::tempdir()?;
    /// std::fs::write(dir.path().join("notes.md"), "hello")?;
    /// let ws = Workspace::new(dir.path())?;
    /// let mut text = String::new();
    /// ws.open("notes.md")?.read_to_string(&mut text)?;
    /// assert_eq!(text, "hello");
    /// assert!(matches!(ws.open("../etc/passwd"), Err(WorkspaceError::OutsideRoot { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(&self, rel: &str) -> Result<std::fs::File, WorkspaceError> {
        self.open_regular(rel).map(|(file, _)| file.into_std())
    }

    /// Opens the regular file `rel` beneath the root, and what it is. Opened first, then
    /// looked at: the type check and the read are about the same file, whatever happens to
    /// the name meanwhile; a FIFO or device is refused, as reading one could block forever.
    fn open_regular(&self, rel: &str) -> Result<(File, cap_std::fs::Metadata), WorkspaceError> {
        let file = self.open_file(rel)?;
        let meta = file
            .metadata()
            .map_err(|e| WorkspaceError::from_io(rel, e))?;
        let what = if meta.is_dir() {
            "a directory"
        } else if !meta.is_file() {
            "a special file"
        } else {
            return Ok((file, meta));
        };
        Err(WorkspaceError::NotAFile {
            path: rel.to_owned(),
            what,
        })
    }

    /// Reads the regular file `rel` as UTF-8 text, contained as [`open`](Self::open) is, and at
    /// most `max_bytes` of it: a longer file is [`WorkspaceError::TooLarge`], never cut short
    /// without a word.
    pub fn read_to_string(&self, rel: &str, max_bytes: u64) -> Result<String, WorkspaceError> {
        use std::io::Read;
        let mut bytes = Vec::new();
        self.open(rel)?
            .take(max_bytes.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| WorkspaceError::from_io(rel, e))?;
        if bytes.len() as u64 > max_bytes {
            return Err(WorkspaceError::TooLarge {
                path: rel.to_owned(),
                max_bytes,
            });
        }
        String::from_utf8(bytes).map_err(|_| WorkspaceError::NotUtf8 {
            path: rel.to_owned(),
        })
    }

    /// Opens the directory `rel` beneath the root. A path that exists but is
    /// not a directory is [`WorkspaceError::NotADirectory`].
    fn open_dir(&self, rel: &str) -> Result<Dir, WorkspaceError> {
        let path = self.resolve(rel)?;
        self.dir.open_dir(path).map_err(|e| {
            // Only to pick the message; `metadata` resolves beneath the root too.
            match self.dir.metadata(path) {
                Ok(meta) if !meta.is_dir() => WorkspaceError::NotADirectory {
                    path: rel.to_owned(),
                },
                _ => open_error(rel, e),
            }
        })
    }

    /// Returns a file's text, one `{line:>5}| {text}` line per file line
    /// (CR of CRLF removed), optionally only lines `start_line..=end_line`.
    ///
    /// Output is bounded by `max_file_bytes`. When cut, the last line is
    /// `… truncated: showing lines A-B of N; ask for start_line=B+1 to
    /// continue`. A partial range ends with `(lines A-B of N)`; an `end_line`
    /// past the end is clamped and said so. Reading stops `max_scan_bytes`
    /// after the answer is settled; a file longer than that is reported as
    /// `of at least N (not all counted: the file is S bytes)`. An empty file gives
    /// `(empty file)`. A `start_line` past the end is [`WorkspaceError::BadRange`],
    /// binary or non-UTF-8 content is [`WorkspaceError::NotUtf8`].
    pub fn read_file(&self, args: &ReadFileArgs) -> Result<String, WorkspaceError> {
        self.read_file_shown(args).map(|s| s.text)
    }

    /// [`read_file`](Self::read_file), with the file's own text kept apart for grounding.
    fn read_file_shown(&self, args: &ReadFileArgs) -> Result<read::Shown, WorkspaceError> {
        validate_args(args)?;
        read::read_file(self, args)
    }

    /// Lists a directory: one entry per line, sorted by name, directories
    /// with a trailing `/`, symbolic links as `name (symlink)`; names that
    /// could forge a line are quoted (see the module docs).
    ///
    /// Beyond `max_entries` a final `… N more entries not shown (limit M)`
    /// line follows; `.git` and `target` are left out and named in a closing
    /// `(not listed: …)` line. An empty directory gives `(empty directory)`.
    pub fn list_dir(&self, args: &ListDirArgs) -> Result<String, WorkspaceError> {
        self.list_dir_shown(args).map(|l| l.text)
    }

    /// [`list_dir`](Self::list_dir), with the entries' names kept apart for grounding.
    fn list_dir_shown(&self, args: &ListDirArgs) -> Result<list::Listed, WorkspaceError> {
        validate_args(args)?;
        list::list_dir(self, args)
    }

    /// Searches files for lines matching a regex, printing `path:line: text`
    /// per match (path relative, `/`-separated, quoted when it could forge
    /// a line or prefix (see the module docs); lines over `max_line_chars`
    /// shortened around the match with `[+N chars]…` / `…[+N chars]`).
    ///
    /// Files are visited depth-first in name order, skipping `.git`,
    /// `target` and linked directories. At the match cap a line
    /// `… stopped at N matches; narrow the pattern or glob` follows; the
    /// last line is always a summary in parentheses, e.g.
    /// `(3 matches in 2 files; searched 40 files; skipped 1 binary or
    /// non-UTF-8 file; skipped 2 files over 1048576 bytes)`.
    pub fn grep(&self, args: &GrepArgs) -> Result<String, WorkspaceError> {
        self.grep_found(args).map(|found| found.text)
    }

    fn grep_found(&self, args: &GrepArgs) -> Result<grep::Found, WorkspaceError> {
        validate_args(args)?;
        grep::grep(self, args)
    }
}

/// The file's own words in `kept`, a part of a line cut at its front and/or its back: the word
/// a cut went through is not the file's (`12` of `12345`), so it is left out.
fn whole_words(kept: &str, cut_front: bool, cut_back: bool) -> &str {
    let mut t = kept;
    if cut_back {
        t = t.rfind(char::is_whitespace).map_or("", |i| &t[..i]);
    }
    if cut_front {
        t = t.find(char::is_whitespace).map_or("", |i| &t[i..]);
    }
    t
}

/// Shortens `line` to at most `max_chars` characters, keeping the byte range
/// `focus` (a regex match) visible, and marks each cut with the number of
/// characters dropped: `[+N chars]…` at the front, `…[+N chars]` at the end.
///
/// Returned in parts: the front marker, the line's own text that is kept, and the end marker
/// (each marker empty when nothing was cut there).
fn shorten_line(
    line: &str,
    max_chars: usize,
    focus: Option<(usize, usize)>,
) -> (String, String, String) {
    // Redacted before it is cut: a key in a line (an `.env` file) cut in half would no longer
    // be recognised on its way to the provider. The match offsets are then moot.
    if let std::borrow::Cow::Owned(redacted) = crate::redact::redact(line) {
        return shorten_line(&redacted, max_chars, None);
    }
    let total = line.chars().count();
    if total <= max_chars {
        return (String::new(), line.to_owned(), String::new());
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
    let head = if start_char > 0 {
        format!("[+{start_char} chars]…")
    } else {
        String::new()
    };
    let tail = if end_char < total {
        format!("…[+{} chars]", total - end_char)
    } else {
        String::new()
    };
    (
        head,
        line[byte_at(start_char)..byte_at(end_char)].to_owned(),
        tail,
    )
}

/// Options for reading a file beneath the root. Non-blocking, so opening a
/// FIFO (perhaps swapped in after a listing) returns at once; `nofollow`
/// refuses a link in the last component (the `grep` walk, which has already
/// decided how to treat the entry).
fn read_options(nofollow: bool) -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use cap_std::fs::OpenOptionsExt;
        let mut flags = libc::O_NONBLOCK;
        if nofollow {
            flags |= libc::O_NOFOLLOW;
        }
        options.custom_flags(flags);
    }
    #[cfg(not(unix))]
    let _ = nofollow;
    options
}

/// Whether an open failed because the path would lead outside the root.
/// cap-std reports every escape (through `..` or a link, absolute links
/// included) as this one PermissionDenied error.
fn is_escape(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied
        && e.to_string() == "a path led outside of the filesystem"
}

/// Maps a failed open of `rel` (as the caller gave it) to an error for the model.
fn open_error(rel: &str, e: io::Error) -> WorkspaceError {
    if is_escape(&e) {
        WorkspaceError::OutsideRoot {
            path: rel.to_owned(),
        }
    } else {
        WorkspaceError::from_io(rel, e)
    }
}

/// A file name or path as shown in tool output: as it is, or as a JSON
/// string when it holds a character that could forge output structure
/// (see the module docs). `extra` lists characters that need quoting in one
/// tool's format only (`:` in `grep`'s `path:line:` prefix).
fn shown_name<'a>(name: &'a str, extra: &[char]) -> Cow<'a, str> {
    let needs = |c: char| {
        c.is_control() || matches!(c, '"' | '\\' | '\u{2028}' | '\u{2029}') || extra.contains(&c)
    };
    if !name.chars().any(needs) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    Cow::Owned(out)
}

/// Keeps the `cap` smallest items pushed and counts the rest, so a directory with millions of
/// entries costs memory for `cap` of them, not for all.
struct Smallest<T: Ord> {
    heap: std::collections::BinaryHeap<T>,
    cap: usize,
    dropped: usize,
}

impl<T: Ord> Smallest<T> {
    fn new(cap: usize) -> Self {
        Smallest {
            heap: std::collections::BinaryHeap::new(),
            cap,
            dropped: 0,
        }
    }

    fn push(&mut self, item: T) {
        self.heap.push(item);
        if self.heap.len() > self.cap {
            self.heap.pop();
            self.dropped += 1;
        }
    }

    /// The kept items in ascending order, and how many were dropped.
    fn into_sorted(self) -> (Vec<T>, usize) {
        (self.heap.into_sorted_vec(), self.dropped)
    }
}

/// Whether a directory entry name is one the walk and listings skip.
fn is_skipped_dir(name: &str) -> bool {
    SKIPPED_DIRS.contains(&name)
}
