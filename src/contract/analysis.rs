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

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value};

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

/// The size of one subschema.
#[derive(Debug, Clone)]
enum Size {
    /// No instance is valid (`false`, an empty `enum`, an empty integer range).
    Never,
    /// Every valid instance is at most this many characters.
    Bounded(u64),
    /// Unbounded, for the problems with these ids (indices into `Analyzer::problems`, which are
    /// in discovery order). A set, so problems reached through many `$ref`s stay deduplicated.
    Unbounded(BTreeSet<usize>),
}

/// Keywords that evaluate properties/items of the same instance in place; beside them,
/// `unevaluated*: false` cannot be judged locally.
const IN_PLACE_APPLICATORS: &[&str] = &[
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

/// Longest rendering of an `f64` by serde_json (shortest round-trip), e.g.
/// "-2.2250738585072014e-308".
const NUMBER_CHARS: u64 = 24;

struct Analyzer<'a> {
    root: &'a Value,
    /// Every distinct problem found, in discovery order.
    problems: Vec<Unbounded>,
    problem_ids: HashMap<(UnboundedKind, String, String), usize>,
    /// Finished `$ref` targets, by canonical JSON Pointer.
    memo: HashMap<String, Size>,
    /// `$ref` targets being expanded, outermost first.
    in_progress: Vec<String>,
    /// Lowest `in_progress` index that a cycle reached during the current expansion; a result
    /// that depends on an outer, unfinished target is not memoised (it is context-dependent).
    cycle_low: usize,
    visits: u64,
    exhausted: bool,
}

