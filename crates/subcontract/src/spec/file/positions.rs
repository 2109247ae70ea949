//! Where every key of a spec file was written, so diagnostics about schema locations and
//! limits can point at source lines.

use std::collections::HashMap;

use toml::de::{DeTable, DeValue};

use crate::diag::{LineIndex, Pos};

/// Where every key (and array element) of a spec file was written, by path from the document
/// root, so later stages can point diagnostics about schema locations at source lines.
///
/// Paths are key names and decimal array indices: `["output", "properties", "findings"]`,
/// `["examples", "0", "output"]`. A table entry's position is its *key*'s (the last segment of a
/// dotted key, or the name in a `[table.header]`); an array element's is the element's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PositionMap {
    /// Node 0 is the document root.
    pos: Vec<Pos>,
    /// (parent node, segment) → child node. A flat map rather than a tree of maps, so building
    /// and dropping it never recurses, whatever the nesting.
    children: HashMap<(usize, String), usize>,
}

impl PositionMap {
    /// Position of the key (or array element) at `path`; the empty path is the document start.
    pub(crate) fn locate(&self, path: &[&str]) -> Option<Pos> {
        let mut node = 0;
        for seg in path {
            node = self.child(node, seg)?;
        }
        self.pos.get(node).copied()
    }

    /// Position of a JSON Pointer (RFC 6901, `~0`/`~1` unescaped, a leading `#` allowed) into
    /// the top-level table `table`, e.g. `("output", "/properties/findings/items")`.
    ///
    /// Falls back to the nearest ancestor that exists, so a schema location that was produced
    /// by defaults rather than written still points at the closest line; when `table` itself is
    /// absent this is the start of the file.
    pub(crate) fn locate_pointer(&self, table: &str, pointer: &str) -> Pos {
        let Some(mut node) = self.child(0, table) else {
            return Pos::START;
        };
        let pointer = pointer.strip_prefix('#').unwrap_or(pointer);
        for seg in crate::json::pointer::tokens(pointer) {
            match self.child(node, &seg) {
                Some(next) => node = next,
                None => break,
            }
        }
        self.pos[node]
    }

    fn child(&self, node: usize, seg: &str) -> Option<usize> {
        self.children.get(&(node, seg.to_owned())).copied()
    }

    pub(super) fn build(root: &DeTable<'_>, index: &LineIndex) -> Self {
        let mut map = PositionMap {
            pos: vec![Pos::START],
            children: HashMap::new(),
        };
        // Explicit stack: nesting is bounded by toml's recursion limit, but this stays
        // correct (and stack-safe) even if that limit changes.
        let mut stack: Vec<(usize, &DeValue<'_>)> = Vec::new();
        map.expand_table(0, root, index, &mut stack);
        while let Some((node, value)) = stack.pop() {
            match value {
                DeValue::Table(t) => map.expand_table(node, t, index, &mut stack),
                DeValue::Array(a) => {
                    for (i, item) in a.iter().enumerate() {
                        let child = map.add(node, i.to_string(), index.pos(item.span().start));
                        stack.push((child, item.get_ref()));
                    }
                }
                _ => {}
            }
        }
        map
    }

    fn expand_table<'a, 'i>(
        &mut self,
        node: usize,
        table: &'a DeTable<'i>,
        index: &LineIndex,
        stack: &mut Vec<(usize, &'a DeValue<'i>)>,
    ) {
        for (key, value) in table.iter() {
            let child = self.add(node, key.get_ref().to_string(), index.pos(key.span().start));
            stack.push((child, value.get_ref()));
        }
    }

    fn add(&mut self, parent: usize, seg: String, pos: Pos) -> usize {
        let id = self.pos.len();
        self.pos.push(pos);
        self.children.insert((parent, seg), id);
        id
    }
}
