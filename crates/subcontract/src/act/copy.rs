//! Working copies: made from a source directory (a git worktree with the source's uncommitted
//! files laid over it, or a plain copy), compared against the baseline they were made with,
//! and removed when dropped.

use std::ffi::OsStr;
use std::fs;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use super::changes::{self, Changes};
use super::error::ActError;
use super::git::{Config, Git};
use super::lease::{self, Lease, BASE_GIT, TREE_DIR};
use super::policy::Isolation;

/// Most bytes of an ignore file carried over into a copy's baseline repository.
const MAX_EXCLUDE_BYTES: u64 = 1024 * 1024;

/// Attributes that hold for every file of a baseline repository, above any `.gitattributes`
/// in the copy: no end-of-line conversion, no filter and no keyword expansion, so the bytes
/// recorded and compared are the bytes in the files, and a patch of them applies to the
/// parent's files as they are.
const ATTRIBUTES: &str = "* -text -filter -ident -working-tree-encoding\n";

/// A working copy of a source directory, in a lease directory of its own. Its files are the
/// source's as the copy was made (the baseline); [`capture`](Self::capture) gives what changed
/// since. Dropping it removes it (for a worktree, from the repository's worktree list too),
/// unless [`keep`](Self::keep) was called.
#[derive(Debug)]
pub struct WorkingCopy {
    lease: PathBuf,
    /// The checkout or copy: `<lease>/tree`.
    tree: PathBuf,
    /// Where the source's files are: the tree, or the source's subdirectory inside it.
    root: PathBuf,
    base_git: PathBuf,
    /// The baseline commit in `base_git`.
    base: String,
    /// A worktree's repository (its common git directory).
    repo: Option<PathBuf>,
    source: PathBuf,
    isolation: Isolation,
    /// Removed or kept: nothing left to do on drop.
    done: bool,
}

/// Where a worktree's source sits in its repository.
struct RepoInfo {
    /// The top of the source's working tree.
    top: PathBuf,
    /// The repository's common git directory (where worktrees are registered).
    common: PathBuf,
    /// The git directory of `top` itself (a linked worktree's own one).
    git_dir: PathBuf,
    /// The source's path below `top`, `/`-separated, empty at the top.
    prefix: String,
    head: String,
}

impl RepoInfo {
    /// A git command on the source's repository, named explicitly rather than found through
    /// `top/.git`: in a working copy that file is the run's to rewrite, and git must not be
    /// pointed at a configuration of its choosing.
    fn git(&self) -> Git<'_> {
        Git::new(&self.top, Config::User).repo(&self.git_dir, Some(&self.top))
    }
}

