//! The `subcontract` command line (its contract: `src/docs/invariants.md`): a thin shell over the library.

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::{json, Value};

use subcontract::check::{self, render, CheckOptions};
use subcontract::provider::dialect;
use subcontract::DEFAULT_MAX_DEPTH;

/// Exit code: every contract holds.
const OK: u8 = 0;
/// Exit code: violations found.
const VIOLATIONS: u8 = 1;
/// Exit code: usage or I/O error.
const USAGE: u8 = 2;

/// Every line this binary writes to stderr passes [`subcontract::redact`], like the log and
/// the trace: an error can quote a key a provider echoed. (Shadows the standard macro so no
/// line in this file can miss it.)
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let line = format!($($arg)*);
        let mut err = std::io::stderr().lock();
        let _ = err
            .write_all(subcontract::redact::redact(&line).as_bytes())
            .and_then(|()| err.write_all(b"\n"));
    }};
}

#[derive(Parser)]
#[command(
    name = "subcontract",
    version,
    about = "Typed sub-agents with validated, length-bounded output contracts"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// More log on stderr: -v info, -vv debug (RUST_LOG, when set, decides instead).
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Errors only: no warnings, and `run` prints no progress, only the outcome.
    #[arg(long, short, global = true, conflicts_with = "verbose")]
    quiet: bool,
}

// `mcp` joins this enum as it is built.
#[derive(Subcommand)]
enum Command {
    /// Run one sub-agent and print its validated output (JSON) on stdout; exit 0 valid output,
    /// 1 the run ended without one (its outcome on stderr), 2 usage error.
    Run {
        /// The spec file (.toml); specs beside it can be called as sub-agents.
        spec: PathBuf,
        /// The input: JSON text, or @FILE to read it from a file.
        #[arg(long, value_name = "JSON|@FILE")]
        input: String,
        /// openai:MODEL, anthropic:MODEL, replay:FILE or example (default: $SUBCONTRACT_MODEL).
        #[arg(long, value_name = "PROVIDER:MODEL")]
        model: Option<String>,
        /// API root (OpenAI-compatible: with /v1; Anthropic: without).
        #[arg(long, value_name = "URL")]
        base_url: Option<String>,
        /// Root of the read-only workspace tools.
        #[arg(long, value_name = "DIR", default_value = ".")]
        workspace: PathBuf,
        /// Write the run's events as JSON Lines (render with `subcontract trace`).
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// Record the model exchanges, to replay offline with --model replay:FILE.
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
        /// Extra or overriding model prices (TOML, USD per million tokens).
        #[arg(long, value_name = "FILE")]
        prices: Option<PathBuf>,
    },
    /// Render a JSON Lines trace as a run tree with turns, tokens, cost and cost shares.
    Trace {
        /// The trace file.
        file: PathBuf,
    },
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
    Mcp(cli::mcp::McpArgs),
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
    init_log(cli.verbose, cli.quiet);
    let quiet = cli.quiet;
    ExitCode::from(match cli.command {
        Command::Check {
            paths,
            tools,
            format,
            deny_warnings,
            max_depth,
        } => run_check(paths, tools, format, deny_warnings, max_depth),
        Command::Schema { spec, format } => run_schema(&spec, format),
        Command::Run {
            spec,
            input,
            model,
            base_url,
            workspace,
            trace,
            record,
            prices,
        } => run_run(
            spec, input, model, base_url, workspace, trace, record, prices, quiet,
        ),
        Command::Trace { file } => run_trace(&file),
        #[cfg(feature = "mcp")]
        Command::Mcp(args) => cli::mcp::main(args),
    })
}

