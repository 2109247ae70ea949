//! The lock file: the contracts of a set of specs as versioned JSON with a stable order, so a
//! committed `contracts.lock.json` can be diffed by `subcontract check --against`.
//!
//! ```json
//! { "version": 1, "specs": [ { "name": "…", "description": "…", "system": "…",
//!   "tools": ["grep"], "model": null, "limits": { … }, "input": { … }, "output": { … },
//!   "contract": "8c0466bec3824054" } ] }
//! ```
//!
//! Specs are sorted by name, tools by name, and every JSON object's keys alphabetically, so
//! the same specs always give the same bytes.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::spec::SubAgentSpec;

/// The lock format version this crate writes and reads.
pub const LOCK_VERSION: u32 = 1;

/// The resolved limits of a spec (defaults filled in), as the lock file records them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedLimits {
    /// Most model turns.
    pub max_turns: u32,
    /// Spending cap in USD (a decimal string), when there is one.
    pub max_cost_usd: Option<Decimal>,
    /// Wall-clock limit in seconds.
    pub timeout_secs: u64,
    /// Largest output, in characters of compact JSON.
    pub max_output_chars: u64,
}

/// What a spec promises its callers and parents: the part of it a change can break.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// The tool name hosts call it by.
    pub name: String,
    /// Its description (what the calling model reads).
    pub description: String,
    /// Its system prompt.
    pub system: String,
    /// The tools it holds, sorted.
    pub tools: Vec<String>,
    /// The model it names, when it names one.
    #[serde(default)]
    pub model: Option<String>,
    /// Its limits.
    pub limits: LockedLimits,
    /// Its input JSON Schema.
    pub input: Value,
    /// Its output JSON Schema.
    pub output: Value,
    /// The contract hash: FNV-1a (16 hex digits) of this entry's pretty JSON without this
    /// field. Any change a caller could see changes it; `subcontract eval` keys recordings by
    /// it. Absent in lock files written before it was kept (they still read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<String>,
}

impl Snapshot {
    /// The snapshot of a spec (declared in Rust or loaded from a file).
    pub fn of<I, O>(spec: &SubAgentSpec<I, O>) -> Self {
        let l = spec.limits();
        let mut tools = spec.tools().to_vec();
        tools.sort();
        tools.dedup();
        Snapshot {
            name: spec.name().to_owned(),
            description: spec.description().to_owned(),
            system: spec.system().to_owned(),
            tools,
            model: spec.model().map(str::to_owned),
            limits: LockedLimits {
                max_turns: l.max_turns,
                max_cost_usd: l.max_cost_usd,
                timeout_secs: l.timeout.as_secs(),
                max_output_chars: u64::try_from(l.max_output_chars).unwrap_or(u64::MAX),
            },
            input: sorted(spec.input_contract().schema()),
            output: sorted(spec.output_contract().schema()),
            contract: None,
        }
        .hashed()
    }

    /// The entry with its [`contract`](Self::contract) hash computed.
    fn hashed(mut self) -> Self {
        self.contract = None;
        // Plain data always serialises.
        let text = serde_json::to_string_pretty(&self).unwrap_or_default();
        self.contract = Some(format!("{:016x}", crate::json::fnv1a(text.as_bytes())));
        self
    }
}

/// JSON with every object's keys in order (serde_json here keeps insertion order).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&m[k])))
                    .collect::<Map<_, _>>(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// A lock file: every spec's [`Snapshot`], sorted by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockFile {
    /// Always [`LOCK_VERSION`] when written by this crate.
    pub version: u32,
    /// The specs, sorted by name.
    pub specs: Vec<Snapshot>,
}

/// A lock file that cannot be read.
#[derive(thiserror::Error)]
pub enum LockError {
    /// Not JSON, or not the lock format.
    #[error("not a contracts lock file: {0}")]
    Format(#[from] serde_json::Error),
    /// Written by a newer (or unknown) version of the format.
    #[error("lock file version {0} is not supported (this build reads version {LOCK_VERSION})")]
    Version(u32),
}

crate::debug_as_display!(LockError);

impl LockFile {
    /// A lock file of `specs`, sorted.
    pub fn new(mut specs: Vec<Snapshot>) -> Self {
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        LockFile {
            version: LOCK_VERSION,
            specs,
        }
    }

    /// Adds more specs (from another registry or a spec directory), keeping the order.
    pub fn extend(&mut self, more: impl IntoIterator<Item = Snapshot>) {
        self.specs.extend(more);
        self.specs.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// The lock file's text: pretty JSON with a final newline, the same bytes for the same specs.
    pub fn to_json(&self) -> String {
        // Plain data always serialises.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Reads a lock file's text.
    pub fn from_json(text: &str) -> Result<Self, LockError> {
        // The version first, so a future format gets the version error, not a field error.
        #[derive(Deserialize)]
        struct Head {
            version: u32,
        }
        let head: Head = serde_json::from_str(text)?;
        if head.version != LOCK_VERSION {
            return Err(LockError::Version(head.version));
        }
        let mut lock: LockFile = serde_json::from_str(text)?;
        lock.specs.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(lock)
    }
}

/// The lock file of specs declared in Rust, for a binary that prints it:
///
/// ```
/// # use serde_json::json;
/// # use subcontract::SubAgentSpec;
/// fn summarise() -> SubAgentSpec<serde_json::Value, serde_json::Value> {
///     SubAgentSpec::dynamic("summarise", json!({"type": "string", "maxLength": 20000}),
///         json!({"type": "string", "maxLength": 400}))
///         .description("Summarises one text.").system("Summarise.").build().unwrap()
/// }
/// let lock = subcontract::registry![summarise()];
/// assert_eq!(lock.specs[0].name, "summarise");
/// print!("{}", lock.to_json()); // cargo run --example lock > contracts.lock.json
/// ```
#[macro_export]
macro_rules! registry {
    ($($spec:expr),* $(,)?) => {
        $crate::check::compat::LockFile::new(::std::vec![
            $($crate::check::compat::Snapshot::of(&$spec)),*
        ])
    };
}
