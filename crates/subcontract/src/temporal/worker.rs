//! The worker's side: one sub-agent run per activity, its spend recorded with Temporal before
//! every model call, so that an attempt lost with its worker is charged, never forgotten.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rust_decimal::Decimal;
use temporalio_client::{ActivityIdentifier, AsyncActivityHandle, Client, RpcOptions};
use temporalio_common::protos::TaskToken;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use temporalio_sdk::ApplicationFailure;

use super::messages::{RunReport, RunRequest, SpendRecord};

/// How long after a record made before a call it is sent again (at most: the liveness beat
/// comes sooner with a short heartbeat timeout).
const RESEND_AFTER: Duration = Duration::from_secs(2);
use crate::batch::{Refusal, ResultLine};
use crate::budget::SpendJournal;
use crate::spec::DynSpec;
use crate::{Budget, CtxBuilder, Outcome};

/// What a worker runs: its specs by name, and the host context every run starts from (model,
/// tools, prices, event sinks); each run gets its own budget, run id and cancellation.
pub struct SubAgentActivities {
    specs: HashMap<String, Arc<DynSpec>>,
    host: CtxBuilder,
}

impl SubAgentActivities {
    /// A worker's activities for `specs` under `host`.
    pub fn new<S: Into<DynSpec>>(specs: impl IntoIterator<Item = S>, host: CtxBuilder) -> Self {
        SubAgentActivities {
            specs: specs
                .into_iter()
                .map(|s| {
                    let s: DynSpec = s.into();
                    (s.name().to_string(), Arc::new(s))
                })
                .collect(),
            host,
        }
    }
}

#[activities]
impl SubAgentActivities {
    /// One input through one spec: the whole run loop, its tools and its contract checks.
    /// Sub-agent failures are results (a line with their outcome); only a lost attempt, or a
    /// spend that cannot be recorded, fails the activity, which Temporal then retries.
    #[activity]
    pub async fn run_subagent(
        self: Arc<Self>,
        ctx: ActivityContext,
        req: RunRequest,
    ) -> Result<RunReport, ActivityError> {
        // An attempt after the first runs only because an earlier one was lost.
        let lost_attempts = ctx.info().attempt.saturating_sub(1);
        let before: SpendRecord = match ctx.heartbeat_details().deserialize::<SpendRecord>() {
            Ok(record) => record.unwrap_or(SpendRecord {
                charged_usd: Decimal::ZERO,
            }),
            Err(e) => {
                // An earlier attempt's record that cannot be read (another version of the
                // worker, a codec): what it spent is unknown, so the input is charged its whole
                // cap and not run again, rather than charged nothing.
                let cost = req.cap_usd.unwrap_or(Decimal::ZERO);
                return Ok(report(
                    &req,
                    Outcome::BudgetExhausted,
                    format!("an earlier attempt's spend record could not be read ({e}); the input is charged its whole cap ({cost} USD) and not run again"),
                    cost,
                    lost_attempts,
                    None,
                ));
            }
        };
        let Some(spec) = self.specs.get(&req.spec).cloned() else {
            let mut known: Vec<&str> = self.specs.keys().map(String::as_str).collect();
            known.sort_unstable();
            let why = format!(
                "this worker has no spec `{}` (it has: {}); start workers with the spec's directory",
                req.spec,
                known.join(", ")
            );
            // A report, not a failure: it carries what earlier attempts spent, so the batch
            // can record it before it stops.
            return Ok(report(
                &req,
                Outcome::Denied,
                why.clone(),
                before.charged_usd,
                lost_attempts,
                Some(why),
            ));
        };
        // What earlier attempts may have spent is gone from this input's cap.
        let limit = req
            .cap_usd
            .map(|cap| cap.saturating_sub(before.charged_usd).max(Decimal::ZERO));
        let budget = Budget::with_label(req.run_id.clone(), limit, None);
        let journal = Arc::new(Journal {
            ctx: ctx.clone(),
            handle: AsyncActivityHandle::new(
                ctx.client(),
                ActivityIdentifier::from_task_token(TaskToken::from(ctx.info().task_token.clone())),
            ),
            before,
            budget: budget.clone(),
            failure: std::sync::Mutex::new(None),
            recorded: tokio::sync::Notify::new(),
            order: tokio::sync::Mutex::new(()),
        });
        let stop = crate::CancellationToken::new();
        let host = self
            .host
            .clone()
            .run_id(req.run_id.clone())
            .budget(budget)
            .cancellation(stop.clone())
            .spend_journal(journal.clone())
            .build();
        // Between model calls the attempt still proves it is alive (a long tool, a slow call).
        let beat_every = ctx
            .info()
            .heartbeat_timeout
            .unwrap_or(Duration::from_secs(30))
            / 3;
        let beating = {
            let journal = journal.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(beat_every.max(Duration::from_millis(100))) => {}
                        // The SDK's throttled heartbeat (an older record) may reach the server
                        // after a record made before a call: the record is sent again shortly
                        // after each call starts, so that window stays short.
                        _ = journal.recorded.notified() => {
                            tokio::time::sleep(RESEND_AFTER.min(beat_every)).await;
                        }
                    }
                    let _ = journal.record().await;
                }
            })
        };
        let run = spec.call_json(req.input.clone(), &host);
        let result = tokio::select! {
            r = run => Some(r),
            _ = ctx.cancelled() => {
                stop.cancel();
                None
            }
        };
        beating.abort();
        let Some(result) = result else {
            return Err(ActivityError::cancelled());
        };
        if let Some(why) = journal.failure() {
            // The spend could not be recorded, so the run stopped before its next call: an
            // attempt to retry, not a result.
            return Err(ApplicationFailure::new(why).into());
        }
        // The rule the local engine applies too: turned away before any spend is not a
        // result. The spec's own cap refusing is fatal to the batch (every input would be
        // refused alike); the workflow tells the batch's money running out by its own cap.
        let refusal = Refusal::of(&result, spec.limits().max_cost_usd);
        let mut line = ResultLine::from_run(req.id, result);
        line.cost_usd = line.cost_usd.saturating_add(before.charged_usd);
        Ok(RunReport {
            line,
            refused_at_start: refusal.is_some(),
            lost_attempts,
            fatal: refusal.as_ref().and_then(Refusal::fix),
        })
    }
}

