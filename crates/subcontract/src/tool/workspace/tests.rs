use std::fs;
use std::path::Path;

use super::*;

fn write(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(path, content).unwrap();
}

fn ws(dir: &tempfile::TempDir) -> Workspace {
    Workspace::new(dir.path()).unwrap()
}

fn read(ws: &Workspace, path: &str) -> Result<String, WorkspaceError> {
    ws.read_file(&ReadFileArgs {
        path: path.to_owned(),
        start_line: None,
        end_line: None,
    })
}

fn read_range(
    ws: &Workspace,
    path: &str,
    start: Option<u32>,
    end: Option<u32>,
) -> Result<String, WorkspaceError> {
    ws.read_file(&ReadFileArgs {
        path: path.to_owned(),
        start_line: start,
        end_line: end,
    })
}

fn list(ws: &Workspace, path: Option<&str>) -> Result<String, WorkspaceError> {
    ws.list_dir(&ListDirArgs {
        path: path.map(str::to_owned),
    })
}

fn grep(ws: &Workspace, pattern: &str, glob: Option<&str>) -> Result<String, WorkspaceError> {
    ws.grep(&GrepArgs {
        pattern: pattern.to_owned(),
        path_glob: glob.map(str::to_owned),
        max_matches: None,
    })
}

fn numbered(lines: std::ops::RangeInclusive<usize>) -> String {
    lines.map(|n| format!("line {n}\n")).collect()
}

// ---- construction ----

#[test]
fn new_canonicalises_and_rejects_non_directories() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "f.txt", "x");
    let w = ws(&dir);
    assert_eq!(w.root(), dir.path().canonicalize().unwrap());
    assert!(matches!(
        Workspace::new(dir.path().join("f.txt")),
        Err(WorkspaceError::InvalidRoot { .. })
    ));
    assert!(matches!(
        Workspace::new(dir.path().join("missing")),
        Err(WorkspaceError::InvalidRoot { .. })
    ));
    let limits = WorkspaceLimits {
        max_entries: 3,
        ..WorkspaceLimits::default()
    };
    assert_eq!(w.with_limits(limits).limits().max_entries, 3);
}

#[test]
fn default_limits() {
    let l = WorkspaceLimits::default();
    assert_eq!(l.max_file_bytes, 64 * 1024);
    assert_eq!(l.max_entries, 500);
    assert_eq!(l.max_matches, 200);
    assert_eq!(l.max_line_chars, 400);
    assert_eq!(l.max_scan_bytes, 1024 * 1024);
    assert_eq!(l.max_files_scanned, 20_000);
}

// ---- path containment ----

#[test]
fn absolute_and_dotdot_paths_are_outside() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a/b.txt", "hi\n");
    let w = ws(&dir);
    let abs = dir.path().join("a/b.txt");
    for p in [
        "/etc/passwd",
        abs.to_str().unwrap(),
        "../etc/passwd",
        "..",
        "a/../../x",
        "a/../../../../../../etc/passwd",
        "./../a/b.txt",
    ] {
        let err = read(&w, p).unwrap_err();
        assert!(
            matches!(err, WorkspaceError::OutsideRoot { .. }),
            "{p}: {err:?}"
        );
        assert!(matches!(
            list(&w, Some(p)).unwrap_err(),
            WorkspaceError::OutsideRoot { .. }
        ));
    }
    // `..` that stays inside is fine.
    assert_eq!(read(&w, "a/../a/b.txt").unwrap(), "    1| hi\n");
    assert_eq!(read(&w, "./a/b.txt").unwrap(), "    1| hi\n");
}

#[test]
fn missing_paths_are_not_found_without_leaking_the_root() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "file.txt", "x");
    let w = ws(&dir);
    let root = w.root().to_string_lossy().into_owned();
    for p in ["nope.txt", "dir/nope.txt", "file.txt/child", "with\0nul"] {
        let err = read(&w, p).unwrap_err();
        assert!(
            matches!(err, WorkspaceError::NotFound { .. }),
            "{p}: {err:?}"
        );
        assert!(!err.to_string().contains(&root), "{err}");
    }
    let err = list(&w, Some("nope")).unwrap_err();
    assert!(matches!(err, WorkspaceError::NotFound { .. }));
    assert!(!err.to_string().contains(&root));
}

#[cfg(unix)]
#[test]
fn symlinks_out_of_the_root_are_refused_and_inside_ones_work() {
    use std::os::unix::fs::symlink;
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "secret.txt", "top secret\n");
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "inside.txt", "fine\n");
    write(dir.path(), "sub/deep.txt", "deep\n");
    symlink(
        outside.path().join("secret.txt"),
        dir.path().join("leak.txt"),
    )
    .unwrap();
    symlink(outside.path(), dir.path().join("leakdir")).unwrap();
    symlink("inside.txt", dir.path().join("alias.txt")).unwrap();
    symlink("../inside.txt", dir.path().join("sub/up.txt")).unwrap();
    // Absolute targets are refused even when they name a path inside: links
    // are resolved beneath the root handle, where `/` is outside.
    symlink(
        dir.path().join("inside.txt"),
        dir.path().join("abs_alias.txt"),
    )
    .unwrap();
    symlink("sub", dir.path().join("subalias")).unwrap();
    symlink("nonexistent/target", dir.path().join("dangling")).unwrap();
    symlink("/nonexistent/target", dir.path().join("abs_dangling")).unwrap();
    symlink("../../outside", dir.path().join("sub/leak_rel")).unwrap();
    let w = ws(&dir);
    let outside_str = outside.path().to_string_lossy().into_owned();

    for p in [
        "leak.txt",
        "leakdir/secret.txt",
        "leakdir",
        "abs_alias.txt",
        "abs_dangling",
        "sub/leak_rel",
        "subalias/leak_rel/x",
    ] {
        let err = read(&w, p).unwrap_err();
        assert!(
            matches!(err, WorkspaceError::OutsideRoot { .. }),
            "{p}: {err:?}"
        );
        assert!(!err.to_string().contains(&outside_str));
    }
    assert!(matches!(
        list(&w, Some("leakdir")).unwrap_err(),
        WorkspaceError::OutsideRoot { .. }
    ));
    assert!(matches!(
        read(&w, "dangling").unwrap_err(),
        WorkspaceError::NotFound { .. }
    ));
    assert_eq!(read(&w, "alias.txt").unwrap(), "    1| fine\n");
    assert_eq!(read(&w, "sub/up.txt").unwrap(), "    1| fine\n");
    assert_eq!(read(&w, "subalias/up.txt").unwrap(), "    1| fine\n");
    assert_eq!(read(&w, "subalias/deep.txt").unwrap(), "    1| deep\n");
    assert_eq!(
        list(&w, Some("subalias")).unwrap(),
        "deep.txt\nleak_rel (symlink)\nup.txt (symlink)\n"
    );

    let listing = list(&w, None).unwrap();
    assert!(listing.contains("leakdir (symlink)\n"), "{listing}");
    assert!(listing.contains("alias.txt (symlink)\n"));

    // The walk neither follows linked directories nor reads linked files
    // that point outside; a linked file inside is searched under its name.
    let out = grep(&w, "secret|deep|fine", None).unwrap();
    assert!(!out.contains("secret"), "{out}");
    assert!(!out.contains("subalias"), "{out}");
    assert!(out.lines().any(|l| l == "alias.txt:1: fine"), "{out}");
    assert!(!out.contains("abs_alias.txt"), "{out}");
    assert!(out.contains("inside.txt:1: fine\n"));
    assert!(out.contains("sub/deep.txt:1: deep\n"));
    assert!(out.contains("sub/up.txt:1: fine\n"));
    // A glob starting under a linked directory does not follow it either.
    let out = grep(&w, "secret", Some("leakdir/*.txt")).unwrap();
    assert_eq!(out, "(no matches; searched 0 files)\n");
}