impl WorkingCopy {
    /// Makes a working copy of `source` in a new lease directory under `copies_dir` (made if
    /// missing; see [`default_copies_dir`](super::default_copies_dir)).
    ///
    /// - [`Isolation::Worktree`]: `source` must be inside a git repository with a commit. A
    ///   detached worktree is checked out at the repository's HEAD, then the source's modified,
    ///   deleted and untracked (not ignored) files are laid over it; the source's index and
    ///   files are not touched. If `source` is a subdirectory of its repository, the copy's
    ///   [`root`](Self::root) is the same subdirectory. `source` may itself be a working copy.
    /// - [`Isolation::Copy`]: a recursive copy (links copied as links, FIFOs and devices
    ///   skipped).
    /// - [`Isolation::None`]: an error, [`ActError::NoIsolation`].
    pub fn create(
        source: &Path,
        isolation: Isolation,
        copies_dir: &Path,
    ) -> Result<WorkingCopy, ActError> {
        if isolation == Isolation::None {
            return Err(ActError::NoIsolation);
        }
        let invalid = |reason: String| ActError::InvalidSource {
            path: source.to_path_buf(),
            reason,
        };
        let src = source.canonicalize().map_err(|e| invalid(e.to_string()))?;
        if !src.is_dir() {
            return Err(invalid("not a directory".to_owned()));
        }
        let repo = match isolation {
            Isolation::Worktree => Some(repo_info(&src)?),
            _ => None,
        };
        let copies = lease::ensure_copies_dir(copies_dir)?;
        if copies.starts_with(&src) {
            return Err(invalid(format!(
                "the copies directory {} is inside it",
                copies.display()
            )));
        }
        let lease_record = Lease {
            pid: lease::own_identity().0,
            start_time: lease::own_identity().1,
            source: src.clone(),
            isolation,
            repo: repo.as_ref().map(|r| r.common.clone()),
            git_dir: None,
        };
        let lease_dir = lease::create_lease(&copies, &lease_record)?;
        let tree = lease_dir.join(TREE_DIR);
        let mut copy = WorkingCopy {
            base_git: lease_dir.join(BASE_GIT),
            root: tree.clone(),
            tree,
            lease: lease_dir,
            base: String::new(),
            repo: repo.as_ref().map(|r| r.common.clone()),
            source: src.clone(),
            isolation,
            done: false,
        };
        // From here on, a failure drops `copy`, which removes what was made.
        let mut seed = None;
        match &repo {
            Some(info) => {
                // An index a private repository can start from (see `seed_from`): one file,
                // format 2, nothing kept beside it.
                info.git()
                    .args([
                        "-c",
                        "core.splitIndex=false",
                        "-c",
                        "core.untrackedCache=false",
                        "-c",
                        "index.version=2",
                        "-c",
                        "index.skipHash=false",
                    ])
                    .args(["worktree", "add", "--detach"])
                    .arg(&copy.tree)
                    .arg(&info.head)
                    .run()?;
                // The copy's own git directory, so that a copy of this copy need not trust
                // the `.git` file a command in it may rewrite.
                let own = new_worktree_git_dir(&copy.tree)?;
                lease::write_lease(
                    &copy.lease,
                    &Lease {
                        git_dir: Some(own.clone()),
                        ..lease_record.clone()
                    },
                )?;
                seed = seed_from(info, &copy.tree, &own);
                overlay(info, &copy.tree)?;
                if !info.prefix.is_empty() {
                    copy.root = copy.tree.join(&info.prefix);
                }
                fs::create_dir_all(&copy.root)
                    .map_err(|e| ActError::io("creating", &copy.root, e))?;
            }
            None => copy_tree(&src, &copy.tree)?,
        }
        copy.base = copy.record_baseline(repo.as_ref(), seed)?;
        tracing::debug!(
            source = %src.display(),
            copy = %copy.root.display(),
            ?isolation,
            "working copy made"
        );
        Ok(copy)
    }

    /// The copy's root: where the source's files are.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The (canonical) directory the copy was made from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// How the copy was made.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// The lease directory holding the copy.
    pub fn lease_dir(&self) -> &Path {
        &self.lease
    }

    /// The baseline commit (in the copy's private repository).
    pub fn base(&self) -> &str {
        &self.base
    }

    /// What changed in the copy since it was made: every file added, modified or deleted
    /// beneath [`root`](Self::root), except those the copy's `.gitignore` files (and the
    /// repository's `info/exclude` and the user's global excludes) ignore. The diff kept is at
    /// most [`MAX_DIFF_BYTES`](super::MAX_DIFF_BYTES); a larger one is marked
    /// ([`Changes::diff_truncated`]) and is a violation.
    pub fn capture(&self) -> Result<Changes, ActError> {
        self.git().args(["add", "-A", "--", "."]).run()?;
        let id = self.git().arg("write-tree").line()?;
        changes::diff_against(self, &id)
    }

