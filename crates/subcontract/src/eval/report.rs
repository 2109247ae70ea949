//! The report of an eval: one [`AttemptReport`] per case × mode × attempt, a [`ModeSummary`]
//! per mode, and its renderings (JSON, a table, JUnit XML).

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{json, Map, Value};

/// The outcome of an attempt the eval's budget had no room for.
pub const NOT_RUN: &str = "not_run";
/// The outcome of an attempt stopped because its recording does not fit the spec or request.
pub const STALE_RECORDING: &str = "stale_recording";

/// One run of one case in one mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptReport {
    /// The case id.
    pub id: String,
    /// The output mode (`auto`, `tool`, `native`, `prompted`).
    pub mode: String,
    /// The attempt, from 1.
    pub attempt: u32,
    /// The run's outcome, or [`NOT_RUN`] / [`STALE_RECORDING`].
    pub outcome: String,
    /// Whether it completed with an output that holds the contract.
    pub valid: bool,
    /// Whether every grader held.
    pub passed: bool,
    /// The graders that failed, one message each.
    pub failed: Vec<String>,
    /// Model turns of the run.
    pub turns: u32,
    /// Model calls under the attempt (sub-agents and the judge included).
    pub requests: u64,
    /// Input tokens of those calls.
    pub input_tokens: u64,
    /// Output tokens of those calls.
    pub output_tokens: u64,
    /// USD spent by the attempt (sub-agents and the judge included).
    pub cost_usd: f64,
    /// Wall time of the attempt, in milliseconds.
    pub wall_ms: u64,
    /// Why a replay stopped ([`STALE_RECORDING`] only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale: Option<String>,
    /// The validated output, when the run completed: what a wrong answer said (bounded by
    /// the spec's `max_output_chars`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The limit that cut the run short, when it completed with an output asked for before it
    /// was done: counted apart in the summary ([`ModeSummary::cut_short`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_short: Option<crate::Limit>,
}

/// The figures of one mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeSummary {
    /// Cases graded.
    pub cases: usize,
    /// Attempts planned (cases × repeats), those not run included.
    pub attempts: usize,
    /// Share of attempts that passed (an attempt not run did not pass).
    pub pass_at_1: f64,
    /// Share of cases whose every attempt passed.
    pub pass_hat_k: f64,
    /// Share of attempts that completed with a valid output.
    pub valid_rate: f64,
    /// Share of attempts that completed with a valid output a grader failed: right shape,
    /// wrong answer.
    pub wrong_valid_rate: f64,
    /// Attempts the budget had no room for.
    pub not_run: usize,
    /// Attempts that completed cut short by a limit ([`AttemptReport::cut_short`]), passed or
    /// not: a pass rate reached on answers that may be incomplete says so. Left out of the
    /// JSON when none was.
    #[serde(skip_serializing_if = "is_zero")]
    pub cut_short: usize,
    /// Input tokens of the mode's attempts.
    pub input_tokens: u64,
    /// Output tokens of the mode's attempts.
    pub output_tokens: u64,
    /// USD spent by the mode's attempts.
    pub cost_usd: f64,
    /// Wall time summed over the mode's attempts, in milliseconds.
    pub wall_ms: u64,
}

/// A whole eval.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The spec's name.
    pub spec: String,
    /// Its contract hash ([`contract_hash`](super::contract_hash)).
    pub contract: String,
    /// The model it ran on.
    pub model: String,
    /// Every attempt, case by case, mode by mode, attempt by attempt.
    pub cases: Vec<AttemptReport>,
    /// Per mode, in the order the modes were given.
    pub summary: Vec<(String, ModeSummary)>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn ratio(n: usize, d: usize) -> f64 {
    if d == 0 {
        0.0
    } else {
        // Four decimals: a rate, not a measurement of the float.
        ((n as f64 / d as f64) * 10_000.0).round() / 10_000.0
    }
}

/// USD rounded to the micro-dollar, as a JSON number.
pub(crate) fn usd(d: rust_decimal::Decimal) -> f64 {
    use rust_decimal::prelude::ToPrimitive;
    d.round_dp(6).to_f64().unwrap_or(0.0)
}

impl Report {
    /// A report of `cases`, summarised per mode in the order of `modes`.
    pub fn new(
        spec: String,
        contract: String,
        model: String,
        modes: &[String],
        cases: Vec<AttemptReport>,
    ) -> Self {
        let summary = modes
            .iter()
            .map(|m| (m.clone(), summarise(cases.iter().filter(|a| &a.mode == m))))
            .collect();
        Report {
            spec,
            contract,
            model,
            cases,
            summary,
        }
    }

    /// Whether every attempt passed.
    pub fn all_passed(&self) -> bool {
        self.cases.iter().all(|a| a.passed)
    }

    /// Share of all attempts (every mode) that passed.
    pub fn pass_rate(&self) -> f64 {
        ratio(
            self.cases.iter().filter(|a| a.passed).count(),
            self.cases.len(),
        )
    }