impl<'a> Analyzer<'a> {
    fn new(root: &'a Value) -> Self {
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

    fn eval(&mut self, schema: &Value, path: &str, depth: usize) -> Size {
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
            return Some(Size::Bounded(compact_len(value)));
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            return Some(match values.iter().map(compact_len).max() {
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

/// Largest of alternatives (`anyOf`, `oneOf`, type arrays): unbounded if any alternative is.
fn max_of(sizes: Vec<Size>) -> Size {
    let mut best: Option<u64> = None;
    let mut problems = BTreeSet::new();
    for size in sizes {
        match size {
            Size::Never => {}
            Size::Bounded(n) => best = Some(best.map_or(n, |b| b.max(n))),
            Size::Unbounded(p) => problems.extend(p),
        }
    }
    if !problems.is_empty() {
        Size::Unbounded(problems)
    } else {
        best.map_or(Size::Never, Size::Bounded)
    }
}

/// Smallest of constraints that must all hold (`allOf`, own keywords beside compositions):
/// any bounded one bounds the instance.
fn min_of(sizes: Vec<Size>) -> Size {
    let mut best: Option<u64> = None;
    let mut problems = BTreeSet::new();
    for size in sizes {
        match size {
            Size::Never => return Size::Never,
            Size::Bounded(n) => best = Some(best.map_or(n, |b| b.min(n))),
            Size::Unbounded(p) => problems.extend(p),
        }
    }
    best.map_or(Size::Unbounded(problems), Size::Bounded)
}

/// Size of an `integer` (or integral `number`) from its bounds; a missing bound is the `i64`
/// extreme on that side.
fn integer_size(map: &Map<String, Value>) -> Size {
    let mut low = i64::MIN;
    let mut high = i64::MAX;
    if let Some(n) = map.get("minimum").and_then(Value::as_number) {
        low = low.max(ceil_i64(n));
    }
    if let Some(n) = map.get("exclusiveMinimum").and_then(Value::as_number) {
        low = low.max(floor_i64(n).saturating_add(1));
    }
    if let Some(n) = map.get("maximum").and_then(Value::as_number) {
        high = high.min(floor_i64(n));
    }
    if let Some(n) = map.get("exclusiveMaximum").and_then(Value::as_number) {
        high = high.min(ceil_i64(n).saturating_sub(1));
    }
    if low > high {
        return Size::Never;
    }
    // An integral float is an integer to JSON Schema, and comes back longer: `100.0` (or
    // `1e2`) is written `100.0`, two characters more, and from 1e16 on in exponent form, up to
    // the longest number. Text length grows with magnitude on each side of zero, so one of the
    // bounds is longest.
    const EXPONENT_FORM: i64 = 10_000_000_000_000_000;
    if low <= -EXPONENT_FORM || high >= EXPONENT_FORM {
        return Size::Bounded(NUMBER_CHARS);
    }
    Size::Bounded(decimal_len(low).max(decimal_len(high)) + 2)
}

fn floor_i64(n: &serde_json::Number) -> i64 {
    if let Some(i) = n.as_i64() {
        i
    } else if n.as_u64().is_some() {
        i64::MAX
    } else {
        // `as` saturates, which is the clamping wanted here.
        n.as_f64().map_or(0, |f| f.floor() as i64)
    }
}

fn ceil_i64(n: &serde_json::Number) -> i64 {
    if let Some(i) = n.as_i64() {
        i
    } else if n.as_u64().is_some() {
        i64::MAX
    } else {
        n.as_f64().map_or(0, |f| f.ceil() as i64)
    }
}

fn decimal_len(n: i64) -> u64 {
    u64::try_from(n.to_string().len()).unwrap_or(u64::MAX)
}

fn is_integral(v: &Value) -> bool {
    v.as_i64().is_some() || v.as_u64().is_some() || v.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// A non-negative integer keyword value (`maxLength`, `maxItems`, …); `5.0` counts as 5.
fn as_count(v: &Value) -> Option<u64> {
    if let Some(n) = v.as_u64() {
        return Some(n);
    }
    match v.as_f64() {
        // `as` saturates at u64::MAX for huge values.
        Some(f) if f >= 0.0 && f.fract() == 0.0 => Some(f as u64),
        _ => None,
    }
}

fn char_count(s: &str) -> u64 {
    u64::try_from(s.chars().count()).unwrap_or(u64::MAX)
}

/// Compact JSON length of a value, strings counted as characters + 2. Iterative, so deeply
/// nested `const`/`enum` values cannot overflow the stack.
fn compact_len(value: &Value) -> u64 {
    let mut total: u64 = 0;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        let own = match v {
            Value::Null | Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Number(n) => u64::try_from(n.to_string().len()).unwrap_or(u64::MAX),
            Value::String(s) => char_count(s).saturating_add(2),
            Value::Array(items) => {
                stack.extend(items.iter());
                let count = u64::try_from(items.len()).unwrap_or(u64::MAX);
                2u64.saturating_add(count.saturating_sub(1))
            }
            Value::Object(members) => {
                let count = u64::try_from(members.len()).unwrap_or(u64::MAX);
                let mut own = 2u64.saturating_add(count.saturating_sub(1));
                for (key, member) in members {
                    own = own.saturating_add(char_count(key)).saturating_add(3);
                    stack.push(member);
                }
                own
            }
        };
        total = total.saturating_add(own);
    }
    total
}

/// Child JSON Pointer of `path`, escaping the token per RFC 6901.
fn child(path: &str, token: &str) -> String {
    format!("{path}/{}", escape(token))
}

fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Reference tokens of a same-document `$ref` (`#` or `#/json/pointer`, percent-encoded);
/// `None` for anything else (remote refs, anchors).
fn parse_local_ref(reference: &str) -> Option<Vec<String>> {
    let fragment = percent_decode(reference.strip_prefix('#')?)?;
    if fragment.is_empty() {
        return Some(Vec::new());
    }
    let pointer = fragment.strip_prefix('/')?;
    Some(
        pointer
            .split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect(),
    )
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn resolve<'v>(root: &'v Value, tokens: &[String]) -> Option<&'v Value> {
    tokens.iter().try_fold(root, |node, token| match node {
        Value::Object(map) => map.get(token),
        Value::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn size(schema: Value) -> Option<u64> {
        analyze(&schema).worst_case_chars
    }

    /// `(kind, schema_path)` of every problem, in order.
    fn problems(schema: Value) -> Vec<(UnboundedKind, String)> {
        let analysis = analyze(&schema);
        assert!(!analysis.is_bounded(), "expected unbounded: {analysis:?}");
        analysis
            .problems
            .into_iter()
            .map(|p| (p.kind, p.schema_path))
            .collect()
    }

    fn x(n: usize) -> String {
        "x".repeat(n)
    }

    fn chars(v: &Value) -> u64 {
        let text = serde_json::to_string(v).expect("serialises");
        text.chars().count() as u64
    }

    #[test]
    fn string_max_length() {
        assert_eq!(size(json!({"type": "string", "maxLength": 10})), Some(12));
        assert_eq!(size(json!({"type": "string", "maxLength": 0})), Some(2));
        assert_eq!(size(json!({"maxLength": 3})), Some(5));
    }

    #[test]
    fn string_without_max_length_is_reported() {
        let a = analyze(&json!({"type": "string", "minLength": 1}));
        assert_eq!(a.worst_case_chars, None);
        assert_eq!(
            a.problems,
            vec![Unbounded {
                kind: UnboundedKind::String,
                schema_path: String::new(),
                message: "string without maxLength (add maxLength, enum or const)".to_owned(),
            }]
        );
    }

    #[test]
    fn enum_takes_longest_value() {
        assert_eq!(
            size(json!({"type": "string", "enum": ["low", "medium", "high"]})),
            Some(8)
        );
        assert_eq!(
            size(json!({"enum": [1, null, "ab", [1, 2], {"k": true}]})),
            Some(10)
        );
        assert_eq!(size(json!({"enum": []})), Some(0));
    }

    #[test]
    fn const_uses_its_compact_length() {
        assert_eq!(size(json!({"const": "done"})), Some(6));
        assert_eq!(size(json!({"type": "string", "const": "é"})), Some(3));
        let value = json!({"a": [1, "two", null], "b": {"c": false}});
        assert_eq!(size(json!({ "const": value.clone() })), Some(chars(&value)));
    }

    #[test]
    fn integer_ranges() {
        // The longest is an integral float at a bound: `100.0`, `-1000.0`.
        let both = json!({"type": "integer", "minimum": -5, "maximum": 100});
        assert_eq!(size(both), Some(5));
        assert_eq!(chars(&json!(100.0)), 5);
        let both = json!({"type": "integer", "minimum": -1000, "maximum": 5});
        assert_eq!(size(both), Some(7));
        assert_eq!(chars(&json!(-1000.0)), 7);
        let exclusive =
            json!({"type": "integer", "exclusiveMinimum": -10, "exclusiveMaximum": 100});
        assert_eq!(size(exclusive), Some(4));
        // Past 1e16 floats take exponent form, up to any number's length.
        assert_eq!(chars(&json!(-1.2345678901234567e18)), 23);
        assert_eq!(size(json!({"type": "integer", "minimum": 0})), Some(24));
        assert_eq!(size(json!({"type": "integer", "maximum": 0})), Some(24));
        assert_eq!(size(json!({"type": "integer"})), Some(24));
        assert_eq!(
            size(json!({"type": "integer", "minimum": 0, "maximum": 1e300})),
            Some(24)
        );
        assert_eq!(
            size(json!({"type": "integer", "minimum": 0, "maximum": 9_999_999_999_999_999_i64})),
            Some(18)
        );
        assert_eq!(chars(&json!(9_999_999_999_999_998.0)), 18);
        assert_eq!(
            size(json!({"type": "integer", "minimum": 5, "maximum": 1})),
            Some(0)
        );
    }

    #[test]
    fn number() {
        assert_eq!(size(json!({"type": "number"})), Some(24));
        assert_eq!(
            size(json!({"type": "number", "minimum": 0, "maximum": 1})),
            Some(24)
        );
        let integral = json!({"type": "number", "minimum": 0, "maximum": 100, "multipleOf": 5});
        assert_eq!(size(integral), Some(5));
        assert_eq!(chars(&json!(-2.2250738585072014e-308)), 24);
    }

    #[test]
    fn boolean_and_null() {
        assert_eq!(size(json!({"type": "boolean"})), Some(5));
        assert_eq!(size(json!({"type": "null"})), Some(4));
    }

    #[test]
    fn array_max_items() {
        let arr = json!({"type": "array", "maxItems": 3, "items": {"type": "boolean"}});
        assert_eq!(size(arr), Some(2 + 3 * 5 + 2));
        let empty = json!({"type": "array", "maxItems": 0, "items": {"type": "string"}});
        assert_eq!(size(empty), Some(2));
        let one = json!({"type": "array", "maxItems": 1, "items": {"type": "null"}});
        assert_eq!(size(one), Some(6));
    }

    #[test]
    fn array_without_max_items_is_reported_with_its_items() {
        let schema = json!({"type": "array", "items": {"type": "string"}});
        assert_eq!(
            problems(schema),
            vec![
                (UnboundedKind::String, "/items".to_owned()),
                (UnboundedKind::Array, String::new()),
            ]
        );
    }

    #[test]
    fn array_without_items_schema_is_any_value() {
        let schema = json!({"type": "array", "maxItems": 2});
        assert_eq!(
            problems(schema),
            vec![(UnboundedKind::AnyValue, String::new())]
        );
    }

    #[test]
    fn closed_tuple() {
        let tuple = json!({
            "type": "array",
            "prefixItems": [{"type": "boolean"}, {"type": "integer", "minimum": 0, "maximum": 99}],
            "items": false
        });
        // [false,99.0]
        assert_eq!(size(tuple), Some(12));
        assert_eq!(chars(&json!([false, 99.0])), 12);
        let capped = json!({
            "type": "array",
            "prefixItems": [{"type": "null"}, {"type": "null"}],
            "items": false,
            "maxItems": 1
        });
        assert_eq!(size(capped), Some(6));
        let tail = json!({
            "type": "array",
            "prefixItems": [{"type": "boolean"}],
            "items": {"type": "null"},
            "maxItems": 3
        });
        // [false,null,null]
        assert_eq!(size(tail), Some(17));
        let never_tail = json!({"type": "array", "items": false, "maxItems": 9});
        assert_eq!(size(never_tail), Some(2));
    }

    #[test]
    fn huge_max_items_saturates() {
        let arr = json!({"type": "array", "maxItems": 1u64 << 60, "items": {"type": "string", "maxLength": 64}});
        assert_eq!(size(arr), Some(u64::MAX));
        let arr = json!({"type": "array", "maxItems": u64::MAX, "items": {"type": "null"}});
        assert_eq!(size(arr), Some(u64::MAX));
    }

    #[test]
    fn closed_object_matches_a_maximal_instance() {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "name": {"type": "string", "maxLength": 8},
                "ok": {"type": "boolean"},
                "n": {"type": "integer", "minimum": -50, "maximum": 50}
            }
        });
        // {"name":"xxxxxxxx","ok":false,"n":-50.0}
        // 2 + (7 + 10) + (5 + 5) + (4 + 5) + 2 commas = 40
        assert_eq!(size(schema), Some(40));
        let instance = json!({"name": x(8), "ok": false, "n": -50.0});
        assert_eq!(chars(&instance), 40);
        assert_eq!(
            size(json!({"type": "object", "additionalProperties": false})),
            Some(2)
        );
    }

    #[test]
    fn false_property_drops_key_and_comma() {
        let schema = json!({
            "type": "object", "additionalProperties": false,
            "properties": {"a": {"type": "null"}, "gone": false}
        });
        assert_eq!(size(schema), Some(chars(&json!({"a": null}))));
    }

    #[test]
    fn max_properties_keeps_the_largest() {
        let schema = json!({
            "type": "object", "additionalProperties": false, "maxProperties": 1,
            "properties": {"a": {"type": "null"}, "b": {"type": "boolean"}}
        });
        assert_eq!(size(schema), Some(chars(&json!({"b": false}))));
    }

    #[test]
    fn unevaluated_properties_false_closes_a_plain_object() {
        let schema = json!({"type": "object", "unevaluatedProperties": false,
            "properties": {"a": {"type": "null"}}});
        assert_eq!(size(schema), Some(10));
        // Beside allOf the object may carry the allOf's properties: not judged locally.
        let schema = json!({"type": "object", "unevaluatedProperties": false,
            "allOf": [{"properties": {"b": {"type": "string", "maxLength": 9}}}]});
        assert!(!analyze(&schema).is_bounded());
    }

    #[test]
    fn open_objects_are_reported() {
        let missing = json!({"type": "object", "properties": {"a": {"type": "null"}}});
        assert_eq!(
            problems(missing),
            vec![(UnboundedKind::OpenObject, String::new())]
        );
        let explicit = json!({"type": "object", "additionalProperties": true});
        assert_eq!(
            problems(explicit),
            vec![(UnboundedKind::OpenObject, String::new())]
        );
        let schema_valued = json!({"type": "object", "additionalProperties": {"type": "null"}});
        assert_eq!(
            problems(schema_valued),
            vec![(UnboundedKind::OpenObject, String::new())]
        );
        let pattern = json!({
            "type": "object", "additionalProperties": false,
            "patternProperties": {"^x-": {"type": "null"}}
        });
        assert_eq!(
            problems(pattern),
            vec![(UnboundedKind::OpenObject, String::new())]
        );
    }

    #[test]
    fn refs_and_defs() {
        let schema = json!({
            "type": "object", "additionalProperties": false,
            "properties": {"a": {"$ref": "#/$defs/Short"}, "b": {"$ref": "#/definitions/Flag"}},
            "$defs": {"Short": {"type": "string", "maxLength": 4}},
            "definitions": {"Flag": {"type": "boolean"}}
        });
        assert_eq!(size(schema), Some(chars(&json!({"a": x(4), "b": false}))));
    }

    #[test]
    fn ref_pointer_escaping_and_percent_encoding() {
        let schema = json!({
            "type": "array", "maxItems": 2,
            "prefixItems": [{"$ref": "#/$defs/a~1b"}, {"$ref": "#/$defs/with%20space"}],
            "items": false,
            "$defs": {"a/b": {"type": "null"}, "with space": {"const": 12345}}
        });
        assert_eq!(size(schema), Some(chars(&json!([null, 12345]))));
    }

    #[test]
    fn unresolvable_refs() {
        let remote = json!({"$ref": "https://example.com/schema.json"});
        assert_eq!(
            problems(remote),
            vec![(UnboundedKind::AnyValue, String::new())]
        );
        let missing =
            json!({"properties": {"a": {"$ref": "#/$defs/Nope"}}, "additionalProperties": false});
        let a = analyze(&missing);
        assert_eq!(a.problems.len(), 1);
        assert_eq!(a.problems[0].schema_path, "/properties/a");
        assert!(a.problems[0].message.starts_with("cannot resolve $ref"));
    }

    #[test]
    fn problems_inside_a_shared_def_are_reported_once_at_the_def() {
        let schema = json!({
            "type": "object", "additionalProperties": false,
            "properties": {
                "one": {"$ref": "#/$defs/Finding"},
                "two": {"$ref": "#/$defs/Finding"}
            },
            "$defs": {"Finding": {"type": "object", "additionalProperties": false,
                "properties": {"claim": {"type": "string"}}}}
        });
        assert_eq!(
            problems(schema),
            vec![(
                UnboundedKind::String,
                "/$defs/Finding/properties/claim".to_owned()
            )]
        );
    }

    #[test]
    fn any_of_and_one_of_take_the_max() {
        let schema = json!({"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 10}]});
        assert_eq!(size(schema), Some(12));
        let schema = json!({"oneOf": [{"type": "boolean"}, {"const": 7}]});
        assert_eq!(size(schema), Some(5));
        let schema = json!({"anyOf": [{"type": "null"}, {"type": "string"}]});
        assert_eq!(
            problems(schema),
            vec![(UnboundedKind::String, "/anyOf/1".to_owned())]
        );
    }

    #[test]
    fn own_keywords_beside_any_of_take_the_min() {
        let schema = json!({
            "type": "string", "maxLength": 5,
            "anyOf": [{"maxLength": 100}, {"enum": ["a"]}]
        });
        assert_eq!(size(schema), Some(7));
        let schema = json!({"type": "string", "anyOf": [{"maxLength": 3}, {"maxLength": 8}]});
        assert_eq!(size(schema), Some(10));
    }

    #[test]
    fn all_of_takes_the_min_of_bounded_branches() {
        let schema = json!({"allOf": [{"type": "string", "maxLength": 50}, {"maxLength": 10}]});
        assert_eq!(size(schema), Some(12));
        let schema = json!({"allOf": [{"type": "string"}, {"maxLength": 10}]});
        assert_eq!(size(schema), Some(12));
        let schema = json!({"allOf": [{"type": "string"}, {"type": "array"}]});
        assert_eq!(
            problems(schema),
            vec![
                (UnboundedKind::String, "/allOf/0".to_owned()),
                (UnboundedKind::AnyValue, "/allOf/1".to_owned()),
                (UnboundedKind::Array, "/allOf/1".to_owned()),
            ]
        );
    }

    #[test]
    fn ref_beside_keywords_acts_like_all_of() {
        let schema = json!({
            "$ref": "#/$defs/Long", "maxLength": 3,
            "$defs": {"Long": {"type": "string", "maxLength": 300}}
        });
        assert_eq!(size(schema), Some(5));
    }

    #[test]
    fn recursion_is_reported_at_the_ref() {
        let schema = json!({
            "$ref": "#/$defs/Node",
            "$defs": {"Node": {
                "type": "object", "additionalProperties": false,
                "properties": {
                    "label": {"type": "string", "maxLength": 10},
                    "children": {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/Node"}}
                }
            }}
        });
        let a = analyze(&schema);
        assert_eq!(a.worst_case_chars, None);
        assert_eq!(a.problems.len(), 1);
        assert_eq!(a.problems[0].kind, UnboundedKind::RecursiveRef);
        assert_eq!(
            a.problems[0].schema_path,
            "/$defs/Node/properties/children/items"
        );
        assert!(a.problems[0].message.contains("#/$defs/Node"));
    }

    #[test]
    fn recursion_through_the_root_and_mutual_refs() {
        let root = json!({"anyOf": [{"type": "null"}, {"type": "array", "maxItems": 1, "items": {"$ref": "#"}}]});
        assert_eq!(
            problems(root),
            vec![(UnboundedKind::RecursiveRef, "/anyOf/1/items".to_owned())]
        );
        let mutual = json!({
            "$ref": "#/$defs/A",
            "$defs": {
                "A": {"type": "array", "maxItems": 1, "items": {"$ref": "#/$defs/B"}},
                "B": {"type": "array", "maxItems": 1, "items": {"$ref": "#/$defs/A"}}
            }
        });
        assert_eq!(
            problems(mutual),
            vec![(UnboundedKind::RecursiveRef, "/$defs/B/items".to_owned())]
        );
    }

    #[test]
    fn recursion_bounded_by_all_of_is_not_a_problem() {
        let schema = json!({
            "$ref": "#/$defs/N",
            "$defs": {"N": {"allOf": [
                {"type": "string", "maxLength": 5},
                {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/N"}]}
            ]}}
        });
        assert_eq!(size(schema), Some(7));
    }

    #[test]
    fn a_def_inside_a_cycle_is_not_memoised_from_the_wrong_context() {
        // Entering at X, Y sees X unfinished; Y alone is still bounded (2 + 7 + 1 + 7 = 17).
        let schema = json!({
            "type": "array", "prefixItems": [{"$ref": "#/$defs/X"}, {"$ref": "#/$defs/Y"}],
            "items": false,
            "$defs": {
                "X": {"allOf": [{"type": "string", "maxLength": 5}, {"$ref": "#/$defs/Y"}]},
                "Y": {"anyOf": [{"type": "null"},
                    {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/X"}}]}
            }
        });
        assert_eq!(size(schema), Some(2 + 7 + 1 + 17));
    }

    #[test]
    fn type_arrays_take_the_max() {
        assert_eq!(
            size(json!({"type": ["string", "null"], "maxLength": 50})),
            Some(52)
        );
        assert_eq!(size(json!({"type": ["boolean", "null"]})), Some(5));
        assert_eq!(
            problems(json!({"type": ["string", "null"]})),
            vec![(UnboundedKind::String, String::new())]
        );
    }

    #[test]
    fn boolean_schemas() {
        assert_eq!(
            problems(json!(true)),
            vec![(UnboundedKind::AnyValue, String::new())]
        );
        assert_eq!(size(json!(false)), Some(0));
        assert_eq!(
            problems(json!({})),
            vec![(UnboundedKind::AnyValue, String::new())]
        );
        // Only-restricting keywords do not bound anything on their own.
        assert_eq!(
            problems(json!({"not": {"type": "null"}})),
            vec![(UnboundedKind::AnyValue, String::new())]
        );
    }

    #[test]
    fn every_problem_is_reported_with_its_pointer() {
        let schema = json!({
            "type": "object", "additionalProperties": false,
            "properties": {
                "findings": {"type": "array", "items": {"type": "object", "additionalProperties": false,
                    "properties": {"claim": {"type": "string"}}}},
                "a/b~c": {"type": "string"},
                "meta": {"type": "object"},
                "ok": {"type": "boolean"}
            }
        });
        assert_eq!(
            problems(schema),
            vec![
                (
                    UnboundedKind::String,
                    "/properties/findings/items/properties/claim".to_owned()
                ),
                (UnboundedKind::Array, "/properties/findings".to_owned()),
                (UnboundedKind::String, "/properties/a~1b~0c".to_owned()),
                (UnboundedKind::OpenObject, "/properties/meta".to_owned()),
            ]
        );
    }

    #[test]
    fn pathological_nesting_does_not_overflow() {
        let mut schema = json!({"type": "string", "maxLength": 1});
        for _ in 0..10_000 {
            // Not `json!`: it would serialise `schema` recursively to embed it.
            let mut wrapper = Map::new();
            wrapper.insert("type".to_owned(), json!("array"));
            wrapper.insert("maxItems".to_owned(), json!(1));
            wrapper.insert("items".to_owned(), schema);
            schema = Value::Object(wrapper);
        }
        let a = analyze(&schema);
        assert!(!a.is_bounded());
        assert_eq!(a.problems.len(), 1);
        assert_eq!(a.problems[0].kind, UnboundedKind::AnyValue);
        assert!(a.problems[0].message.contains("levels deep"));
        // serde_json drops recursively; unwind by hand so the test itself cannot overflow.
        let mut node = schema;
        while let Value::Object(mut map) = node {
            node = map.remove("items").unwrap_or(Value::Null);
        }
    }

    #[test]
    fn exponential_ref_fan_out_stays_fast() {
        // D_i refers to D_{i-1} twice; memoisation keeps this linear (2^30 visits without it).
        // 30 levels of ref + prefixItems nest 60 deep, just inside MAX_DEPTH.
        let mut defs = Map::new();
        defs.insert("D0".to_owned(), json!({"type": "string", "maxLength": 1}));
        for i in 1..=30 {
            let prev = format!("#/$defs/D{}", i - 1);
            defs.insert(
                format!("D{i}"),
                json!({"type": "array", "maxItems": 2, "prefixItems": [{"$ref": prev}, {"$ref": prev}], "items": false}),
            );
        }
        let schema = json!({"$ref": "#/$defs/D30", "$defs": defs});
        // Each level is "[" + 2 * inner + "," + "]": s(n) = 2 s(n-1) + 3, s(0) = 3.
        assert_eq!(size(schema), Some(6 * (1 << 30) - 3));
    }

    #[test]
    fn visit_budget_stops_adversarial_ref_graphs() {
        // Every D_i depends on the unfinished root, so none can be memoised and the fan-out is
        // exponential; the visit budget ends it.
        let mut defs = Map::new();
        defs.insert(
            "D0".to_owned(),
            json!({"allOf": [{"type": "string", "maxLength": 1}, {"$ref": "#"}]}),
        );
        for i in 1..=25 {
            let prev = format!("#/$defs/D{}", i - 1);
            defs.insert(
                format!("D{i}"),
                json!({"allOf": [{"type": "string", "maxLength": 1},
                    {"anyOf": [{"$ref": prev}, {"$ref": prev}, {"$ref": "#"}]}]}),
            );
        }
        let schema = json!({"$ref": "#/$defs/D25", "$defs": defs});
        let a = analyze(&schema);
        assert!(!a.is_bounded());
        assert_eq!(a.problems.len(), 1);
        assert_eq!(a.problems[0].schema_path, "");
        assert!(a.problems[0].message.contains("too intricate"));
    }

    /// A random schema-shaped value: keywords the analysis reads, with values of any shape.
    fn random_schema(rng: &mut rand::rngs::SmallRng, depth: u32) -> Value {
        use rand::Rng;
        const KEYWORDS: &[&str] = &[
            "type",
            "maxLength",
            "enum",
            "const",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
            "items",
            "prefixItems",
            "maxItems",
            "properties",
            "additionalProperties",
            "unevaluatedProperties",
            "unevaluatedItems",
            "patternProperties",
            "maxProperties",
            "anyOf",
            "oneOf",
            "allOf",
            "$ref",
            "$defs",
            "not",
        ];
        const REFS: &[&str] = &[
            "#",
            "#/$defs/a",
            "#/$defs/b",
            "#/items",
            "#/anyOf/0",
            "#/%zz",
            "x#/y",
            "#/$defs/a/properties/p",
        ];
        const TYPES: &[&str] = &[
            "string", "integer", "number", "boolean", "null", "array", "object", "bogus",
        ];
        let leaf = |rng: &mut rand::rngs::SmallRng| match rng.random_range(0..8) {
            0 => Value::Bool(rng.random()),
            1 => json!(rng.random_range(-5i64..100)),
            2 => json!(rng.random::<u64>()),
            3 => json!(rng.random::<f64>() * 1e300 - 5e299),
            4 => json!(TYPES[rng.random_range(0..TYPES.len())]),
            5 => json!(REFS[rng.random_range(0..REFS.len())]),
            6 => Value::Null,
            _ => json!([TYPES[rng.random_range(0..TYPES.len())], "null"]),
        };
        if depth == 0 || rng.random_range(0..4) == 0 {
            return leaf(rng);
        }
        match rng.random_range(0..5) {
            0 => Value::Array(
                (0..rng.random_range(0..4))
                    .map(|_| random_schema(rng, depth - 1))
                    .collect(),
            ),
            _ => {
                let mut map = Map::new();
                for _ in 0..rng.random_range(0..6) {
                    let key = KEYWORDS[rng.random_range(0..KEYWORDS.len())];
                    let value = if rng.random_range(0..3) == 0 {
                        leaf(rng)
                    } else {
                        random_schema(rng, depth - 1)
                    };
                    map.insert(key.to_owned(), value);
                }
                for name in ["a", "b", "p"] {
                    if rng.random_range(0..4) == 0 {
                        map.insert(name.to_owned(), random_schema(rng, depth - 1));
                    }
                }
                Value::Object(map)
            }
        }
    }

    #[test]
    fn random_schemas_never_panic_and_keep_the_invariant() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed);
        for _ in 0..3_000 {
            let schema = random_schema(&mut rng, 6);
            let a = analyze(&schema);
            assert_eq!(a.is_bounded(), a.problems.is_empty(), "{schema}: {a:?}");
        }
    }

    #[test]
    fn flagship_example() {
        let schema = json!({"type":"object","required":["findings","gaps"],"additionalProperties":false,
         "properties":{
           "findings":{"type":"array","maxItems":6,"items":{"type":"object","additionalProperties":false,"required":["claim","source_ids"],
              "properties":{"claim":{"type":"string","maxLength":300},"source_ids":{"type":"array","minItems":1,"maxItems":5,"items":{"type":"string","maxLength":64}}}}},
           "gaps":{"type":"array","maxItems":3,"items":{"type":"string","maxLength":200}}}});
        let analysis = analyze(&schema);
        assert_eq!(analysis.worst_case_chars, Some(4610));
        assert!(analysis.problems.is_empty());

        let finding = json!({"claim": x(300), "source_ids": vec![x(64); 5]});
        let instance = json!({"findings": vec![finding; 6], "gaps": vec![x(200); 3]});
        assert_eq!(chars(&instance), 4610);
    }

    #[test]
    fn schemars_style_option_string() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Answer",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "inline": {"type": ["string", "null"], "maxLength": 50},
                "referenced": {"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]}
            },
            "required": ["inline"],
            "$defs": {"X": {"type": "string", "maxLength": 50}}
        });
        let analysis = analyze(&schema);
        let instance = json!({"inline": x(50), "referenced": x(50)});
        assert_eq!(analysis.worst_case_chars, Some(chars(&instance)));
        assert_eq!(analysis.worst_case_chars, Some(2 + 9 + 52 + 1 + 13 + 52));
    }
}
