//! Schema subsumption: is every instance of schema `a` also an instance of schema `b`? The
//! engine of `check --against`, split by keyword family: [`bounds`] (numbers, lengths, counts),
//! [`assertions`] (types, values, strings), [`arrays`], [`objects`].
//!
//! Inputs are compared with `a` = old, `b` = new (callers' old inputs must stay valid); outputs
//! with `a` = new, `b` = old (every new output must have been valid before). One engine, two
//! directions; the [`Side`] only changes the words and codes of the findings.
//!
//! Soundness rests on one asymmetry: a constraint of `a` that the engine ignores only makes `a`
//! look wider, so at worst a compatible change is reported; a constraint of `b` that the engine
//! ignored could hide a break, so every keyword of `b` is either compared or reported as
//! "cannot prove compatible".

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::diag::Severity;

mod arrays;
mod assertions;
mod bounds;
mod objects;

use bounds::{lower, num, upper};

use crate::json::pointer;

/// Which contract is compared, and so which way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// Input: `a` = old, `b` = new.
    Input,
    /// Output: `a` = new, `b` = old.
    Output,
}

/// What kind of incompatibility a finding is; with the [`Side`] it gives the stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A property became required (input) or stopped being required (output).
    Required,
    /// A property is no longer accepted by a closed object (input), or a closed object gained
    /// one (output).
    Property,
    /// The accepted types shrank (input) or grew (output).
    Type,
    /// A length, count or numeric bound moved the breaking way.
    Bound,
    /// An accepted value was removed (input) or added (output).
    Enum,
    /// A `pattern` appeared (input) or went away (output).
    Pattern,
    /// Another constraint appeared (input) or went away (output): `uniqueItems`,
    /// `dependentRequired`.
    Constraint,
    /// The engine cannot decide; a warning, never a pass.
    CannotProve,
}

/// One reason the comparison could not show `a ⊆ b`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finding {
    /// What kind of change.
    pub kind: Kind,
    /// JSON Pointer into the *new* schema (where the diagnostic points).
    pub pointer: String,
    /// Why, in terms of old and new, and who breaks.
    pub message: String,
}

impl Finding {
    /// Errors for provable breaks, warnings for "cannot prove compatible".
    pub(crate) fn severity(&self) -> Severity {
        if self.kind == Kind::CannotProve {
            Severity::Warning
        } else {
            Severity::Error
        }
    }
}

/// Deepest nesting (counting `$ref` expansions) compared before giving up.
const MAX_DEPTH: usize = 64;
/// Most subschema pairs compared for one contract before giving up (adversarial `$ref` graphs).
const MAX_VISITS: u64 = 20_000;

/// Keywords that never change which instances are valid (2020-12 annotations and containers).
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "$defs",
    "definitions",
    "$anchor",
    "$dynamicAnchor",
    "$vocabulary",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
];

/// Keywords that must be unchanged (equal JSON, no `$ref` inside) to be compared at all.
const MUST_BE_EQUAL: &[&str] = &[
    "not",
    "if",
    "then",
    "else",
    "oneOf",
    "dependentSchemas",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "propertyNames",
    "patternProperties",
    "format",
];

/// Keywords compared structurally by [`Cmp::base`] or the applicator steps.
const COMPARED: &[&str] = &[
    "type",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "items",
    "prefixItems",
    "required",
    "properties",
    "additionalProperties",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "allOf",
    "anyOf",
    "$ref",
];

/// Compares two whole contracts: every place where an instance of `a` may not be one of `b`.
pub(crate) fn compare(a: &Value, b: &Value, side: Side) -> Vec<Finding> {
    let mut cmp = Cmp {
        a_root: a,
        b_root: b,
        side,
        visiting: HashSet::new(),
        visits: 0,
    };
    let mut out = cmp.sub(a, "", b, "", 0);
    // A nested `$id` starts a new base for the `$ref`s under it, which this engine resolves
    // against the document root: it could follow the wrong target, so it never vouches.
    let identical = a == b && !has_ref(a);
    if (nested_id(a) || nested_id(b)) && !identical {
        out.extend(cmp.cannot(
            "",
            "",
            "a nested `$id` changes how `$ref`s resolve; only document-root `$id`s are compared"
                .into(),
        ));
    }
    dedup(&mut out);
    out
}

fn dedup(out: &mut Vec<Finding>) {
    let mut seen = HashSet::new();
    out.retain(|f| seen.insert((f.pointer.clone(), f.message.clone())));
}

struct Cmp<'a> {
    a_root: &'a Value,
    b_root: &'a Value,
    side: Side,
    /// Pairs being compared further up the stack: meeting one again (a recursive `$ref`) is
    /// assumed to hold, the usual coinductive rule for recursive types.
    visiting: HashSet<(String, String)>,
    visits: u64,
}