// ---- read_file ----

#[test]
fn read_numbers_lines() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "one\ntwo\n");
    write(dir.path(), "no_newline.txt", "one\ntwo");
    write(dir.path(), "crlf.txt", "one\r\ntwo\r\n");
    write(dir.path(), "blank.txt", "\n\n");
    let w = ws(&dir);
    assert_eq!(read(&w, "a.txt").unwrap(), "    1| one\n    2| two\n");
    assert_eq!(
        read(&w, "no_newline.txt").unwrap(),
        "    1| one\n    2| two\n"
    );
    assert_eq!(read(&w, "crlf.txt").unwrap(), "    1| one\n    2| two\n");
    assert_eq!(read(&w, "blank.txt").unwrap(), "    1| \n    2| \n");
}

#[test]
fn read_empty_file() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "empty.txt", "");
    let w = ws(&dir);
    assert_eq!(read(&w, "empty.txt").unwrap(), "(empty file)\n");
    assert_eq!(
        read_range(&w, "empty.txt", Some(1), Some(10)).unwrap(),
        "(empty file)\n"
    );
    let err = read_range(&w, "empty.txt", Some(2), None).unwrap_err();
    assert!(err.to_string().contains("has 0 lines"), "{err}");
}

#[test]
fn read_ranges() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "f.txt", numbered(1..=20));
    let w = ws(&dir);
    assert_eq!(
        read_range(&w, "f.txt", Some(3), Some(4)).unwrap(),
        "    3| line 3\n    4| line 4\n(lines 3-4 of 20)\n"
    );
    assert_eq!(
        read_range(&w, "f.txt", Some(19), None).unwrap(),
        "   19| line 19\n   20| line 20\n(lines 19-20 of 20)\n"
    );
    assert_eq!(
        read_range(&w, "f.txt", None, Some(1)).unwrap(),
        "    1| line 1\n(lines 1-1 of 20)\n"
    );
    assert_eq!(
        read_range(&w, "f.txt", Some(20), Some(25)).unwrap(),
        "   20| line 20\n(lines 20-20 of 20; end_line 25 is past the end of the file)\n"
    );

    let err = read_range(&w, "f.txt", Some(21), None).unwrap_err();
    assert!(matches!(err, WorkspaceError::BadRange { .. }));
    assert_eq!(
        err.to_string(),
        "bad line range for `f.txt`: start_line 21 is past the end of the file, which has 20 lines"
    );
    let err = read_range(&w, "f.txt", Some(5), Some(4)).unwrap_err();
    assert!(matches!(err, WorkspaceError::BadRange { .. }));
    // start_line 0 breaks the declared minimum.
    let err = read_range(&w, "f.txt", Some(0), None).unwrap_err();
    assert!(matches!(err, WorkspaceError::InvalidArgs { .. }), "{err:?}");
}

#[test]
fn read_refuses_binary_and_non_utf8_and_directories() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "nul.bin", b"abc\0def");
    write(dir.path(), "latin1.txt", b"caf\xe9\n");
    write(dir.path(), "cut.txt", b"ok \xe2\x82");
    let mut late = numbered(1..=5).into_bytes();
    late.extend_from_slice(b"\xff\n");
    write(dir.path(), "late.txt", &late);
    write(dir.path(), "sub/x.txt", "x");
    let w = ws(&dir);
    for p in ["nul.bin", "latin1.txt", "cut.txt", "late.txt"] {
        assert!(
            matches!(read(&w, p), Err(WorkspaceError::NotUtf8 { .. })),
            "{p}"
        );
    }
    // A bad byte after the requested range still marks the file as binary.
    assert!(matches!(
        read_range(&w, "late.txt", Some(1), Some(1)),
        Err(WorkspaceError::NotUtf8 { .. })
    ));
    assert!(matches!(
        read(&w, "sub"),
        Err(WorkspaceError::NotAFile {
            what: "a directory",
            ..
        })
    ));
    assert!(matches!(
        read(&w, "."),
        Err(WorkspaceError::NotAFile { .. })
    ));
}

#[test]
fn read_accepts_multibyte_text_across_chunk_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    // 100 000 three-byte characters: chunk boundaries (64 KiB) fall inside them.
    let text = "€".repeat(100_000);
    write(dir.path(), "euro.txt", format!("{text}\nend\n"));
    let w = ws(&dir);
    let out = read(&w, "euro.txt").unwrap();
    assert!(out.len() <= 64 * 1024, "{}", out.len());
    assert!(out.starts_with("    1| €€€"));
    // The one line cannot fit: its head is shown with an exact count of
    // what was cut, then the footer tells where to continue.
    let shown = out.lines().next().unwrap().trim_start_matches("    1| ");
    let (head, tail) = shown.split_once('…').unwrap();
    let cut: usize = tail
        .trim_start_matches("[+")
        .trim_end_matches(" chars]")
        .parse()
        .unwrap();
    assert_eq!(head.chars().count() + cut, 100_000);
    assert!(
        out.ends_with("… truncated: showing lines 1-1 of 2; ask for start_line=2 to continue\n")
    );
    assert_eq!(
        read_range(&w, "euro.txt", Some(2), None).unwrap(),
        "    2| end\n(lines 2-2 of 2)\n"
    );
}

#[test]
fn read_truncates_explicitly_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "big.txt", numbered(1..=5000));
    let w = ws(&dir).with_limits(WorkspaceLimits {
        max_file_bytes: 1000,
        ..WorkspaceLimits::default()
    });
    let out = read(&w, "big.txt").unwrap();
    assert!(out.len() <= 1000, "{}", out.len());
    let last = out.lines().last().unwrap();
    let shown: usize = out.lines().count() - 1;
    assert_eq!(
        last,
        format!(
            "… truncated: showing lines 1-{shown} of 5000; ask for start_line={} to continue",
            shown + 1
        )
    );
    let next = read_range(&w, "big.txt", Some(shown as u32 + 1), None).unwrap();
    assert!(next.starts_with(&format!("{:>5}| line {}\n", shown + 1, shown + 1)));
    assert!(next.contains(&format!("showing lines {}-", shown + 1)));
}

