//! Working copies and changes against real git repositories in temporary directories.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

/// Runs git in `dir` with a clean, fixed environment; panics on failure.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir, args).output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn git_cmd(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(key);
        }
    }
    cmd.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .args(args);
    cmd
}

fn write(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

/// Every file beneath `dir` but `.git`: path → bytes (a link as `link:<target>`).
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for entry in walkdir::WalkDir::new(dir)
        .follow_links(false)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".git")
    {
        let entry = entry.unwrap();
        let rel = entry
            .path()
            .strip_prefix(dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let kind = entry.file_type();
        if kind.is_symlink() {
            let target = fs::read_link(entry.path()).unwrap();
            out.insert(rel, format!("link:{}", target.display()).into_bytes());
        } else if kind.is_file() {
            out.insert(rel, fs::read(entry.path()).unwrap());
        }
    }
    out
}

/// HEAD, branch and `status --porcelain` of the repository at `dir`.
fn repo_state(dir: &Path) -> (String, String, String) {
    (
        git(dir, &["rev-parse", "HEAD"]),
        git(dir, &["symbolic-ref", "HEAD"]),
        git(dir, &["status", "--porcelain"]),
    )
}

/// Worktrees `dir`'s repository lists.
fn worktrees(dir: &Path) -> String {
    git(dir, &["worktree", "list", "--porcelain"])
}

/// A repository on a non-default branch with an extra commit, and uncommitted changes: a
/// modified file, a deleted file, an untracked file, and ignored files.
fn parent_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    git(p, &["init", "-q", "-b", "main"]);
    write(p, ".gitignore", "build/\n*.log\n");
    write(p, "a.txt", "one\ntwo\nthree\n");
    write(p, "b.txt", "bee\n");
    write(p, "gone.txt", "to be deleted\n");
    write(p, "sub/c.txt", "sea\n");
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "first"]);
    git(p, &["checkout", "-q", "-b", "feature"]);
    write(p, "feature.txt", "only on feature\n");
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "feature"]);
    // Uncommitted state.
    write(p, "a.txt", "one\nTWO\nthree\n");
    fs::remove_file(p.join("gone.txt")).unwrap();
    write(p, "new/untracked.txt", "fresh\n");
    write(p, "build/out.bin", "ignored output\n");
    write(p, "debug.log", "ignored log\n");
    dir
}

fn copies() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn canon(p: &Path) -> PathBuf {
    p.canonicalize().unwrap()
}

// ---- making copies ----

#[test]
fn a_worktree_copy_is_at_head_with_the_uncommitted_state_and_leaves_the_parent_alone() {
    let parent = parent_repo();
    let p = parent.path();
    let before = (snapshot(p), repo_state(p), worktrees(p));
    let index = fs::read(p.join(".git/index")).unwrap();
    let copies = copies();
    let copy = WorkingCopy::create(p, Isolation::Worktree, copies.path()).unwrap();
    let root = copy.root().to_path_buf();
    assert!(root.starts_with(canon(copies.path())));
    // At the feature branch's HEAD, detached, with the overlay.
    assert_eq!(
        git(&root, &["rev-parse", "HEAD"]),
        git(p, &["rev-parse", "HEAD"])
    );
    assert_eq!(
        fs::read_to_string(root.join("feature.txt")).unwrap(),
        "only on feature\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("a.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );
    assert!(!root.join("gone.txt").exists());
    assert_eq!(
        fs::read_to_string(root.join("new/untracked.txt")).unwrap(),
        "fresh\n"
    );
    assert!(!root.join("build").exists());
    assert!(!root.join("debug.log").exists());
    assert!(
        worktrees(p).contains(root.to_str().unwrap()),
        "{} {}",
        worktrees(p),
        root.display()
    );

    let changes = copy.capture().unwrap();
    assert!(changes.is_empty(), "{changes:?}");
    let lease = copy.lease_dir().to_path_buf();
    drop(copy);
    assert!(!lease.exists());
    assert_eq!((snapshot(p), repo_state(p), worktrees(p)), before);
    assert_eq!(fs::read(p.join(".git/index")).unwrap(), index);
}

#[test]
fn a_worktree_needs_a_repository_and_says_to_use_copy() {
    let plain = tempfile::tempdir().unwrap();
    write(plain.path(), "x.txt", "x\n");
    let copies = copies();
    let err = WorkingCopy::create(plain.path(), Isolation::Worktree, copies.path()).unwrap_err();
    assert!(matches!(err, ActError::NotARepository { .. }), "{err:?}");
    assert!(err.to_string().contains("\"copy\""), "{err}");
    assert!(matches!(
        WorkingCopy::create(plain.path(), Isolation::None, copies.path()),
        Err(ActError::NoIsolation)
    ));
    // A repository without a commit has no HEAD to check out.
    git(plain.path(), &["init", "-q"]);
    let err = WorkingCopy::create(plain.path(), Isolation::Worktree, copies.path()).unwrap_err();
    assert!(matches!(err, ActError::NotARepository { .. }), "{err:?}");
    // Nothing is left behind by a failed create.
    assert_eq!(fs::read_dir(copies.path()).unwrap().count(), 0);
}

