//! The memo of one derived `(query, key)`: its value (or the fingerprint left when the value
//! was evicted), revisions, durability and dependency edges, and the slot that holds it.
//!
//! A memo is plain data: edges are `(query id, key index)` pairs of dense `u32`s, never
//! pointers, so that a later step can write memos to disk as they are.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use crate::durability::Durability;
use crate::query::Fingerprint;
use crate::revision::Revision;
use crate::table::Keyed;

/// Bit of [`DerivedSlot::stamp`] set while the memo holds a value.
pub(crate) const PRESENT: u32 = 1 << 31;
/// Bit of [`DerivedSlot::flags`] set when the last execution made an untracked read.
const UNTRACKED: u8 = 1 << 2;
const DURABILITY_MASK: u8 = 0b11;

/// One dependency: the query (or input) id and the key's dense index in that query.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Edge {
    /// Index of the query or input in the database's ingredient table.
    pub(crate) query: u32,
    /// Index of the key in that query's slot table.
    pub(crate) key: u32,
}

/// A fingerprint stored as two `u64`s, so that a memo is 8-byte aligned, not 16.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct StoredFingerprint([u64; 2]);

impl From<Fingerprint> for StoredFingerprint {
    fn from(value: Fingerprint) -> Self {
        StoredFingerprint([value as u64, (value >> 64) as u64])
    }
}

/// What a memo holds in place of a value.
pub(crate) enum MemoValue<V> {
    /// Never computed successfully.
    Absent,
    /// The value of the last execution.
    Present(V),
    /// Evicted by LRU; the fingerprint still allows backdating after re-execution.
    Evicted(StoredFingerprint),
}

/// The parts of a memo that only the thread holding the slot's claim touches (or anyone
/// under `&mut Database`).
pub(crate) struct Memo<V> {
    pub(crate) value: MemoValue<V>,
    /// What the last execution read, in order. Empty for untracked memos' purposes: an
    /// untracked memo is re-executed every revision regardless of its edges.
    pub(crate) edges: Box<[Edge]>,
}

/// Storage for one derived `(query, key)`.
///
/// Access protocol (why the `UnsafeCell` is sound):
/// - `memo` is written only by the thread holding `claim` (see `sync.rs`), or under
///   `&mut Database` (eviction).
/// - When `stamp == current | PRESENT`, nobody writes `memo.value` until the next
///   `&mut Database`, so any thread that observes that stamp (Acquire) may read the value.
/// - `memo.edges` is read only by the claim holder.
/// - `changed_at` and `flags` are atomics: readable by anyone at any time.
pub(crate) struct DerivedSlot<K, V> {
    pub(crate) key: K,
    /// `verified_at` (low 31 bits) | [`PRESENT`].
    pub(crate) stamp: AtomicU32,
    /// The revision in which the value last changed (kept by backdating).
    pub(crate) changed_at: AtomicU32,
    /// LRU order: sequence number of the first use in the latest revision that used it.
    pub(crate) last_used: AtomicU32,
    /// Thread id of the executing/verifying thread (0 = free) | waiters bit.
    pub(crate) claim: AtomicU32,
    /// Durability (low two bits) | `UNTRACKED`.
    flags: AtomicU8,
    memo: UnsafeCell<Memo<V>>,
}

// SAFETY: see the access protocol above; `V` values are cloned out to many threads (Sync)
// and dropped on whichever thread evicts or re-executes (Send).
unsafe impl<K: Sync, V: Send + Sync> Sync for DerivedSlot<K, V> {}

impl<K, V> Keyed for DerivedSlot<K, V>
where
    K: Eq + std::hash::Hash,
{
    type Key = K;
    fn key(&self) -> &K {
        &self.key
    }
}

impl<K, V> DerivedSlot<K, V> {
    pub(crate) fn new(key: K) -> Self {
        DerivedSlot {
            key,
            stamp: AtomicU32::new(Revision::NEVER.as_u32()),
            changed_at: AtomicU32::new(Revision::NEVER.as_u32()),
            last_used: AtomicU32::new(0),
            claim: AtomicU32::new(0),
            flags: AtomicU8::new(Durability::Low as u8),
            memo: UnsafeCell::new(Memo {
                value: MemoValue::Absent,
                edges: Box::default(),
            }),
        }
    }

    pub(crate) fn changed_at(&self) -> Revision {
        Revision::from_u32(self.changed_at.load(Ordering::Acquire))
    }

    pub(crate) fn durability(&self) -> Durability {
        match self.flags.load(Ordering::Acquire) & DURABILITY_MASK {
            0 => Durability::Low,
            1 => Durability::Medium,
            _ => Durability::High,
        }
    }

    pub(crate) fn is_untracked(&self) -> bool {
        self.flags.load(Ordering::Acquire) & UNTRACKED != 0
    }

    pub(crate) fn set_durability(&self, durability: Durability, untracked: bool) {
        let untracked = if untracked { UNTRACKED } else { 0 };
        self.flags
            .store(durability as u8 | untracked, Ordering::Release);
    }

    /// The value, for a reader that observed `stamp == current | PRESENT`.
    ///
    /// # Safety
    /// The caller observed (Acquire) `stamp == current | PRESENT` in the current revision
    /// and holds `&Database` (so no eviction can run).
    #[inline]
    pub(crate) unsafe fn verified_value(&self) -> Option<&V> {
        // SAFETY: per the access protocol nobody writes `memo` in this state.
        match unsafe { &(*self.memo.get()).value } {
            MemoValue::Present(value) => Some(value),
            MemoValue::Absent | MemoValue::Evicted(_) => None,
        }
    }

    /// The memo, for the thread that holds the claim.
    ///
    /// # Safety
    /// The caller holds `claim`, and the stamp is not `current | PRESENT` (or the caller
    /// only reads).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn claimed_memo(&self) -> &mut Memo<V> {
        // SAFETY: the claim excludes other writers and readers of `memo`.
        unsafe { &mut *self.memo.get() }
    }

    /// The memo under `&mut` (no claim needed: nobody else can run).
    pub(crate) fn memo_mut(&mut self) -> &mut Memo<V> {
        self.memo.get_mut()
    }
}
