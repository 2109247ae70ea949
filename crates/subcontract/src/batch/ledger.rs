//! Result lines, and the output file read back as the ledger a resumed batch starts from.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ids::IdSet;
use super::{io_err, BatchError};
use crate::model::Usage;
use crate::{Limit, Outcome, RunResult};

/// One line of a batch's output: the result of one input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultLine {
    /// The input's id.
    pub id: String,
    /// How its run ended (`invalid_input` for a line that held no input).
    pub outcome: Outcome,
    /// The validated output, when it completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// What went wrong, when it did not (paths and reasons, never the offending values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Model turns taken.
    #[serde(default)]
    pub turns: u32,
    /// USD spent, sub-agents included (a decimal string: exact).
    #[serde(default)]
    pub cost_usd: Decimal,
    /// Tokens of the run's own model calls, prompt-cache reads and writes among them (a
    /// sub-agent's are in its own events).
    #[serde(default)]
    pub usage: Usage,
    /// The run's id (empty for a line that held no input).
    #[serde(default)]
    pub run_id: String,
    /// An acting run's changes, never applied: their files and the patch file they were kept
    /// in (`{"id", "files": [{"path", "insertions", "deletions"}], "patch"}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<Value>,
    /// The limit that cut the run short, when it completed with an output asked for before it
    /// was done (the output may be incomplete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_short: Option<Limit>,
}

impl ResultLine {
    /// The line of a finished run. The output and error leave the process: a key they quote
    /// is redacted.
    pub fn from_run(id: String, r: RunResult<Value>) -> Self {
        let output = r.output.map(|mut o| {
            crate::redact::redact_value(&mut o);
            o
        });
        ResultLine {
            id,
            outcome: r.outcome,
            output,
            error: r.error.map(|f| crate::redact::redact_string(f.to_string())),
            turns: r.turns,
            cost_usd: r.total_cost_usd,
            usage: r.usage,
            run_id: r.run_id,
            changes: None,
            cut_short: r.cut_short,
        }
    }

    /// The line of an input line that holds no input.
    pub fn invalid(id: String, reason: String) -> Self {
        ResultLine {
            id,
            outcome: Outcome::InvalidInput,
            output: None,
            error: Some(reason),
            turns: 0,
            cost_usd: Decimal::ZERO,
            usage: Usage::default(),
            run_id: String::new(),
            changes: None,
            cut_short: None,
        }
    }

    /// Compact JSON, one line.
    pub fn to_json(&self) -> String {
        // Strings, numbers and JSON values only: serialising cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// What an output file belongs to, recorded as its first line (`{"batch": {...}}`): the spec's
/// name, a hash of its contracts and the input file. A batch run with another spec, other
/// contracts or another input file is refused ([`BatchError::OtherBatch`]) instead of skipping
/// every id as done. Limits are not part of it: resuming with a higher cap is the point of
/// resuming.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Owner {
    /// The spec's name.
    pub spec: String,
    /// FNV-1a of the spec's name and its input and output schemas (compact JSON), in hex.
    pub contract: String,
    /// The input file, as a full path.
    pub inputs: String,
}

impl Owner {
    /// The owner of a batch of `spec` (any spec, typed or not) over the input file `inputs`.
    pub fn new<S>(spec: &S, inputs: &Path) -> Self
    where
        S: AsRef<crate::spec::DynSpec> + ?Sized,
    {
        Self::of(spec.as_ref(), inputs)
    }

    /// [`new`](Self::new), compiled once rather than per spec type.
    fn of(spec: &crate::spec::DynSpec, inputs: &Path) -> Self {
        let mut bytes = spec.name().as_bytes().to_vec();
        for schema in [
            spec.input_contract().schema(),
            spec.output_contract().schema(),
        ] {
            bytes.push(0);
            bytes.extend(crate::json::to_compact_string(schema).into_bytes());
        }
        let full = std::path::absolute(inputs).unwrap_or_else(|_| inputs.to_path_buf());
        Owner {
            spec: spec.name().to_string(),
            contract: format!("{:016x}", crate::json::fnv1a(&bytes)),
            inputs: full.display().to_string(),
        }
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "spec `{}` (contracts {}) over {}",
            self.spec, self.contract, self.inputs
        )
    }
}

/// The first line of an output file.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeaderLine {
    batch: Owner,
}

/// What an output file already records: the ids done, the USD they spent, and where its last
/// complete line ends.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    done: IdSet,
    spent_usd: Decimal,
    completed: u64,
    failed: u64,
    valid_len: u64,
    /// Bytes read, a torn last line included: the file must still be this long when the batch
    /// starts appending, or another batch wrote to it meanwhile.
    read_len: u64,
    torn: bool,
    /// The file's owner line, when it has one.
    owner: Option<Owner>,
    /// The owner line to write first, into a file that has no line yet.
    header: Option<String>,
}

