#![doc = include_str!("../docs/check.md")]

mod budget;
mod catalog;
pub mod compat;
pub mod render;

pub use crate::diag::{codes, Diagnostic, Severity};
pub use catalog::{load_catalogue, CatalogueTool};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::act::{ACTING_TOOLS, ACT_TOOLS};
use crate::ctx::DEFAULT_MAX_DEPTH;
use crate::diag::{LineIndex, Pos};
use crate::ground::GroundKind;
use crate::model::PriceTable;
use crate::spec::file::{parse_spec, parse_spec_file, RawSpec};
use crate::spec::{spec_files, SpecProblem, SubAgentSpec};
use crate::tool::workspace::BUILTIN_TOOLS;

/// What a check run may assume beyond the spec files themselves.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Tools declared outside the spec set (`--tools FILE`), which specs may name.
    pub catalogue: Vec<CatalogueTool>,
    /// Deepest sub-agent depth allowed (host = 0); a spec called by the host is at depth 1.
    pub max_depth: u32,
    /// Whether warnings fail the run too.
    pub deny_warnings: bool,
    /// Models (`provider:model`) the specs that name none will run on: each spec's first model
    /// call is priced on them, and on a spec's own model, against its `max_cost_usd`
    /// (`call-over-budget`).
    pub models: Vec<String>,
    /// The prices those calls are priced at (default: the built-in table).
    pub prices: PriceTable,
    /// The tools the MCP servers of a config offer (`check --mcp-config`): with it, an
    /// `mcp__…` name no server offers is `unknown-tool`; without it, `mcp-unchecked`.
    pub mcp: Option<McpListing>,
}

/// What the servers of an MCP config offer, as listed by starting them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpListing {
    /// The config file, for messages.
    pub file: String,
    /// Each server's group name (`mcp__SERVER`), which a spec names for all its tools.
    pub groups: Vec<String>,
    /// Each tool: its model-facing name (`mcp__SERVER__TOOL`) and its server's group name.
    pub tools: Vec<(String, String)>,
}

impl McpListing {
    /// The listing of the servers whose groups are `groups` (each `mcp__SERVER`, a server
    /// with no tools included) from the tools they offer, each of which names its group.
    pub fn new(
        file: impl Into<String>,
        groups: impl IntoIterator<Item = String>,
        tools: &[Arc<dyn crate::tool::Tool>],
    ) -> Self {
        McpListing {
            file: file.into(),
            groups: groups.into_iter().collect(),
            tools: tools
                .iter()
                .filter_map(|t| Some((t.name().to_owned(), t.group()?.to_owned())))
                .collect(),
        }
    }

    /// Whether `name` is a listed tool or server group.
    fn knows(&self, name: &str) -> bool {
        self.groups.iter().any(|g| g == name) || self.tools.iter().any(|(t, _)| t == name)
    }

    /// The group of a listed tool.
    fn group_of(&self, tool: &str) -> Option<&str> {
        self.tools
            .iter()
            .find(|(t, _)| t == tool)
            .map(|(_, g)| g.as_str())
    }
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            catalogue: Vec::new(),
            max_depth: DEFAULT_MAX_DEPTH,
            deny_warnings: false,
            models: Vec::new(),
            prices: PriceTable::builtin(),
            mcp: None,
        }
    }
}

/// Why a check could not run at all (as opposed to finding violations): exit code 2.
#[derive(thiserror::Error)]
pub enum CheckError {
    /// A path given to check does not exist or cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The `--tools` catalogue is unreadable or malformed.
    #[error("tool catalogue {path}: {message}")]
    Catalogue {
        /// The catalogue's path.
        path: String,
        /// What is wrong.
        message: String,
    },
}

crate::debug_as_display!(CheckError);

/// The outcome of a check run.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// Every finding, sorted by file, line and column.
    pub diagnostics: Vec<Diagnostic>,
    /// How many spec files were checked.
    pub specs_checked: usize,
    /// Whether warnings count as failures (copied from [`CheckOptions::deny_warnings`]).
    pub deny_warnings: bool,
    /// Source text of each file checked, to show the offending lines.
    sources: HashMap<String, Arc<LineIndex>>,
}

impl CheckReport {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// Errors found.
    pub fn error_count(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }

    /// Warnings found.
    pub fn warning_count(&self) -> usize {
        let warning = |d: &&Diagnostic| d.severity == Severity::Warning;
        self.diagnostics.iter().filter(warning).count()
    }

