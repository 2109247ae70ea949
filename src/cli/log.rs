//! The binary's `tracing` log.

/// The `tracing` log on stderr, redacted: warnings by default, `-v` info, `-vv` debug, `-q`
/// errors only; `RUST_LOG`, when set, decides instead. stderr only: for `mcp`, stdout is the
/// protocol.
pub fn init(verbose: u8, quiet: bool) {
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