#[cfg(unix)]
#[test]
fn a_copy_of_a_plain_directory_copies_links_as_links() {
    use std::os::unix::fs::symlink;
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "secret.txt", "secret\n");
    let src = tempfile::tempdir().unwrap();
    let s = src.path();
    write(s, "a.txt", "a\n");
    write(s, "d/b.txt", "b\n");
    symlink("a.txt", s.join("alias")).unwrap();
    symlink(outside.path(), s.join("out")).unwrap();
    symlink(outside.path().join("secret.txt"), s.join("out.txt")).unwrap();
    let copies = copies();
    let copy = WorkingCopy::create(s, Isolation::Copy, copies.path()).unwrap();
    let root = copy.root();
    assert_eq!(snapshot(root), snapshot(s));
    assert!(fs::symlink_metadata(root.join("out"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(fs::read_link(root.join("out")).unwrap(), outside.path());
    assert!(!root.join("secret.txt").exists());
    // A change, captured: paths relative to the copy's root.
    write(root, "d/b.txt", "b\nmore\n");
    let changes = copy.capture().unwrap();
    assert_eq!(changes.files.len(), 1);
    assert_eq!(changes.files[0].path, "d/b.txt");
    changes.apply(s).unwrap();
    assert_eq!(fs::read_to_string(s.join("d/b.txt")).unwrap(), "b\nmore\n");
    drop(copy);
    assert_eq!(
        fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "secret\n"
    );
}

#[test]
fn the_copies_directory_may_not_be_inside_the_source() {
    let src = tempfile::tempdir().unwrap();
    write(src.path(), "a.txt", "a\n");
    let err =
        WorkingCopy::create(src.path(), Isolation::Copy, &src.path().join("copies")).unwrap_err();
    assert!(matches!(err, ActError::InvalidSource { .. }), "{err:?}");
}

// ---- capture and apply ----

#[test]
fn capture_lists_each_change_and_its_patch_applies_to_the_parent() {
    let parent = parent_repo();
    let p = parent.path();
    let copies = copies();
    let copy = WorkingCopy::create(p, Isolation::Worktree, copies.path()).unwrap();
    let root = copy.root().to_path_buf();
    write(&root, "a.txt", "one\nTWO\nthree\nfour\nfive\n");
    fs::remove_file(root.join("b.txt")).unwrap();
    write(&root, "sub/new.py", "print(1)\nprint(2)\n");
    write(&root, "new/untracked.txt", "changed\n");
    // Build output the repository ignores is not a change.
    write(&root, "build/result.o", "object\n");
    write(&root, "run.log", "log\n");

    let changes = copy.capture().unwrap();
    let files: Vec<_> = changes
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.status, f.insertions, f.deletions))
        .collect();
    assert_eq!(
        files,
        vec![
            ("a.txt", FileStatus::Modified, 2, 0),
            ("b.txt", FileStatus::Deleted, 0, 1),
            ("new/untracked.txt", FileStatus::Modified, 1, 1),
            ("sub/new.py", FileStatus::Added, 2, 0),
        ]
    );
    assert_eq!(changes.base, copy.base());
    assert!(!changes.diff_truncated);
    assert_eq!(changes.changed_lines(), 7);
    assert_eq!(
        changes.summary_json()["files"][0],
        serde_json::json!({"path": "a.txt", "insertions": 2, "deletions": 0})
    );
    // The same state gives the same id; another, another.
    assert_eq!(copy.capture().unwrap().id, changes.id);

    // `git apply --check` in a fresh copy of the parent's state.
    let fresh = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .args([
            "-a",
            &format!("{}/.", p.display()),
            fresh.path().to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(status.success());
    let patch = fresh
        .path()
        .join("..")
        .join(format!("{}.patch", changes.id));
    changes.save(&patch).unwrap();
    git(fresh.path(), &["apply", "--check", patch.to_str().unwrap()]);
    // Saving never overwrites.
    assert!(changes.save(&patch).is_err());
    fs::remove_file(&patch).unwrap();

    let state = repo_state(p);
    changes.apply(p).unwrap();
    for f in ["a.txt", "sub/new.py", "new/untracked.txt"] {
        assert_eq!(
            fs::read(p.join(f)).unwrap(),
            fs::read(root.join(f)).unwrap(),
            "{f}"
        );
    }
    assert!(!p.join("b.txt").exists());
    // Only files changed: HEAD and branch are as they were, and nothing was staged.
    let after = repo_state(p);
    assert_eq!((after.0, after.1), (state.0, state.1));
    assert_eq!(git(p, &["diff", "--cached", "--name-only"]), "");
}

#[test]
fn a_copy_of_a_subdirectory_is_rooted_there_and_applies_there() {
    let parent = parent_repo();
    let p = parent.path();
    let copies = copies();
    let copy = WorkingCopy::create(&p.join("sub"), Isolation::Worktree, copies.path()).unwrap();
    let root = copy.root().to_path_buf();
    assert!(root.ends_with("tree/sub"), "{}", root.display());
    assert_eq!(fs::read_to_string(root.join("c.txt")).unwrap(), "sea\n");
    write(&root, "c.txt", "sea\nsalt\n");
    write(&root, "deep/d.txt", "d\n");
    // A change outside the copy's root is not the copy's to hand back.
    write(&root.join(".."), "a.txt", "elsewhere\n");
    let changes = copy.capture().unwrap();
    let paths: Vec<_> = changes.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["c.txt", "deep/d.txt"]);
    let state = repo_state(p);
    changes.apply(&p.join("sub")).unwrap();
    assert_eq!(
        fs::read_to_string(p.join("sub/c.txt")).unwrap(),
        "sea\nsalt\n"
    );
    assert_eq!(fs::read_to_string(p.join("sub/deep/d.txt")).unwrap(), "d\n");
    assert_eq!(
        fs::read_to_string(p.join("a.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );
    let after = repo_state(p);
    assert_eq!((after.0, after.1), (state.0, state.1));
}

#[test]
fn apply_works_outside_any_repository() {
    let src = tempfile::tempdir().unwrap();
    write(src.path(), "x.txt", "x\n");
    let copies = copies();
    let copy = WorkingCopy::create(src.path(), Isolation::Copy, copies.path()).unwrap();
    write(copy.root(), "x.txt", "y\n");
    write(copy.root(), "bin.dat", [0u8, 1, 2, 255, 0]);
    let changes = copy.capture().unwrap();
    assert!(changes
        .files
        .iter()
        .any(|f| f.path == "bin.dat" && f.binary));
    changes.apply(src.path()).unwrap();
    assert_eq!(snapshot(src.path()), snapshot(copy.root()));
}

#[test]
fn a_conflict_applies_nothing_and_names_the_file() {
    let parent = parent_repo();
    let p = parent.path();
    let copies = copies();
    let first = WorkingCopy::create(p, Isolation::Worktree, copies.path()).unwrap();
    let second = WorkingCopy::create(p, Isolation::Worktree, copies.path()).unwrap();
    let third = WorkingCopy::create(p, Isolation::Worktree, copies.path()).unwrap();
    write(first.root(), "a.txt", "one\nFIRST\nthree\n");
    // The second edits the same line, and a file no one else touches, which must not be
    // applied either: git apply is all or nothing.
    write(second.root(), "sub/c.txt", "sea\nsecond\n");
    write(second.root(), "a.txt", "one\nSECOND\nthree\n");
    write(third.root(), "b.txt", "bee\nthird\n");
    let (c1, c2, c3) = (
        first.capture().unwrap(),
        second.capture().unwrap(),
        third.capture().unwrap(),
    );
    c1.apply(p).unwrap();
    let before = snapshot(p);
    let err = c2.apply(p).unwrap_err();
    match &err {
        ApplyError::Conflict { files, .. } => assert_eq!(files, &["a.txt"], "{err}"),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("a.txt"));
    assert_eq!(snapshot(p), before);
    // Changes to other files apply on top of each other.
    c3.apply(p).unwrap();
    assert_eq!(fs::read_to_string(p.join("b.txt")).unwrap(), "bee\nthird\n");
    assert_eq!(
        fs::read_to_string(p.join("a.txt")).unwrap(),
        "one\nFIRST\nthree\n"
    );
}

#[test]
fn apply_refuses_hostile_paths_before_git_sees_them() {
    let ws = tempfile::tempdir().unwrap();
    let inner = ws.path().join("inner");
    fs::create_dir(&inner).unwrap();
    write(&inner, ".git/config", "[core]\n");
    let patch = |path: &str| {
        Changes {
        id: "x".into(),
        base: "y".into(),
        files: Vec::new(),
        unlisted_files: 0,
        diff: format!(
            "diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+pwned\n"
        ),
        diff_truncated: false,
    }
    };
    for path in [
        "../escaped.txt",
        "a/../../escaped.txt",
        ".git/hooks/post",
        "x/.GIT/y",
    ] {
        let err = patch(path).apply(&inner).unwrap_err();
        assert!(
            matches!(err, ApplyError::UnsafePath { .. }),
            "{path}: {err:?}"
        );
    }
    let abs = ws.path().join("abs.txt");
    let err = patch(abs.to_str().unwrap()).apply(&inner).unwrap_err();
    assert!(
        matches!(
            err,
            ApplyError::UnsafePath { .. } | ApplyError::Conflict { .. }
        ),
        "{err:?}"
    );
    assert!(!ws.path().join("escaped.txt").exists());
    assert!(!abs.exists());
    assert!(!inner.join(".git/hooks").exists());
    // A cut diff is never applied.
    let mut cut = patch("ok.txt");
    cut.diff_truncated = true;
    assert!(matches!(
        cut.apply(&inner),
        Err(ApplyError::Truncated { .. })
    ));
    patch("ok.txt").apply(&inner).unwrap();
    assert_eq!(fs::read_to_string(inner.join("ok.txt")).unwrap(), "pwned\n");
}

#[test]
fn text_in_another_encoding_round_trips() {
    let src = tempfile::tempdir().unwrap();
    write(src.path(), "latin1.txt", b"caf\xe9\nna\xefve\n");
    let copies = copies();
    let copy = WorkingCopy::create(src.path(), Isolation::Copy, copies.path()).unwrap();
    write(
        copy.root(),
        "latin1.txt",
        b"caf\xe9\nna\xefve\nd\xe9j\xe0\n",
    );
    let changes = copy.capture().unwrap();
    assert_eq!(changes.files.len(), 1);
    changes.apply(src.path()).unwrap();
    assert_eq!(
        fs::read(src.path().join("latin1.txt")).unwrap(),
        b"caf\xe9\nna\xefve\nd\xe9j\xe0\n"
    );
}

#[test]
fn line_endings_and_attributes_do_not_change_the_bytes() {
    let parent = tempfile::tempdir().unwrap();
    let p = parent.path();
    git(p, &["init", "-q"]);
    write(p, ".gitattributes", "*.txt text eol=crlf\n");
    write(p, "w.txt", "a\r\nb\r\n");
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "i"]);
    let copies = copies();
    let copy = WorkingCopy::create(p, Isolation::Worktree, copies.path()).unwrap();
    write(copy.root(), "w.txt", "a\r\nb\r\nc\r\n");
    let changes = copy.capture().unwrap();
    changes.apply(p).unwrap();
    assert_eq!(fs::read(p.join("w.txt")).unwrap(), b"a\r\nb\r\nc\r\n");
}

#[test]
fn a_huge_diff_is_cut_marked_and_a_violation() {
    let src = tempfile::tempdir().unwrap();
    write(src.path(), "keep.txt", "k\n");
    let copies = copies();
    let copy = WorkingCopy::create(src.path(), Isolation::Copy, copies.path()).unwrap();
    let line = "x".repeat(99) + "\n";
    write(copy.root(), "big.txt", line.repeat(100_000));
    let changes = copy.capture().unwrap();
    assert!(changes.diff_truncated);
    assert!(changes.diff.len() <= MAX_DIFF_BYTES);
    let v = changes.violations(&WorkspacePolicy {
        max_diff_lines: 1_000_000,
        ..WorkspacePolicy::default()
    });
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("8 MiB"), "{v:?}");
    assert!(matches!(
        changes.apply(src.path()),
        Err(ApplyError::Truncated { .. })
    ));
    assert!(changes.save(&src.path().join("p.patch")).is_err());
    assert!(!src.path().join("big.txt").exists());
}

// ---- violations ----

fn changed(paths: &[(&str, usize)]) -> Changes {
    Changes {
        id: "id".into(),
        base: "base".into(),
        files: paths
            .iter()
            .map(|&(p, n)| ChangedFile {
                path: p.to_owned(),
                status: FileStatus::Modified,
                insertions: n,
                deletions: 0,
                binary: false,
                link_target: None,
            })
            .collect(),
        unlisted_files: 0,
        diff: String::new(),
        diff_truncated: false,
    }
}

#[test]
fn violations_name_each_path_and_limit() {
    let policy = WorkspacePolicy {
        isolation: Isolation::Worktree,
        writes: vec!["src".into(), "tests/**/*.py".into(), "*.md".into()],
        max_changed_files: 3,
        max_diff_lines: 10,
        ..WorkspacePolicy::default()
    };
    let ok = changed(&[
        ("src/a/b.rs", 1),
        ("tests/x/t.py", 1),
        ("docs/README.md", 1),
    ]);
    assert_eq!(ok.violations(&policy), Vec::<String>::new());
    let bad = changed(&[
        ("src/a.rs", 5),
        ("Cargo.toml", 1),
        (".git/config", 1),
        ("src/.git/hooks/x", 1),
        ("tests/t.rs", 4),
    ]);
    let v = bad.violations(&policy);
    let all = v.join("\n");
    assert!(
        all.contains("5 files changed, more than the limit of 3 (max_changed_files)"),
        "{all}"
    );
    assert!(
        all.contains("12 lines changed, more than the limit of 10 (max_diff_lines)"),
        "{all}"
    );
    assert!(
        all.contains("`Cargo.toml` is outside the paths this run may write"),
        "{all}"
    );
    assert!(all.contains("`tests/t.rs` is outside"), "{all}");
    assert!(all.contains("`.git/config` is under .git"), "{all}");
    assert!(all.contains("`src/.git/hooks/x` is under .git"), "{all}");
    assert!(!all.contains("`src/a.rs`"), "{all}");
    // Empty writes: everything but .git.
    let open = WorkspacePolicy::default();
    assert_eq!(
        changed(&[("any/where.txt", 1)]).violations(&open),
        Vec::<String>::new()
    );
    assert_eq!(changed(&[(".git/x", 1)]).violations(&open).len(), 1);
}

// ---- policy ----

#[test]
fn policy_defaults_parse_and_validate() {
    let p: WorkspacePolicy = toml::from_str("").unwrap();
    assert_eq!(p, WorkspacePolicy::default());
    assert_eq!(p.isolation, Isolation::None);
    assert_eq!(
        (p.max_changed_files, p.max_diff_lines, p.max_command_secs),
        (50, 5000, 60)
    );
    assert_eq!(p.sandbox, SandboxMode::Os);
    assert!(!p.network);
    let p: WorkspacePolicy = toml::from_str(
        r#"
        isolation = "worktree"
        writes = ["src/**"]
        commands = ["cargo", "pytest"]
        checks = ["cargo test --lib", "pytest -q 'tests/a b.py'"]
        sandbox = "none"
        "#,
    )
    .unwrap();
    assert_eq!(p.isolation, Isolation::Worktree);
    assert_eq!(p.sandbox, SandboxMode::None);
    assert!(p.validate().is_empty(), "{:?}", p.validate());
    assert_eq!(
        p.check_commands().unwrap()[1],
        ["pytest", "-q", "tests/a b.py"]
    );
    assert!(toml::from_str::<WorkspacePolicy>("isolation = \"Worktree\"").is_err());
    assert!(toml::from_str::<WorkspacePolicy>("unknown = 1").is_err());

    let bad = WorkspacePolicy {
        writes: vec!["src/[".into()],
        commands: vec!["cargo".into()],
        checks: vec!["make test".into(), "cargo 'unclosed".into(), "  ".into()],
        max_changed_files: 0,
        max_command_secs: 0,
        ..WorkspacePolicy::default()
    };
    let problems = bad.validate().join("\n");
    assert!(problems.contains("invalid glob `src/[`"), "{problems}");
    assert!(
        problems.contains("`make test` runs `make`, which is not in `commands`"),
        "{problems}"
    );
    assert!(
        problems.contains("`cargo 'unclosed` cannot be split"),
        "{problems}"
    );
    assert!(problems.contains("empty command"), "{problems}");
    assert!(
        problems.contains("`max_changed_files` must be at least 1"),
        "{problems}"
    );
    assert!(
        problems.contains("`max_command_secs` must be at least 1"),
        "{problems}"
    );
    assert!(!problems.contains("max_diff_lines"), "{problems}");
}

#[test]
fn a_child_policy_never_gets_more_than_its_parent() {
    let parent = WorkspacePolicy {
        isolation: Isolation::Worktree,
        writes: vec!["src".into()],
        commands: vec!["cargo".into(), "ls".into()],
        network: false,
        max_changed_files: 10,
        max_diff_lines: 100,
        max_command_secs: 30,
        sandbox: SandboxMode::Os,
        ..WorkspacePolicy::default()
    };
    let child = WorkspacePolicy {
        isolation: Isolation::Copy,
        writes: vec!["docs".into()],
        commands: vec!["cargo".into(), "rm".into()],
        network: true,
        checks: vec!["cargo check".into()],
        max_changed_files: 20,
        max_diff_lines: 50,
        max_command_secs: 300,
        sandbox: SandboxMode::None,
    };
    let n = child.narrowed_by(&parent);
    assert_eq!(n.commands, ["cargo"]);
    assert!(!n.network);
    assert_eq!(
        (n.max_changed_files, n.max_diff_lines, n.max_command_secs),
        (10, 50, 30)
    );
    assert_eq!(n.sandbox, SandboxMode::Os);
    assert_eq!(n.writes, ["docs"]);
    assert_eq!(n.checks, ["cargo check"]);
    assert_eq!(n.isolation, Isolation::Copy);
    let both = WorkspacePolicy {
        network: true,
        sandbox: SandboxMode::None,
        ..WorkspacePolicy::default()
    };
    assert!(both.narrowed_by(&both).network);
    assert_eq!(both.narrowed_by(&both).sandbox, SandboxMode::None);
}

#[test]
fn allows_write_matches_globs_and_directories_and_never_git() {
    let p = WorkspacePolicy {
        writes: vec![
            "src".into(),
            "*.md".into(),
            "tests/**/*.py".into(),
            "lib/*.rs".into(),
        ],
        ..WorkspacePolicy::default()
    };
    for ok in [
        "src/a.rs",
        "src/deep/er/x",
        "README.md",
        "docs/x.md",
        "tests/t.py",
        "tests/a/b/t.py",
        "lib/a.rs",
        "./src/a.rs",
    ] {
        assert!(p.allows_write(ok), "{ok}");
    }
    for no in [
        "srcx/a.rs",
        "lib/a/b.rs",
        "tests/t.rs",
        "Cargo.toml",
        "src/.git/x",
        "../src/a.rs",
        "/src/a.rs",
        "src/../../x",
        "",
    ] {
        assert!(!p.allows_write(no), "{no}");
    }
    let all = WorkspacePolicy::default();
    assert!(all.allows_write("any/thing"));
    assert!(!all.allows_write(".git/config"));
    assert!(!all.allows_write("a/.Git/config"));
}

// ---- leases ----

/// A process id that is no longer running (a child that has exited and been reaped).
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn cleanup_removes_dead_leases_and_their_worktrees_and_keeps_live_ones() {
    let parent = parent_repo();
    let p = parent.path();
    let copies = copies();
    let live = WorkingCopy::create(p, Isolation::Worktree, copies.path()).unwrap();
    // A lease left by a dead process: its directory, lease file and registered worktree.
    let pid = dead_pid();
    let dead = canon(copies.path()).join(format!("lease-{pid}-1-{:016x}", 7u64));
    fs::create_dir(&dead).unwrap();
    let tree = dead.join("tree");
    git(
        p,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            tree.to_str().unwrap(),
            "HEAD",
        ],
    );
    let common = canon(&p.join(".git"));
    fs::write(
        dead.join("lease.json"),
        serde_json::json!({
            "pid": pid, "start_time": 1, "source": p, "isolation": "worktree", "repo": common,
        })
        .to_string(),
    )
    .unwrap();
    // A lease whose pid is ours, but from another start: a reused pid is not the owner.
    let reused = canon(copies.path()).join(format!("lease-{}-1-{:016x}", std::process::id(), 8u64));
    fs::create_dir(&reused).unwrap();
    // Not a lease: left alone.
    let other = copies.path().join("not-a-lease");
    fs::create_dir(&other).unwrap();
    assert!(worktrees(p).contains(tree.to_str().unwrap()));

    assert_eq!(cleanup_stale(copies.path()).unwrap(), 2);
    assert!(!dead.exists());
    assert!(!reused.exists());
    assert!(other.exists());
    assert!(
        !worktrees(p).contains(tree.to_str().unwrap()),
        "{}",
        worktrees(p)
    );
    assert!(live.root().exists());
    assert!(worktrees(p).contains(live.root().to_str().unwrap()));
    assert_eq!(cleanup_stale(copies.path()).unwrap(), 0);
    drop(live);
    assert_eq!(
        worktrees(p).matches("worktree ").count(),
        1,
        "{}",
        worktrees(p)
    );
    // No copies directory: nothing to do.
    assert_eq!(cleanup_stale(&copies.path().join("missing")).unwrap(), 0);
}