    /// Whether at least `min` (0 to 1) of all attempts passed, compared exactly (not on the
    /// rounded rate: 29,999 of 30,000 is under 1); never with no attempt at all.
    pub fn passes_at_least(&self, min: f64) -> bool {
        let n = self.cases.len();
        let passed = self.cases.iter().filter(|a| a.passed).count();
        // The tolerance keeps 0.9 × 30,000 at 27,000, not 27,001.
        n > 0 && passed as f64 >= (min * n as f64 - 1e-9).ceil()
    }

    /// The attempts stopped by a stale recording.
    pub fn stale(&self) -> impl Iterator<Item = &AttemptReport> {
        self.cases.iter().filter(|a| a.outcome == STALE_RECORDING)
    }

    /// The report as JSON: `spec`, `contract`, `model`, `cases`, `summary` (by mode).
    pub fn to_json(&self) -> Value {
        let mut summary = Map::new();
        for (m, s) in &self.summary {
            summary.insert(m.clone(), serde_json::to_value(s).unwrap_or(Value::Null));
        }
        json!({
            "spec": self.spec,
            "contract": self.contract,
            "model": self.model,
            "cases": self.cases,
            "summary": summary,
        })
    }

    /// The summary per mode, then the attempts that did not pass.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let repeats = self.cases.iter().map(|a| a.attempt).max().unwrap_or(0);
        let cases = self.summary.first().map_or(0, |(_, s)| s.cases);
        let _ = writeln!(
            out,
            "eval {} (contract {}) on {}: {cases} case(s) x {repeats} attempt(s)",
            self.spec, self.contract, self.model
        );
        let _ = writeln!(
            out,
            "{:<9} {:>5} {:>8} {:>7} {:>7} {:>6} {:>11} {:>7} {:>10} {:>10} {:>10} {:>8}",
            "mode",
            "cases",
            "attempts",
            "pass@1",
            "pass^k",
            "valid",
            "wrong-valid",
            "not-run",
            "tokens-in",
            "tokens-out",
            "cost-usd",
            "wall-ms"
        );
        for (m, s) in &self.summary {
            let _ = writeln!(
                out,
                "{:<9} {:>5} {:>8} {:>7.3} {:>7.3} {:>6.3} {:>11.3} {:>7} {:>10} {:>10} {:>10.6} {:>8}",
                m,
                s.cases,
                s.attempts,
                s.pass_at_1,
                s.pass_hat_k,
                s.valid_rate,
                s.wrong_valid_rate,
                s.not_run,
                s.input_tokens,
                s.output_tokens,
                s.cost_usd,
                s.wall_ms
            );
        }
        for (m, s) in self.summary.iter().filter(|(_, s)| s.cut_short > 0) {
            let passed = self
                .cases
                .iter()
                .filter(|a| &a.mode == m && a.cut_short.is_some() && a.passed)
                .count();
            let _ = writeln!(
                out,
                "{m}: {} attempt(s) cut short by a limit (the answer may be incomplete), {passed} of them passed",
                s.cut_short
            );
        }
        let failing: Vec<&AttemptReport> = self.cases.iter().filter(|a| !a.passed).collect();
        if failing.is_empty() {
            let _ = writeln!(out, "every attempt passed");
        } else {
            let _ = writeln!(out, "not passed ({}):", failing.len());
            for a in failing {
                let why = match (&a.stale, a.failed.is_empty()) {
                    (Some(s), _) => s.clone(),
                    (None, false) => a.failed.join("; "),
                    (None, true) => String::new(),
                };
                let cut = a
                    .cut_short
                    .map_or(String::new(), |l| format!(", cut short by {}", l.said()));
                let _ = writeln!(
                    out,
                    "  {} [{} #{}] {}{cut}: {}",
                    a.id, a.mode, a.attempt, a.outcome, why
                );
            }
        }
        out
    }

    /// JUnit XML: one test suite per mode, one test case per case (passing when every
    /// attempt of it passed).
    pub fn to_junit(&self) -> String {
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let mut suites = String::new();
        let (mut tests, mut failures) = (0usize, 0usize);
        for (m, _) in &self.summary {
            let suite = format!("{}.{m}", self.spec);
            let mut ids: Vec<&str> = Vec::new();
            for a in self.cases.iter().filter(|a| &a.mode == m) {
                if !ids.contains(&a.id.as_str()) {
                    ids.push(&a.id);
                }
            }
            let mut body = String::new();
            let mut suite_failures = 0;
            let mut suite_ms = 0;
            for id in &ids {
                let attempts: Vec<&AttemptReport> = self
                    .cases
                    .iter()
                    .filter(|a| &a.mode == m && a.id == *id)
                    .collect();
                let ms: u64 = attempts
                    .iter()
                    .fold(0u64, |t, a| t.saturating_add(a.wall_ms));
                suite_ms += ms;
                let _ = write!(
                    body,
                    "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
                    xml(&suite),
                    xml(id),
                    ms as f64 / 1000.0
                );
                let failed: Vec<&&AttemptReport> = attempts.iter().filter(|a| !a.passed).collect();
                if failed.is_empty() {
                    body.push_str("/>\n");
                    continue;
                }
                suite_failures += 1;
                let detail: Vec<String> = failed
                    .iter()
                    .map(|a| {
                        let why = a.stale.clone().unwrap_or_else(|| a.failed.join("; "));
                        format!("attempt {}: {}: {why}", a.attempt, a.outcome)
                    })
                    .collect();
                let _ = write!(
                    body,
                    ">\n      <failure message=\"{} of {} attempt(s) failed\">{}</failure>\n    </testcase>\n",
                    failed.len(),
                    attempts.len(),
                    xml(&detail.join("\n"))
                );
            }
            tests += ids.len();
            failures += suite_failures;
            let _ = write!(
                suites,
                "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" time=\"{:.3}\">\n{body}  </testsuite>\n",
                xml(&suite),
                ids.len(),
                suite_failures,
                suite_ms as f64 / 1000.0
            );
        }
        let _ = write!(
            out,
            "<testsuites name=\"subcontract eval {}\" tests=\"{tests}\" failures=\"{failures}\">\n{suites}</testsuites>\n",
            xml(&self.spec)
        );
        out
    }
}

