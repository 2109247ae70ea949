//! Budgets that fork from their parent and charge every spend upward (invariant 2).
//!
//! A [`Budget`] is a node in a tree. A model call first [`reserve`](Budget::reserve)s its
//! worst-case cost in its node *and every ancestor*, atomically; the call then
//! [`settle`](Reservation::settle)s to its actual cost. Because the check and the reservation
//! happen under the locks of the whole chain, no node's `spent + reserved` can pass its limit,
//! however many children spend at once.
//!
//! A reservation that does not fit *now*, only because calls in flight hold part of a limit,
//! waits for them to settle, in arrival order: one FIFO queue per tree, so a later request
//! never overtakes an earlier one. A reservation that could not fit even if every call in
//! flight settled to zero (`spent + amount > limit` on some node of its chain) fails at once,
//! and so does a waiting one as soon as settled spends make that true.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

/// Records, before each model call is made, what a run may have spent once that call is paid
/// for: its tree's settled spend plus every reservation in flight, the call's own included.
///
/// An engine that can lose a process in the middle of a call (a worker killed while the
/// provider is answering) charges the lost attempt from the last record, which is never below
/// what the attempt actually spent. A [`Ctx`](crate::Ctx) built with
/// [`CtxBuilder::spend_journal`](crate::CtxBuilder::spend_journal) hands it to every run under
/// it; the run loop awaits it after reserving a call's worst case and before making the call.
#[async_trait::async_trait]
pub trait SpendJournal: Send + Sync {
    /// Records the spend at stake before one call. An error stops the run before the call is
    /// made (its reservation released): money that cannot be recorded is not spent.
    async fn before_call(&self) -> Result<(), String>;
}

/// Why a reservation was refused.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
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
    /// A call under `node` cost more than it had reserved (a provider billed past the worst
    /// case it was allowed), so the node is exhausted: its limit can no longer be guaranteed.
    #[error("budget exhausted at {node}: a provider billed {billed} USD for a call that had reserved {reserved} USD (its worst case), so no further call is made under this budget")]
    Overspent {
        /// Label of the exhausted node.
        node: String,
        /// What the offending call had reserved.
        reserved: Decimal,
        /// What it was billed.
        billed: Decimal,
    },
    /// [`Budget::try_reserve`] only: the amount fits, but earlier reservations are waiting
    /// in this tree and a later one does not overtake them.
    #[error("budget busy at {node}: {waiting} earlier reservation(s) are waiting for calls in flight to settle")]
    Waiting {
        /// Label of the node asked.
        node: String,
        /// Reservations waiting in its tree.
        waiting: usize,
    },
}

crate::debug_as_display!(BudgetError);

/// A USD limit that breaks [`check_limit_usd`]'s rule.
#[derive(Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("must be greater than 0, found {0}")]
pub struct LimitUsdError(pub Decimal);

crate::debug_as_display!(LimitUsdError);

/// The one rule for a USD limit a user gives (a spec's `max_cost_usd`, `subcontract mcp
/// --max-cost-usd`): greater than zero. A zero limit could never afford a priced call, so it is
/// a mistake to report, not a budget to run under; no limit at all is written by leaving it out.
pub fn check_limit_usd(usd: Decimal) -> Result<Decimal, LimitUsdError> {
    if usd > Decimal::ZERO {
        Ok(usd)
    } else {
        Err(LimitUsdError(usd))
    }
}

/// A point-in-time view of one budget node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetSnapshot {
    /// USD limit, if any.
    pub limit_usd: Option<Decimal>,
    /// USD spent by settled calls in this node and its descendants.
    pub spent_usd: Decimal,
    /// USD reserved by calls in flight and by the answer reserves runs hold.
    pub reserved_usd: Decimal,
    /// Model-call limit, if any.
    pub limit_calls: Option<u64>,
    /// Settled model calls.
    pub calls: u64,
    /// Model calls in flight, and one for each answer reserve held.
    pub reserved_calls: u64,
}

/// The first call that cost more than it reserved under a node (which exhausts the node).
#[derive(Debug, Clone, Copy)]
struct Overspend {
    reserved: Decimal,
    billed: Decimal,
}

#[derive(Debug, Default)]
struct State {
    spent_usd: Decimal,
    /// Reserved by calls in flight and by answer reserves ([`Hold`]s) alike.
    reserved_usd: Decimal,
    /// The part of `reserved_usd` that answer reserves hold. A hold is let go only by the run
    /// that holds it, which may be waiting on the caller, so a reservation never waits for one.
    held_usd: Decimal,
    calls: u64,
    /// Calls in flight, and the one call each hold keeps room for.
    reserved_calls: u64,
    overspent: Option<Overspend>,
}

/// Reservations waiting in one tree, oldest first.
#[derive(Debug, Default)]
struct Queue {
    next_id: u64,
    waiters: VecDeque<Waiter>,
}

