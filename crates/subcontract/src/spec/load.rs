//! Loading TOML spec files into [`SubAgentSpec<Value, Value>`].

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::file::{parse_spec, RawSpec};
use super::{SpecBuilder, SpecError, SubAgentSpec};
use crate::diag::{codes, Diagnostic, Severity};
use crate::tool::is_valid_name;

/// A spec file that could not be loaded: every problem found, each with its position.
#[derive(Clone, thiserror::Error)]
#[error("{}", render(.diagnostics))]
pub struct LoadError {
    /// What is wrong, in file order.
    pub diagnostics: Vec<Diagnostic>,
}

crate::debug_as_display!(LoadError);

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
/// A file that cannot be read is one `io-error` diagnostic.
/// Unknown keys, invalid names, bad limits, schemas that do not compile, an unbounded or
/// too-large output and invalid examples are all errors, each pointing at file:line:col.
pub fn load_spec(path: impl AsRef<Path>) -> Result<SubAgentSpec<Value, Value>, LoadError> {
    let path = path.as_ref();
    let src = match crate::spec::file::read_regular(path, crate::spec::file::MAX_SPEC_FILE_BYTES) {
        Ok(b) => b,
        Err(e) => {
            return Err(LoadError {
                diagnostics: vec![Diagnostic {
                    file: path.display().to_string(),
                    line: 1,
                    column: 1,
                    severity: Severity::Error,
                    code: codes::IO_ERROR.to_string(),
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
        Some(raw) if !errors => builder(&raw).build().map_err(|e| {
            diagnostics.extend(to_diagnostics(&raw, &e));
            diagnostics.sort_by_key(|d| (d.line, d.column));
            LoadError { diagnostics }
        }),
        _ => Err(LoadError { diagnostics }),
    }
}

/// The builder for a parsed file: its settings as written, limits and sampling settings
/// passed on unchecked (the builder checks them, once, for files and for Rust alike).
pub(crate) fn builder(raw: &RawSpec) -> SpecBuilder<Value, Value> {
    let mut def = raw.def.clone();
    def.examples = raw
        .examples
        .iter()
        .map(|ex| (ex.input.value.clone(), ex.output.value.clone()))
        .collect();
    SubAgentSpec::dynamic(
        def.name.clone(),
        raw.input.value.clone(),
        raw.output.value.clone(),
    )
    .with_def(def)
}

/// The builder's problems as diagnostics, each at its place in the file.
pub(crate) fn to_diagnostics(raw: &RawSpec, e: &SpecError) -> Vec<Diagnostic> {
    let file = raw.path.display().to_string();
    let spec = is_valid_name(&raw.def.name).then(|| raw.def.name.clone());
    e.problems
        .iter()
        .map(|p| {
            let mut d = Diagnostic::error(file.clone(), raw.locate(&p.at), p.code, &p.message);
            d.spec.clone_from(&spec);
            d
        })
        .collect()
}

/// Every `*.toml` file under `dir`, recursively, sorted; `dir` itself when it is a file.
/// Links inside the tree are not followed (neither to files nor to directories), so a link
/// cannot pull in specs from elsewhere or loop; a link given as `dir` itself is followed.
pub fn spec_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    if dir.is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(dir).follow_links(false) {
        let entry = entry?;
        let p = entry.path();
        if entry.file_type().is_file() && p.extension().is_some_and(|e| e == "toml") {
            out.push(entry.into_path());
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_file_is_an_io_error_not_a_syntax_error() {
        let dir = tempfile::tempdir().unwrap();
        for path in [dir.path().join("absent.toml"), dir.path().to_path_buf()] {
            let err = load_spec(&path).unwrap_err();
            assert_eq!(err.diagnostics.len(), 1, "{err}");
            let d = &err.diagnostics[0];
            assert_eq!((d.code.as_str(), d.line, d.column), ("io-error", 1, 1));
            assert!(d.message.starts_with("cannot read the file: "), "{d:?}");
        }
    }

    #[test]
    fn spec_files_are_sorted_recursive_and_do_not_follow_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("specs");
        std::fs::create_dir_all(root.join("b/.hidden")).unwrap();
        std::fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
        for f in [
            "z.toml",
            "a.toml",
            "b/c.toml",
            "b/.hidden/d.toml",
            "notes.md",
            "b/x.TOML",
        ] {
            std::fs::write(root.join(f), "").unwrap();
        }
        std::fs::write(dir.path().join("elsewhere/e.toml"), "").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.path().join("elsewhere"), root.join("link")).unwrap();
            std::os::unix::fs::symlink(root.join("a.toml"), root.join("l.toml")).unwrap();
        }
        let got: Vec<String> = spec_files(&root)
            .unwrap()
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        assert_eq!(got, ["a.toml", "b/.hidden/d.toml", "b/c.toml", "z.toml"]);
        // A file given directly is itself, whatever its extension.
        assert_eq!(
            spec_files(&root.join("notes.md")).unwrap(),
            [root.join("notes.md")]
        );
        assert!(spec_files(&root.join("absent")).is_err());
    }
}