    /// Whether the run fails: any error, or any warning under `deny_warnings` (notes never).
    pub fn failed(&self) -> bool {
        self.has_errors() || (self.deny_warnings && self.warning_count() > 0)
    }

    /// The text of `line` in `file`, when the file was read by this run.
    pub fn line_text(&self, file: &str, line: u32) -> Option<&str> {
        self.sources.get(file)?.line_text(line)
    }
}

/// Checks every `*.toml` spec under `paths` (files or directories, searched recursively) as
/// one set. I/O failures (a missing path, an unreadable file) are errors; everything wrong
/// with the specs themselves is a diagnostic in the report.
pub fn check_paths(paths: &[PathBuf], opts: &CheckOptions) -> Result<CheckReport, CheckError> {
    let mut files = Vec::new();
    for p in paths {
        let found = spec_files(p).map_err(|source| CheckError::Io {
            path: p.display().to_string(),
            source,
        })?;
        files.extend(found);
    }
    files.sort();
    files.dedup();

    let mut set = SetBuilder::default();
    for f in &files {
        let io = |source| CheckError::Io {
            path: f.display().to_string(),
            source,
        };
        let bytes = std::fs::read(f).map_err(io)?;
        match String::from_utf8(bytes) {
            Ok(src) => set.add(f, &src),
            // Reuse the parser's own diagnostic for the first invalid byte.
            Err(e) => {
                let (raw, diags) = parse_spec_file(f).map_err(io)?;
                set.add_parsed(f, raw, diags, &String::from_utf8_lossy(e.as_bytes()));
            }
        }
    }
    Ok(set.finish(opts))
}

/// Checks specs given as already-read text (path, source): what [`check_paths`] does after
/// reading the files. Useful for tests and for tools that hold specs in memory.
pub fn check_sources(sources: &[(PathBuf, String)], opts: &CheckOptions) -> CheckReport {
    let mut set = SetBuilder::default();
    for (path, src) in sources {
        set.add(path, src);
    }
    set.finish(opts)
}

/// Accumulates per-file results, then runs the set-wide checks.
#[derive(Default)]
struct SetBuilder {
    parsed: Vec<RawSpec>,
    /// The specs that built, by index into `parsed`.
    built: Vec<(usize, SubAgentSpec<Value, Value>)>,
    diagnostics: Vec<Diagnostic>,
    sources: HashMap<String, Arc<LineIndex>>,
    files: usize,
}

impl SetBuilder {
    fn add(&mut self, path: &Path, src: &str) {
        let (raw, diags) = parse_spec(path, src);
        self.add_parsed(path, raw, diags, src);
    }

    fn add_parsed(
        &mut self,
        path: &Path,
        raw: Option<RawSpec>,
        mut diags: Vec<Diagnostic>,
        src: &str,
    ) {
        self.files += 1;
        if let Some(raw) = &raw {
            match check_raw(raw, &diags) {
                Ok(spec) => self.built.push((self.parsed.len(), spec)),
                Err(found) => diags.extend(found),
            }
            diags.extend(contract_findings(raw));
        }
        // Kept for every file: set-wide findings (a duplicate name) may point into a file
        // that had no findings of its own, and human output shows the offending line.
        self.sources
            .insert(path.display().to_string(), Arc::new(LineIndex::new(src)));
        self.diagnostics.extend(diags);
        self.parsed.extend(raw);
    }

    fn finish(mut self, opts: &CheckOptions) -> CheckReport {
        self.diagnostics.extend(check_set(&self.parsed, opts));
        let built: Vec<_> = self
            .built
            .iter()
            .map(|(i, spec)| (&self.parsed[*i], spec))
            .collect();
        self.diagnostics
            .extend(budget::call_over_budget(&built, opts));
        self.diagnostics
            .sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
        CheckReport {
            diagnostics: self.diagnostics,
            specs_checked: self.files,
            deny_warnings: opts.deny_warnings,
            sources: self.sources,
        }
    }
}

/// Where the builder's problems point: into a spec file, or (for a spec declared in Rust) at
/// nothing more precise than the spec itself.
struct Locator<'a> {
    file: String,
    spec: Option<String>,
    raw: Option<&'a RawSpec>,
}

