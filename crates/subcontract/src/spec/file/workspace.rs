//! The `[workspace]` table: how an acting sub-agent's working copy is made and bounded
//! ([`WorkspacePolicy`]). Only the shape is checked here; what the settings mean together (an
//! acting tool without isolation, a check its commands do not allow, a bad glob) is the spec
//! builder's to check, for files and Rust alike.

use toml::de::{DeTable, DeValue};

use super::keys::{IN_WORKSPACE, WORKSPACE_KEYS};
use super::{Item, Located, Parser, Written};
use crate::act::{Isolation, SandboxMode, WorkspacePolicy};
use crate::diag::{codes, Diagnostic};

impl Parser<'_> {
    /// Reads `[workspace]` into `policy`, noting each key's position under `workspace.KEY`.
    pub(super) fn workspace(
        &mut self,
        table: &DeTable<'_>,
        policy: &mut WorkspacePolicy,
        at: &mut Written,
    ) {
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        for (key, v) in table.iter() {
            match key.get_ref().as_ref() {
                "isolation" => {
                    let isolation = self.isolation(v);
                    if let Some(i) = at.put("workspace.isolation", isolation) {
                        policy.isolation = i;
                    }
                }
                k @ ("writes" | "commands" | "checks") => {
                    let items = self.string_list(k, v);
                    let (field, list) = match k {
                        "writes" => ("workspace.writes", &mut policy.writes),
                        "commands" => ("workspace.commands", &mut policy.commands),
                        _ => ("workspace.checks", &mut policy.checks),
                    };
                    if let Some(items) = at.put(field, items) {
                        *list = items;
                    }
                }
                k @ "network" => {
                    let on = self.boolean(k, v);
                    if let Some(on) = at.put("workspace.network", on) {
                        policy.network = on;
                    }
                }
                k @ "max_changed_files" => {
                    let n = self.limit_int(k, v, u64::MAX);
                    if let Some(n) = at.put("workspace.max_changed_files", n) {
                        policy.max_changed_files = size(n);
                    }
                }
                k @ "max_diff_lines" => {
                    let n = self.limit_int(k, v, u64::MAX);
                    if let Some(n) = at.put("workspace.max_diff_lines", n) {
                        policy.max_diff_lines = size(n);
                    }
                }
                k @ "max_command_secs" => {
                    let n = self.limit_int(k, v, u64::from(u32::MAX));
                    if let Some(n) = at.put("workspace.max_command_secs", n) {
                        policy.max_command_secs = n;
                    }
                }
                "sandbox" => {
                    let mode = self.sandbox(v);
                    if let Some(mode) = at.put("workspace.sandbox", mode) {
                        if mode == SandboxMode::None {
                            // Allowed, since some hosts have no OS sandbox, but never quietly.
                            self.diags.push(Diagnostic::warning(
                                self.file.clone(),
                                at.pos("workspace.sandbox").unwrap_or_default(),
                                codes::NO_SANDBOX,
                                "`sandbox = \"none\"`: commands run without the OS sandbox \
                                 (they can write outside the working copy and reach the \
                                 network); the environment is still cleared",
                            ));
                        }
                        policy.sandbox = mode;
                    }
                }
                _ => {
                    self.unknown_key(key, WORKSPACE_KEYS, IN_WORKSPACE);
                }
            }
        }
    }

    fn isolation(&mut self, v: &Item<'_>) -> Option<Located<Isolation>> {
        self.keyword("isolation", v, "\"worktree\", \"copy\" or \"none\"")
    }

    fn sandbox(&mut self, v: &Item<'_>) -> Option<Located<SandboxMode>> {
        self.keyword("sandbox", v, "\"os\" or \"none\"")
    }

    /// A string that must be one of a setting's words, read as its type.
    fn keyword<T: std::str::FromStr>(
        &mut self,
        key: &str,
        v: &Item<'_>,
        expected: &str,
    ) -> Option<Located<T>> {
        let s = self.string(key, v, expected)?;
        match s.value.parse::<T>() {
            Ok(value) => Some(Located { value, pos: s.pos }),
            Err(_) => {
                self.error_at(
                    s.pos,
                    codes::INVALID_VALUE,
                    format!("`{key}` must be {expected}, found \"{}\"", s.value),
                );
                None
            }
        }
    }

    /// An array of strings; the position noted is the array's.
    fn string_list(&mut self, key: &str, v: &Item<'_>) -> Option<Located<Vec<String>>> {
        let expected = "an array of strings";
        let items = match v.get_ref() {
            DeValue::Array(a) => a,
            _ if v.span().is_empty() => return None,
            other => {
                self.invalid_type(v, key, expected, other);
                return None;
            }
        };
        let mut out = Vec::new();
        for item in items.iter() {
            out.push(self.string(key, item, expected)?.value);
        }
        Some(self.located(out, v.span()))
    }
}
