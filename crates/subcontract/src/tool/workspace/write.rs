//! `write_file` and `edit_file`: writes contained as the reads are.
//!
//! The path is walked one name at a time beneath the root's handle: each directory is opened
//! relative to the one before it, refusing a symbolic link (`O_NOFOLLOW`), and made when
//! missing. The file is written under a temporary name in that directory and renamed over the
//! target there, so a reader never sees half a file, and a rename replaces a name, never writes
//! through a link. Writes never follow a link at all (even one that stays inside): the path
//! written is the path named. Nothing under `.git` is written.

use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::path::{Component, Path};

use cap_std::fs::{Dir, OpenOptions};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use validator::Validate;

use super::{shown_name, validate_args, Workspace, WorkspaceError};

/// Most bytes `write_file` writes, and `edit_file`'s `old` and `new` hold.
pub const MAX_WRITE_BYTES: usize = 1024 * 1024;

/// Most bytes of a file `edit_file` edits, before and after the edit.
pub const MAX_EDIT_FILE_BYTES: usize = 4 * 1024 * 1024;

/// Arguments of the `write_file` tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// Path of the file, relative to the workspace root (for example `src/lib.rs`). Missing
    /// directories are made; an existing file is replaced whole.
    #[validate(length(min = 1, max = 1024))]
    pub path: String,
    /// The file's entire new content (text, at most 1 MiB).
    #[validate(length(max = 1048576))]
    pub content: String,
}

/// Arguments of the `edit_file` tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    /// Path of an existing file, relative to the workspace root (for example `src/lib.rs`).
    #[validate(length(min = 1, max = 1024))]
    pub path: String,
    /// The exact text to replace, including its whitespace and indentation. It must occur
    /// exactly once in the file; include enough surrounding lines to make it unique.
    #[validate(length(min = 1, max = 1048576))]
    pub old: String,
    /// The text that replaces `old` (empty to delete it).
    #[validate(length(max = 1048576))]
    pub new: String,
}

impl Workspace {
    /// Writes `content` to the file `path`, making missing directories, replacing the file
    /// whole (keeping its permissions). Contained as the reads are, and stricter: the path may
    /// not hold `..`, pass through or name a symbolic link, or lie under `.git`. Returns a
    /// sentence such as `wrote src/a.py (12 lines)`.
    pub fn write_file(&self, args: &WriteFileArgs) -> Result<String, WorkspaceError> {
        validate_args(args)?;
        let rel = args.path.as_str();
        if args.content.len() > MAX_WRITE_BYTES {
            return Err(WorkspaceError::TooLarge {
                path: rel.to_owned(),
                max_bytes: MAX_WRITE_BYTES as u64,
            });
        }
        let (dir, name) = self.parent_for_write(rel, true)?;
        let existing = target(&dir, name, rel)?;
        replace(&dir, name, rel, args.content.as_bytes(), existing.as_ref())?;
        Ok(format!(
            "{} {} ({} line{})",
            if existing.is_some() {
                "wrote"
            } else {
                "created"
            },
            shown_name(rel, &[]),
            lines(&args.content),
            plural(lines(&args.content))
        ))
    }

