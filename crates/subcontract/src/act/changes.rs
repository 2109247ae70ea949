//! What a working copy changed: the files, and a patch the parent can apply.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::copy::WorkingCopy;
use super::error::ActError;
use super::git::{Config, Git};
use super::lease;
use super::policy::{is_plain_relative, WorkspacePolicy};

/// Most bytes of diff a [`Changes`] holds. A larger diff is cut there and marked
/// ([`Changes::diff_truncated`]): it is a violation, and can be neither applied nor saved.
pub const MAX_DIFF_BYTES: usize = 8 * 1024 * 1024;

/// Most files a [`Changes`] lists one by one; more are only counted.
const MAX_LISTED_FILES: usize = 10_000;

/// Most paths named one by one in violations of one kind.
const MAX_NAMED: usize = 20;

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileStatus {
    /// New in the copy.
    Added,
    /// Changed in content, mode or type.
    Modified,
    /// Removed from the copy.
    Deleted,
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedFile {
    /// Path relative to the workspace root, `/`-separated (a name that is not UTF-8 is shown
    /// with U+FFFD in its place, and is a violation).
    pub path: String,
    /// How it changed.
    pub status: FileStatus,
    /// Lines added (0 for a binary file).
    pub insertions: usize,
    /// Lines removed (0 for a binary file).
    pub deletions: usize,
    /// Whether git sees the file as binary.
    #[serde(default)]
    pub binary: bool,
    /// Where the file points, when it is (now) a symbolic link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_target: Option<String>,
}

/// The changes made in a working copy, as a patch against the files the copy was made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changes {
    /// Names the copy's state when captured (the git tree of its files): the same files give
    /// the same id.
    pub id: String,
    /// The baseline commit the patch is against (in the copy's private repository).
    pub base: String,
    /// The changed files, sorted by path (at most 10 000; see `unlisted_files`).
    pub files: Vec<ChangedFile>,
    /// Changed files beyond those listed in `files`.
    #[serde(default)]
    pub unlisted_files: usize,
    /// The patch: `git diff --binary` output, paths relative to the workspace root. At most
    /// [`MAX_DIFF_BYTES`]; see `diff_truncated`.
    pub diff: String,
    /// The diff was longer than [`MAX_DIFF_BYTES`] and `diff` holds only its start.
    #[serde(default)]
    pub diff_truncated: bool,
}

