//! The sandbox every command of an acting run runs in.
//!
//! A command is a program and its arguments (never a shell line), run directly with:
//!
//! - **Writes confined** (`SandboxMode::Os`, Landlock): the command may write only beneath
//!   [`CommandRequest::writable`] (the run's copy) and a private temporary directory made for
//!   it and removed afterwards; it may read and execute the rest of the system, so
//!   interpreters and compilers work. `/dev/null` is writable too. The command also starts
//!   with no capability at all (even as root: empty bounding set), so neither
//!   `CAP_SYS_PTRACE` (the host's memory, its environment in `/proc`) nor any other lets it
//!   step around the rules.
//! - **Network closed** unless [`CommandRequest::network`]: TCP bind and connect are denied
//!   (Landlock ABI ≥ 4; on kernels whose ABI also has UDP or pathname-socket rules those are
//!   denied too), and connecting to abstract UNIX sockets or signalling processes outside the
//!   sandbox is scoped away (ABI ≥ 6, whether or not the network is allowed).
//! - **A minimal environment**: `PATH` = [`DEFAULT_PATH`] (fixed, never the host's: a host
//!   `PATH` may name directories a model could have written to, and the programs found must
//!   not depend on who started the process), `HOME` and `TMPDIR` = the private directory,
//!   `LANG` = `C.UTF-8`. No other variable of the host (API keys included) reaches a command.
//! - **An allow-list**: `argv[0]` must be one of [`CommandRequest::allowed_programs`],
//!   exactly; a bare name is looked up on [`DEFAULT_PATH`], a path-like one (`./x`,
//!   `/bin/sh`) is allowed only when listed as written.
//! - **Every process killed at the end**: each command gets its own process-count cgroup
//!   (`pids`, v2 or v1) that it joins before its first instruction. When the command exits,
//!   times out, is cancelled, or the future is dropped, everything left in that cgroup is
//!   killed, including what escaped the process group with `setsid`. Nothing outlives the
//!   command.
//! - **Limits**: the cgroup's `pids.max` (processes and threads; root is exempt from
//!   `RLIMIT_NPROC`, a cgroup is not), `RLIMIT_FSIZE`, no core files; stdout and stderr each
//!   keep their first and last bytes within [`CommandLimits::max_output_bytes`], the rest
//!   read and dropped.
//!
//! `SandboxMode::None` leaves out Landlock and the dropping of capabilities, nothing else.
//! When any part the mode needs cannot be set up (no Landlock, an ABI without the rights
//! relied on, no writable `pids` cgroup, not Linux), [`run`] refuses with what is missing:
//! the sandbox fails closed, never weaker.
//!
//! # How the confinement reaches the child
//! Landlock and capabilities restrict the calling *thread* and what it forks, so an `Os`
//! command is spawned from a fresh OS thread that restricts itself, spawns, and ends (no
//! other work ever runs on a restricted thread). The cgroup and the rlimits are per process, so the child sets them
//! on itself between `fork` and `exec` (crate `subcontract-sandbox`, the one `unsafe` hook):
//! there is no moment in which the command runs outside its cgroup or without its limits.
//!
//! # What it does not cover
//! Memory and CPU are not limited (only time); UDP is open on kernels whose Landlock has no
//! UDP rules (raw sockets need a capability the command lacks); disk space is not limited beyond `RLIMIT_FSIZE` per file; in
//! `None` mode a root command keeps root's powers (it can read the host's environment through
//! `/proc` and leave its cgroup): that mode is for trusted commands only.

// Used by the Linux implementation only.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
mod capture;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(all(test, target_os = "linux"))]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// The `PATH` every command gets, and where a bare `argv[0]` is looked up.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// How a command is confined: the `[workspace] sandbox` setting. `Os`: Landlock (writes,
/// network, scopes) plus everything of `None`, the default. `None` (a spec said
/// `sandbox = "none"`): the environment is still cleared, every process still killed at the
/// end, and the limits and output bounds still apply.
pub use super::policy::SandboxMode;

/// The limits of one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandLimits {
    /// Processes and threads alive at once in the command's cgroup (a fork bomb stops there).
    pub max_processes: u32,
    /// The largest file the command may write (`RLIMIT_FSIZE`): a bigger write fails with
    /// `EFBIG` (and `SIGXFSZ`).
    pub max_file_bytes: u64,
    /// The bytes of stdout, and separately of stderr, kept: the first and the last half.
    pub max_output_bytes: usize,
}

impl Default for CommandLimits {
    fn default() -> Self {
        Self {
            max_processes: 256,
            max_file_bytes: 256 << 20,
            max_output_bytes: 64 << 10,
        }
    }
}