#[cfg(unix)]
#[test]
fn cleanup_never_follows_a_link_out() {
    use std::os::unix::fs::symlink;
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "precious/keep.txt", "keep\n");
    let copies = copies();
    let c = canon(copies.path());
    let pid = dead_pid();
    let dead = c.join(format!("lease-{pid}-1-{:016x}", 1u64));
    fs::create_dir_all(dead.join("tree/sub")).unwrap();
    symlink(outside.path(), dead.join("tree/sub/out")).unwrap();
    symlink(outside.path().join("precious"), dead.join("tree/precious")).unwrap();
    symlink(
        outside.path().join("precious/keep.txt"),
        dead.join("lease.json"),
    )
    .unwrap();
    // A directory a command made unreadable is still removed.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::create_dir(dead.join("tree/locked")).unwrap();
        write(&dead, "tree/locked/f", "f");
        fs::set_permissions(dead.join("tree/locked"), fs::Permissions::from_mode(0o000)).unwrap();
    }
    // A lease name that is itself a link to the outside.
    let linked = c.join(format!("lease-{pid}-1-{:016x}", 2u64));
    symlink(outside.path(), &linked).unwrap();

    assert_eq!(cleanup_stale(copies.path()).unwrap(), 2);
    assert!(!dead.exists());
    assert!(fs::symlink_metadata(&linked).is_err());
    assert_eq!(
        fs::read_to_string(outside.path().join("precious/keep.txt")).unwrap(),
        "keep\n"
    );
}

