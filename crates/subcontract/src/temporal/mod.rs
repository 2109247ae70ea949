//! Batches on Temporal, across machines: the engine of `subcontract batch --engine
//! temporal://…` and `subcontract worker` (feature `temporal`).
//!
//! Three parts, each a process of its own or several:
//! - The **workflow** ([`BatchWorkflow`], run by workers) is the batch's **ledger**: before
//!   scheduling a child it reserves the child's cap (its spec's `max_cost_usd`, lowered to what
//!   the batch has left) and settles to the child's actual cost when its report comes back;
//!   the concurrency cap lives there too. It continues as new (after draining its children)
//!   every few thousand children, so 10,000 inputs or 100,000 fit Temporal's history limits.
//! - The **activity** ([`SubAgentActivities::run_subagent`], on any number of workers) is one
//!   sub-agent run: the whole run loop, its tools and contract checks. Before every model call
//!   it records, synchronously, as its heartbeat, what the input may have cost by the end of
//!   that call. A worker killed mid-run loses the attempt; Temporal retries it elsewhere, and
//!   the new attempt starts from the record, so the killed attempt's spend is charged (at most
//!   the worst case of the call it was making), never forgotten, and the input's cap still
//!   bounds all its attempts together. A record that cannot be read, or an attempt that fails
//!   in a way nobody planned for, is charged the input's whole cap.
//! - The **starter** (`subcontract batch … --engine`, [`run_batch`]) reads the inputs and
//!   writes the results, as activities on a task queue of its own: the files stay on its
//!   machine, and `--out` has the same format and resume rules as a local batch. Stopping the
//!   starter leaves the batch running; the same command re-attaches (same batch id) and writes
//!   what finished meanwhile.
//!
//! A child whose report is in the workflow's history is never run again, and a result
//! delivered twice (a write retried) is written once, by id. (Reports reach the workflow at
//! least once: a worker killed after its run finished but before its report arrived runs it
//! again, charged for both.)

mod ledger;
mod messages;
// Temporal's macros add an undocumented marker constant per activity and workflow method (the
// methods themselves are documented).
#[allow(missing_docs)]
mod starter;
#[allow(missing_docs)]
mod worker;
#[allow(missing_docs)]
mod workflow;

pub(crate) use ledger::SpendLedger;
pub use messages::{
    BatchOutcome, BatchParams, Carry, Delivery, Item, LedgerView, ReadReply, ReadRequest,
    RunReport, RunRequest, SpendRecord, Tally,
};
pub(crate) use starter::StarterActivities;
pub use starter::MAX_INPUT_BYTES;
pub use worker::SubAgentActivities;
pub use workflow::{BatchWorkflow, DEFAULT_HISTORY_EVENTS};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rust_decimal::Decimal;
use temporalio_client::{
    Client, ClientOptions, Connection, ConnectionOptions, WorkflowGetResultOptions,
    WorkflowIdConflictPolicy, WorkflowIdReusePolicy, WorkflowStartOptions,
};
use temporalio_sdk::runtime::worker_tuner::{FixedSizeSlotSupplier, TunerHolder, WorkerTuner};
use temporalio_sdk::{Runtime, Worker, WorkerOptions};

use crate::batch::{Ledger, Progress, Summary};

/// Why the Temporal engine could not do its part.
#[derive(thiserror::Error)]
pub enum TemporalError {
    /// `--engine` is not `temporal://HOST:PORT`.
    #[error("engine `{0}`: expected temporal://HOST:PORT (for example temporal://localhost:7233)")]
    Engine(String),
    /// The server could not be reached.
    #[error("cannot connect to Temporal at {target}: {reason}")]
    Connect {
        /// host:port.
        target: String,
        /// Why.
        reason: String,
    },
    /// A worker could not be created or failed while running.
    #[error("Temporal worker: {0}")]
    Worker(String),
    /// The workflow could not be started or attached to.
    #[error("cannot start the batch workflow `{workflow}`: {reason}")]
    Start {
        /// The workflow id.
        workflow: String,
        /// Why.
        reason: String,
    },
    /// A batch with this id is running with other settings.
    #[error("batch `{batch}` is already running with other settings ({differences}): wait for it to end, stop it (temporal workflow terminate --workflow-id {workflow}), or give this one another --batch-id")]
    Mismatch {
        /// The batch id.
        batch: String,
        /// The workflow id.
        workflow: String,
        /// What differs, `name: running → asked`.
        differences: String,
    },
    /// The batch ended without a result (failed, terminated, cancelled).
    #[error("the batch workflow `{workflow}` ended without finishing: {reason}")]
    Ended {
        /// The workflow id.
        workflow: String,
        /// Why.
        reason: String,
    },
    /// The input or output file.
    #[error(transparent)]
    Batch(#[from] crate::batch::BatchError),
}

crate::debug_as_display!(TemporalError);

/// Where the Temporal service is, and which namespace and task queue the batch uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Engine {
    /// `host:port`.
    pub target: String,
    /// The namespace (default `default`).
    pub namespace: String,
    /// The workers' task queue (default `subcontract`).
    pub task_queue: String,
}