    /// A git command on the copy's private repository, run in the copy's root.
    pub(crate) fn git(&self) -> Git<'_> {
        Git::new(&self.root, Config::Private).repo(&self.base_git, Some(&self.tree))
    }

    /// The private repository (to change its attributes for one command).
    pub(crate) fn base_git(&self) -> &Path {
        &self.base_git
    }

    /// Removes the copy now, reporting a failure (dropping it does the same, logging one).
    pub fn discard(mut self) -> Result<(), ActError> {
        self.done = true;
        lease::remove_lease(&self.lease, self.repo.as_deref())
    }

    /// Leaves the copy on disk and returns its lease directory. It is removed by the first
    /// [`cleanup_stale`](super::cleanup_stale) after this process ends.
    pub fn keep(mut self) -> PathBuf {
        self.done = true;
        self.lease.clone()
    }

    /// Records the copy's files as they are now in the private repository; returns the commit.
    /// With a `seed`, the repository starts from the worktree's index and borrows the source
    /// repository's objects, so only the files that differ from the checkout are hashed.
    fn record_baseline(
        &self,
        repo: Option<&RepoInfo>,
        seed: Option<Seed>,
    ) -> Result<String, ActError> {
        init_private(&self.base_git)?;
        let info = self.base_git.join("info");
        fs::write(info.join("attributes"), ATTRIBUTES)
            .map_err(|e| ActError::io("writing", info.join("attributes"), e))?;
        // What the source's own git ignores beyond its `.gitignore` files is not a change
        // either.
        let mut exclude = Vec::new();
        if let Some(repo) = repo {
            append_bounded(&mut exclude, &repo.common.join("info").join("exclude"));
        }
        if let Some(global) = global_excludes(repo.map_or(&self.source, |r| &r.top)) {
            append_bounded(&mut exclude, &global);
        }
        fs::write(info.join("exclude"), exclude)
            .map_err(|e| ActError::io("writing", info.join("exclude"), e))?;
        let seeded = match seed {
            Some(seed) => match self.plant(&seed).and_then(|()| {
                self.git()
                    .hashing_many()
                    .args(["add", "-A", "--", "."])
                    .run()
            }) {
                Ok(_) => true,
                Err(e) => {
                    // Whatever stopped it, hashing every file records the same baseline.
                    tracing::debug!(error = %e, "seeding the baseline failed; hashing every file");
                    self.unplant()?;
                    false
                }
            },
            None => false,
        };
        if !seeded {
            self.git()
                .hashing_many()
                .args(["add", "-A", "--", "."])
                .run()?;
        }
        let tree = self.git().arg("write-tree").line()?;
        let commit = self
            .git()
            .args(["commit-tree", &tree, "-m", "baseline"])
            .line()?;
        // HEAD names the baseline, detached: what a reader of the repository would look for.
        let head = self.base_git.join("HEAD");
        fs::write(&head, format!("{commit}\n")).map_err(|e| ActError::io("writing", &head, e))?;
        Ok(commit)
    }

    /// Starts the private repository from `seed`: the worktree's index, with its time kept
    /// (git judges an entry written in the same second as its index by content, and a copy
    /// with a later time would hide that), and the source repository's objects as an
    /// alternate, read only: nothing is ever written or removed there through it.
    fn plant(&self, seed: &Seed) -> Result<(), ActError> {
        let index = self.base_git.join("index");
        fs::copy(&seed.index, &index).map_err(|e| ActError::io("copying", &seed.index, e))?;
        fs::File::options()
            .write(true)
            .open(&index)
            .and_then(|f| f.set_modified(seed.modified))
            .map_err(|e| ActError::io("dating", &index, e))?;
        let alternates = self
            .base_git
            .join("objects")
            .join("info")
            .join("alternates");
        let mut line = seed.objects.as_os_str().as_encoded_bytes().to_vec();
        line.push(b'\n');
        fs::create_dir_all(self.base_git.join("objects").join("info"))
            .and_then(|()| fs::write(&alternates, line))
            .map_err(|e| ActError::io("writing", &alternates, e))
    }

    /// Undoes [`plant`](Self::plant): the private repository as `git init` left it, but for
    /// objects the failed attempt may have written, which are the copy's files anyway.
    fn unplant(&self) -> Result<(), ActError> {
        for path in [
            self.base_git.join("index"),
            self.base_git
                .join("objects")
                .join("info")
                .join("alternates"),
        ] {
            match fs::remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(ActError::io("removing", path, e))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Makes the bare private repository `dir` with what git needs of one and no more (what
/// `git init --bare` makes but templates, sample hooks and empty directories git makes when it
/// needs them): a copy is made per run, and every directory made costs.
fn init_private(dir: &Path) -> Result<(), ActError> {
    for sub in ["objects", "refs", "info"] {
        let path = dir.join(sub);
        fs::create_dir_all(&path).map_err(|e| ActError::io("creating", &path, e))?;
    }
    for (name, text) in [
        ("HEAD", "ref: refs/heads/main\n"),
        (
            "config",
            "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n",
        ),
    ] {
        let path = dir.join(name);
        fs::write(&path, text).map_err(|e| ActError::io("writing", &path, e))?;
    }
    // As `git init` does: whether this file system keeps the executable bit.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let config = dir.join("config");
        let keeps = fs::set_permissions(&config, fs::Permissions::from_mode(0o755))
            .and_then(|()| fs::metadata(&config))
            .is_ok_and(|m| m.permissions().mode() & 0o100 != 0);
        let _ = fs::set_permissions(&config, fs::Permissions::from_mode(0o644));
        if !keeps {
            fs::write(
                &config,
                "[core]\n\trepositoryformatversion = 0\n\tfilemode = false\n\tbare = true\n",
            )
            .map_err(|e| ActError::io("writing", &config, e))?;
        }
    }
    Ok(())
}

/// The git directory of the worktree git just made at `tree`, from the `.git` file it wrote
/// there (nothing else has run in the tree yet); asked of git if that file does not say.
fn new_worktree_git_dir(tree: &Path) -> Result<PathBuf, ActError> {
    let mut text = String::new();
    let read = fs::File::open(tree.join(".git"))
        .and_then(|f| f.take(64 * 1024).read_to_string(&mut text))
        .is_ok();
    if let Some(dir) = text
        .strip_prefix("gitdir: ")
        .map(|t| t.trim_end_matches('\n'))
        .filter(|t| read && !t.is_empty() && !t.contains('\n'))
    {
        let dir = tree.join(dir);
        if dir.is_dir() {
            return Ok(dir);
        }
    }
    Ok(PathBuf::from(
        Git::new(tree, Config::User)
            .args(["rev-parse", "--absolute-git-dir"])
            .line()?,
    ))
}

/// Where a worktree copy's baseline can start from, so as not to hash every file again.
struct Seed {
    /// The fresh worktree's index: every entry's blob and the stat data of the file git wrote.
    index: PathBuf,
    /// The index's modification time.
    modified: std::time::SystemTime,
    /// The source repository's object directory, which holds every blob the index names.
    objects: PathBuf,
}

/// Whether the private repository of the fresh worktree `tree` (git directory `own`) can start
/// from its index. An entry of that index names the blob of HEAD and the file git wrote
/// from it; the private repository records a file's bytes as they are. The two agree unless
/// checkout converted the blob on the way out (end of line to CRLF, a filter, `ident`, an
/// encoding), so any such conversion, anywhere, means hashing every file. So does an index
/// that is not a plain one: another format or hash, a submodule, a conflict, an entry git
/// would not check (assume-unchanged, skip-worktree), an extension a private repository cannot
/// take as it is.
fn seed_from(info: &RepoInfo, tree: &Path, own: &Path) -> Option<Seed> {
    // SHA-1 repositories only: the private repository is one.
    if cfg!(windows) || info.head.len() != 40 {
        return None;
    }
    let index = own.join("index");
    let modified = fs::metadata(&index).and_then(|m| m.modified()).ok()?;
    let data = fs::read(&index).ok()?;
    let paths = plain_index_paths(&data)?;
    let objects = info.common.join("objects");
    if !objects.is_dir() || objects.as_os_str().as_encoded_bytes().contains(&b'\n') {
        return None;
    }
    // The configuration and attributes the checkout itself saw: the copy's own.
    let git = || Git::new(tree, Config::User).repo(own, Some(tree));
    let config = git()
        .args(["config", "-z", "--get-regexp", r"^core\.(autocrlf|eol)$"])
        .output()
        .ok()?;
    for item in config.stdout.split(|&b| b == 0).filter(|i| !i.is_empty()) {
        let text = String::from_utf8_lossy(item).to_ascii_lowercase();
        let (key, value) = text.split_once('\n').unwrap_or((&text, ""));
        let converts = match key {
            "core.autocrlf" => !matches!(value, "false" | "no" | "off" | "0"),
            _ => value == "crlf",
        };
        if converts {
            tracing::debug!(%key, %value, "checkout converts line endings; hashing every file");
            return None;
        }
    }
    let mut list = Vec::with_capacity(data.len());
    for p in &paths {
        list.extend_from_slice(p);
        list.push(0);
    }
    // `--cached`: the attributes of HEAD's files, which the checkout used (the overlay may
    // bring others).
    let out = git()
        .args([
            "check-attr",
            "--cached",
            "-z",
            "--stdin",
            "eol",
            "filter",
            "ident",
            "working-tree-encoding",
        ])
        .stdin(&list)
        .run()
        .ok()?;
    if out.truncated {
        return None;
    }
    let mut fields = out.stdout.split(|&b| b == 0);
    while let (Some(path), Some(attr), Some(value)) = (fields.next(), fields.next(), fields.next())
    {
        let converts = match attr {
            b"eol" => value == b"crlf",
            _ => !matches!(value, b"unspecified" | b"unset"),
        };
        if converts {
            tracing::debug!(
                path = %String::from_utf8_lossy(path),
                attr = %String::from_utf8_lossy(attr),
                "checkout converts a file; hashing every file"
            );
            return None;
        }
    }
    Some(Seed {
        index,
        modified,
        objects,
    })
}

/// The paths of a git index of format 2 with SHA-1 names whose entries are all regular
/// files and links, merged, with no flag, and whose extensions are only the cached trees and
/// the offsets of its own layout; `None` for any other index, or one that does not parse.
pub(super) fn plain_index_paths(data: &[u8]) -> Option<Vec<&[u8]>> {
    // Stat data (40 bytes), the object name (20), the flags (2).
    const FIXED: usize = 62;
    const HASH: usize = 20;
    let be32 = |b: &[u8]| -> Option<usize> {
        Some(u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize)
    };
    if data.get(..4)? != b"DIRC" || be32(data.get(4..)?)? != 2 {
        return None;
    }
    let count = be32(data.get(8..)?)?;
    let end = data.len().checked_sub(HASH)?;
    let mut at: usize = 12;
    let mut paths = Vec::with_capacity(count.min(end / FIXED));
    for _ in 0..count {
        let fixed = data.get(at..at.checked_add(FIXED)?)?;
        let mode = be32(&fixed[24..])?;
        let flags = u16::from_be_bytes([fixed[60], fixed[61]]);
        // Assume-valid, extended, a stage.
        if flags & 0xf000 != 0 || !matches!(mode & 0o170000, 0o100000 | 0o120000) {
            return None;
        }
        let name = data.get(at + FIXED..end)?;
        let len = memchr::memchr(0, name)?;
        paths.push(&name[..len]);
        at = at.checked_add((FIXED + len + 8) & !7)?;
    }
    while at < end {
        let sig = data.get(at..at.checked_add(4)?)?;
        let size = be32(data.get(at + 4..)?)?;
        if !matches!(sig, b"TREE" | b"EOIE" | b"IEOT") {
            return None;
        }
        at = at.checked_add(8)?.checked_add(size)?;
    }
    (at == end).then_some(paths)
}

impl Drop for WorkingCopy {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        if let Err(e) = lease::remove_lease(&self.lease, self.repo.as_deref()) {
            tracing::warn!(copy = %self.lease.display(), error = %e, "could not remove a working copy");
        }
    }
}

/// The repository `src` is in, and its HEAD commit. A source inside a worktree copy is
/// taken from that copy's lease, not from its `.git` file.
fn repo_info(src: &Path) -> Result<RepoInfo, ActError> {
    let not_repo = |reason: String| ActError::NotARepository {
        path: src.to_path_buf(),
        reason,
    };
    let (top, common, git_dir, prefix) = match lease::enclosing_worktree_copy(src) {
        Some((top, lease)) => {
            let prefix = src
                .strip_prefix(&top)
                .ok()
                .and_then(Path::to_str)
                .ok_or_else(|| not_repo("a path is not UTF-8".into()))?
                .to_owned();
            let (Some(common), Some(git_dir)) = (lease.repo, lease.git_dir) else {
                return Err(not_repo(
                    "its working copy's lease names no repository".into(),
                ));
            };
            (top, common, git_dir, prefix)
        }
        None => {
            let out = Git::new(src, Config::User)
                .args([
                    "rev-parse",
                    "--path-format=absolute",
                    "--show-toplevel",
                    "--git-common-dir",
                    "--absolute-git-dir",
                    "--show-prefix",
                ])
                .output()?;
            if !out.status.success() {
                return Err(not_repo(out.stderr));
            }
            let text = String::from_utf8(out.stdout)
                .map_err(|_| not_repo("a path is not UTF-8".into()))?;
            let mut lines = text.lines();
            let (Some(top), Some(common), Some(git_dir)) =
                (lines.next(), lines.next(), lines.next())
            else {
                return Err(not_repo(format!("unexpected rev-parse output {text:?}")));
            };
            let prefix = lines.next().unwrap_or("").trim_end_matches('/').to_owned();
            (top.into(), common.into(), git_dir.into(), prefix)
        }
    };
    let mut info = RepoInfo {
        top,
        common,
        git_dir,
        prefix,
        head: String::new(),
    };
    let head = info
        .git()
        .args(["rev-parse", "--verify", "-q", "HEAD^{commit}"])
        .output()?;
    if !head.status.success() {
        return Err(not_repo("HEAD has no commit yet".to_owned()));
    }
    info.head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    Ok(info)
}

/// Lays the uncommitted state of the worktree at `top` over the fresh checkout `tree`: files
/// modified or untracked (and not ignored) in `top` are copied, files deleted there are deleted.
fn overlay(info: &RepoInfo, tree: &Path) -> Result<(), ActError> {
    let top = info.top.as_path();
    let out = info
        .git()
        .args([
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
        ])
        .run()?;
    let mut entries = out.stdout.split(|&b| b == 0).filter(|e| !e.is_empty());
    while let Some(entry) = entries.next() {
        if entry.len() < 4 {
            return Err(ActError::GitOutput {
                args: "status".to_owned(),
                detail: format!("entry {:?}", String::from_utf8_lossy(entry)),
            });
        }
        let (xy, path) = (&entry[..2], &entry[3..]);
        if xy.contains(&b'R') || xy.contains(&b'C') {
            // The original path follows; with --no-renames there is none, but stay in step.
            entries.next();
        }
        let rel = bytes_path(path);
        if !is_inside(rel) {
            continue;
        }
        let (from, to) = (top.join(rel), tree.join(rel));
        match fs::symlink_metadata(&from) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => lease::remove_tree(&to)?,
            Err(e) => return Err(ActError::io("reading", from, e)),
            // A submodule or nested repository: its files are its own repository's.
            Ok(meta) if meta.is_dir() => {}
            Ok(meta) => {
                lease::remove_tree(&to)?;
                prepare_parents(tree, rel)?;
                copy_entry(&from, &to, &meta)?;
            }
        }
    }
    Ok(())
}