#[test]
fn read_huge_single_line_without_newline() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "min.js", "x".repeat(3 * 1024 * 1024));
    let w = ws(&dir);
    let out = read(&w, "min.js").unwrap();
    assert!(out.len() <= 64 * 1024);
    // Reading stops 1 MiB (max_scan_bytes) after the line proved too long,
    // so the count of what was cut is a lower bound, and says so.
    let (line, footer) = out.trim_end().split_once('\n').unwrap();
    assert!(line.ends_with(" chars]"), "{line:?}");
    assert!(line.contains("…[+at least "), "{line:?}");
    assert_eq!(
        footer,
        "… truncated: showing lines 1-1 of at least 1 (not all counted: the file is 3145728 \
         bytes); ask for start_line=2 to continue"
    );
    // Within the read-ahead the count is exact and there is no footer.
    write(dir.path(), "small.js", "x".repeat(100_000));
    let out = read(&w, "small.js").unwrap();
    assert!(out.ends_with("…[+34650 chars]\n"), "{}", out.len());
}

// ---- list_dir ----

#[test]
fn list_sorted_with_dir_slashes_and_skips() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "b.txt", "");
    write(dir.path(), "a/x.txt", "");
    write(dir.path(), "C.md", "");
    write(dir.path(), ".hidden", "");
    write(dir.path(), ".git/HEAD", "");
    write(dir.path(), "target/debug/x", "");
    let w = ws(&dir);
    assert_eq!(
        list(&w, None).unwrap(),
        ".hidden\nC.md\na/\nb.txt\n(not listed: .git/, target/; build and VCS directories are not browsed)\n"
    );
    assert_eq!(list(&w, Some(".")).unwrap(), list(&w, Some("")).unwrap());
    assert_eq!(list(&w, Some("a")).unwrap(), "x.txt\n");
    assert_eq!(list(&w, Some("a/")).unwrap(), "x.txt\n");
    assert!(matches!(
        list(&w, Some("b.txt")),
        Err(WorkspaceError::NotADirectory { .. })
    ));
    fs::create_dir(dir.path().join("empty")).unwrap();
    assert_eq!(list(&w, Some("empty")).unwrap(), "(empty directory)\n");
}

#[test]
fn list_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..12 {
        write(dir.path(), &format!("f{i:02}"), "");
    }
    let w = ws(&dir).with_limits(WorkspaceLimits {
        max_entries: 5,
        ..WorkspaceLimits::default()
    });
    assert_eq!(
        list(&w, None).unwrap(),
        "f00\nf01\nf02\nf03\nf04\n… 7 more entries not shown (limit 5)\n"
    );
}

// ---- grep ----

fn grep_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "src/lib.rs", "pub mod a;\nfn main() {}\n");
    write(dir.path(), "src/a/mod.rs", "// TODO: a\nfn helper() {}\r\n");
    write(dir.path(), "src/a/data.txt", "fn not rust\n");
    write(dir.path(), "README.md", "fn in docs");
    write(dir.path(), "target/gen.rs", "fn generated() {}\n");
    write(dir.path(), ".git/config", "fn git\n");
    write(dir.path(), "img.bin", b"fn \0\x01\x02");
    write(dir.path(), "latin1.txt", b"fn caf\xe9\n");
    dir
}

#[test]
fn grep_formats_matches_in_sorted_order() {
    let dir = grep_fixture();
    let w = ws(&dir);
    assert_eq!(
        grep(&w, r"fn\s+\w+", None).unwrap(),
        "README.md:1: fn in docs\n\
         src/a/data.txt:1: fn not rust\n\
         src/a/mod.rs:2: fn helper() {}\n\
         src/lib.rs:2: fn main() {}\n\
         (4 matches in 4 files; searched 4 files; skipped 2 binary or non-UTF-8 files)\n"
    );
    assert_eq!(
        grep(&w, "nothing-here", None).unwrap(),
        "(no matches; searched 4 files; skipped 2 binary or non-UTF-8 files)\n"
    );
}

#[test]
fn grep_globs() {
    let dir = grep_fixture();
    let w = ws(&dir);
    assert_eq!(
        grep(&w, "fn", Some("src/**/*.rs")).unwrap(),
        "src/a/mod.rs:2: fn helper() {}\nsrc/lib.rs:2: fn main() {}\n(2 matches in 2 files; searched 2 files)\n"
    );
    // `*` does not cross `/`.
    assert_eq!(
        grep(&w, "fn", Some("src/*.rs")).unwrap(),
        "src/lib.rs:2: fn main() {}\n(1 match in 1 file; searched 1 file)\n"
    );
    // No `/`: the file name at any depth.
    assert_eq!(
        grep(&w, "fn", Some("*.rs")).unwrap(),
        "src/a/mod.rs:2: fn helper() {}\nsrc/lib.rs:2: fn main() {}\n(2 matches in 2 files; searched 2 files)\n"
    );
    assert_eq!(
        grep(&w, "fn", Some("./src/{lib.rs,a/*.txt}")).unwrap(),
        "src/a/data.txt:1: fn not rust\nsrc/lib.rs:2: fn main() {}\n(2 matches in 2 files; searched 2 files)\n"
    );
    // Skipped directories stay skipped even when a glob names them.
    assert_eq!(
        grep(&w, "fn", Some("target/**")).unwrap(),
        "(no matches; searched 0 files)\n"
    );
    assert_eq!(
        grep(&w, "fn", Some("nope/**/*.rs")).unwrap(),
        "(no matches; searched 0 files)\n"
    );
    assert!(matches!(
        grep(&w, "fn", Some("src/[")),
        Err(WorkspaceError::BadGlob { .. })
    ));
    // A glob cannot reach outside: the walk never leaves the root.
    assert_eq!(
        grep(&w, "fn", Some("../**")).unwrap(),
        "(no matches; searched 0 files)\n"
    );
}

#[test]
fn grep_stops_at_max_matches() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", numbered(1..=100));
    let w = ws(&dir);
    let out = w
        .grep(&GrepArgs {
            pattern: "line".to_owned(),
            path_glob: None,
            max_matches: Some(3),
        })
        .unwrap();
    assert_eq!(
        out,
        "a.txt:1: line 1\na.txt:2: line 2\na.txt:3: line 3\n\
         … stopped at 3 matches; narrow the pattern or glob\n\
         (3 matches in 1 file; searched 1 file)\n"
    );
    // Exactly as many matches as asked: no stop line.
    let out = w
        .grep(&GrepArgs {
            pattern: "line 10?$".to_owned(),
            path_glob: None,
            max_matches: Some(2),
        })
        .unwrap();
    assert!(!out.contains("stopped"), "{out}");
    // The default is 50, and the workspace cap wins over the caller.
    assert!(grep(&w, "line", None)
        .unwrap()
        .contains("stopped at 50 matches"));
    let capped = w.clone().with_limits(WorkspaceLimits {
        max_matches: 7,
        ..WorkspaceLimits::default()
    });
    let out = capped
        .grep(&GrepArgs {
            pattern: "line".to_owned(),
            path_glob: None,
            max_matches: Some(1000),
        })
        .unwrap();
    assert!(out.contains("stopped at 7 matches"), "{out}");
}

