//! Lease directories: one per working copy, under a copies directory, named after the process
//! that owns it, so that a copy whose owner died can be told apart from one in use and removed.
//!
//! A lease directory is named `lease-<pid>-<start>-<random>`, where `<start>` is the owner's
//! start time (field 22 of `/proc/<pid>/stat`): a pid reused by another process after the
//! owner died does not keep the lease alive. The name is made with the directory itself, in one
//! step, so there is no moment at which a lease exists without an owner. Inside it:
//! `lease.json` (owner, source, repository), `tree/` (the copy) and `base.git/` (the private
//! repository holding the baseline). A worktree's `base.git` may name the source repository's
//! object directory as an alternate, to read the blobs of HEAD from there; nothing here ever
//! writes or removes anything through it, and removing a lease removes the file that names
//! it, never what it names.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::error::ActError;
use super::git::{Config, Git};
use super::policy::Isolation;

/// The lease file's name inside a lease directory.
pub(crate) const LEASE_FILE: &str = "lease.json";
/// The copy's directory inside a lease directory.
pub(crate) const TREE_DIR: &str = "tree";
/// The private repository inside a lease directory.
pub(crate) const BASE_GIT: &str = "base.git";
/// Lease directory names start with this.
const PREFIX: &str = "lease-";
/// Most bytes of a lease file read: it is a few lines.
const MAX_LEASE_BYTES: u64 = 64 * 1024;
/// Deepest a tree is walked to make it removable.
const MAX_FIX_DEPTH: usize = 256;

/// The default copies directory: `SUBCONTRACT_COPIES_DIR` when it is set, else
/// `subcontract-copies` in the system's temporary directory.
pub fn default_copies_dir() -> PathBuf {
    copies_dir_for(std::env::var_os("SUBCONTRACT_COPIES_DIR"))
}

/// The copies directory `SUBCONTRACT_COPIES_DIR` set to `set` names (unset or empty: the
/// default).
fn copies_dir_for(set: Option<std::ffi::OsString>) -> PathBuf {
    set.filter(|d| !d.is_empty()).map_or_else(
        || std::env::temp_dir().join("subcontract-copies"),
        PathBuf::from,
    )
}

/// What a lease file records.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Lease {
    /// The owner's process id.
    pub(crate) pid: u32,
    /// The owner's start time (clock ticks since boot), 0 where unknown.
    pub(crate) start_time: u64,
    /// The directory the copy was made from.
    pub(crate) source: PathBuf,
    /// How the copy was made.
    pub(crate) isolation: Isolation,
    /// For a worktree, the repository's common git directory, where it is registered.
    pub(crate) repo: Option<PathBuf>,
    /// For a worktree, its own git directory (inside `repo`), once it is made.
    #[serde(default)]
    pub(crate) git_dir: Option<PathBuf>,
}

/// The start time of process `pid`, from `/proc/<pid>/stat`; `None` when there is no such
/// process (or no `/proc`).
pub(crate) fn process_start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may itself hold spaces and `)`.
    let after = &stat[stat.rfind(')')? + 1..];
    // Fields from 3 on; the start time is field 22.
    after.split_whitespace().nth(19)?.parse().ok()
}

/// This process's id and start time (0 when unknown).
pub(crate) fn own_identity() -> (u32, u64) {
    static START: OnceLock<u64> = OnceLock::new();
    let pid = std::process::id();
    (
        pid,
        *START.get_or_init(|| process_start_time(pid).unwrap_or(0)),
    )
}

/// Whether start times can be read here: without them no lease can be judged dead.
fn can_judge() -> bool {
    own_identity().1 != 0
}

