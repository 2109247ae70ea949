//! The `--tools FILE` catalogue: tools a host provides besides the built-in workspace tools and
//! the specs themselves (`src/docs/specs.md`), so specs may name them.
//!
//! ```toml
//! [[tool]]
//! name = "web_search"
//! description = "Search the web."
//! input = { type = "object", properties = { q = { type = "string" } } }
//! ```

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use super::CheckError;
use crate::contract::Contract;
use crate::tool::is_valid_name;

/// One tool declared in a catalogue.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogueTool {
    /// The tool name specs use.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// Its input JSON Schema, when given.
    #[serde(default)]
    pub input: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Catalogue {
    #[serde(default)]
    tool: Vec<CatalogueTool>,
}

/// Reads a catalogue file. Unreadable or malformed catalogues are errors (exit code 2): the
/// check cannot say which tools exist without it.
pub fn load_catalogue(path: &Path) -> Result<Vec<CatalogueTool>, CheckError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| CheckError::Io {
        path: shown.clone(),
        source,
    })?;
    parse_catalogue(&shown, &text)
}

fn parse_catalogue(shown: &str, text: &str) -> Result<Vec<CatalogueTool>, CheckError> {
    let bad = |message: String| CheckError::Catalogue {
        path: shown.to_string(),
        message,
    };
    let cat: Catalogue = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
    for t in &cat.tool {
        if !is_valid_name(&t.name) {
            return Err(bad(format!(
                "invalid tool name `{}`: use 1 to 64 of A-Z a-z 0-9 _ -",
                t.name
            )));
        }
        if let Some(input) = &t.input {
            Contract::compile(Arc::new(input.clone()))
                .map_err(|e| bad(format!("tool `{}`: input schema: {e}", t.name)))?;
        }
    }
    Ok(cat.tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tools_and_refuses_unknown_keys() {
        let tools = parse_catalogue(
            "c.toml",
            "[[tool]]\nname = \"web_search\"\ndescription = \"d\"\ninput = { type = \"object\" }\n",
        )
        .unwrap();
        assert_eq!(tools[0].name, "web_search");
        assert_eq!(tools[0].input, Some(serde_json::json!({"type": "object"})));
        assert!(parse_catalogue("c", "[[tool]]\nname = \"x\"\ncolour = 1\n").is_err());
        assert!(parse_catalogue("c", "[[tool]]\nname = \"a b\"\n").is_err());
        assert!(parse_catalogue("c", "").unwrap().is_empty());
        let bad_schema = "[[tool]]\nname = \"x\"\ninput = { type = 5 }\n";
        assert!(parse_catalogue("c", bad_schema).is_err());
    }
}
