//! Rebuilds the run tree from events: each run with its spec, turns, tokens, cost, duration,
//! outcome, and its share of the total cost.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rust_decimal::Decimal;
use serde::Serialize;

use crate::contract::Violation;
use crate::events::{Event, EventKind};
use crate::model::Usage;
use crate::outcome::{Limit, Outcome};

/// One run of the tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunNode {
    /// Run id.
    pub run_id: String,
    /// Spec name.
    pub spec: String,
    /// Depth.
    pub depth: u32,
    /// Model turns: the model calls that were answered.
    pub turns: u32,
    /// Tokens of its own model calls.
    pub usage: Usage,
    /// Cost of its own model calls.
    pub own_cost_usd: Decimal,
    /// Cost including every descendant.
    pub total_cost_usd: Decimal,
    /// `total_cost_usd` as a fraction of the root's total (0..=1).
    pub share: f64,
    /// Wall time.
    pub duration_ms: f64,
    /// How it ended (`None` if no finished event was seen).
    pub outcome: Option<Outcome>,
    /// Error, if any.
    pub error: Option<String>,
    /// The limit that cut it short, when it completed with an output asked for before it was
    /// done.
    pub cut_short: Option<Limit>,
    /// Outputs it had rejected, in turn order (where and why, never the output).
    pub rejected: Vec<RejectedOutput>,
    /// Valid outputs it had rejected as ungrounded (`x-grounded` values backed by nothing
    /// the run read), in turn order, counted apart from `rejected`.
    pub ungrounded: Vec<RejectedOutput>,
    /// Commands it ran in its working copy (an acting run), in order.
    pub commands: Vec<CommandRun>,
    /// What became of its changes and of those of its sub-agents it decided on, in order
    /// (`captured`, `accepted`, `discarded`, `kept`).
    pub changes: Vec<super::ChangesEvent>,
    /// The pointers of the grounded values of its accepted output found only in its input
    /// (which its caller wrote).
    pub grounded_from_input: Vec<String>,
    /// Calls its model made of tools the run does not hold (a misspelt sub-agent name), in
    /// turn order: each failed without running.
    pub unknown_tools: Vec<UnknownToolCall>,
    /// Sub-agent runs, in start order.
    pub children: Vec<RunNode>,
}

/// A command an acting run ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandRun {
    /// The program.
    pub program: String,
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Whether it was stopped at its timeout.
    pub timed_out: bool,
    /// Why it did not run, when it did not.
    pub error: Option<String>,
}

/// An output a run had rejected.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RejectedOutput {
    /// The turn that submitted it.
    pub turn: u32,
    /// Each violation's path and reason.
    pub violations: Vec<Violation>,
}

/// A call of a tool the run does not hold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnknownToolCall {
    /// The turn that made it.
    pub turn: u32,
    /// The name as called (escaped and cut as the event has it).
    pub tool: String,
}

