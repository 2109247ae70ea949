//! `subcontract schema`: a spec as the tool definition a host registers.

use std::path::PathBuf;

use clap::ValueEnum;
use serde_json::{json, Value};
use subcontract::provider::dialect;

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
        // Strict tool use refuses bounds, so the dialect restates them in descriptions; the
        // tool must then be marked strict, or it would be registered with its bounds gone.
        SchemaFormat::Anthropic => json!({
            "name": name, "description": description,
            "input_schema": dialect::anthropic(input), "strict": true,
        }),
        SchemaFormat::Mcp => {
            // What `subcontract mcp` serves: MCP needs an object output schema, so any other
            // output is wrapped as {"result": ...}.
            #[cfg(feature = "mcp")]
            let output = Value::Object(subcontract::mcp::output_schema(output).0);
            json!({
                "name": name, "description": description,
                "inputSchema": input, "outputSchema": output,
            })
        }
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
