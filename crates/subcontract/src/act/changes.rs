//! STUB (replaced at merge).
#![allow(missing_docs, dead_code)]
use std::path::Path;
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FileStatus {
    Added,
    Modified,
    Deleted,
}
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChangedFile {
    pub path: String,
    pub status: FileStatus,
    pub insertions: u32,
    pub deletions: u32,
}
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Changes {
    pub id: String,
    pub base: String,
    pub files: Vec<ChangedFile>,
    pub diff: String,
}
#[derive(Debug, thiserror::Error)]
#[error("apply")]
pub struct ApplyError;
impl Changes {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
    pub fn violations(&self, _p: &super::WorkspacePolicy) -> Vec<String> {
        vec![]
    }
    pub fn apply(&self, _w: &Path) -> Result<(), ApplyError> {
        Err(ApplyError)
    }
    pub fn save(&self, _p: &Path) -> std::io::Result<()> {
        Ok(())
    }
    pub fn summary_json(&self) -> serde_json::Value {
        serde_json::json!({})
    }
}
