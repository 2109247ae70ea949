//! Prices per million tokens, and the cost of a call.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Once;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::Usage;

/// The price of one model, in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Price {
    /// USD per million input tokens.
    #[serde(with = "rust_decimal::serde::str")]
    pub input_per_mtok: Decimal,
    /// USD per million output tokens.
    #[serde(with = "rust_decimal::serde::str")]
    pub output_per_mtok: Decimal,
}

impl Price {
    /// A price from USD per million input and output tokens.
    pub fn per_mtok(input: Decimal, output: Decimal) -> Self {
        Price {
            input_per_mtok: input,
            output_per_mtok: output,
        }
    }

    /// The cost of `usage` at this price.
    pub fn cost(&self, usage: Usage) -> Decimal {
        let million = Decimal::from(1_000_000u32);
        (Decimal::from(usage.input_tokens) * self.input_per_mtok
            + Decimal::from(usage.output_tokens) * self.output_per_mtok)
            / million
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
/// let usage = Usage { input_tokens: 1_000_000, output_tokens: 500_000 };
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
        cost_at(self.get(model), model, usage)
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

    /// A table from TOML text: `[prices."provider:model"]` tables with `input_per_mtok` and
    /// `output_per_mtok` as decimal strings, the format of the built-in table.
    pub fn from_toml_str(text: &str) -> Result<Self, PriceError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            #[serde(default)]
            prices: HashMap<String, Price>,
        }
        let file: File = toml::from_str(text).map_err(|e| PriceError::Parse(e.to_string()))?;
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
#[derive(Debug, thiserror::Error)]
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
}

/// The cost of `usage` at `price`, looked up once for `model`; zero (with the one warning)
/// when it is unknown. The run loop looks a model's price up once per run, not per turn.
pub(crate) fn cost_at(price: Option<Price>, model: &str, usage: Usage) -> Decimal {
    match price {
        Some(p) => p.cost(usage),
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
}
