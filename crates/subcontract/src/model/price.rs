//! Prices per million tokens, and the cost of a call.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Once;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::Usage;

/// The price of one model, in USD per million tokens.
///
/// Prompt-cache reads and writes have their own prices. When a table leaves them out, a cache
/// read costs the input price (no provider bills a read above it) and a cache write 1.25 times
/// the input price (Anthropic's premium for 5-minute cache writes; OpenAI bills and reports no
/// writes): defaults that never count a call as cheaper than the providers we know bill it.
/// Anthropic's 1-hour cache writes have a column of their own, `cache_write_1h_per_mtok`
/// (default: twice the input price, as Anthropic bills them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
// A misspelt column (`cache_read_per_mtk`) would otherwise fall back to its default in silence.
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Price {
    /// USD per million input tokens.
    #[serde(with = "rust_decimal::serde::str")]
    pub input_per_mtok: Decimal,
    /// USD per million output tokens.
    #[serde(with = "rust_decimal::serde::str")]
    pub output_per_mtok: Decimal,
    /// USD per million input tokens read from the prompt cache (default: the input price).
    #[serde(
        default,
        with = "rust_decimal::serde::str_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_read_per_mtok: Option<Decimal>,
    /// USD per million input tokens written to the prompt cache (default: 1.25 × the input
    /// price).
    #[serde(
        default,
        with = "rust_decimal::serde::str_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_write_per_mtok: Option<Decimal>,
    /// USD per million input tokens written to the prompt cache for an hour (default: 2 × the
    /// input price).
    #[serde(
        default,
        with = "rust_decimal::serde::str_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_write_1h_per_mtok: Option<Decimal>,
}

impl Price {
    /// A price from USD per million input and output tokens (cache prices defaulted).
    pub fn per_mtok(input: Decimal, output: Decimal) -> Self {
        Price {
            input_per_mtok: input,
            output_per_mtok: output,
            cache_read_per_mtok: None,
            cache_write_per_mtok: None,
            cache_write_1h_per_mtok: None,
        }
    }

    /// Sets the prices of cache reads and writes, USD per million tokens.
    pub fn with_cache(mut self, read: Decimal, write: Decimal) -> Self {
        self.cache_read_per_mtok = Some(read);
        self.cache_write_per_mtok = Some(write);
        self
    }

    /// USD per million cache-read tokens, defaulted as the type's documentation says.
    pub fn cache_read(&self) -> Decimal {
        self.cache_read_per_mtok.unwrap_or(self.input_per_mtok)
    }

    /// USD per million cache-write tokens, defaulted as the type's documentation says
    /// (saturating at `Decimal::MAX`).
    pub fn cache_write(&self) -> Decimal {
        self.cache_write_per_mtok.unwrap_or_else(|| {
            self.input_per_mtok
                .checked_mul(Decimal::new(125, 2))
                .unwrap_or(Decimal::MAX)
        })
    }

    /// USD per million 1-hour cache-write tokens, defaulted as the type's documentation says
    /// (saturating at `Decimal::MAX`).
    pub fn cache_write_1h(&self) -> Decimal {
        self.cache_write_1h_per_mtok.unwrap_or_else(|| {
            self.input_per_mtok
                .checked_mul(Decimal::TWO)
                .unwrap_or(Decimal::MAX)
        })
    }

    /// The cost of `usage` at this price: uncached input, cache reads, cache writes and output,
    /// each at its own price. A cost past `Decimal::MAX` (an absurd price or token count) is
    /// `Decimal::MAX`, which exhausts any budget, rather than a panic or a wrapped value.
    pub fn cost(&self, usage: Usage) -> Decimal {
        self.rates().cost(usage)
    }

    /// Every rate, the defaults computed: what a run prices each of its calls at.
    pub(crate) fn rates(&self) -> Rates {
        let rates = [
            self.input_per_mtok,
            self.cache_read(),
            self.cache_write(),
            self.cache_write_1h(),
            self.output_per_mtok,
        ];
        Rates {
            zero_scales: rates.map(|r| (Decimal::ZERO * r).scale()),
            rates,
        }
    }

