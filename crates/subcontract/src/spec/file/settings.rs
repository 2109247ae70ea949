//! How the sub-agent calls its model: `model` (a name, or a `[model]` table with the name and
//! the sampling settings), `output_mode` and `prompt_cache`.
//!
//! Values are read and typed here; their ranges are the spec builder's to check, once, for
//! files and Rust alike.

use toml::de::DeValue;

use super::keys::{suggest, IN_MODEL, MODEL_KEYS};
use super::{shown, Item, Located, Parser, Written};
use crate::diag::codes;
use crate::model::PromptCache;
use crate::spec::core::SpecDef;
use crate::spec::OutputMode;

impl Parser<'_> {
    /// `model = "provider:model"` as before, or a `[model]` table of `name` (optional: absent,
    /// the caller's model is used) and sampling settings; each value read into `def`, and
    /// where it was into `at`.
    pub(super) fn model(&mut self, v: &Item<'_>, def: &mut SpecDef, at: &mut Written) {
        let expected = "a string such as \"openai:gpt-4.1-mini\", or a [model] table \
                        (name, temperature, top_p, seed)";
        // Narrowed to `f32` here; a value too large for it becomes infinite, which the
        // builder's range check refuses.
        #[allow(clippy::cast_possible_truncation)]
        let narrow = |x: f64| x as f32;
        match v.get_ref() {
            DeValue::String(_) => {
                let name = self.model_name("model", v, expected);
                if let Some(m) = at.put("model", name) {
                    def.model = Some(m);
                }
            }
            DeValue::Table(t) => {
                for (key, item) in t.iter() {
                    match key.get_ref().as_ref() {
                        "name" => {
                            let expected = "a string such as \"openai:gpt-4.1-mini\"";
                            let name = self.model_name("name", item, expected);
                            if let Some(m) = at.put("model", name) {
                                def.model = Some(m);
                            }
                        }
                        k @ "temperature" => {
                            if let Some(x) = at.put("temperature", self.float(k, item)) {
                                def.sampling.temperature = Some(narrow(x));
                            }
                        }
                        k @ "top_p" => {
                            if let Some(x) = at.put("top_p", self.float(k, item)) {
                                def.sampling.top_p = Some(narrow(x));
                            }
                        }
                        k @ "seed" => {
                            let seed = self.int(k, item, u64::MAX, codes::INVALID_VALUE);
                            if let Some(x) = at.put("seed", seed) {
                                def.sampling.seed = Some(x);
                            }
                        }
                        _ => {
                            self.unknown_key(key, MODEL_KEYS, IN_MODEL);
                        }
                    }
                }
            }
            _ if v.span().is_empty() => {}
            other => self.invalid_type(v, "model", expected, other),
        }
    }

    fn model_name(&mut self, key: &str, v: &Item<'_>, expected: &str) -> Option<Located<String>> {
        let m = self.string(key, v, expected)?;
        if m.value.trim().is_empty() {
            self.error_at(
                m.pos,
                codes::INVALID_VALUE,
                format!("`{key}` must not be empty"),
            );
            return None;
        }
        Some(m)
    }

    /// `prompt_cache`: `"off"`, `"5m"` or `"1h"`.
    pub(super) fn prompt_cache(&mut self, v: &Item<'_>) -> Option<Located<PromptCache>> {
        let expected = "one of \"off\", \"5m\", \"1h\"";
        let s = self.string("prompt_cache", v, expected)?;
        match s.value.parse::<PromptCache>() {
            Ok(cache) => Some(Located {
                value: cache,
                pos: s.pos,
            }),
            Err(_) => {
                let message = format!(
                    "`prompt_cache` must be {expected}, found \"{}\"",
                    shown(&s.value)
                );
                self.error_at(s.pos, codes::INVALID_VALUE, message);
                None
            }
        }
    }

    /// `output_mode`: one of the [`OutputMode`] names, with the closest one suggested.
    pub(super) fn output_mode(&mut self, v: &Item<'_>) -> Option<Located<OutputMode>> {
        let names = OutputMode::ALL.map(OutputMode::as_str);
        let expected = format!("one of {}", quoted(&names));
        let s = self.string("output_mode", v, &expected)?;
        match s.value.parse::<OutputMode>() {
            Ok(mode) => Some(Located {
                value: mode,
                pos: s.pos,
            }),
            Err(_) => {
                let mut message = format!(
                    "`output_mode` must be {expected}, found \"{}\"",
                    shown(&s.value)
                );
                if let Some(best) = suggest(&s.value, &names) {
                    message.push_str(&format!("; did you mean \"{best}\"?"));
                }
                self.error_at(s.pos, codes::INVALID_VALUE, message);
                None
            }
        }
    }
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}