/// Builds the forest of runs in `events` (usually one root).
pub fn build_tree(events: &[Event]) -> Vec<RunNode> {
    let mut nodes: BTreeMap<String, (RunNode, Option<String>, u64)> = BTreeMap::new();
    for (seq, e) in events.iter().enumerate() {
        let entry = nodes.entry(e.run_id.to_string()).or_insert_with(|| {
            (
                RunNode {
                    run_id: e.run_id.to_string(),
                    spec: e.spec.to_string(),
                    depth: e.depth,
                    turns: 0,
                    usage: Usage::default(),
                    own_cost_usd: Decimal::ZERO,
                    total_cost_usd: Decimal::ZERO,
                    share: 0.0,
                    duration_ms: 0.0,
                    outcome: None,
                    error: None,
                    cut_short: None,
                    rejected: Vec::new(),
                    ungrounded: Vec::new(),
                    commands: Vec::new(),
                    changes: Vec::new(),
                    grounded_from_input: Vec::new(),
                    unknown_tools: Vec::new(),
                    children: Vec::new(),
                },
                e.parent_run_id.as_deref().map(str::to_string),
                seq as u64,
            )
        });
        let n = &mut entry.0;
        match &e.kind {
            EventKind::ModelCall {
                turn,
                usage,
                cost_usd,
                error,
                ..
            } => {
                // A turn counts once the model answered (as `RunResult::turns` does); the
                // finished event has the final count.
                if error.is_none() {
                    n.turns = n.turns.max(*turn);
                }
                n.usage += *usage;
                // Costs come from a trace file: sums saturate rather than panic.
                n.own_cost_usd = n.own_cost_usd.saturating_add(*cost_usd);
            }
            EventKind::Finished {
                outcome,
                turns,
                duration_ms,
                error,
                cut_short,
                ..
            } => {
                n.turns = n.turns.max(*turns);
                n.outcome = Some(*outcome);
                n.duration_ms = *duration_ms;
                n.error = error.clone();
                n.cut_short = *cut_short;
            }
            EventKind::OutputRejected { turn, violations } => n.rejected.push(RejectedOutput {
                turn: *turn,
                violations: violations.clone(),
            }),
            EventKind::OutputUngrounded { turn, violations } => n.ungrounded.push(RejectedOutput {
                turn: *turn,
                violations: violations.clone(),
            }),
            EventKind::Command {
                program,
                exit_code,
                timed_out,
                error,
                ..
            } => n.commands.push(CommandRun {
                program: program.clone(),
                exit_code: *exit_code,
                timed_out: *timed_out,
                error: error.clone(),
            }),
            EventKind::Changes(c) => n.changes.push(c.clone()),
            EventKind::GroundedFromInput { paths, .. } => {
                n.grounded_from_input.extend(paths.iter().cloned())
            }
            EventKind::ToolCall {
                turn,
                tool,
                unknown: true,
                ..
            } => n.unknown_tools.push(UnknownToolCall {
                turn: *turn,
                tool: tool.to_string(),
            }),
            EventKind::Started { .. } | EventKind::ToolCall { .. } => {}
        }
    }
    // Attach children to parents, deepest first so every subtree is complete when it moves;
    // the third field is the index of a run's first event, i.e. its start order.
    let mut order: Vec<(String, u32, u64)> = nodes
        .iter()
        .map(|(k, v)| (k.clone(), v.0.depth, v.2))
        .collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.cmp(&a.2)));
    let mut roots = Vec::new();
    for (id, _, _) in order {
        let Some((node, parent, _)) = nodes.remove(&id) else {
            continue;
        };
        match parent.as_ref().and_then(|p| nodes.get_mut(p)) {
            Some(p) => p.0.children.push(node),
            None => roots.push(node),
        }
    }
    for r in roots.iter_mut() {
        totals(r);
        let total = r.total_cost_usd;
        shares(r, total);
    }
    roots.reverse();
    roots
}

fn totals(n: &mut RunNode) -> Decimal {
    // Children were pushed latest-first; show them in start order.
    n.children.reverse();
    let sub = n
        .children
        .iter_mut()
        .map(totals)
        .fold(Decimal::ZERO, Decimal::saturating_add);
    n.total_cost_usd = n.own_cost_usd.saturating_add(sub);
    n.total_cost_usd
}

fn shares(n: &mut RunNode, root_total: Decimal) {
    n.share = if root_total.is_zero() {
        0.0
    } else {
        (n.total_cost_usd / root_total).try_into().unwrap_or(0.0)
    };
    for c in n.children.iter_mut() {
        shares(c, root_total);
    }
}

/// Renders trees as indented text, one run per line.
pub fn render_tree(roots: &[RunNode]) -> String {
    let mut s = String::new();
    for r in roots {
        render_node(&mut s, r, "", true, true);
    }
    s
}

