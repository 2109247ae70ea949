//! `subcontract check`: every spec's contracts, rendered for a person, a program or GitHub.

use std::path::PathBuf;

use clap::ValueEnum;
use subcontract::check::{self, render, CheckOptions};
use subcontract::model::PriceTable;
use subcontract::DEFAULT_MAX_DEPTH;

use super::{emit, OK, USAGE, VIOLATIONS};

/// Arguments of `check`.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// Spec files or directories (searched recursively for *.toml).
    #[arg(default_value = "specs/")]
    paths: Vec<PathBuf>,
    /// A TOML catalogue of further tools specs may name ([[tool]] name, description, input).
    #[arg(long, value_name = "FILE")]
    tools: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
    format: CheckFormat,
    /// Fail on warnings too.
    #[arg(long)]
    deny_warnings: bool,
    /// Deepest sub-agent depth allowed (the host is depth 0).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_DEPTH)]
    max_depth: u32,
    /// A model the specs that name none will run on (repeatable): warn when one model call's
    /// worst case on it is over a spec's max_cost_usd (a spec's own model is always checked).
    #[arg(long = "model", value_name = "PROVIDER:MODEL")]
    models: Vec<String>,
    /// Extra or overriding model prices (TOML, USD per million tokens).
    #[arg(long, value_name = "FILE")]
    prices: Option<PathBuf>,
    /// MCP servers whose tools specs may name (the mcpServers format of .mcp.json): they are
    /// started and their tools listed, so an unknown server or tool is an error. A .mcp.json
    /// beside the specs is used without it; with neither, MCP tools are `mcp-unchecked`.
    #[arg(long, value_name = "FILE")]
    mcp_config: Option<PathBuf>,
    #[command(flatten)]
    compat: super::compat::CompatArgs,
}

/// An output format of `check` and `diff`.
#[derive(Clone, Copy, ValueEnum)]
pub enum CheckFormat {
    Human,
    Json,
    Github,
}

/// Runs `check`; returns the exit code.
pub fn main(args: CheckArgs) -> u8 {
    let CheckArgs {
        paths,
        tools,
        format,
        deny_warnings,
        max_depth,
        models,
        prices,
        mcp_config,
        compat,
    } = args;
    let mut price_table = PriceTable::builtin();
    if let Some(path) = &prices {
        match PriceTable::from_toml_file(path) {
            Ok(t) => {
                price_table.extend(t);
            }
            Err(e) => {
                eprintln!("error: {e}");
                return USAGE;
            }
        }
    }
    let catalogue = match tools.as_deref().map(check::load_catalogue).transpose() {
        Ok(c) => c.unwrap_or_default(),
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
    let mcp = match mcp_listing(mcp_config.as_deref(), &paths) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
    let opts = CheckOptions {
        catalogue,
        max_depth,
        deny_warnings,
        models,
        prices: price_table,
        mcp,
    };
    let report = match check::check_paths(&paths, &opts) {
        Ok(r) if compat.against.is_some() => {
            match super::compat::against(&paths, &compat, deny_warnings) {
                Ok(c) => return super::compat::finish(&r.merge(c), format),
                Err(e) => {
                    eprintln!("error: {e}");
                    return USAGE;
                }
            }
        }
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
    let format = match format {
        CheckFormat::Human => render::Format::Human,
        CheckFormat::Json => render::Format::Json,
        CheckFormat::Github => render::Format::Github,
    };
    emit(&render::render(&report, format));
    if report.failed() {
        VIOLATIONS
    } else {
        OK
    }
}

/// The tools of the MCP config's servers (`--mcp-config`, else a `.mcp.json` beside the specs),
/// listed by starting them; `None` when there is no config.
#[cfg(feature = "mcp-client")]
fn mcp_listing(
    flag: Option<&std::path::Path>,
    paths: &[PathBuf],
) -> Result<Option<check::McpListing>, String> {
    use subcontract::tool::mcp::{
        find_mcp_config, load_mcp_config, render_diagnostics, server_prefix, McpServers,
    };
    let Some(path) = find_mcp_config(flag, paths)? else {
        return Ok(None);
    };
    let config = load_mcp_config(&path).map_err(|d| render_diagnostics(&d))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    // The servers start, list and stop inside the runtime their processes belong to.
    let file = path.display().to_string();
    let listing = runtime.block_on(async move {
        let servers = McpServers::new(config);
        let tools = servers.all_tools().await.map_err(|e| e.to_string())?;
        let groups = servers.names().map(server_prefix);
        Ok::<_, String>(check::McpListing::new(file, groups, &tools))
    })?;
    tracing::info!(
        "{}: {} MCP server(s), {} tool(s)",
        path.display(),
        listing.groups.len(),
        listing.tools.len()
    );
    Ok(Some(listing))
}

/// Without MCP client support a config cannot be listed: refused, never ignored.
#[cfg(not(feature = "mcp-client"))]
fn mcp_listing(
    flag: Option<&std::path::Path>,
    _paths: &[PathBuf],
) -> Result<Option<check::McpListing>, String> {
    match flag {
        None => Ok(None),
        Some(_) => Err("--mcp-config: this build has no MCP client (feature `mcp-client`)".into()),
    }
}
