//! Recorded exchanges: a [`Recorder`] writes what a real model answered, and a [`ReplayModel`]
//! answers the same requests offline from that file.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{Message, Model, ModelError, ModelRequest, ModelResponse};

/// One line of a recording: the parts of a request that identify it, and the response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedExchange {
    /// The model that answered.
    pub model: String,
    /// System prompt of the request.
    pub system: String,
    /// Conversation of the request.
    pub messages: Vec<Message>,
    /// Names of the tools offered.
    pub tools: Vec<String>,
    /// What the model answered.
    pub response: ModelResponse,
}

impl RecordedExchange {
    fn from_request(model: &str, req: ModelRequest<'_>, response: ModelResponse) -> Self {
        RecordedExchange {
            model: model.to_string(),
            system: req.system.to_string(),
            messages: req.messages.to_vec(),
            tools: req.tools.iter().map(|t| t.name.to_string()).collect(),
            response,
        }
    }
}

/// The key a request is matched by: system prompt, conversation and tool names. Matching by
/// content (not by order) keeps replays deterministic when sub-agents run concurrently.
fn key(system: &str, messages: &[Message], tools: &mut dyn Iterator<Item = &str>) -> String {
    let tools: Vec<&str> = tools.collect();
    // serde_json cannot fail on these types: no maps with non-string keys, no floats NaN.
    serde_json::to_string(&(system, messages, tools)).unwrap_or_default()
}

/// Errors reading a recording.
#[derive(thiserror::Error)]
pub enum ReplayError {
    /// The file could not be read.
    #[error("cannot read recording {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A line is not a recorded exchange.
    #[error("{path}:{line}: not a recorded exchange: {message}")]
    Parse {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
}

crate::debug_as_display!(ReplayError);

/// Answers requests from a recording (JSON Lines of [`RecordedExchange`]). A request matches a
/// recorded one with the same system prompt, conversation and tool names; identical requests
/// are answered in recorded order. An unknown request is a [`ModelError::Exhausted`].
#[derive(Debug)]
pub struct ReplayModel {
    id: String,
    answers: Mutex<HashMap<String, VecDeque<ModelResponse>>>,
}

impl ReplayModel {
    /// A replay model over `exchanges`, reporting `id` (use the recorded model's id so its
    /// price applies).
    pub fn new(
        id: impl Into<String>,
        exchanges: impl IntoIterator<Item = RecordedExchange>,
    ) -> Self {
        let mut answers: HashMap<String, VecDeque<ModelResponse>> = HashMap::new();
        for ex in exchanges {
            let k = key(
                &ex.system,
                &ex.messages,
                &mut ex.tools.iter().map(String::as_str),
            );
            answers.entry(k).or_default().push_back(ex.response);
        }
        ReplayModel {
            id: id.into(),
            answers: Mutex::new(answers),
        }
    }

    /// Reads a JSON Lines recording; the model id is the one recorded on its first line.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ReplayError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|source| ReplayError::Io {
            path: shown.clone(),
            source,
        })?;
        let mut exchanges = Vec::new();
        for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|source| ReplayError::Io {
                path: shown.clone(),
                source,
            })?;
            if line.trim().is_empty() {
                continue;
            }
            let ex: RecordedExchange =
                serde_json::from_str(&line).map_err(|e| ReplayError::Parse {
                    path: shown.clone(),
                    line: i + 1,
                    message: e.to_string(),
                })?;
            exchanges.push(ex);
        }
        let id = exchanges
            .first()
            .map(|e| e.model.clone())
            .unwrap_or_else(|| "replay:empty".to_string());
        Ok(Self::new(id, exchanges))
    }
}

#[async_trait]
impl Model for ReplayModel {
    fn id(&self) -> &str {
        &self.id
    }

    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let k = key(
            request.system,
            request.messages,
            &mut request.tools.iter().map(|t| &*t.name),
        );
        let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        answers
            .get_mut(&k)
            .and_then(VecDeque::pop_front)
            .ok_or_else(|| {
                ModelError::Exhausted(format!(
                    "replay: no recorded response for this request ({} messages); record the run again",
                    request.messages.len()
                ))
            })
    }
}

/// Wraps a model and appends every successful exchange to a JSON Lines file that
/// [`ReplayModel::from_file`] reads back.
pub struct Recorder {
    inner: Arc<dyn Model>,
    out: Mutex<Box<dyn Write + Send>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("model", &self.inner.id())
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// Records the exchanges of `inner` to `out`.
    pub fn new(inner: Arc<dyn Model>, out: Box<dyn Write + Send>) -> Self {
        Recorder {
            inner,
            out: Mutex::new(out),
        }
    }

    /// Records to a new file at `path` (truncating it).
    pub fn to_file(inner: Arc<dyn Model>, path: impl AsRef<Path>) -> std::io::Result<Self> {
        let f = std::fs::File::create(path)?;
        Ok(Self::new(inner, Box::new(std::io::BufWriter::new(f))))
    }
}

#[async_trait]
impl Model for Recorder {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn prompt_cache(&self) -> Option<crate::model::PromptCache> {
        self.inner.prompt_cache()
    }

    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let response = self.inner.complete(request).await?;
        let ex = RecordedExchange::from_request(self.inner.id(), request, response.clone());
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        // A recording that cannot be written must not fail the run it records; say so loudly.
        // Redacted like every other file written: the answer may echo a key.
        let written = serde_json::to_string(&ex)
            .map_err(std::io::Error::from)
            .and_then(|line| out.write_all(crate::redact::redact(&line).as_bytes()))
            .and_then(|_| out.write_all(b"\n"))
            .and_then(|_| out.flush());
        if let Err(e) = written {
            tracing::error!(error = %e, "could not write the recording");
        }
        Ok(response)
    }
}