impl Ledger {
    /// Reads `path` (an absent file is an empty ledger). A last line without its line break
    /// (a write cut short) is left out, and cut off when the file is opened to append; any
    /// other line that is not a [`ResultLine`] is an error (the file is not ours to rewrite).
    pub fn read(path: &Path) -> Result<Ledger, BatchError> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Ledger::default()),
            Err(e) => return Err(io_err(path)(e)),
        };
        let mut ledger = Ledger::default();
        let mut reader = BufReader::new(file);
        let mut buf = Vec::new();
        let mut line_no = 0u64;
        loop {
            buf.clear();
            // Bounded like input lines: a hostile file cannot make this hold more.
            let n = (&mut reader)
                .take(super::MAX_LINE_BYTES as u64 * 2)
                .read_until(b'\n', &mut buf)
                .map_err(io_err(path))?;
            if n == 0 {
                break;
            }
            ledger.read_len += n as u64;
            line_no += 1;
            if buf.last() != Some(&b'\n') {
                let mut rest = [0u8; 1];
                if reader.read(&mut rest).map_err(io_err(path))? > 0 {
                    return Err(BatchError::Corrupt {
                        path: path.display().to_string(),
                        line: line_no,
                        reason: "line too long".into(),
                    });
                }
                tracing::warn!(file = %path.display(), line = line_no, "torn last line: its input is redone");
                ledger.torn = true;
                break;
            }
            if line_no == 1 {
                if let Ok(h) = serde_json::from_slice::<HeaderLine>(&buf) {
                    ledger.valid_len += n as u64;
                    ledger.owner = Some(h.batch);
                    continue;
                }
            }
            let line: ResultLine =
                serde_json::from_slice(&buf).map_err(|e| BatchError::Corrupt {
                    path: path.display().to_string(),
                    line: line_no,
                    reason: e.to_string(),
                })?;
            // A negative cost would raise this run's budget above the limit: the file is not
            // what this command wrote.
            if line.cost_usd.is_sign_negative() {
                return Err(BatchError::Corrupt {
                    path: path.display().to_string(),
                    line: line_no,
                    reason: format!("negative cost_usd {}", line.cost_usd),
                });
            }
            ledger.valid_len += n as u64;
            ledger.spent_usd = ledger.spent_usd.saturating_add(line.cost_usd);
            if line.outcome == Outcome::Completed {
                ledger.completed += 1;
            } else {
                ledger.failed += 1;
            }
            ledger.done.insert(&line.id);
        }
        Ok(ledger)
    }

    /// Binds the file to the batch `owner`: a file that belongs to another batch is refused;
    /// an empty one gets `owner` as its first line when the batch opens it. A file written
    /// before owner lines existed (result lines, no owner) is taken as it is, with a warning.
    pub fn bind(&mut self, path: &Path, owner: Owner) -> Result<(), BatchError> {
        match &self.owner {
            Some(found) if *found != owner => Err(BatchError::OtherBatch {
                path: path.display().to_string(),
                expected: Box::new(owner),
                found: Box::new(found.clone()),
            }),
            Some(_) => Ok(()),
            None if self.valid_len == 0 => {
                self.header = Some(
                    serde_json::to_string(&HeaderLine {
                        batch: owner.clone(),
                    })
                    .unwrap_or_default(),
                );
                self.owner = Some(owner);
                Ok(())
            }
            None => {
                tracing::warn!(file = %path.display(), "the output file records no batch it belongs to: it is taken as this batch's");
                Ok(())
            }
        }
    }

    /// The batch the file belongs to, when it says.
    pub fn owner(&self) -> Option<&Owner> {
        self.owner.as_ref()
    }

    /// Whether `id` has a result line.
    pub fn contains(&self, id: &str) -> bool {
        self.done.contains(id)
    }

    /// Number of ids with a result line.
    pub fn len(&self) -> usize {
        self.done.len()
    }

    /// Whether no id has a result line.
    pub fn is_empty(&self) -> bool {
        self.done.is_empty()
    }

    /// USD recorded by every result line.
    pub fn spent_usd(&self) -> Decimal {
        self.spent_usd
    }

    /// Result lines that completed.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Result lines that did not complete.
    pub fn failed(&self) -> u64 {
        self.failed
    }

    /// Bytes of complete lines: the file is cut to this before appending.
    pub fn valid_len(&self) -> u64 {
        self.valid_len
    }

    /// Whether the last line was torn.
    pub fn torn(&self) -> bool {
        self.torn
    }

    /// Opens `path` to append after the last complete line (creating it when absent), with an
    /// exclusive advisory lock held until the file is closed: a second batch on the same file
    /// would interleave its lines with this one's, and cut this one's line in progress as a
    /// torn line. The file must not have changed since it was read.
    pub(crate) fn open_for_append(&self, path: &Path) -> Result<File, BatchError> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io_err(path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(BatchError::Locked {
                    path: path.display().to_string(),
                })
            }
            // A file system without locks: the batch still runs, as it did before locking.
            Err(TryLockError::Error(e)) if e.kind() == std::io::ErrorKind::Unsupported => {
                tracing::warn!(file = %path.display(), "no file locks here: a second batch on this file would not be refused");
            }
            Err(TryLockError::Error(e)) => return Err(io_err(path)(e)),
        }
        let len = file.metadata().map_err(io_err(path))?.len();
        // Another batch appended after the ledger was read (and before this lock): its lines
        // are not in the ledger, and cutting back to `valid_len` would drop them.
        if len != self.read_len {
            return Err(BatchError::Changed {
                path: path.display().to_string(),
            });
        }
        if len > self.valid_len {
            file.set_len(self.valid_len).map_err(io_err(path))?;
        }
        if let Some(header) = &self.header {
            use std::io::Write;
            // Into a file with no complete line: the owner line comes first.
            (&file)
                .write_all(format!("{header}\n").as_bytes())
                .map_err(io_err(path))?;
        }
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A negative cost would raise the budget past the limit: the file is refused.
    #[test]
    fn a_negative_cost_is_a_corrupt_ledger() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.jsonl");
        let mut line = ResultLine::invalid("1".into(), "x".into());
        line.cost_usd = Decimal::new(-5, 0);
        std::fs::write(&path, format!("{}\n", line.to_json())).expect("write");
        assert!(matches!(
            Ledger::read(&path),
            Err(BatchError::Corrupt { line: 1, .. })
        ));
    }

    /// One batch at a time on a file; and a file written after its ledger was read is not cut
    /// back to that ledger (the lines another batch added would be lost).
    #[test]
    fn the_file_is_locked_and_must_not_have_changed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.jsonl");
        let a = format!(
            "{}\n",
            ResultLine::invalid("1".into(), "x".into()).to_json()
        );
        std::fs::write(&path, &a).expect("write");
        let ledger = Ledger::read(&path).expect("ledger");
        let first = ledger.open_for_append(&path).expect("open");
        let err = ledger.open_for_append(&path).expect_err("locked");
        assert!(matches!(err, BatchError::Locked { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!("another batch is writing to {}", path.display())
        );
        drop(first);
        let stale = Ledger::read(&path).expect("ledger");
        let b = format!(
            "{}\n",
            ResultLine::invalid("2".into(), "y".into()).to_json()
        );
        std::fs::write(&path, format!("{a}{b}{{\"id\":\"3\"")).expect("append");
        let err = stale.open_for_append(&path).expect_err("changed");
        assert!(matches!(err, BatchError::Changed { .. }), "{err}");
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            format!("{a}{b}{{\"id\":\"3\""),
            "left as it is"
        );
    }

    #[test]
    fn a_torn_last_line_is_cut_and_spend_is_summed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.jsonl");
        let a = ResultLine {
            id: "a".into(),
            outcome: Outcome::Completed,
            output: Some(json!({"x": 1})),
            error: None,
            turns: 1,
            cost_usd: Decimal::new(15, 4),
            usage: Usage::default(),
            run_id: "r.s-1".into(),
            changes: None,
            cut_short: None,
        };
        let b = ResultLine::invalid("2".into(), "line 2: not JSON".into());
        let text = format!("{}\n{}\n{{\"id\":\"c\",\"outc", a.to_json(), b.to_json());
        std::fs::write(&path, &text).expect("write");
        let ledger = Ledger::read(&path).expect("ledger");
        assert!(ledger.contains("a") && ledger.contains("2") && !ledger.contains("c"));
        assert_eq!(
            (ledger.completed(), ledger.failed(), ledger.torn()),
            (1, 1, true)
        );
        assert_eq!(ledger.spent_usd(), Decimal::new(15, 4));
        drop(ledger.open_for_append(&path).expect("open"));
        let left = std::fs::read_to_string(&path).expect("read");
        assert_eq!(left, format!("{}\n{}\n", a.to_json(), b.to_json()));
        // Garbage before the end is not a torn line: refused, not overwritten.
        std::fs::write(&path, format!("garbage\n{}\n", a.to_json())).expect("write");
        let err = Ledger::read(&path).expect_err("corrupt");
        assert!(
            err.to_string()
                .ends_with(":1: not a result line: expected value at line 1 column 1"),
            "{err}"
        );
        assert!(Ledger::read(&dir.path().join("absent"))
            .expect("empty")
            .is_empty());
    }
}
