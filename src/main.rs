//! The `subcontract` command line (its contract: `src/docs/invariants.md`): a thin shell over
//! the library. Each command's arguments and its work live in `src/cli/`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Every line this binary writes to stderr passes [`subcontract::redact`], like the log and
/// the trace: an error can quote a key a provider echoed. (Shadows the standard macro, and is
/// defined before `cli` so that no line of the command line can miss it.)
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

mod cli;

use cli::{OK, USAGE};

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

#[derive(Subcommand)]
enum Command {
    /// Run one sub-agent and print its validated output (JSON) on stdout; exit 0 valid output,
    /// 1 the run ended without one (its outcome on stderr), 2 usage error.
    Run(cli::run::RunArgs),
    /// Render a JSON Lines trace as a run tree with turns, tokens, cost and cost shares.
    Trace(cli::trace::TraceArgs),
    /// Check every spec's contracts; exit 0 all hold, 1 violations, 2 usage or I/O error.
    Check(cli::check::CheckArgs),
    /// Compare two spec sets (files, directories or lock files): breaking changes exit 1.
    Diff(cli::compat::DiffArgs),
    /// Print the contracts of specs (and merged lock files) as a lock file on stdout.
    Lock(cli::compat::LockArgs),
    /// Print a spec as the tool definition a host registers.
    Schema(cli::schema::SchemaArgs),
    /// Serve the specs as MCP tools over stdio (input/output schemas, structured content).
    #[cfg(feature = "mcp")]
    Mcp(cli::mcp::McpArgs),
    /// Run a spec on every line of a JSON Lines file, resumably; exit 0 all completed, 1 not.
    Batch(cli::batch::BatchArgs),
    /// Grade a spec on cases (JSON Lines) per output mode: pass@1, pass^k, valid and
    /// wrong-valid rates; exit 0 all passed, 1 not, 2 usage or file error, 3 stale recording.
    Eval(cli::eval::EvalArgs),
    /// Run batches' sub-agents from Temporal (see `batch --engine`) until Ctrl-C.
    #[cfg(feature = "temporal")]
    Worker(cli::temporal::WorkerArgs),
}

impl Command {
    /// The telemetry options of a command that runs specs.
    fn telemetry(&self) -> Option<&cli::telemetry::TelemetryArgs> {
        match self {
            Command::Run(a) => Some(&a.telemetry),
            Command::Batch(a) => Some(&a.telemetry),
            Command::Eval(a) => Some(&a.telemetry),
            #[cfg(feature = "mcp")]
            Command::Mcp(a) => Some(&a.telemetry),
            _ => None,
        }
    }
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
    // Dropped at the end of `main`: flushes the spans.
    if matches!(cli.command, Command::Batch(_) | Command::Run(_)) {
        cli::telemetry::EXIT_ON_CTRL_C.store(false, std::sync::atomic::Ordering::Relaxed);
    }
    let _telemetry = cli::log::init(cli.verbose, cli.quiet, cli.command.telemetry());
    ExitCode::from(match cli.command {
        Command::Check(args) => cli::check::main(args),
        Command::Schema(args) => cli::schema::main(&args),
        Command::Diff(args) => cli::compat::diff(args),
        Command::Lock(args) => cli::compat::lock(&args),
        Command::Run(args) => cli::run::main(args, cli.quiet),
        Command::Trace(args) => cli::trace::main(&args),
        #[cfg(feature = "mcp")]
        Command::Mcp(args) => cli::mcp::main(args),
        Command::Batch(args) => cli::batch::main(args, cli.quiet),
        Command::Eval(args) => cli::eval::main(args, cli.quiet),
        #[cfg(feature = "temporal")]
        Command::Worker(args) => cli::temporal::worker(args),
    })
}
