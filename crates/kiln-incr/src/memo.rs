//! The memo of one derived `(query, key)`: its value (absent once evicted), revisions,
//! durability and dependency edges, and the slot that holds it. (The 128-bit fingerprint
//! of an evicted value is kept beside the slots, in `DerivedTable::fingerprints`, so
//! that memos holding a value do not pay for it.)
//!
//! A memo is plain data: edges are `(query id, key index)` pairs of dense `u32`s, never
//! pointers, so that a later step can write memos to disk as they are.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
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

/// A memo's dependency edges, in the order they were read. A single edge (the common
/// one-input query) is stored inline, without an allocation.
#[derive(Debug, Default)]
pub(crate) enum Edges {
    /// Read nothing tracked.
    #[default]
    None,
    /// Read exactly one thing.
    One(Edge),
    /// Read several things (boxed twice so that `Edges` stays two words).
    Many(Box<Box<[Edge]>>),
}

impl Edges {
    pub(crate) fn from_slice(edges: &[Edge]) -> Edges {
        match edges {
            [] => Edges::None,
            [edge] => Edges::One(*edge),
            many => Edges::Many(Box::new(many.into())),
        }
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[Edge] {
        match self {
            Edges::None => &[],
            Edges::One(edge) => std::slice::from_ref(edge),
            Edges::Many(edges) => edges,
        }
    }
}

/// A fingerprint stored as two `u64`s, so that it is 8-byte aligned, not 16.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct StoredFingerprint([u64; 2]);

impl From<Fingerprint> for StoredFingerprint {
    fn from(value: Fingerprint) -> Self {
        StoredFingerprint([value as u64, (value >> 64) as u64])
    }
}

/// Storage for one derived `(query, key)`.
///
/// Access protocol (why the `UnsafeCell`s are sound):
/// - `value` is initialized exactly when `stamp` has [`PRESENT`].
/// - `value` and `edges` are written only by the thread holding `claim` (see `sync.rs`),
///   or under `&mut Database` (eviction).
/// - When `stamp == current | PRESENT`, nobody writes `value` until the next
///   `&mut Database`, so any thread that observes that stamp (Acquire) may read it.
/// - `edges` is read only by the claim holder.
/// - `changed_at`, `last_used` and `flags` are atomics, readable by anyone at any time.
pub(crate) struct DerivedSlot<K, V> {
    pub(crate) key: K,
    /// `verified_at` (low 31 bits; 0 = never computed) | [`PRESENT`].
    pub(crate) stamp: AtomicU32,
    /// The revision in which the value last changed (kept by backdating).
    pub(crate) changed_at: AtomicU32,
    /// LRU order: sequence number of the first use in the latest revision that used it.
    pub(crate) last_used: AtomicU32,
    /// Thread id of the executing/verifying thread (0 = free) | waiters bit.
    pub(crate) claim: AtomicU32,
    /// Durability (low two bits) | `UNTRACKED`.
    flags: AtomicU8,
    value: UnsafeCell<MaybeUninit<V>>,
    edges: UnsafeCell<Edges>,
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
            value: UnsafeCell::new(MaybeUninit::uninit()),
            edges: UnsafeCell::new(Edges::None),
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

    /// The value.
    ///
    /// # Safety
    /// The caller observed (Acquire) a stamp with [`PRESENT`] and either that stamp was
    /// `current | PRESENT` (under `&Database`) or the caller holds the claim.
    #[inline]
    pub(crate) unsafe fn value_unchecked(&self) -> &V {
        // SAFETY: `PRESENT` means initialized; per the protocol nobody writes it now.
        unsafe { (*self.value.get()).assume_init_ref() }
    }

    /// The value, if present, for the claim holder.
    ///
    /// # Safety
    /// The caller holds the claim.
    pub(crate) unsafe fn claimed_value(&self) -> Option<&V> {
        if self.stamp.load(Ordering::Acquire) & PRESENT == 0 {
            return None;
        }
        // SAFETY: present, and the claim excludes writers.
        Some(unsafe { self.value_unchecked() })
    }

    /// Stores `value` and publishes the stamp `verified_at | PRESENT`; returns the value
    /// it replaces. Write everything else of the memo before: the stamp publishes it.
    ///
    /// # Safety
    /// The caller holds the claim, and the stamp is not `current | PRESENT` (no reader).
    pub(crate) unsafe fn publish_value(&self, value: V, verified_at: Revision) -> Option<V> {
        let stamp = self.stamp.load(Ordering::Acquire);
        let cell = self.value.get();
        let old = if stamp & PRESENT != 0 {
            // SAFETY: present, and nobody else reads or writes it now.
            Some(unsafe { (*cell).assume_init_read() })
        } else {
            None
        };
        // SAFETY: as above; the old value (if any) was moved out.
        unsafe { (*cell).write(value) };
        self.stamp
            .store(verified_at.as_u32() | PRESENT, Ordering::Release);
        old
    }

    /// Marks the memo verified at `verified_at`, keeping its value (or its absence).
    pub(crate) fn mark_verified(&self, verified_at: Revision) {
        let present = self.stamp.load(Ordering::Acquire) & PRESENT;
        self.stamp
            .store(verified_at.as_u32() | present, Ordering::Release);
    }

    /// The edges, for the claim holder.
    ///
    /// # Safety
    /// The caller holds the claim.
    pub(crate) unsafe fn claimed_edges(&self) -> &Edges {
        // SAFETY: only claim holders touch `edges`.
        unsafe { &*self.edges.get() }
    }

    /// Replaces the edges.
    ///
    /// # Safety
    /// The caller holds the claim and holds no reference from `claimed_edges`.
    pub(crate) unsafe fn set_claimed_edges(&self, edges: Edges) {
        // SAFETY: only claim holders touch `edges`.
        unsafe { *self.edges.get() = edges };
    }

    /// The value, under `&mut` (boundary work).
    pub(crate) fn value_mut(&mut self) -> Option<&V> {
        if *self.stamp.get_mut() & PRESENT == 0 {
            return None;
        }
        // SAFETY: present.
        Some(unsafe { self.value.get_mut().assume_init_ref() })
    }

    /// Removes the value (eviction), keeping every other part of the memo.
    pub(crate) fn take_value(&mut self) -> Option<V> {
        let stamp = self.stamp.get_mut();
        if *stamp & PRESENT == 0 {
            return None;
        }
        *stamp &= !PRESENT;
        // SAFETY: it was present; clearing the bit hands ownership to the caller.
        Some(unsafe { self.value.get_mut().assume_init_read() })
    }
}

impl<K, V> Drop for DerivedSlot<K, V> {
    fn drop(&mut self) {
        drop(self.take_value());
    }
}