/// One waiting reservation; its answer goes back through `tx`.
#[derive(Debug)]
struct Waiter {
    id: u64,
    node: Arc<Node>,
    want: Want,
    /// The hold the waiter gives up when it is granted, kept here so that a waiter whose
    /// future is dropped lets it go exactly once.
    own: Option<Hold>,
    tx: oneshot::Sender<Answer>,
}

/// What a waiting exchange is answered with: the call's reservation and the new hold, or the
/// refusal and the hold it came with.
pub(crate) type Answer = Result<(Reservation, Option<Hold>), (BudgetError, Option<Hold>)>;

/// What one reservation asks of every node of its chain: room for a call of `call` USD and
/// a hold of `hold` USD, once a hold of `release` USD (the caller's own, if any) is let go.
#[derive(Debug, Clone, Copy)]
struct Want {
    call: Decimal,
    hold: Option<Decimal>,
    release: Option<Decimal>,
}

impl Want {
    /// A call of `call` and a hold of `hold` beside it, in exchange for `own`.
    #[inline]
    fn new(own: Option<&Hold>, call: Decimal, hold: Option<Decimal>) -> Self {
        Want {
            call: non_negative(call),
            hold: hold.map(non_negative),
            release: own.map(|h| h.usd),
        }
    }

    fn call(usd: Decimal) -> Self {
        Want {
            call: usd,
            hold: None,
            release: None,
        }
    }

    /// The USD it adds to a node's reservations (negative when it gives back more). A call
    /// alone adds itself: no decimal addition of zeros on every model call's reservation.
    #[inline]
    fn extra_usd(&self) -> Decimal {
        match (self.hold, self.release) {
            (None, None) => self.call,
            (hold, release) => self
                .call
                .saturating_add(hold.unwrap_or_default())
                .saturating_sub(release.unwrap_or_default()),
        }
    }

    /// The USD it adds to a node's holds.
    fn extra_held(&self) -> Decimal {
        self.hold
            .unwrap_or_default()
            .saturating_sub(self.release.unwrap_or_default())
    }

    /// The call slots it adds: one for the call, one for a new hold, less the one let go.
    fn extra_calls(&self) -> u64 {
        (1 + u64::from(self.hold.is_some())).saturating_sub(u64::from(self.release.is_some()))
    }

    /// What a refusal names as requested: the call and the hold beside it.
    fn requested(&self) -> Decimal {
        self.call.saturating_add(self.hold.unwrap_or_default())
    }

    /// Whether it needs no room a node does not already give it: it only turns a hold into a
    /// call no dearer than the hold.
    fn takes_no_room(&self) -> bool {
        self.hold.is_none() && self.release.is_some_and(|r| self.call <= r)
    }
}

#[derive(Debug)]
struct Node {
    label: Arc<str>,
    limit_usd: Option<Decimal>,
    limit_calls: Option<u64>,
    parent: Option<Arc<Node>>,
    state: Mutex<State>,
    /// The tree's queue, shared by all its nodes. Lock order: the queue before any node.
    queue: Arc<Mutex<Queue>>,
}

/// `d`, or zero if it is negative: `Decimal::max` compares at a common scale, which costs more
/// than this sign test on every model call's reservation and settlement.
#[inline]
fn non_negative(d: Decimal) -> Decimal {
    if d.is_sign_negative() {
        Decimal::ZERO
    } else {
        d
    }
}