/// A path from git's output, as a path.
pub(crate) fn bytes_path(bytes: &[u8]) -> &Path {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Path::new(OsStr::from_bytes(bytes))
    }
    #[cfg(not(unix))]
    {
        Path::new(std::str::from_utf8(bytes).unwrap_or(""))
    }
}

/// Whether `rel` is a relative path of plain names (no `..`, not absolute, not empty).
fn is_inside(rel: &Path) -> bool {
    let mut any = false;
    for c in rel.components() {
        match c {
            Component::Normal(_) => any = true,
            Component::CurDir => {}
            _ => return false,
        }
    }
    any
}

/// Makes each directory above `rel` in `tree` a real directory (replacing a file or link that
/// stands where the source now has a directory).
fn prepare_parents(tree: &Path, rel: &Path) -> Result<(), ActError> {
    let mut at = tree.to_path_buf();
    let Some(parent) = rel.parent() else {
        return Ok(());
    };
    for c in parent.components() {
        at.push(c);
        match fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => continue,
            Ok(_) => fs::remove_file(&at).map_err(|e| ActError::io("replacing", &at, e))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(ActError::io("reading", &at, e)),
        }
        fs::create_dir(&at).map_err(|e| ActError::io("creating", &at, e))?;
    }
    Ok(())
}