/// Why [`Changes::apply`] applied nothing.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The diff was cut at [`MAX_DIFF_BYTES`]: applying part of it would be wrong.
    #[error("the diff is larger than {max} bytes and was not kept whole; it cannot be applied")]
    Truncated {
        /// The limit.
        max: usize,
    },
    /// The workspace is not a directory.
    #[error("workspace {} is not a usable directory: {reason}", path.display())]
    InvalidWorkspace {
        /// The workspace as given.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The patch names a path that is absolute, holds `..`, or is under `.git`.
    #[error("the patch names an unsafe path `{path}`; nothing was applied")]
    UnsafePath {
        /// The path as the patch names it.
        path: String,
    },
    /// The patch makes a symbolic link that leads out of the workspace.
    #[error("the patch makes `{path}` a symbolic link to `{target}`, outside the workspace; nothing was applied")]
    UnsafeLink {
        /// The link's path.
        path: String,
        /// Where it points.
        target: String,
    },
    /// The patch does not apply to the workspace's files as they are now (they changed since
    /// the copy was made); nothing was applied.
    #[error("the changes conflict with the workspace in {}; nothing was applied ({detail})", files.join(", "))]
    Conflict {
        /// The files that do not apply (as git names them; may be empty if git named none).
        files: Vec<String>,
        /// The tail of what git said.
        detail: String,
    },
    /// Running git failed.
    #[error(transparent)]
    Act(#[from] ActError),
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.unlisted_files == 0 && !self.diff_truncated
    }

    /// How many files changed (listed or not).
    pub fn file_count(&self) -> usize {
        self.files.len() + self.unlisted_files
    }

    /// Lines changed: insertions plus deletions of the listed files.
    pub fn changed_lines(&self) -> usize {
        self.files
            .iter()
            .map(|f| f.insertions.saturating_add(f.deletions))
            .fold(0, usize::saturating_add)
    }

    /// What in these changes the policy does not allow, one sentence each, naming the path or
    /// limit: paths outside `writes`, paths under `.git`, more files than `max_changed_files`,
    /// more changed lines than `max_diff_lines`, a diff too large to keep. Empty when allowed.
    pub fn violations(&self, policy: &WorkspacePolicy) -> Vec<String> {
        let mut out = Vec::new();
        if self.diff_truncated {
            out.push(format!(
                "the diff is larger than {} MiB, too large to submit; change fewer or smaller files",
                MAX_DIFF_BYTES / (1024 * 1024)
            ));
        }
        let files = self.file_count();
        if files > policy.max_changed_files {
            out.push(format!(
                "{files} files changed, more than the limit of {} (max_changed_files)",
                policy.max_changed_files
            ));
        }
        let lines = self.changed_lines();
        if lines > policy.max_diff_lines {
            out.push(format!(
                "{lines} lines changed, more than the limit of {} (max_diff_lines)",
                policy.max_diff_lines
            ));
        }
        let mut git = Vec::new();
        let mut odd = Vec::new();
        let mut outside = Vec::new();
        for f in &self.files {
            let p = f.path.as_str();
            if p.split('/').any(|c| c.eq_ignore_ascii_case(".git")) {
                git.push(p);
            } else if !is_plain_relative(p) || p.contains('\u{fffd}') {
                odd.push(p);
            } else if !policy.allows_write(p) {
                outside.push(p);
            }
            if let Some(target) = f.link_target.as_deref().filter(|t| link_escapes(p, t)) {
                out.push(format!(
                    "`{p}` is a symbolic link to `{target}`, which is outside the workspace"
                ));
            }
        }
        let mut name = |paths: Vec<&str>, what: String| {
            if paths.is_empty() {
                return;
            }
            for p in paths.iter().take(MAX_NAMED) {
                out.push(format!("`{p}` {what}"));
            }
            if paths.len() > MAX_NAMED {
                out.push(format!(
                    "… and {} more paths that {what}",
                    paths.len() - MAX_NAMED
                ));
            }
        };
        name(git, "is under .git, which may never change".to_owned());
        name(
            odd,
            "is not a plain relative UTF-8 path, which may not change".to_owned(),
        );
        name(
            outside,
            format!(
                "is outside the paths this run may write (writes: {})",
                policy.writes.join(", ")
            ),
        );
        out
    }

    /// `{"id", "files": [{"path", "insertions", "deletions"}]}`: what a model is shown.
    pub fn summary_json(&self) -> serde_json::Value {
        let files = self
            .files
            .iter()
            .map(|f| {
                serde_json::json!({
                    "path": f.path,
                    "insertions": f.insertions,
                    "deletions": f.deletions,
                })
            })
            .collect::<Vec<_>>();
        serde_json::json!({ "id": self.id, "files": files })
    }

    /// Writes the patch to a new file at `path`; an existing file is never overwritten (that
    /// is an error), nor is an incomplete diff saved.
    pub fn save(&self, path: &Path) -> Result<(), ActError> {
        if self.diff_truncated {
            return Err(ActError::io(
                "saving patch to",
                path,
                io::Error::other("the diff is larger than the limit and was not kept whole"),
            ));
        }
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| ActError::io("saving patch to", path, e))?;
        file.write_all(self.diff.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| ActError::io("saving patch to", path, e))
    }

    /// Drops the changes without applying them: the parent's decision, said in the log. (A
    /// failed run's changes, and changes no one decided on, are kept as a patch file instead;
    /// these were handed back to be decided on.)
    pub fn discard(self) {
        tracing::debug!(id = %self.id, files = self.files.len(), "changes discarded");
    }

    /// Applies the patch to the files in `workspace` (the directory the copy was made from):
    /// all of it or, on any conflict, nothing, naming the files that conflict. Only the files
    /// change: git runs with a private, empty repository, so the index, HEAD and branch of a
    /// repository `workspace` is in are never touched, and paths are taken relative to
    /// `workspace` whether it is a repository's root, a subdirectory, or in none. The patch is
    /// hostile: one naming an absolute path, `..` or `.git` is refused before git applies it.
    pub fn apply(&self, workspace: &Path) -> Result<(), ApplyError> {
        if self.diff_truncated {
            return Err(ApplyError::Truncated {
                max: MAX_DIFF_BYTES,
            });
        }
        let invalid = |reason: String| ApplyError::InvalidWorkspace {
            path: workspace.to_path_buf(),
            reason,
        };
        let ws = workspace
            .canonicalize()
            .map_err(|e| invalid(e.to_string()))?;
        if !ws.is_dir() {
            return Err(invalid("not a directory".to_owned()));
        }
        if self.diff.trim().is_empty() {
            return Ok(());
        }
        let private = PrivateRepo::new(&ws)?;
        let git = || Git::new(&ws, Config::Private).repo(&private.git_dir, None);
        // git's own reading of the patch, so the paths checked are the paths it would write.
        let listed = git()
            .args(["apply", "--numstat", "-z", "-"])
            .stdin(self.diff.as_bytes())
            .output()?;
        if !listed.status.success() {
            return Err(ApplyError::Conflict {
                files: Vec::new(),
                detail: listed.stderr,
            });
        }
        for path in numstat_paths(&listed.stdout) {
            if !is_plain_relative(&path) {
                return Err(ApplyError::UnsafePath { path });
            }
        }
        if let Some((path, target)) = links_made(&self.diff)
            .into_iter()
            .find(|(path, target)| link_escapes(path, target))
        {
            return Err(ApplyError::UnsafeLink { path, target });
        }
        let out = git()
            .args(["apply", "--whitespace=nowarn", "-"])
            .stdin(self.diff.as_bytes())
            .output()?;
        if out.status.success() {
            return Ok(());
        }
        Err(ApplyError::Conflict {
            files: conflicting_files(&out.stderr),
            detail: out.stderr,
        })
    }
}