/// Locks `m`. Nothing panics while holding a budget lock in the middle of an update (each
/// update is a handful of saturating additions), so a poisoned lock is still consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Node {
    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Whether the node has a limit of its own, USD or calls.
    fn is_limited(&self) -> bool {
        self.limit_usd.is_some() || self.limit_calls.is_some()
    }

    /// This node and its ancestors, leaf first. Locks are always taken in this order (deeper
    /// first), so two chains can never wait on each other in a cycle. An iterator, not a list:
    /// forking a child walks the chain, and reservation bookkeeping should not allocate.
    fn chain(&self) -> impl Iterator<Item = &Node> {
        std::iter::successors(Some(self), |n| n.parent.as_deref())
    }

    /// The least `limit - f(state)` over the limited nodes of the chain, never below zero.
    fn least_left(&self, used: impl Fn(&State) -> Decimal) -> Option<Decimal> {
        let mut min: Option<Decimal> = None;
        for n in self.chain() {
            if let Some(limit) = n.limit_usd {
                let left = limit.saturating_sub(used(&n.lock())).max(Decimal::ZERO);
                min = Some(min.map_or(left, |m| m.min(left)));
            }
        }
        min
    }

    fn remaining_usd(&self) -> Option<Decimal> {
        self.least_left(|s| s.spent_usd.saturating_add(s.reserved_usd))
    }

    fn remaining_calls(&self) -> Option<u64> {
        let mut min: Option<u64> = None;
        for n in self.chain() {
            if let Some(limit) = n.limit_calls {
                let s = n.lock();
                let left = limit.saturating_sub(s.calls.saturating_add(s.reserved_calls));
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
/// let r = child.try_reserve(Decimal::new(20, 2)).unwrap();
/// r.settle(Decimal::new(5, 2));
/// assert_eq!(child.snapshot().spent_usd, Decimal::new(5, 2));
/// assert_eq!(root.snapshot().spent_usd, Decimal::new(5, 2)); // charged upward
/// assert!(child.try_reserve(Decimal::new(26, 2)).is_err());  // 0.25 left in the child
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
                queue: Arc::default(),
            }),
        }
    }

    /// Forks a child whose limits are `min(limit, what the parent has left)`. Every spend of
    /// the child is charged to this budget and its ancestors too.
    ///
    /// "Left" counts settled spends and the answer reserves held above the child (a parent's
    /// own answer reserve is never the child's to spend), not reservations of calls in flight:
    /// those may settle for less, and the child's reservations wait for them on the ancestors
    /// anyway.
    pub fn child(
        &self,
        label: impl Into<Arc<str>>,
        limit_usd: Option<Decimal>,
        limit_calls: Option<u64>,
    ) -> Budget {
        let cap_usd = match (
            limit_usd,
            self.node
                .least_left(|s| s.spent_usd.saturating_add(s.held_usd)),
        ) {
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
                queue: self.node.queue.clone(),
            }),
        }
    }

    /// Forks a node that only counts: what one run spends (its sub-agents included) is
    /// charged here and upward, and this node has no limit of its own, so every limit above
    /// it still holds and a refusal names the node it always named. A root run keeps one, so
    /// that its total is its own and not that of every run started from the same context.
    pub(crate) fn tally(&self, label: impl Into<Arc<str>>) -> Budget {
        Budget {
            node: Arc::new(Node {
                label: label.into(),
                limit_usd: None,
                limit_calls: None,
                parent: Some(self.node.clone()),
                state: Mutex::new(State::default()),
                queue: self.node.queue.clone(),
            }),
        }
    }

    /// The USD limit of this node, or of the nearest ancestor that has one (a node made by
    /// [`tally`](Self::tally) has none of its own).
    pub(crate) fn nearest_limit_usd(&self) -> Option<Decimal> {
        self.node.chain().find_map(|n| n.limit_usd)
    }

    /// Reserves one model call costing at most `usd` in this node and every ancestor.
    ///
    /// When it does not fit now only because calls in flight hold part of a limit, it waits
    /// for them to settle, behind every reservation that started waiting earlier in this
    /// tree. It fails at once, reserving nothing, when it could not fit even if every call in
    /// flight settled to zero, or when the model-call limit is reached; a waiting reservation
    /// fails as soon as settled spends make it impossible.
    ///
    /// Cancellation-safe: dropping the future while it waits leaves nothing reserved and lets
    /// the next waiter through. Do not hold a [`Reservation`] of the same tree while awaiting
    /// this: the wait could be for that very reservation.
    pub async fn reserve(&self, usd: Decimal) -> Result<Reservation, BudgetError> {
        self.exchange(None, usd, None)
            .await
            .map(|(r, _)| r)
            .map_err(|(e, _)| e)
    }

    /// Reserves one model call costing at most `call` and, beside it, an answer reserve of
    /// `hold` (a [`Hold`]), giving up the hold `own` in the same step: the room a run keeps
    /// for the output-only call that ends it, whatever else spends meanwhile. Holds count
    /// against every limit of the chain like calls in flight (invariant 2 covers them), but no
    /// reservation waits for one: it is let go only by its run, which may be waiting on the
    /// caller. So an exchange waits only for calls in flight, and fails at once when the holds
    /// and spends leave no room; the refusal hands `own` back.
    ///
    /// Turning a hold into a call no dearer than it needs no room and never waits.
    pub(crate) async fn exchange(
        &self,
        own: Option<Hold>,
        call: Decimal,
        hold: Option<Decimal>,
    ) -> Answer {
        let want = Want::new(own.as_ref(), call, hold);
        let (id, rx) = {
            let mut q = lock(&self.node.queue);
            let own = match self.answer_now(&q, want, own) {
                Ok(answer) => {
                    drop(q);
                    return answer;
                }
                Err(own) => own,
            };
            let (tx, rx) = oneshot::channel();
            let id = q.next_id;
            q.next_id += 1;
            q.waiters.push_back(Waiter {
                id,
                node: self.node.clone(),
                want,
                own,
                tx,
            });
            tracing::debug!(node = %self.node.label, requested = %want.requested(), waiting = q.waiters.len(), "a reservation waits for calls in flight to settle");
            (id, rx)
        };
        let mut guard = Unqueue {
            queue: &self.node.queue,
            id,
            armed: true,
        };
        let answer = rx.await;
        guard.armed = false;
        // Every waiter leaves the queue with an answer, except one whose future was dropped.
        answer.expect("invariant: a queued reservation is answered before it leaves the queue")
    }

    /// [`exchange`](Self::exchange)'s answer when it is given without waiting (granted, or
    /// refused), or `own` handed back when the exchange would have to wait: the run loop's
    /// usual case, taken without an `async` state machine, and it tells the loop that no time
    /// passed. Nothing is reserved when it hands `own` back.
    pub(crate) fn exchange_now(
        &self,
        own: Option<Hold>,
        call: Decimal,
        hold: Option<Decimal>,
    ) -> Result<Answer, Option<Hold>> {
        let want = Want::new(own.as_ref(), call, hold);
        let q = lock(&self.node.queue);
        let answer = self.answer_now(&q, want, own);
        drop(q);
        answer
    }

    /// [`reserve`](Self::reserve) when it is answered without waiting; `None` when it would
    /// wait (nothing is reserved then).
    pub(crate) fn reserve_now(&self, usd: Decimal) -> Option<Result<Reservation, BudgetError>> {
        let want = Want::call(non_negative(usd));
        let q = lock(&self.node.queue);
        if let Some(e) = impossible(&self.node, want) {
            return Some(Err(e));
        }
        // A call alone adds itself to each node.
        if q.waiters.is_empty() && reserve_chain_of(&self.node, want, want.call).is_ok() {
            drop(q);
            return Some(Ok(self.reservation(want.call)));
        }
        None
    }

    /// The answer to `want` at once, the queue `q` locked: refused when it could never fit,
    /// granted when it fits and no earlier reservation waits (or it takes no room); otherwise
    /// `own` back, to wait.
    fn answer_now(&self, q: &Queue, want: Want, own: Option<Hold>) -> Result<Answer, Option<Hold>> {
        if let Some(e) = impossible(&self.node, want) {
            return Ok(Err((e, own)));
        }
        if (q.waiters.is_empty() || want.takes_no_room()) && reserve_chain(&self.node, want).is_ok()
        {
            return Ok(Ok(self.grant(want, own)));
        }
        Err(own)
    }

    /// The reservation and hold `want` was granted (already counted in the chain); `own`, let
    /// go by the grant, is forgotten.
    fn grant(&self, want: Want, own: Option<Hold>) -> (Reservation, Option<Hold>) {
        if let Some(h) = own {
            h.forget();
        }
        let hold = want.hold.map(|usd| Hold {
            node: Some(self.node.clone()),
            usd,
        });
        (self.reservation(want.call), hold)
    }

    /// Reserves one model call costing at most `usd` now, or refuses without reserving
    /// anything: like [`reserve`](Self::reserve), but instead of waiting it fails with
    /// [`BudgetError::Usd`] (calls in flight hold too much) or [`BudgetError::Waiting`]
    /// (earlier reservations are waiting).
    pub fn try_reserve(&self, usd: Decimal) -> Result<Reservation, BudgetError> {
        let want = Want::call(non_negative(usd));
        let q = lock(&self.node.queue);
        if let Some(e) = impossible(&self.node, want) {
            return Err(e);
        }
        if !q.waiters.is_empty() {
            return Err(BudgetError::Waiting {
                node: self.node.label.to_string(),
                waiting: q.waiters.len(),
            });
        }
        reserve_chain(&self.node, want)?;
        Ok(self.reservation(want.call))
    }

    /// Whether any node of the chain has a limit, USD or calls: an unlimited chain keeps no
    /// answer reserve. Walks the chain without taking a lock.
    pub(crate) fn is_limited(&self) -> bool {
        self.node.chain().any(Node::is_limited)
    }

    fn reservation(&self, usd: Decimal) -> Reservation {
        Reservation {
            node: Some(self.node.clone()),
            usd,
        }
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

/// Removes a waiter whose future is dropped before its answer came. An answer that already
/// came (a reservation) is dropped with the receiver after this, which releases it.
struct Unqueue<'a> {
    queue: &'a Mutex<Queue>,
    id: u64,
    armed: bool,
}