#[cfg(unix)]
#[test]
fn a_copies_directory_that_is_a_link_is_refused() {
    use std::os::unix::fs::symlink;
    let src = tempfile::tempdir().unwrap();
    write(src.path(), "a", "a");
    let elsewhere = tempfile::tempdir().unwrap();
    let link = elsewhere.path().join("copies");
    symlink(elsewhere.path(), &link).unwrap();
    let err = WorkingCopy::create(src.path(), Isolation::Copy, &link).unwrap_err();
    assert!(matches!(err, ActError::CopiesDir { .. }), "{err:?}");
}

#[test]
fn keep_leaves_the_copy_and_discard_removes_it() {
    let src = tempfile::tempdir().unwrap();
    write(src.path(), "a", "a");
    let copies = copies();
    let kept = WorkingCopy::create(src.path(), Isolation::Copy, copies.path())
        .unwrap()
        .keep();
    assert!(kept.join("tree/a").exists());
    assert!(kept.join("lease.json").exists());
    // Ours, and we are alive: not stale.
    assert_eq!(cleanup_stale(copies.path()).unwrap(), 0);
    let copy = WorkingCopy::create(src.path(), Isolation::Copy, copies.path()).unwrap();
    let lease = copy.lease_dir().to_path_buf();
    copy.discard().unwrap();
    assert!(!lease.exists());
}

