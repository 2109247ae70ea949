//! The `subcontract mcp` command: loads the specs, resolves the model, serves over stdio.

use std::io::Write;
use std::path::PathBuf;

use rust_decimal::Decimal;

use subcontract::mcp::{serve_stdio, McpConfig, McpError};

use super::host::HostArgs;

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
    #[command(flatten)]
    pub host: HostArgs,
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
    let code = rt.block_on(async {
        // The MCP servers the specs name start here, before the first request is read.
        match prepare(args).await {
            Ok(config) => serve(config).await,
            Err(message) => {
                log(&format!("error: {message}"));
                USAGE
            }
        }
    });
    // Don't let a blocking stdin read keep the process alive after the session ended.
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    code
}

async fn prepare(args: McpArgs) -> Result<McpConfig, String> {
    let specs = super::run::load_all(&args.paths)?;
    if let Some(limit) = args.max_cost_usd {
        // The same rule as a spec's `max_cost_usd`.
        subcontract::budget::check_limit_usd(limit).map_err(|e| format!("--max-cost-usd {e}"))?;
    }
    if !args.host.workspace.is_dir() {
        return Err(format!(
            "--workspace {}: not a directory",
            args.host.workspace.display()
        ));
    }
    let model = args.host.model_name()?;
    // Resolved when the server starts: a model that cannot be made is an error then.
    let names: Vec<&str> = specs.iter().map(|s| s.name()).collect();
    log(&format!(
        "subcontract mcp: serving {} tool(s) [{}] with model {} on workspace {}",
        names.len(),
        names.join(", "),
        model,
        args.host.workspace.display()
    ));
    let mut config = McpConfig::new(args.host.host(&specs, specs.len(), &args.paths).await?);
    config.max_cost_usd = args.max_cost_usd;
    config.log = true;
    Ok(config)
}

async fn serve(config: McpConfig) -> u8 {
    match serve_stdio(config).await {
        Ok(()) => 0,
        Err(e) => {
            log(&format!("error: {e}"));
            match e {
                // The configuration was refused before serving: a usage error.
                McpError::DuplicateName(_) | McpError::Host(_) => USAGE,
                _ => FAILED,
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