impl Drop for Unqueue<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut q = lock(self.queue);
            let i = q.waiters.iter().position(|w| w.id == self.id);
            let removed = i.and_then(|i| q.waiters.remove(i));
            drop(q);
            // Its hold, if it gave one up, is let go now, the queue unlocked.
            drop(removed);
            // The head may have been the one blocking the others.
            admit_waiters(self.queue);
        }
    }
}

/// Why `want` could never be reserved at `node`, whatever the calls in flight settle to: a
/// node of the chain is exhausted by an overspend, `spent + held + want` passes its limit (a
/// hold is let go only by its run, which may be waiting on the caller), or its call limit is
/// reached.
fn impossible(node: &Node, want: Want) -> Option<BudgetError> {
    // The leaf-most refusal, unless an overspend anywhere explains it better.
    let mut refusal = None;
    // Only a USD limit needs it (most chains have none).
    let mut extra = None;
    // A node with no limit can refuse nothing: an overspend is marked only on limited nodes.
    // Skipped without its lock, which most nodes are (a run's tally, an unlimited root).
    for n in node.chain().filter(|n| n.is_limited()) {
        let s = n.lock();
        if let Some(o) = s.overspent {
            return Some(BudgetError::Overspent {
                node: n.label.to_string(),
                reserved: o.reserved.normalize(),
                billed: o.billed.normalize(),
            });
        }
        if refusal.is_none() {
            refusal = match n.limit_usd {
                Some(limit)
                    if s.spent_usd
                        .checked_add(s.held_usd)
                        .and_then(|x| x.checked_add(*extra.get_or_insert_with(|| want.extra_usd())))
                        .is_none_or(|x| x > limit) =>
                {
                    Some(usd_error(n, &s, limit, want.requested()))
                }
                _ => calls_error(n, &s, want),
            };
        }
    }
    refusal
}

