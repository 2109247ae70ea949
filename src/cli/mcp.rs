//! The `subcontract mcp` command: loads the specs, resolves the model, serves over stdio.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use rust_decimal::Decimal;

use subcontract::events::{EventSink, JsonlSink};
use subcontract::mcp::{serve_stdio, McpConfig, McpError};

use super::resolve::resolve_model;

/// Exit code: usage or I/O error (bad paths, specs that do not load, no model).
const USAGE: u8 = 2;
/// Exit code: the server stopped with an error.
const FAILED: u8 = 1;

/// The command line of `subcontract mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// Spec files or directories (searched recursively for *.toml).
    #[arg(default_value = "specs/")]
    pub paths: Vec<PathBuf>,
    /// The directory the read-only workspace tools (read_file, list_dir, grep) see.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub workspace: PathBuf,
    /// The model: `openai:MODEL`, `anthropic:MODEL`, `replay:FILE` or `example` (offline,
    /// answers each spec with its first example). Default: $SUBCONTRACT_MODEL.
    #[arg(long, value_name = "PROVIDER:MODEL")]
    pub model: Option<String>,
    /// The provider's API root (with /v1 for OpenAI-compatible servers).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Record every call's run tree to this JSON Lines file.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Server-wide budget across all calls, in USD, greater than 0 (default: unlimited).
    #[arg(long, value_name = "USD")]
    pub max_cost_usd: Option<Decimal>,
    #[command(flatten)]
    pub telemetry: super::telemetry::TelemetryArgs,
}

/// Runs `subcontract mcp` and returns its exit code: 0 when the client closed the
/// connection, 1 when the server failed, 2 on a usage or I/O error. Writes only diagnostics and
/// logs, all to stderr: stdout carries the protocol.
pub fn main(args: McpArgs) -> u8 {
    match prepare(args) {
        Ok(config) => serve(config),
        Err(message) => {
            log(&format!("error: {message}"));
            USAGE
        }
    }
}

fn prepare(args: McpArgs) -> Result<McpConfig, String> {
    let specs = super::run::load_all(&args.paths)?;
    let name = match args.model {
        Some(m) => m,
        None => std::env::var("SUBCONTRACT_MODEL").map_err(|_| {
            "no model: pass --model PROVIDER:MODEL (or `example`, or `replay:FILE`) or set \
             SUBCONTRACT_MODEL"
                .to_string()
        })?,
    };
    let model = resolve_model(&name, args.base_url.as_deref(), &specs)
        .map_err(|e| format!("model `{name}`: {e}"))?;
    if let Some(limit) = args.max_cost_usd {
        // The same rule as a spec's `max_cost_usd`.
        subcontract::check_limit_usd(limit).map_err(|e| format!("--max-cost-usd {e}"))?;
    }
    if !args.workspace.is_dir() {
        return Err(format!(
            "--workspace {}: not a directory",
            args.workspace.display()
        ));
    }
    let trace = match &args.trace {
        Some(path) => Some(Arc::new(
            JsonlSink::create(path).map_err(|e| format!("--trace {}: {e}", path.display()))?,
        ) as Arc<dyn EventSink>),
        None => None,
    };
    let names: Vec<&str> = specs.iter().map(|s| s.name()).collect();
    log(&format!(
        "subcontract mcp: serving {} tool(s) [{}] with model {} on workspace {}",
        names.len(),
        names.join(", "),
        model.id(),
        args.workspace.display()
    ));
    // Specs that name their own model get it the way `--model` is resolved, with the same
    // base URL and the same `example` answers.
    let resolver_specs = specs.clone();
    let base_url = args.base_url;
    let mut config = McpConfig::new(specs, model, args.workspace);
    config.resolver = Some(Arc::new(move |name: &str| {
        resolve_model(name, base_url.as_deref(), &resolver_specs)
    }));
    config.max_cost_usd = args.max_cost_usd;
    config.trace = trace;
    config.log = true;
    Ok(config)
}

fn serve(config: McpConfig) -> u8 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            log(&format!("error: cannot start the runtime: {e}"));
            return FAILED;
        }
    };
    let result = rt.block_on(serve_stdio(config));
    // Don't let a blocking stdin read keep the process alive after the session ended.
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    match result {
        Ok(()) => 0,
        Err(e) => {
            log(&format!("error: {e}"));
            match e {
                // The configuration was refused before serving: a usage error.
                McpError::DuplicateName(_) | McpError::Workspace(_) | McpError::Tools(_) => USAGE,
                McpError::Session(_) | McpError::Join(_) => FAILED,
            }
        }
    }
}

fn log(line: &str) {
    let line = subcontract::redact::redact(line);
    let mut err = std::io::stderr().lock();
    let _ = err
        .write_all(line.as_bytes())
        .and_then(|()| err.write_all(b"\n"));
}
