//! Backdating (early cutoff): a re-executed query whose new value equals its old one keeps
//! its `changed_at`, so nothing that depends on it re-executes. Equality is checked on the
//! values, or on 128-bit fingerprints when the old value was evicted.

use std::hash::Hash;

use xxhash_rust::xxh3::Xxh3;

use crate::derived::DerivedTable;
use crate::durability::Durability;
use crate::memo::{Memo, MemoValue, StoredFingerprint};
use crate::query::{Fingerprint, Query};

/// xxh3-128 over a value's `Hash`: the default [`Query::fingerprint`].
pub(crate) fn hash_fingerprint<T: Hash + ?Sized>(value: &T) -> Fingerprint {
    let mut hasher = Xxh3::new();
    value.hash(&mut hasher);
    hasher.digest128()
}

impl<Q: Query<C>, C: Send + Sync + 'static> DerivedTable<Q, C> {
    /// Whether `new` may keep the old `changed_at`.
    ///
    /// Not when the durability dropped: dependents recorded the old, higher durability
    /// and would otherwise skip verification after a write to the lower-durability input
    /// this value now depends on.
    pub(crate) fn can_backdate(
        &self,
        memo: &Memo<Q::Value>,
        new: &Q::Value,
        old_durability: Durability,
        new_durability: Durability,
    ) -> bool {
        if new_durability < old_durability {
            return false;
        }
        match &memo.value {
            MemoValue::Present(old) => old == new,
            MemoValue::Evicted(fingerprint) => {
                *fingerprint == StoredFingerprint::from(Q::fingerprint(new))
            }
            MemoValue::Absent => false,
        }
    }
}