impl Locator<'_> {
    fn problem(&self, p: &SpecProblem) -> Diagnostic {
        let pos = self.raw.map_or(Pos::START, |r| r.locate(&p.at));
        self.diag(pos, Severity::Error, p.code, p.message.clone())
    }

    fn diag(&self, pos: Pos, severity: Severity, code: &str, message: String) -> Diagnostic {
        let mut d = match severity {
            Severity::Error => Diagnostic::error(self.file.clone(), pos, code, message),
            Severity::Warning => Diagnostic::warning(self.file.clone(), pos, code, message),
            Severity::Info => Diagnostic::info(self.file.clone(), pos, code, message),
        };
        d.spec = self.spec.clone();
        d
    }
}

/// Builds one parsed spec file, the same way `load_spec` does: the spec, or every problem the
/// builder finds that the file layer has not already reported at the same place (an invalid
/// name or an empty description is found by both).
fn check_raw(
    raw: &RawSpec,
    parsed: &[Diagnostic],
) -> Result<SubAgentSpec<Value, Value>, Vec<Diagnostic>> {
    let e = match crate::spec::load::builder(raw).build() {
        Ok(spec) => return Ok(spec),
        Err(e) => e,
    };
    let loc = Locator {
        file: raw.path.display().to_string(),
        spec: crate::tool::is_valid_name(&raw.def.name).then(|| raw.def.name.clone()),
        raw: Some(raw),
    };
    Err(e
        .problems
        .iter()
        .map(|p| loc.problem(p))
        .filter(|d| {
            !parsed
                .iter()
                .any(|q| q.code == d.code && q.pos() == d.pos())
        })
        .collect())
}

/// Contracts that can never hold, or that do not say what their author meant: a `required`
/// property a closed object forbids, a keyword JSON Schema does not know (`maxLenght`).
fn contract_findings(raw: &RawSpec) -> Vec<Diagnostic> {
    let loc = Locator {
        file: raw.path.display().to_string(),
        spec: crate::tool::is_valid_name(&raw.def.name).then(|| raw.def.name.clone()),
        raw: Some(raw),
    };
    let mut out = lint_diagnostics(&loc, "input", &raw.input.value, |at| {
        raw.positions.locate_pointer("input", at)
    });
    out.extend(lint_diagnostics(&loc, "output", &raw.output.value, |at| {
        raw.positions.locate_pointer("output", at)
    }));
    out
}

/// [`lint`](crate::contract::analysis::lint)'s findings in one schema, as errors placed by
/// `pos` (given the pointer to the keyword or `required` entry).
fn lint_diagnostics(
    loc: &Locator<'_>,
    which: &str,
    schema: &Value,
    pos: impl Fn(&str) -> Pos,
) -> Vec<Diagnostic> {
    crate::contract::analysis::lint(schema)
        .into_iter()
        .map(|f| {
            let message = format!("{which}{}: {}", f.schema_path, f.message);
            loc.diag(pos(&f.at), Severity::Error, f.kind.code(), message)
        })
        .collect()
}

impl<I, O> SubAgentSpec<I, O> {
    /// The contract checks of `subcontract check`, on a spec built in Rust: an unbounded or
    /// too-large output (possible with `allow_unbounded_output`), examples that do not
    /// validate, unknown schema keywords and `required` properties a closed object forbids,
    /// and a warning when there are no examples. Diagnostics name the spec in place
    /// of a file, at line 1, column 1.
    ///
    /// ```
    /// use serde_json::json;
    /// use subcontract::SubAgentSpec;
    ///
    /// let spec = SubAgentSpec::dynamic(
    ///     "echo",
    ///     json!({"type": "object"}),
    ///     json!({"type": "string", "maxLength": 10}),
    /// )
    /// .description("Echoes.")
    /// .system("Echo.")
    /// .example(json!({}), json!("hi"))
    /// .build()
    /// .unwrap();
    /// assert!(spec.check().is_empty());
    /// ```
    pub fn check(&self) -> Vec<Diagnostic> {
        let loc = Locator {
            file: format!("<spec {}>", self.name()),
            spec: Some(self.name().to_string()),
            raw: None,
        };
        let mut out: Vec<Diagnostic> = self
            .contract_problems()
            .iter()
            .map(|p| loc.problem(p))
            .collect();
        for (which, contract) in [
            ("input", self.input_contract()),
            ("output", self.output_contract()),
        ] {
            out.extend(lint_diagnostics(&loc, which, contract.schema(), |_| {
                Pos::START
            }));
        }
        if self.examples().is_empty() {
            out.push(loc.diag(
                Pos::START,
                Severity::Warning,
                codes::NO_EXAMPLES,
                "the spec has no examples, so its contracts are checked against nothing".into(),
            ));
        }
        out
    }
}

