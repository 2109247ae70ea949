//! Progress notifications: an event sink that forwards the events of one call's run tree to
//! the client that asked for progress with a `progressToken`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::events::{Event, EventKind, EventSink};

/// Routes events to the calls that asked for progress, by run id (a call's run id is a
/// prefix of every run id in its tree).
#[derive(Default)]
pub(crate) struct ProgressRouter {
    calls: Mutex<HashMap<Arc<str>, mpsc::UnboundedSender<String>>>,
}

/// One call's progress stream; [`finish`](Self::finish) flushes it.
pub(crate) struct Registration {
    router: Arc<ProgressRouter>,
    run_id: Arc<str>,
    task: JoinHandle<()>,
}

impl ProgressRouter {
    /// Starts forwarding the events of `run_id`'s tree to `peer` as progress on `token`.
    pub(crate) fn register(
        self: &Arc<Self>,
        run_id: &str,
        peer: Peer<RoleServer>,
        token: ProgressToken,
    ) -> Registration {
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let run_id: Arc<str> = run_id.into();
        self.lock().insert(run_id.clone(), tx);
        // One task per call sends in order, so `progress` only ever increases.
        let task = tokio::spawn(async move {
            let mut n = 0u32;
            while let Some(message) = rx.recv().await {
                n += 1;
                let mut p = ProgressNotificationParam::new(token.clone(), f64::from(n));
                p.message = Some(message);
                // A client that went away is not the run's problem.
                let _ = peer.notify_progress(p).await;
            }
        });
        Registration {
            router: self.clone(),
            run_id,
            task,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, mpsc::UnboundedSender<String>>> {
        // A panic while holding this lock cannot leave the map inconsistent (single inserts
        // and removes), so a poisoned lock is still usable.
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Registration {
    /// Stops routing and waits until every queued notification has been sent.
    pub(crate) async fn finish(self) {
        // Dropping the sender ends the forwarding task once the queue is drained.
        self.router.lock().remove(&self.run_id);
        let _ = self.task.await;
    }
}

impl EventSink for ProgressRouter {
    fn emit(&self, e: &Event) {
        let message = match &e.kind {
            EventKind::Started { .. } if e.depth > 1 => format!("{}: started", e.spec),
            EventKind::Started { .. } => return,
            EventKind::ModelCall { turn, error, .. } => match error {
                None => format!("{}: model turn {turn} done", e.spec),
                Some(err) => format!("{}: model turn {turn} failed: {err}", e.spec),
            },
            EventKind::ToolCall { tool, is_error, .. } => {
                let how = if *is_error { "failed" } else { "done" };
                format!("{}: tool {tool} {how}", e.spec)
            }
            EventKind::OutputRejected { turn, violations } => format!(
                "{}: output of turn {turn} rejected ({} violation(s)); asked to repair",
                e.spec,
                violations.len()
            ),
            EventKind::OutputUngrounded { turn, violations } => format!(
                "{}: output of turn {turn} ungrounded ({} value(s) backed by nothing read); asked to repair",
                e.spec,
                violations.len()
            ),
            EventKind::Command {
                program, exit_code, ..
            } => match exit_code {
                Some(code) => format!("{}: ran {program} (exit {code})", e.spec),
                None => format!("{}: ran {program} (stopped)", e.spec),
            },
            EventKind::Changes(c) => {
                format!("{}: changes {} ({} file(s))", e.spec, c.status, c.files)
            }
            EventKind::GroundedFromInput { .. } => return,
            EventKind::Finished { outcome, .. } => format!("{}: {outcome}", e.spec),
        };
        let calls = self.lock();
        if calls.is_empty() {
            return;
        }
        // A notification leaves the process: it passes the same redaction as every exit.
        let message = crate::redact::redact_string(message);
        // The call's own run id, or the nearest ancestor that is one.
        let mut id: &str = &e.run_id;
        loop {
            if let Some(tx) = calls.get(id) {
                let _ = tx.send(message);
                return;
            }
            match id.rfind('.') {
                Some(i) => id = &id[..i],
                None => return,
            }
        }
    }
}
