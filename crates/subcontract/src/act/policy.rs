//! STUB (replaced at merge).
#![allow(missing_docs, dead_code)]
use std::str::FromStr;
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Isolation {
    Worktree,
    Copy,
    #[default]
    None,
}
impl FromStr for Isolation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "worktree" => Ok(Self::Worktree),
            "copy" => Ok(Self::Copy),
            "none" => Ok(Self::None),
            _ => Err(s.into()),
        }
    }
}
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SandboxMode {
    #[default]
    Os,
    None,
}
impl FromStr for SandboxMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "os" => Ok(Self::Os),
            "none" => Ok(Self::None),
            _ => Err(s.into()),
        }
    }
}
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkspacePolicy {
    pub isolation: Isolation,
    pub writes: Vec<String>,
    pub commands: Vec<String>,
    pub network: bool,
    pub checks: Vec<String>,
    pub max_changed_files: usize,
    pub max_diff_lines: usize,
    pub max_command_secs: u64,
    pub sandbox: SandboxMode,
}
pub struct PolicyProblem {
    pub code: &'static str,
    pub key: &'static str,
    pub message: String,
}
impl WorkspacePolicy {
    pub fn acts(&self) -> bool {
        self.isolation != Isolation::None
    }
    pub fn narrowed_by(&self, _p: &WorkspacePolicy) -> WorkspacePolicy {
        self.clone()
    }
    pub fn allows_write(&self, _p: &str) -> bool {
        true
    }
    pub fn problems(&self) -> Vec<PolicyProblem> {
        vec![]
    }
}
