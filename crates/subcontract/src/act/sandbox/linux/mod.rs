//! The sandbox on Linux: Landlock on a spawning thread, a `pids` cgroup and rlimits set by
//! the child on itself, output read and bounded, everything killed at the end.

mod cgroup;
mod rules;

use std::path::PathBuf;
use std::pin::pin;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use super::capture::Capture;
use super::{
    command_env, CommandOutput, CommandRequest, SandboxError, SandboxMode, SandboxSupport,
};

/// How long a command's pipes are still read after every process of it was killed (only a
/// process outside the cgroup could hold them open longer).
const DRAIN_GRACE: Duration = Duration::from_secs(2);

struct Probed {
    abi: rules::Abi,
    cgroup: Result<cgroup::Base, String>,
}

fn probed() -> &'static Probed {
    static PROBED: OnceLock<Probed> = OnceLock::new();
    PROBED.get_or_init(|| Probed {
        abi: rules::Abi::detect(),
        cgroup: cgroup::Base::find(),
    })
}

pub(super) fn support() -> SandboxSupport {
    let p = probed();
    SandboxSupport {
        landlock_abi: p.abi.fs.map(|a| a as u8),
        fs: p.abi.fs.is_some_and(|a| a >= landlock::ABI::V3),
        net: p.abi.net.is_some(),
        scope: p.abi.scope,
        process_limit: p
            .cgroup
            .as_ref()
            .map(|b| b.dir.clone())
            .map_err(Clone::clone),
    }
}

/// Private temporary directories are named after the process that made them
/// ([`owned_name`](crate::act::lease::owned_name)), so that what a dead process left can be told
/// apart.
const TMP_PREFIX: &str = "subcontract-cmd-";

/// See [`super::cleanup_stale`].
pub(super) fn cleanup_stale() -> usize {
    use crate::act::lease::{owner_ended, owner_named};
    let ended = |name: &str, prefix: &str| {
        owner_named(name, prefix).is_some_and(|(pid, start)| owner_ended(pid, start))
    };
    let mut removed = 0;
    // The processes first: they may be writing in their temporary directories.
    if let Ok(base) = &probed().cgroup {
        removed += cgroup::remove_stale(base, |name| ended(name, ""));
    }
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return removed;
    };
    for entry in entries.flatten() {
        if !entry
            .file_name()
            .to_str()
            .is_some_and(|name| ended(name, TMP_PREFIX))
        {
            continue;
        }
        match crate::act::lease::remove_tree(&entry.path()) {
            Ok(()) => removed += 1,
            Err(e) => {
                tracing::warn!(error = %e, "a dead command's temporary directory could not be removed")
            }
        }
    }
    removed
}

/// The command's private temporary directory (`HOME` and `TMPDIR`), removed on drop.
struct PrivateTmp(PathBuf);