/// Checks across the set: duplicate names, unknown tools, call cycles, too-deep chains.
fn check_set(specs: &[RawSpec], opts: &CheckOptions) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let file = |r: &RawSpec| r.path.display().to_string();
    let err = |r: &RawSpec, pos: Pos, code: &str, message: String| {
        let mut d = Diagnostic::error(file(r), pos, code, message);
        d.spec = crate::tool::is_valid_name(&r.def.name).then(|| r.def.name.clone());
        d
    };

    // Names: the first file (in path order) owns a name for the call graph.
    let mut by_name: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, r) in specs.iter().enumerate() {
        if crate::tool::is_valid_name(&r.def.name) {
            by_name.entry(r.def.name.as_str()).or_default().push(i);
        }
    }
    for (name, idx) in &by_name {
        if idx.len() < 2 {
            continue;
        }
        for &i in idx {
            let others: Vec<String> = idx
                .iter()
                .filter(|&&j| j != i)
                .map(|&j| {
                    let o = &specs[j];
                    format!("{}:{}", file(o), o.at.name)
                })
                .collect();
            out.push(err(
                &specs[i],
                specs[i].at.name,
                codes::DUPLICATE_NAME,
                format!(
                    "spec name `{name}` is also used by {}; tool names must be unique",
                    others.join(", ")
                ),
            ));
        }
    }

    // Tools, and the call graph between specs.
    let catalogue: HashSet<&str> = opts.catalogue.iter().map(|t| t.name.as_str()).collect();
    let node_of: HashMap<&str, usize> = by_name.iter().map(|(n, idx)| (*n, idx[0])).collect();
    let mut known: Vec<&str> = BUILTIN_TOOLS
        .iter()
        .chain(ACT_TOOLS.iter())
        .copied()
        .chain(node_of.keys().copied())
        .chain(catalogue.iter().copied())
        .chain(opts.mcp.iter().flat_map(|l| {
            l.groups
                .iter()
                .map(String::as_str)
                .chain(l.tools.iter().map(|(t, _)| t.as_str()))
        }))
        .collect();
    // Sorted, so a tie between suggestions is broken the same way every run.
    known.sort_unstable();
    // edges[i] = (callee, index into specs[i].tools)
    let mut edges: Vec<Vec<(usize, usize)>> = vec![Vec::new(); specs.len()];
    for (i, r) in specs.iter().enumerate() {
        for (k, (name, &pos)) in r.def.tools.iter().zip(&r.at.tools).enumerate() {
            let name = name.as_str();
            if ACTING_TOOLS.contains(&name)
                && !r.def.workspace.acts()
                && !catalogue.contains(name)
                && !node_of.contains_key(name)
            {
                out.push(err(
                    r,
                    pos,
                    codes::ACTING_WITHOUT_ISOLATION,
                    format!(
                        "`{name}` acts on files, so the spec needs a working copy of its own: \
                         add [workspace] with isolation = \"worktree\" (a git worktree at the \
                         parent's state) or \"copy\""
                    ),
                ));
            }
            // Only the built-in tools (and sub-agents, from the run's copy) move to an acting
            // run's copy; a host's own tool or an MCP server's works where it was made.
            if r.def.workspace.acts()
                && (catalogue.contains(name) || name.starts_with("mcp__"))
                && !BUILTIN_TOOLS.contains(&name)
                && !ACT_TOOLS.contains(&name)
                && !node_of.contains_key(name)
            {
                let mut d = err(
                    r,
                    pos,
                    codes::TOOL_OUTSIDE_COPY,
                    format!(
                        "`{name}` does not work in this run's copy (only the built-in tools and \
                         sub-agents do): it sees the files its host or server sees, the \
                         parent's included, and what it writes there is not a change the parent \
                         accepts; give an acting spec only such tools that write nothing"
                    ),
                );
                d.severity = crate::diag::Severity::Warning;
                out.push(d);
            }
            if let Some(&j) = node_of.get(name) {
                edges[i].push((j, k));
            } else if catalogue.contains(name) {
                // Declared in the catalogue.
            } else if let (true, Some(listing)) = (name.starts_with("mcp__"), &opts.mcp) {
                if !listing.knows(name) {
                    let mut message = format!(
                        "unknown tool `{name}`: no server of the MCP config {} offers it \
                         (its servers: {})",
                        listing.file,
                        if listing.groups.is_empty() {
                            "none".to_string()
                        } else {
                            listing.groups.join(", ")
                        }
                    );
                    if let Some(best) = crate::spec::file::suggest(name, &known) {
                        message.push_str(&format!("; did you mean `{best}`?"));
                    }
                    out.push(err(r, pos, codes::UNKNOWN_TOOL, message));
                }
            } else if name.starts_with("mcp__") && !catalogue.iter().any(|t| t.starts_with("mcp__"))
            {
                // No server's tools were listed: whether one offers it is unknown, which is
                // neither an error nor a pass.
                let mut d = err(
                    r,
                    pos,
                    codes::MCP_UNCHECKED,
                    format!(
                        "`{name}` is a tool of an MCP server; no server's tools were listed \
                         (pass --mcp-config, or put a .mcp.json beside the specs), so check \
                         cannot know whether it exists"
                    ),
                );
                d.severity = crate::diag::Severity::Warning;
                out.push(d);
            } else if !BUILTIN_TOOLS.contains(&name)
                && !ACT_TOOLS.contains(&name)
                && !catalogue.contains(name)
            {
                let mut message = format!(
                    "unknown tool `{name}`: not a built-in tool ({}, {}), not a spec in this \
                     set, and not in the tool catalogue (declare it in a file given with --tools)",
                    BUILTIN_TOOLS.join(", "),
                    ACT_TOOLS.join(", ")
                );
                if let Some(best) = crate::spec::file::suggest(name, &known) {
                    message.push_str(&format!("; did you mean `{best}`?"));
                }
                out.push(err(r, pos, codes::UNKNOWN_TOOL, message));
            }
        }
    }

    // Grounded sources: a spec that grounds a value as `"source"` needs a tool that consults
    // one (the built-in readers, an MCP tool, a catalogue tool, a spec that grounds sources
    // itself), or no value could ever hold.
    let grounding: Vec<Option<crate::ground::Grounding>> = specs
        .iter()
        .map(|r| {
            crate::ground::Grounding::of_schema(&r.output.value)
                .ok()
                .flatten()
        })
        .collect();
    let grounds_sources = |g: &Option<crate::ground::Grounding>| {
        g.as_ref().is_some_and(|g| g.grounds(GroundKind::Source))
    };
    for (i, r) in specs.iter().enumerate() {
        if !grounds_sources(&grounding[i]) {
            continue;
        }
        let consults = r.def.tools.iter().any(|name| {
            let name = name.as_str();
            matches!(name, "read_file" | "grep")
                || name.starts_with("mcp__")
                || catalogue.contains(name)
                || node_of
                    .get(name)
                    .is_some_and(|&j| grounds_sources(&grounding[j]))
        });
        if consults {
            continue;
        }
        for (at, kind) in grounding[i].iter().flat_map(|g| g.marks()) {
            if kind != GroundKind::Source {
                continue;
            }
            let pos = r.locate(&crate::spec::SpecLocation::Schema {
                which: "output",
                pointer: at.to_owned(),
            });
            out.push(err(
                r,
                pos,
                codes::INVALID_GROUNDING,
                format!(
                    "`x-grounded = \"source\"`, but none of `{}`'s tools can consult a source \
                     (read_file, grep, an MCP tool, a catalogue tool, or a spec that grounds \
                     sources): no value could ever hold; add such a tool, or ground it as \
                     \"text\"",
                    r.def.name
                ),
            ));
        }
    }

    // Cycles: an edge i → j is on a cycle when j leads back to i.
    let names = |path: &[usize]| {
        path.iter()
            .map(|&n| specs[n].def.name.as_str())
            .collect::<Vec<_>>()
            .join(" → ")
    };
    let mut in_cycle = vec![false; specs.len()];
    for (i, es) in edges.iter().enumerate() {
        for &(j, k) in es {
            if let Some(path) = find_path(&edges, j, i) {
                in_cycle[i] = true;
                let mut full = vec![i];
                full.extend(path);
                out.push(err(
                    &specs[i],
                    specs[i].at.tools[k],
                    codes::CALL_CYCLE,
                    format!(
                        "`{}` calls `{}`, which leads back to it: {}",
                        specs[i].def.name,
                        specs[j].def.name,
                        names(&full)
                    ),
                ));
            }
        }
    }

    // Capabilities never widen: a spec can only spawn a spec whose tools it holds itself.
    for (i, es) in edges.iter().enumerate() {
        for &(j, k) in es {
            if in_cycle[i] && in_cycle[j] {
                continue; // already a call-cycle error
            }
            let held: HashSet<&str> = specs[i].def.tools.iter().map(String::as_str).collect();
            let missing: Vec<&str> = specs[j]
                .def
                .tools
                .iter()
                .map(String::as_str)
                .filter(|t| !holds(&held, t, opts.mcp.as_ref()))
                .collect();
            if !missing.is_empty() {
                out.push(err(
                    &specs[i],
                    specs[i].at.tools[k],
                    codes::TOOL_NOT_HELD,
                    format!(
                        "`{}` calls `{}`, which uses {}; `{}` does not hold {}: add {} to its \
                         tools (a sub-agent's tools must all be held by its caller)",
                        specs[i].def.name,
                        specs[j].def.name,
                        quoted(&missing),
                        specs[i].def.name,
                        if missing.len() == 1 { "it" } else { "them" },
                        if missing.len() == 1 { "it" } else { "them" },
                    ),
                ));
            }
        }
    }

    // Depth: a spec the host calls runs at depth 1; each spec it calls one deeper.
    let max_depth = opts.max_depth as usize;
    let mut memo: Vec<Option<Vec<usize>>> = vec![None; specs.len()];
    for i in 0..specs.len() {
        if in_cycle[i] {
            continue;
        }
        let chain = longest_chain(&edges, &in_cycle, i, &mut memo);
        if chain.len() > max_depth {
            // Point at the call that starts the long chain.
            let next = chain[1];
            let pos = edges[i]
                .iter()
                .find(|(j, _)| *j == next)
                .map_or(specs[i].at.name, |&(_, k)| specs[i].at.tools[k]);
            out.push(err(
                &specs[i],
                pos,
                codes::TOO_DEEP,
                format!(
                    "called by a host, `{}` reaches sub-agent depth {} ({}), deeper than the \
                     limit of {max_depth}",
                    specs[i].def.name,
                    chain.len(),
                    names(&chain)
                ),
            ));
        }
    }
    out
}

