//! A host's own model, asked directly: [`Ctx::ask`] runs a prompt with the host's model and
//! every tool the host holds (its specs among them, each a sub-agent the model may call), and
//! returns the answer as text, or as a typed output with [`Ask::output`].
//!
//! There is no second run loop: the prompt runs as a root run of a spec made for it, under
//! the same limits, budget, gate, events and cancellation as any spec's run. Its input is the
//! prompt (a JSON string), its output a string of at most
//! [`max_answer_chars`](Ask::max_answer_chars), or `O` under `O`'s own bounds.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use validator::{Validate, ValidationErrors};

use crate::ctx::Ctx;
use crate::outcome::{Failure, RunError, RunResult};
use crate::spec::text::text_json_chars;
use crate::spec::{Limits, SpecError, SubAgentSpec, DEFAULT_MAX_TURNS, DEFAULT_TIMEOUT};
use crate::tool::is_valid_name;

/// Default longest answer of [`Ctx::ask`], in characters (16 KiB): the text answer's
/// `maxLength`, or the largest compact JSON of a typed one.
pub const DEFAULT_MAX_ANSWER_CHARS: usize = 16 * 1024;

/// The system prompt of an ask that sets none.
pub const DEFAULT_HOST_SYSTEM: &str = "Do what the user asks. When one of your tools fits a \
part of the work, call it with the arguments its schema asks for, and use what it returns. \
When you are done, give your final answer.";

/// Why an ask ended without an answer.
#[derive(Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AskError {
    /// The answer's contract could not be built: a typed output whose largest value is over
    /// [`max_answer_chars`](Ask::max_answer_chars), a limit of 0, a prompt spec name that is
    /// not one. Nothing ran.
    #[error("the host's answer contract: {0}")]
    Contract(SpecError),
    /// The run ended without an answer: its outcome and why.
    #[error("{0}")]
    Run(RunError),
}

crate::debug_as_display!(AskError);

impl AskError {
    /// The run's failure, when the run ended without an answer.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            AskError::Run(e) => Some(&e.failure),
            AskError::Contract(_) => None,
        }
    }
}

/// A prompt for the host's model, made by [`Ctx::ask`]. Await it for the text answer; call
/// [`run`](Self::run) for the whole [`RunResult`] (turns, usage, cost); call
/// [`output`](Self::output) for a typed answer.
#[must_use = "an ask does nothing until it is awaited or run"]
#[derive(Debug, Clone)]
pub struct Ask<'a> {
    ctx: &'a Ctx,
    prompt: String,
    system: Option<String>,
    max_turns: u32,
    timeout: Duration,
    max_answer_chars: usize,
}

/// An [`Ask`] whose answer is an `O`, checked against `O`'s contract (schema, bounds and
/// `validator` rules) as any spec's output is.
#[must_use = "an ask does nothing until it is awaited or run"]
#[derive(Debug, Clone)]
pub struct AskFor<'a, O> {
    ask: Ask<'a>,
    _output: PhantomData<fn() -> O>,
}

impl Ctx {
    /// Asks the host's model `prompt`, offering it every tool this context holds: the
    /// workspace tools, the host's own tools, and each spec the host registered, which a
    /// call runs as a sub-agent in a child context (as
    /// [`DynSpec::as_tool`](crate::spec::DynSpec::as_tool) does). The run ends when the model answers in text
    /// with no tool call, under the ask's limits: [`DEFAULT_MAX_TURNS`] turns,
    /// [`DEFAULT_TIMEOUT`], an answer of at most [`DEFAULT_MAX_ANSWER_CHARS`] characters
    /// (a longer one is sent back to be shortened, as any output that breaks its contract).
    ///
    /// It is a root run of this context: a run id of its own (`root`, then `root-2`, …), its
    /// spend charged to this context's budget, its events sent to its sinks.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use serde_json::json;
    /// use subcontract::host::Host;
    /// use subcontract::model::{ScriptStep, ScriptedModel};
    /// use subcontract::spec::load_spec_str;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let lookup = load_spec_str(std::path::Path::new("lookup.toml"), r#"
    ///     name = "lookup"
    ///     description = "Finds a city's country."
    ///     system = "Name the country."
    ///     [input]
    ///     type = "object"
    ///     properties.city = { type = "string", maxLength = 50 }
    ///     [output]
    ///     type = "string"
    ///     maxLength = 50
    /// "#)?;
    /// // The host's model calls `lookup`, the sub-agent answers, the host answers in text.
    /// let model = Arc::new(ScriptedModel::queue("scripted:demo", vec![
    ///     ScriptStep::tool_call("lookup", json!({"city": "Lyon"})),
    ///     ScriptStep::text("France"),
    ///     ScriptStep::text("Lyon is in France."),
    /// ]));
    /// let host = Host::builder().model(model).spec(lookup.erase()).build()?.build();
    /// let answer = host.ask("Which country is Lyon in?").await?;
    /// assert_eq!(answer, "Lyon is in France.");
    /// # Ok(()) }
    /// ```
    pub fn ask(&self, prompt: impl Into<String>) -> Ask<'_> {
        Ask {
            ctx: self,
            prompt: prompt.into(),
            system: None,
            max_turns: DEFAULT_MAX_TURNS,
            timeout: DEFAULT_TIMEOUT,
            max_answer_chars: DEFAULT_MAX_ANSWER_CHARS,
        }
    }
}