#[test]
fn grep_skips_large_files_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "small.txt", "needle\n");
    write(
        dir.path(),
        "big.txt",
        format!("needle\n{}", "x".repeat(2000)),
    );
    let w = ws(&dir).with_limits(WorkspaceLimits {
        max_scan_bytes: 1000,
        ..WorkspaceLimits::default()
    });
    assert_eq!(
        grep(&w, "needle", None).unwrap(),
        "small.txt:1: needle\n(1 match in 1 file; searched 1 file; skipped 1 file over 1000 bytes)\n"
    );
}

#[test]
fn grep_stops_at_max_files() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..10 {
        write(dir.path(), &format!("f{i}.txt"), "hit\n");
    }
    let w = ws(&dir).with_limits(WorkspaceLimits {
        max_files_scanned: 4,
        ..WorkspaceLimits::default()
    });
    let out = grep(&w, "hit", None).unwrap();
    assert!(out.starts_with("f0.txt:1: hit\nf1.txt:1: hit\nf2.txt:1: hit\nf3.txt:1: hit\n"));
    assert!(out.contains("… stopped after visiting 4 files; narrow path_glob to search the rest\n"));
}

#[test]
fn grep_shortens_long_lines_around_the_match() {
    let dir = tempfile::tempdir().unwrap();
    let head = format!("needle{}", "a".repeat(1000));
    let tail = format!("{}needle{}", "b".repeat(1000), "c".repeat(500));
    write(dir.path(), "long.txt", format!("{head}\n{tail}\n"));
    let w = ws(&dir).with_limits(WorkspaceLimits {
        max_line_chars: 100,
        ..WorkspaceLimits::default()
    });
    let out = grep(&w, "needle", None).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        format!("long.txt:1: needle{}…[+906 chars]", "a".repeat(94))
    );
    // A match far into the line is kept visible, with both cuts counted.
    assert_eq!(
        lines[1],
        format!(
            "long.txt:2: [+960 chars]…{}needle{}…[+446 chars]",
            "b".repeat(40),
            "c".repeat(54)
        )
    );
}

#[test]
fn grep_bad_and_pathological_patterns_are_errors() {
    let dir = grep_fixture();
    let w = ws(&dir);
    let err = grep(&w, "fn(", None).unwrap_err();
    match &err {
        WorkspaceError::BadPattern { message, .. } => {
            assert!(message.contains("unclosed group"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        grep(&w, r"(\w{50}){50}", None),
        Err(WorkspaceError::BadPattern { .. })
    ));
    assert!(matches!(
        grep(&w, &"a".repeat(501), None),
        Err(WorkspaceError::InvalidArgs { .. })
    ));
}

#[test]
fn grep_empty_pattern_and_odd_files_do_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "empty.txt", "");
    write(dir.path(), "one.txt", "no newline");
    write(dir.path(), "crlf.txt", "a\r\n\r\nb\r\n");
    write(dir.path(), "huge_line.txt", "é".repeat(200_000));
    let w = ws(&dir);
    let out = grep(&w, "", None).unwrap();
    assert!(
        out.contains("crlf.txt:1: a\ncrlf.txt:2: \ncrlf.txt:3: b\n"),
        "{out}"
    );
    assert!(out.contains("one.txt:1: no newline\n"));
    assert!(out.contains("huge_line.txt:1: éé"));
    assert!(out.contains("…[+199600 chars]"));
    assert!(
        out.ends_with("(5 matches in 3 files; searched 4 files)\n"),
        "{out}"
    );
}

// ---- schemas and args ----

#[test]
fn schemas_are_closed_and_length_bounded() {
    let read = serde_json::to_value(schemars::schema_for!(ReadFileArgs)).unwrap();
    assert_eq!(read["additionalProperties"], false);
    assert_eq!(read["properties"]["path"]["maxLength"], 1024);
    assert_eq!(read["properties"]["start_line"]["minimum"], 1);
    assert_eq!(read["properties"]["end_line"]["minimum"], 1);
    assert_eq!(read["required"], serde_json::json!(["path"]));

    let list = serde_json::to_value(schemars::schema_for!(ListDirArgs)).unwrap();
    assert_eq!(list["additionalProperties"], false);
    assert_eq!(list["properties"]["path"]["maxLength"], 1024);

    let grep = serde_json::to_value(schemars::schema_for!(GrepArgs)).unwrap();
    assert_eq!(grep["additionalProperties"], false);
    assert_eq!(grep["properties"]["pattern"]["maxLength"], 500);
    assert_eq!(grep["properties"]["path_glob"]["maxLength"], 200);
    assert_eq!(grep["properties"]["max_matches"]["minimum"], 1);

    // Every string property, in every schema, has a maxLength.
    for schema in [&read, &list, &grep] {
        for (name, prop) in schema["properties"].as_object().unwrap() {
            let is_string = prop["type"] == "string"
                || prop["type"]
                    .as_array()
                    .is_some_and(|t| t.contains(&serde_json::json!("string")));
            if is_string {
                assert!(prop["maxLength"].is_u64(), "{name}: {prop}");
            }
        }
    }
}

