//! The command line's own pieces, over the library's public API: one module per command
//! (its arguments and its work), the models only the command line names (`example`,
//! `replay:`), and the stderr log.

pub mod batch;
pub mod changes;
pub mod check;
pub mod compat;
pub mod eval;
pub mod example_model;
pub mod git;
pub mod host;
pub mod interrupt;
pub mod log;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod resolve;
pub mod run;
pub mod schema;
pub mod telemetry;
pub mod temporal;
pub mod trace;

/// Exit code: success (every contract holds, a valid output).
pub const OK: u8 = 0;
/// Exit code: violations found, or a run that ended without an output.
pub const VIOLATIONS: u8 = 1;
/// Exit code: usage or I/O error.
pub const USAGE: u8 = 2;

/// Runs `work` to its exit code on a multi-threaded runtime (exit 2 if there is none).
pub fn block_on(work: impl std::future::Future<Output = u8>) -> u8 {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(work),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            USAGE
        }
    }
}

/// Writes to stdout without panicking when the reader went away (`| head`).
pub fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}
