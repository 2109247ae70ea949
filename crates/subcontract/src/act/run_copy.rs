//! An acting run's working copy as the run loop and the tools see it: the copy itself, the
//! policy it acts under, and the changes its sub-agents handed back that it has not yet
//! decided on. What the run does with it (make it, check a submission's changes, end it) is
//! `act::run`'s, which knows the run's context.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::changes::Changes;
use super::copy::WorkingCopy;
use super::host::ActHost;
use super::policy::WorkspacePolicy;
use super::sandbox::{self, CommandOutput, CommandRequest, SandboxError};
use crate::tool::workspace::Workspace;

/// A run's own working copy. Held by the run's context (and seen, read-only, by the contexts
/// of its sub-agents that do not act); removed when the run ends, after its changes were
/// captured.
pub(crate) struct RunCopy {
    /// The run that owns it: only that run's submission captures and checks its changes.
    pub(crate) run_id: Arc<str>,
    /// The copy on disk (removed when this is dropped).
    copy: Mutex<Option<WorkingCopy>>,
    root: PathBuf,
    /// The workspace tools' view of the copy.
    workspace: Arc<Workspace>,
    /// What the run may do, narrowed by every acting ancestor's.
    pub(crate) policy: WorkspacePolicy,
    host: Arc<ActHost>,
    /// Changes of finished sub-agents, by the child's run id, awaiting `accept_changes` or
    /// `discard_changes`.
    pending: Mutex<BTreeMap<String, Changes>>,
    /// The changes captured and checked when the output was accepted.
    submitted: Mutex<Option<Changes>>,
}

impl std::fmt::Debug for RunCopy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunCopy")
            .field("run_id", &self.run_id)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl RunCopy {
    /// Makes a working copy of `source` for the run `run_id`, acting under `policy` (already
    /// narrowed by every acting ancestor's).
    pub(crate) async fn create(
        source: PathBuf,
        policy: WorkspacePolicy,
        host: Arc<ActHost>,
        run_id: Arc<str>,
    ) -> Result<RunCopy, String> {
        let isolation = policy.isolation;
        let h = host.clone();
        let copy = tokio::task::spawn_blocking(move || {
            h.clean_stale_once();
            WorkingCopy::create(&source, isolation, h.copies_dir())
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
        let root = copy.root().to_path_buf();
        let workspace = Workspace::new(&root).map_err(|e| e.to_string())?;
        tracing::debug!(run_id = &*run_id, copy = %root.display(), "working copy made");
        Ok(RunCopy {
            run_id,
            copy: Mutex::new(Some(copy)),
            root,
            workspace: Arc::new(workspace),
            policy,
            host,
            pending: Mutex::default(),
            submitted: Mutex::default(),
        })
    }

    /// Notes the changes an accepted submission was checked with.
    pub(crate) fn set_submitted(&self, changes: Changes) {
        *self.submitted.lock().unwrap_or_else(|e| e.into_inner()) = Some(changes);
    }

    /// The copy's root directory.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The workspace tools' view of the copy.
    pub(crate) fn workspace(&self) -> &Arc<Workspace> {
        &self.workspace
    }

    /// The copy's changes against the files as the run found them.
    pub(crate) async fn capture(self: &Arc<Self>) -> Result<Changes, String> {
        let me = self.clone();
        let run_id = self.run_id.to_string();
        tokio::task::spawn_blocking(move || {
            let guard = me.copy.lock().unwrap_or_else(|e| e.into_inner());
            let copy = guard.as_ref().ok_or("the working copy is gone")?;
            copy.capture()
                .map(|mut c| {
                    c.id = run_id;
                    c
                })
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// Runs `argv` in the copy, in the sandbox, as this run's policy allows.
    pub(crate) async fn command(
        &self,
        argv: Vec<String>,
        timeout: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Result<CommandOutput, SandboxError> {
        let most = Duration::from_secs(self.policy.max_command_secs.max(1));
        let req = CommandRequest {
            argv,
            cwd: self.root.clone(),
            writable: vec![self.root.clone()],
            allowed_programs: self.policy.commands.clone(),
            network: self.policy.network,
            timeout: timeout.map_or(most, |t| t.min(most)),
            mode: self.policy.sandbox,
            limits: sandbox::CommandLimits::default(),
        };
        sandbox::run(req, cancel.clone()).await
    }

    /// The changes the accepted submission was checked with, taken once.
    pub(crate) fn take_submitted(&self) -> Option<Changes> {
        self.submitted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Holds a finished sub-agent's changes until this run accepts or discards them.
    pub(crate) fn hold(&self, changes: Changes) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(changes.id.clone(), changes);
    }

    /// The held changes with this id, taken out.
    pub(crate) fn take_pending(&self, id: &str) -> Option<Changes> {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id)
    }

    /// The ids of the changes held, for an error naming what there is.
    pub(crate) fn pending_ids(&self) -> Vec<String> {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Writes `changes` as a patch file of the host's patch directory, named by their id, and
    /// returns its path: how changes no one applied are kept, never lost.
    pub(crate) fn keep(&self, changes: &Changes) -> Option<PathBuf> {
        self.host.keep(changes)
    }

    /// Ends the run's hold on the copy: changes of sub-agents it never decided on are kept as
    /// patch files, and the copy is removed. Returns the kept patches' paths.
    pub(crate) async fn close(self: &Arc<Self>) -> Vec<PathBuf> {
        let pending: Vec<Changes> =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()))
                .into_values()
                .collect();
        let kept = pending.iter().filter_map(|c| self.keep(c)).collect();
        let copy = self.copy.lock().unwrap_or_else(|e| e.into_inner()).take();
        // Removing a large tree blocks.
        let _ = tokio::task::spawn_blocking(move || drop(copy)).await;
        kept
    }
}

/// A run that never reached its end (its future was dropped: its caller stopped waiting for it)
/// still loses nothing: what its copy holds, and what its sub-agents handed back undecided, is
/// kept as patch files before the copy goes. Blocks, but only on that path: a run that ended
/// closed its copy already.
impl Drop for RunCopy {
    fn drop(&mut self) {
        let Some(copy) = self
            .copy
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return;
        };
        let mut kept = Vec::new();
        match copy.capture() {
            Ok(mut c) => {
                c.id = self.run_id.to_string();
                kept.extend(self.host.keep(&c));
            }
            Err(e) => tracing::warn!(run_id = &*self.run_id, error = %e, "changes not captured"),
        }
        let pending = std::mem::take(self.pending.get_mut().unwrap_or_else(|e| e.into_inner()));
        kept.extend(pending.values().filter_map(|c| self.host.keep(c)));
        for path in kept {
            tracing::warn!(
                run_id = &*self.run_id,
                patch = %path.display(),
                "a run stopped before its end: its changes were kept"
            );
        }
    }
}
