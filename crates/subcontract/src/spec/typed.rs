//! The typed view of a spec, `SubAgentSpec<I, O>`: what a user builds, runs and hands to a
//! host as a tool.

use std::marker::PhantomData;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::core::{downcast_output, with_value, OutputText, SpecCore};
use super::erased::DynSpec;
use crate::contract::Violation;
use crate::ctx::Ctx;
use crate::outcome::RunResult;
use crate::run;

/// A typed sub-agent: input `I`, output `O`, description, system prompt, narrowed tools,
/// limits and compiled contracts. Cheap to clone.
///
/// Build one with [`SubAgentSpec::builder`] (typed) or [`SubAgentSpec::dynamic`] (JSON
/// Schemas, as TOML specs are); run it with [`run`](Self::run) / [`run_child`](Self::run_child),
/// or hand it to a host with [`as_tool`](DynSpec::as_tool).
pub struct SubAgentSpec<I, O> {
    /// The spec itself, over JSON values: every accessor (`name()`, `limits()`, `as_tool()`,
    /// …) is [`DynSpec`]'s, reached through `Deref`.
    erased: DynSpec,
    _types: PhantomData<fn(I) -> O>,
}

impl<I, O> Clone for SubAgentSpec<I, O> {
    fn clone(&self) -> Self {
        SubAgentSpec {
            erased: self.erased.clone(),
            _types: PhantomData,
        }
    }
}

impl<I, O> std::fmt::Debug for SubAgentSpec<I, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.core().fmt(f)
    }
}

/// A typed spec is its erased spec with types on top: what does not depend on `I` and `O`
/// (name, limits, contracts, `as_tool`, tool definitions) is [`DynSpec`]'s, written once.
impl<I, O> std::ops::Deref for SubAgentSpec<I, O> {
    type Target = DynSpec;
    fn deref(&self) -> &DynSpec {
        &self.erased
    }
}

impl<I, O> SubAgentSpec<I, O> {
    pub(crate) fn from_core(core: Arc<SpecCore>) -> Self {
        SubAgentSpec {
            erased: DynSpec::from_core(core),
            _types: PhantomData,
        }
    }

    /// The untyped core.
    pub(crate) fn core(&self) -> &SpecCore {
        self.erased.core()
    }

    /// The same spec over JSON values.
    pub fn erase(&self) -> DynSpec {
        self.erased.clone()
    }
}

impl<I, O: 'static> SubAgentSpec<I, O> {
    /// Checks an output exactly as the run loop does before a parent sees it — size, schema,
    /// then the typed decode and `validator` rules — and returns it decoded. Grounded values
    /// (`x-grounded`) are not checked here: that needs a run's evidence
    /// ([`Grounding::check`](crate::ground::Grounding::check)).
    pub fn validate_output(&self, output: &Value) -> Result<O, Vec<Violation>> {
        let (_, decoded) = self.core().accept_output(output, OutputText::Skip)?;
        downcast_output(with_value(decoded, || output.clone())).map_err(|m| {
            vec![Violation {
                path: String::new(),
                message: m.into(),
            }]
        })
    }

    /// [`validate_output`](Self::validate_output) for an output as JSON text, the way a model
    /// sends it: parse, size, schema, then the typed decode and rules. Text that is not JSON
    /// is one violation at the root.
    ///
    /// Valid text is checked and decoded straight from a flat parse of the text, without
    /// building a `serde_json::Value` first; errors are reported exactly as `validate_output`
    /// reports them.
    ///
    /// ```
    /// use schemars::JsonSchema;
    /// use serde::{Deserialize, Serialize};
    /// use validator::Validate;
    /// use subcontract::SubAgentSpec;
    ///
    /// #[derive(Serialize, Deserialize, JsonSchema, Validate)]
    /// struct Q { q: String }
    /// #[derive(Debug, Serialize, Deserialize, JsonSchema, Validate)]
    /// #[serde(deny_unknown_fields)]
    /// struct A { #[validate(length(max = 10))] answer: String }
    ///
    /// let spec = SubAgentSpec::<Q, A>::builder("ask")
    ///     .description("Answers.")
    ///     .system("Answer.")
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(spec.validate_output_json(r#"{"answer": "yes"}"#).unwrap().answer, "yes");
    /// let errs = spec.validate_output_json(r#"{"answer": "no, not at all"}"#).unwrap_err();
    /// assert_eq!(errs[0].path, "/answer");
    /// ```
    pub fn validate_output_json(&self, text: &str) -> Result<O, Vec<Violation>> {
        let (_, decoded) = self.core().accept_output_json(text, OutputText::Skip)?;
        downcast_output(decoded).map_err(|m| {
            vec![Violation {
                path: String::new(),
                message: m.into(),
            }]
        })
    }
}

impl<I: Serialize, O: Send + 'static> SubAgentSpec<I, O> {
    /// Runs the spec in `ctx` itself (for a host: `ctx` is the root context). The offered tools
    /// are those of the spec, each of which `ctx` must hold.
    pub async fn run(&self, input: &I, ctx: &Ctx) -> RunResult<O> {
        let value = match serde_json::to_value(input) {
            Ok(v) => v,
            Err(e) => return RunResult::input_not_serialisable(ctx, e),
        };
        run::run_core(self.core(), value, ctx, OutputText::Skip)
            .await
            .downcast()
    }

    /// Forks a child of `parent` for this spec and runs it there, as a host's call of
    /// [`as_tool`](DynSpec::as_tool) would. A child that cannot be made ends as `denied`.
    pub async fn run_child(&self, input: &I, parent: &Ctx) -> RunResult<O> {
        let value = match serde_json::to_value(input) {
            Ok(v) => v,
            Err(e) => return RunResult::input_not_serialisable(parent, e),
        };
        run::run_child(self.core(), value, parent, OutputText::Skip)
            .await
            .downcast()
    }
}

impl<I, O> From<SubAgentSpec<I, O>> for DynSpec {
    fn from(spec: SubAgentSpec<I, O>) -> Self {
        spec.erase()
    }
}

impl<I, O> From<&SubAgentSpec<I, O>> for DynSpec {
    fn from(spec: &SubAgentSpec<I, O>) -> Self {
        spec.erase()
    }
}

/// A spec in another spec's tool list: the sub-agent it may call.
impl<I, O> crate::tool::ToolRef for SubAgentSpec<I, O> {
    fn tool_name(&self) -> &str {
        self.erased.name()
    }
}

impl<I, O> crate::ctx::Delegate for SubAgentSpec<I, O> {
    fn terms(&self) -> crate::ctx::ChildTerms<'_> {
        self.core().terms()
    }
}
