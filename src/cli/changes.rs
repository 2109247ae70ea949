//! An acting run's changes on the command line: written as a patch, summarised on stderr,
//! and applied to the workspace only when asked (`run --apply`).

use std::io::Write;
use std::path::{Path, PathBuf};

use subcontract::act::{ActHost, Changes};

/// Whether `path` can take a patch: a new file in an existing directory, or a regular file
/// (never a directory, a FIFO or a device). Checked before a run spends anything.
pub fn writable(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) if m.file_type().is_symlink() => {
            Err("is a symbolic link; name the file itself".into())
        }
        Ok(_) => Err("is not a regular file".into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if dir.is_dir() {
                Ok(())
            } else {
                Err(format!("its directory {} does not exist", dir.display()))
            }
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Writes `changes` to `out` (or a file outside `workspace` that stderr names), summarises
/// them on stderr and, with `apply`, applies them to `workspace`, all or nothing. Returns
/// false when they were to be applied and were not (a conflict: nothing changed).
pub fn deliver(changes: &Changes, workspace: &Path, out: Option<&Path>, apply: bool) -> bool {
    if changes.is_empty() {
        eprintln!("changes: none");
        return true;
    }
    let path = match out {
        Some(p) => p.to_path_buf(),
        None => default_path(workspace, changes),
    };
    match write(&path, changes) {
        Ok(()) => eprintln!(
            "changes: {} file(s), +{} -{}, written to {}",
            changes.file_count(),
            changes
                .files
                .iter()
                .map(|f| f.insertions as u64)
                .sum::<u64>(),
            changes
                .files
                .iter()
                .map(|f| f.deletions as u64)
                .sum::<u64>(),
            path.display()
        ),
        Err(e) => eprintln!(
            "error: the changes could not be written to {}: {e}",
            path.display()
        ),
    }
    for f in &changes.files {
        eprintln!(
            "  {:?} {} (+{} -{})",
            f.status, f.path, f.insertions, f.deletions
        );
    }
    if !apply {
        eprintln!(
            "the workspace is unchanged; apply with `git apply {}` or run again with --apply",
            path.display()
        );
        return true;
    }
    match changes.apply(workspace) {
        Ok(()) => {
            eprintln!("changes applied to {}", workspace.display());
            true
        }
        Err(e) => {
            eprintln!("error: the changes were not applied (nothing was changed): {e}");
            false
        }
    }
}

/// `<patches dir>/<run id>-<ms>.patch`, outside the workspace.
fn default_path(workspace: &Path, changes: &Changes) -> PathBuf {
    let dir = ActHost::new(workspace).patches_dir().to_path_buf();
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    dir.join(format!("{}-{ms}.patch", changes.id))
}

fn write(path: &Path, changes: &Changes) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::File::create(path)?;
    f.write_all(changes.diff.as_bytes())?;
    f.sync_all()
}
