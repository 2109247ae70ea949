//! What one model call reserves before it is made, so that a cap which cannot hold a single
//! call is known before anything is spent: `subcontract check` warns (`call-over-budget`), and
//! a host can say so before it starts a run.
//!
//! The run reserves a call's worst case: every prompt byte counted as one token (a token never
//! spans less than a byte) at the dearest input price, plus `max_tokens_per_turn` output
//! tokens. The first call's prompt is the system prompt, the offered tool definitions (the
//! spec's tools and the submission tool) and the input; later calls add the conversation.

use rust_decimal::{Decimal, RoundingStrategy};
use serde_json::Value;

use super::core::SpecCore;
use super::SubAgentSpec;
use crate::model::{Price, PriceTable, PromptCache, SUBMIT_DESCRIPTION, SUBMIT_TOOL};
use crate::tool::ToolSet;

/// Bytes the run loop counts for each message beside its text (role, framing).
const MESSAGE_OVERHEAD: u64 = 16;

/// The most the first model call of a run can cost, as the run reserves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallCost {
    /// Prompt bytes, each counted as a token: system prompt, tool definitions, input.
    pub prompt_tokens: u64,
    /// Output tokens reserved: the spec's `max_tokens_per_turn`.
    pub output_tokens: u32,
    /// The reservation, in USD.
    pub usd: Decimal,
    /// The prompt cache the call is made with: a 1-hour cache prices every prompt token as a
    /// possible 1-hour cache write, as the run reserves it.
    pub cache: Option<PromptCache>,
}

impl CallCost {
    /// The reservation for a prompt of `prompt_tokens` and `output_tokens` at `price`, with
    /// the provider's default cache.
    pub fn at(price: &Price, prompt_tokens: u64, output_tokens: u32) -> Self {
        Self::at_cached(price, prompt_tokens, output_tokens, None)
    }

    /// [`at`](Self::at) for a call made with `cache`
    /// ([`Price::worst_case_cost_with`]).
    pub fn at_cached(
        price: &Price,
        prompt_tokens: u64,
        output_tokens: u32,
        cache: Option<PromptCache>,
    ) -> Self {
        CallCost {
            prompt_tokens,
            output_tokens,
            usd: price.worst_case_cost_with(prompt_tokens, u64::from(output_tokens), cache),
            cache,
        }
    }
}

/// A first call whose reservation is over the spec's own `max_cost_usd`: the run would end
/// `budget_exhausted` after 0 turns. Its `Display` is the one line that says so and how to fix
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallOverBudget {
    /// The model the call was priced for.
    pub model: String,
    /// What the call reserves.
    pub cost: CallCost,
    /// The spec's `max_cost_usd`.
    pub cap: Decimal,
    /// The largest `max_tokens_per_turn` at which the call fits under the cap; `None` when the
    /// prompt alone does not fit.
    pub max_tokens_that_fit: Option<u32>,
}

impl CallOverBudget {
    /// `cost` priced at `price` against `cap`: `Some` when it does not fit.
    pub fn check(model: &str, price: &Price, cost: CallCost, cap: Decimal) -> Option<Self> {
        (cost.usd > cap).then(|| CallOverBudget {
            model: model.to_owned(),
            cost,
            cap,
            max_tokens_that_fit: max_tokens_within(price, cost.prompt_tokens, cap, cost.cache),
        })
    }

    /// The cap the call needs, rounded up to a hundredth of a cent.
    pub fn cap_needed(&self) -> Decimal {
        self.cost
            .usd
            .round_dp_with_strategy(4, RoundingStrategy::AwayFromZero)
            .normalize()
    }
}

impl std::fmt::Display for CallOverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.cost;
        write!(
            f,
            "one model call on {} reserves up to {} USD ({} prompt tokens + {} output tokens \
             at max_tokens_per_turn), over max_cost_usd = {}: no call can be made; ",
            self.model,
            c.usd.round_dp(6).normalize(),
            c.prompt_tokens,
            c.output_tokens,
            self.cap.normalize(),
        )?;
        match self.max_tokens_that_fit {
            Some(n) => write!(
                f,
                "lower max_tokens_per_turn to {n} or raise max_cost_usd to {}",
                self.cap_needed()
            ),
            None => write!(
                f,
                "the prompt alone is over the cap: raise max_cost_usd to {}",
                self.cap_needed()
            ),
        }
    }
}

