//! The `subcontract` command line (design.md §4): a thin shell over the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::{json, Value};

use subcontract::check::{self, render, CheckOptions};
use subcontract::ctx::DEFAULT_MAX_DEPTH;
use subcontract::dialect;

/// Exit code: every contract holds.
const OK: u8 = 0;
/// Exit code: violations found.
const VIOLATIONS: u8 = 1;
/// Exit code: usage or I/O error.
const USAGE: u8 = 2;

#[derive(Parser)]
#[command(
    name = "subcontract",
    version,
    about = "Typed sub-agents with validated, length-bounded output contracts"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// `run`, `trace` and `mcp` (design.md §4) join this enum as they are built.
#[derive(Subcommand)]
enum Command {
    /// Check every spec's contracts; exit 0 all hold, 1 violations, 2 usage or I/O error.
    Check {
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
    },
    /// Print a spec as the tool definition a host registers.
    Schema {
        /// The spec file (.toml).
        spec: PathBuf,
        /// Which host's format.
        #[arg(long, value_enum, default_value_t = SchemaFormat::JsonSchema)]
        format: SchemaFormat,
    },
    /// Serve the specs as MCP tools over stdio (input/output schemas, structured content).
    #[cfg(feature = "mcp")]
    Mcp(subcontract::mcp::McpArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum CheckFormat {
    Human,
    Json,
    Github,
}

#[derive(Clone, Copy, ValueEnum)]
enum SchemaFormat {
    JsonSchema,
    Openai,
    Anthropic,
    Mcp,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { USAGE } else { OK };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    ExitCode::from(match cli.command {
        Command::Check {
            paths,
            tools,
            format,
            deny_warnings,
            max_depth,
        } => run_check(paths, tools, format, deny_warnings, max_depth),
        Command::Schema { spec, format } => run_schema(&spec, format),
        #[cfg(feature = "mcp")]
        Command::Mcp(args) => subcontract::mcp::main(args),
    })
}

fn run_check(
    paths: Vec<PathBuf>,
    tools: Option<PathBuf>,
    format: CheckFormat,
    deny_warnings: bool,
    max_depth: u32,
) -> u8 {
    let catalogue = match tools.as_deref().map(check::load_catalogue).transpose() {
        Ok(c) => c.unwrap_or_default(),
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
    let opts = CheckOptions {
        catalogue,
        max_depth,
        deny_warnings,
    };
    let report = match check::check_paths(&paths, &opts) {
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

fn run_schema(path: &std::path::Path, format: SchemaFormat) -> u8 {
    if let Err(e) = std::fs::metadata(path) {
        eprintln!("error: {}: {e}", path.display());
        return USAGE;
    }
    let spec = match subcontract::spec::load_spec(path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return VIOLATIONS;
        }
    };
    let name = spec.name();
    let description = spec.description();
    let input: &Value = spec.input_contract().schema();
    let output: &Value = spec.output_contract().schema();
    let def = match format {
        SchemaFormat::JsonSchema => json!({
            "name": name, "description": description,
            "input_schema": input, "output_schema": output,
        }),
        SchemaFormat::Openai => json!({
            "type": "function",
            "function": {
                "name": name, "description": description,
                "parameters": dialect::openai_strict(input), "strict": true,
            }
        }),
        SchemaFormat::Anthropic => json!({
            "name": name, "description": description,
            "input_schema": dialect::anthropic(input),
        }),
        SchemaFormat::Mcp => json!({
            "name": name, "description": description,
            "inputSchema": input, "outputSchema": output,
        }),
    };
    match serde_json::to_string_pretty(&def) {
        Ok(s) => {
            emit(&format!("{s}\n"));
            OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            USAGE
        }
    }
}

/// Writes to stdout without panicking when the reader went away (`| head`).
fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}
