//! Budgets that fork from their parent and charge every spend upward (invariant 2).
//!
//! A [`Budget`] is a node in a tree. A model call first [`reserve`](Budget::reserve)s its
//! worst-case cost in its node *and every ancestor*, atomically; the call then
//! [`settle`](Reservation::settle)s to its actual cost. Because the check and the reservation
//! happen under the locks of the whole chain, no node's `spent + reserved` can pass its limit,
//! however many children spend at once.

use std::sync::{Arc, Mutex, MutexGuard};

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// Why a reservation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// Not enough USD left in `node` (the node itself or an ancestor).
    #[error("budget exhausted at {node}: {spent} USD spent and {reserved} USD reserved of {limit} USD; the next call may cost up to {requested} USD")]
    Usd {
        /// Label of the node that refused (its run id).
        node: String,
        /// Its limit.
        limit: Decimal,
        /// Spent so far.
        spent: Decimal,
        /// Reserved by calls in flight.
        reserved: Decimal,
        /// What this call asked for.
        requested: Decimal,
    },
    /// The model-call limit of `node` is reached.
    #[error("model-call limit reached at {node}: {used} of {limit} calls used or in flight")]
    Calls {
        /// Label of the node that refused.
        node: String,
        /// Its limit.
        limit: u64,
        /// Calls made and in flight.
        used: u64,
    },
}

/// A point-in-time view of one budget node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetSnapshot {
    /// USD limit, if any.
    pub limit_usd: Option<Decimal>,
    /// USD spent by settled calls in this node and its descendants.
    pub spent_usd: Decimal,
    /// USD reserved by calls in flight.
    pub reserved_usd: Decimal,
    /// Model-call limit, if any.
    pub limit_calls: Option<u64>,
    /// Settled model calls.
    pub calls: u64,
    /// Model calls in flight.
    pub reserved_calls: u64,
}

#[derive(Debug, Default)]
struct State {
    spent_usd: Decimal,
    reserved_usd: Decimal,
    calls: u64,
    reserved_calls: u64,
}

#[derive(Debug)]
struct Node {
    label: Arc<str>,
    limit_usd: Option<Decimal>,
    limit_calls: Option<u64>,
    parent: Option<Arc<Node>>,
    state: Mutex<State>,
}

impl Node {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the counters half-updated (each update
        // is a handful of additions), so a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// This node and its ancestors, leaf first. Locks are always taken in this order (deeper
    /// first), so two chains can never wait on each other in a cycle. An iterator, not a list:
    /// forking a child walks the chain, and reservation bookkeeping should not allocate.
    fn chain(&self) -> impl Iterator<Item = &Node> {
        std::iter::successors(Some(self), |n| n.parent.as_deref())
    }

    fn remaining_usd(&self) -> Option<Decimal> {
        let mut min: Option<Decimal> = None;
        for n in self.chain() {
            if let Some(limit) = n.limit_usd {
                let s = n.lock();
                let left = (limit - s.spent_usd - s.reserved_usd).max(Decimal::ZERO);
                min = Some(min.map_or(left, |m| m.min(left)));
            }
        }
        min
    }

    fn remaining_calls(&self) -> Option<u64> {
        let mut min: Option<u64> = None;
        for n in self.chain() {
            if let Some(limit) = n.limit_calls {
                let s = n.lock();
                let left = limit.saturating_sub(s.calls + s.reserved_calls);
                min = Some(min.map_or(left, |m| m.min(left)));
            }
        }
        min
    }
}

/// A node of a budget tree: a USD limit and a model-call limit (either may be absent), what has
/// been spent, and what calls in flight have reserved. Cloning shares the node.
///
/// ```
/// use rust_decimal::Decimal;
/// use subcontract::Budget;
///
/// let root = Budget::new(Some(Decimal::new(100, 2)), None); // 1.00 USD
/// let child = root.child("root.research-1", Some(Decimal::new(30, 2)), None);
/// let r = child.reserve(Decimal::new(20, 2)).unwrap();
/// r.settle(Decimal::new(5, 2));
/// assert_eq!(child.snapshot().spent_usd, Decimal::new(5, 2));
/// assert_eq!(root.snapshot().spent_usd, Decimal::new(5, 2)); // charged upward
/// assert!(child.reserve(Decimal::new(26, 2)).is_err());     // 0.25 left in the child
/// ```
#[derive(Debug, Clone)]
pub struct Budget {
    node: Arc<Node>,
}

impl Default for Budget {
    fn default() -> Self {
        Self::unlimited()
    }
}

impl Budget {
    /// A root budget with no limits (spends are still counted).
    pub fn unlimited() -> Self {
        Self::new(None, None)
    }