/// A first turn that may call tools whose call and the answer reserved beside it do not fit
/// together under the spec's own `max_cost_usd`: with the answer reserve on, every run is
/// refused before its first call (`Failure::NoRoomToAnswer`). Its `Display` is the one line
/// that says so and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AnswerOverBudget {
    /// The model the calls were priced for.
    pub model: String,
    /// What the first call reserves.
    pub first: CallCost,
    /// What the output-only call after it is held for: the first call's prompt grown by one
    /// turn (its response at `max_tokens_per_turn`), plus the output's worst case.
    pub answer: CallCost,
    /// The spec's `max_cost_usd`.
    pub cap: Decimal,
}

impl AnswerOverBudget {
    /// Both calls together, as the run asks its budget for them.
    pub fn total(&self) -> Decimal {
        self.first.usd.saturating_add(self.answer.usd)
    }

    /// The cap both calls need, rounded up to a hundredth of a cent: the figure a refused run
    /// names.
    pub fn cap_needed(&self) -> Decimal {
        self.total()
            .round_dp_with_strategy(4, RoundingStrategy::AwayFromZero)
            .normalize()
    }
}

impl std::fmt::Display for AnswerOverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the first turn on {} reserves up to {} USD and the answer held beside it up to {} \
             USD ({} prompt tokens + {} output tokens), together over max_cost_usd = {}: every \
             run is refused before its first call; raise max_cost_usd to {}, lower \
             max_tokens_per_turn, or set answer_reserve = false",
            self.model,
            self.first.usd.round_dp(6).normalize(),
            self.answer.usd.round_dp(6).normalize(),
            self.answer.prompt_tokens,
            self.answer.output_tokens,
            self.cap.normalize(),
            self.cap_needed(),
        )
    }
}

/// The largest output-token count whose call, with this prompt, fits under `cap`.
fn max_tokens_within(
    price: &Price,
    prompt_tokens: u64,
    cap: Decimal,
    cache: Option<PromptCache>,
) -> Option<u32> {
    let prompt = price.worst_case_cost_with(prompt_tokens, 0, cache);
    let left = cap.checked_sub(prompt).filter(|d| d.is_sign_positive())?;
    if price.output_per_mtok.is_zero() {
        return Some(u32::MAX);
    }
    let n = left
        .checked_mul(Decimal::from(1_000_000u32))
        .and_then(|x| x.checked_div(price.output_per_mtok))
        .map_or(u32::MAX, |x| u32::try_from(x.floor()).unwrap_or(u32::MAX));
    // The division is exact to 28 digits; step down past any rounding so the answer fits.
    let fits = |n: u32| price.worst_case_cost_with(prompt_tokens, u64::from(n), cache) <= cap;
    let n = (0..4).map(|k| n.saturating_sub(k)).find(|&n| fits(n))?;
    (n > 0).then_some(n)
}

impl SpecCore {
    /// Prompt bytes of the first call that do not depend on the caller: the system prompt and
    /// the submission tool (for a JSON output), plus the input message's framing.
    pub(crate) fn own_prompt_bytes(&self) -> u64 {
        let submit = self.submit_tool.as_ref().map_or(0, |_| {
            SUBMIT_TOOL.len() + SUBMIT_DESCRIPTION.len() + self.output_schema_bytes
        });
        (self.def.system.len() + submit) as u64 + MESSAGE_OVERHEAD
    }
}

