//! The workspace functions as tools a model can call.

use std::sync::Arc;

use async_trait::async_trait;

use super::{GrepArgs, ListDirArgs, ReadFileArgs, Workspace, WorkspaceError};
use crate::ctx::Ctx;
use crate::tool::{Tool, ToolOutput, ToolSet, ToolSetError, TypedTool};

/// The name of the built-in `read_file` tool, for a spec's tool list
/// ([`SpecBuilder::tool`](crate::SpecBuilder::tool)): a constant cannot be misspelt.
pub const READ_FILE: &str = "read_file";
/// The name of the built-in `list_dir` tool.
pub const LIST_DIR: &str = "list_dir";
/// The name of the built-in `grep` tool.
pub const GREP: &str = "grep";

/// Names of the built-in workspace tools.
pub const BUILTIN_TOOLS: [&str; 3] = [READ_FILE, LIST_DIR, GREP];

/// `f` over the workspace the run sees (its working copy, when it or an ancestor acts; else
/// the tool's own), off the async workers (file system walks block); its error as the tool's
/// error text.
async fn blocking<T: Send + 'static>(
    name: &str,
    ws: &Arc<Workspace>,
    ctx: &Ctx,
    f: impl FnOnce(&Workspace) -> Result<T, WorkspaceError> + Send + 'static,
) -> Result<T, String> {
    let ws = ctx.copy_workspace().unwrap_or(ws).clone();
    tokio::task::spawn_blocking(move || f(&ws))
        .await
        .map_err(|e| format!("{name} failed: {e}"))?
        .map_err(|e| e.to_string())
}

/// The `read_file` tool over a [`Workspace`].
#[derive(Debug, Clone)]
pub struct ReadFileTool(pub Arc<Workspace>);

#[async_trait]
impl TypedTool for ReadFileTool {
    type Args = ReadFileArgs;
    type Output = String;
    fn name(&self) -> &str {
        READ_FILE
    }
    fn description(&self) -> &str {
        "Read a text file of the workspace (path relative to its root), with line numbers, from start_line (default 1) on. Long files are cut with a note saying how to continue."
    }
    async fn call(&self, args: ReadFileArgs, ctx: &Ctx) -> Result<String, String> {
        text_of(self.shown(args, ctx).await)
    }
    fn into_tool(self) -> Arc<dyn Tool> {
        Shows::erase(self)
    }
}

#[async_trait]
impl Shows for ReadFileTool {
    async fn shown(&self, args: ReadFileArgs, ctx: &Ctx) -> ToolOutput {
        let path = args.path.clone();
        match blocking("read_file", &self.0, ctx, move |ws| {
            ws.read_file_shown(&args)
        })
        .await
        {
            // The file's path is the source; its lines without their numbers the evidence.
            Ok(shown) => {
                ToolOutput::text(shown.text).with_excerpts(vec![(Some(path), shown.evidence)])
            }
            Err(e) => ToolOutput::error(e),
        }
    }
}

/// The `list_dir` tool over a [`Workspace`].
#[derive(Debug, Clone)]
pub struct ListDirTool(pub Arc<Workspace>);

#[async_trait]
impl TypedTool for ListDirTool {
    type Args = ListDirArgs;
    type Output = String;
    fn name(&self) -> &str {
        LIST_DIR
    }
    fn description(&self) -> &str {
        "List a directory of the workspace (default: its root), one entry per line; directories end with '/'. A name holding a control character (such as a newline), '\"' or '\\' is shown as a JSON string, e.g. \"a\\nb.txt\"."
    }
    async fn call(&self, args: ListDirArgs, ctx: &Ctx) -> Result<String, String> {
        text_of(self.shown(args, ctx).await)
    }
    fn into_tool(self) -> Arc<dyn Tool> {
        Shows::erase(self)
    }
}

#[async_trait]
impl Shows for ListDirTool {
    async fn shown(&self, args: ListDirArgs, ctx: &Ctx) -> ToolOutput {
        match blocking("list_dir", &self.0, ctx, move |ws| ws.list_dir_shown(&args)).await {
            // The entries' names are evidence, from no source; the notes and counts are ours.
            Ok(listed) => ToolOutput::text(listed.text).with_excerpts(vec![(None, listed.names)]),
            Err(e) => ToolOutput::error(e),
        }
    }
}
/// The `grep` tool over a [`Workspace`].
///
/// It returns what [`Workspace::grep`] does, and one line more when the search looked at a
/// single file without showing all of it while the run offers `read_file`
/// ([`Ctx::offered_tool`]): the `read_file` call that shows that file. Measured on a 1.5B model, a grep of the one file a
/// question names, for a word that is not the value asked (`service`), was followed by an
/// invented answer; with this line it read the file.
#[derive(Debug, Clone)]
pub struct GrepTool(pub Arc<Workspace>);

