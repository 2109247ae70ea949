//! `subcontract batch`: one spec over a JSON Lines file of inputs, resumable from its output
//! (the engine is [`subcontract::batch`]; this is its arguments, host context, progress line
//! and Ctrl-C).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rust_decimal::Decimal;

use subcontract::batch::{run_batch, BatchOptions, Ledger, Progress, Summary};
use subcontract::Budget;

use super::run::limit_and_specs;
use super::{OK, USAGE, VIOLATIONS};

/// Arguments of `batch`.
#[derive(clap::Args)]
pub struct BatchArgs {
    /// The spec file (.toml); specs beside it can be called as sub-agents.
    spec: PathBuf,
    /// JSON Lines of inputs: `{"id": …, "input": {…}}`, or a bare input (its id is then its
    /// line number).
    #[arg(long, value_name = "FILE")]
    inputs: PathBuf,
    /// JSON Lines of results, one per input; the same command resumes from it.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Inputs in flight at most.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    concurrency: u32,
    /// Total USD limit of the batch, what earlier runs recorded in --out included.
    #[arg(long, value_name = "USD")]
    max_cost_usd: Option<Decimal>,
    #[command(flatten)]
    host: super::host::HostArgs,
    #[command(flatten)]
    engine: super::temporal::EngineArgs,
    #[command(flatten)]
    pub telemetry: super::telemetry::TelemetryArgs,
}

/// Runs `batch`; returns the exit code: 0 every input completed, 1 some did not (or were not
/// started), 2 usage or I/O error.
pub fn main(args: BatchArgs, quiet: bool) -> u8 {
    super::block_on(batch(args, quiet))
}

async fn batch(args: BatchArgs, quiet: bool) -> u8 {
    let (limit, specs) = match limit_and_specs(args.max_cost_usd, &args.spec) {
        Ok(found) => found,
        Err(line) => {
            eprintln!("{line}");
            return USAGE;
        }
    };
    if args.engine.engine.is_some() {
        return super::temporal::batch(
            &args.engine,
            &args.host,
            &specs[0],
            &args.inputs,
            &args.out,
            args.concurrency,
            limit,
            quiet,
        )
        .await;
    }
    let inputs = match std::fs::File::open(&args.inputs) {
        Ok(f) => std::io::BufReader::new(f),
        Err(e) => {
            eprintln!("error: {}: {e}", args.inputs.display());
            return USAGE;
        }
    };
    let ledger = match Ledger::read(&args.out).and_then(|mut l| {
        l.bind(
            &args.out,
            subcontract::batch::Owner::new(&specs[0].erase(), &args.inputs),
        )?;
        Ok(l)
    }) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
    let host = match args
        .host
        .host(&specs, 1, std::slice::from_ref(&args.spec))
        .await
        .and_then(|h| h.build().map_err(|e| e.to_string()))
    {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
    // What earlier runs spent counts against the limit: only the rest is this run's.
    let budget = Budget::with_label(
        "batch",
        limit.map(|l| l.saturating_sub(ledger.spent_usd()).max(Decimal::ZERO)),
        None,
    );
    // Run ids differ between runs of the same batch, so resumed runs' traces do not collide.
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let ctx = host
        .run_id(format!("batch-{stamp:x}"))
        .budget(budget)
        .spec_name("batch")
        .build();
    if !ledger.is_empty() {
        eprintln!(
            "resuming: {} input(s) already in {} ({} USD spent){}",
            ledger.len(),
            args.out.display(),
            ledger.spent_usd().round_dp(6).normalize(),
            if ledger.torn() {
                "; its torn last line is redone"
            } else {
                ""
            }
        );
    }
    let total = count_lines(&args.inputs);
    let progress = Arc::new(Progress::default());
    let options = BatchOptions {
        concurrency: args.concurrency as usize,
        stop: subcontract::CancellationToken::new(),
    };
    let interrupt = tokio::spawn(on_ctrl_c(
        super::interrupt::Interrupts::new(),
        options.stop.clone(),
        ctx.cancellation().clone(),
    ));
    let ticker = (!quiet).then(|| {
        tokio::spawn(show_progress(
            progress.clone(),
            total,
            ledger.spent_usd(),
            limit,
        ))
    });
    let spec = Arc::new(specs[0].erase());
    let before = ledger.failed();
    let result = run_batch(spec, ctx, inputs, &args.out, ledger, &options, &progress).await;
    interrupt.abort();
    stop_progress(ticker).await;
    match result {
        Err(e) => {
            eprintln!("error: {e}");
            USAGE
        }
        Ok(s) => report(&s, before, &args.out, limit, options.stop.is_cancelled()),
    }
}

/// Stops the progress line and clears it from a terminal.
pub(super) async fn stop_progress(ticker: Option<tokio::task::JoinHandle<()>>) {
    if let Some(t) = ticker {
        t.abort();
        let _ = t.await;
        if std::io::stderr().is_terminal() {
            eprint_raw("\r\x1b[2K");
        }
    }
}

/// First Ctrl-C: start no more inputs, let those in flight finish. Second: cancel them (they
/// are not written, so a later run redoes them).
async fn on_ctrl_c(
    mut interrupts: super::interrupt::Interrupts,
    stop: subcontract::CancellationToken,
    cancel: subcontract::CancellationToken,
) {
    if !interrupts.next().await {
        return;
    }
    stop.cancel();
    eprintln!("\ninterrupted: starting no more inputs; Ctrl-C again to cancel those in flight");
    if interrupts.next().await {
        cancel.cancel();
        eprintln!("cancelling the runs in flight");
    }
}

/// The number of lines of `path`, for the ETA; read in fixed-size chunks.
pub(super) fn count_lines(path: &std::path::Path) -> Option<u64> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut buf = vec![0u8; 1 << 16];
    let (mut lines, mut last) = (0u64, b'\n');
    loop {
        let n = f.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        last = buf[n - 1];
    }
    Some(lines + u64::from(last != b'\n'))
}