/// Whether any object among `roots` and everything below them satisfies `pred` (iterative, so
/// a schema nested past any stack is still searched).
fn any_object<'v>(
    roots: impl IntoIterator<Item = &'v Value>,
    pred: impl Fn(&serde_json::Map<String, Value>) -> bool,
) -> bool {
    let mut stack: Vec<&Value> = roots.into_iter().collect();
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                if pred(m) {
                    return true;
                }
                stack.extend(m.values());
            }
            Value::Array(a) => stack.extend(a),
            _ => {}
        }
    }
    false
}

/// Whether `v` has a `$ref` anywhere (then equal JSON may still mean different schemas, the
/// two documents' definitions differing).
fn has_ref(v: &Value) -> bool {
    any_object([v], |m| {
        m.contains_key("$ref") || m.contains_key("$dynamicRef")
    })
}

/// Whether `$id` appears below the document root.
fn nested_id(root: &Value) -> bool {
    let below: Vec<&Value> = match root {
        Value::Object(m) => m.values().collect(),
        Value::Array(a) => a.iter().collect(),
        _ => return false,
    };
    any_object(below, |m| m.get("$id").is_some_and(Value::is_string))
}

/// Whether `v` accepts everything (`true`, `{}` or only annotations).
fn is_trivial(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Object(m) => m.keys().all(|k| ANNOTATIONS.contains(&k.as_str())),
        _ => false,
    }
}

fn child(ptr: &str, tok: &str) -> String {
    pointer::child(ptr, tok)
}

fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        let cut: String = s.chars().take(57).collect();
        format!("{cut}...")
    } else {
        s
    }
}

