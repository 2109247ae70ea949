//! A set of tools by name, with each tool's argument schema compiled once.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::{is_valid_name, Tool};
use crate::contract::{Contract, Violation};
use crate::model::ToolDefinition;

/// Why a tool could not be added to a set.
#[derive(Clone, PartialEq, thiserror::Error)]
pub enum ToolSetError {
    /// The name is not `[A-Za-z0-9_-]{1,64}`.
    #[error("invalid tool name `{0}`: use 1 to 64 of A-Z a-z 0-9 _ -")]
    InvalidName(String),
    /// Another tool has the same name.
    #[error("duplicate tool name `{0}`")]
    Duplicate(String),
    /// The name is reserved by the run loop.
    #[error("tool name `{0}` is reserved")]
    Reserved(String),
    /// Its input schema does not compile.
    #[error("tool `{name}`: invalid input schema: {message}")]
    InvalidSchema {
        /// The tool.
        name: String,
        /// The compiler's message.
        message: String,
    },
}

crate::debug_as_display!(ToolSetError);

/// A tool with its compiled argument contract and its definition for models.
#[derive(Clone)]
pub struct ToolEntry {
    pub(crate) tool: Arc<dyn Tool>,
    /// Its arguments' contract, compiled once.
    pub(crate) input: Contract,
    pub(crate) definition: ToolDefinition,
    /// Compact JSON bytes of the definition's schema, counted once for budget reservations.
    pub(crate) schema_bytes: usize,
}

impl ToolEntry {
    /// The tool.
    pub fn tool(&self) -> &Arc<dyn Tool> {
        &self.tool
    }

    /// Its definition as offered to a model.
    pub fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    /// Validates arguments against the tool's input schema.
    pub fn check_args(&self, args: &Value) -> Result<(), Vec<Violation>> {
        self.input.validate(args)
    }

    /// Whether a spec's tool list `names` grants this tool: by its name, or by its group's
    /// (`mcp__SERVER`).
    pub fn named_by(&self, names: &[String]) -> bool {
        let group = self.tool.group();
        names
            .iter()
            .any(|n| *n == *self.definition.name || group == Some(n.as_str()))
    }
}

/// Tools by name: the capabilities a context holds. Cloning is cheap (shared).
#[derive(Clone, Default)]
pub struct ToolSet {
    // Entries are shared: a child's subset costs a map of reference counts, not copies.
    tools: Arc<BTreeMap<Arc<str>, Arc<ToolEntry>>>,
}

