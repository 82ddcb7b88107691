//! Backdating (early cutoff): a re-executed query whose new value equals its old one keeps
//! its `changed_at`, so nothing that depends on it re-executes. Equality is checked on the
//! values, or on 128-bit fingerprints when the old value was evicted.

use std::hash::Hash;

use xxhash_rust::xxh3::Xxh3;

use crate::derived::DerivedTable;
use crate::durability::Durability;
use crate::memo::{DerivedSlot, StoredFingerprint};
use crate::query::{Fingerprint, Query};

/// xxh3-128 over a value's `Hash`: the default [`Query::fingerprint`].
pub(crate) fn hash_fingerprint<T: Hash + ?Sized>(value: &T) -> Fingerprint {
    let mut hasher = Xxh3::new();
    value.hash(&mut hasher);
    hasher.digest128()
}

impl<Q: Query<C>, C: Send + Sync + 'static> DerivedTable<Q, C> {
    /// Whether `new` may keep the old `changed_at`: it equals the old value, or, when
    /// that was evicted, the old value's fingerprint.
    ///
    /// Not when the durability dropped: dependents recorded the old, higher durability
    /// and would otherwise skip verification after a write to the lower-durability input
    /// this value now depends on.
    ///
    /// Preconditions: this thread holds the memo's claim (see `sync.rs`).
    pub(crate) fn can_backdate(
        &self,
        index: u32,
        slot: &DerivedSlot<Q::Value>,
        new: &Q::Value,
        old_durability: Durability,
        new_durability: Durability,
    ) -> bool {
        if new_durability < old_durability {
            return false;
        }
        // SAFETY: we hold the claim.
        match unsafe { slot.claimed_value() } {
            Some(old) => old == new,
            None => self
                .fingerprints
                .get(&index)
                .is_some_and(|old| *old == StoredFingerprint::from(Q::fingerprint(new))),
        }
    }
}