impl PrivateTmp {
    fn create() -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        loop {
            let dir = base.join(crate::act::lease::owned_name(TMP_PREFIX));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(Self(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            tracing::warn!(dir = %self.0.display(), error = %e, "could not remove a command's temporary directory");
        }
    }
}

/// How the wait for the command ended.
enum Ending {
    Exited(std::io::Result<std::process::ExitStatus>),
    TimedOut,
    Cancelled,
}

pub(super) async fn run(
    req: CommandRequest,
    program: PathBuf,
    cancel: CancellationToken,
) -> Result<CommandOutput, SandboxError> {
    let probed = probed();
    if cancel.is_cancelled() {
        return Err(SandboxError::Cancelled);
    }
    if let Some(missing) = support().missing_for(req.mode, req.network) {
        return Err(SandboxError::Unavailable(missing));
    }
    let spawn_err = |reason: String| SandboxError::Spawn {
        program: req.argv[0].clone(),
        reason,
    };
    let base = probed.cgroup.as_ref().map_err(|e| spawn_err(e.clone()))?;
    // Declared before the cgroup, so dropped after it: the processes die before their
    // directory is removed.
    let tmp = PrivateTmp::create().map_err(|e| spawn_err(format!("temporary directory: {e}")))?;
    let cg = cgroup::Cgroup::create(base, req.limits.max_processes)
        .map_err(|e| spawn_err(format!("cgroup: {e}")))?;

    let mut cmd = std::process::Command::new(&program);
    {
        use std::os::unix::process::CommandExt;
        cmd.arg0(&req.argv[0])
            .args(&req.argv[1..])
            .current_dir(&req.cwd)
            .env_clear()
            .envs(command_env(&tmp.0))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
    }
    let procs = cg
        .procs_file()
        .map_err(|e| spawn_err(format!("cgroup: {e}")))?;
    subcontract_sandbox::confine(
        &mut cmd,
        subcontract_sandbox::ChildSetup {
            cgroup_procs: Some(procs),
            max_file_bytes: Some(req.limits.max_file_bytes),
            no_core_dumps: true,
        },
    );
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(true);

    let started = Instant::now();
    let mut child = match req.mode {
        SandboxMode::None => cmd.spawn().map_err(|e| spawn_err(e.to_string()))?,
        SandboxMode::Os => {
            let mut writable = req.writable.clone();
            writable.push(tmp.0.clone());
            let rules = rules::Rules {
                abi: probed.abi,
                writable,
                network: req.network,
            };
            spawn_confined(cmd, rules).await.map_err(spawn_err)?
        }
    };
    let deadline = tokio::time::Instant::from_std(started + req.timeout);
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let max = req.limits.max_output_bytes;
    let (mut out, mut err) = (Capture::new(max), Capture::new(max));

    let (ending, status) = {
        let mut drains = pin!(async {
            tokio::join!(drain(stdout, &mut out), drain(stderr, &mut err));
        });
        let mut drained = false;
        let ending = loop {
            tokio::select! {
                () = &mut drains, if !drained => drained = true,
                s = child.wait() => break Ending::Exited(s),
                () = tokio::time::sleep_until(deadline) => break Ending::TimedOut,
                () = cancel.cancelled() => break Ending::Cancelled,
            }
        };
        // Whatever is left (background processes, the command itself at a timeout) dies
        // now: nothing outlives the command.
        cg.kill_until_empty(DRAIN_GRACE).await;
        let status = match &ending {
            Ending::Exited(s) => s.as_ref().ok().copied(),
            _ => tokio::time::timeout(DRAIN_GRACE, child.wait())
                .await
                .ok()
                .and_then(Result::ok),
        };
        if !drained
            && tokio::time::timeout(DRAIN_GRACE, &mut drains)
                .await
                .is_err()
        {
            tracing::warn!("a command's output pipes stayed open after it was killed");
        }
        (ending, status)
    };
    let duration = started.elapsed();
    cg.finish(Duration::from_secs(2)).await;
    drop(tmp);

    let timed_out = match ending {
        Ending::Cancelled => return Err(SandboxError::Cancelled),
        Ending::Exited(Err(e)) => return Err(spawn_err(format!("waiting for it: {e}"))),
        Ending::TimedOut => true,
        Ending::Exited(Ok(_)) => false,
    };
    use std::os::unix::process::ExitStatusExt;
    Ok(CommandOutput {
        exit_code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()),
        timed_out,
        duration,
        stdout: out.finish(),
        stderr: err.finish(),
    })
}

/// Spawns `cmd` from a fresh thread that first restricts itself with `rules`; the thread
/// ends right after, so nothing else ever runs restricted.
async fn spawn_confined(
    mut cmd: tokio::process::Command,
    rules: rules::Rules,
) -> Result<tokio::process::Child, String> {
    let handle = tokio::runtime::Handle::current();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("subcontract-sandbox-spawn".to_owned())
        .spawn(move || {
            // The child is registered with the runtime that awaits it.
            let _rt = handle.enter();
            let spawned = rules
                .restrict_current_thread()
                .and_then(|()| cmd.spawn().map_err(|e| e.to_string()));
            // Nobody waiting (the future was dropped): the child is dropped, which kills it,
            // and the cgroup's drop kills what it started.
            let _ = tx.send(spawned);
        })
        .map_err(|e| format!("spawning thread: {e}"))?;
    rx.await
        .map_err(|_| "the spawning thread ended without an answer".to_owned())?
}

/// Reads `pipe` to its end into `into` (which keeps what its bound allows).
async fn drain<R: tokio::io::AsyncRead + Unpin>(pipe: Option<R>, into: &mut Capture) {
    let Some(mut pipe) = pipe else { return };
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => into.push(&buf[..n]),
        }
    }
}