// ---- nesting ----

#[test]
fn a_worktree_copy_of_a_worktree_copy() {
    let parent = parent_repo();
    let p = parent.path();
    let before = (snapshot(p), repo_state(p));
    let copies = copies();
    let outer = WorkingCopy::create(p, Isolation::Worktree, copies.path()).unwrap();
    write(outer.root(), "b.txt", "bee\nouter\n");
    let inner = WorkingCopy::create(outer.root(), Isolation::Worktree, copies.path()).unwrap();
    // The inner copy starts from the outer one's state, overlay and edits included.
    assert_eq!(
        fs::read_to_string(inner.root().join("b.txt")).unwrap(),
        "bee\nouter\n"
    );
    assert_eq!(
        fs::read_to_string(inner.root().join("a.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );
    assert!(!inner.root().join("gone.txt").exists());
    write(inner.root(), "sub/c.txt", "sea\ninner\n");
    let inner_changes = inner.capture().unwrap();
    let paths: Vec<_> = inner_changes
        .files
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(paths, ["sub/c.txt"]);
    inner_changes.apply(outer.root()).unwrap();
    drop(inner);
    let outer_changes = outer.capture().unwrap();
    let paths: Vec<_> = outer_changes
        .files
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(paths, ["b.txt", "sub/c.txt"]);
    drop(outer);
    assert_eq!((snapshot(p), repo_state(p)), before);
    assert_eq!(
        worktrees(p).matches("worktree ").count(),
        1,
        "{}",
        worktrees(p)
    );
    outer_changes.apply(p).unwrap();
    assert_eq!(
        fs::read_to_string(p.join("sub/c.txt")).unwrap(),
        "sea\ninner\n"
    );
}

#[test]
fn git_runs_without_system_config_or_hooks() {
    // (The caller's GIT_* variables are cleared too; the test process's environment is
    // not changed here, as tests run in parallel.)
    let dir = tempfile::tempdir().unwrap();
    let out = git::Git::new(dir.path(), git::Config::Private)
        .args(["config", "--list", "--show-origin"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("core.hookspath=/dev/null"), "{text}");
    assert!(!text.contains("file:/etc/gitconfig"), "{text}");
}

#[test]
fn a_copy_of_a_copy_does_not_trust_the_copys_git_file() {
    let parent = parent_repo();
    let p = parent.path();
    let copies = copies();
    let outer = WorkingCopy::create(p, Isolation::Worktree, copies.path()).unwrap();
    write(outer.root(), "b.txt", "bee\nouter\n");
    // A command in the outer copy points its `.git` elsewhere: git must not follow it.
    fs::write(outer.root().join(".git"), "gitdir: /nonexistent/evil\n").unwrap();
    let inner = WorkingCopy::create(
        &outer.root().join("sub"),
        Isolation::Worktree,
        copies.path(),
    )
    .unwrap();
    assert!(inner.root().ends_with("tree/sub"));
    assert_eq!(
        fs::read_to_string(inner.root().join("../b.txt")).unwrap(),
        "bee\nouter\n"
    );
    write(inner.root(), "c.txt", "sea\ninner\n");
    let changes = inner.capture().unwrap();
    assert_eq!(changes.files.len(), 1);
    changes.apply(&outer.root().join("sub")).unwrap();
    drop(inner);
    // The outer copy's capture uses its private repository, not the rewritten `.git`.
    let outer_changes = outer.capture().unwrap();
    let paths: Vec<_> = outer_changes
        .files
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(paths, ["b.txt", "sub/c.txt"]);
    // Its removal still unregisters it, though `git worktree remove` refuses such a tree.
    drop(outer);
    assert_eq!(
        worktrees(p).matches("worktree ").count(),
        1,
        "{}",
        worktrees(p)
    );
    assert_eq!(fs::read_dir(copies.path()).unwrap().count(), 0);
}

#[cfg(unix)]
#[test]
fn links_that_lead_out_are_violations() {
    use std::os::unix::fs::symlink;
    let src = tempfile::tempdir().unwrap();
    write(src.path(), "a/x.txt", "x\n");
    let copies = copies();
    let copy = WorkingCopy::create(src.path(), Isolation::Copy, copies.path()).unwrap();
    let r = copy.root();
    symlink("x.txt", r.join("a/ok")).unwrap();
    symlink("../a/x.txt", r.join("a/ok2")).unwrap();
    symlink("../../etc/passwd", r.join("a/up")).unwrap();
    symlink("/etc/passwd", r.join("abs")).unwrap();
    let changes = copy.capture().unwrap();
    let targets: Vec<_> = changes
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.link_target.as_deref()))
        .collect();
    assert_eq!(
        targets,
        [
            ("a/ok", Some("x.txt")),
            ("a/ok2", Some("../a/x.txt")),
            ("a/up", Some("../../etc/passwd")),
            ("abs", Some("/etc/passwd")),
        ]
    );
    let v = changes.violations(&WorkspacePolicy::default());
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(
        v[0].contains("`a/up` is a symbolic link to `../../etc/passwd`"),
        "{v:?}"
    );
    assert!(v[1].contains("`abs` is a symbolic link"), "{v:?}");
}

#[test]
fn apply_refuses_links_out_and_writes_beyond_links() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let inner = ws.path().join("inner");
    fs::create_dir(&inner).unwrap();
    let link = |path: &str, target: &str| {
        Changes {
        id: "x".into(),
        base: "y".into(),
        files: Vec::new(),
        unlisted_files: 0,
        diff: format!(
            "diff --git a/{path} b/{path}\nnew file mode 120000\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n"
        ),
        diff_truncated: false,
    }
    };
    let out = outside.path().to_str().unwrap().to_owned();
    for (path, target) in [("l", out.as_str()), ("d/l", "../../x"), ("l", "..")] {
        let err = link(path, target).apply(&inner).unwrap_err();
        assert!(
            matches!(err, ApplyError::UnsafeLink { .. }),
            "{path} -> {target}: {err:?}"
        );
        assert!(fs::symlink_metadata(inner.join(path)).is_err());
    }
    link("d/l", "../x").apply(&inner).unwrap();
    assert_eq!(fs::read_link(inner.join("d/l")).unwrap(), Path::new("../x"));
    // A link inside, then a file written through it in the same patch: git refuses.
    let mut through = link("sub", "d");
    through.diff.push_str(
        "diff --git a/sub/f.txt b/sub/f.txt\nnew file mode 100644\n--- /dev/null\n+++ b/sub/f.txt\n@@ -0,0 +1 @@\n+x\n",
    );
    assert!(through.apply(&inner).is_err());
    assert!(!inner.join("d/f.txt").exists());
    assert!(fs::symlink_metadata(inner.join("sub")).is_err());
}

// ---- seeding a worktree's baseline ----

/// Whether the copy's baseline started from its worktree's index and the source's objects.
fn seeded(copy: &WorkingCopy) -> bool {
    copy.base_git().join("objects/info/alternates").is_file()
}

/// The files changed in `copy`, as (path, insertions, deletions).
fn changed_files(copy: &WorkingCopy) -> Vec<(String, usize, usize)> {
    let changes = copy.capture().unwrap();
    changes
        .files
        .iter()
        .map(|f| (f.path.clone(), f.insertions, f.deletions))
        .collect()
}

/// Loose objects and packs in a private repository: what it hashed itself.
fn own_objects(copy: &WorkingCopy) -> usize {
    walkdir::WalkDir::new(copy.base_git().join("objects"))
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && !e.path().ends_with("info/alternates"))
        .count()
}