/// Makes (if needed) and checks the copies directory: a real directory, not a link, and on
/// Unix owned by this user and closed to others (a shared temporary directory must not let
/// another user plant or read copies). Returns its canonical path.
pub(crate) fn ensure_copies_dir(dir: &Path) -> Result<PathBuf, ActError> {
    let bad = |reason: String| ActError::CopiesDir {
        path: dir.to_path_buf(),
        reason,
    };
    match fs::symlink_metadata(dir) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs::create_dir_all(parent).map_err(|e| bad(e.to_string()))?;
            }
            let mut builder = fs::DirBuilder::new();
            #[cfg(unix)]
            {
                use std::os::unix::fs::DirBuilderExt;
                builder.mode(0o700);
            }
            match builder.create(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(bad(e.to_string())),
            }
        }
        Err(e) => return Err(bad(e.to_string())),
    }
    let meta = fs::symlink_metadata(dir).map_err(|e| bad(e.to_string()))?;
    if meta.file_type().is_symlink() {
        return Err(bad("it is a symbolic link".to_owned()));
    }
    if !meta.is_dir() {
        return Err(bad("it is not a directory".to_owned()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        if let Ok(me) = fs::metadata("/proc/self") {
            if me.uid() != meta.uid() {
                return Err(bad(format!(
                    "it is owned by user {}, not by this process's user {}",
                    meta.uid(),
                    me.uid()
                )));
            }
        }
        if meta.mode() & 0o077 != 0 {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
                .map_err(|e| bad(e.to_string()))?;
        }
    }
    dir.canonicalize().map_err(|e| bad(e.to_string()))
}

/// Makes a new lease directory owned by this process, and its lease file.
pub(crate) fn create_lease(copies_dir: &Path, lease: &Lease) -> Result<PathBuf, ActError> {
    let dir = loop {
        let dir = copies_dir.join(owned_name(PREFIX));
        match fs::create_dir(&dir) {
            Ok(()) => break dir,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(ActError::io("creating lease directory", dir, e)),
        }
    };
    write_lease(&dir, lease)?;
    Ok(dir)
}

/// Writes (or rewrites) the lease file of the lease directory `dir`, whole or not at all.
pub(crate) fn write_lease(dir: &Path, lease: &Lease) -> Result<(), ActError> {
    let text = serde_json::to_vec_pretty(lease).map_err(|e| {
        ActError::io(
            "writing lease file in",
            dir,
            io::Error::other(e.to_string()),
        )
    })?;
    let tmp = dir.join("lease.json.tmp");
    fs::write(&tmp, text).map_err(|e| ActError::io("writing", &tmp, e))?;
    fs::rename(&tmp, dir.join(LEASE_FILE))
        .map_err(|e| ActError::io("writing lease file in", dir, e))
}

/// If `path` lies in the tree of a worktree copy, that tree and the copy's lease.
pub(crate) fn enclosing_worktree_copy(path: &Path) -> Option<(PathBuf, Lease)> {
    path.ancestors().find_map(|tree| {
        let lease_dir = tree.parent()?;
        if tree.file_name()? != TREE_DIR || owner_of(lease_dir.file_name()?.to_str()?).is_none() {
            return None;
        }
        let lease = read_lease(lease_dir)?;
        (lease.isolation == Isolation::Worktree).then(|| (tree.to_path_buf(), lease))
    })
}

/// The owner named by a lease directory's name, if it is one.
fn owner_of(name: &str) -> Option<(u32, u64)> {
    owner_named(name, PREFIX)
}

/// A new name after `prefix` that records this process as its owner:
/// `<prefix><pid>-<start time>-<16 random hex digits>`. Lease directories, a command's
/// temporary directory and its cgroup are named so, and [`owner_named`] reads it back, so
/// that what a dead process left can be told from what a live one holds.
pub(crate) fn owned_name(prefix: &str) -> String {
    let (pid, start) = own_identity();
    format!("{prefix}{pid}-{start}-{:016x}", fastrand::u64(..))
}

/// The owner `(pid, start time)` an [`owned_name`] with `prefix` records; `None` for any other
/// name (another program's, or an older layout), which is never judged.
pub(crate) fn owner_named(name: &str, prefix: &str) -> Option<(u32, u64)> {
    let rest = name.strip_prefix(prefix)?;
    let mut parts = rest.splitn(3, '-');
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    let random = parts.next()?;
    (random.len() == 16 && random.bytes().all(|b| b.is_ascii_hexdigit())).then_some((pid, start))
}

/// Whether the owner `(pid, start)` is known to have ended: start times can be read here and
/// no process with that id and start time runs. Used for what commands leave too.
pub(crate) fn owner_ended(pid: u32, start: u64) -> bool {
    can_judge() && !alive(pid, start)
}

/// Whether the owner `(pid, start)` is still running.
fn alive(pid: u32, start: u64) -> bool {
    process_start_time(pid) == Some(start)
}

/// Reads a lease file without following a link and without reading more than a few KiB.
fn read_lease(dir: &Path) -> Option<Lease> {
    let path = dir.join(LEASE_FILE);
    let meta = fs::symlink_metadata(&path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut text = Vec::new();
    fs::File::open(&path)
        .ok()?
        .take(MAX_LEASE_BYTES)
        .read_to_end(&mut text)
        .ok()?;
    serde_json::from_slice(&text).ok()
}

/// Removes every lease in `copies_dir` whose owner is no longer running (its pid gone, or
/// reused by a process started at another time), and unregisters its worktree from its
/// repository. Returns how many were removed. Entries that are not lease directories are left
/// alone; links are removed as links, never followed. A missing `copies_dir` has nothing to
/// clean. Where process start times cannot be read (no `/proc`), nothing is removed.
pub fn cleanup_stale(copies_dir: &Path) -> Result<usize, ActError> {
    let entries = match fs::read_dir(copies_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(ActError::io("listing", copies_dir, e)),
    };
    if !can_judge() {
        return Ok(0);
    }
    let mut removed = 0;
    for entry in entries {
        let entry = entry.map_err(|e| ActError::io("listing", copies_dir, e))?;
        let name = entry.file_name();
        let Some((pid, start)) = name.to_str().and_then(owner_of) else {
            continue;
        };
        if alive(pid, start) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() {
            // A link (or file) under a lease's name: remove it, never what it points at.
            if fs::remove_file(&path).is_ok() {
                removed += 1;
            }
            continue;
        }
        let repo = read_lease(&path).and_then(|l| l.repo);
        tracing::debug!(lease = %path.display(), "removing a stale working copy");
        remove_lease(&path, repo.as_deref())?;
        removed += 1;
    }
    Ok(removed)
}

/// Removes a lease directory and, for a worktree, its registration in `repo` (the common git
/// directory). The directory's contents are hostile: nothing in it is followed.
pub(crate) fn remove_lease(dir: &Path, repo: Option<&Path>) -> Result<(), ActError> {
    let tree = dir.join(TREE_DIR);
    let repo = repo.filter(|r| r.is_absolute() && r.is_dir());
    let mut registered = false;
    if let Some(repo) = repo {
        if fs::symlink_metadata(&tree).is_ok_and(|m| m.is_dir()) {
            // Removes the checkout and its registration together. It refuses when the tree's
            // `.git` no longer points back (a command may have rewritten it): then the
            // directory goes below and the registration is pruned.
            let out = Git::new(dir, Config::User)
                .repo(repo, None)
                .args(["worktree", "remove", "--force", "--force"])
                .arg(&tree)
                .output()?;
            registered = !out.status.success();
            if registered {
                tracing::debug!(stderr = %out.stderr, "git worktree remove refused; pruning");
            }
        } else {
            registered = true;
        }
    }
    remove_tree(dir)?;
    if let (Some(repo), true) = (repo, registered) {
        Git::new(Path::new("/"), Config::User)
            .repo(repo, None)
            .args(["worktree", "prune"])
            .run()?;
    }
    Ok(())
}

/// Removes `path` and everything beneath it without following links (std's `remove_dir_all`
/// removes a link as a link, and resolves each step beneath the directory it opened). A
/// directory a command made unreadable or unwritable is opened up first.
pub(crate) fn remove_tree(path: &Path) -> Result<(), ActError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(ActError::io("removing", path, e)),
    };
    if !meta.is_dir() {
        return fs::remove_file(path).map_err(|e| ActError::io("removing", path, e));
    }
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(_) => {
            make_removable(path, 0);
            match fs::remove_dir_all(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    Err(ActError::io("removing", path, e))
                }
                _ => Ok(()),
            }
        }
    }
}