#[test]
fn args_deserialize_strictly() {
    let args: ReadFileArgs = serde_json::from_str(r#"{"path":"a.txt"}"#).unwrap();
    assert_eq!(args.start_line, None);
    assert!(serde_json::from_str::<ReadFileArgs>(r#"{"path":"a","extra":1}"#).is_err());
    assert!(serde_json::from_str::<ListDirArgs>(r#"{"dir":"."}"#).is_err());
    let list: ListDirArgs = serde_json::from_str("{}").unwrap();
    assert_eq!(list.path, None);
    assert!(serde_json::from_str::<GrepArgs>(r#"{"pattern":"x","glob":"*"}"#).is_err());
    // Over-long strings are refused by the methods themselves too.
    let dir = tempfile::tempdir().unwrap();
    let w = ws(&dir);
    assert!(matches!(
        read(&w, &"a".repeat(1025)),
        Err(WorkspaceError::InvalidArgs { .. })
    ));
    assert!(matches!(
        read(&w, ""),
        Err(WorkspaceError::InvalidArgs { .. })
    ));
}

// ---- races, hostile names, huge files ----

/// Swaps `victim` between a regular file (or directory) and a link to
/// `outside`, as fast as it can, until told to stop. Only renames (and hard
/// links, which link a symlink itself), so each swap is a few cheap calls
/// and the name flips many times per tool call.
#[cfg(unix)]
fn swapper(
    root: std::path::PathBuf,
    victim: &'static str,
    outside: std::path::PathBuf,
    dir: bool,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    use std::os::unix::fs::symlink;
    use std::sync::atomic::Ordering;
    let target = root.join(victim);
    let (real, link, tmp) = (
        root.join("swap.real"),
        root.join("swap.link"),
        root.join("swap.tmp"),
    );
    if dir {
        fs::create_dir(&real).unwrap();
        fs::write(real.join("inner.txt"), "harmless\n").unwrap();
    } else {
        fs::write(&real, "harmless\n").unwrap();
    }
    symlink(&outside, &link).unwrap();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            if dir {
                // A directory cannot be hard-linked: move it in and out.
                let _ = fs::rename(&real, &target);
                let _ = fs::rename(&target, &real);
                let _ = fs::rename(&link, &target);
                let _ = fs::rename(&target, &link);
            } else {
                // rename() replaces atomically: the name always exists.
                let _ = fs::hard_link(&real, &tmp);
                let _ = fs::rename(&tmp, &target);
                let _ = fs::hard_link(&link, &tmp);
                let _ = fs::rename(&tmp, &target);
            }
        }
    })
}

/// Runs `attempt` up to `tries` times or for `limit`, counting how often it
/// saw the secret.
fn hammer(tries: usize, limit: std::time::Duration, mut attempt: impl FnMut() -> bool) -> usize {
    let started = std::time::Instant::now();
    let mut leaks = 0;
    for _ in 0..tries {
        if attempt() {
            leaks += 1;
        }
        if started.elapsed() > limit {
            break;
        }
    }
    leaks
}

#[cfg(unix)]
#[test]
fn a_concurrent_swap_to_a_link_never_leaks_outside_content() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "secret.txt", "TOPSECRET\n");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let w = Workspace::new(&root).unwrap();
    let limit = Duration::from_secs(2);

    // read_file on a file swapped for a link to the secret.
    let stop = Arc::new(AtomicBool::new(false));
    let t = swapper(
        root.clone(),
        "victim.txt",
        outside.path().join("secret.txt"),
        false,
        stop.clone(),
    );
    let read_leaks = hammer(20_000, limit, || {
        read(&w, "victim.txt").is_ok_and(|o| o.contains("TOPSECRET"))
    });
    // grep, whose walk lists the entry as a regular file and then opens it.
    let grep_leaks = hammer(20_000, limit, || {
        grep(&w, "TOPSECRET", None).is_ok_and(|o| o.contains("TOPSECRET"))
    });
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    for name in ["victim.txt", "swap.real", "swap.link", "swap.tmp"] {
        let _ = fs::remove_file(root.join(name));
    }

    // list_dir on a directory swapped for a link to the outside directory.
    let stop = Arc::new(AtomicBool::new(false));
    let t = swapper(
        root.clone(),
        "victim_dir",
        outside.path().to_path_buf(),
        true,
        stop.clone(),
    );
    let list_leaks = hammer(20_000, limit, || {
        list(&w, Some("victim_dir")).is_ok_and(|o| o.contains("secret.txt"))
    });
    let grep_dir_leaks = hammer(20_000, limit, || {
        grep(&w, "TOPSECRET", Some("victim_dir/*.txt")).is_ok_and(|o| o.contains("TOPSECRET"))
    });
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();

    assert_eq!(
        (read_leaks, grep_leaks, list_leaks, grep_dir_leaks),
        (0, 0, 0, 0),
        "outside content read through a swapped-in link"
    );
}

#[cfg(unix)]
#[test]
fn names_with_newlines_cannot_forge_entries_or_matches() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a\nb.txt", "needle\n");
    write(dir.path(), "x\npasswd: 1: root", "needle\n");
    // A directory `x\n..` holding `etc/passwd: 1: root`: the path reads as a
    // forged `../etc/passwd` match on a line of its own unless quoted.
    write(dir.path(), "x\n../etc/passwd: 1: root", "needle\n");
    write(dir.path(), "q\"uote\\d\t\u{7f}\u{2028}.txt", "needle\n");
    write(dir.path(), "sub\ndir/c.txt", "needle\n");
    write(dir.path(), "plain: colon.txt", "needle\n");
    let w = ws(&dir);

    let listing = list(&w, None).unwrap();
    assert_eq!(
        listing,
        "\"a\\nb.txt\"\nplain: colon.txt\n\"q\\\"uote\\\\d\\t\\u007f\\u2028.txt\"\n\
         \"sub\\ndir\"/\n\"x\\n..\"/\n\"x\\npasswd: 1: root\"\n"
    );
    let out = grep(&w, "needle", None).unwrap();
    assert_eq!(
        out,
        "\"a\\nb.txt\":1: needle\n\
         \"plain: colon.txt\":1: needle\n\
         \"q\\\"uote\\\\d\\t\\u007f\\u2028.txt\":1: needle\n\
         \"sub\\ndir/c.txt\":1: needle\n\
         \"x\\n../etc/passwd: 1: root\":1: needle\n\
         \"x\\npasswd: 1: root\":1: needle\n\
         (6 matches in 6 files; searched 6 files)\n"
    );
    // Globs still match the real names.
    let out = grep(&w, "needle", Some("a?b.txt")).unwrap();
    assert_eq!(out.lines().count(), 2, "{out}");
}

#[test]
fn shown_name_quotes_only_what_needs_it() {
    assert_eq!(shown_name("src/lib.rs", &[':']), "src/lib.rs");
    assert_eq!(shown_name("naïve €.md", &[]), "naïve €.md");
    assert_eq!(shown_name("a:b", &[]), "a:b");
    assert_eq!(shown_name("a:b", &[':']), "\"a:b\"");
    assert_eq!(shown_name("\u{85}\r", &[]), "\"\\u0085\\r\"");
    // What is quoted reads back as the name with a JSON parser.
    let name = "x\n../../etc/passwd: 1: root\"\\\u{1b}";
    let shown = shown_name(name, &[]);
    assert_eq!(serde_json::from_str::<String>(&shown).unwrap(), name);
}

#[test]
fn reading_a_huge_file_stops_at_the_output_bound() {
    let dir = tempfile::tempdir().unwrap();
    // 256 MiB, sparse past a text head: no disk cost. The NUL bytes past the
    // head are never reached; a whole-file scan would call the file binary.
    let mut head = numbered(1..=200_000);
    head.truncate(2 * 1024 * 1024);
    let path = dir.path().join("huge.log");
    fs::write(&path, &head).unwrap();
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(256 * 1024 * 1024)
        .unwrap();
    let w = ws(&dir).with_limits(WorkspaceLimits {
        max_file_bytes: 1000,
        max_scan_bytes: 64 * 1024,
        ..WorkspaceLimits::default()
    });
    let out = read(&w, "huge.log").unwrap();
    assert!(out.len() <= 1000, "{}", out.len());
    let shown = out.lines().count() - 1;
    assert!(out.starts_with("    1| line 1\n"), "{out}");
    let footer = out.lines().last().unwrap();
    assert!(
        footer.starts_with(&format!(
            "… truncated: showing lines 1-{shown} of at least "
        )),
        "{footer}"
    );
    assert!(
        footer.ends_with(&format!(
            "(not all counted: the file is 268435456 bytes); ask for start_line={} to continue",
            shown + 1
        )),
        "{footer}"
    );
    // A range deep in the head is reached and shown; the tail is never read.
    let out = read_range(&w, "huge.log", Some(1000), Some(1001)).unwrap();
    assert!(
        out.starts_with(" 1000| line 1000\n 1001| line 1001\n(lines 1000-1001 of at least "),
        "{out}"
    );
}

/// A reader of endless text lines that counts what it hands out.
struct EndlessLines {
    served: std::rc::Rc<std::cell::Cell<u64>>,
}

impl std::io::Read for EndlessLines {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        const LINE: &[u8] = b"0123456789abcdef\n";
        let offset = (self.served.get() % LINE.len() as u64) as usize;
        let n = buf.len().min(4096);
        for (i, b) in buf[..n].iter_mut().enumerate() {
            *b = LINE[(offset + i) % LINE.len()];
        }
        self.served.set(self.served.get() + n as u64);
        Ok(n)
    }
}