    /// A root budget.
    pub fn new(limit_usd: Option<Decimal>, limit_calls: Option<u64>) -> Self {
        Self::with_label("root", limit_usd, limit_calls)
    }

    /// A root budget with a label used in errors.
    pub fn with_label(
        label: impl Into<Arc<str>>,
        limit_usd: Option<Decimal>,
        limit_calls: Option<u64>,
    ) -> Self {
        Budget {
            node: Arc::new(Node {
                label: label.into(),
                limit_usd,
                limit_calls,
                parent: None,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Forks a child whose limits are `min(limit, what the parent has left)`. Every spend of
    /// the child is charged to this budget and its ancestors too.
    pub fn child(
        &self,
        label: impl Into<Arc<str>>,
        limit_usd: Option<Decimal>,
        limit_calls: Option<u64>,
    ) -> Budget {
        let cap_usd = match (limit_usd, self.node.remaining_usd()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let cap_calls = match (limit_calls, self.node.remaining_calls()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Budget {
            node: Arc::new(Node {
                label: label.into(),
                limit_usd: cap_usd,
                limit_calls: cap_calls,
                parent: Some(self.node.clone()),
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Reserves one model call costing at most `usd` in this node and every ancestor, or
    /// refuses without reserving anything.
    pub fn reserve(&self, usd: Decimal) -> Result<Reservation, BudgetError> {
        let usd = usd.max(Decimal::ZERO);
        reserve_chain(&self.node, usd)?;
        Ok(Reservation {
            node: Some(self.node.clone()),
            usd,
        })
    }

    /// What has been spent and reserved here (including descendants).
    pub fn snapshot(&self) -> BudgetSnapshot {
        let s = self.node.lock();
        BudgetSnapshot {
            limit_usd: self.node.limit_usd,
            spent_usd: s.spent_usd,
            reserved_usd: s.reserved_usd,
            limit_calls: self.node.limit_calls,
            calls: s.calls,
            reserved_calls: s.reserved_calls,
        }
    }

    /// USD that can still be reserved here, taking every ancestor into account; `None` when no
    /// node of the chain has a USD limit.
    pub fn remaining_usd(&self) -> Option<Decimal> {
        self.node.remaining_usd()
    }

    /// This node's USD limit.
    pub fn limit_usd(&self) -> Option<Decimal> {
        self.node.limit_usd
    }

    /// This node's label.
    pub fn label(&self) -> &str {
        &self.node.label
    }
}

/// Checks `node` and its ancestors and reserves in all of them, or in none. Each node's lock
/// is held while its ancestors are checked (leaf first, the one lock order used everywhere),
/// so no other reservation can slip in between the check and the update. Recursion instead of
/// a list of guards: the chain is a few nodes deep and this runs on every model call.
fn reserve_chain(node: &Node, usd: Decimal) -> Result<(), BudgetError> {
    let mut s = node.lock();
    if let Some(limit) = node.limit_usd {
        if s.spent_usd + s.reserved_usd + usd > limit {
            return Err(BudgetError::Usd {
                node: node.label.to_string(),
                limit: limit.normalize(),
                spent: s.spent_usd.normalize(),
                reserved: s.reserved_usd.normalize(),
                requested: usd.round_dp(6).normalize(),
            });
        }
    }
    if let Some(limit) = node.limit_calls {
        if s.calls + s.reserved_calls >= limit {
            return Err(BudgetError::Calls {
                node: node.label.to_string(),
                limit,
                used: s.calls + s.reserved_calls,
            });
        }
    }
    if let Some(parent) = node.parent.as_deref() {
        reserve_chain(parent, usd)?;
    }
    s.reserved_usd += usd;
    s.reserved_calls += 1;
    Ok(())
}

/// Moves one reservation of `usd` to a spend of `actual` (or releases it) in `node` and every
/// ancestor.
fn settle_chain(node: &Node, usd: Decimal, actual: Option<Decimal>) {
    let mut cur = Some(node);
    while let Some(n) = cur {
        let mut s = n.lock();
        s.reserved_usd -= usd;
        s.reserved_calls = s.reserved_calls.saturating_sub(1);
        if let Some(a) = actual {
            s.spent_usd += a;
            s.calls += 1;
        }
        drop(s);
        cur = n.parent.as_deref();
    }
}

/// A reserved model call. [`settle`](Self::settle) it with the actual cost; dropping it
/// unsettled (the call was cancelled or failed before costing anything) releases it.
#[derive(Debug)]
#[must_use = "a reservation holds budget until it is settled or dropped"]
pub struct Reservation {
    node: Option<Arc<Node>>,
    usd: Decimal,
}

impl Reservation {
    /// The reserved amount.
    pub fn amount(&self) -> Decimal {
        self.usd
    }

    /// Turns the reservation into a spend of `actual` USD, in this node and every ancestor.
    ///
    /// The reservation is meant to be an upper bound. If `actual` is larger anyway (a provider
    /// billed more than it was allowed to produce), the real cost is still recorded — money that
    /// was spent is never hidden — and a warning is logged.
    pub fn settle(mut self, actual: Decimal) {
        self.finish(Some(actual.max(Decimal::ZERO)));
    }

    fn finish(&mut self, actual: Option<Decimal>) {
        let Some(node) = self.node.take() else { return };
        if let Some(a) = actual {
            if a > self.usd {
                tracing::warn!(reserved = %self.usd, actual = %a, node = %node.label, "a model call cost more than it reserved");
            }
        }
        settle_chain(&node, self.usd, actual);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.finish(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(cents: i64) -> Decimal {
        Decimal::new(cents, 2)
    }

    #[test]
    fn child_is_capped_by_parent_remaining() {
        let root = Budget::new(Some(usd(100)), None);
        root.reserve(usd(70)).unwrap().settle(usd(70));
        let child = root.child("c", Some(usd(50)), None);
        assert_eq!(child.limit_usd(), Some(usd(30)));
        let unlimited_child = root.child("u", None, None);
        assert_eq!(unlimited_child.limit_usd(), Some(usd(30)));
    }

    #[test]
    fn spends_are_charged_to_every_ancestor() {
        let root = Budget::new(Some(usd(100)), None);
        let a = root.child("a", Some(usd(50)), None);
        let b = a.child("b", Some(usd(20)), None);
        b.reserve(usd(10)).unwrap().settle(usd(7));
        for n in [&root, &a, &b] {
            let s = n.snapshot();
            assert_eq!(s.spent_usd, usd(7));
            assert_eq!(s.reserved_usd, Decimal::ZERO);
            assert_eq!(s.calls, 1);
        }
    }

    #[test]
    fn ancestor_limit_refuses_a_child_spend() {
        let root = Budget::new(Some(usd(10)), None);
        let a = root.child("a", Some(usd(50)), None);
        let err = a.reserve(usd(11)).unwrap_err();
        assert!(matches!(err, BudgetError::Usd { .. }), "{err}");
    }

    #[test]
    fn dropped_reservation_is_released_without_spending() {
        let root = Budget::new(Some(usd(10)), Some(1));
        let r = root.reserve(usd(10)).unwrap();
        assert!(root.reserve(usd(1)).is_err());
        drop(r);
        let s = root.snapshot();
        assert_eq!(
            (s.spent_usd, s.reserved_usd, s.calls),
            (Decimal::ZERO, Decimal::ZERO, 0)
        );
        root.reserve(usd(10)).unwrap().settle(usd(1));
    }

    #[test]
    fn call_limit_counts_calls_in_flight() {
        let root = Budget::new(None, Some(2));
        let _a = root.reserve(Decimal::ZERO).unwrap();
        let _b = root.reserve(Decimal::ZERO).unwrap();
        assert!(matches!(
            root.reserve(Decimal::ZERO),
            Err(BudgetError::Calls {
                limit: 2,
                used: 2,
                ..
            })
        ));
    }

    #[test]
    fn overspend_is_recorded_not_hidden() {
        let root = Budget::new(Some(usd(10)), None);
        root.reserve(usd(1)).unwrap().settle(usd(3));
        assert_eq!(root.snapshot().spent_usd, usd(3));
    }
}
