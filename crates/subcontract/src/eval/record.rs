//! Recordings of an eval: one file per attempt, keyed by model, mode, case id and attempt,
//! with the spec's contract hash in its first line; and the models that write and replay
//! them.
//!
//! A file is `DIR/<model>/<mode>/<case>.<attempt>.jsonl`, each name made safe (letters,
//! digits, `-`, `_` and `.` kept, at most 48 of them, then the FNV-1a hash of the whole name,
//! so that hostile or colliding ids never leave `DIR` nor share a file). Its first line is a
//! [`RecordingHeader`]; each further line a [`RecordedExchange`], or a [`RecordedError`] for a
//! call that failed (replayed as the same failure, not as a stale recording).

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::model::{Model, ModelError, ModelRequest, ModelResponse, RecordedExchange, ReplayModel};
use crate::spec::OutputMode;

/// The largest recording file read back (one attempt's exchanges; a run's are far smaller).
pub const MAX_RECORDING_BYTES: u64 = 64 << 20;

/// The recording format this crate writes and reads.
pub const RECORDING_VERSION: u32 = 2;

/// The first line of a recording: what it was made for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordingHeader {
    /// Always [`RECORDING_VERSION`].
    pub eval_recording: u32,
    /// The spec's name.
    pub spec: String,
    /// Its contract hash when recorded.
    pub contract: String,
    /// The model the eval ran on.
    pub model: String,
    /// The output mode.
    pub mode: String,
    /// The case id.
    pub case: String,
    /// The attempt (1-based).
    pub attempt: u32,
}

/// A model call that failed while recording: the request's parts a replay matches it by, and
/// the error's message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedError {
    /// The model that failed.
    pub model: String,
    /// System prompt of the request.
    pub system: String,
    /// Conversation of the request.
    pub messages: Vec<crate::model::Message>,
    /// Names of the tools offered.
    pub tools: Vec<String>,
    /// The error, as it was shown.
    pub error: String,
    /// What kind of failure it was, so a replay fails the same way (a timeout as a timeout,
    /// an HTTP status as that status). Absent in recordings made before it was kept: those
    /// replay as a malformed response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<RecordedFailure>,
}

/// The kind of a recorded model failure and the parts a replay rebuilds it from; the
/// provider's name is the recorded model's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RecordedFailure {
    /// [`ModelError::Http`].
    Http {
        /// The status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// [`ModelError::Connection`].
    Connection {
        /// What failed.
        message: String,
    },
    /// [`ModelError::Timeout`].
    Timeout {
        /// The timeout.
        secs: u64,
    },
    /// [`ModelError::MalformedResponse`], and any failure of a model of the caller's own.
    Malformed {
        /// What was wrong.
        message: String,
    },
    /// [`ModelError::UnreadableUsage`].
    UnreadableUsage {
        /// What was wrong.
        message: String,
    },
    /// [`ModelError::Exhausted`].
    Exhausted {
        /// Why.
        message: String,
    },
    /// [`ModelError::Config`].
    Config {
        /// Why.
        message: String,
    },
}

impl RecordedFailure {
    /// The kind of `e`.
    pub fn of(e: &ModelError) -> Self {
        match e {
            ModelError::Http {
                status, message, ..
            } => RecordedFailure::Http {
                status: *status,
                message: message.clone(),
            },
            ModelError::Connection { message, .. } => RecordedFailure::Connection {
                message: message.clone(),
            },
            ModelError::Timeout { secs, .. } => RecordedFailure::Timeout { secs: *secs },
            ModelError::MalformedResponse { message, .. } => RecordedFailure::Malformed {
                message: message.clone(),
            },
            ModelError::UnreadableUsage { message, .. } => RecordedFailure::UnreadableUsage {
                message: message.clone(),
            },
            ModelError::Exhausted(message) => RecordedFailure::Exhausted {
                message: message.clone(),
            },
            ModelError::Config(message) => RecordedFailure::Config {
                message: message.clone(),
            },
            other => RecordedFailure::Malformed {
                message: other.to_string(),
            },
        }
    }

    /// The error again, as `provider` failed with it.
    pub fn to_error(&self, provider: &str) -> ModelError {
        let provider = provider.to_string();
        match self.clone() {
            RecordedFailure::Http { status, message } => ModelError::Http {
                provider,
                status,
                message,
            },
            RecordedFailure::Connection { message } => ModelError::Connection { provider, message },
            RecordedFailure::Timeout { secs } => ModelError::Timeout { provider, secs },
            RecordedFailure::Malformed { message } => {
                ModelError::MalformedResponse { provider, message }
            }
            RecordedFailure::UnreadableUsage { message } => {
                ModelError::UnreadableUsage { provider, message }
            }
            RecordedFailure::Exhausted { message } => ModelError::Exhausted(message),
            RecordedFailure::Config { message } => ModelError::Config(message),
        }
    }
}