/// One command to run.
#[derive(Debug, Clone)]
pub struct CommandRequest {
    /// The program (`argv[0]`) and its arguments; no shell parses them.
    pub argv: Vec<String>,
    /// The directory the command starts in (the run's copy).
    pub cwd: PathBuf,
    /// Directories the command may write beneath (the run's copy), besides its private
    /// temporary directory.
    pub writable: Vec<PathBuf>,
    /// The programs `argv[0]` may name, compared exactly.
    pub allowed_programs: Vec<String>,
    /// Whether the command may use the network (TCP connect and bind).
    pub network: bool,
    /// How long the command may run before every process of it is killed.
    pub timeout: Duration,
    /// Landlock or not.
    pub mode: SandboxMode,
    /// Process, file and output limits.
    pub limits: CommandLimits,
}

/// What one stream of a command printed, within the bound.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Captured {
    /// The bytes kept, as lossy UTF-8; when cut, the head and the tail with a marker
    /// `[… N bytes cut …]` between them.
    pub text: String,
    /// Every byte the stream carried.
    pub total_bytes: u64,
    /// Whether bytes were dropped.
    pub cut: bool,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// The exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did (9 after a timeout).
    pub signal: Option<i32>,
    /// Whether it ran into its timeout and was killed.
    pub timed_out: bool,
    /// From the spawn to the end.
    pub duration: Duration,
    /// Its standard output.
    pub stdout: Captured,
    /// Its standard error.
    pub stderr: Captured,
}

impl CommandOutput {
    /// How it ended, in words: `exit code 1`, `killed by signal 9`, `timed out after 3.0 s`.
    pub fn status_text(&self) -> String {
        if self.timed_out {
            format!(
                "timed out after {:.1} s, killed",
                self.duration.as_secs_f64()
            )
        } else {
            match (self.exit_code, self.signal) {
                (Some(code), _) => format!("exit code {code}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                (None, None) => "ended without an exit code".to_owned(),
            }
        }
    }

    /// The last `max_chars` characters of what it printed, stderr after stdout (where test
    /// runners put their verdict), cut at the front with a marker when longer.
    pub fn tail(&self, max_chars: usize) -> String {
        let mut all = String::new();
        for c in [&self.stdout, &self.stderr] {
            if !c.text.is_empty() {
                all.push_str(&c.text);
                if !c.text.ends_with('\n') {
                    all.push('\n');
                }
            }
        }
        let n = all.chars().count();
        if n <= max_chars {
            return all;
        }
        let cut: String = all.chars().skip(n - max_chars).collect();
        format!("[… {} characters before …]{cut}", n - max_chars)
    }

    /// The text a model sees: how it ended, how long it took, then stdout and stderr, each
    /// marked when cut.
    pub fn to_tool_text(&self) -> String {
        let ended = self.status_text();
        let mut text = format!("{ended}; {:.2} s\n", self.duration.as_secs_f64());
        for (name, c) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            if c.total_bytes == 0 {
                text.push_str(&format!("{name}: (empty)\n"));
                continue;
            }
            if c.cut {
                text.push_str(&format!(
                    "{name} ({} bytes, cut: only the start and the end are shown):\n",
                    c.total_bytes
                ));
            } else {
                text.push_str(&format!("{name}:\n"));
            }
            text.push_str(&c.text);
            if !c.text.ends_with('\n') {
                text.push('\n');
            }
        }
        text
    }
}

/// What the OS sandbox needs and this system lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// One sentence per missing piece.
    pub items: Vec<String>,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the OS sandbox cannot be set up: {}",
            self.items.join("; ")
        )
    }
}

impl std::error::Error for Missing {}

/// What this system offers the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSupport {
    /// The Landlock ABI of the kernel (as far as the `landlock` crate knows ABIs), or `None`
    /// without Landlock.
    pub landlock_abi: Option<u8>,
    /// Writes can be confined: Landlock with the truncate right (ABI ≥ 3).
    pub fs: bool,
    /// TCP bind and connect can be denied (ABI ≥ 4).
    pub net: bool,
    /// Abstract UNIX sockets and signals can be scoped (ABI ≥ 6).
    pub scope: bool,
    /// Where the per-command `pids` cgroups are made, or why they cannot be.
    pub process_limit: Result<PathBuf, String>,
}

impl SandboxSupport {
    /// What a command in `mode` (with the network allowed or not) would need and lacks.
    pub fn missing_for(&self, mode: SandboxMode, network: bool) -> Option<Missing> {
        let mut items = Vec::new();
        if mode == SandboxMode::Os {
            match self.landlock_abi {
                None => items.push(
                    "Landlock is not available (needs Linux ≥ 5.13 with landlock enabled)"
                        .to_owned(),
                ),
                Some(abi) => {
                    if !self.fs {
                        items.push(format!(
                            "Landlock ABI {abi} cannot deny truncating files (needs ABI ≥ 3, \
                             Linux ≥ 6.2)"
                        ));
                    }
                    if !network && !self.net {
                        items.push(format!(
                            "Landlock ABI {abi} cannot close the network (needs ABI ≥ 4, \
                             Linux ≥ 6.7; or allow the network)"
                        ));
                    }
                }
            }
        }
        if let Err(why) = &self.process_limit {
            items.push(format!("the process limit cannot be set up: {why}"));
        }
        (!items.is_empty()).then_some(Missing { items })
    }
}

