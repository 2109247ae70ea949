//! Loading TOML spec files into [`SubAgentSpec<Value, Value>`].

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::file::{parse_spec, RawSpec};
use super::{Limits, SpecError, SubAgentSpec};
use crate::diag::{codes, Diagnostic, Severity};

/// A spec file that could not be loaded: every problem found, each with its position.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", render(.diagnostics))]
pub struct LoadError {
    /// What is wrong, in file order.
    pub diagnostics: Vec<Diagnostic>,
}

fn render(d: &[Diagnostic]) -> String {
    d.iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| {
            format!(
                "{}:{}:{}: error[{}]: {}",
                d.file, d.line, d.column, d.code, d.message
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Reads and builds the spec in the TOML file at `path`, as `src/docs/specs.md` describes it.
/// Unknown keys, invalid names, bad limits, schemas that do not compile, an unbounded or
/// too-large output and invalid examples are all errors, each pointing at file:line:col.
pub fn load_spec(path: impl AsRef<Path>) -> Result<SubAgentSpec<Value, Value>, LoadError> {
    let path = path.as_ref();
    let src = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            return Err(LoadError {
                diagnostics: vec![Diagnostic {
                    file: path.display().to_string(),
                    line: 1,
                    column: 1,
                    severity: Severity::Error,
                    code: codes::TOML_SYNTAX.to_string(),
                    spec: None,
                    message: format!("cannot read the file: {e}"),
                }],
            })
        }
    };
    let text = String::from_utf8_lossy(&src);
    load_spec_str(path, &text)
}

/// Builds a spec from TOML text; `path` is used in diagnostics and to resolve `system_file`.
pub fn load_spec_str(path: &Path, text: &str) -> Result<SubAgentSpec<Value, Value>, LoadError> {
    let (raw, mut diagnostics) = parse_spec(path, text);
    let errors = diagnostics.iter().any(|d| d.severity == Severity::Error);
    match raw {
        Some(raw) if !errors => build(&raw).map_err(|d| {
            diagnostics.push(d);
            LoadError { diagnostics }
        }),
        _ => Err(LoadError { diagnostics }),
    }
}

/// Builds a [`SubAgentSpec`] from a parsed file, turning a build error into a diagnostic at
/// the most precise position known.
pub fn build(raw: &RawSpec) -> Result<SubAgentSpec<Value, Value>, Diagnostic> {
    let mut limits = Limits::default();
    if let Some(v) = &raw.limits.max_turns {
        limits.max_turns = v.value;
    }
    if let Some(v) = &raw.limits.max_cost_usd {
        limits.max_cost_usd = Some(v.value);
    }
    if let Some(v) = &raw.limits.timeout_secs {
        limits.timeout = std::time::Duration::from_secs(v.value);
    }
    if let Some(v) = &raw.limits.max_output_chars {
        limits.max_output_chars = usize::try_from(v.value).unwrap_or(usize::MAX);
    }
    if let Some(v) = &raw.limits.max_tool_calls_per_turn {
        limits.max_tool_calls_per_turn = usize::try_from(v.value).unwrap_or(usize::MAX);
    }
    if let Some(v) = &raw.limits.max_tool_result_chars_per_turn {
        limits.max_tool_result_chars_per_turn = usize::try_from(v.value).unwrap_or(usize::MAX);
    }
    let mut b = SubAgentSpec::dynamic(
        raw.name.value.clone(),
        raw.input.value.clone(),
        raw.output.value.clone(),
    )
    .description(raw.description.value.clone())
    .system(raw.system.value.clone())
    .tools(raw.tools.iter().map(|t| t.value.clone()))
    .limits(limits);
    if let Some(m) = &raw.model {
        b = b.model(m.value.clone());
    }
    for ex in &raw.examples {
        b = b.example(ex.input.value.clone(), ex.output.value.clone());
    }
    b.build().map_err(|e| to_diagnostic(raw, &e))
}

/// Where in the file a build error belongs, and its stable code.
pub fn to_diagnostic(raw: &RawSpec, e: &SpecError) -> Diagnostic {
    let p = &raw.positions;
    let (code, pos) = match e {
        SpecError::InvalidName(_) => (codes::INVALID_NAME, raw.name.pos),
        SpecError::MissingDescription(_) => (codes::INVALID_VALUE, raw.description.pos),
        SpecError::BadTool { tool, .. } => (
            codes::INVALID_NAME,
            raw.tools
                .iter()
                .find(|t| &t.value == tool)
                .map_or(raw.name.pos, |t| t.pos),
        ),
        SpecError::BadLimits { .. } => (
            codes::BAD_LIMITS,
            p.locate(&["limits"]).unwrap_or(raw.name.pos),
        ),
        SpecError::InvalidSchema { which, .. } => (
            codes::INVALID_SCHEMA,
            if *which == "input" {
                raw.input.pos
            } else {
                raw.output.pos
            },
        ),
        SpecError::UnboundedOutput { problems, .. } => {
            let first = problems.first();
            let code = first.map_or(codes::OPEN_OBJECT, |u| u.kind.code());
            (
                code,
                p.locate_pointer("output", first.map_or("", |u| u.schema_path.as_str())),
            )
        }
        SpecError::OutputTooLarge { .. } => (
            codes::OUTPUT_TOO_LARGE,
            p.locate(&["limits", "max_output_chars"])
                .unwrap_or(raw.output.pos),
        ),
        SpecError::ExampleInvalid { index, side, .. } => (
            codes::EXAMPLE_INVALID,
            raw.examples
                .iter()
                .find(|x| x.index == *index)
                .map_or(raw.name.pos, |x| {
                    if *side == "input" {
                        x.input.pos
                    } else {
                        x.output.pos
                    }
                }),
        ),
    };
    Diagnostic {
        file: raw.path.display().to_string(),
        line: pos.line,
        column: pos.column,
        severity: Severity::Error,
        code: code.to_string(),
        spec: Some(raw.name.value.clone()),
        message: e.to_string(),
    }
}

/// Every `*.toml` file under `dir`, recursively, sorted.
pub fn spec_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    if dir.is_file() {
        out.push(dir.to_path_buf());
        return Ok(out);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let ft = entry.file_type()?;
            let p = entry.path();
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() && p.extension().is_some_and(|e| e == "toml") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}