    /// Replaces the one occurrence of `old` in the file `path` with `new`. `old` must occur
    /// exactly once: otherwise nothing changes and the error says how many times it occurs.
    /// Contained as [`write_file`](Self::write_file) is. Returns a sentence such as
    /// `edited src/a.py (12 lines, was 10)`.
    pub fn edit_file(&self, args: &EditFileArgs) -> Result<String, WorkspaceError> {
        validate_args(args)?;
        let rel = args.path.as_str();
        if args.old.len() > MAX_WRITE_BYTES || args.new.len() > MAX_WRITE_BYTES {
            return Err(WorkspaceError::InvalidArgs {
                message: format!("old and new may hold at most {MAX_WRITE_BYTES} bytes each"),
            });
        }
        // A model that "fixes" a file by writing it back as it was learns it changed nothing,
        // instead of reading a success.
        if args.old == args.new {
            return Err(WorkspaceError::InvalidArgs {
                message: "old and new are the same text, so nothing would change: put the \
                          corrected text in new"
                    .to_owned(),
            });
        }
        let (dir, name) = self.parent_for_write(rel, false)?;
        let Some(perms) = target(&dir, name, rel)? else {
            return Err(WorkspaceError::NotFound {
                path: rel.to_owned(),
            });
        };
        let text = read_text(&dir, name, rel)?;
        let count = text.matches(args.old.as_str()).count();
        if count != 1 {
            return Err(WorkspaceError::EditMismatch {
                path: rel.to_owned(),
                count,
            });
        }
        let edited = text.replacen(args.old.as_str(), &args.new, 1);
        if edited.len() > MAX_EDIT_FILE_BYTES {
            return Err(WorkspaceError::TooLarge {
                path: rel.to_owned(),
                max_bytes: MAX_EDIT_FILE_BYTES as u64,
            });
        }
        replace(&dir, name, rel, edited.as_bytes(), Some(&perms))?;
        Ok(format!(
            "edited {} ({} line{}, was {})",
            shown_name(rel, &[]),
            lines(&edited),
            plural(lines(&edited)),
            lines(&text)
        ))
    }

    /// Opens the directory that holds `rel`, walking it one name at a time beneath the root,
    /// never through a link; `create` makes missing directories. Returns it and the file name.
    fn parent_for_write<'a>(
        &self,
        rel: &'a str,
        create: bool,
    ) -> Result<(Dir, &'a OsStr), WorkspaceError> {
        let outside = || WorkspaceError::OutsideRoot {
            path: rel.to_owned(),
        };
        if rel.contains('\0') {
            return Err(WorkspaceError::NotFound {
                path: rel.to_owned(),
            });
        }
        let mut names = Vec::new();
        for component in Path::new(rel).components() {
            match component {
                Component::Prefix(_) | Component::RootDir | Component::ParentDir => {
                    return Err(outside())
                }
                Component::CurDir => {}
                Component::Normal(name) => {
                    if name.eq_ignore_ascii_case(".git") {
                        return Err(WorkspaceError::GitDir {
                            path: rel.to_owned(),
                        });
                    }
                    names.push(name);
                }
            }
        }
        let Some(file) = names.pop() else {
            return Err(WorkspaceError::NotAFile {
                path: rel.to_owned(),
                what: "a directory",
            });
        };
        if rel.ends_with('/') {
            return Err(WorkspaceError::NotAFile {
                path: rel.to_owned(),
                what: "a directory",
            });
        }
        let mut dir = self
            .dir
            .try_clone()
            .map_err(|e| WorkspaceError::from_io(rel, e))?;
        for (i, name) in names.iter().enumerate() {
            let so_far = || {
                names[..=i]
                    .iter()
                    .map(|n| n.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/")
            };
            match dir.symlink_metadata(name) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(WorkspaceError::Link {
                        path: rel.to_owned(),
                    })
                }
                Ok(meta) if !meta.is_dir() => {
                    return Err(WorkspaceError::NotADirectory { path: so_far() })
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                    match dir.create_dir(name) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(write_error(rel, e)),
                    }
                }
                Err(e) => return Err(WorkspaceError::from_io(rel, e)),
            }
            dir = open_dir_nofollow(&dir, name).map_err(|e| match dir.symlink_metadata(name) {
                Ok(meta) if meta.file_type().is_symlink() => WorkspaceError::Link {
                    path: rel.to_owned(),
                },
                Ok(meta) if !meta.is_dir() => WorkspaceError::NotADirectory { path: so_far() },
                _ => super::open_error(rel, e),
            })?;
        }
        Ok((dir, file))
    }
}