impl Engine {
    /// Parses `temporal://HOST:PORT`.
    ///
    /// ```
    /// let e = subcontract::temporal::Engine::parse("temporal://localhost:7233", None, None).unwrap();
    /// assert_eq!(e.target, "localhost:7233");
    /// assert_eq!((e.namespace.as_str(), e.task_queue.as_str()), ("default", "subcontract"));
    /// assert!(subcontract::temporal::Engine::parse("http://localhost:7233", None, None).is_err());
    /// ```
    pub fn parse(
        url: &str,
        namespace: Option<&str>,
        task_queue: Option<&str>,
    ) -> Result<Engine, TemporalError> {
        let bad = || TemporalError::Engine(url.to_string());
        let rest = url.strip_prefix("temporal://").ok_or_else(bad)?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (host, port) = rest.rsplit_once(':').ok_or_else(bad)?;
        if host.is_empty() || port.parse::<u16>().is_err() || host.contains(['/', '@', '?', '#']) {
            return Err(bad());
        }
        Ok(Engine {
            target: rest.to_string(),
            namespace: namespace.unwrap_or("default").to_string(),
            task_queue: task_queue.unwrap_or("subcontract").to_string(),
        })
    }

    /// Connects a client to the engine's namespace.
    pub async fn connect(&self) -> Result<Client, TemporalError> {
        let err = |reason: String| TemporalError::Connect {
            target: self.target.clone(),
            reason,
        };
        let url = temporalio_client::Url::parse(&format!("http://{}", self.target))
            .map_err(|e| err(e.to_string()))?;
        let options = ConnectionOptions::new(url)
            .identity(format!(
                "subcontract-{}@{}",
                std::process::id(),
                host_name()
            ))
            .connect_timeout(Duration::from_secs(10))
            .build();
        let connection = Connection::connect(options)
            .await
            .map_err(|e| err(e.to_string()))?;
        Client::new(
            connection,
            ClientOptions::new(self.namespace.clone()).build(),
        )
        .map_err(|e| err(e.to_string()))
    }
}

/// A worker: runs batch workflows and sub-agent runs from the engine's task queue until
/// `stop` is cancelled (then it finishes what it holds and returns). `max_runs` sub-agent runs
/// at once at most.
pub async fn run_worker(
    engine: &Engine,
    activities: SubAgentActivities,
    max_runs: usize,
    stop: crate::CancellationToken,
) -> Result<(), TemporalError> {
    let client = engine.connect().await?;
    let runtime = Runtime::from_current_tokio(Default::default())
        .map_err(|e| TemporalError::Worker(e.to_string()))?;
    let tuner = TunerHolder::builder()
        .workflow_task_slot_supplier(FixedSizeSlotSupplier::new(16))
        .activity_task_slot_supplier(FixedSizeSlotSupplier::new(max_runs.max(1)))
        .local_activity_task_slot_supplier(FixedSizeSlotSupplier::new(1))
        .nexus_task_slot_supplier(FixedSizeSlotSupplier::new(1))
        .build();
    let options = WorkerOptions::new(engine.task_queue.clone())
        .register_workflow::<BatchWorkflow>()
        .map_err(|e| TemporalError::Worker(e.to_string()))?
        .register_activities(activities)
        .tuner(WorkerTuner::from(tuner))
        .build();
    let mut worker =
        Worker::new(&runtime, client, options).map_err(|e| TemporalError::Worker(e.to_string()))?;
    let shutdown = worker.shutdown_handle();
    tokio::spawn(async move {
        stop.cancelled().await;
        shutdown();
    });
    worker
        .run()
        .await
        .map_err(|e| TemporalError::Worker(e.to_string()))
}