/// One attempt's recording as read back.
#[derive(Debug, Clone, Default)]
pub struct RecordedAttempt {
    /// The answered calls.
    pub exchanges: Vec<RecordedExchange>,
    /// The failed calls.
    pub errors: Vec<RecordedError>,
    /// Each call's settings, as [`request_settings`] hashes them: what a replay matches
    /// beside the conversation, so a changed tool, limit or sampling setting is stale.
    pub settings: Vec<String>,
}

/// A hash of everything a request sends besides its system prompt and messages: the tools
/// offered (names, descriptions, schemas), `max_tokens`, sampling, the tool choice, the
/// response format and prompt caching. Two requests that differ in any of them differ here.
/// The stop sequences are left out: the run loop sets them from the tools a turn offers,
/// which are in (and a recording made before it sent any still replays).
pub fn request_settings(request: &ModelRequest<'_>) -> String {
    let mut text = String::new();
    for t in request.tools {
        text.push_str(&t.name);
        text.push('\u{1}');
        text.push_str(&t.description);
        text.push('\u{1}');
        text.push_str(&crate::json::to_compact_string(&t.input_schema));
        text.push('\u{2}');
    }
    text.push_str(&format!(
        "{}\u{2}{:?}\u{2}{:?}\u{2}{:?}\u{2}{:?}",
        request.max_tokens,
        request.sampling,
        request.tool_choice,
        request.response_format,
        request.prompt_cache
    ));
    format!("{:016x}", crate::json::fnv1a(text.as_bytes()))
}

/// A file-name-safe form of `s`: its safe characters (at most 48), `-`, and its hash.
pub fn safe_name(s: &str) -> String {
    let kept: String = s
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(48)
        .collect();
    let kept = kept.trim_start_matches('.');
    format!("{kept}-{:016x}", crate::json::fnv1a(s.as_bytes()))
}

/// The file of one attempt's recording under `dir`.
pub fn recording_path(
    dir: &Path,
    model: &str,
    mode: OutputMode,
    case: &str,
    attempt: u32,
) -> PathBuf {
    dir.join(safe_name(model))
        .join(mode.as_str())
        .join(format!("{}.{attempt}.jsonl", safe_name(case)))
}

/// The models recorded under `dir` (read from the headers of their files), sorted.
pub fn recorded_models(dir: &Path) -> Vec<String> {
    let mut models = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return models;
    };
    for e in entries.flatten() {
        // The first recording found under the model's directory names it.
        let found = walk_first(&e.path(), 2);
        if let Some(h) = found.and_then(|p| read_header(&p).ok()) {
            if !models.contains(&h.model) {
                models.push(h.model);
            }
        }
    }
    models.sort();
    models
}

fn walk_first(dir: &Path, depth: u32) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    for e in entries.flatten() {
        let p = e.path();
        if depth > 1 && p.is_dir() {
            if let Some(f) = walk_first(&p, depth - 1) {
                return Some(f);
            }
        } else if depth == 1 && p.extension().is_some_and(|x| x == "jsonl") {
            return Some(p);
        }
    }
    None
}

fn read_header(path: &Path) -> Result<RecordingHeader, String> {
    use std::io::Read;
    // Only a regular file, and only its first 64 KiB: a header is one short line.
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        return Err("not a regular file".into());
    }
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut line = String::new();
    std::io::BufReader::new(file.take(64 << 10))
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    serde_json::from_str(&line).map_err(|e| format!("not an eval recording: {e}"))
}