#[test]
fn a_worktree_baseline_starts_from_the_checkout_and_hashes_only_the_overlay() {
    let parent = parent_repo();
    let p = parent.path();
    let copies = copies();
    let copy = WorkingCopy::create(p, Isolation::Worktree, copies.path()).unwrap();
    assert!(seeded(&copy));
    // The overlaid file (one blob, as a pack and its index) and the trees and commit made from
    // it; none of the checkout's blobs.
    assert!(own_objects(&copy) < 10, "{}", own_objects(&copy));
    assert_eq!(changed_files(&copy), Vec::<(String, usize, usize)>::new());
    write(copy.root(), "b.txt", "bee\nsting\n");
    write(copy.root(), "a.txt", "one\nTWO\nthree\nfour\n");
    assert_eq!(
        changed_files(&copy),
        [("a.txt".to_owned(), 1, 0), ("b.txt".to_owned(), 1, 0)]
    );
    let changes = copy.capture().unwrap();
    changes.apply(p).unwrap();
    assert_eq!(fs::read_to_string(p.join("b.txt")).unwrap(), "bee\nsting\n");
    // Removing the copy leaves the source's objects whole.
    drop(copy);
    git(p, &["fsck", "--no-dangling"]);
}

#[test]
fn a_file_changed_in_the_same_second_and_size_as_the_checkout_is_hashed_again() {
    let parent = tempfile::tempdir().unwrap();
    let p = parent.path();
    git(p, &["init", "-q"]);
    write(p, "a.txt", "one\n");
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "i"]);
    // Same size, so only the time (and the inode) tells the overlaid file from the checkout's.
    write(p, "a.txt", "two\n");
    let copies = copies();
    for _ in 0..3 {
        let copy = WorkingCopy::create(p, Isolation::Worktree, copies.path()).unwrap();
        assert!(seeded(&copy));
        assert_eq!(changed_files(&copy), Vec::<(String, usize, usize)>::new());
        write(copy.root(), "a.txt", "six\n");
        let changes = copy.capture().unwrap();
        assert!(changes.diff.contains("-two\n+six\n"), "{}", changes.diff);
    }
}