    /// USD per million input tokens at the dearest rate a call made with `cache` may be billed
    /// them: the provider decides what it caches, so the dearest of the input, cache-read and
    /// cache-write prices, and with [`PromptCache::OneHour`](super::PromptCache::OneHour) the
    /// 1-hour cache-write price too.
    pub fn dearest_input(&self, cache: Option<super::PromptCache>) -> Decimal {
        let input = self
            .input_per_mtok
            .max(self.cache_read())
            .max(self.cache_write());
        if cache == Some(super::PromptCache::OneHour) {
            input.max(self.cache_write_1h())
        } else {
            input
        }
    }

    /// The most a call reading `input_tokens` and writing `output_tokens` can cost: every
    /// input token at the dearest of the input, cache-read and cache-write prices, since the
    /// provider decides what it caches. Saturates like [`cost`](Self::cost).
    pub fn worst_case_cost(&self, input_tokens: u64, output_tokens: u64) -> Decimal {
        self.worst_case_cost_with(input_tokens, output_tokens, None)
    }

    /// [`worst_case_cost`](Self::worst_case_cost) for a call made with `cache`, every input
    /// token at [`dearest_input`](Self::dearest_input).
    pub fn worst_case_cost_with(
        &self,
        input_tokens: u64,
        output_tokens: u64,
        cache: Option<super::PromptCache>,
    ) -> Decimal {
        worst_case_at(
            self.dearest_input(cache),
            self.output_per_mtok,
            input_tokens,
            output_tokens,
        )
    }
}

/// A price's rates, USD per million tokens, defaults resolved: input, cache read, cache
/// write, 1-hour cache write, output. Resolved once per run rather than on every call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rates {
    rates: [Decimal; 5],
    /// The scale a zero term at each rate gives a sum: a cost's scale is its terms' (and so is
    /// how it prints), zero ones included.
    zero_scales: [u32; 5],
}

impl Rates {
    /// [`Price::cost`].
    pub(crate) fn cost(&self, usage: Usage) -> Decimal {
        let cached = usage
            .cache_read_tokens
            .saturating_add(usage.cache_write_tokens);
        let tokens = [
            usage.input_tokens.saturating_sub(cached),
            usage.cache_read_tokens,
            usage
                .cache_write_tokens
                .saturating_sub(usage.cache_write_1h_tokens),
            usage.cache_write_1h_tokens.min(usage.cache_write_tokens),
            usage.output_tokens,
        ];
        // Most calls read and write no cache: their terms are zero, and only lend the sum
        // their scale, which is added once instead of multiplied out.
        let mut scale = 0;
        let mut sum = Some(Decimal::ZERO);
        for ((&n, &p), &zero_scale) in tokens.iter().zip(&self.rates).zip(&self.zero_scales) {
            if n == 0 {
                scale = scale.max(zero_scale);
            } else {
                sum = sum.and_then(|acc| acc.checked_add(Decimal::from(n).checked_mul(p)?));
            }
        }
        per_mtok(sum.map(|mut s| {
            if s.scale() < scale {
                s.rescale(scale);
            }
            s
        }))
    }

    /// The output rate.
    pub(crate) fn output(&self) -> Decimal {
        self.rates[4]
    }
}

/// The worst case of a call at input and output rates (USD per million tokens), saturating.
pub(crate) fn worst_case_at(input: Decimal, output: Decimal, inputs: u64, outputs: u64) -> Decimal {
    let term = |n: u64, p: Decimal| Decimal::from(n).checked_mul(p);
    per_mtok(term(inputs, input).and_then(|i| i.checked_add(term(outputs, output)?)))
}