impl std::fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl ToolSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool, compiling its input schema.
    pub fn insert(&mut self, tool: Arc<dyn Tool>) -> Result<&mut Self, ToolSetError> {
        let name = tool.name().to_string();
        if !is_valid_name(&name) {
            return Err(ToolSetError::InvalidName(name));
        }
        if name == crate::model::SUBMIT_TOOL {
            return Err(ToolSetError::Reserved(name));
        }
        if self.tools.contains_key(name.as_str()) {
            return Err(ToolSetError::Duplicate(name));
        }
        let schema = tool.input_schema();
        let input = match tool.input_contract() {
            Some(c) => c,
            None => Contract::compile(schema.clone()).map_err(|e| ToolSetError::InvalidSchema {
                name: name.clone(),
                message: e.to_string(),
            })?,
        };
        let definition = ToolDefinition {
            name: Arc::from(name.as_str()),
            description: Arc::from(tool.description()),
            input_schema: schema,
        };
        Arc::make_mut(&mut self.tools).insert(
            definition.name.clone(),
            Arc::new(ToolEntry {
                tool,
                schema_bytes: crate::json::compact_bytes(input.schema()),
                input,
                definition,
            }),
        );
        Ok(self)
    }

    /// Builder-style [`insert`](Self::insert).
    pub fn with(mut self, tool: Arc<dyn Tool>) -> Result<Self, ToolSetError> {
        self.insert(tool)?;
        Ok(self)
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&ToolEntry> {
        self.tools.get(name).map(|e| &**e)
    }

    /// Whether the set holds `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// Tool names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(|k| &**k)
    }

    /// The entries, sorted by name.
    pub fn entries(&self) -> impl Iterator<Item = &ToolEntry> {
        self.tools.values().map(|e| &**e)
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The entries `names` list, in the order they are named and each once: a tool by its
    /// name, or every tool of a group by the group's name (`mcp__SERVER`, its tools in name
    /// order); or the names this set holds nothing for.
    pub fn listed<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<Vec<&ToolEntry>, Vec<String>> {
        // The spec's order is kept: it is the order the model is offered them in.
        let mut out: Vec<&ToolEntry> = Vec::new();
        let mut seen: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
        let mut missing = Vec::new();
        for n in names {
            let named: Vec<(&Arc<str>, &Arc<ToolEntry>)> = match self.tools.get_key_value(n) {
                Some(one) => vec![one],
                None => self
                    .tools
                    .iter()
                    .filter(|(_, e)| e.tool.group() == Some(n))
                    .collect(),
            };
            // Counted, not compared by size: the group's tools may be listed already.
            if named.is_empty() {
                missing.push(n.to_string());
            }
            for (k, e) in named {
                if seen.insert(k) {
                    out.push(e);
                }
            }
        }
        if missing.is_empty() {
            Ok(out)
        } else {
            Err(missing)
        }
    }

    /// The subset named by `names` (tools or groups, as [`listed`](Self::listed)), or the
    /// names this set does not hold. Never widens: the result holds only tools of `self`.
    pub fn subset<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<ToolSet, Vec<String>> {
        let mut out = BTreeMap::new();
        for e in self.listed(names)? {
            if let Some((k, e)) = self.tools.get_key_value(&*e.definition.name) {
                out.insert(k.clone(), e.clone());
            }
        }
        Ok(ToolSet {
            tools: Arc::new(out),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use serde_json::{json, Value};

    use super::ToolSet;
    use crate::tool::{Tool, ToolOutput};
    use crate::Ctx;

    /// A tool of group `g`, if any.
    struct T(&'static str, Option<&'static str>);

    #[async_trait]
    impl Tool for T {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            "t"
        }
        fn input_schema(&self) -> Arc<Value> {
            Arc::new(json!({"type": "object"}))
        }
        fn group(&self) -> Option<&str> {
            self.1
        }
        async fn call(&self, _: Value, _: &Ctx) -> ToolOutput {
            ToolOutput::text("")
        }
    }

    fn set() -> ToolSet {
        let mut s = ToolSet::new();
        s.insert(Arc::new(T("mcp__fs__read", Some("mcp__fs"))))
            .unwrap();
        s.insert(Arc::new(T("mcp__fs__write", Some("mcp__fs"))))
            .unwrap();
        s.insert(Arc::new(T("grep", None))).unwrap();
        s
    }

    fn names(s: &ToolSet, list: &[&str]) -> Result<Vec<String>, Vec<String>> {
        s.listed(list.iter().copied())
            .map(|es| es.iter().map(|e| e.definition.name.to_string()).collect())
    }

    #[test]
    fn a_group_names_its_tools_once_even_when_one_is_named_too() {
        let s = set();
        assert_eq!(
            names(&s, &["mcp__fs__read", "mcp__fs"]),
            Ok(vec!["mcp__fs__read".into(), "mcp__fs__write".into()])
        );
        assert_eq!(names(&s, &["grep", "grep"]), Ok(vec!["grep".into()]));
        // In the order named: the order the model is offered them in.
        assert_eq!(
            names(&s, &["grep", "mcp__fs__write", "mcp__fs"]),
            Ok(vec![
                "grep".into(),
                "mcp__fs__write".into(),
                "mcp__fs__read".into()
            ])
        );
        assert_eq!(
            names(&s, &["mcp__fs__read", "mcp__git"]),
            Err(vec!["mcp__git".into()])
        );
        // A subset never widens: a group of the parent's is not a group the child lacks.
        let child = s.subset(["mcp__fs__read"]).unwrap();
        assert_eq!(
            names(&child, &["mcp__fs"]),
            Ok(vec!["mcp__fs__read".into()])
        );
        assert_eq!(names(&child, &["grep"]), Err(vec!["grep".into()]));
    }
}
