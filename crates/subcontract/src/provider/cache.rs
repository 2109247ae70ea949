//! Prompt caching: the providers' caches hold the stable prefix of a request (the tools and
//! the system prompt, then the conversation so far), so a sub-agent's later turns, and its
//! siblings of one spec, read it back at a fraction of the input price.
//!
//! - **Anthropic**: `cache_control` breakpoints on the last tool (caching every tool), on the
//!   system prompt, on the latest message's last block, so each turn reads the turns before
//!   it, and where the call before put that one (the API looks back only 20 blocks from a
//!   breakpoint, and a turn of many tool calls adds more): four breakpoints, the most the API
//!   accepts. A prefix shorter than the model's minimum is not cached, and the breakpoints
//!   cost nothing then.
//! - **OpenAI-compatible**: OpenAI caches prefixes of 1,024 tokens and more by itself; a
//!   `prompt_cache_key` derived from the tools and the system prompt
//!   ([`prefix_key`]) routes every call of one spec to the same cache. Servers that do not
//!   know the field ignore it.
//!
//! The prefix is byte-stable: tools are sent in the order offered and serialised the same way
//! on every turn, and nothing per run is added to it here.

use std::hash::Hasher;
use std::io::Write;

pub use crate::model::PromptCache;
use crate::model::ToolDefinition;

/// A key naming the prefix `system` and `tools` make: the same for every call that sends
/// them, whatever the process, and different when either changes (a 64-bit FNV-1a hash).
pub(super) fn prefix_key(system: &str, tools: &[ToolDefinition]) -> String {
    let mut h = HashWriter(fnv::FnvHasher::default());
    // Lengths first, so that no two different inputs write the same bytes.
    let mut part = |bytes: &[u8]| {
        h.0.write_u64(bytes.len() as u64);
        h.0.write(bytes);
    };
    part(system.as_bytes());
    for t in tools {
        part(t.name.as_bytes());
        part(t.description.as_bytes());
    }
    for t in tools {
        // Written into the hash as serialised, with no copy of the schema's text.
        let _ = serde_json::to_writer(&mut h, &*t.input_schema);
        h.0.write_u8(0xff);
    }
    format!("subcontract-{:016x}", h.0.finish())
}

/// Feeds what is written into a hasher.
struct HashWriter(fnv::FnvHasher);

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn tool(name: &str, schema: serde_json::Value) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: "d".into(),
            input_schema: Arc::new(schema),
        }
    }

    #[test]
    fn the_key_follows_the_prefix_and_nothing_else() {
        let tools = vec![tool("read_file", json!({"type": "object"}))];
        let key = prefix_key("SYSTEM", &tools);
        assert!(key.starts_with("subcontract-") && key.len() == 28, "{key}");
        // Stable: the same inputs, here and in any other process, give the same key.
        assert_eq!(key, prefix_key("SYSTEM", &tools.clone()));
        assert_eq!(
            prefix_key("", &[]),
            format!("subcontract-{:016x}", {
                let mut h = fnv::FnvHasher::default();
                h.write_u64(0);
                h.finish()
            })
        );
        for other in [
            prefix_key("SYSTEM2", &tools),
            prefix_key("SYSTEM", &[]),
            prefix_key("SYSTEM", &[tool("read_file", json!({"type": "string"}))]),
            prefix_key("SYSTEM", &[tool("grep", json!({"type": "object"}))]),
            // The boundary between parts counts.
            prefix_key("SYSTEMread_file", &[tool("", json!({"type": "object"}))]),
        ] {
            assert_ne!(key, other);
        }
    }

    #[test]
    fn settings_parse() {
        assert_eq!("off".parse(), Ok(PromptCache::Off));
        assert_eq!(" 5m ".parse(), Ok(PromptCache::FiveMinutes));
        assert!("5 minutes".parse::<PromptCache>().is_err());
    }
}