#[test]
fn checkout_to_crlf_hashes_every_file_and_shows_no_spurious_change() {
    for (attributes, autocrlf) in [("* text eol=crlf\n", false), ("", true)] {
        let parent = tempfile::tempdir().unwrap();
        let p = parent.path();
        git(p, &["init", "-q"]);
        if autocrlf {
            git(p, &["config", "core.autocrlf", "true"]);
        } else {
            write(p, ".gitattributes", attributes);
        }
        write(p, "w.txt", "a\nb\nc\n");
        write(p, "x.txt", "x\n");
        git(p, &["add", "-A"]);
        git(p, &["commit", "-q", "-m", "i"]);
        // The checkout's files are CRLF: the blobs are not their bytes.
        fs::remove_file(p.join("w.txt")).unwrap();
        git(p, &["checkout", "--", "w.txt"]);
        assert_eq!(fs::read(p.join("w.txt")).unwrap(), b"a\r\nb\r\nc\r\n");
        let copies = copies();
        let copy = WorkingCopy::create(p, Isolation::Worktree, copies.path()).unwrap();
        assert!(!seeded(&copy), "autocrlf {autocrlf}");
        assert_eq!(changed_files(&copy), Vec::<(String, usize, usize)>::new());
        write(copy.root(), "w.txt", "a\r\nB\r\nc\r\n");
        assert_eq!(changed_files(&copy), [("w.txt".to_owned(), 1, 1)]);
        copy.capture().unwrap().apply(p).unwrap();
        assert_eq!(fs::read(p.join("w.txt")).unwrap(), b"a\r\nB\r\nc\r\n");
    }
}