/// What the system offers, or what is missing for the full OS sandbox (Landlock with the
/// network closed, and a process limit).
pub fn probe() -> Result<SandboxSupport, Missing> {
    let support = support();
    match support.missing_for(SandboxMode::Os, false) {
        Some(missing) => Err(missing),
        None => Ok(support),
    }
}

/// What the system offers the sandbox (probed once per process).
pub fn support() -> SandboxSupport {
    #[cfg(target_os = "linux")]
    {
        linux::support()
    }
    #[cfg(not(target_os = "linux"))]
    {
        SandboxSupport {
            landlock_abi: None,
            fs: false,
            net: false,
            scope: false,
            process_limit: Err("the command sandbox needs Linux".to_owned()),
        }
    }
}

/// Why a command did not run (or did not finish).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// `argv` was empty.
    #[error("run_command refused: argv is empty (give the program and its arguments)")]
    EmptyArgv,
    /// `argv[0]` is not on the allow-list.
    #[error("run_command refused: `{program}` is not an allowed program (allowed: {})", allowed.join(", "))]
    NotAllowed {
        /// What was asked for.
        program: String,
        /// The allow-list.
        allowed: Vec<String>,
    },
    /// `argv[0]` is allowed but no such executable exists.
    #[error("run_command refused: `{program}` was not found (looked in {where_})")]
    NotFound {
        /// What was asked for.
        program: String,
        /// Where it was looked for.
        where_: String,
    },
    /// The sandbox the mode needs cannot be set up here.
    #[error("run_command refused: {0}")]
    Unavailable(Missing),
    /// Setting up or spawning failed.
    #[error("run_command failed to start `{program}`: {reason}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        reason: String,
    },
    /// The run's cancellation fired; every process of the command was killed.
    #[error("run_command cancelled; the command was killed")]
    Cancelled,
}

/// Runs one command in the sandbox: refuses (before spawning anything) what the allow-list
/// or the system does not allow, then runs it to its end, its timeout, or `cancel`. Dropping
/// the future kills every process of the command too.
pub async fn run(
    req: CommandRequest,
    cancel: CancellationToken,
) -> Result<CommandOutput, SandboxError> {
    let Some(argv0) = req.argv.first() else {
        return Err(SandboxError::EmptyArgv);
    };
    if !req.allowed_programs.iter().any(|p| p == argv0) {
        return Err(SandboxError::NotAllowed {
            program: argv0.clone(),
            allowed: req.allowed_programs.clone(),
        });
    }
    let program = resolve(argv0, &req.cwd)?;
    #[cfg(target_os = "linux")]
    {
        linux::run(req, program, cancel).await
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (program, cancel);
        Err(SandboxError::Unavailable(
            support()
                .missing_for(req.mode, req.network)
                .unwrap_or_else(|| Missing {
                    items: vec!["the command sandbox needs Linux".to_owned()],
                }),
        ))
    }
}

/// Kills and removes what commands of processes that died (`kill -9`, a crash) left behind:
/// their cgroups, with every process still in them, and their private temporary directories.
/// Each is named by its owner's process id and start time, so only a dead owner's are
/// touched. Returns how many were removed. Called before a host's first working copy, beside
/// [`cleanup_stale`](super::cleanup_stale).
pub(crate) fn cleanup_stale() -> usize {
    #[cfg(target_os = "linux")]
    {
        linux::cleanup_stale()
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// The executable `argv0` names: a path-like name relative to `cwd` (or absolute), a bare
/// name on [`DEFAULT_PATH`].
fn resolve(argv0: &str, cwd: &Path) -> Result<PathBuf, SandboxError> {
    let not_found = |where_: String| SandboxError::NotFound {
        program: argv0.to_owned(),
        where_,
    };
    if argv0.is_empty() || argv0.contains('\0') {
        return Err(not_found(
            "nowhere: the name is empty or has a NUL".to_owned(),
        ));
    }
    if argv0.contains('/') {
        let path = cwd.join(argv0);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(not_found(path.display().to_string()))
        };
    }
    DEFAULT_PATH
        .split(':')
        .map(|dir| Path::new(dir).join(argv0))
        .find(|p| is_executable(p))
        .ok_or_else(|| not_found(format!("PATH={DEFAULT_PATH}")))
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// The whole environment of a command.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn command_env(tmp: &Path) -> [(&'static str, std::ffi::OsString); 4] {
    [
        ("PATH", DEFAULT_PATH.into()),
        ("HOME", tmp.into()),
        ("TMPDIR", tmp.into()),
        ("LANG", "C.UTF-8".into()),
    ]
}