/// Reads one attempt's recording: its header and exchanges.
pub fn read_recording(path: &Path) -> Result<(RecordingHeader, RecordedAttempt), String> {
    use std::io::Read;
    // A FIFO or device could block or never end: regular files only.
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        return Err("not a regular file".into());
    }
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    // A recording is a file anyone may hand over: read no more than this of it.
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    if len > MAX_RECORDING_BYTES {
        return Err(format!(
            "the recording is {len} bytes, over the {MAX_RECORDING_BYTES} an attempt's recording may hold"
        ));
    }
    let mut lines = std::io::BufReader::new(file.take(MAX_RECORDING_BYTES)).lines();
    let first = lines
        .next()
        .transpose()
        .map_err(|e| e.to_string())?
        .ok_or("the recording is empty")?;
    let header: RecordingHeader =
        serde_json::from_str(&first).map_err(|e| format!("line 1: not an eval recording: {e}"))?;
    if header.eval_recording != RECORDING_VERSION {
        return Err(format!(
            "recording format {} (this build reads {RECORDING_VERSION})",
            header.eval_recording
        ));
    }
    let mut recorded = RecordedAttempt::default();
    for (i, line) in lines.enumerate() {
        let line = line.map_err(|e| e.to_string())?;
        if line.trim().is_empty() {
            continue;
        }
        let at = |e: serde_json::Error| format!("line {}: {e}", i + 2);
        let value: serde_json::Value = serde_json::from_str(&line).map_err(at)?;
        if let Some(settings) = value.get("request_settings").and_then(|v| v.as_str()) {
            recorded.settings.push(settings.to_owned());
        } else if value.get("error").is_some() {
            recorded
                .errors
                .push(serde_json::from_value(value).map_err(at)?);
        } else {
            recorded
                .exchanges
                .push(serde_json::from_value(value).map_err(at)?);
        }
    }
    Ok((header, recorded))
}

/// Writes one attempt's recording (redacted, like every file this crate writes), through a
/// temporary file renamed into place so a reader never sees half of one.
pub fn write_recording(
    path: &Path,
    header: &RecordingHeader,
    recorded: &RecordedAttempt,
) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
        // A link planted in the recordings' tree (`<model>/<mode>/`) would lead the write
        // elsewhere.
        for d in dir.ancestors().take(2) {
            if std::fs::symlink_metadata(d)?.file_type().is_symlink() {
                return Err(std::io::Error::other(format!(
                    "{} is a symbolic link: recordings are not written through links",
                    d.display()
                )));
            }
        }
    }
    // A fresh name, created only if absent: a link planted at a guessable temporary name is
    // never followed.
    let tmp = path.with_extension(format!("jsonl.{:016x}.tmp", fastrand::u64(..)));
    {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        let mut out = std::io::BufWriter::new(file);
        let head = serde_json::to_string(header).map_err(std::io::Error::from)?;
        out.write_all(head.as_bytes())?;
        out.write_all(b"\n")?;
        let exchanges = recorded.exchanges.iter().map(serde_json::to_string);
        let errors = recorded.errors.iter().map(serde_json::to_string);
        let settings = recorded
            .settings
            .iter()
            .map(|h| serde_json::to_string(&serde_json::json!({ "request_settings": h })));
        for line in exchanges.chain(errors).chain(settings) {
            let line = line.map_err(std::io::Error::from)?;
            out.write_all(crate::redact::redact(&line).as_bytes())?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
    }
    std::fs::rename(&tmp, path)
}

/// What one attempt's model calls did: counted always, kept when recording, and the first
/// request a replay could not answer.
#[derive(Debug, Default)]
pub(crate) struct Tape {
    pub(crate) requests: AtomicU64,
    pub(crate) input_tokens: AtomicU64,
    pub(crate) output_tokens: AtomicU64,
    keep: bool,
    pub(crate) exchanges: Mutex<RecordedAttempt>,
    pub(crate) stale: Mutex<Option<String>>,
    /// Replay models by model id, made once per attempt so identical requests are answered
    /// in recorded order.
    replays: Mutex<HashMap<String, Arc<ReplayModel>>>,
    recorded: RecordedAttempt,
}

impl Tape {
    /// A tape that counts, and keeps the exchanges when `keep`.
    pub(crate) fn new(keep: bool) -> Self {
        Tape {
            keep,
            ..Tape::default()
        }
    }

    /// A tape that answers from `recorded`.
    pub(crate) fn replaying(recorded: RecordedAttempt) -> Self {
        Tape {
            recorded,
            ..Tape::default()
        }
    }

    /// The replay model answering for `id`: the recorded exchanges of that model.
    pub(crate) fn replay_for(&self, id: &str) -> Arc<ReplayModel> {
        let mut replays = self.replays.lock().unwrap_or_else(|p| p.into_inner());
        replays
            .entry(id.to_string())
            .or_insert_with(|| {
                Arc::new(ReplayModel::new(
                    id,
                    self.recorded
                        .exchanges
                        .iter()
                        .filter(|e| e.model == id)
                        .cloned(),
                ))
            })
            .clone()
    }

    fn mark_stale(&self, message: String) {
        let mut stale = self.stale.lock().unwrap_or_else(|p| p.into_inner());
        stale.get_or_insert(message);
    }

