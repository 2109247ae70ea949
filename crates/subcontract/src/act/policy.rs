//! The `[workspace]` settings of a spec: how a run may act on its workspace.

use std::str::FromStr;

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

use crate::diag::codes;

/// One problem of a [`WorkspacePolicy`]: its stable code, the `[workspace]` key it is about,
/// and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyProblem {
    /// The stable diagnostic code (`invalid-glob`, `check-not-allowed`, `bad-limits`).
    pub code: &'static str,
    /// The key (`writes`, `checks`, `max_diff_lines`, …).
    pub key: &'static str,
    /// What is wrong.
    pub message: String,
}

impl FromStr for Isolation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "worktree" => Ok(Isolation::Worktree),
            "copy" => Ok(Isolation::Copy),
            "none" => Ok(Isolation::None),
            _ => Err(format!("unknown isolation `{s}`: worktree, copy or none")),
        }
    }
}

impl FromStr for SandboxMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "os" => Ok(SandboxMode::Os),
            "none" => Ok(SandboxMode::None),
            _ => Err(format!("unknown sandbox `{s}`: os or none")),
        }
    }
}

/// How an acting run's working copy is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// A git worktree at the source repository's HEAD, with its uncommitted and untracked
    /// files laid over it.
    Worktree,
    /// A plain recursive copy of the source directory (no repository needed).
    Copy,
    /// No working copy: the run does not act.
    #[default]
    None,
}

/// Whether commands run in an operating-system sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// In the operating system's sandbox.
    #[default]
    Os,
    /// Without one (the working copy is still the only place they are pointed at).
    None,
}

/// The `[workspace]` settings of a spec. Every field has a default; the default policy does
/// not act (`isolation = "none"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkspacePolicy {
    /// How the working copy is made.
    pub isolation: Isolation,
    /// Globs of the paths (relative to the workspace root, `/`-separated) the run may change;
    /// empty means every path. A glob without `/` matches a name at any depth (`*.py`), `*`
    /// stays within one directory, `**` crosses them, and a glob that matches a directory
    /// covers everything beneath it (`src`). Nothing under `.git` may ever change.
    pub writes: Vec<String>,
    /// Programs (a command's first word) the run may run; none by default.
    pub commands: Vec<String>,
    /// Whether commands may use the network.
    pub network: bool,
    /// Command lines run in the working copy when the output is submitted (split as a shell
    /// would, without running one); each program must be in `commands`.
    pub checks: Vec<String>,
    /// Most files one submission may change.
    pub max_changed_files: usize,
    /// Most changed lines (insertions plus deletions) one submission may hold.
    pub max_diff_lines: usize,
    /// Most seconds one command may run.
    pub max_command_secs: u64,
    /// Whether commands run in the operating system's sandbox.
    pub sandbox: SandboxMode,
}

impl Default for WorkspacePolicy {
    fn default() -> Self {
        WorkspacePolicy {
            isolation: Isolation::None,
            writes: Vec::new(),
            commands: Vec::new(),
            network: false,
            checks: Vec::new(),
            max_changed_files: 50,
            max_diff_lines: 5000,
            max_command_secs: 60,
            sandbox: SandboxMode::Os,
        }
    }
}

impl WorkspacePolicy {
    /// What is wrong with the policy, one sentence each; empty when it is usable.
    pub fn validate(&self) -> Vec<String> {
        self.problems()
            .into_iter()
            .map(|p| format!("{}: {}", p.key, p.message))
            .collect()
    }

    /// What is wrong with the policy, each with its stable diagnostic code and the key it is
    /// about (what `check` reports at the key's `file:line:col`).
    pub fn problems(&self) -> Vec<PolicyProblem> {
        let mut problems = Vec::new();
        for glob in &self.writes {
            if let Err(e) = compile(glob) {
                problems.push(PolicyProblem {
                    code: codes::INVALID_GLOB,
                    key: "writes",
                    message: format!("invalid glob `{glob}`: {e}"),
                });
            }
        }
        for line in &self.checks {
            let message = match self.check_argv(line) {
                Ok(argv) if self.commands.iter().any(|c| c == &argv[0]) => continue,
                Ok(argv) => format!(
                    "`{line}` runs `{}`, which is not in `commands` ({}): add it there, or the \
                     check cannot run",
                    argv[0],
                    if self.commands.is_empty() {
                        "none".to_owned()
                    } else {
                        self.commands.join(", ")
                    }
                ),
                Err(e) => e,
            };
            problems.push(PolicyProblem {
                code: codes::CHECK_NOT_ALLOWED,
                key: "checks",
                message,
            });
        }
        for (key, value) in [
            ("max_changed_files", self.max_changed_files as u64),
            ("max_diff_lines", self.max_diff_lines as u64),
            ("max_command_secs", self.max_command_secs),
        ] {
            if value == 0 {
                problems.push(PolicyProblem {
                    code: codes::BAD_LIMITS,
                    key,
                    message: format!("`{key}` must be at least 1, found 0"),
                });
            }
        }
        problems
    }