impl<I, O> SubAgentSpec<I, O> {
    /// What the first model call of a run of this spec reserves at `price`, when its tools come
    /// from `tools` (those it names that `tools` lacks are not counted: such a run is denied
    /// before any call) and its input is `input`. The spec's own
    /// [`prompt_cache`](crate::SpecBuilder::prompt_cache) setting prices it: a 1-hour cache
    /// reserves at the 1-hour write price.
    ///
    /// ```
    /// use rust_decimal::Decimal;
    /// use serde_json::json;
    /// use subcontract::model::Price;
    /// use subcontract::{SubAgentSpec, ToolSet};
    ///
    /// let spec = SubAgentSpec::dynamic(
    ///     "echo",
    ///     json!({"type": "object"}),
    ///     json!({"type": "string", "maxLength": 10}),
    /// )
    /// .description("Echoes.")
    /// .system("Echo.")
    /// .max_tokens_per_turn(1000)
    /// .build()
    /// .unwrap();
    /// // 1 USD per million tokens in and out: 1,000 output tokens cost 0.001 USD.
    /// let price = Price::per_mtok(Decimal::ONE, Decimal::ONE).with_cache(Decimal::ONE, Decimal::ONE);
    /// let cost = spec.first_call_cost(&price, &ToolSet::new(), &json!({}));
    /// assert_eq!(cost.output_tokens, 1000);
    /// assert_eq!(cost.prompt_tokens, 5 + 16 + 2); // "Echo.", framing, "{}"
    /// assert_eq!(cost.usd, Decimal::new(1023, 6));
    /// ```
    pub fn first_call_cost(&self, price: &Price, tools: &ToolSet, input: &Value) -> CallCost {
        let bytes = crate::json::compact_bytes(input) as u64;
        self.first_call_cost_sized(price, tools, bytes, self.core().def.prompt_cache)
    }

    /// The first call and the output-only call the answer reserve holds beside it, when
    /// together they are over this spec's `max_cost_usd` at `model`'s price (see
    /// [`first_call_cost`](Self::first_call_cost) for `tools` and `input`). `None` when they
    /// fit, when the spec has no cap, no price, or no reserve to keep: its first call already
    /// asks for the output alone (no tools, or one turn), or `answer_reserve = false`. A first
    /// call over the cap on its own is [`call_over_budget`](Self::call_over_budget)'s to say.
    ///
    /// ```
    /// use rust_decimal::Decimal;
    /// use serde_json::json;
    /// use subcontract::model::{Price, PriceTable};
    /// use subcontract::tool::workspace::Workspace;
    /// use subcontract::SubAgentSpec;
    ///
    /// let spec = SubAgentSpec::dynamic("find", json!({"type": "object"}), json!({"type": "string", "maxLength": 10}))
    ///     .description("Finds.")
    ///     .system("Find it.")
    ///     .tools(["grep"])
    ///     .max_tokens_per_turn(1000)
    ///     .max_cost_usd(Decimal::new(3, 3)) // 0.003 USD
    ///     .build()
    ///     .unwrap();
    /// let tools = Workspace::new(".").unwrap().tool_set().unwrap();
    /// let mut prices = PriceTable::new();
    /// prices.insert("openai:small", Price::per_mtok(Decimal::ONE, Decimal::ONE));
    /// // One call fits (about 0.0013 USD); the call and the answer after it (about 0.0036) do not.
    /// assert!(spec.call_over_budget(&prices, "openai:small", &tools, &json!({})).is_none());
    /// let over = spec.answer_over_budget(&prices, "openai:small", &tools, &json!({})).unwrap();
    /// assert!(over.total() > Decimal::new(3, 3));
    /// assert!(over.to_string().contains("every run is refused before its first call"));
    /// ```
    pub fn answer_over_budget(
        &self,
        prices: &PriceTable,
        model: &str,
        tools: &ToolSet,
        input: &Value,
    ) -> Option<AnswerOverBudget> {
        let price = prices.get(model)?;
        let bytes = crate::json::compact_bytes(input) as u64;
        let cache = self.core().def.prompt_cache;
        self.answer_over_budget_sized(model, &price, tools, bytes, cache)
    }

    /// [`answer_over_budget`](Self::answer_over_budget) for an input of `input_bytes` bytes.
    pub(crate) fn answer_over_budget_sized(
        &self,
        model: &str,
        price: &Price,
        tools: &ToolSet,
        input_bytes: u64,
        cache: Option<PromptCache>,
    ) -> Option<AnswerOverBudget> {
        let core = self.core();
        let limits = &core.def.limits;
        let cap = limits.max_cost_usd?;
        if !limits.answer_reserve || core.def.tools.is_empty() || limits.max_turns <= 1 {
            return None;
        }
        let first = self.first_call_cost_sized(price, tools, input_bytes, cache);
        let grown = first
            .prompt_tokens
            .saturating_add(crate::run::answer_growth(core) as u64);
        let answer = CallCost::at_cached(price, grown, limits.max_tokens_per_turn, cache);
        let over = AnswerOverBudget {
            model: model.to_owned(),
            first,
            answer,
            cap,
        };
        (first.usd <= cap && over.total() > cap).then_some(over)
    }

