//! Static worst-case size analysis of a JSON Schema (draft 2020-12).
//!
//! The worst-case size of a schema is the longest compact JSON text (as `serde_json::to_string`
//! writes it, no whitespace) of any instance valid against the schema, counting each string at
//! its `maxLength` characters plus 2 quotes. Escape expansion is not counted, and lengths are in
//! characters (Unicode scalar values), as `maxLength` is.
//!
//! The analysis is conservative: it may overestimate, and it may call a schema unbounded when a
//! cleverer proof would bound it, but a bounded answer is meant to be a true upper bound for
//! instances that [`analyze`] can reason about. Known approximations:
//!
//! * Without `type`, a schema with `properties`/`additionalProperties`/`patternProperties` is
//!   treated as an object, one with `items`/`prefixItems`/`maxItems` as an array, and one with
//!   `maxLength` as a string (JSON Schema itself would accept other types there).
//! * An integer is counted as serde_json writes it back, which for an integral float (`100.0`,
//!   `1e2`, valid integers to JSON Schema) is two characters longer than its digits, and past
//!   1e16 in magnitude any number's length.
//! * `not`, `if`/`then`/`else`, `dependentSchemas`, `contains`, `minItems`, `required` and the
//!   like only restrict instances, so they are ignored.
//! * `unevaluatedProperties: false` / `unevaluatedItems: false` close an object / tuple only when
//!   no in-place applicator (`allOf`, `$ref`, …) sits beside them; otherwise the properties those
//!   applicators evaluate would be missed, so the object is reported as open.
//! * Only local `$ref`s (`#`, `#/$defs/Name`, any JSON Pointer into the document) are resolved.
//! * The analysis stops descending after [`MAX_DEPTH`] nested subschemas (including `$ref`
//!   expansions) and after [`MAX_VISITS`] subschema visits, reporting the schema as unbounded.

mod keywords;
mod required;
mod size;
mod subschemas;
#[cfg(test)]
mod tests;
mod walk;

pub use keywords::KEYWORDS;

use serde_json::Value;

use size::Size;
use walk::Analyzer;

/// Deepest subschema nesting (counting `$ref` expansions) that [`analyze`] descends into; deeper
/// parts are reported as unbounded rather than risking the stack.
pub const MAX_DEPTH: usize = 64;

/// Most subschema visits [`analyze`] makes before giving up on a schema as too intricate.
/// Ordinary schemas need one visit per subschema; the cap only stops adversarial `$ref` graphs.
pub const MAX_VISITS: u64 = 250_000;

/// Result of analysing one schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// Longest compact JSON text (in characters) of any instance valid against the schema;
    /// `None` when unbounded (then `problems` is non-empty).
    pub worst_case_chars: Option<u64>,
    /// Why the schema is unbounded, one entry per offending place (all of them, not just the
    /// first). Empty when the schema is bounded.
    pub problems: Vec<Unbounded>,
}

impl Analysis {
    /// Whether every valid instance has a known maximum size.
    pub fn is_bounded(&self) -> bool {
        self.worst_case_chars.is_some()
    }
}

/// One place in a schema that lets instances grow without limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Unbounded {
    /// What kind of unboundedness this is.
    pub kind: UnboundedKind,
    /// JSON Pointer (RFC 6901, with ~0/~1 escaping) to the offending subschema inside the
    /// analysed schema, e.g. "/properties/findings/items/properties/claim" or "/$defs/Node".
    /// "" for the root.
    pub schema_path: String,
    /// A sentence a person can act on, e.g. "string without maxLength (add maxLength, enum or
    /// const)".
    pub message: String,
}

/// The ways a schema can fail to bound its instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnboundedKind {
    /// A string that has no maxLength, enum or const.
    String,
    /// An array without maxItems (and not a closed prefixItems tuple with items:false).
    Array,
    /// An object that admits properties it does not list (additionalProperties not false, or
    /// patternProperties present) — or a schema that allows objects at all without closing them.
    OpenObject,
    /// A $ref that (directly or indirectly) refers back to itself.
    RecursiveRef,
    /// A schema that constrains nothing (`true`, `{}`, a schema with no type/enum/const/
    /// composition). Also used for what the analysis cannot follow: unresolvable `$ref`s,
    /// nesting deeper than [`MAX_DEPTH`], and schemas over the [`MAX_VISITS`] budget.
    AnyValue,
}

impl UnboundedKind {
    /// The stable diagnostic code `subcontract check` reports for this kind (`src/docs/invariants.md`).
    pub fn code(self) -> &'static str {
        use crate::diag::codes;
        match self {
            UnboundedKind::String => codes::UNBOUNDED_STRING,
            UnboundedKind::Array => codes::UNBOUNDED_ARRAY,
            UnboundedKind::RecursiveRef => codes::RECURSIVE_REF,
            UnboundedKind::OpenObject | UnboundedKind::AnyValue => codes::OPEN_OBJECT,
        }
    }
}