/// Whether a link at `path` (relative to the root) pointing at `target` leads outside the
/// root: an absolute target, or one whose `..` steps climb above it.
fn link_escapes(path: &str, target: &str) -> bool {
    if target.starts_with('/') || target.contains('\\') || target.contains('\0') {
        return true;
    }
    // The link's own directory, as a depth below the root.
    let mut depth = path.split('/').count().saturating_sub(1) as isize;
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => depth -= 1,
            _ => depth += 1,
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

/// The symbolic links a patch makes, as (path, target): a file section with mode 120000 whose
/// first added line is the target. Quoted paths are kept quoted (only their `/`s matter to
/// [`link_escapes`]).
fn links_made(diff: &str) -> Vec<(String, String)> {
    let mut links = Vec::new();
    let mut is_link = false;
    let mut path: Option<&str> = None;
    let mut in_hunk = false;
    for line in diff.lines() {
        if line.starts_with("diff --git ") {
            (is_link, path, in_hunk) = (false, None, false);
        } else if !in_hunk && (line == "new file mode 120000" || line == "new mode 120000") {
            is_link = true;
        } else if let Some(p) = line.strip_prefix("+++ ").filter(|_| !in_hunk) {
            let p = p.trim_matches('"');
            path = Some(p.strip_prefix("b/").unwrap_or(p));
        } else if line.starts_with("@@") {
            in_hunk = true;
        } else if let (true, true, Some(target)) = (is_link, in_hunk, line.strip_prefix('+')) {
            links.push((path.unwrap_or("").to_owned(), target.to_owned()));
            is_link = false;
        }
    }
    links
}

/// The paths in `git apply --numstat -z` output (both of a rename).
fn numstat_paths(out: &[u8]) -> Vec<String> {
    let mut paths = Vec::new();
    let mut tokens = out.split(|&b| b == 0);
    while let Some(token) = tokens.next() {
        if token.is_empty() {
            continue;
        }
        let text = String::from_utf8_lossy(token);
        let mut parts = text.splitn(3, '\t');
        let (_, _, path) = (parts.next(), parts.next(), parts.next());
        match path {
            Some("") => {
                // A rename or copy: the two paths follow as tokens of their own.
                for _ in 0..2 {
                    if let Some(p) = tokens.next() {
                        paths.push(String::from_utf8_lossy(p).into_owned());
                    }
                }
            }
            Some(p) => paths.push(p.to_owned()),
            // Not a numstat line: refuse it as a path, whatever it is.
            None => paths.push(text.into_owned()),
        }
    }
    paths
}

/// The files `git apply` names in its errors.
fn conflicting_files(stderr: &str) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for line in stderr.lines() {
        let Some(rest) = line.strip_prefix("error: ") else {
            continue;
        };
        let file = if let Some(p) = rest.strip_prefix("patch failed: ") {
            p.rsplit_once(':').map(|(f, _)| f)
        } else if let Some(p) = rest.strip_prefix("affected file '") {
            p.split_once('\'').map(|(f, _)| f)
        } else {
            rest.rsplit_once(": ").map(|(f, _)| f)
        };
        if let Some(f) = file.filter(|f| !f.is_empty()) {
            if !files.iter().any(|x| x == f) {
                files.push(f.to_owned());
            }
        }
    }
    files
}

/// An empty repository of its own for one `git apply`, so that git neither finds nor touches
/// the repository the workspace is in. It is a lease in the default copies directory, so a
/// process killed while applying leaves nothing [`cleanup_stale`](super::cleanup_stale) does
/// not remove. Removed on drop.
struct PrivateRepo {
    dir: PathBuf,
    git_dir: PathBuf,
}

impl PrivateRepo {
    fn new(workspace: &Path) -> Result<Self, ActError> {
        let copies = lease::ensure_copies_dir(&lease::default_copies_dir())?;
        let (pid, start_time) = lease::own_identity();
        let dir = lease::create_lease(
            &copies,
            &lease::Lease {
                pid,
                start_time,
                source: workspace.to_path_buf(),
                isolation: super::Isolation::None,
                repo: None,
                git_dir: None,
            },
        )?;
        let repo = PrivateRepo {
            git_dir: dir.join(lease::BASE_GIT),
            dir,
        };
        Git::new(&repo.dir, Config::Private)
            .args(["init", "-q", "--bare"])
            .arg(&repo.git_dir)
            .run()?;
        Ok(repo)
    }
}

