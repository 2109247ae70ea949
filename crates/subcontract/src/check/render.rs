//! Rendering a [`CheckReport`]: rustc-like text, a JSON array, or GitHub workflow annotations
//! (`src/docs/invariants.md`). Renderers return strings; printing is the binary's job.

use std::fmt::Write as _;

use super::CheckReport;
use crate::diag::{Diagnostic, Severity};

/// An output format of `subcontract check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// `path:line:col: error[code]: message`, the source line and a caret, then a summary.
    #[default]
    Human,
    /// A JSON array of diagnostic objects.
    Json,
    /// `::error file=…,line=…,col=…,title=code::message` lines.
    Github,
}

/// Renders `report` in `format`.
pub fn render(report: &CheckReport, format: Format) -> String {
    match format {
        Format::Human => human(report),
        Format::Json => json(report),
        Format::Github => github(report),
    }
}

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// rustc-style text with the offending line and a caret under the column.
pub fn human(report: &CheckReport) -> String {
    let mut out = String::new();
    for d in &report.diagnostics {
        let _ = writeln!(
            out,
            "{}:{}:{}: {}[{}]: {}",
            d.file,
            d.line,
            d.column,
            severity(d.severity),
            d.code,
            d.message
        );
        if let Some(text) = report.line_text(&d.file, d.line) {
            // Long lines (a minified 5 MB file) are cut around the column.
            let col = d.column.saturating_sub(1) as usize;
            let skip = col.saturating_sub(60);
            let shown: String = text.chars().skip(skip).take(120).collect();
            // Control characters (garbage files) would garble the terminal; one column each.
            let shown: String = shown
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            let gutter = d.line.to_string().len();
            let _ = writeln!(out, "{:gutter$} |", "");
            let _ = writeln!(out, "{} | {}", d.line, shown);
            let _ = writeln!(out, "{:gutter$} | {}^", "", " ".repeat(col - skip));
        }
        out.push('\n');
    }
    let errors = report.error_count();
    let warnings = report.warning_count();
    let _ = writeln!(
        out,
        "{errors} error{}, {warnings} warning{} in {} spec{}",
        plural(errors),
        plural(warnings),
        report.specs_checked,
        plural(report.specs_checked)
    );
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A pretty-printed JSON array of [`Diagnostic`]s.
pub fn json(report: &CheckReport) -> String {
    // Serialising plain data to a String cannot fail.
    let mut s =
        serde_json::to_string_pretty(&report.diagnostics).unwrap_or_else(|_| String::from("[]"));
    s.push('\n');
    s
}

/// GitHub workflow commands, one per diagnostic.
pub fn github(report: &CheckReport) -> String {
    let mut out = String::new();
    for d in &report.diagnostics {
        out.push_str(&annotation(d));
        out.push('\n');
    }
    out
}

/// One `::error …::message` line, escaped per GitHub's workflow-command rules.
pub fn annotation(d: &Diagnostic) -> String {
    let level = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "notice",
    };
    format!(
        "::{level} file={},line={},col={},title={}::{}",
        escape_property(&d.file),
        d.line,
        d.column,
        escape_property(&d.code),
        escape_data(&d.message)
    )
}

/// Message text: `%`, CR and LF are percent-encoded.
pub(crate) fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Property values additionally encode `:` and `,`, which delimit properties.
pub(crate) fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::{codes, Pos};

    #[test]
    fn github_escaping() {
        let d = Diagnostic::error(
            "specs/a,b:c.toml",
            Pos { line: 3, column: 7 },
            codes::BAD_LIMITS,
            "100% wrong\r\nreally",
        );
        assert_eq!(
            annotation(&d),
            "::error file=specs/a%2Cb%3Ac.toml,line=3,col=7,title=bad-limits::100%25 wrong%0D%0Areally"
        );
    }
}