    /// Whether a run under this policy acts: it has a working copy of its own.
    pub fn acts(&self) -> bool {
        self.isolation != Isolation::None
    }

    /// The argument vectors of `checks`, split as a shell would split them.
    pub fn check_commands(&self) -> Result<Vec<Vec<String>>, String> {
        self.checks.iter().map(|l| self.check_argv(l)).collect()
    }

    fn check_argv(&self, line: &str) -> Result<Vec<String>, String> {
        match shlex::split(line) {
            Some(argv) if !argv.is_empty() => Ok(argv),
            Some(_) => Err(format!("`{line}` is an empty command")),
            None => Err(format!(
                "`{line}` cannot be split into words (an unclosed quote or a trailing `\\`)"
            )),
        }
    }

    /// This (a child's) policy, narrowed so that it allows nothing its acting parent does not:
    /// network only if both allow it, only the commands both allow, the smaller of each limit,
    /// the OS sandbox if either asks for it. `writes`, `checks` and `isolation` stay the
    /// child's own: each submission is checked against its own run's `writes`.
    #[must_use]
    pub fn narrowed_by(&self, parent: &WorkspacePolicy) -> WorkspacePolicy {
        WorkspacePolicy {
            isolation: self.isolation,
            writes: self.writes.clone(),
            commands: self
                .commands
                .iter()
                .filter(|c| parent.commands.contains(c))
                .cloned()
                .collect(),
            network: self.network && parent.network,
            checks: self.checks.clone(),
            max_changed_files: self.max_changed_files.min(parent.max_changed_files),
            max_diff_lines: self.max_diff_lines.min(parent.max_diff_lines),
            max_command_secs: self.max_command_secs.min(parent.max_command_secs),
            sandbox: if self.sandbox == SandboxMode::Os || parent.sandbox == SandboxMode::Os {
                SandboxMode::Os
            } else {
                SandboxMode::None
            },
        }
    }

    /// Whether the run may change `path` (relative to the workspace root, `/`-separated).
    /// Never a path under `.git` (in any letter case), an absolute path, or one with `..`; an
    /// invalid glob allows nothing.
    pub fn allows_write(&self, path: &str) -> bool {
        if !is_plain_relative(path) {
            return false;
        }
        if self.writes.is_empty() {
            return true;
        }
        let path = path.trim_start_matches("./");
        // The path itself and each directory above it: a glob naming a directory covers it.
        let mut prefixes = path
            .match_indices('/')
            .map(|(i, _)| &path[..i])
            .collect::<Vec<_>>();
        prefixes.push(path);
        self.writes.iter().any(|glob| match compile(glob) {
            Ok(m) => prefixes.iter().any(|p| m.is_match(p)),
            Err(_) => false,
        })
    }
}

/// A relative, `/`-separated path with neither `..`, an empty name, nor a `.git` component.
pub(crate) fn is_plain_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\0')
        && !path.contains('\\')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != ".." && !c.eq_ignore_ascii_case(".git"))
}

/// A glob of `writes`, matched as the `grep` tool's `path_glob` is: a glob without `/`
/// against the last name only.
struct Compiled {
    matcher: GlobMatcher,
    name_only: bool,
}

impl Compiled {
    fn is_match(&self, rel: &str) -> bool {
        if self.name_only {
            self.matcher.is_match(rel.rsplit('/').next().unwrap_or(rel))
        } else {
            self.matcher.is_match(rel)
        }
    }
}

fn compile(glob: &str) -> Result<Compiled, String> {
    let mut text = glob;
    while let Some(rest) = text.strip_prefix("./") {
        text = rest;
    }
    let text = text.trim_end_matches('/');
    if text.is_empty() {
        return Err("empty glob".to_owned());
    }
    let matcher = GlobBuilder::new(text)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| e.kind().to_string())?
        .compile_matcher();
    Ok(Compiled {
        matcher,
        name_only: !text.contains('/'),
    })
}