#[test]
fn a_filter_on_checkout_hashes_every_file_and_shows_no_spurious_change() {
    let parent = tempfile::tempdir().unwrap();
    let p = parent.path();
    git(p, &["init", "-q"]);
    git(p, &["config", "filter.upper.smudge", "tr a-z A-Z"]);
    git(p, &["config", "filter.upper.clean", "tr A-Z a-z"]);
    write(p, ".gitattributes", "*.up filter=upper\n");
    write(p, "f.up", "quiet\nwords\n");
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "i"]);
    let copies = copies();
    let copy = WorkingCopy::create(p, Isolation::Worktree, copies.path()).unwrap();
    assert_eq!(
        fs::read(copy.root().join("f.up")).unwrap(),
        b"QUIET\nWORDS\n"
    );
    assert!(!seeded(&copy));
    assert_eq!(changed_files(&copy), Vec::<(String, usize, usize)>::new());
    write(copy.root(), "f.up", "QUIET\nWORDS\nMORE\n");
    assert_eq!(changed_files(&copy), [("f.up".to_owned(), 1, 0)]);
    // Attributes that convert nothing on checkout leave seeding on.
    write(p, ".gitattributes", "*.png binary\n* text=auto eol=lf\n");
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "plain"]);
    let plain = WorkingCopy::create(p, Isolation::Worktree, copies.path()).unwrap();
    assert!(seeded(&plain));
}

#[test]
fn a_seeded_copy_of_a_seeded_copy_and_of_a_subdirectory() {
    let parent = parent_repo();
    let p = parent.path();
    let copies = copies();
    let outer = WorkingCopy::create(p, Isolation::Worktree, copies.path()).unwrap();
    write(outer.root(), "sub/c.txt", "sea\nouter\n");
    write(outer.root(), "outer-only.txt", "o\n");
    let inner = WorkingCopy::create(outer.root(), Isolation::Worktree, copies.path()).unwrap();
    assert!(seeded(&outer) && seeded(&inner));
    // The outer copy's uncommitted work is the inner copy's baseline, not its change.
    assert_eq!(changed_files(&inner), Vec::<(String, usize, usize)>::new());
    write(inner.root(), "sub/c.txt", "sea\nouter\ninner\n");
    assert_eq!(changed_files(&inner), [("sub/c.txt".to_owned(), 1, 0)]);
    let sub = WorkingCopy::create(
        &inner.root().join("sub"),
        Isolation::Worktree,
        copies.path(),
    )
    .unwrap();
    assert!(seeded(&sub));
    assert_eq!(
        fs::read_to_string(sub.root().join("c.txt")).unwrap(),
        "sea\nouter\ninner\n"
    );
    assert_eq!(changed_files(&sub), Vec::<(String, usize, usize)>::new());
    write(sub.root(), "c.txt", "sea\n");
    // Outside the root: not the copy's.
    write(&sub.root().join(".."), "a.txt", "elsewhere\n");
    assert_eq!(changed_files(&sub), [("c.txt".to_owned(), 0, 2)]);
    sub.capture()
        .unwrap()
        .apply(&inner.root().join("sub"))
        .unwrap();
    inner.capture().unwrap().apply(outer.root()).unwrap();
    assert_eq!(
        fs::read_to_string(outer.root().join("sub/c.txt")).unwrap(),
        "sea\n"
    );
    drop((sub, inner, outer));
    git(p, &["fsck", "--no-dangling"]);
    assert_eq!(worktrees(p).matches("worktree ").count(), 1);
}

#[test]
fn an_index_that_is_not_plain_is_not_a_seed() {
    let parent = parent_repo();
    let index = fs::read(parent.path().join(".git/index")).unwrap();
    assert!(copy::plain_index_paths(&index).is_some());
    // Every cut, and every byte changed in the header, parses without panicking.
    for n in 0..index.len().min(400) {
        let _ = copy::plain_index_paths(&index[..n]);
        let mut bad = index.clone();
        bad[n] ^= 0xff;
        let _ = copy::plain_index_paths(&bad);
    }
    // A submodule (gitlink) is not seeded.
    let p = parent.path();
    git(
        p,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            "160000,1111111111111111111111111111111111111111,module",
        ],
    );
    let with_link = fs::read(p.join(".git/index")).unwrap();
    assert!(copy::plain_index_paths(&with_link).is_none());
}
