//! One tool of an MCP server, as a [`Tool`]: its contracts compiled in the draft its schemas
//! name, its results turned into text a model may read.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::names::server_prefix;
use super::server::{McpError, Server};
use crate::contract::Contract;
use crate::ctx::Ctx;
use crate::tool::{Tool, ToolOutput};

/// A tool of an MCP server, named `mcp__SERVER__TOOL`. Made by
/// [`McpServers`](super::McpServers).
pub struct McpTool {
    server: Arc<Server>,
    /// The name the model sees.
    name: String,
    /// `mcp__SERVER`.
    group: String,
    /// The name the server knows it by.
    remote: String,
    description: String,
    input: Contract,
    output: Option<Contract>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    pub(super) fn new(
        server: Arc<Server>,
        name: String,
        t: &rmcp::model::Tool,
    ) -> Result<Self, McpError> {
        let bad = |message: String| McpError::Tool {
            server: server.config.name.clone(),
            tool: t.name.to_string(),
            message,
        };
        let input = Contract::compile_foreign(Arc::new(Value::Object((*t.input_schema).clone())))
            .map_err(|e| bad(format!("inputSchema: {e}")))?;
        let output = t
            .output_schema
            .as_ref()
            .map(|s| Contract::compile_foreign(Arc::new(Value::Object((**s).clone()))))
            .transpose()
            .map_err(|e| bad(format!("outputSchema: {e}")))?;
        Ok(McpTool {
            group: server_prefix(&server.config.name),
            description: t.description.as_deref().unwrap_or_default().to_owned(),
            remote: t.name.to_string(),
            server,
            name,
            input,
            output,
        })
    }

    /// The server's name for the tool.
    pub fn remote_name(&self) -> &str {
        &self.remote
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn input_schema(&self) -> Arc<Value> {
        self.input.schema().clone()
    }
    fn output_schema(&self) -> Option<Arc<Value>> {
        self.output.as_ref().map(|c| c.schema().clone())
    }
    fn input_contract(&self) -> Option<Contract> {
        Some(self.input.clone())
    }
    fn group(&self) -> Option<&str> {
        Some(&self.group)
    }

    async fn call(&self, args: Value, ctx: &Ctx) -> ToolOutput {
        if let Err(v) = self.input.validate(&args) {
            let v: Vec<String> = v.iter().map(|v| format!("- {v}")).collect();
            return ToolOutput::error(format!(
                "invalid arguments for `{}`:\n{}",
                self.name,
                v.join("\n")
            ));
        }
        self.call_checked(args, ctx).await
    }

    async fn call_checked(&self, args: Value, ctx: &Ctx) -> ToolOutput {
        let args = match args {
            Value::Object(m) => Some(m),
            Value::Null => None,
            _ => return ToolOutput::error(format!("`{}` takes an object of arguments", self.name)),
        };
        // A run that stops does not wait for the server.
        let result = tokio::select! {
            biased;
            _ = ctx.cancellation().cancelled() => return ToolOutput::error("the run was stopped before the MCP server answered"),
            r = self.server.call(&self.remote, args) => r,
        };
        match result {
            Err(message) => ToolOutput::error(message),
            Ok(r) => self.output(r),
        }
    }
}

impl McpTool {
    /// A `tools/call` result as the model sees it: text blocks as they are, binary described,
    /// structured content checked against the output schema, keys redacted.
    fn output(&self, r: rmcp::model::CallToolResult) -> ToolOutput {
        let server = &self.server.config.name;
        let is_error = r.is_error.unwrap_or(false);
        let mut text = String::new();
        let mut found = Found::default();
        for block in &r.content {
            let v = serde_json::to_value(block).unwrap_or(Value::Null);
            if !text.is_empty() {
                text.push('\n');
            }
            describe_block(&v, &mut text, &mut found);
        }
        let mut structured = r.structured_content;
        if !is_error {
            if let (Some(contract), Some(s)) = (&self.output, &structured) {
                if let Err(v) = contract.validate(s) {
                    let v: Vec<String> = v.iter().map(|v| format!("- {v}")).collect();
                    return ToolOutput::error(format!(
                        "MCP server `{server}`: the result of `{}` breaks its outputSchema, so it is not used:\n{}",
                        self.remote,
                        v.join("\n")
                    ));
                }
            } else if self.output.is_some() && structured.is_none() {
                return ToolOutput::error(format!(
                    "MCP server `{server}`: `{}` declares an outputSchema but returned no structuredContent",
                    self.remote
                ));
            }
        }
        if let Some(s) = structured.as_mut() {
            crate::redact::redact_value(s);
        }
        let json_only = text.is_empty();
        let content = if json_only {
            structured
                .as_ref()
                .map(crate::json::to_compact_string)
                .unwrap_or_default()
        } else {
            crate::redact::redact_string(text)
        };
        if is_error {
            return ToolOutput::error(format!(
                "MCP server `{server}`: `{}` failed: {content}",
                self.remote
            ));
        }
        let mut out = ToolOutput::text(content);
        out.structured = structured;
        for uri in found.links {
            out = out.with_source(uri);
        }
        if json_only {
            out.with_json_body()
        } else {
            // The text blocks and text resources are the evidence; the descriptions of what is
            // not shown are ours.
            let excerpts = found
                .excerpts
                .into_iter()
                .map(|(src, t)| (src, crate::redact::redact_string(t)))
                .collect();
            out.with_excerpts(excerpts)
        }
    }
}

/// What a result's blocks hold as evidence for grounded outputs: the text of text blocks and
/// text resources (each resource's under its URI), and the URIs of linked resources.
#[derive(Default)]
struct Found {
    excerpts: Vec<(Option<String>, String)>,
    links: Vec<String>,
}

/// One content block as text: text as it is; images, audio and binary resources described by
/// type and size, never inlined (base64 is noise to a model and can be megabytes).
fn describe_block(v: &Value, out: &mut String, found: &mut Found) {
    let s = |k: &str| v.get(k).and_then(Value::as_str);
    let size = |data: Option<&str>| data.map_or(0, |d| d.len() / 4 * 3);
    match s("type") {
        Some("text") => {
            let t = s("text").unwrap_or_default();
            out.push_str(t);
            found.excerpts.push((None, t.to_owned()));
        }
        Some(kind @ ("image" | "audio")) => out.push_str(&format!(
            "[{kind} content, {}, about {} bytes: not shown]",
            s("mimeType").unwrap_or("unknown type"),
            size(s("data"))
        )),
        Some("resource") => {
            let r = v.get("resource").cloned().unwrap_or(Value::Null);
            let uri = r.get("uri").and_then(Value::as_str).unwrap_or("?");
            match r.get("text").and_then(Value::as_str) {
                Some(t) => {
                    out.push_str(&format!("[resource {uri}]\n{t}"));
                    found.excerpts.push((Some(uri.to_owned()), t.to_owned()));
                }
                None => out.push_str(&format!(
                    "[binary resource {uri}, {}, about {} bytes: not shown]",
                    r.get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown type"),
                    size(r.get("blob").and_then(Value::as_str))
                )),
            }
        }
        Some("resource_link") => {
            out.push_str(&format!(
                "[resource link {} ({})]",
                s("uri").unwrap_or("?"),
                s("name").unwrap_or("")
            ));
            if let Some(uri) = s("uri") {
                found.links.push(uri.to_owned());
            }
        }
        other => out.push_str(&format!(
            "[content of type `{}`: not shown]",
            crate::diag::shown(other.unwrap_or("?"))
        )),
    }
}
