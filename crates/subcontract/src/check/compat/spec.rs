//! Spec-level changes: specs matched by name (or by file, when renamed), then each pair's
//! contracts, output size, tools, limits and texts.

use std::collections::{HashMap, HashSet};

use crate::contract::analysis::analyze;
use crate::diag::{Diagnostic, Pos, Severity};

use super::codes::*;
use super::set::{SpecEntry, SpecSet};
use crate::contract::subsume::{self as schema, Side};

/// Every change between two sets.
pub(super) fn compare_sets(old: &SpecSet, new: &SpecSet) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut new_by_name: HashMap<&str, &SpecEntry> = HashMap::new();
    for e in &new.entries {
        new_by_name.entry(e.snapshot.name.as_str()).or_insert(e);
    }
    let old_names: HashSet<&str> = old
        .entries
        .iter()
        .map(|e| e.snapshot.name.as_str())
        .collect();
    let mut matched: HashSet<&str> = HashSet::new();
    let mut seen_old: HashSet<&str> = HashSet::new();
    for o in &old.entries {
        let name = o.snapshot.name.as_str();
        if !seen_old.insert(name) {
            continue;
        }
        if let Some(n) = new_by_name.get(name) {
            matched.insert(name);
            out.extend(compare_pair(o, n));
            continue;
        }
        let renamed = new
            .entries
            .iter()
            .find(|n| n.key == o.key && !old_names.contains(n.snapshot.name.as_str()));
        if let Some(n) = renamed {
            matched.insert(n.snapshot.name.as_str());
            out.push(diag(
                n,
                n.name_pos(),
                Severity::Error,
                SPEC_RENAMED,
                format!(
                    "spec `{name}` was renamed to `{}`: hosts and specs that call `{name}` break",
                    n.snapshot.name
                ),
            ));
            out.extend(compare_pair(o, n));
        } else if new.problems.iter().any(|d| d.file == o.key) {
            // Its new version does not load: that is reported already, and is not a removal.
        } else {
            out.push(diag(
                o,
                o.name_pos(),
                Severity::Error,
                SPEC_REMOVED,
                format!("spec `{name}` was removed: hosts and specs that call it break"),
            ));
        }
    }
    for n in &new.entries {
        let name = n.snapshot.name.as_str();
        if !matched.contains(name) && !old_names.contains(name) {
            matched.insert(name);
            out.push(diag(
                n,
                n.name_pos(),
                Severity::Info,
                SPEC_ADDED,
                format!("new spec `{name}`"),
            ));
        }
    }
    out
}

fn diag(e: &SpecEntry, pos: Pos, severity: Severity, code: &str, message: String) -> Diagnostic {
    let mut d = match severity {
        Severity::Error => Diagnostic::error(e.file.clone(), pos, code, message),
        Severity::Warning => Diagnostic::warning(e.file.clone(), pos, code, message),
        Severity::Info => Diagnostic::info(e.file.clone(), pos, code, message),
    };
    d.spec = Some(e.snapshot.name.clone());
    d
}

/// The changes between one old spec and its new version.
fn compare_pair(o: &SpecEntry, n: &SpecEntry) -> Vec<Diagnostic> {
    let (os, ns) = (&o.snapshot, &n.snapshot);
    let mut out = Vec::new();
    for (table, side, a, b) in [
        ("input", Side::Input, &os.input, &ns.input),
        ("output", Side::Output, &ns.output, &os.output),
    ] {
        for f in schema::compare(a, b, side) {
            let pos = n.locate_pointer(table, &f.pointer);
            out.push(diag(
                n,
                pos,
                f.severity(),
                super::code(f.kind, side),
                format!("{table}: {}", f.message),
            ));
        }
    }

    // The most a parent could receive: the schema's worst case, capped by the size limit the
    // run enforces.
    let bound = |s: &super::Snapshot| {
        let cap = s.limits.max_output_chars;
        analyze(&s.output)
            .worst_case_chars
            .map_or(cap, |w| w.min(cap))
    };
    let (ob, nb) = (bound(os), bound(ns));
    if nb > ob {
        let pos = n
            .locate(&["limits", "max_output_chars"])
            .or_else(|| n.locate(&["output"]))
            .unwrap_or(Pos::START);
        out.push(diag(
            n,
            pos,
            Severity::Error,
            OUTPUT_SIZE_GREW,
            format!(
                "output: the largest valid output grew from {ob} to {nb} characters: parents that \
                 budgeted for the old contract's {ob} break"
            ),
        ));
    }

    for t in ns.tools.iter().filter(|t| !os.tools.contains(t)) {
        let pos = n
            .raw
            .as_ref()
            .and_then(|r| {
                let k = r.def.tools.iter().position(|x| x == t)?;
                r.at.tools.get(k).copied()
            })
            .unwrap_or_else(|| n.name_pos());
        out.push(diag(
            n,
            pos,
            Severity::Error,
            TOOL_ADDED,
            format!(
                "tool `{t}` added: a capability widening; every parent that calls this spec must \
                 now hold `{t}` too, and its reviewers should agree"
            ),
        ));
    }
    for t in os.tools.iter().filter(|t| !ns.tools.contains(t)) {
        let pos = n.locate(&["tools"]).unwrap_or_else(|| n.name_pos());
        out.push(diag(
            n,
            pos,
            Severity::Info,
            TOOL_REMOVED,
            format!("tool `{t}` removed"),
        ));
    }

    let (ol, nl) = (&os.limits, &ns.limits);
    let mut raised = |key: &str, old: String, new: String| {
        let pos = n.locate(&["limits", key]).unwrap_or_else(|| n.name_pos());
        out.push(diag(
            n,
            pos,
            Severity::Info,
            LIMIT_RAISED,
            format!("`{key}` raised from {old} to {new}"),
        ));
    };
    if nl.max_turns > ol.max_turns {
        raised(
            "max_turns",
            ol.max_turns.to_string(),
            nl.max_turns.to_string(),
        );
    }
    if nl.timeout_secs > ol.timeout_secs {
        raised(
            "timeout_secs",
            ol.timeout_secs.to_string(),
            nl.timeout_secs.to_string(),
        );
    }
    let cost = |c: Option<rust_decimal::Decimal>| c.map_or("unlimited".into(), |d| d.to_string());
    let cost_raised = match (ol.max_cost_usd, nl.max_cost_usd) {
        (Some(_), None) => true,
        (Some(a), Some(b)) => b > a,
        _ => false,
    };
    if cost_raised {
        raised("max_cost_usd", cost(ol.max_cost_usd), cost(nl.max_cost_usd));
    }

    let text_pos = |key: &str| n.locate(&[key]).unwrap_or_else(|| n.name_pos());
    if os.description != ns.description {
        out.push(diag(
            n,
            text_pos("description"),
            Severity::Info,
            DESCRIPTION_CHANGED,
            "description changed: calling models decide from it whether to delegate".into(),
        ));
    }
    if os.system != ns.system {
        let key = if n.locate(&["system"]).is_some() {
            "system"
        } else {
            "system_file"
        };
        out.push(diag(
            n,
            text_pos(key),
            Severity::Info,
            PROMPT_CHANGED,
            "system prompt changed".into(),
        ));
    }
    if os.model != ns.model {
        let show = |m: &Option<String>| m.clone().unwrap_or_else(|| "the host's default".into());
        out.push(diag(
            n,
            text_pos("model"),
            Severity::Info,
            MODEL_CHANGED,
            format!(
                "model changed from {} to {}",
                show(&os.model),
                show(&ns.model)
            ),
        ));
    }
    out
}