fn usd_error(n: &Node, s: &State, limit: Decimal, usd: Decimal) -> BudgetError {
    BudgetError::Usd {
        node: n.label.to_string(),
        limit: limit.normalize(),
        spent: s.spent_usd.normalize(),
        reserved: s.reserved_usd.normalize(),
        requested: usd.round_dp(6).normalize(),
    }
}

fn calls_error(n: &Node, s: &State, want: Want) -> Option<BudgetError> {
    let limit = n.limit_calls?;
    let used = s.calls.saturating_add(s.reserved_calls);
    let after = used.saturating_add(want.extra_calls());
    let released = u64::from(want.release.is_some());
    (after > limit).then(|| BudgetError::Calls {
        node: n.label.to_string(),
        limit,
        used: used.saturating_sub(released),
    })
}

/// Checks `node` and its ancestors and reserves `want` in all of them, or in none. Each node's
/// lock is held while its ancestors are checked (leaf first, the one lock order used
/// everywhere), so no other reservation can slip in between the check and the update.
/// Recursion instead of a list of guards: the chain is a few nodes deep and this runs on every
/// model call.
fn reserve_chain(node: &Node, want: Want) -> Result<(), BudgetError> {
    reserve_chain_of(node, want, want.extra_usd())
}

/// [`reserve_chain`], with the USD `want` adds to each node (`extra`) worked out once.
fn reserve_chain_of(node: &Node, want: Want, extra: Decimal) -> Result<(), BudgetError> {
    let mut s = node.lock();
    if let Some(limit) = node.limit_usd {
        let fits = s
            .spent_usd
            .checked_add(s.reserved_usd)
            .and_then(|x| x.checked_add(extra))
            .is_some_and(|x| x <= limit);
        if !fits || s.overspent.is_some() {
            return Err(usd_error(node, &s, limit, want.requested()));
        }
    }
    if let Some(e) = calls_error(node, &s, want) {
        return Err(e);
    }
    if let Some(parent) = node.parent.as_deref() {
        reserve_chain_of(parent, want, extra)?;
    }
    s.reserved_usd = non_negative(s.reserved_usd.saturating_add(extra));
    if want.hold.is_some() || want.release.is_some() {
        s.held_usd = non_negative(s.held_usd.saturating_add(want.extra_held()));
        if want.release.is_some() {
            s.reserved_calls = s.reserved_calls.saturating_sub(1);
        }
        if want.hold.is_some() {
            s.reserved_calls = s.reserved_calls.saturating_add(1);
        }
    }
    s.reserved_calls = s.reserved_calls.saturating_add(1);
    Ok(())
}

/// Answers the waiters of a tree after something changed: in arrival order, each one that fits
/// is granted until one does not (it blocks those behind it); any that has become impossible
/// is refused wherever it stands.
fn admit_waiters(queue: &Mutex<Queue>) {
    // Answers whose waiter went away meanwhile; released (which locks the queue again) only
    // after the queue is unlocked.
    let mut unclaimed = Vec::new();
    let mut q = lock(queue);
    let mut blocked = false;
    let mut i = 0;
    while i < q.waiters.len() {
        let w = &q.waiters[i];
        let refusal = impossible(&w.node, w.want);
        if refusal.is_none() && (blocked || reserve_chain(&w.node, w.want).is_err()) {
            blocked = true;
            i += 1;
            continue;
        }
        if let Some(mut w) = q.waiters.remove(i) {
            let answer = match refusal {
                Some(e) => Err((e, w.own.take())),
                None => Ok(Budget {
                    node: w.node.clone(),
                }
                .grant(w.want, w.own.take())),
            };
            if let Err(answer) = w.tx.send(answer) {
                unclaimed.push(answer);
            }
        }
    }
    drop(q);
    drop(unclaimed);
}

