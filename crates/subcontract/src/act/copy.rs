//! STUB (replaced at merge).
#![allow(missing_docs, dead_code)]
use std::path::{Path, PathBuf};
pub struct WorkingCopy {
    root: PathBuf,
}
#[derive(Debug, thiserror::Error)]
#[error("act")]
pub struct ActError;
impl WorkingCopy {
    pub fn create(_s: &Path, _i: super::Isolation, _d: &Path) -> Result<Self, ActError> {
        Err(ActError)
    }
    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn capture(&self) -> Result<super::Changes, ActError> {
        Err(ActError)
    }
}
pub fn default_copies_dir() -> PathBuf {
    std::env::temp_dir().join("subcontract-copies")
}
pub fn cleanup_stale(_d: &Path) -> Result<usize, ActError> {
    Ok(0)
}