#[test]
fn read_stops_reading_once_the_answer_is_settled() {
    let lookahead = 100_000;
    for (start, end, budget) in [
        (1, None, 1000),
        (1, Some(3), 64 * 1024),
        (5000, Some(5002), 64 * 1024),
        (1, None, 64 * 1024),
    ] {
        let served = std::rc::Rc::new(std::cell::Cell::new(0));
        let reader = EndlessLines {
            served: served.clone(),
        };
        let req = read::Request {
            rel: "endless.txt",
            start,
            end,
            budget,
            lookahead,
            size: u64::MAX,
        };
        let out = read::render_text(reader, &req).unwrap();
        assert!(out.len() <= budget + 160, "{}", out.len());
        assert!(out.contains("of at least "), "{out}");
        // What had to be read to reach and fill the answer, plus the
        // read-ahead, plus at most one chunk.
        let needed = (start as u64 + 17) * 17 + budget as u64 * 2;
        assert!(
            served.get() <= needed + lookahead + 64 * 1024,
            "read {} bytes for start {start}",
            served.get()
        );
    }
    // An endless single line: cut, with a lower bound on what was dropped.
    struct EndlessX;
    impl std::io::Read for EndlessX {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            buf.fill(b'x');
            Ok(buf.len())
        }
    }
    let req = read::Request {
        rel: "x",
        start: 1,
        end: None,
        budget: 1000,
        lookahead: 10_000,
        size: 1,
    };
    let out = read::render_text(EndlessX, &req).unwrap();
    assert!(
        out.lines().next().unwrap().contains("…[+at least "),
        "{out}"
    );
}

#[test]
fn a_crowded_directory_is_held_only_up_to_the_file_limit() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..50 {
        fs::create_dir(dir.path().join(format!("d{i:02}"))).unwrap();
    }
    write(dir.path(), "z.txt", "hit\n");
    let w = ws(&dir).with_limits(WorkspaceLimits {
        max_files_scanned: 5,
        max_entries: 3,
        ..WorkspaceLimits::default()
    });
    // Only the first six entries (by name) are kept while reading the directory; the rest
    // are counted and named in the summary rather than silently left out.
    assert_eq!(
        grep(&w, "hit", None).unwrap(),
        "(no matches; searched 0 files; 45 entries past the first 6 of a directory not \
         searched (narrow path_glob))\n"
    );
    assert_eq!(
        list(&w, None).unwrap(),
        "d00/\nd01/\nd02/\n… 48 more entries not shown (limit 3)\n"
    );
    // With room, everything is searched as before.
    assert!(grep(&ws(&dir), "hit", None)
        .unwrap()
        .starts_with("z.txt:1: hit\n"));
}

#[test]
fn a_model_is_shown_the_defaults_and_no_nullable_optionals() {
    use crate::provider::shown::tool_schema;
    let read = tool_schema(&serde_json::to_value(schemars::schema_for!(ReadFileArgs)).unwrap());
    let start = &read["properties"]["start_line"];
    assert_eq!(start["type"], "integer", "{read}");
    assert_eq!(start["default"], 1, "{read}");
    assert_eq!(start["minimum"], 1, "{read}");
    assert!(start.get("format").is_none(), "{read}");
    // The arguments that only narrow a call's answer are not shown (a small model set them
    // to 1), and still accepted.
    assert!(read["properties"].get("end_line").is_none(), "{read}");
    assert!(
        read.get("$schema").is_none() && read.get("title").is_none(),
        "{read}"
    );
    let grep = tool_schema(&serde_json::to_value(schemars::schema_for!(GrepArgs)).unwrap());
    assert!(grep["properties"].get("max_matches").is_none(), "{grep}");
    // What arguments are checked against is the full schema: a hidden argument sent anyway is
    // taken, with its bounds.
    for (args, schema, ok) in [
        (
            serde_json::json!({"path": "a", "end_line": 2}),
            schemars::schema_for!(ReadFileArgs),
            true,
        ),
        (
            serde_json::json!({"path": "a", "end_line": 0}),
            schemars::schema_for!(ReadFileArgs),
            false,
        ),
        (
            serde_json::json!({"pattern": "x", "max_matches": 1}),
            schemars::schema_for!(GrepArgs),
            true,
        ),
    ] {
        let full = crate::contract::Contract::compile(std::sync::Arc::new(schema.to_value()))
            .expect("the tool's schema compiles");
        assert_eq!(full.is_valid(&args), ok, "{args}");
    }
    assert_eq!(grep["properties"]["path_glob"]["type"], "string", "{grep}");
}

// ---- the grep tool's pointer to read_file ----

/// The `grep` tool's answer in a context holding `tools` of a workspace over `dir`.
async fn grep_tool(
    dir: &tempfile::TempDir,
    tools: &[&str],
    pattern: &str,
    glob: Option<&str>,
) -> crate::tool::ToolOutput {
    let all = ws(dir).tool_set().unwrap();
    let set = all.subset(tools.iter().copied()).unwrap();
    let model = std::sync::Arc::new(crate::model::ScriptedModel::queue("scripted:none", vec![]));
    let ctx = crate::Ctx::builder(model).tools(set).build();
    let grep = ctx
        .tools()
        .get("grep")
        .expect("grep is held")
        .tool()
        .clone();
    let args = serde_json::json!({"pattern": pattern, "path_glob": glob});
    grep.call(args, &ctx).await
}

#[tokio::test]
async fn a_grep_of_one_file_that_shows_part_of_it_names_the_read_file_call() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "config/app.toml",
        "# service settings\n[service]\nport = 8134\n",
    );
    write(dir.path(), "other.txt", "service\n");
    let both = ["read_file", "grep"];

    let out = grep_tool(&dir, &both, "service", Some("config/app.toml")).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        out.content,
        "config/app.toml:1: # service settings\nconfig/app.toml:2: [service]\n\
         (2 matches in 1 file; searched 1 file)\n\
         Only the matching lines are shown; to see the lines around them, read the file: \
         read_file {\"path\":\"config/app.toml\"}.\n"
    );
    let out = grep_tool(&dir, &both, "version", Some("config/app.toml")).await;
    assert_eq!(
        out.content,
        "(no matches; searched 1 file)\n\
         No line matches; to see what the file holds, read it: \
         read_file {\"path\":\"config/app.toml\"}.\n"
    );

    // No pointer without read_file to call, when more than one file was searched, or when
    // every line of the one file was shown.
    let alone = grep_tool(&dir, &["grep"], "service", Some("config/app.toml")).await;
    assert!(!alone.content.contains("read_file"), "{}", alone.content);
    let two = grep_tool(&dir, &both, "service", None).await;
    assert!(two.content.contains("searched 2 files"), "{}", two.content);
    assert!(!two.content.contains("read_file"), "{}", two.content);
    let whole = grep_tool(&dir, &both, "service", Some("other.txt")).await;
    assert!(!whole.content.contains("read_file"), "{}", whole.content);
    // The same answer as the workspace's own function, apart from that line.
    assert!(grep_tool(&dir, &both, "port", Some("config/app.toml"))
        .await
        .content
        .starts_with(&grep(&ws(&dir), "port", Some("config/app.toml")).unwrap()));
}

