//! What a run does with its working copy, knowing its context: makes it (from its acting
//! parent's copy, else the host's workspace), checks a submission's changes, and ends it
//! (changes returned or kept); and how a sub-agent's changes reach its parent. The run loop
//! calls these four and knows nothing else of acting.

use std::sync::Arc;

use super::changes::Changes;
use super::policy::WorkspacePolicy;
use super::run_copy::RunCopy;
use super::sandbox::{CommandOutput, SandboxError};
use crate::contract::Violation;
use crate::ctx::Ctx;
use crate::events::EventKind;
use crate::telemetry::{self, Detail};
use tracing::Instrument;

/// Most characters of a failing check's output quoted back to the model in a repair.
const CHECK_TAIL_CHARS: usize = 2000;

/// Why a run could not get its working copy.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CopyError {
    /// Neither an acting parent nor the host has a workspace to copy.
    #[error(
        "`{spec}` acts in a working copy, and there is no workspace to copy: give the host a \
         workspace (`Host::builder().workspace(DIR)`, `--workspace DIR`)"
    )]
    NoWorkspace {
        /// The spec.
        spec: String,
    },
    /// Making the copy failed.
    #[error("`{spec}`: its working copy could not be made: {reason}")]
    Failed {
        /// The spec.
        spec: String,
        /// Why.
        reason: String,
    },
}

/// The context a run of the spec `spec` (acting under `policy`) works in: `ctx`, the run's
/// own, with a working copy of its own, made from its nearest acting ancestor's copy if it has
/// one, else from the host's workspace; its policy narrowed by that ancestor's.
pub(crate) async fn start(
    spec: &str,
    policy: &WorkspacePolicy,
    ctx: &Ctx,
) -> Result<Ctx, CopyError> {
    let host = ctx
        .act_host()
        .cloned()
        .ok_or_else(|| CopyError::NoWorkspace {
            spec: spec.to_owned(),
        })?;
    let (source, policy) = match ctx.run_copy() {
        Some(p) => (p.root().to_path_buf(), policy.narrowed_by(&p.policy)),
        None => (host.source().to_path_buf(), policy.clone()),
    };
    let copy = RunCopy::create(source, policy, host, Arc::from(ctx.run_id()))
        .await
        .map_err(|reason| CopyError::Failed {
            spec: spec.to_owned(),
            reason,
        })?;
    Ok(ctx.with_copy(Arc::new(copy)))
}

/// The run's own working copy, if it has one (a run inside an acting parent's copy that does
/// not act itself has none of its own).
pub(crate) fn own_copy(ctx: &Ctx) -> Option<&Arc<RunCopy>> {
    ctx.run_copy().filter(|c| *c.run_id == *ctx.run_id())
}

/// The checks an acting run's accepted output passes: its changes captured, within `writes`
/// and the size limits, then each `checks` command, run in the copy, exiting 0. The
/// violations, if any, as an output's are reported, for the model to repair; none for a run
/// without a copy of its own.
pub(crate) async fn check_submission(ctx: &Ctx) -> Vec<Violation> {
    match own_copy(ctx) {
        // Boxed: the checks' future (a command's, with its output) is large, and every run's
        // future would otherwise hold room for it, acting or not.
        Some(copy) => Box::pin(check_copy(ctx, copy)).await,
        None => Vec::new(),
    }
}

/// [`check_submission`] in the run's own `copy`.
async fn check_copy(ctx: &Ctx, copy: &Arc<RunCopy>) -> Vec<Violation> {
    let violation = |message: String| Violation {
        path: "/changes".into(),
        message,
    };
    let changes = match copy.capture().await {
        Ok(c) => c,
        Err(e) => return vec![violation(format!("the changes could not be read: {e}"))],
    };
    let mut out: Vec<Violation> = changes
        .violations(&copy.policy)
        .into_iter()
        .map(violation)
        .collect();
    if out.is_empty() {
        // Split once, as the spec's build checked them.
        let argvs = match copy.policy.check_commands() {
            Ok(a) => a,
            Err(e) => return vec![violation(e)],
        };
        for (line, argv) in copy.policy.checks.iter().zip(argvs) {
            let ran = command(ctx, copy, argv, None).await;
            match ran {
                Ok(o) if o.exit_code == Some(0) && !o.timed_out => {}
                Ok(o) => out.push(violation(format!(
                    "the check `{line}` failed ({}); change the files so that it passes. The \
                     end of its output:\n{}",
                    o.status_text(),
                    o.tail(CHECK_TAIL_CHARS)
                ))),
                Err(e) => out.push(violation(format!("the check `{line}` could not run: {e}"))),
            }
        }
    }
    if out.is_empty() {
        copy.set_submitted(changes);
    }
    out
}