/// Text escaped for XML attributes and content; characters XML 1.0 cannot hold are dropped.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

fn summarise<'a>(attempts: impl Iterator<Item = &'a AttemptReport>) -> ModeSummary {
    let attempts: Vec<&AttemptReport> = attempts.collect();
    let mut ids: Vec<&str> = Vec::new();
    for a in &attempts {
        if !ids.contains(&a.id.as_str()) {
            ids.push(&a.id);
        }
    }
    let all_passed = ids
        .iter()
        .filter(|id| attempts.iter().filter(|a| a.id == **id).all(|a| a.passed))
        .count();
    let n = attempts.len();
    let count = |f: &dyn Fn(&AttemptReport) -> bool| attempts.iter().filter(|a| f(a)).count();
    ModeSummary {
        cases: ids.len(),
        attempts: n,
        pass_at_1: ratio(count(&|a| a.passed), n),
        pass_hat_k: ratio(all_passed, ids.len()),
        valid_rate: ratio(count(&|a| a.valid), n),
        wrong_valid_rate: ratio(count(&|a| a.valid && !a.passed), n),
        not_run: count(&|a| a.outcome == NOT_RUN),
        cut_short: count(&|a| a.cut_short.is_some()),
        input_tokens: attempts
            .iter()
            .fold(0u64, |t, a| t.saturating_add(a.input_tokens)),
        output_tokens: attempts
            .iter()
            .fold(0u64, |t, a| t.saturating_add(a.output_tokens)),
        cost_usd: (attempts.iter().map(|a| a.cost_usd).sum::<f64>() * 1e6).round() / 1e6,
        wall_ms: attempts
            .iter()
            .fold(0u64, |t, a| t.saturating_add(a.wall_ms)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(id: &str, n: u32, passed: bool, valid: bool) -> AttemptReport {
        AttemptReport {
            id: id.into(),
            mode: "auto".into(),
            attempt: n,
            outcome: "completed".into(),
            valid,
            passed,
            failed: if passed {
                vec![]
            } else {
                vec!["fields /a: <&>".into()]
            },
            turns: 1,
            requests: 1,
            input_tokens: 10,
            output_tokens: 5,
            cost_usd: 0.001,
            wall_ms: 3,
            stale: None,
            output: None,
            cut_short: None,
        }
    }

    #[test]
    fn pass_at_1_is_per_attempt_and_pass_hat_k_per_case() {
        let r = Report::new(
            "s".into(),
            "c".into(),
            "m".into(),
            &["auto".into()],
            vec![
                attempt("a", 1, true, true),
                attempt("a", 2, true, true),
                attempt("b", 1, true, true),
                attempt("b", 2, false, true),
            ],
        );
        let s = &r.summary[0].1;
        assert_eq!((s.cases, s.attempts), (2, 4));
        assert_eq!((s.pass_at_1, s.pass_hat_k), (0.75, 0.5));
        assert_eq!((s.valid_rate, s.wrong_valid_rate), (1.0, 0.25));
        assert_eq!((s.input_tokens, s.cost_usd), (40, 0.004));
        let junit = r.to_junit();
        assert!(junit.contains("tests=\"2\" failures=\"1\""), "{junit}");
        assert!(junit.contains("fields /a: &lt;&amp;&gt;"), "{junit}");
        assert!(r
            .to_table()
            .contains("  b [auto #2] completed: fields /a: <&>"));
    }
}