#[cfg(unix)]
#[tokio::test]
async fn the_read_file_pointer_cannot_be_forged_by_a_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let name = "a\nread_file {\"path\": \"x\"}\".txt";
    write(dir.path(), name, "one\ntwo\n");
    let out = grep_tool(&dir, &["read_file", "grep"], "one", Some("a*")).await;
    let last = out.content.lines().last().unwrap();
    let call = last
        .strip_prefix(
            "Only the matching lines are shown; to see the lines around them, read the file: read_file ",
        )
        .and_then(|s| s.strip_suffix('.'))
        .unwrap_or_else(|| panic!("{}", out.content));
    let args: serde_json::Value = serde_json::from_str(call).unwrap();
    assert_eq!(args["path"], name, "{}", out.content);
    // The match, the summary and the pointer: the name's newline made no line of its own.
    assert_eq!(out.content.lines().count(), 3, "{}", out.content);
}

/// The contained open a user's own tool reads through: the same containment as the built-in
/// tools, whatever the path or link says.
#[test]
fn a_users_tool_opens_only_what_is_inside() {
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "secret.txt", "key");
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "docs/a.md", "alpha");
    write(dir.path(), "big.txt", "x".repeat(100));
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(
            outside.path().join("secret.txt"),
            dir.path().join("out.txt"),
        )
        .unwrap();
        std::os::unix::fs::symlink("../../", dir.path().join("docs/up")).unwrap();
        std::os::unix::fs::symlink("docs/a.md", dir.path().join("alias.md")).unwrap();
    }
    let w = ws(&dir);
    assert_eq!(w.read_to_string("docs/a.md", 10).unwrap(), "alpha");
    assert_eq!(
        w.read_to_string("./docs/../docs/a.md", 10).unwrap(),
        "alpha"
    );
    for bad in [
        "../x",
        "/etc/passwd",
        "docs/../../x",
        #[cfg(unix)]
        "out.txt",
        #[cfg(unix)]
        "docs/up/etc/passwd",
    ] {
        assert!(
            matches!(w.open(bad), Err(WorkspaceError::OutsideRoot { .. })),
            "{bad}: {:?}",
            w.open(bad).map(|_| ())
        );
    }
    #[cfg(unix)]
    assert_eq!(w.read_to_string("alias.md", 10).unwrap(), "alpha");
    assert!(matches!(
        w.read_to_string("big.txt", 99),
        Err(WorkspaceError::TooLarge { max_bytes: 99, .. })
    ));
    assert_eq!(w.read_to_string("big.txt", 100).unwrap().len(), 100);
    assert!(matches!(
        w.open("docs"),
        Err(WorkspaceError::NotAFile { .. })
    ));
    assert!(matches!(
        w.open("nope"),
        Err(WorkspaceError::NotFound { .. })
    ));
}

// ---- write_file and edit_file ----

fn write_file(ws: &Workspace, path: &str, content: &str) -> Result<String, WorkspaceError> {
    ws.write_file(&WriteFileArgs {
        path: path.to_owned(),
        content: content.to_owned(),
    })
}

fn edit_file(ws: &Workspace, path: &str, old: &str, new: &str) -> Result<String, WorkspaceError> {
    ws.edit_file(&EditFileArgs {
        path: path.to_owned(),
        old: old.to_owned(),
        new: new.to_owned(),
    })
}

#[test]
fn write_file_creates_directories_and_replaces_files() {
    let dir = tempfile::tempdir().unwrap();
    let w = ws(&dir);
    assert_eq!(
        write_file(&w, "src/deep/a.py", "x = 1\ny = 2\n").unwrap(),
        "created src/deep/a.py (2 lines)"
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("src/deep/a.py")).unwrap(),
        "x = 1\ny = 2\n"
    );
    assert_eq!(
        write_file(&w, "./src/deep/a.py", "z\n").unwrap(),
        "wrote ./src/deep/a.py (1 line)"
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("src/deep/a.py")).unwrap(),
        "z\n"
    );
    write_file(&w, "empty.txt", "").unwrap();
    assert_eq!(fs::read(dir.path().join("empty.txt")).unwrap(), b"");
    // No temporary file is left behind.
    let names: Vec<_> = fs::read_dir(dir.path().join("src/deep"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["a.py"]);
    // A directory is not a file.
    fs::create_dir(dir.path().join("d")).unwrap();
    for p in ["d", "d/", "."] {
        assert!(
            matches!(write_file(&w, p, "x"), Err(WorkspaceError::NotAFile { .. })),
            "{p}"
        );
    }
    // A file in the way of a directory.
    assert!(matches!(
        write_file(&w, "empty.txt/x", "x"),
        Err(WorkspaceError::NotADirectory { .. })
    ));
}

#[cfg(unix)]
#[test]
fn write_file_keeps_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "run.sh", "#!/bin/sh\n");
    fs::set_permissions(dir.path().join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    let w = ws(&dir);
    write_file(&w, "run.sh", "#!/bin/sh\necho hi\n").unwrap();
    edit_file(&w, "run.sh", "hi", "there").unwrap();
    let mode = fs::metadata(dir.path().join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
}

#[test]
fn writes_outside_or_under_git_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), ".git/config", "[core]\n");
    let w = ws(&dir);
    let abs = outside.path().join("abs.txt");
    for p in [
        "../x.txt",
        "a/../../x.txt",
        "a/../b.txt",
        "/tmp/x.txt",
        abs.to_str().unwrap(),
    ] {
        let err = write_file(&w, p, "x").unwrap_err();
        assert!(
            matches!(err, WorkspaceError::OutsideRoot { .. }),
            "{p}: {err:?}"
        );
        assert!(matches!(
            edit_file(&w, p, "a", "b").unwrap_err(),
            WorkspaceError::OutsideRoot { .. }
        ));
    }
    for p in [
        ".git/config",
        ".git/hooks/pre-commit",
        "sub/.git/x",
        ".GIT/config",
        "./.git",
    ] {
        let err = write_file(&w, p, "x").unwrap_err();
        assert!(matches!(err, WorkspaceError::GitDir { .. }), "{p}: {err:?}");
        assert!(err.to_string().contains(".git"));
    }
    assert_eq!(
        fs::read_to_string(dir.path().join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!abs.exists());
    assert!(!dir.path().join("b.txt").exists());
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    // Bounds.
    assert!(matches!(
        write_file(&w, &"a".repeat(1025), "x"),
        Err(WorkspaceError::InvalidArgs { .. })
    ));
    assert!(matches!(
        write_file(&w, "big.txt", &"é".repeat(MAX_WRITE_BYTES / 2 + 1)),
        Err(WorkspaceError::TooLarge { .. })
    ));
    assert!(matches!(
        edit_file(&w, "x.txt", "", "b"),
        Err(WorkspaceError::InvalidArgs { .. })
    ));
}