/// Whether a caller holding `held` holds `tool`: by its name, or, for an MCP tool, by its
/// server's group (`mcp__SERVER` holds every `mcp__SERVER__*`). With a listing the group is
/// the tool's own; without one it is read from the name, as a spec names it.
fn holds(held: &HashSet<&str>, tool: &str, mcp: Option<&McpListing>) -> bool {
    if held.contains(tool) {
        return true;
    }
    if !tool.starts_with("mcp__") {
        return false;
    }
    match mcp.and_then(|l| l.group_of(tool)) {
        Some(group) => held.contains(group),
        None => held.iter().any(|g| {
            g.starts_with("mcp__")
                && tool
                    .strip_prefix(*g)
                    .is_some_and(|rest| rest.len() > 2 && rest.starts_with("__"))
        }),
    }
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A path from `from` to `to` (both included), by breadth-first search.
fn find_path(edges: &[Vec<(usize, usize)>], from: usize, to: usize) -> Option<Vec<usize>> {
    let mut parent: HashMap<usize, usize> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([from]);
    let mut seen = HashSet::from([from]);
    while let Some(n) = queue.pop_front() {
        if n == to {
            let mut path = vec![n];
            let mut cur = n;
            while let Some(&p) = parent.get(&cur) {
                path.push(p);
                cur = p;
            }
            path.reverse();
            return Some(path);
        }
        for &(m, _) in &edges[n] {
            if seen.insert(m) {
                parent.insert(m, n);
                queue.push_back(m);
            }
        }
    }
    None
}

/// The longest call chain starting at `i` (including `i`), ignoring specs on cycles (those
/// are reported as cycles). Iterative post-order, so a long chain cannot overflow the stack.
fn longest_chain(
    edges: &[Vec<(usize, usize)>],
    in_cycle: &[bool],
    i: usize,
    memo: &mut [Option<Vec<usize>>],
) -> Vec<usize> {
    let mut stack = vec![(i, false)];
    while let Some((n, expanded)) = stack.pop() {
        if memo[n].is_some() {
            continue;
        }
        let callees = edges[n].iter().map(|&(j, _)| j).filter(|&j| !in_cycle[j]);
        if !expanded {
            stack.push((n, true));
            for j in callees {
                if memo[j].is_none() {
                    stack.push((j, false));
                }
            }
        } else {
            let best = callees
                .filter_map(|j| memo[j].as_ref())
                .max_by_key(|c| c.len())
                .cloned()
                .unwrap_or_default();
            let mut chain = Vec::with_capacity(best.len() + 1);
            chain.push(n);
            chain.extend(best);
            memo[n] = Some(chain);
        }
    }
    memo[i].clone().unwrap_or_else(|| vec![i])
}

#[cfg(test)]
mod tests;
