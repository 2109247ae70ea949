//! Contracts: a JSON Schema compiled once, its static analysis (bounded? worst-case size?),
//! and validation that reports every violation with its path.

pub mod analysis;

pub use analysis::{analyze, Analysis, Unbounded, UnboundedKind};

use std::fmt;
use std::sync::{Arc, OnceLock};

use jsonschema::error::ValidationErrorKind;
use jsonschema::{ValidationError, Validator};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::json::tape::{Tape, TapeJson};

/// How many characters of a violation message are kept: messages quote the offending value,
/// and a 10 KB string must not turn into a 10 KB repair message.
const MAX_MESSAGE_CHARS: usize = 300;
/// Enum values listed in full in a violation; jsonschema itself names only the first two.
const MAX_ENUM_SHOWN: usize = 10;
/// How many violations are reported at most (the rest are counted).
pub const MAX_VIOLATIONS: usize = 20;

/// One way an instance breaks a contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// JSON Pointer to the offending value ("" is the whole value).
    pub path: String,
    /// What is wrong, for a person or a model.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.message)
    }
}

/// A schema that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSON Schema at {path}: {message}")]
pub struct SchemaError {
    /// JSON Pointer into the schema.
    pub path: String,
    /// The compiler's message.
    pub message: String,
}

/// A compiled JSON Schema (draft 2020-12 unless the schema says otherwise) and its analysis.
/// Cloning is cheap: compilation happens once.
#[derive(Clone)]
pub struct Contract {
    schema: Arc<Value>,
    validator: Arc<Validator>,
    /// The same schema compiled for parsed JSON text ([`crate::json::tape`]): outputs arrive
    /// as text, and checking them there skips building a `Value` (3x faster on a 2 KB output).
    /// Compiled on first use, since most contracts (tool inputs) never see text; `None` if it
    /// did not compile, and then text takes the `Value` path.
    tape_validator: Arc<OnceLock<Option<Validator<TapeJson>>>>,
    analysis: Arc<Analysis>,
}

impl fmt::Debug for Contract {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Contract")
            .field("schema", &self.schema)
            .field("analysis", &self.analysis)
            .finish()
    }
}

impl Contract {
    /// Compiles `schema` and analyses it.
    pub fn compile(schema: Arc<Value>) -> Result<Self, SchemaError> {
        let error = |e: ValidationError<'_>| SchemaError {
            path: e.schema_path().to_string(),
            message: truncate(&e.to_string()),
        };
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(&schema)
            .map_err(error)?;
        let analysis = analyze(&schema);
        Ok(Contract {
            schema,
            validator: Arc::new(validator),
            tape_validator: Arc::default(),
            analysis: Arc::new(analysis),
        })
    }

    /// The schema.
    pub fn schema(&self) -> &Arc<Value> {
        &self.schema
    }

    /// Its static analysis.
    pub fn analysis(&self) -> &Analysis {
        &self.analysis
    }

    /// Whether `instance` is valid (fast path, no error collection).
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.validator.is_valid(instance)
    }

    /// Every violation of `instance`, each with its instance path; the alternatives of an
    /// `anyOf`/`oneOf` (an `Option<T>`, an enum) are spelled out.
    pub fn validate(&self, instance: &Value) -> Result<(), Vec<Violation>> {
        if self.validator.is_valid(instance) {
            return Ok(());
        }
        let mut out = Vec::new();
        for e in self.validator.iter_errors(instance) {
            push_violation(&mut out, &e);
            if out.len() >= MAX_VIOLATIONS {
                break;
            }
        }
        if out.is_empty() {
            // is_valid and iter_errors disagree only on a validator bug; still refuse.
            out.push(Violation {
                path: String::new(),
                message: "does not match the schema".into(),
            });
        }
        Err(out)
    }
}

impl Contract {
    /// Parses `text` as JSON and checks it: [`validate`](Self::validate) for JSON text, as a
    /// model sends it. Valid text is checked without building a `serde_json::Value`; text
    /// that is not JSON is one violation at the root that quotes the parser's error, and an
    /// invalid document reports every violation exactly as `validate` does.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use subcontract::Contract;
    ///
    /// let c = Contract::compile(Arc::new(serde_json::json!({
    ///     "type": "object",
    ///     "properties": {"claim": {"type": "string", "maxLength": 5}},
    ///     "required": ["claim"]
    /// })))
    /// .unwrap();
    /// assert!(c.validate_json(r#"{"claim": "short"}"#).is_ok());
    /// let errs = c.validate_json(r#"{"claim": "far too long"}"#).unwrap_err();
    /// assert_eq!(errs[0].path, "/claim");
    /// let errs = c.validate_json(r#"{"claim": "#).unwrap_err();
    /// assert!(errs[0].message.starts_with("not valid JSON"));
    /// ```
    pub fn validate_json(&self, text: &str) -> Result<(), Vec<Violation>> {
        if let Ok(tape) = Tape::parse(text) {
            if self.is_valid_tape(&tape) {
                return Ok(());
            }
        }
        // Errors (and the tape's refusals, such as duplicate keys) take the `Value` path,
        // whose verdict and messages are the reference.
        self.validate(&parse_json(text)?)
    }