/// Moves one reservation of `usd` to a spend of `actual` (or releases it) in `node` and every
/// ancestor. A spend above the reservation exhausts every limited node of the chain.
fn settle_chain(node: &Node, usd: Decimal, actual: Option<Decimal>) {
    let over = actual.filter(|a| *a > usd).map(|billed| Overspend {
        reserved: usd,
        billed,
    });
    let mut cur = Some(node);
    while let Some(n) = cur {
        let mut s = n.lock();
        s.reserved_usd = non_negative(s.reserved_usd.saturating_sub(usd));
        s.reserved_calls = s.reserved_calls.saturating_sub(1);
        if let Some(a) = actual {
            s.spent_usd = s.spent_usd.saturating_add(a);
            s.calls = s.calls.saturating_add(1);
        }
        if over.is_some() && n.limit_usd.is_some() && s.overspent.is_none() {
            s.overspent = over;
        }
        drop(s);
        cur = n.parent.as_deref();
    }
    admit_waiters(&node.queue);
}

/// An answer reserve: room a run keeps in its budget and every ancestor for the output-only
/// call that ends it, made by [`Budget::exchange`] beside a call. It counts as reserved (so
/// `spent + reserved` never passes a limit, holds included) and keeps one call's room under
/// a call limit. Dropping it lets it go.
#[derive(Debug)]
#[must_use = "a hold keeps budget until it is exchanged or dropped"]
pub(crate) struct Hold {
    node: Option<Arc<Node>>,
    usd: Decimal,
}

impl Hold {
    /// The USD held.
    pub(crate) fn amount(&self) -> Decimal {
        self.usd
    }