/// The report of an input that was not run.
fn report(
    req: &RunRequest,
    outcome: Outcome,
    error: String,
    cost_usd: Decimal,
    lost_attempts: u32,
    fatal: Option<String>,
) -> RunReport {
    RunReport {
        line: ResultLine {
            id: req.id.clone(),
            outcome,
            output: None,
            error: Some(error),
            turns: 0,
            cost_usd,
            usage: crate::model::Usage::default(),
            run_id: req.run_id.clone(),
            changes: None,
            cut_short: None,
        },
        refused_at_start: false,
        lost_attempts,
        fatal,
    }
}

/// Records an attempt's spend at stake as its heartbeat, synchronously: the call that follows
/// is made only once Temporal has the record, so a worker killed during it leaves a record that
/// covers it.
struct Journal {
    /// The activity, whose own (throttled) heartbeat keeps the SDK's timer for the attempt
    /// alive and carries the same record.
    ctx: ActivityContext,
    /// The same activity through the client: a heartbeat that returns once Temporal has it.
    handle: AsyncActivityHandle<Client>,
    /// What earlier attempts recorded.
    before: SpendRecord,
    /// This attempt's root budget (spent + reserved is what it has at stake).
    budget: Budget,
    failure: std::sync::Mutex<Option<String>>,
    /// Told after each record made before a call.
    recorded: tokio::sync::Notify,
    /// Records go out one at a time, each read just before it is sent, so the last one
    /// Temporal keeps is never older than a call already under way.
    order: tokio::sync::Mutex<()>,
}

impl Journal {
    async fn record(&self) -> Result<(), String> {
        let _turn = self.order.lock().await;
        let s = self.budget.snapshot();
        let record = SpendRecord {
            charged_usd: self
                .before
                .charged_usd
                .saturating_add(s.spent_usd)
                .saturating_add(s.reserved_usd),
        };
        // The SDK's own heartbeat first: the SDK cancels an attempt whose heartbeats it has not
        // seen for the heartbeat timeout, and it sends its latest details when an attempt
        // fails. It is throttled, so it is no proof; the call below is.
        self.ctx
            .record_heartbeat(record)
            .await
            .map_err(|e| format!("the attempt's spend record could not be encoded: {e}"))?;
        let opts = RpcOptions::builder()
            .timeout(Duration::from_secs(10))
            .build();
        self.handle
            .heartbeat(Some(record), opts)
            .await
            .map(|_| ())
            .map_err(|e| format!("Temporal did not take the attempt's spend record: {e}"))
    }

    fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[async_trait::async_trait]
impl SpendJournal for Journal {
    async fn before_call(&self) -> Result<(), String> {
        // A record that does not get through stops the run before the call (a liveness record
        // that does not is only retried at the next tick).
        let recorded = self.record().await.inspect_err(|why| {
            *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.clone());
        });
        if recorded.is_ok() {
            self.recorded.notify_one();
        }
        recorded
    }
}