    /// Whether a parsed document is valid (fast path, no error collection). `false` also
    /// when the tape validator is not available, so the caller takes the `Value` path.
    pub(crate) fn is_valid_tape(&self, tape: &Tape<'_>) -> bool {
        let validator = self.tape_validator.get_or_init(|| {
            // Compiles whenever the `Value` validator did (same schema, same options); if it
            // ever does not, the `Value` path still decides.
            jsonschema::options_for::<TapeJson>()
                .with_draft(jsonschema::Draft::Draft202012)
                .build(&self.schema)
                .ok()
        });
        validator.as_ref().is_some_and(|v| v.is_valid(tape.root()))
    }
}

/// `text` as a JSON value, or the one violation saying why it is not JSON.
pub(crate) fn parse_json(text: &str) -> Result<Value, Vec<Violation>> {
    serde_json::from_str(text).map_err(|e| {
        vec![Violation {
            path: String::new(),
            message: not_json(text, &e),
        }]
    })
}

/// What a model reads about text that is not JSON: the parser's error (with its position) and
/// the start of the text.
pub(crate) fn not_json(text: &str, e: &serde_json::Error) -> String {
    const SHOWN: usize = 120;
    let mut shown: String = text.chars().take(SHOWN).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    format!("not valid JSON ({e}): {shown}")
}

fn push_violation(out: &mut Vec<Violation>, e: &ValidationError<'_>) {
    let path = e.instance_path().to_string();
    let message = match e.kind() {
        ValidationErrorKind::AnyOf { context } | ValidationErrorKind::OneOfNotValid { context } => {
            let mut s = String::from("matches none of the allowed alternatives:");
            for (i, branch) in context.iter().enumerate() {
                let detail: Vec<String> = branch
                    .iter()
                    .take(3)
                    .map(|b| {
                        let p = b.instance_path().to_string();
                        let p = if p.is_empty() { "/".to_string() } else { p };
                        format!("{p}: {}", truncate(&b.to_string()))
                    })
                    .collect();
                s.push_str(&format!(" ({}) {};", i + 1, detail.join("; ")));
            }
            s.pop();
            truncate(&s)
        }
        // jsonschema names only the first two values of a longer enum ("or 3 other
        // candidates"); the valid values are the fix, so a short list is shown whole.
        ValidationErrorKind::Enum { options } => match options.as_array() {
            Some(all) if all.len() <= MAX_ENUM_SHOWN => {
                let shown: Vec<String> = all.iter().map(Value::to_string).collect();
                let (last, rest) = shown.split_last().map_or(("", &[][..]), |(l, r)| (l, r));
                let list = if rest.is_empty() {
                    last.to_string()
                } else {
                    format!("{} or {last}", rest.join(", "))
                };
                truncate(&format!("{} is not one of {list}", e.instance()))
            }
            _ => truncate(&e.to_string()),
        },
        _ => truncate(&e.to_string()),
    };
    out.push(Violation { path, message });
}

pub(crate) fn truncate(s: &str) -> String {
    if s.chars().count() <= MAX_MESSAGE_CHARS {
        return s.to_string();
    }
    let mut t: String = s.chars().take(MAX_MESSAGE_CHARS).collect();
    t.push('…');
    t
}

/// Turns `validator` rule failures into violations with JSON Pointer paths.
pub fn violations_from_rules(errors: &validator::ValidationErrors) -> Vec<Violation> {
    let mut out = Vec::new();
    collect_rules(errors, String::new(), &mut out);
    out
}

fn collect_rules(errors: &validator::ValidationErrors, prefix: String, out: &mut Vec<Violation>) {
    use validator::ValidationErrorsKind;
    for (field, kind) in errors.errors() {
        let path = format!("{prefix}/{field}");
        match kind {
            ValidationErrorsKind::Field(errs) => {
                for e in errs {
                    let message = match &e.message {
                        Some(m) => m.to_string(),
                        None => {
                            let mut params: Vec<String> = e
                                .params
                                .iter()
                                .filter(|(k, _)| *k != "value")
                                .map(|(k, v)| format!("{k} {v}"))
                                .collect();
                            params.sort();
                            if params.is_empty() {
                                format!("fails rule `{}`", e.code)
                            } else {
                                format!("fails rule `{}` ({})", e.code, params.join(", "))
                            }
                        }
                    };
                    out.push(Violation {
                        path: path.clone(),
                        message: truncate(&message),
                    });
                }
            }
            ValidationErrorsKind::Struct(inner) => collect_rules(inner, path, out),
            ValidationErrorsKind::List(items) => {
                for (i, inner) in items {
                    collect_rules(inner, format!("{path}/{i}"), out);
                }
            }
        }
    }
}

/// Formats violations as the message a sub-agent reads to repair its output.
pub fn repair_message(violations: &[Violation], hint: &str) -> String {
    let mut s =
        String::from("Your output was rejected. Fix every problem below and submit again.\n");
    for v in violations.iter().take(MAX_VIOLATIONS) {
        s.push_str("- ");
        s.push_str(&v.to_string());
        s.push('\n');
    }
    if violations.len() > MAX_VIOLATIONS {
        s.push_str(&format!(
            "- … and {} more\n",
            violations.len() - MAX_VIOLATIONS
        ));
    }
    s.push_str(hint);
    s
}