    /// [`first_call_cost`](Self::first_call_cost) for an input of `input_bytes` bytes of
    /// compact JSON.
    pub(crate) fn first_call_cost_sized(
        &self,
        price: &Price,
        tools: &ToolSet,
        input_bytes: u64,
        cache: Option<PromptCache>,
    ) -> CallCost {
        let core = self.core();
        // The tools the run offers, as it lists them (a group name stands for its tools),
        // each once; names `tools` lacks are left out.
        let held = core
            .def
            .tools
            .iter()
            .map(String::as_str)
            .filter(|n| tools.listed([*n]).is_ok());
        let tools_bytes: u64 = tools
            .listed(held)
            .unwrap_or_default()
            .into_iter()
            .map(|e| {
                let d = &e.definition;
                (d.name.len() + d.description.len() + e.schema_bytes) as u64
            })
            .sum();
        let prompt = core
            .own_prompt_bytes()
            .saturating_add(tools_bytes)
            .saturating_add(input_bytes);
        CallCost::at_cached(price, prompt, core.def.limits.max_tokens_per_turn, cache)
    }

    /// The first call's reservation on `model` (priced from `prices`) when it is over this
    /// spec's `max_cost_usd`: the run would spend nothing and end `budget_exhausted` after 0
    /// turns. `None` when it fits, when the spec has no cap, or when the model has no price
    /// (its calls are counted as free). A host prints it before it starts the run:
    ///
    /// ```
    /// use serde_json::json;
    /// use subcontract::model::PriceTable;
    /// use subcontract::{SubAgentSpec, ToolSet};
    ///
    /// let spec = SubAgentSpec::dynamic(
    ///     "echo",
    ///     json!({"type": "object"}),
    ///     json!({"type": "string", "maxLength": 10}),
    /// )
    /// .description("Echoes.")
    /// .system("Echo.")
    /// .max_cost_usd("0.01".parse().unwrap())
    /// .build()
    /// .unwrap();
    /// let prices = PriceTable::builtin();
    /// // 4,096 output tokens at 15 USD per million are over 0.01 USD.
    /// let over = spec
    ///     .call_over_budget(&prices, "anthropic:claude-sonnet-4-5", &ToolSet::new(), &json!({}))
    ///     .unwrap();
    /// assert_eq!(over.max_tokens_that_fit, Some(660));
    /// assert!(over.to_string().ends_with("lower max_tokens_per_turn to 660 or raise max_cost_usd to 0.0616"));
    /// assert!(spec.call_over_budget(&prices, "openai:gpt-4.1-nano", &ToolSet::new(), &json!({})).is_none());
    /// ```
    pub fn call_over_budget(
        &self,
        prices: &PriceTable,
        model: &str,
        tools: &ToolSet,
        input: &Value,
    ) -> Option<CallOverBudget> {
        let cap = self.limits().max_cost_usd?;
        let price = prices.get(model)?;
        let cost = self.first_call_cost(&price, tools, input);
        CallOverBudget::check(model, &price, cost, cap)
    }

