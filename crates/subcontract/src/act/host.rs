//! What a host lends acting runs: the workspace their copies start from, where the copies
//! live, and where changes no one applied are kept.

use std::path::{Path, PathBuf};
use std::sync::Once;

use super::changes::Changes;
use super::lease::{cleanup_stale, default_copies_dir};

/// A host's settings for sub-agents that act ([`CtxBuilder::acting`](crate::CtxBuilder::acting);
/// a [`Host`](crate::host::Host) with a workspace has them).
///
/// ```
/// use subcontract::act::ActHost;
///
/// let dir = tempfile::tempdir()?;
/// let acting = ActHost::new(dir.path());
/// assert_eq!(acting.source(), dir.path());
/// assert!(acting.copies_dir().ends_with("subcontract-copies"));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct ActHost {
    source: PathBuf,
    copies_dir: PathBuf,
    patches_dir: PathBuf,
    cleaned: Once,
}

impl Clone for ActHost {
    fn clone(&self) -> Self {
        ActHost {
            source: self.source.clone(),
            copies_dir: self.copies_dir.clone(),
            patches_dir: self.patches_dir.clone(),
            cleaned: Once::new(),
        }
    }
}

impl ActHost {
    /// Copies of `workspace`, under the default directory outside it
    /// (`$TMPDIR/subcontract-copies`, or `SUBCONTRACT_COPIES_DIR`); kept patches in its
    /// `patches` subdirectory.
    pub fn new(workspace: impl AsRef<Path>) -> Self {
        let copies_dir = default_copies_dir();
        ActHost {
            source: workspace.as_ref().to_path_buf(),
            patches_dir: copies_dir.join("patches"),
            copies_dir,
            cleaned: Once::new(),
        }
    }

    /// Copies under `dir` instead (it must not be inside the workspace: a copy inside it would
    /// show up in the user's tree); kept patches in its `patches` subdirectory.
    #[must_use]
    pub fn with_copies_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.copies_dir = dir.as_ref().to_path_buf();
        self.patches_dir = self.copies_dir.join("patches");
        self
    }

    /// Kept patches under `dir` instead.
    #[must_use]
    pub fn with_patches_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.patches_dir = dir.as_ref().to_path_buf();
        self
    }

    /// The workspace a root acting run copies.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// Where working copies are made.
    pub fn copies_dir(&self) -> &Path {
        &self.copies_dir
    }

    /// Where changes no one applied are kept.
    pub fn patches_dir(&self) -> &Path {
        &self.patches_dir
    }

    /// Removes the copies of processes that died (`kill -9`, a crash) before this host's
    /// first copy: once per host.
    pub(crate) fn clean_stale_once(&self) {
        self.cleaned.call_once(|| {
            // Commands first: a dead host's command may still run inside its copy.
            let commands = super::sandbox::cleanup_stale();
            if commands > 0 {
                tracing::info!(
                    left = commands,
                    "removed what commands of dead processes left (their processes killed)"
                );
            }
            match cleanup_stale(&self.copies_dir) {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(copies = n, "removed working copies left by dead processes")
                }
                Err(e) => tracing::warn!(error = %e, "stale working copies could not be removed"),
            }
        });
    }

    /// Writes `changes` to `<patches dir>/<id>.patch` (or `<id>-2.patch`, … if taken), and
    /// returns the path; `None` (with a warning) if it cannot be written.
    pub(crate) fn keep(&self, changes: &Changes) -> Option<PathBuf> {
        if changes.is_empty() {
            return None;
        }
        if let Err(e) = std::fs::create_dir_all(&self.patches_dir) {
            tracing::warn!(error = %e, dir = %self.patches_dir.display(), "patch directory");
            return None;
        }
        for n in 1..1000u32 {
            let name = if n == 1 {
                format!("{}.patch", changes.id)
            } else {
                format!("{}-{n}.patch", changes.id)
            };
            let path = self.patches_dir.join(name);
            match changes.save(&path) {
                Ok(()) => return Some(path),
                Err(e) if path.exists() => {
                    tracing::trace!(error = %e, "patch name taken");
                }
                Err(e) => {
                    tracing::warn!(error = %e, path = %path.display(), "patch not kept");
                    return None;
                }
            }
        }
        None
    }
}
