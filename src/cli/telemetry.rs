//! OTLP export of the library's GenAI spans (feature `otel`): `--otlp URL` on the commands that
//! run specs, or the standard `OTEL_*` environment variables. An unreachable collector costs
//! one warning, never a failed run or a hang: every export and the final flush are bounded.

/// The telemetry options of a command that runs specs (`#[command(flatten)]` them in).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TelemetryArgs {
    /// Export the spans of every run, model call and tool call over OTLP (HTTP/protobuf) to
    /// this collector, e.g. http://localhost:4318 (default: $OTEL_EXPORTER_OTLP_ENDPOINT).
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
    /// Put message content (prompts, tool arguments, outputs), redacted, into the spans (also
    /// $OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true). Off by default.
    #[arg(long)]
    pub otel_capture_content: bool,
}

/// How long the final flush, and each export, may take.
#[cfg(feature = "otel")]
const FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Flushes and shuts the exporter down when dropped (the end of `main`).
pub struct Guard {
    #[cfg(feature = "otel")]
    provider: opentelemetry_sdk::trace::SdkTracerProvider,
}

impl Drop for Guard {
    fn drop(&mut self) {
        #[cfg(feature = "otel")]
        shutdown(&self.provider);
    }
}

#[cfg(feature = "otel")]
fn shutdown(provider: &opentelemetry_sdk::trace::SdkTracerProvider) {
    // An export error was reported when it happened; only a flush past its time is news.
    if let Err(opentelemetry_sdk::error::OTelSdkError::Timeout(t)) =
        provider.shutdown_with_timeout(FLUSH_TIMEOUT)
    {
        tracing::warn!("spans not flushed to the OTLP collector within {t:?}; some are lost");
    }
}

fn env_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.trim().is_empty())
}

/// Whether the options or the environment ask for export.
fn wanted(args: &TelemetryArgs) -> bool {
    if std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return false;
    }
    args.otlp.is_some()
        || env_set("OTEL_EXPORTER_OTLP_ENDPOINT")
        || env_set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
}

/// The OTLP layer for the binary's subscriber, and the guard that flushes it, when export is
/// asked for; sets content capture from `--otel-capture-content`.
#[cfg(feature = "otel")]
pub fn layer<S>(args: &TelemetryArgs) -> Option<(impl tracing_subscriber::Layer<S>, Guard)>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
    use tracing_subscriber::Layer as _;

    if args.otel_capture_content {
        subcontract::telemetry::set_capture_content(true);
    }
    if !wanted(args) {
        return None;
    }
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary);
    if let Some(url) = &args.otlp {
        builder = builder.with_endpoint(traces_url(url));
    }
    let endpoint = args
        .otlp
        .clone()
        .or_else(|| std::env::var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").ok())
        .or_else(|| std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok())
        .unwrap_or_default();
    let exporter = match http_client() {
        Ok(client) => builder.with_http_client(client).build(),
        Err(e) => {
            eprintln!("warning: spans are not exported: cannot set up the HTTP client: {e}");
            return None;
        }
    };
    let exporter = match exporter {
        Ok(e) => e,
        Err(e) => {
            eprintln!("warning: spans are not exported to {endpoint}: {e}");
            return None;
        }
    };
    let mut resource = opentelemetry_sdk::Resource::builder();
    if !env_set("OTEL_SERVICE_NAME") {
        resource = resource.with_service_name("subcontract");
    }
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_resource(resource.build())
        .with_batch_exporter(WarnOnce {
            inner: exporter,
            endpoint,
            warned: Default::default(),
        })
        .build();
    on_ctrl_c(provider.clone());
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("subcontract"))
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_level(false)
        .with_tracked_inactivity(false)
        // Only the GenAI spans: other spans and log events stay in the log.
        .with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target(subcontract::telemetry::TARGET, tracing::Level::INFO),
        );
    Some((layer, Guard { provider }))
}

/// Without the `otel` feature: a warning when export is asked for.
#[cfg(not(feature = "otel"))]
pub fn layer(args: &TelemetryArgs) -> Option<(tracing_subscriber::layer::Identity, Guard)> {
    if args.otel_capture_content {
        subcontract::telemetry::set_capture_content(true);
    }
    if wanted(args) {
        eprintln!("warning: this build cannot export spans (it lacks the `otel` feature)");
    }
    None
}

/// `--otlp` names the collector, as OTEL_EXPORTER_OTLP_ENDPOINT does: the traces path is added
/// unless it is there.
#[cfg(any(feature = "otel", test))]
fn traces_url(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    if url.ends_with("/v1/traces") {
        url.to_string()
    } else {
        format!("{url}/v1/traces")
    }
}

/// A blocking client (the batch exporter runs on a thread of its own, with no async runtime),
/// with rustls and bounded timeouts. Built on a thread of its own: reqwest's blocking client
/// must not be built inside an async runtime.
#[cfg(feature = "otel")]
fn http_client() -> Result<reqwest::blocking::Client, String> {
    std::thread::spawn(|| {
        let tls = subcontract::provider::tls_config()?;
        reqwest::blocking::Client::builder()
            .tls_backend_preconfigured(tls)
            .connect_timeout(std::time::Duration::from_secs(2))
            .timeout(FLUSH_TIMEOUT)
            .build()
            .map_err(|e| e.to_string())
    })
    .join()
    .map_err(|_| "the thread building it panicked".to_string())?
}

/// Whether Ctrl-C should flush and exit here; `false` for a command that handles Ctrl-C itself
/// (`batch` lets its runs in flight finish and be written first, `run` reports its cancelled
/// outcome and flushes its trace; both then exit normally, which flushes the spans too).
pub static EXIT_ON_CTRL_C: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Ctrl-C flushes the spans that ended, then exits as an interrupted process does (130).
#[cfg(feature = "otel")]
fn on_ctrl_c(provider: opentelemetry_sdk::trace::SdkTracerProvider) {
    if !EXIT_ON_CTRL_C.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("otel-ctrl-c".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
            else {
                return;
            };
            if rt.block_on(tokio::signal::ctrl_c()).is_ok() {
                shutdown(&provider);
                std::process::exit(130);
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("Ctrl-C will not flush the spans: {e}");
    }
}

/// The OTLP exporter, warning once when an export fails (a collector that is down would
/// otherwise cost a line per batch, or nothing at all).
#[cfg(feature = "otel")]
#[derive(Debug)]
struct WarnOnce {
    inner: opentelemetry_otlp::SpanExporter,
    endpoint: String,
    warned: std::sync::atomic::AtomicBool,
}

#[cfg(feature = "otel")]
impl opentelemetry_sdk::trace::SpanExporter for WarnOnce {
    async fn export(
        &self,
        batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        let r = self.inner.export(batch).await;
        if let Err(e) = &r {
            if !self.warned.swap(true, std::sync::atomic::Ordering::Relaxed) {
                tracing::warn!(
                    "cannot export spans to the OTLP collector at {}: {e}; the run goes on",
                    self.endpoint
                );
            }
        }
        r
    }
    fn shutdown_with_timeout(
        &self,
        timeout: std::time::Duration,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }
    fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
        self.inner.force_flush()
    }
    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_path_is_added_once() {
        assert_eq!(traces_url("http://h:4318"), "http://h:4318/v1/traces");
        assert_eq!(traces_url("http://h:4318/"), "http://h:4318/v1/traces");
        assert_eq!(
            traces_url("http://h:4318/v1/traces"),
            "http://h:4318/v1/traces"
        );
    }
}
