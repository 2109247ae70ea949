//! The walk over a schema that sizes every subschema, following local `$ref`s.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value};

use super::size::*;

/// The exact compact size of a literal value (`const`, `enum`), escapes included.
fn compact_chars(v: &Value) -> u64 {
    u64::try_from(crate::json::compact_chars(v)).unwrap_or(u64::MAX)
}
use super::{Unbounded, UnboundedKind, MAX_DEPTH, MAX_VISITS};
use crate::json::pointer::{child, escape, parse_local_ref, resolve};

/// Keywords that evaluate properties/items of the same instance in place; beside them,
/// `unevaluated*: false` cannot be judged locally.
pub(super) const IN_PLACE_APPLICATORS: &[&str] = &[
    "allOf",
    "anyOf",
    "oneOf",
    "$ref",
    "$dynamicRef",
    "if",
    "then",
    "else",
    "dependentSchemas",
];

pub(super) struct Analyzer<'a> {
    root: &'a Value,
    /// Every distinct problem found, in discovery order.
    pub(super) problems: Vec<Unbounded>,
    problem_ids: HashMap<(UnboundedKind, String, String), usize>,
    /// Finished `$ref` targets, by canonical JSON Pointer.
    memo: HashMap<String, Size>,
    /// `$ref` targets being expanded, outermost first.
    pub(super) in_progress: Vec<String>,
    /// Lowest `in_progress` index that a cycle reached during the current expansion; a result
    /// that depends on an outer, unfinished target is not memoised (it is context-dependent).
    cycle_low: usize,
    visits: u64,
    pub(super) exhausted: bool,
}

impl<'a> Analyzer<'a> {
    pub(super) fn new(root: &'a Value) -> Self {
        Analyzer {
            root,
            problems: Vec::new(),
            problem_ids: HashMap::new(),
            memo: HashMap::new(),
            in_progress: Vec::new(),
            cycle_low: usize::MAX,
            visits: 0,
            exhausted: false,
        }
    }

