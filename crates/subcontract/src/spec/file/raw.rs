//! The parsed, not yet built, form of a spec file: every part with the position it was
//! written at.

use std::path::PathBuf;

use serde_json::Value;

use super::PositionMap;
use crate::diag::Pos;
use crate::spec::core::SpecDef;
use crate::spec::SpecLocation;

/// A value and the position it was written at (the value's own position, e.g. the opening quote
/// of a string or the `[input]` header of a table).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Located<T> {
    /// The value.
    pub value: T,
    /// Where it starts in the file.
    pub pos: Pos,
}

/// Where the settings of a spec file were written: each value's position, for diagnostics.
/// The values themselves are in the spec's [`SpecDef`].
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Written {
    /// The `name` value.
    pub name: Pos,
    /// The `description` value.
    pub description: Pos,
    /// The `system` value, or the `system_file` value for a prompt read from a file.
    pub system: Pos,
    /// Each tool of [`SpecDef::tools`], by index.
    pub tools: Vec<Pos>,
    /// Every other setting written with a value of its type, by its field name in
    /// [`SpecDef`], [`Limits`](crate::spec::Limits) or [`Sampling`](crate::model::Sampling)
    /// (`model`, `max_turns`, `timeout`, `temperature`, …): the names [`SpecLocation`] uses.
    pub settings: Vec<(&'static str, Pos)>,
}

impl Written {
    /// Where the setting with this field name was written, if it was.
    pub(crate) fn pos(&self, key: &str) -> Option<Pos> {
        self.settings
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, p)| *p)
    }

    /// A value read for the setting `key`: its position noted here, its value handed on for
    /// the caller to store. `None` (not written, or not of its type) notes nothing.
    pub(crate) fn put<T>(&mut self, key: &'static str, v: Option<Located<T>>) -> Option<T> {
        let v = v?;
        self.settings.push((key, v.pos));
        Some(v.value)
    }
}

/// One `[[examples]]` entry that had both an `input` and an `output`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawExample {
    /// Its index in the file's `examples` array, which is also its key in [`PositionMap`]
    /// paths (`["examples", "2", "output"]`); entries lacking `input` or `output` are skipped,
    /// so this can differ from the index in [`RawSpec::examples`].
    pub index: usize,
    /// Where the entry starts (its `[[examples]]` header or inline table).
    pub pos: Pos,
    /// Optional label, used in messages.
    pub name: Option<Located<String>>,
    /// An instance of the input contract.
    pub input: Located<Value>,
    /// An instance of the output contract.
    pub output: Located<Value>,
}

/// A spec file as written: every required part present with the right type, nothing compiled.
///
/// Being returned does not make a spec usable: [`parse_spec`] also returns a `RawSpec` when it
/// found shape errors that leave the parts buildable (an unknown key, an invalid name, a bad
/// limit), so that `check` can go on to report schema problems too. Callers must refuse a spec
/// whose diagnostics contain any error.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawSpec {
    /// The spec file's path, as given.
    pub path: PathBuf,
    /// The settings, as the builder takes them: what the file wrote, each converted to its
    /// type but not checked (zero limits and out-of-range sampling pass: the builder checks
    /// them), and the default for a key absent or not of its type (those have a diagnostic).
    /// The name may be invalid (see the diagnostics). Its `examples` stay empty: each is in
    /// [`examples`](Self::examples), with where it was written.
    pub def: SpecDef,
    /// Where each setting was written.
    pub at: Written,
    /// The `[input]` JSON Schema, converted from TOML.
    pub input: Located<Value>,
    /// The `[output]` JSON Schema, converted from TOML.
    pub output: Located<Value>,
    /// Contract examples.
    pub examples: Vec<RawExample>,
    /// Positions of every key and array element in the file.
    pub positions: PositionMap,
}

impl RawSpec {
    /// The line and column of a builder problem's location in this file: the value written
    /// for a name, tool or limit, the key of a schema location (or its nearest written
    /// ancestor), the value inside an example that a violation names.
    pub(crate) fn locate(&self, at: &SpecLocation) -> Pos {
        let p = &self.positions;
        match at {
            SpecLocation::Name => self.at.name,
            SpecLocation::Description => self.at.description,
            SpecLocation::Tool(i) => self.at.tools.get(*i).copied().unwrap_or(self.at.name),
            SpecLocation::Limit(key) => self
                .at
                .pos(key)
                .or_else(|| p.locate(&["limits"]))
                .unwrap_or(self.at.name),
            SpecLocation::Sampling(key) => self
                .at
                .pos(key)
                .or_else(|| p.locate(&["model"]))
                .unwrap_or(self.at.name),
            SpecLocation::Schema { which, pointer } => p.locate_pointer(which, pointer),
            SpecLocation::Workspace(key) => self
                .at
                .settings
                .iter()
                .find(|(k, _)| k.strip_prefix("workspace.") == Some(*key))
                .map(|(_, pos)| *pos)
                .or_else(|| p.locate(&["workspace"]))
                .unwrap_or(self.at.name),
            SpecLocation::MaxOutputChars => p
                .locate(&["limits", "max_output_chars"])
                .unwrap_or(self.output.pos),
            SpecLocation::Example {
                index,
                side,
                instance_path,
            } => self.locate_example(*index, side, instance_path),
        }
    }

    /// The example's `input`/`output`, or the deepest written value on the way to the one a
    /// violation names. `index` counts the examples this spec kept.
    fn locate_example(&self, index: usize, side: &str, instance_path: &str) -> Pos {
        let Some(x) = self.examples.get(index) else {
            return self.at.name;
        };
        let mut path: Vec<String> = vec!["examples".into(), x.index.to_string(), side.into()];
        let mut best = self
            .positions
            .locate(&path.iter().map(String::as_str).collect::<Vec<_>>());
        for seg in crate::json::pointer::tokens(instance_path) {
            path.push(seg.into_owned());
            match self
                .positions
                .locate(&path.iter().map(String::as_str).collect::<Vec<_>>())
            {
                Some(p) => best = Some(p),
                None => break,
            }
        }
        best.unwrap_or(if side == "input" {
            x.input.pos
        } else {
            x.output.pos
        })
    }
}