/// A batch to start (or re-attach to) on Temporal.
#[derive(Debug, Clone)]
pub struct TemporalBatch {
    /// Its id: the same id re-attaches to a batch still running.
    pub batch_id: String,
    /// The spec's name (workers load it) and its `max_cost_usd`.
    pub spec: String,
    /// The spec's own cap per input.
    pub spec_cap_usd: Option<Decimal>,
    /// The batch's limit, earlier runs recorded in `out` included.
    pub limit_usd: Option<Decimal>,
    /// Inputs in flight at most.
    pub concurrency: u32,
    /// An attempt silent this long is presumed lost.
    pub heartbeat_timeout: Duration,
    /// One attempt's limit.
    pub attempt_timeout: Duration,
    /// History events per workflow run before it continues as new
    /// ([`DEFAULT_HISTORY_EVENTS`]).
    pub history_events: u32,
    /// JSON Lines of inputs.
    pub inputs: PathBuf,
    /// JSON Lines of results (the ledger a later run resumes from).
    pub out: PathBuf,
}

/// What a batch on Temporal did, as the starter saw it.
#[derive(Debug, Clone)]
pub struct TemporalSummary {
    /// What this starter wrote and skipped (the same fields as a local batch's).
    pub summary: Summary,
    /// The workflow's own account.
    pub outcome: BatchOutcome,
    /// The workflow id.
    pub workflow_id: String,
}

/// A batch id for `spec` writing to `out`: the spec's name and a stable hash of `out`'s full
/// path, so the same command (from any directory) finds the same batch.
pub fn default_batch_id(spec: &str, out: &std::path::Path) -> String {
    format!(
        "{spec}-{:016x}",
        fnv1a(full_path(out).to_string_lossy().as_bytes())
    )
}

pub(crate) use crate::json::fnv1a;

/// The workflow id of batch `batch_id`.
pub fn workflow_id(batch_id: &str) -> String {
    format!("subcontract-batch-{batch_id}")
}

/// Starts batch `b` on the engine, or re-attaches to it if it is still running, and serves
/// its reads and writes until it ends; `progress` is kept up to date for a display. When
/// `stop` is cancelled the starter detaches (the batch goes on; the same call re-attaches).
pub async fn run_batch(
    engine: &Engine,
    b: &TemporalBatch,
    ledger: Ledger,
    progress: Arc<Progress>,
    stop: crate::CancellationToken,
) -> Result<Option<TemporalSummary>, TemporalError> {
    let spent_before = ledger.spent_usd();
    // The input file is read once here (its ids): a blocking read, off the async threads.
    let (inputs, out) = (b.inputs.clone(), b.out.clone());
    let activities =
        tokio::task::spawn_blocking(move || StarterActivities::new(inputs, out, ledger, progress))
            .await
            .map_err(|e| TemporalError::Worker(e.to_string()))??;
    let client = engine.connect().await?;
    let runtime = Runtime::from_current_tokio(Default::default())
        .map_err(|e| TemporalError::Worker(e.to_string()))?;
    let starter_queue = format!("{}-starter-{}", engine.task_queue, b.batch_id);
    let options = WorkerOptions::new(starter_queue.clone())
        .register_activities(activities.clone())
        .build();
    let mut worker = Worker::new(&runtime, client.clone(), options)
        .map_err(|e| TemporalError::Worker(e.to_string()))?;
    let shutdown = worker.shutdown_handle();
    let workflow = workflow_id(&b.batch_id);
    let carry = Carry {
        params: BatchParams {
            batch_id: b.batch_id.clone(),
            spec: b.spec.clone(),
            concurrency: b.concurrency,
            starter_queue,
            heartbeat_timeout_ms: b.heartbeat_timeout.as_millis() as u64,
            attempt_timeout_ms: b.attempt_timeout.as_millis() as u64,
            history_events: b.history_events,
            inputs: b
                .inputs
                .canonicalize()
                .unwrap_or_else(|_| b.inputs.clone())
                .display()
                .to_string(),
            out: format!("{}:{}", host_name(), full_path(&b.out).display()),
        },
        ledger: SpendLedger {
            limit_usd: b.limit_usd,
            child_cap_usd: b.spec_cap_usd,
            spent_usd: spent_before,
            reserved_usd: Decimal::ZERO,
        },
        cursor: 0,
        offset: 0,
        eof: false,
        pending: Default::default(),
        started: 0,
        tally: Tally::default(),
        out_of_money: false,
        generation: 0,
        stamp: String::new(),
    };
    let start = WorkflowStartOptions::new(engine.task_queue.clone(), workflow.clone())
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .id_reuse_policy(WorkflowIdReusePolicy::AllowDuplicate)
        .build();
    let asked = (
        carry.params.clone(),
        carry.ledger.limit_usd,
        carry.ledger.child_cap_usd,
    );
    let handle = client
        .start_workflow(BatchWorkflow::run, carry, start)
        .await
        .map_err(|e| TemporalError::Start {
            workflow: workflow.clone(),
            reason: e.to_string(),
        })?;
    // A batch already running under this id keeps its settings: re-attaching with others
    // would be ignored silently (another queue would even leave this starter unheard).
    let running = started_with(&handle)
        .await
        .map_err(|reason| TemporalError::Start {
            workflow: workflow.clone(),
            reason,
        })?;
    let differences = differences(
        &(
            running.params,
            running.ledger.limit_usd,
            running.ledger.child_cap_usd,
        ),
        &asked,
    );
    if !differences.is_empty() {
        return Err(TemporalError::Mismatch {
            batch: b.batch_id.clone(),
            workflow,
            differences,
        });
    }
    tracing::info!(workflow = %workflow, run = ?handle.run_id(), "batch workflow started or attached");
    let waiting = async {
        // The server going away for a moment is not the batch ending: ask again.
        let result = async {
            let mut wait = Duration::from_millis(500);
            loop {
                match handle.get_result(WorkflowGetResultOptions::default()).await {
                    Err(temporalio_client::errors::WorkflowGetResultError::Rpc(status)) => {
                        tracing::warn!(error = %status, "waiting for the batch: Temporal did not answer; asking again");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(Duration::from_secs(10));
                    }
                    r => return r,
                }
            }
        };
        let r = tokio::select! {
            r = result => Some(r),
            _ = stop.cancelled() => None,
        };
        shutdown();
        r
    };
    let (result, ran) = tokio::join!(waiting, worker.run());
    ran.map_err(|e| TemporalError::Worker(e.to_string()))?;
    let Some(result) = result else {
        return Ok(None);
    };
    let outcome = result.map_err(|e| TemporalError::Ended {
        workflow: workflow.clone(),
        reason: crate::redact::redact(&e.to_string()).into_owned(),
    })?;
    let summary = activities.report();
    Ok(Some(TemporalSummary {
        summary,
        outcome,
        workflow_id: workflow,
    }))
}

