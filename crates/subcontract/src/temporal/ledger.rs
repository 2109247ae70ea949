//! The batch's money, as the workflow keeps it: what settled children spent, what children in
//! flight have reserved (each its whole cap, taken before it is scheduled), and whether the
//! next child may start. Pure bookkeeping, so it replays deterministically and is tested
//! without a server.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// The ledger of one batch (carried over a continue-as-new with the rest of its state).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendLedger {
    /// The batch's limit, if any.
    pub limit_usd: Option<Decimal>,
    /// What one child may spend: its spec's `max_cost_usd`.
    pub child_cap_usd: Option<Decimal>,
    /// Settled: every finished child's charge, earlier runs' lines included.
    pub spent_usd: Decimal,
    /// Reserved by children in flight (the caps they were scheduled with).
    pub reserved_usd: Decimal,
}

/// May the next child start?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Yes, with this cap (reserve it with [`SpendLedger::reserve`]); `None`: no limit at all.
    Start(Option<Decimal>),
    /// Not yet: children in flight hold what it needs and may settle for less.
    Wait,
    /// No: nothing is left, and nothing in flight can give any back.
    OutOfMoney,
}

impl SpendLedger {
    /// What is neither spent nor reserved (`None` without a limit).
    pub fn left_usd(&self) -> Option<Decimal> {
        self.limit_usd.map(|l| {
            l.saturating_sub(self.spent_usd)
                .saturating_sub(self.reserved_usd)
                .max(Decimal::ZERO)
        })
    }

    /// Whether a child may start now, `in_flight` children being out. A child gets its whole
    /// cap when that fits; while children are in flight a child that would get less waits for
    /// them (they usually settle below their caps); with none in flight it gets what is left.
    pub fn admit(&self, in_flight: usize) -> Admission {
        let Some(left) = self.left_usd() else {
            return Admission::Start(self.child_cap_usd);
        };
        match self.child_cap_usd {
            Some(cap) if left >= cap => Admission::Start(Some(cap)),
            _ if in_flight > 0 => Admission::Wait,
            _ if left > Decimal::ZERO => Admission::Start(Some(left)),
            _ => Admission::OutOfMoney,
        }
    }

    /// Takes `cap` before its child is scheduled.
    pub fn reserve(&mut self, cap: Option<Decimal>) {
        if let Some(cap) = cap {
            self.reserved_usd = self.reserved_usd.saturating_add(cap);
        }
    }

    /// Gives back a finished child's reservation and charges what it (all its attempts)
    /// actually spent.
    pub fn settle(&mut self, cap: Option<Decimal>, charged: Decimal) {
        if let Some(cap) = cap {
            self.reserved_usd = self.reserved_usd.saturating_sub(cap).max(Decimal::ZERO);
        }
        self.spent_usd = self.spent_usd.saturating_add(charged.max(Decimal::ZERO));
    }

    /// `spent + reserved`: never above the limit (a provider billing past a call's worst case
    /// aside, which the child reports and its own budget stops at).
    pub fn committed_usd(&self) -> Decimal {
        self.spent_usd.saturating_add(self.reserved_usd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(cents: i64) -> Decimal {
        Decimal::new(cents, 2)
    }

    fn ledger(limit: Option<i64>, cap: Option<i64>) -> SpendLedger {
        SpendLedger {
            limit_usd: limit.map(usd),
            child_cap_usd: cap.map(usd),
            spent_usd: Decimal::ZERO,
            reserved_usd: Decimal::ZERO,
        }
    }

    #[test]
    fn children_get_their_cap_while_it_fits_then_wait_then_get_the_rest() {
        let mut l = ledger(Some(100), Some(30));
        for _ in 0..3 {
            assert_eq!(l.admit(0), Admission::Start(Some(usd(30))));
            l.reserve(Some(usd(30)));
        }
        assert_eq!(l.left_usd(), Some(usd(10)));
        // 10 cents left, three children out: wait for them rather than start one short.
        assert_eq!(l.admit(3), Admission::Wait);
        l.settle(Some(usd(30)), usd(5));
        l.settle(Some(usd(30)), usd(5));
        assert_eq!(l.admit(1), Admission::Start(Some(usd(30))));
        l.settle(Some(usd(30)), usd(30));
        assert_eq!(l.spent_usd, usd(40));
        assert_eq!(l.reserved_usd, Decimal::ZERO);
        l.spent_usd = usd(95);
        // Nothing in flight: the last child gets what is left, then the money is gone.
        assert_eq!(l.admit(0), Admission::Start(Some(usd(5))));
        l.reserve(Some(usd(5)));
        l.settle(Some(usd(5)), usd(5));
        assert_eq!(l.admit(0), Admission::OutOfMoney);
    }

    #[test]
    fn without_a_limit_every_child_starts_with_its_specs_cap() {
        let l = ledger(None, Some(30));
        assert_eq!(l.admit(1000), Admission::Start(Some(usd(30))));
        let l = ledger(None, None);
        assert_eq!(l.admit(0), Admission::Start(None));
        assert_eq!(l.left_usd(), None);
    }

    /// However children are admitted and settle (each at most its cap), `spent + reserved`
    /// never passes the limit.
    #[test]
    fn committed_never_passes_the_limit() {
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        for _ in 0..200 {
            let mut l = ledger(Some(100 + next(900) as i64), Some(1 + next(60) as i64));
            let mut out: Vec<Decimal> = Vec::new();
            for _ in 0..500 {
                if next(3) > 0 {
                    if let Admission::Start(Some(cap)) = l.admit(out.len()) {
                        l.reserve(Some(cap));
                        out.push(cap);
                    }
                } else if !out.is_empty() {
                    let cap = out.swap_remove(next(out.len() as u64) as usize);
                    let charged = cap * Decimal::new(next(101) as i64, 2);
                    l.settle(Some(cap), charged);
                }
                assert!(l.committed_usd() <= l.limit_usd.expect("limited"));
            }
        }
    }
}