/// `m` without the keywords in `drop`.
fn without(m: &Map<String, Value>, drop: &[&str]) -> Value {
    Value::Object(
        m.iter()
            .filter(|(k, _)| !drop.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// The JSON types a schema's `type` admits; `None` for any.
fn types(m: &Map<String, Value>) -> Option<Vec<String>> {
    match m.get("type")? {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(a) => Some(
            a.iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect(),
        ),
        _ => None,
    }
}

fn admits(types: &Option<Vec<String>>, t: &str) -> bool {
    types.as_ref().is_none_or(|ts| {
        ts.iter()
            .any(|x| x == t || (t == "integer" && x == "number"))
    })
}

impl<'a> Cmp<'a> {
    fn new_ptr(&self, a_ptr: &str, b_ptr: &str) -> String {
        match self.side {
            Side::Input => b_ptr.to_owned(),
            Side::Output => a_ptr.to_owned(),
        }
    }

    /// (old, new) of a pair given as (a, b).
    fn old_new<T>(&self, a: T, b: T) -> (T, T) {
        match self.side {
            Side::Input => (a, b),
            Side::Output => (b, a),
        }
    }

    fn who(&self) -> &'static str {
        match self.side {
            Side::Input => "inputs that were valid before are now rejected: existing callers break",
            Side::Output => {
                "outputs the old contract rejected may now be returned: parents parsing them break"
            }
        }
    }

    fn finding(&self, kind: Kind, a_ptr: &str, b_ptr: &str, what: String) -> Finding {
        let at = self.new_ptr(a_ptr, b_ptr);
        let at_shown = if at.is_empty() { "/" } else { at.as_str() };
        let message = if kind == Kind::CannotProve {
            format!("cannot prove compatible at {at_shown}: {what}")
        } else {
            format!("{what} at {at_shown}: {}", self.who())
        };
        Finding {
            kind,
            pointer: at,
            message,
        }
    }

    fn cannot(&self, a_ptr: &str, b_ptr: &str, why: String) -> Vec<Finding> {
        vec![self.finding(Kind::CannotProve, a_ptr, b_ptr, why)]
    }

    /// Resolves a local `$ref` in the document of `a` (`in_a`) or `b`.
    fn resolve(&self, reference: &Value, in_a: bool) -> Option<(&'a Value, String)> {
        let r = reference.as_str()?;
        let toks = pointer::parse_local_ref(r)?;
        let root: &'a Value = if in_a { self.a_root } else { self.b_root };
        let target = pointer::resolve(root, &toks)?;
        let ptr = toks.iter().fold(String::new(), |p, t| child(&p, t));
        Some((target, ptr))
    }

    /// Every reason an instance of `a` (at `a_ptr`) may not be an instance of `b`.
    fn sub(
        &mut self,
        a: &Value,
        a_ptr: &str,
        b: &Value,
        b_ptr: &str,
        depth: usize,
    ) -> Vec<Finding> {
        self.visits += 1;
        if self.visits > MAX_VISITS || depth > MAX_DEPTH {
            return self.cannot(
                a_ptr,
                b_ptr,
                format!("the schemas nest deeper than {MAX_DEPTH} levels or are too intricate to compare"),
            );
        }
        if is_trivial(b) || a == &Value::Bool(false) {
            return Vec::new();
        }
        if a == b && !has_ref(a) {
            return Vec::new();
        }
        // The keys tell a schema from the remainder of itself this engine builds (the same
        // pointer without its `$ref`/`allOf`), which must not count as a revisit.
        let keys = |v: &Value| {
            v.as_object().map_or(String::new(), |m| {
                m.keys().cloned().collect::<Vec<_>>().join(",")
            })
        };
        let key = (
            format!("{a_ptr}\u{0}{}", keys(a)),
            format!("{b_ptr}\u{0}{}", keys(b)),
        );
        if !self.visiting.insert(key.clone()) {
            return Vec::new();
        }
        let out = self.sub_inner(a, a_ptr, b, b_ptr, depth + 1);
        self.visiting.remove(&key);
        out
    }

    fn sub_inner(
        &mut self,
        a: &Value,
        a_ptr: &str,
        b: &Value,
        b_ptr: &str,
        depth: usize,
    ) -> Vec<Finding> {
        let Value::Object(bm) = b else {
            // `b` is `false` (or not a schema): nothing is accepted any more.
            return vec![self.finding(Kind::Type, a_ptr, b_ptr, "no value is accepted".into())];
        };
        // `true` (every value) compares as the empty schema.
        let empty = Map::new();
        let am = match a {
            Value::Object(m) => m,
            _ => &empty,
        };

        // A finite set of values on the `a` side: check each value against `b` directly.
        if let Some(values) = finite(am) {
            if !has_ref(b) {
                if let Ok(contract) = crate::contract::Contract::compile(Arc::new(b.clone())) {
                    let bad: Vec<&Value> =
                        values.iter().filter(|v| !contract.is_valid(v)).collect();
                    if bad.is_empty() {
                        return Vec::new();
                    }
                    let shown: Vec<String> = bad.iter().map(|v| show(v)).collect();
                    let what = match self.side {
                        Side::Input => format!(
                            "value(s) {} accepted before are rejected now",
                            shown.join(", ")
                        ),
                        Side::Output => format!(
                            "value(s) {} may now be returned, which the old contract rejected",
                            shown.join(", ")
                        ),
                    };
                    return vec![self.finding(Kind::Enum, a_ptr, b_ptr, what)];
                }
            }
        }

        // `$ref` on the `b` side: `b` is the target ∩ the rest.
        if let Some(r) = bm.get("$ref") {
            let Some((target, t_ptr)) = self.resolve(r, false) else {
                return self.cannot(
                    a_ptr,
                    b_ptr,
                    format!(
                        "`$ref` {} cannot be resolved (only local JSON Pointer refs are)",
                        show(r)
                    ),
                );
            };
            let mut out = self.sub(a, a_ptr, target, &t_ptr, depth);
            let rest = without(bm, &["$ref"]);
            out.extend(self.sub(a, a_ptr, &rest, b_ptr, depth));
            return out;
        }
        // `allOf` on the `b` side: `a` must fit every member.
        if let Some(all) = bm.get("allOf") {
            let Some(members) = all.as_array() else {
                return self.cannot(a_ptr, b_ptr, "`allOf` is not an array".into());
            };
            let mut out = Vec::new();
            for (i, m) in members.iter().enumerate() {
                let p = child(&child(b_ptr, "allOf"), &i.to_string());
                out.extend(self.sub(a, a_ptr, m, &p, depth));
            }
            let rest = without(bm, &["allOf"]);
            out.extend(self.sub(a, a_ptr, &rest, b_ptr, depth));
            return out;
        }

        // `$ref` / `allOf` on the `a` side: `a` is an intersection, so fitting any one part
        // (or the rest) is enough. Try each; keep the fewest findings.
        if am.contains_key("$ref") || am.contains_key("allOf") {
            let mut parts: Vec<(Value, String)> =
                vec![(without(am, &["$ref", "allOf"]), a_ptr.to_owned())];
            if let Some(r) = am.get("$ref") {
                // An unresolvable ref of `a` is ignored: that is sound, it only makes `a`
                // look wider.
                if let Some((t, p)) = self.resolve(r, true) {
                    parts.push((t.clone(), p));
                }
            }
            if let Some(Value::Array(members)) = am.get("allOf") {
                for (i, m) in members.iter().enumerate() {
                    parts.push((m.clone(), child(&child(a_ptr, "allOf"), &i.to_string())));
                }
            }
            return self.best(
                parts.iter().map(|(p, ptr)| (p, ptr.as_str())),
                b,
                b_ptr,
                depth,
            );
        }

        // `anyOf` on the `b` side.
        let mut out = Vec::new();
        let b_rest;
        let bm = if let Some(any) = bm.get("anyOf") {
            let Some(branches) = any.as_array() else {
                return self.cannot(a_ptr, b_ptr, "`anyOf` is not an array".into());
            };
            let any_ptr = child(b_ptr, "anyOf");
            // Each part of `a` must fit some branch: `a`'s own branches when it has any.
            let a_parts: Vec<(Value, String)> = match am.get("anyOf").and_then(Value::as_array) {
                Some(ab) => ab
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (v.clone(), child(&child(a_ptr, "anyOf"), &i.to_string())))
                    .collect(),
                None => vec![(a.clone(), a_ptr.to_owned())],
            };
            for (part, p_ptr) in &a_parts {
                let mut best: Option<Vec<Finding>> = None;
                for (i, br) in branches.iter().enumerate() {
                    let f = self.sub(part, p_ptr, br, &child(&any_ptr, &i.to_string()), depth);
                    if best.as_ref().is_none_or(|b| rank(&f) < rank(b)) {
                        best = Some(f);
                    }
                    if best.as_ref().is_some_and(Vec::is_empty) {
                        break;
                    }
                }
                match best {
                    Some(f) if f.is_empty() => {}
                    Some(f) if branches.len() == 1 => out.extend(f),
                    Some(f) if f.iter().all(|x| x.kind == Kind::CannotProve) => out.extend(f),
                    _ => {
                        let what = match self.side {
                            Side::Input => "no branch of the new `anyOf` accepts every value the old schema accepted",
                            Side::Output => "a value the new schema accepts fits no branch of the old `anyOf`",
                        };
                        out.push(self.finding(Kind::Type, p_ptr, &any_ptr, what.into()));
                    }
                }
            }
            b_rest = without(bm, &["anyOf"]);
            match &b_rest {
                Value::Object(m) => m,
                _ => unreachable!("without() returns an object"),
            }
        } else {
            bm
        };

        // `anyOf` on the `a` side only: every branch fitting `b` is enough; so is the rest.
        if am.contains_key("anyOf") && !b.as_object().is_some_and(|m| m.contains_key("anyOf")) {
            let b_val = Value::Object(bm.clone());
            let rest = without(am, &["anyOf"]);
            let via_rest = self.sub(&rest, a_ptr, &b_val, b_ptr, depth);
            if via_rest.is_empty() {
                return out;
            }
            if let Some(Value::Array(branches)) = am.get("anyOf") {
                let mut all = Vec::new();
                for (i, br) in branches.iter().enumerate() {
                    let p = child(&child(a_ptr, "anyOf"), &i.to_string());
                    all.extend(self.sub(br, &p, &b_val, b_ptr, depth));
                }
                out.extend(if rank(&all) < rank(&via_rest) {
                    all
                } else {
                    via_rest
                });
                return out;
            }
            out.extend(via_rest);
            return out;
        }

        out.extend(self.base(am, a_ptr, bm, b_ptr, depth));
        out
    }

    /// The findings of the best of several parts of `a` (an intersection) against `b`.
    fn best<'p>(
        &mut self,
        parts: impl Iterator<Item = (&'p Value, &'p str)>,
        b: &Value,
        b_ptr: &str,
        depth: usize,
    ) -> Vec<Finding> {
        let mut best: Option<Vec<Finding>> = None;
        for (p, ptr) in parts {
            let f = self.sub(p, ptr, b, b_ptr, depth);
            if f.is_empty() {
                return f;
            }
            if best.as_ref().is_none_or(|b| rank(&f) < rank(b)) {
                best = Some(f);
            }
        }
        best.unwrap_or_default()
    }
}

fn is_trivial_map(v: &Value) -> bool {
    v.as_object().is_some_and(Map::is_empty)
}

/// A schema admitting only a finite list of values (`const`, `enum`), when it is one.
fn finite(m: &Map<String, Value>) -> Option<Vec<Value>> {
    if let Some(c) = m.get("const") {
        return Some(vec![c.clone()]);
    }
    m.get("enum").and_then(Value::as_array).cloned()
}

/// Errors first, then warnings: a smaller rank is a better strategy.
fn rank(f: &[Finding]) -> (usize, usize) {
    let errors = f.iter().filter(|x| x.kind != Kind::CannotProve).count();
    (errors, f.len() - errors)
}
