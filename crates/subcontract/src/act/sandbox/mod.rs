//! STUB (replaced at merge).
#![allow(missing_docs, dead_code)]
use std::path::PathBuf;
use std::time::Duration;
#[derive(Debug, Clone, Copy, Default)]
pub struct CommandLimits;
pub struct CommandRequest {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub writable: Vec<PathBuf>,
    pub allowed_programs: Vec<String>,
    pub network: bool,
    pub timeout: Duration,
    pub mode: super::SandboxMode,
    pub limits: CommandLimits,
}
pub struct Captured {
    pub text: String,
    pub total_bytes: u64,
    pub cut: bool,
}
pub struct CommandOutput {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub duration: Duration,
    pub stdout: Captured,
    pub stderr: Captured,
}
impl CommandOutput {
    pub fn to_tool_text(&self) -> String {
        String::new()
    }
    pub fn status_text(&self) -> String {
        String::new()
    }
    pub fn tail(&self, _n: usize) -> String {
        String::new()
    }
}
#[derive(Debug, thiserror::Error)]
#[error("sandbox")]
pub struct SandboxError;
pub async fn run(
    _r: CommandRequest,
    _c: tokio_util::sync::CancellationToken,
) -> Result<CommandOutput, SandboxError> {
    Err(SandboxError)
}
