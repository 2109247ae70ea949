//! One side of a comparison: specs with where they were written.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::check::CheckError;
use crate::diag::{Diagnostic, LineIndex, Pos};
use crate::spec::file::{parse_spec, RawSpec};

use crate::spec::{load_spec_str, spec_files};

use super::codes::CANNOT_PROVE;
use super::{LockFile, Snapshot};

/// One spec of a [`SpecSet`].
#[derive(Debug, Clone)]
pub struct SpecEntry {
    /// Its contracts.
    pub snapshot: Snapshot,
    /// The file it was read from, as shown in diagnostics (a lock file for locked specs).
    pub file: String,
    /// The path it is matched by when its name changed: its own path, or for an old file that
    /// was renamed, the new path.
    pub key: String,
    /// The parsed file, for positions; `None` for locked specs.
    pub(super) raw: Option<RawSpec>,
}

impl SpecEntry {
    /// Where `path` (keys and indices, e.g. `["limits", "max_turns"]`) was written.
    pub(super) fn locate(&self, path: &[&str]) -> Option<Pos> {
        self.raw.as_ref()?.positions.locate(path)
    }

    /// Where a JSON Pointer into the `input`/`output` table points.
    pub(super) fn locate_pointer(&self, table: &str, pointer: &str) -> Pos {
        self.raw
            .as_ref()
            .map_or(Pos::START, |r| r.positions.locate_pointer(table, pointer))
    }

    /// Where the spec's name was written.
    pub(super) fn name_pos(&self) -> Pos {
        self.raw.as_ref().map_or(Pos::START, |r| r.at.name)
    }
}

/// The specs of one side of a comparison.
#[derive(Debug, Clone, Default)]
pub struct SpecSet {
    pub(super) entries: Vec<SpecEntry>,
    /// Files that did not load (on the old side they cannot be compared; on the new side
    /// `check` reports why).
    pub(super) problems: Vec<Diagnostic>,
    pub(super) sources: HashMap<String, Arc<LineIndex>>,
}

impl SpecSet {
    /// The specs, in the order they were added.
    pub fn entries(&self) -> &[SpecEntry] {
        &self.entries
    }

    /// Files that did not load, as `cannot-prove` warnings.
    pub fn problems(&self) -> &[Diagnostic] {
        &self.problems
    }

    /// Every `*.toml` spec under `paths` (files or directories).
    pub fn from_paths(paths: &[PathBuf]) -> Result<Self, CheckError> {
        let mut sources = Vec::new();
        for p in paths {
            let io = |source| CheckError::Io {
                path: p.display().to_string(),
                source,
            };
            for f in spec_files(p).map_err(io)? {
                let text = std::fs::read(&f).map_err(|source| CheckError::Io {
                    path: f.display().to_string(),
                    source,
                })?;
                sources.push((f, String::from_utf8_lossy(&text).into_owned()));
            }
        }
        sources.sort();
        sources.dedup_by(|a, b| a.0 == b.0);
        Ok(Self::from_sources(&sources))
    }

    /// Specs given as (path, TOML text), e.g. read from a git revision.
    pub fn from_sources(sources: &[(PathBuf, String)]) -> Self {
        let mut set = SpecSet::default();
        for (path, text) in sources {
            set.add_source(path, text);
        }
        set
    }

    fn add_source(&mut self, path: &Path, text: &str) {
        let file = path.display().to_string();
        self.sources
            .insert(file.clone(), Arc::new(LineIndex::new(text)));
        // Parsed twice (the spec, and its positions): the loader keeps no positions.
        let built = match (load_spec_str(path, text), parse_spec(path, text).0) {
            (Ok(spec), Some(raw)) => Ok((raw, spec)),
            (Err(e), _) => {
                let first = e.diagnostics.into_iter().find(Diagnostic::is_error);
                Err(first.unwrap_or_else(|| {
                    Diagnostic::warning(file.clone(), Pos::START, "", "it does not parse")
                }))
            }
            (Ok(_), None) => Err(Diagnostic::warning(
                file.clone(),
                Pos::START,
                "",
                "it does not parse",
            )),
        };
        match built {
            Ok((raw, spec)) => self.entries.push(SpecEntry {
                snapshot: Snapshot::of(&spec),
                key: file.clone(),
                file,
                raw: Some(raw),
            }),
            Err(d) => {
                // A spec that does not load cannot be compared: say so, never "compatible".
                let mut w = Diagnostic::warning(
                    file,
                    d.pos(),
                    CANNOT_PROVE,
                    format!(
                        "cannot prove compatible: the spec does not load ({}: {})",
                        d.code, d.message
                    ),
                );
                w.spec = d.spec;
                self.problems.push(w);
            }
        }
    }

    /// The specs of a lock file, shown as `file` in diagnostics.
    pub fn from_lock(file: &str, lock: &LockFile) -> Self {
        SpecSet {
            entries: lock
                .specs
                .iter()
                .map(|s| SpecEntry {
                    snapshot: s.clone(),
                    file: file.to_owned(),
                    key: format!("{file}#{}", s.name),
                    raw: None,
                })
                .collect(),
            problems: Vec::new(),
            sources: HashMap::new(),
        }
    }

    /// Follows renames: an entry read from `from` is matched as if it lived at `to`.
    pub fn follow_rename(&mut self, from: &Path, to: &Path) {
        let from = from.display().to_string();
        for e in &mut self.entries {
            if e.file == from {
                e.key = to.display().to_string();
            }
        }
    }
}
