//! Tools: what a model can call. A sub-agent wrapped with [`SubAgentSpec::as_tool`] is one too.
//!
//! [`SubAgentSpec::as_tool`]: crate::SubAgentSpec::as_tool

mod live;
#[cfg(feature = "mcp-client")]
pub mod mcp;
mod set;
mod typed;
pub mod workspace;

pub use live::{BoxError, Listing, LiveTools, ToolSource};
pub use set::{ToolEntry, ToolSet, ToolSetError};
pub use typed::{FnTool, IntoTool, ToolRef, ToolResult, TypedTool};

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::ctx::Ctx;
use crate::ground::{Body, Provenance};

/// What kind of work a tool does; the run loop runs sub-agent calls of one model response
/// concurrently and ordinary tools in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// An ordinary tool: runs in call order.
    Function,
    /// A sub-agent: runs concurrently with the other sub-agent calls of the same response.
    /// A run that stops (timeout, cancellation) waits for its sub-agent calls to end, so such a
    /// tool must return promptly once its context's cancellation token is cancelled.
    SubAgent,
}

/// What a tool call returns to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// Text the model reads (compact JSON for structured results).
    pub content: String,
    /// The structured result, when the tool has one as a JSON value: what [`ToolOutput::json`]
    /// was given, or the validated output of a sub-agent over JSON values (every TOML spec).
    /// A typed sub-agent's output is not turned back into a `Value` for this copy: its
    /// compact JSON is `content`, and [`SubAgentSpec::run_child`](crate::SubAgentSpec::run_child)
    /// returns it typed.
    pub structured: Option<Value>,
    /// Whether the call failed.
    pub is_error: bool,
    /// Where the result came from and which part of it is evidence, for
    /// [grounded outputs](crate::ground): by default (`None`) the whole content, from no named
    /// source. Boxed, so a result that names none (most) is one word larger, not seven.
    pub(crate) provenance: Option<Box<Provenance>>,
}

impl ToolOutput {
    /// A successful text result.
    pub fn text(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            structured: None,
            is_error: false,
            provenance: None,
        }
    }

    /// A successful structured result; the model reads its compact JSON.
    pub fn json(value: Value) -> Self {
        ToolOutput {
            content: crate::json::to_compact_string(&value),
            structured: Some(value),
            is_error: false,
            provenance: None,
        }
    }

    /// A failed call; the model reads `message`.
    pub fn error(message: impl Into<String>) -> Self {
        ToolOutput {
            content: message.into(),
            structured: None,
            is_error: true,
            provenance: None,
        }
    }

    /// Names a source this result came from: a document, a ticket, a URL, a row. A spec
    /// whose output grounds a value as `"source"` may then cite `id`, and text grounded
    /// beside that citation must occur in this result. Call it once per source; a result
    /// that names several is evidence for each.
    ///
    /// ```
    /// use subcontract::ToolOutput;
    ///
    /// let out = ToolOutput::text("Ticket 42: the login page times out after 30 s.")
    ///     .with_source("ticket-42");
    /// assert_eq!(out.provenance().sources(), ["ticket-42"]);
    /// ```
    pub fn with_source(mut self, id: impl Into<String>) -> Self {
        self.provenance_mut().sources.push(id.into());
        self
    }

    fn provenance_mut(&mut self) -> &mut Provenance {
        self.provenance.get_or_insert_with(Default::default)
    }

    /// Where the result came from, as grounding reads it.
    pub fn provenance(&self) -> &Provenance {
        static NONE: Provenance = Provenance::NONE;
        self.provenance.as_deref().unwrap_or(&NONE)
    }

    /// The result's evidence is only `excerpts`, each from the source it names: the content
    /// is the tool's presentation of them (line numbers, prefixes, notes).
    pub(crate) fn with_excerpts(mut self, excerpts: Vec<(Option<String>, String)>) -> Self {
        self.provenance_mut().body = Body::Excerpts(excerpts);
        self
    }

    /// The content is a structured value as JSON: its values are the evidence, from no source.
    // Only MCP tools return such results.
    #[cfg_attr(not(feature = "mcp-client"), allow(dead_code))]
    pub(crate) fn with_json_body(mut self) -> Self {
        self.provenance_mut().body = Body::Json;
        self
    }

    /// The content is a sub-agent's output: only `values`, which its contract grounded, are
    /// evidence, each from the sources it was found in.
    pub(crate) fn with_child_values(mut self, values: Vec<crate::ground::Carried>) -> Self {
        self.provenance_mut().body = Body::Child(values);
        self
    }
}

/// A tool. Object-safe: a [`ToolSet`] holds `Arc<dyn Tool>`. For a typed tool implement
/// [`TypedTool`] instead, which gets this trait for free.
///
/// The run loop validates arguments against [`input_schema`](Tool::input_schema) and asks the
/// approval gate before `call` runs, so `call` only sees arguments that match its schema.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name a model calls it by: `[A-Za-z0-9_-]{1,64}`.
    fn name(&self) -> &str;
    /// When to use it, for the model.
    fn description(&self) -> &str;
    /// JSON Schema of the arguments.
    fn input_schema(&self) -> Arc<Value>;
    /// JSON Schema of the structured result, if it has one.
    fn output_schema(&self) -> Option<Arc<Value>> {
        None
    }
    /// The name that stands for this tool and its siblings in a spec's tool list
    /// (`mcp__SERVER` for every tool of an MCP server), if it has one.
    fn group(&self) -> Option<&str> {
        None
    }
    /// Ordinary tool or sub-agent.
    fn kind(&self) -> ToolKind {
        ToolKind::Function
    }
    /// Runs the tool. Failures are returned as [`ToolOutput::error`], never as panics.
    async fn call(&self, args: Value, ctx: &Ctx) -> ToolOutput;
    /// The arguments' contract, already compiled, for a tool that has one (a spec's input
    /// contract): a [`ToolSet`] uses it instead of compiling [`input_schema`](Tool::input_schema)
    /// again.
    fn input_contract(&self) -> Option<crate::contract::Contract> {
        None
    }
    /// What the run loop calls once `args` have passed the tool's input contract (and the
    /// gate): a tool that would check them again may skip it. Defaults to
    /// [`call`](Tool::call).
    async fn call_checked(&self, args: Value, ctx: &Ctx) -> ToolOutput {
        self.call(args, ctx).await
    }
}

/// Whether `name` is a valid tool or spec name: `[A-Za-z0-9_-]{1,64}`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