#[async_trait]
impl TypedTool for GrepTool {
    type Args = GrepArgs;
    type Output = String;
    fn name(&self) -> &str {
        GREP
    }
    fn description(&self) -> &str {
        "Search the workspace's text files for a regular expression (Rust syntax), optionally only files matching path_glob (e.g. 'src/**/*.rs'); prints path:line: text per match. A path holding a control character, '\"', '\\' or ':' is shown as a JSON string, e.g. \"a\\nb.txt\":3: text."
    }
    async fn call(&self, args: GrepArgs, ctx: &Ctx) -> Result<String, String> {
        text_of(self.shown(args, ctx).await)
    }
    fn into_tool(self) -> Arc<dyn Tool> {
        Shows::erase(self)
    }
}

#[async_trait]
impl Shows for GrepTool {
    async fn shown(&self, args: GrepArgs, ctx: &Ctx) -> ToolOutput {
        match blocking("grep", &self.0, ctx, move |ws| ws.grep_found(&args)).await {
            // Each file with a shown match is a source; its matched lines, without the
            // `path:line:` prefixes, the evidence, each line a piece of its own (lines of one
            // file far apart were never next to each other). A search that matched nothing
            // adds none.
            Ok(found) => {
                let text = with_read_it(found.text, found.partly_shown.as_ref(), ctx);
                let excerpts = found
                    .evidence
                    .into_iter()
                    .flat_map(|(path, lines)| {
                        lines
                            .lines()
                            .map(|l| (Some(path.clone()), l.to_owned()))
                            .collect::<Vec<_>>()
                    })
                    .collect();
                ToolOutput::text(text).with_excerpts(excerpts)
            }
            Err(e) => ToolOutput::error(e),
        }
    }
}

/// `text` and, when the search partly showed the one file it looked at and the run offers
/// `read_file`, the line that names the call showing it.
fn with_read_it(mut text: String, partly: Option<&super::grep::PartlyShown>, ctx: &Ctx) -> String {
    if let Some(file) = partly {
        if ctx.offered_tool("read_file").is_some() {
            text.push_str(&read_it(file));
        }
    }
    text
}

/// What the typed interface returns of a shown result: its text, or its error.
fn text_of(o: ToolOutput) -> Result<String, String> {
    if o.is_error {
        Err(o.content)
    } else {
        Ok(o.content)
    }
}

/// A typed workspace tool whose result keeps the workspace's own text apart from the tool's
/// presentation of it (line numbers, prefixes, notes), for grounded outputs.
#[async_trait]
trait Shows: TypedTool {
    async fn shown(&self, args: Self::Args, ctx: &Ctx) -> ToolOutput;

    fn erase(self) -> Arc<dyn Tool> {
        let schema = Arc::new(schemars::schema_for!(Self::Args).to_value());
        Arc::new(Erased {
            inner: self,
            schema,
        })
    }
}

struct Erased<T> {
    inner: T,
    schema: Arc<serde_json::Value>,
}

#[async_trait]
impl<T: Shows> Tool for Erased<T> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn input_schema(&self) -> Arc<serde_json::Value> {
        self.schema.clone()
    }
    async fn call(&self, args: serde_json::Value, ctx: &Ctx) -> ToolOutput {
        match serde_json::from_value(args) {
            Ok(a) => self.inner.shown(a, ctx).await,
            Err(e) => ToolOutput::error(format!("invalid arguments: {e}")),
        }
    }
}

/// The line that names the `read_file` call showing a file whole; the path as JSON, so a
/// name cannot forge the line.
fn read_it(file: &super::grep::PartlyShown) -> String {
    let call = serde_json::json!({ "path": file.rel });
    if file.matched {
        format!("Only the matching lines are shown; to see the lines around them, read the file: read_file {call}.\n")
    } else {
        format!("No line matches; to see what the file holds, read it: read_file {call}.\n")
    }
}

impl Workspace {
    /// The three read-only tools over this workspace.
    pub fn tools(self) -> Vec<Arc<dyn Tool>> {
        let ws = Arc::new(self);
        vec![
            ReadFileTool(ws.clone()).into_tool(),
            ListDirTool(ws.clone()).into_tool(),
            GrepTool(ws).into_tool(),
        ]
    }

    /// A tool set holding the three read-only tools.
    pub fn tool_set(self) -> Result<ToolSet, ToolSetError> {
        let mut set = ToolSet::new();
        for t in self.tools() {
            set.insert(t)?;
        }
        Ok(set)
    }
}
