//! Running git with an environment of its own, and bounded output.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

use super::error::{ActError, STDERR_TAIL};

/// Stdout kept by default: enough for any listing this module asks for.
pub(crate) const DEFAULT_STDOUT: usize = 64 * 1024 * 1024;

/// The fixed identity and date of the commits made in private repositories, so that a
/// baseline depends on the files alone.
const IDENTITY: [(&str, &str); 6] = [
    ("GIT_AUTHOR_NAME", "subcontract"),
    ("GIT_AUTHOR_EMAIL", "subcontract@localhost"),
    ("GIT_AUTHOR_DATE", "946684800 +0000"),
    ("GIT_COMMITTER_NAME", "subcontract"),
    ("GIT_COMMITTER_EMAIL", "subcontract@localhost"),
    ("GIT_COMMITTER_DATE", "946684800 +0000"),
];

/// Which configuration a command reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Config {
    /// A repository of the user's (worktree add/remove, status): its own and the user's
    /// global configuration, as the user's own git would (not the system's).
    User,
    /// A private repository of this module: no global configuration either, so nothing of
    /// the user's (filters, diff drivers, prefixes) changes what is recorded or printed.
    Private,
}

/// One git invocation.
pub(crate) struct Git<'a> {
    cwd: &'a Path,
    config: Config,
    args: Vec<OsString>,
    stdin: Option<&'a [u8]>,
    max_stdout: usize,
    env: Vec<(&'static str, &'static str)>,
}

/// What a git command printed.
pub(crate) struct GitOutput {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: Vec<u8>,
    /// Stdout went on past the limit; the command was stopped and `stdout` is cut.
    pub(crate) truncated: bool,
    /// The tail of standard error.
    pub(crate) stderr: String,
}

impl<'a> Git<'a> {
    pub(crate) fn new(cwd: &'a Path, config: Config) -> Self {
        Git {
            cwd,
            config,
            args: Vec::new(),
            stdin: None,
            max_stdout: DEFAULT_STDOUT,
            env: Vec::new(),
        }
    }

    pub(crate) fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub(crate) fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// `--git-dir=<dir>` (and `--work-tree=<tree>`), as the first arguments.
    pub(crate) fn repo(mut self, git_dir: &Path, work_tree: Option<&Path>) -> Self {
        let mut pre = vec![flag("--git-dir=", git_dir)];
        if let Some(tree) = work_tree {
            pre.push(flag("--work-tree=", tree));
        }
        pre.append(&mut self.args);
        self.args = pre;
        self
    }

    /// Options for a command that hashes many files into a private repository: the new
    /// objects go into one pack (bulk check-in) rather than a file each, unsynced (the
    /// repository lives as long as its copy), and the allocator keeps the memory zlib takes and
    /// gives back for every file rather than returning it to the kernel each time. Only for
    /// adding files: the threshold would also make `diff` treat every file as binary.
    pub(crate) fn hashing_many(mut self) -> Self {
        let mut pre = vec![
            OsString::from("-c"),
            OsString::from("core.bigFileThreshold=1"),
            OsString::from("-c"),
            OsString::from("core.fsync=none"),
        ];
        pre.append(&mut self.args);
        self.args = pre;
        self.env.push(("MALLOC_TRIM_THRESHOLD_", "67108864"));
        self
    }

    pub(crate) fn stdin(mut self, data: &'a [u8]) -> Self {
        self.stdin = Some(data);
        self
    }

    pub(crate) fn max_stdout(mut self, max: usize) -> Self {
        self.max_stdout = max;
        self
    }