    pub(crate) fn stale(&self) -> Option<String> {
        self.stale.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn take_recorded(&self) -> RecordedAttempt {
        std::mem::take(&mut *self.exchanges.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// A model of one attempt: counts every call on the tape, keeps its exchanges when the tape
/// records, and marks the tape stale when a replayed request has no recorded answer.
pub(crate) struct Taped {
    pub(crate) inner: Arc<dyn Model>,
    pub(crate) tape: Arc<Tape>,
    pub(crate) replay: bool,
}

impl std::fmt::Debug for Taped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Taped")
            .field("model", &self.inner.id())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Model for Taped {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn prompt_cache(&self) -> Option<crate::model::PromptCache> {
        self.inner.prompt_cache()
    }

    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let n = self.tape.requests.fetch_add(1, Ordering::Relaxed) + 1;
        let settings = request_settings(&request);
        if self.replay && !self.tape.recorded.settings.contains(&settings) {
            // The conversation may match while the tools, limits or sampling changed: the
            // recorded answer was given to another request.
            self.tape.mark_stale(format!(
                "request {n} (to `{}`) offers other tools, limits, sampling or output format than any recorded one",
                self.inner.id()
            ));
            return Err(ModelError::Exhausted(
                "the recording was made for other request settings".into(),
            ));
        }
        if self.tape.keep {
            self.tape
                .exchanges
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .settings
                .push(settings);
        }
        let result = self.inner.complete(request).await;
        match &result {
            Ok(r) => {
                // Saturating: a tampered recording's usage must not wrap the totals.
                let add = |a: &AtomicU64, n: u64| {
                    let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                        Some(v.saturating_add(n))
                    });
                };
                add(&self.tape.input_tokens, r.usage.input_tokens);
                add(&self.tape.output_tokens, r.usage.output_tokens);
                if self.tape.keep {
                    let ex = RecordedExchange {
                        model: self.inner.id().to_string(),
                        system: request.system.to_string(),
                        messages: request.messages.to_vec(),
                        tools: request.tools.iter().map(|t| t.name.to_string()).collect(),
                        response: r.clone(),
                    };
                    self.tape
                        .exchanges
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .exchanges
                        .push(ex);
                }
            }
            Err(ModelError::Exhausted(_)) if self.replay => {
                let failed = self.tape.recorded.errors.iter().find(|e| {
                    e.model == self.inner.id()
                        && e.system == request.system
                        && e.messages == request.messages
                        && e.tools
                            .iter()
                            .map(String::as_str)
                            .eq(request.tools.iter().map(|t| &*t.name))
                });
                if let Some(e) = failed {
                    // The same failure as when recorded, not a stale recording.
                    return Err(match &e.failure {
                        Some(f) => f.to_error(&e.model),
                        None => ModelError::MalformedResponse {
                            provider: e.model.clone(),
                            message: format!("(recorded) {}", e.error),
                        },
                    });
                }
                self.tape.mark_stale(format!(
                    "request {n} ({} message(s), to `{}`) differs from every recorded one",
                    request.messages.len(),
                    self.inner.id()
                ));
            }
            Err(e) if self.tape.keep => {
                let failed = RecordedError {
                    model: self.inner.id().to_string(),
                    system: request.system.to_string(),
                    messages: request.messages.to_vec(),
                    tools: request.tools.iter().map(|t| t.name.to_string()).collect(),
                    error: e.to_string(),
                    failure: Some(RecordedFailure::of(e)),
                };
                self.tape
                    .exchanges
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .errors
                    .push(failed);
            }
            Err(_) => {}
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_ids_stay_in_their_directory_and_never_collide() {
        let dir = Path::new("/rec");
        for id in [
            "../../etc/passwd",
            "/abs",
            "a/b",
            "a_b",
            "..",
            "",
            "é\u{0}\n",
        ] {
            let p = recording_path(dir, "openai:gpt", OutputMode::Auto, id, 1);
            assert!(p.starts_with("/rec"), "{p:?}");
            assert_eq!(p.components().count(), 5, "{p:?}");
            let name = p.file_name().unwrap().to_str().unwrap();
            assert!(!name.starts_with('.'), "{name}");
            assert!(!name.contains('/'), "{name}");
        }
        assert_ne!(safe_name("a/b"), safe_name("a_b"));
        assert_ne!(safe_name("ab"), safe_name("a/b"));
        assert!(safe_name(&"x".repeat(10_000)).len() < 70);
    }

    #[test]
    fn an_oversized_recording_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.1.jsonl");
        // Sparse: the size is claimed, nothing is written.
        std::fs::File::create(&path)
            .unwrap()
            .set_len(MAX_RECORDING_BYTES + 1)
            .unwrap();
        let e = read_recording(&path).unwrap_err();
        assert!(e.contains("over the"), "{e}");
    }
}
