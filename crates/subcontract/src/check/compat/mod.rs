#![doc = include_str!("../../docs/compat.md")]

mod ack;
mod lock;

mod set;
mod spec;
#[cfg(test)]
mod tests;

pub use ack::{load_acknowledged, parse_acknowledged, AckError, Acknowledged};
pub use lock::{LockError, LockFile, LockedLimits, Snapshot, LOCK_VERSION};
pub use set::{SpecEntry, SpecSet};

use crate::diag::{Diagnostic, Severity};

use super::CheckReport;
use crate::contract::subsume::{Kind, Side};

/// The stable codes of contract-evolution diagnostics (`src/docs/compat.md`). They are
/// distinct from `check`'s codes, whose meanings do not change.
pub mod codes {
    /// Input: a property became required; callers that omit it break.
    pub const INPUT_REQUIRED_ADDED: &str = "input-required-added";
    /// Input: a property is no longer accepted (closed object, or newly closed).
    pub const INPUT_PROPERTY_REMOVED: &str = "input-property-removed";
    /// Input: fewer types accepted.
    pub const INPUT_TYPE_NARROWED: &str = "input-type-narrowed";
    /// Input: a lower `maxLength`/`maxItems`/`maximum`/`maxProperties`, a higher `min*`, a new
    /// `multipleOf`.
    pub const INPUT_BOUND_TIGHTENED: &str = "input-bound-tightened";
    /// Input: an accepted value (`enum`, `const`) is no longer accepted.
    pub const INPUT_ENUM_NARROWED: &str = "input-enum-narrowed";
    /// Input: a `pattern` was added.
    pub const INPUT_PATTERN_TIGHTENED: &str = "input-pattern-tightened";
    /// Input: `uniqueItems` or `dependentRequired` was added.
    pub const INPUT_CONSTRAINT_ADDED: &str = "input-constraint-added";
    /// Output: a property is no longer required; parents that read it break.
    pub const OUTPUT_REQUIRED_REMOVED: &str = "output-required-removed";
    /// Output: a property (or unlisted properties) where the old object was closed.
    pub const OUTPUT_PROPERTY_ADDED: &str = "output-property-added";
    /// Output: more types may be returned.
    pub const OUTPUT_TYPE_WIDENED: &str = "output-type-widened";
    /// Output: a bound was raised (or a lower bound lowered, or removed).
    pub const OUTPUT_BOUND_LOOSENED: &str = "output-bound-loosened";
    /// Output: a new `enum`/`const` value may be returned.
    pub const OUTPUT_ENUM_WIDENED: &str = "output-enum-widened";
    /// Output: a `pattern` was removed.
    pub const OUTPUT_PATTERN_LOOSENED: &str = "output-pattern-loosened";
    /// Output: `uniqueItems` or `dependentRequired` was removed.
    pub const OUTPUT_CONSTRAINT_REMOVED: &str = "output-constraint-removed";
    /// Output: the worst-case output size grew past what the old contract promised.
    pub const OUTPUT_SIZE_GREW: &str = "output-size-grew";
    /// Warning: compatibility could not be proved (the message says why).
    pub const CANNOT_PROVE: &str = "cannot-prove";
    /// A spec that existed is gone; every caller breaks.
    pub const SPEC_REMOVED: &str = "spec-removed";
    /// A spec's name changed (its file kept); callers use the old name.
    pub const SPEC_RENAMED: &str = "spec-renamed";
    /// A tool was added to a spec: a capability widening, an error unless acknowledged.
    pub const TOOL_ADDED: &str = "tool-added";
    /// Note: a spec that did not exist before.
    pub const SPEC_ADDED: &str = "spec-added";
    /// Note: a tool was removed from a spec (capabilities narrowed).
    pub const TOOL_REMOVED: &str = "tool-removed";
    /// Note: `max_turns`, `max_cost_usd` or `timeout_secs` was raised.
    pub const LIMIT_RAISED: &str = "limit-raised";
    /// Note: the description changed (what calling models read to decide).
    pub const DESCRIPTION_CHANGED: &str = "description-changed";
    /// Note: the system prompt changed.
    pub const PROMPT_CHANGED: &str = "prompt-changed";
    /// Note: the model changed.
    pub const MODEL_CHANGED: &str = "model-changed";
}