fn eprint_raw(text: &str) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// A status line on stderr: redrawn five times a second on a terminal, else every 10 s.
pub(super) async fn show_progress(
    p: Arc<Progress>,
    total: Option<u64>,
    spent_before: Decimal,
    limit: Option<Decimal>,
) {
    let tty = std::io::stderr().is_terminal();
    let every = if tty {
        Duration::from_millis(200)
    } else {
        Duration::from_secs(10)
    };
    let start = Instant::now();
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        let done = p.completed.load(Ordering::Relaxed);
        let failed = p.failed.load(Ordering::Relaxed);
        let running = p.running.load(Ordering::Relaxed);
        let skipped = p.skipped.load(Ordering::Relaxed);
        let secs = start.elapsed().as_secs_f64().max(1e-3);
        let rate = (done + failed) as f64 / secs;
        let spent = spent_before
            .saturating_add(p.spent_usd())
            .round_dp(4)
            .normalize();
        let money = match limit {
            Some(l) => format!("{spent} of {} USD", l.normalize()),
            None => format!("{spent} USD"),
        };
        let eta = match total {
            Some(t) if rate > 0.0 => {
                let left = t.saturating_sub(done + failed + skipped) as f64 / rate;
                format!(", ETA {}", fmt_secs(left))
            }
            _ => String::new(),
        };
        let of = total.map_or(String::new(), |t| format!(" of {t}"));
        let line = format!(
            "{} done · {failed} failed · {running} running{of} · {money} · {rate:.1}/s{eta}",
            done + failed + skipped
        );
        if tty {
            eprint_raw(&format!("\r\x1b[2K{}", subcontract::redact::redact(&line)));
        } else {
            eprintln!("{line}");
        }
    }
}

fn fmt_secs(s: f64) -> String {
    let s = s.round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

pub(super) fn report(
    s: &Summary,
    failed_before: u64,
    out: &std::path::Path,
    limit: Option<Decimal>,
    interrupted: bool,
) -> u8 {
    let mut line = format!(
        "batch: {} completed, {} failed this run; {} already in {}; {} USD this run",
        s.completed,
        s.failed,
        s.skipped,
        out.display(),
        s.spent_usd.round_dp(6).normalize()
    );
    if s.duplicates > 0 {
        line += &format!("; {} duplicate id(s) not run", s.duplicates);
    }
    if s.refused > 0 {
        line += &format!("; {} refused by the budget, not written", s.refused);
    }
    if s.cancelled > 0 {
        line += &format!(
            "; {} cancelled run(s) not written ({} USD spent by them is in no result line)",
            s.cancelled,
            s.cancelled_usd.round_dp(6).normalize()
        );
    }
    eprintln!("{line}");
    if let Some(fix) = &s.spec_refused {
        eprintln!("error: {fix}");
    }
    if s.not_started {
        if interrupted {
            eprintln!("stopped before the end of the inputs: run the same command to resume");
        } else if let Some(l) = limit {
            eprintln!("--max-cost-usd {l} is spent: inputs left are not started (resume with a higher limit)");
        }
    }
    let all_done = failed_before + s.failed == 0
        && s.duplicates == 0
        && s.cancelled == 0
        && s.refused == 0
        && !s.not_started;
    if all_done {
        OK
    } else {
        VIOLATIONS
    }
}