impl<'a> Ask<'a> {
    /// The system prompt (default: [`DEFAULT_HOST_SYSTEM`]).
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// Model turns before the run ends `max_turns` (default [`DEFAULT_MAX_TURNS`]); the last
    /// one asks for the answer alone.
    pub fn max_turns(mut self, n: u32) -> Self {
        self.max_turns = n;
        self
    }

    /// Wall time before the run ends `timeout` (default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The longest answer, in characters (default [`DEFAULT_MAX_ANSWER_CHARS`]): the text
    /// answer's `maxLength`, or, with [`output`](Self::output), the largest compact JSON of
    /// the typed answer (its type's bounds must fit in it, as a spec's `max_output_chars`).
    pub fn max_answer_chars(mut self, n: usize) -> Self {
        self.max_answer_chars = n;
        self
    }

    /// The same ask, answered with an `O`: the model submits it as a spec's output is
    /// submitted, and it is checked against `O`'s schema and `validator` rules, with repair
    /// turns for an answer that breaks them.
    ///
    /// `O` needs bounds, as any output: `String` is not an output type here (it has no
    /// `maxLength`, and `validator` does not implement `Validate` for it). For text, await
    /// the [`Ask`] itself, bounded by [`max_answer_chars`](Self::max_answer_chars) (as a spec
    /// of your own is, with [`SubAgentSpec::text`]).
    pub fn output<O>(self) -> AskFor<'a, O>
    where
        O: Serialize + DeserializeOwned + JsonSchema + Validate + Send + 'static,
    {
        AskFor {
            ask: self,
            _output: PhantomData,
        }
    }

    /// Runs the ask and returns the whole record: the text answer when it completed, its
    /// turns, usage and cost (its sub-agents' included in `total_cost_usd`). `Err` when the
    /// answer's contract could not be built, before anything ran.
    pub async fn run(self) -> Result<RunResult<String>, SpecError> {
        let n = self.max_answer_chars;
        let prompt = Prompt(self.prompt.clone());
        let spec = SubAgentSpec::<Prompt, String>::text(self.name(), n);
        let (spec, ctx) = self.terms(spec, text_json_chars(n)).await?;
        Ok(spec.run(&prompt, &ctx).await)
    }

    /// The name of the spec the prompt runs as: the context's spec name (`host` unless its
    /// builder set another), which events carry too, when it is a valid tool name.
    fn name(&self) -> &str {
        Some(self.ctx.spec_name())
            .filter(|n| is_valid_name(n))
            .unwrap_or("host")
    }

    /// The spec the prompt runs as (the ask's system prompt and limits, every tool the
    /// context holds now), and the context it runs in: for a host whose tools follow changing
    /// sources, the view holding the set the spec lists, so that a source changing between
    /// the two cannot leave the spec naming a tool its run does not hold.
    async fn terms<I, O>(
        self,
        builder: crate::spec::SpecBuilder<I, O>,
        max_output_chars: usize,
    ) -> Result<(SubAgentSpec<I, O>, Ctx), SpecError> {
        let ctx = self.ctx.for_new_run().await;
        // An ask does not act (it has no working copy): the acting tools would only refuse.
        let tools: Vec<String> = ctx
            .tools()
            .names()
            .filter(|n| !crate::act::ACT_TOOLS.contains(n))
            .map(str::to_owned)
            .collect();
        let limits = Limits {
            max_turns: self.max_turns,
            timeout: self.timeout,
            max_output_chars,
            ..Limits::default()
        };
        builder
            .description("The host's answer to a prompt.")
            .system(
                self.system
                    .unwrap_or_else(|| DEFAULT_HOST_SYSTEM.to_owned()),
            )
            .tools(tools)
            .limits(limits)
            .build()
            .map(|spec| (spec, ctx))
    }
}

/// The prompt, as the input of the spec an ask runs as: a JSON string.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
struct Prompt(String);

impl Validate for Prompt {
    // A prompt has no rules beyond its schema.
    fn validate(&self) -> Result<(), ValidationErrors> {
        Ok(())
    }
}

impl<'a, O> AskFor<'a, O>
where
    O: Serialize + DeserializeOwned + JsonSchema + Validate + Send + 'static,
{
    /// Runs the ask and returns the whole record: the typed answer when it completed, its
    /// turns, usage and cost. `Err` when the answer's contract could not be built (`O`'s
    /// largest value over [`max_answer_chars`](Ask::max_answer_chars), say), before anything
    /// ran.
    pub async fn run(self) -> Result<RunResult<O>, SpecError> {
        let ask = self.ask;
        let prompt = Prompt(ask.prompt.clone());
        let json_chars = ask.max_answer_chars;
        let spec = SubAgentSpec::<Prompt, O>::builder(ask.name());
        let (spec, ctx) = ask.terms(spec, json_chars).await?;
        Ok(spec.run(&prompt, &ctx).await)
    }
}

/// What awaiting an ask returns.
pub type AskFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, AskError>> + Send + 'a>>;

/// The answer of a completed run, or why there is none.
fn answer<T>(run: Result<RunResult<T>, SpecError>) -> Result<T, AskError> {
    run.map_err(AskError::Contract)?
        .into_result()
        .map_err(AskError::Run)
}

impl<'a> IntoFuture for Ask<'a> {
    type Output = Result<String, AskError>;
    type IntoFuture = AskFuture<'a, String>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { answer(self.run().await) })
    }
}

impl<'a, O> IntoFuture for AskFor<'a, O>
where
    O: Serialize + DeserializeOwned + JsonSchema + Validate + Send + 'static,
{
    type Output = Result<O, AskError>;
    type IntoFuture = AskFuture<'a, O>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { answer(self.run().await) })
    }
}