fn render_node(s: &mut String, n: &RunNode, prefix: &str, last: bool, root: bool) {
    let branch = if root {
        ""
    } else if last {
        "└─ "
    } else {
        "├─ "
    };
    let outcome = n.outcome.map_or("unfinished", |o| o.as_str());
    let cut_short = n
        .cut_short
        .map_or(String::new(), |l| format!(", cut short by {}", l.said()));
    let _ = writeln!(
        s,
        "{prefix}{branch}{} [{}] {outcome}{cut_short}, {} turn(s), {}, ${} own, ${} total ({:.1}% of all), {:.0} ms",
        n.run_id,
        n.spec,
        n.turns,
        n.usage,
        n.own_cost_usd.round_dp(6).normalize(),
        n.total_cost_usd.round_dp(6).normalize(),
        n.share * 100.0,
        n.duration_ms
    );
    let pad = if root {
        ""
    } else if last {
        "   "
    } else {
        "│  "
    };
    // What went wrong in a turn, in turn order: outputs rejected, tools that do not exist.
    let mut failed: Vec<(u32, String)> = n
        .rejected
        .iter()
        .map(|r| (r, "rejected"))
        .chain(n.ungrounded.iter().map(|r| (r, "ungrounded")))
        .map(|(r, why)| {
            let all: Vec<String> = r.violations.iter().map(|v| v.to_string()).collect();
            (
                r.turn,
                format!("output {why}: {}", cut(&all.join("; "), ERROR_CHARS)),
            )
        })
        .chain(n.unknown_tools.iter().map(|u| {
            let tool = cut(&u.tool, ERROR_CHARS);
            (
                u.turn,
                format!("called `{tool}`, a tool this run does not hold"),
            )
        }))
        .collect();
    failed.sort_by_key(|(turn, _)| *turn);
    for (turn, what) in failed {
        let _ = writeln!(s, "{prefix}{pad}   ✗ turn {turn}: {what}");
    }
    if !n.commands.is_empty() {
        let failed = n
            .commands
            .iter()
            .filter(|c| c.exit_code != Some(0) || c.timed_out)
            .count();
        let last = n.commands.last().map_or(String::new(), |c| {
            let how = match (&c.error, c.exit_code, c.timed_out) {
                (Some(_), _, _) => "refused".to_owned(),
                (_, _, true) => "timed out".to_owned(),
                (_, Some(code), _) => format!("exit {code}"),
                (_, None, _) => "killed".to_owned(),
            };
            format!("; last: {} ({how})", c.program)
        });
        let _ = writeln!(
            s,
            "{prefix}{pad}   $ {} command(s), {failed} failed{last}",
            n.commands.len()
        );
    }
    for c in &n.changes {
        let kept = c
            .patch
            .as_deref()
            .map_or(String::new(), |p| format!(" in {p}"));
        let whose = if c.id == n.run_id {
            String::new()
        } else {
            format!(" of {}", c.id)
        };
        let _ = writeln!(
            s,
            "{prefix}{pad}   ± changes{whose} {}: {} file(s), +{} -{}{kept}",
            c.status, c.files, c.insertions, c.deletions
        );
    }
    if !n.grounded_from_input.is_empty() {
        let all = n.grounded_from_input.join(", ");
        let short = cut(&all, ERROR_CHARS);
        let _ = writeln!(s, "{prefix}{pad}   ↑ grounded only by its input: {short}");
    }
    if let Some(e) = &n.error {
        let short = cut(e, ERROR_CHARS);
        let _ = writeln!(s, "{prefix}{pad}   ! {short}");
    }
    let child_prefix = format!(
        "{prefix}{}",
        if root {
            ""
        } else if last {
            "   "
        } else {
            "│  "
        }
    );
    for (i, c) in n.children.iter().enumerate() {
        render_node(s, c, &child_prefix, i + 1 == n.children.len(), false);
    }
}

/// How much of a run's error the tree shows on its line.
const ERROR_CHARS: usize = 160;

/// `text` in at most `max` characters (plus an ellipsis when cut): cut at the last word
/// boundary within the limit, so no word is shown half; a single word longer than the
/// limit is cut at a character boundary.
fn cut(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    let Some((end, _)) = text.char_indices().nth(max) else {
        return text.into();
    };
    let head = &text[..end];
    // Break before the word that does not fit: at the last whitespace, unless the text
    // is one long word (a path, a hash), which is then cut mid-word.
    let head = match head.rfind(char::is_whitespace) {
        Some(i) if !text[end..].starts_with(char::is_whitespace) => &head[..i],
        _ => head,
    };
    let head =
        head.trim_end_matches(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == ':');
    format!("{head}…").into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(run_id: &str, parent: Option<&str>, cost: Decimal, tokens: u64) -> Event {
        Event {
            ts_ms: 0,
            run_id: run_id.into(),
            parent_run_id: parent.map(Into::into),
            spec: "s".into(),
            depth: u32::from(parent.is_some()),
            kind: EventKind::ModelCall {
                turn: 1,
                usage: Usage::new(tokens, tokens),
                cost_usd: cost,
                duration_ms: 1.0,
                stop_reason: None,
                error: None,
                over_reserved_usd: None,
                output_mode: None,
                forced: None,
                text_read_as: None,
            },
        }
    }

    #[test]
    fn extreme_costs_and_counts_in_a_trace_saturate() {
        let events = [
            call("root", None, Decimal::MAX, u64::MAX),
            call("root", None, Decimal::MAX, u64::MAX),
            call("root.a-1", Some("root"), Decimal::MAX, 1),
        ];
        let roots = build_tree(&events);
        let root = &roots[0];
        assert_eq!(root.own_cost_usd, Decimal::MAX);
        assert_eq!(root.total_cost_usd, Decimal::MAX);
        assert_eq!(root.usage.input_tokens, u64::MAX);
        assert_eq!(root.children[0].total_cost_usd, Decimal::MAX);
    }

    #[test]
    fn errors_are_cut_between_words() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("exactly ten", 11), "exactly ten");
        // "budget" would be cut to "bud": the whole word goes.
        assert_eq!(cut("the model budget ran out", 13), "the model…");
        // The limit falls right after a word: that word stays.
        assert_eq!(cut("the model budget", 9), "the model…");
        assert_eq!(cut("first, second", 8), "first…");
        // One word longer than the limit: cut at a character boundary, never inside a char.
        assert_eq!(cut("ééééééé", 3), "ééé…");
        let long = format!("error: {}", "word ".repeat(100));
        let c = cut(&long, 160);
        assert!(c.ends_with("word…") && c.chars().count() <= 161, "{c}");
    }
}