/// Copies one non-directory entry: a link as a link, a regular file with its permissions;
/// anything else (FIFO, device, socket) is skipped.
fn copy_entry(from: &Path, to: &Path, meta: &fs::Metadata) -> Result<(), ActError> {
    let kind = meta.file_type();
    if kind.is_symlink() {
        let target = fs::read_link(from).map_err(|e| ActError::io("reading link", from, e))?;
        symlink(&target, to).map_err(|e| ActError::io("copying link to", to, e))?;
    } else if kind.is_file() {
        fs::copy(from, to).map_err(|e| ActError::io("copying to", to, e))?;
    }
    Ok(())
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(not(unix))]
fn symlink(_target: &Path, _link: &Path) -> io::Result<()> {
    Err(io::Error::other("symbolic links are not supported here"))
}

/// Copies the directory `src` to `dst` (which must not exist), without following links.
fn copy_tree(src: &Path, dst: &Path) -> Result<(), ActError> {
    fs::create_dir(dst).map_err(|e| ActError::io("creating", dst, e))?;
    for entry in walkdir::WalkDir::new(src).follow_links(false).min_depth(1) {
        let entry = entry.map_err(|e| {
            let path = e.path().unwrap_or(src).to_path_buf();
            ActError::io("copying", path, io::Error::other(e.to_string()))
        })?;
        let Ok(rel) = entry.path().strip_prefix(src) else {
            continue;
        };
        let to = dst.join(rel);
        let meta = entry
            .path()
            .symlink_metadata()
            .map_err(|e| ActError::io("reading", entry.path(), e))?;
        if meta.is_dir() {
            fs::create_dir(&to).map_err(|e| ActError::io("creating", &to, e))?;
        } else {
            copy_entry(entry.path(), &to, &meta)?;
        }
    }
    Ok(())
}

/// The user's global excludes file, as their git finds it in `dir`.
fn global_excludes(dir: &Path) -> Option<PathBuf> {
    // The user's own setting only: a repository's configuration may name any file.
    let out = Git::new(dir, Config::User)
        .args(["config", "--global", "--path", "--get", "core.excludesFile"])
        .output()
        .ok()?;
    if out.status.success() {
        let path = String::from_utf8(out.stdout).ok()?;
        return Some(PathBuf::from(path.trim_end()));
    }
    // git's default when unset.
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(config.join("git").join("ignore"))
}

/// Appends the file at `path` (at most 1 MiB of it; nothing if it is missing) and a newline.
fn append_bounded(out: &mut Vec<u8>, path: &Path) {
    if let Ok(file) = fs::File::open(path) {
        let _ = file.take(MAX_EXCLUDE_BYTES).read_to_end(out);
        out.push(b'\n');
    }
}
