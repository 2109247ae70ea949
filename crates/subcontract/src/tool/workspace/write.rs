//! STUB (replaced at merge).
#![allow(missing_docs)]
use super::{Workspace, WorkspaceError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct WriteFileArgs {
    pub path: String,
    pub content: String,
}
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct EditFileArgs {
    pub path: String,
    pub old: String,
    pub new: String,
}
impl Workspace {
    pub fn write_file(&self, a: &WriteFileArgs) -> Result<String, WorkspaceError> {
        Err(WorkspaceError::NotFound {
            path: a.path.clone(),
        })
    }
    pub fn edit_file(&self, a: &EditFileArgs) -> Result<String, WorkspaceError> {
        Err(WorkspaceError::NotFound {
            path: a.path.clone(),
        })
    }
}