/// What stands at `name` in `dir`: nothing (`None`), or a regular file (its permissions). A
/// link, directory or special file is refused.
fn target(
    dir: &Dir,
    name: &OsStr,
    rel: &str,
) -> Result<Option<cap_std::fs::Permissions>, WorkspaceError> {
    match dir.symlink_metadata(name) {
        Ok(meta) if meta.file_type().is_symlink() => Err(WorkspaceError::Link {
            path: rel.to_owned(),
        }),
        Ok(meta) if meta.is_dir() => Err(WorkspaceError::NotAFile {
            path: rel.to_owned(),
            what: "a directory",
        }),
        Ok(meta) if !meta.is_file() => Err(WorkspaceError::NotAFile {
            path: rel.to_owned(),
            what: "a special file",
        }),
        Ok(meta) => Ok(Some(meta.permissions())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(WorkspaceError::from_io(rel, e)),
    }
}

/// Reads the regular file `name` of `dir` as text, without following a link or blocking.
fn read_text(dir: &Dir, name: &OsStr, rel: &str) -> Result<String, WorkspaceError> {
    let file = dir
        .open_with(name, &super::read_options(true))
        .map_err(|e| match dir.symlink_metadata(name) {
            Ok(meta) if meta.file_type().is_symlink() => WorkspaceError::Link {
                path: rel.to_owned(),
            },
            _ => super::open_error(rel, e),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| WorkspaceError::from_io(rel, e))?;
    if !meta.is_file() {
        return Err(WorkspaceError::NotAFile {
            path: rel.to_owned(),
            what: if meta.is_dir() {
                "a directory"
            } else {
                "a special file"
            },
        });
    }
    let mut bytes = Vec::new();
    file.into_std()
        .take(MAX_EDIT_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| WorkspaceError::from_io(rel, e))?;
    if bytes.len() > MAX_EDIT_FILE_BYTES {
        return Err(WorkspaceError::TooLarge {
            path: rel.to_owned(),
            max_bytes: MAX_EDIT_FILE_BYTES as u64,
        });
    }
    String::from_utf8(bytes).map_err(|_| WorkspaceError::NotUtf8 {
        path: rel.to_owned(),
    })
}

/// Writes `bytes` under a fresh temporary name in `dir`, then renames it over `name`.
fn replace(
    dir: &Dir,
    name: &OsStr,
    rel: &str,
    bytes: &[u8],
    perms: Option<&cap_std::fs::Permissions>,
) -> Result<(), WorkspaceError> {
    let mut options = OpenOptions::new();
    // create_new: O_EXCL, which never follows a link standing at the temporary name.
    options.write(true).create_new(true);
    let (tmp, mut file) = loop {
        let tmp = format!(".subcontract-write-{:016x}.tmp", fastrand::u64(..));
        match dir.open_with(&tmp, &options) {
            Ok(file) => break (tmp, file),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(write_error(rel, e)),
        }
    };
    let written = file
        .write_all(bytes)
        .and_then(|()| match perms {
            Some(perms) => file.set_permissions(perms.clone()),
            None => Ok(()),
        })
        .and_then(|()| dir.rename(&tmp, dir, name));
    if let Err(e) = written {
        let _ = dir.remove_file(&tmp);
        return Err(write_error(rel, e));
    }
    Ok(())
}

/// Opens the directory `name` of `dir`, refusing a link there.
fn open_dir_nofollow(dir: &Dir, name: &OsStr) -> io::Result<Dir> {
    #[cfg(unix)]
    {
        use cap_std::fs::OpenOptionsExt;
        let mut options = OpenOptions::new();
        options.read(true);
        options.custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_NONBLOCK);
        let file = dir.open_with(name, &options)?;
        Ok(Dir::from_std_file(file.into_std()))
    }
    #[cfg(not(unix))]
    {
        dir.open_dir(name)
    }
}

fn write_error(rel: &str, e: io::Error) -> WorkspaceError {
    if super::is_escape(&e) {
        WorkspaceError::OutsideRoot {
            path: rel.to_owned(),
        }
    } else {
        WorkspaceError::Write {
            path: rel.to_owned(),
            source: e,
        }
    }
}

fn lines(text: &str) -> usize {
    text.lines().count()
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