/// What the batch's current workflow run was started with (the input of its first event:
/// read from the history, so no worker needs to be up).
async fn started_with<W: temporalio_common::HasWorkflowDefinition>(
    handle: &temporalio_client::WorkflowHandle<Client, W>,
) -> Result<Carry, String> {
    use futures::StreamExt;
    use temporalio_common::protos::temporal::api::history::v1::history_event::Attributes;
    // The first event only (a history can be tens of MB).
    let first = handle
        .fetch_history(Default::default())
        .next()
        .await
        .transpose()
        .map_err(|e| e.to_string())?;
    let Some(Attributes::WorkflowExecutionStartedEventAttributes(started)) =
        first.as_ref().and_then(|e| e.attributes.as_ref())
    else {
        return Err("the workflow's history does not start with its input".into());
    };
    let payload = started
        .input
        .as_ref()
        .and_then(|p| p.payloads.first())
        .ok_or("the workflow was started without an input")?;
    serde_json::from_slice(&payload.data).map_err(|e| {
        format!("the workflow's input is not a batch's ({e}); is the id another program's?")
    })
}

/// The settings that differ between a running batch and the one asked for, or "".
fn differences(
    running: &(BatchParams, Option<Decimal>, Option<Decimal>),
    asked: &(BatchParams, Option<Decimal>, Option<Decimal>),
) -> String {
    let (r, a) = (&running.0, &asked.0);
    let usd = |v: Option<Decimal>| v.map_or("none".to_string(), |d| d.normalize().to_string());
    let mut out = Vec::new();
    let mut differ = |name: &str, was: String, now: String| {
        if was != now {
            out.push(format!("{name}: {was} → {now}"));
        }
    };
    differ("spec", r.spec.clone(), a.spec.clone());
    differ("inputs", r.inputs.clone(), a.inputs.clone());
    differ("--out", r.out.clone(), a.out.clone());
    differ(
        "concurrency",
        r.concurrency.to_string(),
        a.concurrency.to_string(),
    );
    differ(
        "task queue",
        r.starter_queue.clone(),
        a.starter_queue.clone(),
    );
    differ("--max-cost-usd", usd(running.1), usd(asked.1));
    differ("the spec's max_cost_usd", usd(running.2), usd(asked.2));
    out.join(", ")
}

/// This machine's name, for telling starters apart (`unknown` where it cannot be read).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

/// `path` made absolute (its directory resolved; the file itself may not exist yet).
fn full_path(path: &std::path::Path) -> PathBuf {
    let dir = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => p.canonicalize().unwrap_or_else(|_| p.to_path_buf()),
        None => std::env::current_dir().unwrap_or_default(),
    };
    dir.join(path.file_name().unwrap_or_default())
}