    fn shown_args(&self) -> String {
        self.args
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Runs the command and returns its output, whatever its exit status.
    pub(crate) fn output(self) -> Result<GitOutput, ActError> {
        let mut cmd = Command::new("git");
        // Nothing of the caller's git environment may redirect the command (GIT_DIR,
        // GIT_INDEX_FILE, GIT_CONFIG_PARAMETERS, GIT_EXTERNAL_DIFF, …).
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("GIT_") {
                cmd.env_remove(&key);
            }
        }
        cmd.env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            // Messages are parsed (conflicting files): untranslated.
            .env("LC_ALL", "C")
            .env("LANGUAGE", "C");
        for (key, value) in IDENTITY {
            cmd.env(key, value);
        }
        if self.config == Config::Private {
            cmd.env("GIT_CONFIG_GLOBAL", "/dev/null");
        }
        for (key, value) in &self.env {
            cmd.env(key, value);
        }
        // No hooks, no file-system monitor (both run programs named by configuration), no
        // automatic gc.
        cmd.args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "gc.auto=0",
            "-c",
            "maintenance.auto=false",
        ]);
        cmd.args(&self.args)
            .current_dir(self.cwd)
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let shown = self.shown_args();
        let mut child = cmd
            .spawn()
            .map_err(|e| ActError::io("running git in", self.cwd, e))?;
        let stderr = child.stderr.take();
        let stderr_thread = std::thread::spawn(move || {
            let mut tail = Vec::new();
            if let Some(mut err) = stderr {
                let mut buf = [0u8; 8192];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    tail.extend_from_slice(&buf[..n]);
                    if tail.len() > 4 * STDERR_TAIL {
                        tail.drain(..tail.len() - STDERR_TAIL);
                    }
                }
            }
            if tail.len() > STDERR_TAIL {
                tail.drain(..tail.len() - STDERR_TAIL);
            }
            String::from_utf8_lossy(&tail).trim().to_owned()
        });
        let stdin_thread = match (self.stdin, child.stdin.take()) {
            (Some(data), Some(mut pipe)) => {
                let data = data.to_vec();
                Some(std::thread::spawn(move || {
                    // A command that stops reading early (an error) closes the pipe: fine.
                    let _ = pipe.write_all(&data);
                }))
            }
            _ => None,
        };
        let mut stdout = Vec::new();
        let mut truncated = false;
        if let Some(mut out) = child.stdout.take() {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match out.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if stdout.len() + n > self.max_stdout {
                            let room = self.max_stdout - stdout.len();
                            stdout.extend_from_slice(&buf[..room]);
                            truncated = true;
                            break;
                        }
                        stdout.extend_from_slice(&buf[..n]);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let _ = child.kill();
                        let _ = child.wait();
                        return Err(ActError::io("reading the output of git in", self.cwd, e));
                    }
                }
            }
            if truncated {
                // Past the bound: the rest is not wanted, and reading it would cost memory.
                let _ = child.kill();
            }
        }
        let status = child
            .wait()
            .map_err(|e| ActError::io("waiting for git in", self.cwd, e))?;
        if let Some(t) = stdin_thread {
            let _ = t.join();
        }
        let stderr = stderr_thread.join().unwrap_or_default();
        tracing::trace!(args = %shown, %status, "git");
        Ok(GitOutput {
            status,
            stdout,
            truncated,
            stderr,
        })
    }

    /// Runs the command; a non-zero exit is [`ActError::Git`].
    pub(crate) fn run(self) -> Result<GitOutput, ActError> {
        let shown = self.shown_args();
        let out = self.output()?;
        if out.status.success() || out.truncated {
            Ok(out)
        } else {
            Err(failed(shown, &out))
        }
    }

    /// Runs the command and returns its stdout as one trimmed line of text.
    pub(crate) fn line(self) -> Result<String, ActError> {
        let out = self.run()?;
        Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
    }
}

/// The error of a command that failed.
pub(crate) fn failed(args: String, out: &GitOutput) -> ActError {
    ActError::Git {
        args,
        status: out.status.to_string(),
        stderr: out.stderr.clone(),
    }
}

fn flag(name: &str, path: &Path) -> OsString {
    let mut f = OsString::from(name);
    f.push(path.as_os_str());
    f
}