/// A sum of `tokens × USD per million tokens` as USD; one that overflowed is `Decimal::MAX`.
fn per_mtok(sum: Option<Decimal>) -> Decimal {
    match sum {
        Some(s) => s / Decimal::from(1_000_000u32),
        None => Decimal::MAX,
    }
}

/// Model id → price. A model with no known price costs zero (a local server, say), and
/// the first such lookup logs one warning.
///
/// ```
/// use rust_decimal::Decimal;
/// use subcontract::model::{Price, PriceTable, Usage};
///
/// let mut prices = PriceTable::new();
/// prices.insert("scripted:demo", Price::per_mtok(Decimal::new(40, 2), Decimal::new(160, 2)));
/// let usage = Usage::new(1_000_000, 500_000);
/// assert_eq!(prices.cost("scripted:demo", usage), Decimal::new(120, 2));
/// assert_eq!(prices.cost("ollama:llama3", usage), Decimal::ZERO);
/// ```
#[derive(Debug, Clone, Default)]
pub struct PriceTable {
    prices: HashMap<String, Price>,
}

impl PriceTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces the price of `model` (`provider:model`).
    pub fn insert(&mut self, model: impl Into<String>, price: Price) -> &mut Self {
        self.prices.insert(model.into(), price);
        self
    }

    /// Adds or replaces every price of `other`.
    pub fn extend(&mut self, other: PriceTable) -> &mut Self {
        self.prices.extend(other.prices);
        self
    }

    /// The price of `model`, if known. A dated variant (`openai:gpt-4.1-mini-2025-04-14`) falls
    /// back to the longest known prefix (`openai:gpt-4.1-mini`).
    pub fn get(&self, model: &str) -> Option<Price> {
        if let Some(p) = self.prices.get(model) {
            return Some(*p);
        }
        self.prices
            .iter()
            .filter(|(k, _)| model.starts_with(k.as_str()) && model[k.len()..].starts_with('-'))
            .max_by_key(|(k, _)| k.len())
            .map(|(_, p)| *p)
    }

    /// The cost of `usage` on `model`; zero when its price is unknown.
    pub fn cost(&self, model: &str, usage: Usage) -> Decimal {
        cost_at(self.get(model).map(|p| p.rates()), model, usage)
    }

    /// The prices of common OpenAI and Anthropic models, as shipped with this crate (see
    /// `src/model/prices.toml` for the date they were checked).
    ///
    /// ```
    /// use subcontract::model::PriceTable;
    ///
    /// let prices = PriceTable::builtin();
    /// assert!(prices.get("openai:gpt-4.1-mini-2025-04-14").is_some());
    /// assert!(prices.get("anthropic:claude-sonnet-4-5").is_some());
    /// ```
    pub fn builtin() -> Self {
        // The file ships with the crate and a test parses it: failing here is a build defect.
        Self::from_toml_str(include_str!("prices.toml"))
            .expect("invariant: the built-in prices.toml parses (tested)")
    }

    /// The built-in table, parsed once per process and shared: the default of every context
    /// ([`CtxBuilder`](crate::CtxBuilder)), so that making one costs no parse.
    pub(crate) fn builtin_shared() -> std::sync::Arc<Self> {
        static BUILTIN: std::sync::OnceLock<std::sync::Arc<PriceTable>> =
            std::sync::OnceLock::new();
        BUILTIN
            .get_or_init(|| std::sync::Arc::new(Self::builtin()))
            .clone()
    }

    /// A table from TOML text: `[prices."provider:model"]` tables with `input_per_mtok` and
    /// `output_per_mtok` as decimal strings, the format of the built-in table, and optionally
    /// `cache_read_per_mtok`, `cache_write_per_mtok` and `cache_write_1h_per_mtok` (defaults:
    /// see [`Price`]). A negative
    /// price is refused.
    pub fn from_toml_str(text: &str) -> Result<Self, PriceError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            #[serde(default)]
            prices: HashMap<String, Price>,
        }
        let file: File = toml::from_str(text).map_err(|e| PriceError::Parse(e.to_string()))?;
        // A negative price would count a call as paying money back: refuse it, naming the
        // first offender in model order so the message is the same on every run.
        let mut models: Vec<(&String, &Price)> = file.prices.iter().collect();
        models.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (model, p) in models {
            for (column, value) in [
                ("input_per_mtok", Some(p.input_per_mtok)),
                ("output_per_mtok", Some(p.output_per_mtok)),
                ("cache_read_per_mtok", p.cache_read_per_mtok),
                ("cache_write_per_mtok", p.cache_write_per_mtok),
                ("cache_write_1h_per_mtok", p.cache_write_1h_per_mtok),
            ] {
                if let Some(v) = value.filter(|v| v.is_sign_negative() && !v.is_zero()) {
                    return Err(PriceError::Negative {
                        model: model.clone(),
                        column,
                        value: v,
                    });
                }
            }
        }
        Ok(PriceTable {
            prices: file.prices,
        })
    }

    /// A table from a TOML file (see [`PriceTable::from_toml_str`]). To override the built-in
    /// prices, [`extend`](PriceTable::extend) [`PriceTable::builtin`] with it.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<Self, PriceError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| PriceError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_toml_str(&text).map_err(|e| match e {
            PriceError::Parse(m) => PriceError::Parse(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    /// Number of priced models.
    pub fn len(&self) -> usize {
        self.prices.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.prices.is_empty()
    }
}