    /// [`call_over_budget`](Self::call_over_budget) for a run of this spec under `ctx`, priced
    /// as the run itself prices its first call: the spec's model (or `ctx`'s), `ctx`'s prices
    /// and tools, and the prompt cache the run will use (the spec's setting, else `ctx`'s, else
    /// the model's own).
    pub fn call_over_budget_in(&self, ctx: &crate::Ctx, input: &Value) -> Option<CallOverBudget> {
        let core = self.core();
        let cap = core.def.limits.max_cost_usd?;
        let model = core
            .def
            .model
            .as_deref()
            .map_or_else(|| ctx.model().id().to_string(), str::to_string);
        let price = ctx.prices().get(&model)?;
        let cache = core
            .def
            .prompt_cache
            .or(ctx.prompt_cache())
            .or(ctx.model().prompt_cache());
        let bytes = crate::json::compact_bytes(input) as u64;
        let cost = self.first_call_cost_sized(&price, ctx.tools(), bytes, cache);
        CallOverBudget::check(&model, &price, cost, cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn price(input: i64, output: i64) -> Price {
        let (i, o) = (Decimal::from(input), Decimal::from(output));
        Price::per_mtok(i, o).with_cache(i, i)
    }

    #[test]
    fn the_tokens_that_fit_are_the_most_that_fit() {
        let p = price(1, 10);
        let cap = Decimal::new(1, 2); // 0.01 USD
                                      // 1,000 prompt tokens cost 0.001; 900 output tokens at 10/M cost the other 0.009.
        assert_eq!(max_tokens_within(&p, 1_000, cap, None), Some(900));
        assert!(p.worst_case_cost(1_000, 900) <= cap);
        assert!(p.worst_case_cost(1_000, 901) > cap);
        // The prompt alone over the cap, or exactly at it: no output fits.
        assert_eq!(max_tokens_within(&p, 20_000, cap, None), None);
        assert_eq!(max_tokens_within(&p, 10_000, cap, None), None);
        // Free output: any count fits once the prompt does.
        assert_eq!(
            max_tokens_within(&price(1, 0), 1_000, cap, None),
            Some(u32::MAX)
        );
        // Absurd prices and caps saturate rather than overflow.
        let huge = Price::per_mtok(Decimal::MAX, Decimal::MAX);
        let _ = max_tokens_within(&huge, 1, Decimal::MAX, None);
        assert_eq!(
            max_tokens_within(&price(0, 1), 0, Decimal::MAX, None),
            Some(u32::MAX)
        );
    }

    #[test]
    fn the_message_names_the_model_the_cost_and_both_fixes() {
        let p = price(1, 10);
        let cost = CallCost::at(&p, 1_000, 4_096);
        let over = CallOverBudget::check("m:x", &p, cost, Decimal::new(1, 2)).unwrap();
        assert_eq!(
            over.to_string(),
            "one model call on m:x reserves up to 0.04196 USD (1000 prompt tokens + 4096 output \
             tokens at max_tokens_per_turn), over max_cost_usd = 0.01: no call can be made; \
             lower max_tokens_per_turn to 900 or raise max_cost_usd to 0.042"
        );
        let over =
            CallOverBudget::check("m:x", &p, CallCost::at(&p, 20_000, 10), Decimal::new(1, 2))
                .unwrap();
        assert!(
            over.to_string()
                .ends_with("the prompt alone is over the cap: raise max_cost_usd to 0.0201"),
            "{over}"
        );
        // A call that fits is no finding.
        assert!(
            CallOverBudget::check("m:x", &p, CallCost::at(&p, 1_000, 900), Decimal::new(1, 2))
                .is_none()
        );
    }

    #[test]
    fn a_one_hour_spec_is_priced_at_the_one_hour_write_price() {
        use serde_json::json;
        let spec = |cache: Option<PromptCache>| {
            let b = SubAgentSpec::dynamic(
                "echo",
                json!({"type": "object"}),
                json!({"type": "string", "maxLength": 10}),
            )
            .description("Echoes.")
            .system("Echo.")
            .max_tokens_per_turn(1)
            .max_cost_usd(Decimal::new(3, 5));
            match cache {
                Some(c) => b.prompt_cache(c),
                None => b,
            }
            .build()
            .unwrap()
        };
        // Input 1 USD/M: a 5-minute write costs 1.25/M, a 1-hour write 2/M; output is free.
        let p = Price::per_mtok(Decimal::ONE, Decimal::ZERO);
        let tools = ToolSet::new();
        let five = spec(None).first_call_cost(&p, &tools, &json!({}));
        let hour = spec(Some(PromptCache::OneHour)).first_call_cost(&p, &tools, &json!({}));
        assert_eq!(five.prompt_tokens, hour.prompt_tokens);
        assert_eq!(five.usd, Decimal::new(2875, 8)); // 23 tokens × 1.25 USD/M
        assert_eq!(hour.usd, Decimal::new(46, 6)); // 23 tokens × 2 USD/M
                                                   // Under a cap of 0.00003 USD only the 1-hour call is over; the fix it names is priced
                                                   // the same way.
        assert!(CallOverBudget::check("m:x", &p, five, Decimal::new(3, 5)).is_none());
        let over = CallOverBudget::check("m:x", &p, hour, Decimal::new(3, 5)).unwrap();
        assert_eq!(over.max_tokens_that_fit, None);
        assert_eq!(over.cap_needed(), Decimal::new(1, 4));
    }
}
