//! Prices per million tokens, and the cost of a call.

use std::collections::HashMap;
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
        match self.get(model) {
            Some(p) => p.cost(usage),
            None => {
                warn_unpriced(model);
                Decimal::ZERO
            }
        }
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
