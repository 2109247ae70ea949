//! The contract-evolution commands' shared parts: `check --against REV|LOCKFILE`, `diff` and
//! `lock` (the comparison itself is `subcontract::check::compat`).

use std::path::{Path, PathBuf};

use subcontract::check::compat::{self, CompatOptions, LockFile, SpecSet};
use subcontract::check::{render, CheckReport};

use super::check::CheckFormat;
use super::{emit, git, OK, USAGE, VIOLATIONS};

/// The flags `check` and `diff` share for comparing contracts.
#[derive(clap::Args, Default)]
pub struct CompatArgs {
    /// Also compare with the same paths at a git revision (`main`, `HEAD~1`), or with a lock
    /// file written by `subcontract lock` (`contracts.lock.json`): breaking changes fail.
    #[arg(long, value_name = "REV|LOCKFILE")]
    pub against: Option<String>,
    /// Accept a breaking-change code everywhere (repeatable); it is still reported, as a note.
    #[arg(long, value_name = "CODE")]
    pub allow: Vec<String>,
    /// A TOML file of `[[acknowledged]]` entries (spec, code, reason) accepting known breaks.
    #[arg(long, value_name = "FILE")]
    pub acknowledged: Option<PathBuf>,
}

impl From<CheckFormat> for render::Format {
    fn from(f: CheckFormat) -> Self {
        match f {
            CheckFormat::Human => render::Format::Human,
            CheckFormat::Json => render::Format::Json,
            CheckFormat::Github => render::Format::Github,
        }
    }
}

/// A lock file rather than a revision: an existing file ending in `.json`.
fn is_lock_file(s: &str) -> bool {
    let p = Path::new(s);
    p.extension().is_some_and(|e| e == "json") && p.is_file()
}

/// One side given as a path: a lock file, or spec files and directories.
pub fn load_side(path: &Path) -> Result<SpecSet, String> {
    if path.extension().is_some_and(|e| e == "json") && path.is_file() {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let lock = LockFile::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        return Ok(SpecSet::from_lock(&path.display().to_string(), &lock));
    }
    SpecSet::from_paths(&[path.to_path_buf()]).map_err(|e| e.to_string())
}

/// The old side of `check PATHS --against X`.
fn old_side(against: &str, paths: &[PathBuf]) -> Result<SpecSet, String> {
    if is_lock_file(against) {
        return load_side(Path::new(against));
    }
    let tree = git::read_tree(against, paths).map_err(|e| e.to_string())?;
    let mut set = SpecSet::from_sources(&tree.files);
    for (from, to) in &tree.renames {
        set.follow_rename(from, to);
    }
    Ok(set)
}

/// The options from the flags.
pub fn options(args: &CompatArgs, deny_warnings: bool) -> Result<CompatOptions, String> {
    let acknowledged = match &args.acknowledged {
        Some(p) => compat::load_acknowledged(p).map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    Ok(CompatOptions {
        allow: args.allow.clone(),
        acknowledged,
        deny_warnings,
    })
}

/// The comparison report of `check PATHS --against X` (to merge with the check's own).
pub fn against(
    paths: &[PathBuf],
    args: &CompatArgs,
    deny_warnings: bool,
) -> Result<CheckReport, String> {
    let against = args.against.as_deref().unwrap_or("HEAD");
    let opts = options(args, deny_warnings)?;
    let old = old_side(against, paths)?;
    let new = SpecSet::from_paths(paths).map_err(|e| e.to_string())?;
    Ok(compat::compare(&old, &new, &opts))
}

/// Prints `report` and returns the exit code.
pub fn finish(report: &CheckReport, format: CheckFormat) -> u8 {
    emit(&render::render(report, format.into()));
    if report.failed() {
        VIOLATIONS
    } else {
        OK
    }
}

/// Arguments of `diff`.
#[derive(clap::Args)]
pub struct DiffArgs {
    /// The old specs: a spec file, a directory of them, or a lock file.
    old: PathBuf,
    /// The new specs, likewise.
    new: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
    format: CheckFormat,
    /// Fail on warnings (`cannot-prove`) too.
    #[arg(long)]
    deny_warnings: bool,
    /// Accept a breaking-change code everywhere (repeatable); it is still reported, as a note.
    #[arg(long, value_name = "CODE")]
    allow: Vec<String>,
    /// A TOML file of `[[acknowledged]]` entries (spec, code, reason) accepting known breaks.
    #[arg(long, value_name = "FILE")]
    acknowledged: Option<PathBuf>,
}

/// Runs `diff`; returns the exit code.
pub fn diff(args: DiffArgs) -> u8 {
    let flags = CompatArgs {
        against: None,
        allow: args.allow,
        acknowledged: args.acknowledged,
    };
    let run = || -> Result<CheckReport, String> {
        let opts = options(&flags, args.deny_warnings)?;
        let old = load_side(&args.old)?;
        let new = load_side(&args.new)?;
        Ok(compat::compare(&old, &new, &opts))
    };
    match run() {
        Ok(report) => finish(&report, args.format),
        Err(e) => {
            eprintln!("error: {e}");
            USAGE
        }
    }
}

/// Arguments of `lock`.
#[derive(clap::Args)]
pub struct LockArgs {
    /// Spec files or directories (searched recursively for *.toml), and lock files to merge
    /// (e.g. the output of a binary that prints `subcontract::registry![…]`).
    #[arg(default_value = "specs/")]
    paths: Vec<PathBuf>,
}

/// Runs `lock`: prints the lock file of the specs on stdout.
pub fn lock(args: &LockArgs) -> u8 {
    let mut lock = LockFile::new(Vec::new());
    for p in &args.paths {
        let set = match load_side(p) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                return USAGE;
            }
        };
        // A spec that does not load has no contract to lock: `check` says why.
        if !set.problems().is_empty() {
            for d in set.problems() {
                eprintln!("error: {}:{}:{}: {}", d.file, d.line, d.column, d.message);
            }
            return VIOLATIONS;
        }
        lock.extend(set.entries().iter().map(|e| e.snapshot.clone()));
    }
    emit(&lock.to_json());
    OK
}
