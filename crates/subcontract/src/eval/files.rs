//! What an eval reads and writes, checked before its first model call: every model call is
//! paid, so a path that cannot be used is found before any, not after all of them.
//!
//! A file an eval reads (a cases file, a judge spec) must be a regular file within a size
//! bound, and no symbolic link may lead it out of its directory: a FIFO would block the read
//! for ever and a device (`/dev/zero`) would never end it. What an eval writes (the report,
//! the recordings' tree) is opened or made ready first, and the recordings' tree holds no
//! link that would lead a write out of it.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use crate::spec::file::file_kind;

/// A path an eval would read or write, refused: the path and why. Nothing has run.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason}", path.display())]
pub struct PathError {
    /// The path, as given (or as it was reached).
    pub path: PathBuf,
    /// Why it cannot be used.
    pub reason: String,
}

crate::debug_as_display!(PathError);

fn refuse(path: &Path, reason: impl Into<String>) -> PathError {
    PathError {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// The directory `path` is in (`.` for a bare name).
fn parent_of(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Refuses `path` when, links followed, it lies outside `dir`.
fn within(path: &Path, dir: &Path, what: &str) -> Result<(), PathError> {
    let real = path
        .canonicalize()
        .map_err(|e| refuse(path, format!("cannot be read: {e}")))?;
    let dir_real = dir
        .canonicalize()
        .map_err(|e| refuse(dir, format!("cannot be read: {e}")))?;
    if real.starts_with(&dir_real) {
        Ok(())
    } else {
        Err(refuse(
            path,
            format!(
                "leads to {}, outside {what} ({})",
                real.display(),
                dir_real.display()
            ),
        ))
    }
}

/// Refuses `path` when it is a symbolic link that leads out of its own directory.
/// A path that cannot be looked at passes here: reading it says why.
pub(crate) fn no_link_out(path: &Path) -> Result<(), PathError> {
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if is_link {
        within(path, parent_of(path), "its own directory")?;
    }
    Ok(())
}

/// Checks a file an eval will read: a regular file of at most `max` bytes, which a symbolic
/// link does not lead out of its own directory (`within`, when given, is the directory it
/// must stay in instead: a judge's is its cases file's). Nothing is opened that is not a
/// regular file, so a FIFO cannot block the check.
pub fn check_readable(path: &Path, within_dir: Option<&Path>, max: u64) -> Result<(), PathError> {
    match within_dir {
        Some(dir) => within(path, dir, "the cases file's directory")?,
        None => no_link_out(path)?,
    }
    let meta = std::fs::metadata(path).map_err(|e| refuse(path, format!("cannot be read: {e}")))?;
    if !meta.is_file() {
        return Err(refuse(
            path,
            format!("is {}, not a regular file", file_kind(&meta)),
        ));
    }
    if meta.len() > max {
        return Err(refuse(
            path,
            format!("is {} bytes, over the {max} it may hold", meta.len()),
        ));
    }
    Ok(())
}

/// Opens the file an eval's report will be written to, before anything runs: a regular file
/// (made if absent, left as it is until the report replaces its contents) in a directory
/// that exists, which no symbolic link leads out of that directory. A FIFO, a device or a
/// directory is refused without being opened.
pub fn open_report(path: &Path) -> Result<File, PathError> {
    match std::fs::symlink_metadata(path) {
        Ok(link) => {
            if link.file_type().is_symlink() {
                no_link_out(path)?;
            }
            let meta = std::fs::metadata(path)
                .map_err(|e| refuse(path, format!("cannot be written: {e}")))?;
            if !meta.is_file() {
                return Err(refuse(
                    path,
                    format!("is {}, not a regular file", file_kind(&meta)),
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(refuse(path, format!("cannot be written: {e}"))),
    }
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| refuse(path, format!("cannot be written: {e}")))
}

/// Writes `text` as the whole contents of the report file `open_report` opened.
pub fn write_report(file: &mut File, text: &str) -> std::io::Result<()> {
    use std::io::{Seek, Write};
    file.set_len(0)?;
    file.seek(std::io::SeekFrom::Start(0))?;
    file.write_all(text.as_bytes())?;
    file.flush()
}

/// Makes ready the directories an eval records into under `dir`, before anything runs: each
/// of `files` (the recordings it will write, [`recording_path`](super::recording_path)) gets
/// its directory made, every directory between `dir` and it a real directory (a symbolic link
/// there would lead the write out of the tree), and a probe file written and removed there, so
/// a tree that cannot be written fails now. A recording already there must be a regular file.
pub fn prepare_recording(dir: &Path, files: &[PathBuf]) -> Result<(), PathError> {
    match std::fs::metadata(dir) {
        Ok(meta) if !meta.is_dir() => {
            return Err(refuse(
                dir,
                format!("is {}, not a directory", file_kind(&meta)),
            ))
        }
        Ok(_) => {}
        Err(_) => {
            std::fs::create_dir_all(dir).map_err(|e| refuse(dir, format!("cannot be made: {e}")))?
        }
    }
    let mut probed: Vec<&Path> = Vec::new();
    for file in files {
        let Some(rel) = file.strip_prefix(dir).ok() else {
            return Err(refuse(file, "is not under the recordings' directory"));
        };
        // Each directory under `dir` on the way, outermost first, checked before it is used.
        let mut at = dir.to_path_buf();
        let parts: Vec<_> = rel.components().collect();
        for part in &parts[..parts.len().saturating_sub(1)] {
            at.push(part);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(refuse(
                        &at,
                        "is a symbolic link in the recordings' tree: recordings are not written through links",
                    ))
                }
                Ok(m) if !m.is_dir() => {
                    return Err(refuse(&at, format!("is {}, not a directory", file_kind(&m))))
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    std::fs::create_dir(&at)
                        .map_err(|e| refuse(&at, format!("cannot be made: {e}")))?;
                }
                Err(e) => return Err(refuse(&at, format!("cannot be read: {e}"))),
            }
        }
        match std::fs::symlink_metadata(file) {
            Ok(m) if !m.is_file() => {
                return Err(refuse(
                    file,
                    format!("is {}, not a regular file", file_kind(&m)),
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(refuse(file, format!("cannot be read: {e}"))),
        }
        let Some(parent) = file.parent() else {
            continue;
        };
        if probed.contains(&parent) {
            continue;
        }
        probed.push(parent);
        let probe = parent.join(format!(".probe-{:016x}.tmp", fastrand::u64(..)));
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
            .map_err(|e| refuse(parent, format!("cannot be written: {e}")))?;
        let _ = std::fs::remove_file(&probe);
    }
    Ok(())
}