/// Ends the run that owns `ctx`'s copy: a completed run's changes (captured when its output
/// was accepted) are returned for its caller to decide on; a failed run's are kept as a patch
/// file, never applied. Changes of its sub-agents it never decided on are kept too. Either way
/// the copy is then removed. `None` for a run without a copy of its own.
pub(crate) async fn finish(ctx: &Ctx, completed: bool) -> Option<Changes> {
    let copy = own_copy(ctx)?.clone();
    let out = if completed {
        let changes = match copy.take_submitted() {
            Some(c) => Some(c),
            // An output accepted without the submission check (not expected): captured now
            // rather than lost.
            None => copy.capture().await.ok(),
        };
        if let Some(c) = &changes {
            report_changes(ctx, c, "captured", None);
        }
        changes
    } else {
        match copy.capture().await {
            Ok(c) if !c.is_empty() => {
                let path = copy.keep(&c);
                report_changes(ctx, &c, "kept", path.as_deref());
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(run_id = ctx.run_id(), error = %e, "changes not captured"),
        }
        None
    };
    for path in copy.close().await {
        tracing::info!(
            run_id = ctx.run_id(),
            patch = %path.display(),
            "a sub-agent's changes were neither accepted nor discarded: kept"
        );
    }
    out
}

/// Runs `argv` in `copy`, in the sandbox, in a `command` span, and reports it: what ran, how it
/// ended, how long, how much it printed; never its environment.
pub(crate) async fn command(
    ctx: &Ctx,
    copy: &RunCopy,
    argv: Vec<String>,
    timeout: Option<std::time::Duration>,
) -> Result<CommandOutput, SandboxError> {
    let program = argv.first().cloned().unwrap_or_default();
    let span = telemetry::command_span(&program);
    let ran = copy
        .command(argv, timeout, ctx.cancellation())
        .instrument(span.clone())
        .await;
    let kind = match &ran {
        Ok(o) => EventKind::Command {
            program,
            exit_code: o.exit_code,
            timed_out: o.timed_out,
            duration_ms: o.duration.as_secs_f64() * 1000.0,
            output_bytes: o.stdout.total_bytes + o.stderr.total_bytes,
            error: None,
        },
        Err(e) => EventKind::Command {
            program,
            exit_code: None,
            timed_out: false,
            duration_ms: 0.0,
            output_bytes: 0,
            error: Some(e.to_string()),
        },
    };
    telemetry::report(ctx, span, kind, Detail::None);
    ran
}

/// Reports what became of `changes` (`captured`, `accepted`, `discarded`, `kept` in `patch`),
/// in a `changes` span of its own.
pub(crate) fn report_changes(
    ctx: &Ctx,
    changes: &Changes,
    status: &str,
    patch: Option<&std::path::Path>,
) {
    let span = telemetry::changes_span(status);
    telemetry::report(
        ctx,
        span,
        EventKind::changes(changes, status, patch),
        Detail::None,
    );
}

/// A completed sub-agent's `changes` handed to its parent's run (whose context is `parent`):
/// held for its `accept_changes` / `discard_changes` when the parent has a working copy of its
/// own, else kept as a patch file. Returns the tool result the parent's model reads: the
/// child's output (compact JSON `output`) and a summary of the changes.
pub(crate) fn hand_up(parent: &Ctx, changes: Changes, output: &str) -> String {
    let summary = match own_copy(parent) {
        Some(copy) => {
            let summary = changes.summary_json();
            copy.hold(changes);
            summary
        }
        None => keep_for_caller(parent, &changes),
    };
    format!("{{\"output\":{output},\"changes\":{summary}}}")
}

/// A completed run's `changes` that its caller reports and never applies (a batch, the MCP
/// server, a parent without a working copy): kept as a patch file of the host's, said in a
/// `changes` event of `ctx`. Returns their summary with the patch file's path.
pub(crate) fn keep_for_caller(ctx: &Ctx, changes: &Changes) -> serde_json::Value {
    let mut summary = changes.summary_json();
    let path = ctx.act_host().and_then(|h| h.keep(changes));
    report_changes(ctx, changes, "kept", path.as_deref());
    if let (Some(p), Some(obj)) = (path, summary.as_object_mut()) {
        obj.insert("patch".into(), p.display().to_string().into());
    }
    summary
}