/// A price table that could not be read.
#[derive(thiserror::Error)]
pub enum PriceError {
    /// The file could not be read.
    #[error("cannot read price table {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The text is not a price table.
    #[error("invalid price table: {0}")]
    Parse(String),
    /// A price is below zero.
    #[error("invalid price table: `{column}` of `{model}` is negative ({value}); prices are USD per million tokens, 0 or more")]
    Negative {
        /// The model.
        model: String,
        /// The column (`input_per_mtok`, …).
        column: &'static str,
        /// The price given.
        value: Decimal,
    },
}

crate::debug_as_display!(PriceError);

/// The cost of `usage` at `price`, looked up once for `model`; zero (with the one warning)
/// when it is unknown. The run loop looks a model's price up once per run, not per turn.
pub(crate) fn cost_at(rates: Option<Rates>, model: &str, usage: Usage) -> Decimal {
    match rates {
        Some(r) => r.cost(usage),
        None => {
            warn_unpriced(model);
            Decimal::ZERO
        }
    }
}

fn warn_unpriced(model: &str) {
    // One warning per process is enough to tell a user that costs read zero; repeating it
    // on every turn would drown the log.
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        tracing::warn!(
            model,
            "no price known for this model: its calls are counted as costing 0 USD"
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Skipping the zero terms changes neither a cost nor how it prints: against the sum of
    /// all five terms, on seeded random prices and usages.
    #[test]
    fn a_cost_is_the_sum_of_every_term_to_the_digit() {
        let bases = [
            "0.40",
            "1.60",
            "3",
            "15",
            "0.075",
            "2.5",
            "0.1",
            "0.000001",
            "1234.5678",
            "0",
            "0.30",
            "75",
        ];
        let mut seed: u64 = 7;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..20_000 {
            let mut pick = || -> Decimal { bases[(rnd() % 12) as usize].parse().unwrap() };
            let mut price = Price::per_mtok(pick(), pick());
            if pick() > Decimal::ONE {
                price = price.with_cache(pick(), pick());
            }
            let mut n = || match rnd() % 4 {
                0 => 0,
                1 => rnd() % 1_000,
                2 => rnd() % 10_000_000,
                _ => rnd() % 100,
            };
            let (input, read, write, write_1h, output) = (n(), n(), n(), n(), n());
            let mut usage = Usage::new(input + read + write, output);
            usage.cache_read_tokens = read;
            usage.cache_write_tokens = write;
            usage.cache_write_1h_tokens = write_1h.min(write);
            let r = price.rates().rates;
            let tokens = [
                input,
                read,
                write - usage.cache_write_1h_tokens,
                usage.cache_write_1h_tokens,
                output,
            ];
            let full = tokens
                .iter()
                .zip(&r)
                .try_fold(Decimal::ZERO, |acc, (&t, &p)| {
                    acc.checked_add(Decimal::from(t).checked_mul(p)?)
                });
            let expected = per_mtok(full);
            let got = price.cost(usage);
            assert_eq!(got.to_string(), expected.to_string(), "{price:?} {usage:?}");
        }
    }

    #[test]
    fn builtin_prices_parse_and_cover_the_common_models() {
        let prices = PriceTable::builtin();
        for model in [
            "openai:gpt-4.1",
            "openai:gpt-4.1-mini",
            "openai:gpt-4.1-nano",
            "openai:gpt-4o",
            "openai:gpt-4o-mini",
            "openai:o3",
            "openai:o4-mini",
            "openai:gpt-5-mini",
            "anthropic:claude-opus-4-1",
            "anthropic:claude-sonnet-4-5-20250929",
            "anthropic:claude-haiku-4-5",
            "anthropic:claude-3-5-haiku-20241022",
        ] {
            assert!(prices.get(model).is_some(), "{model}");
        }
        let p = prices
            .get("openai:gpt-4.1-mini-2025-04-14")
            .expect("prefix fallback");
        assert_eq!(p.input_per_mtok, Decimal::new(40, 2));
        assert_eq!(p.output_per_mtok, Decimal::new(160, 2));
    }

    #[test]
    fn a_user_file_overrides_builtin_prices() {
        let dir = tempfile::tempdir().expect("invariant: temp dir");
        let path = dir.path().join("prices.toml");
        std::fs::write(
            &path,
            "[prices.\"openai:gpt-4.1\"]\ninput_per_mtok = \"1\"\noutput_per_mtok = \"2\"\n",
        )
        .expect("invariant: temp file");
        let mut prices = PriceTable::builtin();
        prices.extend(PriceTable::from_toml_file(&path).expect("valid file"));
        assert_eq!(
            prices.get("openai:gpt-4.1"),
            Some(Price::per_mtok(Decimal::ONE, Decimal::TWO))
        );
        assert!(matches!(
            PriceTable::from_toml_str("[prices.x]\ninput = 1"),
            Err(PriceError::Parse(_))
        ));
        assert!(matches!(
            PriceTable::from_toml_file(dir.path().join("missing.toml")),
            Err(PriceError::Io { .. })
        ));
    }

    #[test]
    fn cache_reads_and_writes_have_their_own_prices() {
        let prices = PriceTable::builtin();
        // Anthropic: 1M uncached + 1M written + 1M read + 1M out on Sonnet 4.5.
        let usage = Usage {
            input_tokens: 3_000_000,
            output_tokens: 1_000_000,
            cache_read_tokens: 1_000_000,
            cache_write_tokens: 1_000_000,
            cache_write_1h_tokens: 0,
        };
        let cost = prices.cost("anthropic:claude-sonnet-4-5", usage);
        assert_eq!(cost, Decimal::new(3_00 + 3_75 + 30 + 15_00, 2), "{cost}");
        // OpenAI's cached input on gpt-4.1-mini: 1M, of which 0.5M cached.
        let usage = Usage {
            input_tokens: 1_000_000,
            cache_read_tokens: 500_000,
            ..Usage::default()
        };
        assert_eq!(
            prices.cost("openai:gpt-4.1-mini", usage),
            Decimal::new(25, 2)
        );
        // Columns left out: reads at the input price, writes at 1.25 times it.
        let p = Price::per_mtok(Decimal::TWO, Decimal::ZERO);
        let only = |read, write| Usage {
            input_tokens: 1_000_000,
            cache_read_tokens: read,
            cache_write_tokens: write,
            ..Usage::default()
        };
        assert_eq!(p.cost(only(1_000_000, 0)), Decimal::TWO);
        assert_eq!(p.cost(only(0, 1_000_000)), Decimal::new(250, 2));
        // A worst case assumes every input token is written to the cache.
        assert_eq!(p.worst_case_cost(1_000_000, 0), Decimal::new(250, 2));
        // 1-hour writes: twice the input price, in the cost and the worst case of such a call.
        let hourly = Usage {
            cache_write_1h_tokens: 1_000_000,
            ..only(0, 1_000_000)
        };
        assert_eq!(p.cost(hourly), Decimal::new(4, 0));
        let one_hour = Some(crate::model::PromptCache::OneHour);
        assert_eq!(
            p.worst_case_cost_with(1_000_000, 0, one_hour),
            Decimal::new(4, 0)
        );
        assert_eq!(
            p.worst_case_cost_with(1_000_000, 0, None),
            Decimal::new(250, 2)
        );
        assert!(PriceTable::from_toml_str(
            "[prices.m]\ninput_per_mtok = \"1\"\noutput_per_mtok = \"2\"\ncache_read_per_mtok = \"0.1\"\ncache_write_per_mtok = \"1.25\"\n"
        )
        .expect("cache columns parse")
        .get("m")
        .is_some_and(|p| p.cache_read() == Decimal::new(1, 1) && p.cache_write() == Decimal::new(125, 2)));
    }

    #[test]
    fn extreme_prices_and_counts_saturate_instead_of_panicking() {
        let huge = Price::per_mtok(Decimal::MAX, Decimal::MAX);
        let usage = Usage::new(u64::MAX, u64::MAX);
        assert_eq!(huge.cost(usage), Decimal::MAX);
        assert_eq!(huge.worst_case_cost(u64::MAX, u64::MAX), Decimal::MAX);
        assert_eq!(huge.cache_write(), Decimal::MAX);
        let normal = Price::per_mtok(Decimal::ONE, Decimal::ONE);
        assert!(normal.cost(usage) > Decimal::from(u64::MAX / 1_000_000));
    }

    #[test]
    fn a_misspelt_column_is_refused_not_defaulted() {
        let text = "[prices.\"openai:x\"]\ninput_per_mtok = \"1\"\noutput_per_mtok = \"2\"\ncache_read_per_mtk = \"0.1\"\n";
        let err = PriceTable::from_toml_str(text).expect_err("misspelt column");
        let msg = err.to_string();
        assert!(
            msg.contains("cache_read_per_mtk") && msg.contains("cache_read_per_mtok"),
            "{msg}"
        );
    }

    #[test]
    fn negative_prices_are_refused_naming_model_and_column() {
        for (column, text) in [
            (
                "input_per_mtok",
                "input_per_mtok = \"-1\"\noutput_per_mtok = \"2\"",
            ),
            (
                "output_per_mtok",
                "input_per_mtok = \"1\"\noutput_per_mtok = \"-0.5\"",
            ),
            (
                "cache_write_per_mtok",
                "input_per_mtok = \"1\"\noutput_per_mtok = \"2\"\ncache_write_per_mtok = \"-3\"",
            ),
        ] {
            let err = PriceTable::from_toml_str(&format!("[prices.\"openai:x\"]\n{text}\n"))
                .expect_err("negative");
            assert!(
                matches!(&err, PriceError::Negative { model, column: c, .. } if model == "openai:x" && *c == column),
                "{err}"
            );
            assert!(err.to_string().contains(column), "{err}");
        }
        // Zero, even written "-0", is a price (a free local model).
        assert!(PriceTable::from_toml_str(
            "[prices.m]\ninput_per_mtok = \"-0\"\noutput_per_mtok = \"0\"\n"
        )
        .is_ok());
    }
}
