//! The ids a batch has seen, kept small: one 128-bit keyed hash per id.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hash, Hasher};

/// A set of ids stored as 128-bit hashes keyed randomly per set: 16 bytes (plus the table's
/// byte of control) an id, whatever its length, and no allocation per id, so a file of a
/// million ids costs tens of MB less than a set of strings, and leaves no small allocation
/// behind for every id. Two different ids share a key with a probability of about
/// `n² / 2¹²⁹` (below 10⁻²⁴ for ten million ids); the keys are secret, so ids cannot be chosen
/// to collide.
#[derive(Clone, Default)]
pub(crate) struct IdSet {
    keys: std::collections::hash_map::RandomState,
    set: HashSet<u128>,
}

impl IdSet {
    fn key(&self, id: &str) -> u128 {
        // Two hashes of the id under the same secret key, told apart by a prefix: two
        // independent 64-bit halves.
        let half = |domain: u8| {
            let mut h = self.keys.build_hasher();
            domain.hash(&mut h);
            id.hash(&mut h);
            h.finish()
        };
        (u128::from(half(0)) << 64) | u128::from(half(1))
    }

    /// Adds `id`; whether it was not there yet.
    pub(crate) fn insert(&mut self, id: &str) -> bool {
        let key = self.key(id);
        self.set.insert(key)
    }

    /// Whether `id` is there.
    pub(crate) fn contains(&self, id: &str) -> bool {
        self.set.contains(&self.key(id))
    }

    /// Number of ids.
    pub(crate) fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether there is no id.
    pub(crate) fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

/// The first line each id appears on, with ids kept as [`IdSet`] keeps them: a line is a
/// duplicate exactly when an earlier line has its id, however often (or out of order) lines are
/// read again. (The Temporal engine's: its starter may read a line more than once.)
#[cfg(feature = "temporal")]
#[derive(Default)]
pub(crate) struct IdLines {
    ids: IdSet,
    first: std::collections::HashMap<u128, u64>,
}

#[cfg(feature = "temporal")]
impl IdLines {
    /// The first line `id` is on, recording `line` if none was yet.
    pub(crate) fn first(&mut self, id: &str, line: u64) -> u64 {
        let key = self.ids.key(id);
        *self.first.entry(key).or_insert(line)
    }
}

impl std::fmt::Debug for IdSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IdSet({} ids)", self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::IdSet;

    #[cfg(feature = "temporal")]
    #[test]
    fn a_duplicate_is_a_line_after_the_first() {
        let mut lines = super::IdLines::default();
        assert_eq!(lines.first("a", 3), 3);
        assert_eq!(lines.first("b", 1), 1);
        // Read again (a retried read): still the first line, not a duplicate.
        assert_eq!(lines.first("a", 3), 3);
        assert_eq!(lines.first("a", 9), 3);
    }

    #[test]
    fn ids_are_told_apart() {
        let mut s = IdSet::default();
        assert!(s.is_empty());
        for i in 0..10_000 {
            assert!(s.insert(&format!("t-{i}")));
        }
        assert!(!s.insert("t-17"));
        assert!(s.contains("t-9999") && !s.contains("t-10000") && !s.contains("t-1 "));
        assert_eq!(s.len(), 10_000);
        // Keyed per set: the same id has another key in another set.
        assert_ne!(IdSet::default().key("t-1"), s.key("t-1"));
    }
}