/// What a comparison accepts.
#[derive(Debug, Clone, Default)]
pub struct CompatOptions {
    /// Codes accepted everywhere (`--allow CODE`): their findings become notes.
    pub allow: Vec<String>,
    /// Known breaks of one spec, each with a reason.
    pub acknowledged: Vec<Acknowledged>,
    /// Whether warnings (`cannot-prove`) fail the run too.
    pub deny_warnings: bool,
}

/// Compares `old` with `new`: one diagnostic per change, pointing into the new files (a
/// removed spec points at its old file). Notes (severity `info`) never fail the run.
pub fn compare(old: &SpecSet, new: &SpecSet, opts: &CompatOptions) -> CheckReport {
    let mut diagnostics: Vec<Diagnostic> = old.problems.clone();
    diagnostics.extend(new.problems.iter().cloned());
    diagnostics.extend(spec::compare_sets(old, new));
    for d in &mut diagnostics {
        accept(d, opts);
    }
    diagnostics.sort_by(|a, b| {
        (&a.file, a.line, a.column, &a.code).cmp(&(&b.file, b.line, b.column, &b.code))
    });
    CheckReport {
        diagnostics,
        specs_checked: new.entries.len(),
        deny_warnings: opts.deny_warnings,
        sources: new.sources.clone(),
    }
}

impl CheckReport {
    /// This report and `other`'s (a `check` run and a comparison) as one, sorted by place.
    pub fn merge(mut self, other: CheckReport) -> CheckReport {
        self.diagnostics.extend(other.diagnostics);
        self.diagnostics.sort_by(|a, b| {
            (&a.file, a.line, a.column, &a.code).cmp(&(&b.file, b.line, b.column, &b.code))
        });
        self.sources.extend(other.sources);
        self.deny_warnings |= other.deny_warnings;
        self.specs_checked = self.specs_checked.max(other.specs_checked);
        self
    }
}

/// Turns an allowed or acknowledged finding into a note that says why it is accepted.
fn accept(d: &mut Diagnostic, opts: &CompatOptions) {
    if d.severity == Severity::Info {
        return;
    }
    let reason = if opts.allow.iter().any(|c| c == &d.code) {
        Some(format!("allowed by --allow {}", d.code))
    } else {
        opts.acknowledged
            .iter()
            .find(|a| a.code == d.code && d.spec.as_deref() == Some(a.spec.as_str()))
            .map(|a| format!("acknowledged: {}", a.reason))
    };
    if let Some(reason) = reason {
        d.severity = Severity::Info;
        d.message = format!("{} ({reason})", d.message);
    }
}

/// The stable diagnostic code of a finding's kind on `side`.
pub(crate) fn code(kind: Kind, side: Side) -> &'static str {
    use codes::*;
    match (side, kind) {
        (_, Kind::CannotProve) => CANNOT_PROVE,
        (Side::Input, Kind::Required) => INPUT_REQUIRED_ADDED,
        (Side::Input, Kind::Property) => INPUT_PROPERTY_REMOVED,
        (Side::Input, Kind::Type) => INPUT_TYPE_NARROWED,
        (Side::Input, Kind::Bound) => INPUT_BOUND_TIGHTENED,
        (Side::Input, Kind::Enum) => INPUT_ENUM_NARROWED,
        (Side::Input, Kind::Pattern) => INPUT_PATTERN_TIGHTENED,
        (Side::Input, Kind::Constraint) => INPUT_CONSTRAINT_ADDED,
        (Side::Output, Kind::Required) => OUTPUT_REQUIRED_REMOVED,
        (Side::Output, Kind::Property) => OUTPUT_PROPERTY_ADDED,
        (Side::Output, Kind::Type) => OUTPUT_TYPE_WIDENED,
        (Side::Output, Kind::Bound) => OUTPUT_BOUND_LOOSENED,
        (Side::Output, Kind::Enum) => OUTPUT_ENUM_WIDENED,
        (Side::Output, Kind::Pattern) => OUTPUT_PATTERN_LOOSENED,
        (Side::Output, Kind::Constraint) => OUTPUT_CONSTRAINT_REMOVED,
    }
}