impl Drop for PrivateRepo {
    fn drop(&mut self) {
        let _ = lease::remove_tree(&self.dir);
    }
}

/// The changes of `copy` (whose private index holds its files as they are, as the tree `id`)
/// against its baseline.
pub(crate) fn diff_against(copy: &WorkingCopy, id: &str) -> Result<Changes, ActError> {
    let base = copy.base();
    let raw = copy
        .git()
        .args([
            "diff",
            "--cached",
            "--raw",
            "-z",
            "--no-renames",
            "--relative",
        ])
        .arg(base)
        .run()?;
    let mut files = Vec::new();
    let mut unlisted = 0usize;
    let mut tokens = raw.stdout.split(|&b| b == 0);
    while let Some(meta) = tokens.next() {
        if meta.is_empty() {
            continue;
        }
        let Some(path) = tokens.next() else {
            break;
        };
        let status = match meta.last() {
            Some(b'A') => FileStatus::Added,
            Some(b'D') => FileStatus::Deleted,
            _ => FileStatus::Modified,
        };
        // `:<old mode> <new mode> <old> <new> <status>`: a new mode 120000 is a link.
        let is_link = meta.split(|&b| b == b' ').nth(1) == Some(b"120000".as_slice());
        if files.len() >= MAX_LISTED_FILES {
            unlisted += 1;
            continue;
        }
        let link_target = if is_link {
            let at = copy.root().join(super::copy::bytes_path(path));
            // Gone or replaced since the index was written: the link is what git recorded,
            // so an unreadable one is treated as leading out.
            Some(
                fs::read_link(&at)
                    .map_or_else(|_| "/".to_owned(), |t| t.to_string_lossy().into_owned()),
            )
        } else {
            None
        };
        files.push(ChangedFile {
            path: String::from_utf8_lossy(path).into_owned(),
            status,
            insertions: 0,
            deletions: 0,
            binary: false,
            link_target,
        });
    }
    let numstat = copy
        .git()
        .args([
            "diff",
            "--cached",
            "--numstat",
            "-z",
            "--no-renames",
            "--relative",
        ])
        .arg(base)
        .run()?;
    let index: HashMap<String, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.path.clone(), i))
        .collect();
    for token in numstat.stdout.split(|&b| b == 0) {
        let text = String::from_utf8_lossy(token);
        let mut parts = text.splitn(3, '\t');
        let (Some(ins), Some(del), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if let Some(&i) = index.get(path) {
            let f = &mut files[i];
            match (ins.parse(), del.parse()) {
                (Ok(ins), Ok(del)) => (f.insertions, f.deletions) = (ins, del),
                _ => f.binary = true,
            }
        }
    }
    let (diff, diff_truncated) = patch(copy, false)?;
    Ok(Changes {
        id: id.to_owned(),
        base: base.to_owned(),
        files,
        unlisted_files: unlisted,
        diff,
        diff_truncated,
    })
}

/// The patch text, bounded; a patch that is not UTF-8 (a text file in another encoding) is
/// made again with every file as a binary patch, which is ASCII and applies the same.
fn patch(copy: &WorkingCopy, all_binary: bool) -> Result<(String, bool), ActError> {
    let out = copy
        .git()
        .args([
            "diff",
            "--cached",
            "--binary",
            "--full-index",
            "--no-renames",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--relative",
            "--src-prefix=a/",
            "--dst-prefix=b/",
        ])
        .arg(copy.base())
        .max_stdout(MAX_DIFF_BYTES)
        .run()?;
    match String::from_utf8(out.stdout) {
        Ok(text) => Ok((text, out.truncated)),
        Err(e) if out.truncated => {
            // Cut inside a character, or not UTF-8 at all: keep the valid start only.
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            Ok((String::from_utf8(bytes).unwrap_or_default(), true))
        }
        Err(_) if !all_binary => {
            let attributes = copy.base_git().join("info").join("attributes");
            let before =
                fs::read(&attributes).map_err(|e| ActError::io("reading", &attributes, e))?;
            let mut binary = before.clone();
            binary.extend_from_slice(b"* -diff\n");
            fs::write(&attributes, binary).map_err(|e| ActError::io("writing", &attributes, e))?;
            let again = patch(copy, true);
            fs::write(&attributes, before).map_err(|e| ActError::io("writing", &attributes, e))?;
            again
        }
        Err(_) => Err(ActError::GitOutput {
            args: "diff --binary".to_owned(),
            detail: "the patch is not UTF-8 even with every file binary".to_owned(),
        }),
    }
}