    /// Records a problem (once) and returns an unbounded size carrying it.
    fn problem(&mut self, kind: UnboundedKind, path: &str, message: String) -> Size {
        let key = (kind, path.to_owned(), message);
        let id = match self.problem_ids.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.problems.len();
                self.problems.push(Unbounded {
                    kind,
                    schema_path: key.1.clone(),
                    message: key.2.clone(),
                });
                self.problem_ids.insert(key, id);
                id
            }
        };
        Size::Unbounded(BTreeSet::from([id]))
    }

    pub(super) fn eval(&mut self, schema: &Value, path: &str, depth: usize) -> Size {
        if self.exhausted {
            return Size::Unbounded(BTreeSet::new());
        }
        self.visits += 1;
        if self.visits > MAX_VISITS {
            self.exhausted = true;
            return Size::Unbounded(BTreeSet::new());
        }
        if depth > MAX_DEPTH {
            return self.problem(
                UnboundedKind::AnyValue,
                path,
                format!(
                    "schema nested more than {MAX_DEPTH} levels deep here, not analysed \
                     (flatten the schema or bound this part with enum or const)"
                ),
            );
        }
        match schema {
            Value::Bool(true) => self.problem(
                UnboundedKind::AnyValue,
                path,
                "schema `true` accepts any value (replace it with a typed, bounded schema)"
                    .to_owned(),
            ),
            Value::Bool(false) => Size::Never,
            Value::Object(map) => self.eval_object(map, path, depth),
            _ => self.problem(
                UnboundedKind::AnyValue,
                path,
                "not a schema (expected an object or a boolean), so it constrains nothing"
                    .to_owned(),
            ),
        }
    }

    /// A schema object: its own keywords and each composition are separate constraints an
    /// instance must all satisfy, so the result is their `allOf`.
    fn eval_object(&mut self, map: &Map<String, Value>, path: &str, depth: usize) -> Size {
        let mut parts = Vec::new();
        if let Some(own) = self.own_size(map, path, depth) {
            parts.push(own);
        }
        if let Some(Value::String(reference)) = map.get("$ref") {
            parts.push(self.eval_ref(reference, path, depth));
        }
        for keyword in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = map.get(keyword) {
                if branches.is_empty() {
                    continue; // invalid schema; ignoring it is the permissive reading
                }
                let base = child(path, keyword);
                let sizes: Vec<Size> = branches
                    .iter()
                    .enumerate()
                    .map(|(i, b)| self.eval(b, &child(&base, &i.to_string()), depth + 1))
                    .collect();
                parts.push(max_of(sizes));
            }
        }
        if let Some(Value::Array(branches)) = map.get("allOf") {
            let base = child(path, "allOf");
            for (i, b) in branches.iter().enumerate() {
                parts.push(self.eval(b, &child(&base, &i.to_string()), depth + 1));
            }
        }
        if parts.is_empty() {
            return self.problem(
                UnboundedKind::AnyValue,
                path,
                "schema constrains nothing (add a type with bounds, enum or const)".to_owned(),
            );
        }
        min_of(parts)
    }

    /// Size from the schema's own (non-composition) keywords; `None` when they constrain nothing.
    fn own_size(&mut self, map: &Map<String, Value>, path: &str, depth: usize) -> Option<Size> {
        if let Some(value) = map.get("const") {
            return Some(Size::Bounded(compact_chars(value)));
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            return Some(match values.iter().map(compact_chars).max() {
                Some(n) => Size::Bounded(n),
                None => Size::Never,
            });
        }
        let mut types: Vec<&str> = Vec::new();
        match map.get("type") {
            Some(Value::String(t)) => types.push(t),
            Some(Value::Array(ts)) => {
                for t in ts.iter().filter_map(Value::as_str) {
                    if !types.contains(&t) {
                        types.push(t);
                    }
                }
            }
            _ => {}
        }
        if types.is_empty() {
            // No usable `type`: infer it from type-specific keywords (documented approximation).
            if ["properties", "additionalProperties", "patternProperties"]
                .iter()
                .any(|k| map.contains_key(*k))
            {
                types.push("object");
            }
            if ["items", "prefixItems", "maxItems"]
                .iter()
                .any(|k| map.contains_key(*k))
            {
                types.push("array");
            }
            if map.contains_key("maxLength") {
                types.push("string");
            }
        }
        if types.is_empty() {
            return None;
        }
        let sizes: Vec<Size> = types
            .into_iter()
            .map(|t| self.type_size(t, map, path, depth))
            .collect();
        Some(max_of(sizes))
    }

    fn type_size(&mut self, ty: &str, map: &Map<String, Value>, path: &str, depth: usize) -> Size {
        match ty {
            "string" => match map.get("maxLength").and_then(as_count) {
                Some(n) => Size::Bounded(n.saturating_add(2)),
                None => self.problem(
                    UnboundedKind::String,
                    path,
                    "string without maxLength (add maxLength, enum or const)".to_owned(),
                ),
            },
            "integer" => integer_size(map),
            "number" => {
                let integral = map
                    .get("multipleOf")
                    .and_then(as_count)
                    .is_some_and(|m| m > 0)
                    && ["minimum", "exclusiveMinimum"]
                        .iter()
                        .any(|k| map.get(*k).is_some_and(is_integral))
                    && ["maximum", "exclusiveMaximum"]
                        .iter()
                        .any(|k| map.get(*k).is_some_and(is_integral));
                match integer_size(map) {
                    Size::Bounded(n) if integral => Size::Bounded(n.min(NUMBER_CHARS)),
                    Size::Never if integral => Size::Never,
                    _ => Size::Bounded(NUMBER_CHARS),
                }
            }
            "boolean" => Size::Bounded(5),
            "null" => Size::Bounded(4),
            "array" => self.array_size(map, path, depth),
            "object" => self.object_size(map, path, depth),
            other => self.problem(
                UnboundedKind::AnyValue,
                path,
                format!("unknown type \"{other}\" constrains nothing (use a JSON Schema type)"),
            ),
        }
    }

    fn array_size(&mut self, map: &Map<String, Value>, path: &str, depth: usize) -> Size {
        let prefix: &[Value] = match map.get("prefixItems") {
            Some(Value::Array(p)) => p,
            _ => &[],
        };
        let prefix_len = u64::try_from(prefix.len()).unwrap_or(u64::MAX);
        let items = map.get("items");
        let has_applicator = IN_PLACE_APPLICATORS.iter().any(|k| map.contains_key(*k));
        let closed_tuple = items == Some(&Value::Bool(false))
            || (items.is_none()
                && map.get("unevaluatedItems") == Some(&Value::Bool(false))
                && !has_applicator);
        let cap = match (map.get("maxItems").and_then(as_count), closed_tuple) {
            (Some(m), true) => Some(m.min(prefix_len)),
            (Some(m), false) => Some(m),
            (None, true) => Some(prefix_len),
            (None, false) => None,
        };

        let mut problems = BTreeSet::new();
        let mut total: u64 = 0;
        let mut count: u64 = 0;
        // An item position that matches nothing ends every valid array before it.
        let mut ended = false;
        let positions = cap.map_or(prefix.len(), |c| {
            usize::try_from(c.min(prefix_len)).unwrap_or(prefix.len())
        });
        for (i, item) in prefix.iter().take(positions).enumerate() {
            let item_path = child(&child(path, "prefixItems"), &i.to_string());
            match self.eval(item, &item_path, depth + 1) {
                Size::Never => {
                    ended = true;
                    break;
                }
                Size::Bounded(n) => {
                    total = total.saturating_add(n);
                    count = count.saturating_add(1);
                }
                Size::Unbounded(p) => problems.extend(p),
            }
        }

        let rest = cap.map(|c| c.saturating_sub(prefix_len));
        if !ended && !closed_tuple && rest != Some(0) {
            let item_size = match items {
                Some(schema) => self.eval(schema, &child(path, "items"), depth + 1),
                None => self.problem(
                    UnboundedKind::AnyValue,
                    path,
                    "array items are unconstrained (add an items schema)".to_owned(),
                ),
            };
            match item_size {
                Size::Never => {}
                Size::Bounded(n) => {
                    if let Some(r) = rest {
                        total = total.saturating_add(r.saturating_mul(n));
                        count = count.saturating_add(r);
                    }
                }
                Size::Unbounded(p) => problems.extend(p),
            }
        }

        if cap.is_none() {
            if let Size::Unbounded(p) = self.problem(
                UnboundedKind::Array,
                path,
                "array without maxItems (add maxItems, or close a prefixItems tuple with \
                 items: false)"
                    .to_owned(),
            ) {
                problems.extend(p);
            }
        }
        if !problems.is_empty() {
            return Size::Unbounded(problems);
        }
        // "[" + items + commas + "]"
        Size::Bounded(
            2u64.saturating_add(total)
                .saturating_add(count.saturating_sub(1)),
        )
    }

    fn object_size(&mut self, map: &Map<String, Value>, path: &str, depth: usize) -> Size {
        let has_applicator = IN_PLACE_APPLICATORS.iter().any(|k| map.contains_key(*k));
        let pattern_open = match map.get("patternProperties") {
            Some(Value::Object(p)) => p.values().any(|v| v != &Value::Bool(false)),
            _ => false,
        };
        let open_reason = if pattern_open {
            Some(
                "object with patternProperties admits unlisted keys (list the properties \
                 instead and set additionalProperties: false)",
            )
        } else {
            match map.get("additionalProperties") {
                Some(Value::Bool(false)) => None,
                Some(_) => Some(
                    "object whose additionalProperties is not false admits unlisted \
                     properties (set additionalProperties: false)",
                ),
                None => match map.get("unevaluatedProperties") {
                    Some(Value::Bool(false)) if !has_applicator => None,
                    Some(Value::Bool(false)) => Some(
                        "unevaluatedProperties: false beside allOf/anyOf/oneOf/$ref is not \
                         analysed (put additionalProperties: false on the schema that lists the \
                         properties)",
                    ),
                    _ => Some(
                        "object without additionalProperties: false admits unlisted \
                         properties (add additionalProperties: false)",
                    ),
                },
            }
        };

        let mut problems = BTreeSet::new();
        let mut members: Vec<u64> = Vec::new();
        if let Some(Value::Object(props)) = map.get("properties") {
            let base = child(path, "properties");
            for (key, schema) in props {
                match self.eval(schema, &child(&base, key), depth + 1) {
                    // The property can never appear, so neither its key nor a comma counts.
                    Size::Never => {}
                    Size::Bounded(n) => members.push(
                        n.saturating_add(char_count(key)).saturating_add(3), // quotes and colon
                    ),
                    Size::Unbounded(p) => problems.extend(p),
                }
            }
        }
        if let Some(reason) = open_reason {
            if let Size::Unbounded(p) =
                self.problem(UnboundedKind::OpenObject, path, reason.to_owned())
            {
                problems.extend(p);
            }
        }
        if !problems.is_empty() {
            return Size::Unbounded(problems);
        }
        // Every listed property is assumed present, except that `maxProperties` keeps only the
        // largest that many: still an upper bound, and tighter.
        if let Some(limit) = map.get("maxProperties").and_then(as_count) {
            if let Ok(limit) = usize::try_from(limit) {
                if limit < members.len() {
                    members.sort_unstable_by(|a, b| b.cmp(a));
                    members.truncate(limit);
                }
            }
        }
        let count = u64::try_from(members.len()).unwrap_or(u64::MAX);
        let sum = members.iter().fold(0u64, |acc, n| acc.saturating_add(*n));
        // "{" + members + commas + "}"
        Size::Bounded(
            2u64.saturating_add(sum)
                .saturating_add(count.saturating_sub(1)),
        )
    }

    fn eval_ref(&mut self, reference: &str, path: &str, depth: usize) -> Size {
        let Some(tokens) = parse_local_ref(reference) else {
            return self.problem(
                UnboundedKind::AnyValue,
                path,
                format!(
                    "cannot resolve $ref \"{reference}\" (only local references such as \
                     #/$defs/Name are supported; inline the schema)"
                ),
            );
        };
        let Some(target) = resolve(self.root, &tokens) else {
            return self.problem(
                UnboundedKind::AnyValue,
                path,
                format!("cannot resolve $ref \"{reference}\" (no such location in the schema)"),
            );
        };
        let target_path: String = tokens.iter().map(|t| format!("/{}", escape(t))).collect();
        if let Some(size) = self.memo.get(&target_path) {
            return size.clone();
        }
        if let Some(index) = self.in_progress.iter().position(|p| *p == target_path) {
            self.cycle_low = self.cycle_low.min(index);
            return self.problem(
                UnboundedKind::RecursiveRef,
                path,
                format!(
                    "$ref \"{reference}\" refers back to a schema that contains it; recursive \
                     schemas have no worst-case size (unroll the recursion to a fixed depth)"
                ),
            );
        }

        let level = self.in_progress.len();
        self.in_progress.push(target_path.clone());
        let outer_low = std::mem::replace(&mut self.cycle_low, usize::MAX);
        let size = self.eval(target, &target_path, depth + 1);
        self.in_progress.pop();
        let low = self.cycle_low;
        if low >= level {
            // Depends on nothing still being expanded outside it: same answer from anywhere.
            self.memo.insert(target_path, size.clone());
            self.cycle_low = outer_low;
        } else {
            self.cycle_low = outer_low.min(low);
        }
        size
    }
}
