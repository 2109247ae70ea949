//! `subcontract schema`: a spec as the tool definition a host registers.

use std::path::PathBuf;

use clap::ValueEnum;
use subcontract::spec::ToolFormat;

use super::{emit, OK, USAGE, VIOLATIONS};

/// Arguments of `schema`.
#[derive(clap::Args)]
pub struct SchemaArgs {
    /// The spec file (.toml).
    spec: PathBuf,
    /// Which host's format.
    #[arg(long, value_enum, default_value_t = SchemaFormat::JsonSchema)]
    format: SchemaFormat,
}

#[derive(Clone, Copy, ValueEnum)]
enum SchemaFormat {
    JsonSchema,
    Openai,
    Anthropic,
    Mcp,
}

/// Runs `schema`; returns the exit code.
pub fn main(args: &SchemaArgs) -> u8 {
    let (path, format) = (&args.spec, args.format);
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
    let def = spec.erase().tool_definition(match format {
        SchemaFormat::JsonSchema => ToolFormat::JsonSchema,
        SchemaFormat::Openai => ToolFormat::Openai,
        SchemaFormat::Anthropic => ToolFormat::Anthropic,
        SchemaFormat::Mcp => ToolFormat::Mcp,
    });
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