/// Gives the owner full access to every directory beneath `path` (links not followed).
fn make_removable(path: &Path, depth: usize) {
    if depth > MAX_FIX_DEPTH {
        return;
    }
    let Ok(meta) = fs::symlink_metadata(path) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = fs::set_permissions(path, fs::Permissions::from_mode(0o700));
    }
    if let Ok(entries) = fs::read_dir(path) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                make_removable(&entry.path(), depth + 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copies_directory_is_the_variables_when_it_is_set() {
        let default = std::env::temp_dir().join("subcontract-copies");
        assert_eq!(copies_dir_for(None), default);
        assert_eq!(copies_dir_for(Some("".into())), default);
        assert_eq!(
            copies_dir_for(Some("/srv/copies".into())),
            PathBuf::from("/srv/copies")
        );
    }

    /// An owned name reads back as this process; only names in that layout are judged:
    /// another program's, another prefix's, or an older layout (`<pid>-<n>-<8 hex>`, whose `n`
    /// would read as a start time), never.
    #[test]
    fn only_names_that_record_their_owner_are_judged() {
        let name = owned_name("subcontract-cmd-");
        assert_eq!(
            owner_named(&name, "subcontract-cmd-"),
            Some(own_identity()),
            "{name}"
        );
        assert_eq!(owner_named(&name, "lease-"), None);
        assert_eq!(
            owner_named("12-3456-00ff00ff00ff00ff", ""),
            Some((12, 3456))
        );
        for name in [
            "12-7-00ff00ff",
            "12-3456-7-00ff00ff",
            "00ff00ff00ff00ff",
            "12-3456-00ff",
            "a-3456-00ff00ff00ff00ff",
            "12-3456-00ff00ff00ff00ff-1",
            "",
        ] {
            assert_eq!(owner_named(name, ""), None, "{name}");
        }
    }
}