    /// Forgets the hold without letting it go: a grant has already moved it.
    fn forget(mut self) {
        self.node = None;
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let Some(node) = self.node.take() else { return };
        let mut cur = Some(&*node);
        while let Some(n) = cur {
            let mut s = n.lock();
            s.reserved_usd = non_negative(s.reserved_usd.saturating_sub(self.usd));
            s.held_usd = non_negative(s.held_usd.saturating_sub(self.usd));
            s.reserved_calls = s.reserved_calls.saturating_sub(1);
            drop(s);
            cur = n.parent.as_deref();
        }
        admit_waiters(&node.queue);
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
    /// was spent is never hidden — a warning is logged, and every node of the chain that has a
    /// USD limit is exhausted: its limit can no longer be guaranteed, so no further
    /// reservation under it succeeds ([`BudgetError::Overspent`]), and its waiters fail.
    pub fn settle(mut self, actual: Decimal) {
        self.finish(Some(non_negative(actual)));
    }

    fn finish(&mut self, actual: Option<Decimal>) {
        let Some(node) = self.node.take() else { return };
        if let Some(a) = actual {
            if a > self.usd {
                tracing::warn!(reserved = %self.usd, actual = %a, node = %node.label, "a model call cost more than it reserved; its budget is exhausted");
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
    fn a_usd_limit_must_be_positive() {
        assert_eq!(check_limit_usd(usd(1)), Ok(usd(1)));
        for bad in [Decimal::ZERO, usd(-1), Decimal::NEGATIVE_ONE.round_dp(0)] {
            let err = check_limit_usd(bad).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("must be greater than 0, found {bad}")
            );
        }
    }

    #[test]
    fn child_is_capped_by_parent_remaining() {
        let root = Budget::new(Some(usd(100)), None);
        root.try_reserve(usd(70)).unwrap().settle(usd(70));
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
        b.try_reserve(usd(10)).unwrap().settle(usd(7));
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
        let err = a.try_reserve(usd(11)).unwrap_err();
        assert!(matches!(err, BudgetError::Usd { .. }), "{err}");
    }

    #[test]
    fn dropped_reservation_is_released_without_spending() {
        let root = Budget::new(Some(usd(10)), Some(1));
        let r = root.try_reserve(usd(10)).unwrap();
        assert!(root.try_reserve(usd(1)).is_err());
        drop(r);
        let s = root.snapshot();
        assert_eq!(
            (s.spent_usd, s.reserved_usd, s.calls),
            (Decimal::ZERO, Decimal::ZERO, 0)
        );
        root.try_reserve(usd(10)).unwrap().settle(usd(1));
    }

    #[test]
    fn call_limit_counts_calls_in_flight() {
        let root = Budget::new(None, Some(2));
        let _a = root.try_reserve(Decimal::ZERO).unwrap();
        let _b = root.try_reserve(Decimal::ZERO).unwrap();
        assert!(matches!(
            root.try_reserve(Decimal::ZERO),
            Err(BudgetError::Calls {
                limit: 2,
                used: 2,
                ..
            })
        ));
    }

    #[test]
    fn overspend_is_recorded_and_exhausts_the_chain() {
        let root = Budget::new(Some(usd(10)), None);
        let child = root.child("c", Some(usd(5)), None);
        let sibling = root.child("s", None, None);
        child.try_reserve(usd(1)).unwrap().settle(usd(3));
        assert_eq!(root.snapshot().spent_usd, usd(3));
        // 7 USD are left at the root, but a provider billed past its bound: nothing more
        // starts anywhere under the root.
        for b in [&root, &child, &sibling] {
            let err = b.try_reserve(usd(1)).unwrap_err();
            assert!(
                matches!(err, BudgetError::Overspent { reserved, billed, .. } if reserved == usd(1) && billed == usd(3)),
                "{err}"
            );
            assert!(err.to_string().contains("billed 0.03 USD"), "{err}");
        }
        // An unlimited tree has no limit to guarantee: it is only recorded.
        let free = Budget::unlimited();
        free.try_reserve(usd(1)).unwrap().settle(usd(3));
        free.try_reserve(usd(1)).unwrap().settle(usd(1));
        assert_eq!(free.snapshot().spent_usd, usd(4));
    }

    #[test]
    fn huge_amounts_saturate_instead_of_panicking() {
        let root = Budget::unlimited();
        let a = root.try_reserve(Decimal::MAX).unwrap();
        let b = root.try_reserve(Decimal::MAX).unwrap();
        a.settle(Decimal::MAX);
        b.settle(Decimal::MAX);
        let s = root.snapshot();
        assert_eq!(
            (s.spent_usd, s.reserved_usd, s.calls),
            (Decimal::MAX, Decimal::ZERO, 2)
        );
        let limited = Budget::new(Some(Decimal::MAX), None);
        limited
            .try_reserve(Decimal::MAX)
            .unwrap()
            .settle(Decimal::ONE);
        assert!(limited.try_reserve(Decimal::MAX).is_err());
        assert!(limited.child("c", None, None).limit_usd() < Some(Decimal::MAX));
    }

    #[tokio::test]
    async fn a_hold_is_reserved_and_never_waited_for() {
        let root = Budget::new(Some(usd(10)), Some(10));
        // A call of 3 and a hold of 4 beside it, in one step.
        let (call, hold) = root.exchange(None, usd(3), Some(usd(4))).await.unwrap();
        let hold = hold.expect("a hold");
        assert_eq!(root.snapshot().reserved_usd, usd(7));
        assert_eq!(root.snapshot().reserved_calls, 2);
        call.settle(usd(1));
        // A child is forked from what is left after the hold: 10 - 1 spent - 4 held.
        let child = root.child("c", None, None);
        assert_eq!(child.limit_usd(), Some(usd(5)));
        // A reservation that does not fit beside the hold fails at once instead of waiting
        // for it (its holder may be waiting for the caller).
        let mut f = Box::pin(child.reserve(usd(6)));
        let err = poll_once(&mut f).expect("not queued").unwrap_err();
        assert!(matches!(err, BudgetError::Usd { .. }), "{err}");
        // Turning the hold into a call no dearer takes no room: it fits even when all else is
        // reserved.
        let _other = child.try_reserve(usd(5)).unwrap();
        let (answer, none) = root.exchange(Some(hold), usd(4), None).await.unwrap();
        assert!(none.is_none());
        let s = root.snapshot();
        assert_eq!((s.reserved_usd, s.reserved_calls), (usd(9), 2));
        assert!(s.spent_usd + s.reserved_usd <= usd(10));
        answer.settle(usd(2));
        // A refused exchange hands its hold back; dropping it lets it go.
        let (c, h) = root.exchange(None, usd(1), Some(usd(1))).await.unwrap();
        drop(c);
        let (e, back) = root.exchange(h, usd(1), Some(usd(9))).await.unwrap_err();
        assert!(matches!(e, BudgetError::Usd { .. }), "{e}");
        drop(back.expect("handed back"));
        drop(_other);
        let s = root.snapshot();
        assert_eq!(
            (s.spent_usd, s.reserved_usd, s.reserved_calls),
            (usd(3), Decimal::ZERO, 0)
        );
    }

    #[test]
    fn answered_now_or_handed_back_to_wait_with_nothing_reserved() {
        let root = Budget::new(Some(usd(10)), None);
        // Fits: granted at once.
        let a = root.reserve_now(usd(6)).expect("answered").unwrap();
        // Could never fit: refused at once.
        assert!(matches!(
            root.reserve_now(usd(11)),
            Some(Err(BudgetError::Usd { .. }))
        ));
        // Fits only once the call in flight settles: left to wait, nothing reserved.
        assert!(root.reserve_now(usd(5)).is_none());
        assert_eq!(root.snapshot().reserved_usd, usd(6));
        drop(a);
        // A call and a hold at once; then an exchange that would wait hands its hold back,
        // still held.
        let (call, hold) = root
            .exchange_now(None, usd(1), Some(usd(2)))
            .expect("answered")
            .unwrap();
        let in_flight = root.try_reserve(usd(6)).unwrap();
        let back = root
            .exchange_now(hold, usd(2), Some(usd(2)))
            .expect_err("would wait for the call in flight")
            .expect("the hold, handed back");
        assert_eq!(back.amount(), usd(2));
        let s = root.snapshot();
        assert_eq!((s.reserved_usd, s.reserved_calls), (usd(9), 3));
        drop((call, back, in_flight));
        let s = root.snapshot();
        assert_eq!((s.reserved_usd, s.reserved_calls), (Decimal::ZERO, 0));
    }

    #[test]
    fn a_child_is_capped_by_spends_not_by_calls_in_flight() {
        let root = Budget::new(Some(usd(10)), None);
        let _in_flight = root.try_reserve(usd(9)).unwrap();
        assert_eq!(root.child("c", None, None).limit_usd(), Some(usd(10)));
    }

    /// Polls `f` once: whether it finished, and its output if so.
    fn poll_once<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        match std::pin::Pin::new(f).poll(&mut cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        }
    }

    #[test]
    fn a_reservation_waits_for_calls_in_flight_then_fits() {
        let root = Budget::new(Some(usd(10)), None);
        let child = root.child("c", None, None);
        let in_flight = root.try_reserve(usd(8)).unwrap();
        let mut waiting = Box::pin(child.reserve(usd(5)));
        assert!(
            poll_once(&mut waiting).is_none(),
            "5 does not fit beside 8 in flight"
        );
        in_flight.settle(usd(2));
        let r = poll_once(&mut waiting)
            .expect("woken")
            .expect("fits once 8 settled to 2");
        assert_eq!(root.snapshot().reserved_usd, usd(5));
        r.settle(usd(5));
        assert_eq!(root.snapshot().spent_usd, usd(7));
    }

    #[test]
    fn a_reservation_that_can_never_fit_fails_at_once() {
        let root = Budget::new(Some(usd(10)), None);
        root.try_reserve(usd(4)).unwrap().settle(usd(4));
        let _in_flight = root.try_reserve(usd(5)).unwrap();
        let child = root.child("c", None, None);
        let mut f = Box::pin(child.reserve(usd(7)));
        let err = poll_once(&mut f).expect("not queued").unwrap_err();
        assert!(matches!(err, BudgetError::Usd { .. }), "{err}");
    }

    #[test]
    fn a_waiter_fails_when_settled_spends_make_it_impossible() {
        let root = Budget::new(Some(usd(10)), None);
        let in_flight = root.try_reserve(usd(8)).unwrap();
        let mut waiting = Box::pin(root.reserve(usd(5)));
        assert!(poll_once(&mut waiting).is_none());
        in_flight.settle(usd(6)); // 6 + 5 > 10: it can never fit now
        let err = poll_once(&mut waiting).expect("woken").unwrap_err();
        assert!(matches!(err, BudgetError::Usd { .. }), "{err}");
        assert_eq!(root.snapshot().reserved_usd, Decimal::ZERO);
    }

    #[test]
    fn waiters_are_served_in_arrival_order() {
        let root = Budget::new(Some(usd(10)), None);
        let in_flight = root.try_reserve(usd(9)).unwrap();
        let mut big = Box::pin(root.reserve(usd(8)));
        let child = root.child("c", None, None);
        let mut small = Box::pin(child.reserve(usd(1)));
        assert!(poll_once(&mut big).is_none());
        // 1 USD is free, but the earlier, bigger request waits for it: no overtaking.
        assert!(poll_once(&mut small).is_none());
        assert!(matches!(
            root.try_reserve(usd(1)),
            Err(BudgetError::Waiting { waiting: 2, .. })
        ));
        in_flight.settle(Decimal::ZERO);
        let b = poll_once(&mut big).expect("woken").expect("first in line");
        let s = poll_once(&mut small)
            .expect("woken")
            .expect("fits beside it");
        assert_eq!(root.snapshot().reserved_usd, usd(9));
        drop((b, s));
    }

    #[test]
    fn a_dropped_waiter_reserves_nothing_and_lets_the_next_through() {
        let root = Budget::new(Some(usd(10)), None);
        let in_flight = root.try_reserve(usd(6)).unwrap();
        let mut first = Box::pin(root.reserve(usd(5)));
        let mut second = Box::pin(root.reserve(usd(4)));
        assert!(poll_once(&mut first).is_none());
        assert!(poll_once(&mut second).is_none(), "behind the first");
        drop(first);
        let r = poll_once(&mut second)
            .expect("woken")
            .expect("4 fits beside 6");
        assert_eq!(root.snapshot().reserved_usd, usd(10));
        drop((r, in_flight));
        // A waiter granted but dropped before it looked releases what it was granted.
        let in_flight = root.try_reserve(usd(6)).unwrap();
        let mut granted = Box::pin(root.reserve(usd(5)));
        assert!(poll_once(&mut granted).is_none());
        drop(in_flight); // grants it
        assert_eq!(root.snapshot().reserved_usd, usd(5));
        drop(granted);
        let s = root.snapshot();
        assert_eq!((s.reserved_usd, s.reserved_calls), (Decimal::ZERO, 0));
        root.try_reserve(usd(10)).unwrap().settle(Decimal::ZERO);
    }
}