#[cfg(unix)]
#[test]
fn writes_never_go_through_a_link() {
    use std::os::unix::fs::symlink;
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "secret.txt", "secret\n");
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "inside.txt", "inside\n");
    write(dir.path(), "sub/f.txt", "f\n");
    symlink(
        outside.path().join("secret.txt"),
        dir.path().join("leak.txt"),
    )
    .unwrap();
    symlink(outside.path(), dir.path().join("leakdir")).unwrap();
    symlink("inside.txt", dir.path().join("alias.txt")).unwrap();
    symlink("sub", dir.path().join("subalias")).unwrap();
    symlink(".git", dir.path().join("gitalias")).unwrap();
    fs::create_dir(dir.path().join(".git")).unwrap();
    let w = ws(&dir);
    for p in [
        "leak.txt",
        "leakdir/secret.txt",
        "leakdir/new.txt",
        "leakdir/new/deeper.txt",
        "alias.txt",
        "subalias/f.txt",
        "gitalias/config",
    ] {
        let err = write_file(&w, p, "pwned\n").unwrap_err();
        assert!(
            matches!(
                err,
                WorkspaceError::Link { .. } | WorkspaceError::OutsideRoot { .. }
            ),
            "{p}: {err:?}"
        );
        let err = edit_file(&w, p, "secret", "pwned").unwrap_err();
        assert!(
            matches!(
                err,
                WorkspaceError::Link { .. }
                    | WorkspaceError::OutsideRoot { .. }
                    | WorkspaceError::NotFound { .. }
            ),
            "{p}: {err:?}"
        );
    }
    assert_eq!(
        fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "secret\n"
    );
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 1);
    assert_eq!(
        fs::read_to_string(dir.path().join("inside.txt")).unwrap(),
        "inside\n"
    );
    assert_eq!(fs::read_dir(dir.path().join(".git")).unwrap().count(), 0);
    // The links themselves are untouched.
    assert!(fs::symlink_metadata(dir.path().join("leak.txt"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn edit_file_replaces_exactly_one_occurrence() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "a.py",
        "def f():\n    return 1\n\ndef g():\n    return 1\n",
    );
    let w = ws(&dir);
    let err = edit_file(&w, "a.py", "return 2", "return 3").unwrap_err();
    assert!(
        matches!(err, WorkspaceError::EditMismatch { count: 0, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("occurs 0 times in `a.py`"),
        "{err}"
    );
    let err = edit_file(&w, "a.py", "return 1", "return 3").unwrap_err();
    assert!(
        matches!(err, WorkspaceError::EditMismatch { count: 2, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("occurs 2 times"), "{err}");
    let err = edit_file(&w, "a.py", "def f():", "def f():").unwrap_err();
    assert!(err.to_string().contains("nothing would change"), "{err}");
    // Nothing changed by a refused edit.
    assert_eq!(
        fs::read_to_string(dir.path().join("a.py")).unwrap(),
        "def f():\n    return 1\n\ndef g():\n    return 1\n"
    );
    assert_eq!(
        edit_file(
            &w,
            "a.py",
            "def g():\n    return 1\n",
            "def g():\n    return 2\n    # two\n"
        )
        .unwrap(),
        "edited a.py (6 lines, was 5)"
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("a.py")).unwrap(),
        "def f():\n    return 1\n\ndef g():\n    return 2\n    # two\n"
    );
    // Deleting text, and errors for what cannot be edited.
    edit_file(&w, "a.py", "    # two\n", "").unwrap();
    assert!(matches!(
        edit_file(&w, "missing.py", "a", "b"),
        Err(WorkspaceError::NotFound { .. })
    ));
    assert!(matches!(
        edit_file(&w, "missing/x.py", "a", "b"),
        Err(WorkspaceError::NotFound { .. })
    ));
    assert!(!dir.path().join("missing").exists());
    write(dir.path(), "bin", b"\xff\xfe");
    assert!(matches!(
        edit_file(&w, "bin", "a", "b"),
        Err(WorkspaceError::NotUtf8 { .. })
    ));
}

#[test]
fn write_args_are_strict_and_bounded() {
    let schema = serde_json::to_value(schemars::schema_for!(WriteFileArgs)).unwrap();
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(schema["properties"]["path"]["maxLength"], 1024);
    assert_eq!(schema["properties"]["content"]["maxLength"], 1048576);
    let schema = serde_json::to_value(schemars::schema_for!(EditFileArgs)).unwrap();
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(schema["properties"]["old"]["minLength"], 1);
    assert_eq!(schema["properties"]["new"]["maxLength"], 1048576);
    for prop in schema["properties"].as_object().unwrap().values() {
        assert!(prop["description"].is_string(), "{prop}");
    }
    assert!(
        serde_json::from_str::<WriteFileArgs>(r#"{"path":"a","content":"x","mode":1}"#).is_err()
    );
    assert!(serde_json::from_str::<EditFileArgs>(r#"{"path":"a","old":"x"}"#).is_err());
}

#[cfg(unix)]
#[test]
fn a_concurrent_swap_to_a_link_never_lets_a_write_out() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "secret.txt", "TOPSECRET\n");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let w = Workspace::new(&root).unwrap();
    let limit = Duration::from_secs(2);

    // A file swapped for a link to the outside file.
    let stop = Arc::new(AtomicBool::new(false));
    let t = swapper(
        root.clone(),
        "victim.txt",
        outside.path().join("secret.txt"),
        false,
        stop.clone(),
    );
    hammer(20_000, limit, || {
        let _ = write_file(&w, "victim.txt", "PWNED\n");
        let _ = edit_file(&w, "victim.txt", "TOPSECRET", "PWNED");
        false
    });
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    for name in ["victim.txt", "swap.real", "swap.link", "swap.tmp"] {
        let _ = fs::remove_file(root.join(name));
    }

    // A directory swapped for a link to the outside directory.
    let stop = Arc::new(AtomicBool::new(false));
    let t = swapper(
        root.clone(),
        "victim_dir",
        outside.path().to_path_buf(),
        true,
        stop.clone(),
    );
    hammer(20_000, limit, || {
        let _ = write_file(&w, "victim_dir/secret.txt", "PWNED\n");
        let _ = write_file(&w, "victim_dir/planted.txt", "PWNED\n");
        let _ = edit_file(&w, "victim_dir/secret.txt", "TOPSECRET", "PWNED");
        false
    });
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();

    assert_eq!(
        fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "TOPSECRET\n"
    );
    let names: Vec<_> = fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["secret.txt"], "a write landed outside");
}
