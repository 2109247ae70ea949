//! The names a model sees: `mcp__SERVER__TOOL`, as Claude Code spells them.

use super::PREFIX;

/// Characters outside `[A-Za-z0-9_-]` become `_`.
fn sanitise(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `mcp__SERVER`: what a spec names to get every tool of `server`.
pub fn server_prefix(server: &str) -> String {
    format!("{PREFIX}{}", sanitise(server))
}

/// The tool name a model sees for `tool` of `server`: `mcp__SERVER__TOOL`, sanitised, and past
/// 64 characters cut to 55 and suffixed with `-` and 8 hex digits of a hash of the full name,
/// so two long names that share a beginning stay apart.
pub fn tool_name(server: &str, tool: &str) -> String {
    let full = format!("{}__{}", server_prefix(server), sanitise(tool));
    if full.len() <= 64 {
        return full;
    }
    // The hash of the unsanitised pair: `a.b` and `a_b` differ here even though both
    // sanitise to `a_b`.
    let hash = crate::json::fnv1a(format!("{server}\0{tool}").as_bytes());
    // All ASCII after sanitising, so any byte index is a char boundary.
    format!("{}-{:08x}", &full[..55], hash as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_and_bounded() {
        assert_eq!(tool_name("fs", "read_text_file"), "mcp__fs__read_text_file");
        assert_eq!(tool_name("my server", "a.b/c"), "mcp__my_server__a_b_c");
        let long = "x".repeat(100);
        let a = tool_name("s", &long);
        let b = tool_name("s", &format!("{long}y"));
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(crate::tool::is_valid_name(&a));
    }
}