/// Something a schema says that cannot be what its author meant: see [`lint`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What kind of finding this is.
    pub kind: FindingKind,
    /// JSON Pointer to the subschema it is in ("" for the root).
    pub schema_path: String,
    /// JSON Pointer to the exact place: the unknown keyword, or the `required` entry.
    pub at: String,
    /// A sentence a person can act on.
    pub message: String,
}

/// The kinds of [`Finding`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FindingKind {
    /// A keyword outside the draft 2020-12 vocabulary (and not an `x-` extension): JSON Schema
    /// ignores it, so a typo such as `maxLenght` leaves the value unconstrained.
    UnknownKeyword,
    /// A `required` property that the object cannot have (closed by `additionalProperties:
    /// false` without declaring it, or declared as `false`): no object satisfies the schema.
    UnsatisfiableRequired,
}

impl FindingKind {
    /// The stable diagnostic code `subcontract check` reports for this kind.
    pub fn code(self) -> &'static str {
        use crate::diag::codes;
        match self {
            FindingKind::UnknownKeyword => codes::UNKNOWN_KEYWORD,
            FindingKind::UnsatisfiableRequired => codes::UNSATISFIABLE_REQUIRED,
        }
    }
}

/// Finds what a schema says that cannot be meant: unknown keywords (with the closest known one)
/// and `required` properties a closed object forbids, in every subschema (`properties`,
/// `items`, `$defs`, `allOf`, …; not inside `enum`, `const`, `default` or `examples`, which hold
/// data). Visits at most [`MAX_VISITS`] subschemas.
///
/// ```
/// use serde_json::json;
/// use subcontract::contract::analysis::{lint, FindingKind};
///
/// let schema = json!({
///     "type": "object",
///     "additionalProperties": false,
///     "required": ["q", "lang"],
///     "properties": {"q": {"type": "string", "maxLenght": 200}},
/// });
/// let found = lint(&schema);
/// assert_eq!(found[0].kind, FindingKind::UnsatisfiableRequired);
/// assert_eq!(found[0].at, "/required/1");
/// assert_eq!(found[1].kind, FindingKind::UnknownKeyword);
/// assert_eq!(found[1].at, "/properties/q/maxLenght");
/// assert!(found[1].message.ends_with("did you mean `maxLength`?"));
/// ```
pub fn lint(schema: &Value) -> Vec<Finding> {
    let mut out = Vec::new();
    subschemas::each(schema, |path, map| {
        required::unsatisfiable(path, map, &mut out);
        keywords::unknown(path, map, &mut out);
    });
    out
}

/// Analyse a schema. `schema` may be a boolean schema or an object.
pub fn analyze(schema: &Value) -> Analysis {
    let mut analyzer = Analyzer::new(schema);
    // The root counts as "being expanded" so that `{"$ref": "#"}` inside it is a cycle at once.
    analyzer.in_progress.push(String::new());
    let size = analyzer.eval(schema, "", 0);
    if analyzer.exhausted {
        return Analysis {
            worst_case_chars: None,
            problems: vec![Unbounded {
                kind: UnboundedKind::AnyValue,
                schema_path: String::new(),
                message: format!(
                    "schema too large or too intricate to analyse (more than {MAX_VISITS} \
                     subschema visits); simplify it or split its $refs"
                ),
            }],
        };
    }
    match size {
        Size::Never => Analysis {
            worst_case_chars: Some(0),
            problems: Vec::new(),
        },
        Size::Bounded(n) => Analysis {
            worst_case_chars: Some(n),
            problems: Vec::new(),
        },
        Size::Unbounded(ids) => {
            let mut problems: Vec<Unbounded> = Vec::with_capacity(ids.len());
            let mut table: Vec<Option<Unbounded>> = std::mem::take(&mut analyzer.problems)
                .into_iter()
                .map(Some)
                .collect();
            for id in ids {
                if let Some(p) = table.get_mut(id).and_then(Option::take) {
                    problems.push(p);
                }
            }
            if problems.is_empty() {
                // Every unbounded result carries at least one problem; this keeps the documented
                // invariant even if that ever stops holding.
                problems.push(Unbounded {
                    kind: UnboundedKind::AnyValue,
                    schema_path: String::new(),
                    message: "schema is unbounded for an unidentified reason".to_owned(),
                });
            }
            Analysis {
                worst_case_chars: None,
                problems,
            }
        }
    }
}
