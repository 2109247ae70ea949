//! The binary's `tracing` log, and the OTLP export of the GenAI spans.

use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::Layer as _;

use super::telemetry::{Guard, TelemetryArgs};

/// The `tracing` log on stderr, redacted: warnings by default, `-v` info, `-vv` debug, `-q`
/// errors only; `RUST_LOG`, when set, decides instead. stderr only: for `mcp`, stdout is the
/// protocol. With `telemetry` (a command that runs specs), the GenAI spans are exported over
/// OTLP when asked for; the guard flushes them when dropped.
pub fn init(verbose: u8, quiet: bool, telemetry: Option<&TelemetryArgs>) -> Option<Guard> {
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
    // The GenAI spans are for the exporter: in the log they would prefix every line.
    let filter = match format!("{}=off", subcontract::telemetry::TARGET).parse() {
        Ok(d) => filter.add_directive(d),
        Err(_) => filter,
    };
    let log = tracing_subscriber::fmt::layer()
        .with_writer(|| subcontract::redact::RedactingWriter::new(std::io::stderr()))
        .with_target(false)
        .without_time()
        .with_filter(filter);
    let (otel, guard) = match telemetry.and_then(super::telemetry::layer) {
        Some((layer, guard)) => (Some(layer), Some(guard)),
        None => (None, None),
    };
    tracing_subscriber::registry().with(log).with(otel).init();
    guard
}