#[allow(clippy::too_many_arguments)]
fn run_run(
    spec: PathBuf,
    input: String,
    model: Option<String>,
    base_url: Option<String>,
    workspace: PathBuf,
    trace: Option<PathBuf>,
    record: Option<PathBuf>,
    prices: Option<PathBuf>,
    quiet: bool,
) -> u8 {
    let text = match input.strip_prefix('@') {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: --input @{path}: {e}");
                return USAGE;
            }
        },
        None => input,
    };
    let input: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: --input is not JSON: {e}");
            return USAGE;
        }
    };
    let Some(model) = model.or_else(|| std::env::var("SUBCONTRACT_MODEL").ok()) else {
        eprintln!("error: no model: pass --model openai:MODEL|anthropic:MODEL|replay:FILE|example or set SUBCONTRACT_MODEL");
        return USAGE;
    };
    let opts = cli::run::RunOptions {
        spec,
        input,
        model,
        base_url,
        workspace,
        trace,
        record,
        prices,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return USAGE;
        }
    };
    let progress: Option<std::sync::Arc<dyn subcontract::EventSink>> = if quiet {
        None
    } else {
        Some(std::sync::Arc::new(Progress))
    };
    match runtime.block_on(cli::run::run_spec(&opts, progress)) {
        // Spec diagnostics carry their own `file:line:col: error[code]:` prefix.
        Err(e @ cli::run::RunnerError::Spec(_)) => {
            eprintln!("{e}");
            USAGE
        }
        Err(e) => {
            eprintln!("error: {e}");
            USAGE
        }
        Ok(r) => {
            eprintln!(
                "{}: {} after {} turn(s), {} in / {} out tokens, {} USD in all, {:.0} ms",
                r.run_id,
                r.outcome,
                r.turns,
                r.usage.input_tokens,
                r.usage.output_tokens,
                r.total_cost_usd.round_dp(6).normalize(),
                r.duration.as_secs_f64() * 1000.0
            );
            match (r.outcome, r.output) {
                (subcontract::Outcome::Completed, Some(mut out)) => {
                    // stdout leaves the process too: an output that quotes a key loses it.
                    subcontract::redact::redact_value(&mut out);
                    emit(&format!("{out}\n"));
                    OK
                }
                (_, _) => {
                    eprintln!(
                        "error: {}",
                        r.error.unwrap_or_else(|| r.outcome.to_string())
                    );
                    VIOLATIONS
                }
            }
        }
    }
}

/// The `tracing` log on stderr, redacted: warnings by default, `-v` info, `-vv` debug, `-q`
/// errors only; `RUST_LOG`, when set, decides instead. stderr only: for `mcp`, stdout is the
/// protocol.
fn init_log(verbose: u8, quiet: bool) {
    use tracing_subscriber::EnvFilter;
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, _) => "debug",
    };
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| subcontract::redact::RedactingWriter::new(std::io::stderr()))
        .with_target(false)
        .without_time()
        .init();
}

/// Progress on stderr: one line per model call, tool call and finished run.
struct Progress;

impl subcontract::EventSink for Progress {
    fn emit(&self, e: &subcontract::Event) {
        use subcontract::EventKind;
        match &e.kind {
            EventKind::Started { model } => eprintln!("[{}] started ({model})", e.run_id),
            EventKind::ModelCall {
                turn, usage, error, ..
            } => match error {
                Some(err) => eprintln!("[{}] turn {turn}: model error: {err}", e.run_id),
                None => eprintln!(
                    "[{}] turn {turn}: {} in / {} out tokens",
                    e.run_id, usage.input_tokens, usage.output_tokens
                ),
            },
            EventKind::ToolCall {
                turn,
                tool,
                is_error,
                ..
            } => eprintln!(
                "[{}] turn {turn}: {tool}{}",
                e.run_id,
                if *is_error { " (error)" } else { "" }
            ),
            EventKind::OutputRejected { turn, violations } => {
                let all: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
                eprintln!(
                    "[{}] turn {turn}: output rejected: {}",
                    e.run_id,
                    all.join("; ")
                )
            }
            EventKind::Finished { outcome, .. } => eprintln!("[{}] {outcome}", e.run_id),
        }
    }
}

fn run_trace(file: &std::path::Path) -> u8 {
    match subcontract::events::read_jsonl(file) {
        Ok(events) => {
            let tree = subcontract::events::tree::build_tree(&events);
            if tree.is_empty() {
                eprintln!("error: {}: no events", file.display());
                return USAGE;
            }
            emit(&subcontract::events::tree::render_tree(&tree));
            OK
        }
        Err(e) => {
            eprintln!("error: {}: {e}", file.display());
            USAGE
        }
    }
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

/// Writes to stdout without panicking when the reader went away (`| head`).
fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}
