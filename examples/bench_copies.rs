//! What a working copy costs to make and remove, beside the raw tools: `worktree` beside
//! `git worktree add` + `git worktree remove`, `copy` beside `cp -r` + `rm -rf`, on this
//! repository and on a generated repository of 10,000 files. A working copy also records its
//! baseline (the files as the run found them, in a private git directory), which the raw
//! tools do not; the figures include it.
//!
//! Each working copy is timed in turn with its raw tool; the ratio is the median of the
//! pairs' ratios.
//!
//! Run: `cargo run --release --example bench_copies -- [--reps N] [--this DIR]` (default 5
//! reps; `--this` measures DIR, a repository, in place of this one: a checkout whose build
//! output is large makes `copy` measure that copy alone).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use subcontract::act::{Isolation, WorkingCopy};

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let mut reps = 5usize;
    let mut this = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while let Some(a) = args.next() {
        match a.as_str() {
            "--reps" => reps = args.next().ok_or("--reps N")?.parse()?,
            "--this" => this = args.next().ok_or("--this DIR")?.into(),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let scratch = tempfile::tempdir()?;
    let generated = scratch.path().join("gen");
    generate(&generated, 10_000)?;
    println!("| repository | files | working copy | raw tool | ours | raw | ratio |");
    println!("|---|---|---|---|---|---|---|");
    for (name, repo) in [
        ("this repository", this.as_path()),
        ("generated", generated.as_path()),
    ] {
        let files = git(repo, &["ls-files"])?.lines().count();
        let copies = scratch.path().join("copies");
        std::fs::create_dir_all(&copies)?;
        let (ours, raw, ratio) = paired(
            reps,
            || {
                let t = Instant::now();
                let c = WorkingCopy::create(repo, Isolation::Worktree, &copies)?;
                drop(c);
                Ok(t.elapsed())
            },
            || {
                let dir = scratch.path().join("raw-wt");
                let t = Instant::now();
                git(
                    repo,
                    &[
                        "worktree",
                        "add",
                        "-q",
                        "--detach",
                        dir.to_str().ok_or("path")?,
                        "HEAD",
                    ],
                )?;
                git(
                    repo,
                    &["worktree", "remove", "--force", dir.to_str().ok_or("path")?],
                )?;
                Ok(t.elapsed())
            },
        )?;
        row(
            name,
            files,
            "worktree",
            "git worktree add + remove",
            (ours, raw, ratio),
        );
        let (ours, raw, ratio) = paired(
            reps,
            || {
                let t = Instant::now();
                let c = WorkingCopy::create(repo, Isolation::Copy, &copies)?;
                drop(c);
                Ok(t.elapsed())
            },
            || {
                let dir = scratch.path().join("raw-cp");
                let t = Instant::now();
                run(Command::new("cp").arg("-r").arg(repo).arg(&dir))?;
                run(Command::new("rm").arg("-rf").arg(&dir))?;
                Ok(t.elapsed())
            },
        )?;
        row(name, files, "copy", "cp -r + rm -rf", (ours, raw, ratio));
    }
    Ok(())
}

fn row(name: &str, files: usize, what: &str, raw_name: &str, m: (Duration, Duration, f64)) {
    println!(
        "| {name} | {files} | {what} | {raw_name} | {:.0} ms | {:.0} ms | {:.2} |",
        m.0.as_secs_f64() * 1000.0,
        m.1.as_secs_f64() * 1000.0,
        m.2
    );
}

/// Runs `ours` and `raw` in turn, `reps` times each, so that a change in the machine's load
/// falls on both: the median of each, and the median of the ratios of the pairs.
fn paired(
    reps: usize,
    mut ours: impl FnMut() -> Result<Duration, Error>,
    mut raw: impl FnMut() -> Result<Duration, Error>,
) -> Result<(Duration, Duration, f64), Error> {
    let (mut a, mut b, mut r) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps.max(1) {
        let x = ours()?;
        let y = raw()?;
        r.push(x.as_secs_f64() / y.as_secs_f64());
        a.push(x);
        b.push(y);
    }
    a.sort();
    b.sort();
    r.sort_by(f64::total_cmp);
    Ok((a[a.len() / 2], b[b.len() / 2], r[r.len() / 2]))
}

/// A git repository of `n` small source files in 100 directories, committed.
fn generate(dir: &Path, n: usize) -> Result<(), Error> {
    for i in 0..n {
        let sub = dir.join(format!("pkg{:03}", i % 100));
        std::fs::create_dir_all(&sub)?;
        std::fs::write(
            sub.join(format!("mod{i:05}.rs")),
            format!("//! Module {i}.\n\npub fn value() -> usize {{\n    {i}\n}}\n"),
        )?;
    }
    git(dir, &["init", "-q", "-b", "main"])?;
    git(dir, &["add", "-A"])?;
    git(
        dir,
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@example.invalid",
            "commit",
            "-q",
            "-m",
            "gen",
        ],
    )?;
    Ok(())
}

fn git(dir: &Path, args: &[&str]) -> Result<String, Error> {
    let out = Command::new("git").args(args).current_dir(dir).output()?;
    if !out.status.success() {
        return Err(format!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn run(cmd: &mut Command) -> Result<(), Error> {
    if cmd.status()?.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed").into())
    }
}
