//! LRU eviction per derived query, by value count and/or value bytes.
//!
//! The hit path takes no lock: each memo carries a `last_used` sequence number, stamped
//! from a per-query counter the first time the memo is used in a revision (later hits in
//! the same revision only read it). Victims are chosen only at a revision boundary (or an
//! explicit [`Database::evict`](crate::Database::evict)), under `&mut Database`, oldest
//! first. Eviction replaces the value with its fingerprint and keeps everything else, so a
//! dependent still verifies through the memo without re-executing it (seed 003). Memos
//! with untracked reads are never evicted: nothing could rebuild their value's history.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crate::derived::DerivedTable;
use crate::event::{Event, EventKind, Listener};
use crate::execute::drop_contained;
use crate::memo::{DerivedSlot, StoredFingerprint, PRESENT};
use crate::query::Query;
use crate::revision::Revision;

/// The LRU policy and accounting of one derived query.
pub(crate) struct Lru {
    /// Most values kept at a boundary; 0 = unbounded.
    pub(crate) capacity: AtomicUsize,
    /// Most value bytes kept at a boundary ([`Query::size_bytes`]); 0 = unbounded.
    pub(crate) byte_budget: AtomicUsize,
    /// Evictable values currently held.
    pub(crate) live_count: AtomicUsize,
    /// Their total [`Query::size_bytes`].
    pub(crate) live_bytes: AtomicUsize,
    /// Source of `last_used` sequence numbers.
    clock: AtomicU32,
    /// `clock` at the start of the current revision: a memo whose `last_used` is below it
    /// has not been used yet in this revision.
    epoch_start: AtomicU32,
}

impl Lru {
    pub(crate) fn new() -> Self {
        Lru {
            capacity: AtomicUsize::new(0),
            byte_budget: AtomicUsize::new(0),
            live_count: AtomicUsize::new(0),
            live_bytes: AtomicUsize::new(0),
            clock: AtomicU32::new(1),
            epoch_start: AtomicU32::new(1),
        }
    }

    /// Marks `slot` as used; a write only on its first use in this revision.
    #[inline]
    pub(crate) fn touch<K, V>(&self, slot: &DerivedSlot<K, V>) {
        if slot.last_used.load(Ordering::Relaxed) < self.epoch_start.load(Ordering::Relaxed) {
            self.stamp(slot);
        }
    }

    // Out of line: it runs once per memo per revision, and keeping it out of the hit path
    // keeps `Database::get` small enough to be inlined into its callers.
    #[inline(never)]
    fn stamp<K, V>(&self, slot: &DerivedSlot<K, V>) {
        let sequence = self.clock.fetch_add(1, Ordering::Relaxed);
        slot.last_used.store(sequence, Ordering::Relaxed);
    }

    fn budget_exceeded(&mut self) -> bool {
        let capacity = *self.capacity.get_mut();
        let budget = *self.byte_budget.get_mut();
        (capacity != 0 && *self.live_count.get_mut() > capacity)
            || (budget != 0 && *self.live_bytes.get_mut() > budget)
    }
}

impl<Q: Query<C>, C: Send + Sync + 'static> DerivedTable<Q, C> {
    /// Keeps the LRU accounting of evictable values exact after a value of `new_size`
    /// bytes was stored, replacing one of `old_size` (if any), and stamps the memo as just
    /// used. Sizes are measured before the commit (`size_bytes` is user code).
    ///
    /// Preconditions: this thread holds the memo's claim (see `sync.rs`).
    pub(crate) fn account(
        &self,
        slot: &DerivedSlot<Q::Key, Q::Value>,
        old_size: Option<usize>,
        was_untracked: bool,
        new_size: usize,
        untracked: bool,
    ) {
        if let Some(old_size) = old_size {
            if !was_untracked {
                self.lru.live_count.fetch_sub(1, Ordering::Relaxed);
                self.lru.live_bytes.fetch_sub(old_size, Ordering::Relaxed);
            }
        }
        if !untracked {
            self.lru.live_count.fetch_add(1, Ordering::Relaxed);
            self.lru.live_bytes.fetch_add(new_size, Ordering::Relaxed);
        }
        self.lru.stamp(slot);
    }

    /// Evicts least-recently-used values until the count and byte budgets hold, then
    /// starts a new LRU epoch.
    pub(crate) fn evict_lru(&mut self, listener: Option<&Listener>, revision: Revision) {
        if self.lru.budget_exceeded() {
            self.evict_over_budget(listener, revision);
        }
        let now = *self.lru.clock.get_mut();
        *self.lru.epoch_start.get_mut() = now;
    }

    #[cold]
    fn evict_over_budget(&mut self, listener: Option<&Listener>, revision: Revision) {
        let capacity = *self.lru.capacity.get_mut();
        let budget = *self.lru.byte_budget.get_mut();
        let mut candidates: Vec<(u32, u32)> = Vec::new();
        self.slots.for_each_mut(|index, slot| {
            if *slot.stamp.get_mut() & PRESENT != 0 && !slot.is_untracked() {
                candidates.push((*slot.last_used.get_mut(), index));
            }
        });
        // Newest first; with only a count bound, a partition is enough.
        if budget == 0 && capacity < candidates.len() {
            if capacity > 0 {
                candidates.select_nth_unstable_by(capacity - 1, |a, b| b.cmp(a));
            }
        } else {
            candidates.sort_unstable_by(|a, b| b.cmp(a));
        }
        let mut kept = 0usize;
        let mut kept_bytes = 0usize;
        let mut evicting = false;
        for (_, index) in candidates {
            let Some(slot) = self.slots.get_mut(index) else {
                continue;
            };
            let Some(value) = slot.value_mut() else {
                continue;
            };
            // User code (`size_bytes`, `fingerprint`, `Drop`) is contained: a value whose
            // size cannot be measured is evicted, alone (the older ones are judged by their
            // own sizes); one whose fingerprint cannot be taken is evicted without one (its
            // next execution is then not backdated).
            match panic::catch_unwind(AssertUnwindSafe(|| Q::size_bytes(value))) {
                Ok(size) => {
                    let fits = (capacity == 0 || kept < capacity)
                        && (budget == 0 || kept_bytes.saturating_add(size) <= budget);
                    if fits && !evicting {
                        kept += 1;
                        kept_bytes += size;
                        continue;
                    }
                    // Strict LRU: once one value does not fit, every older one goes too.
                    evicting = true;
                }
                Err(payload) => {
                    drop_contained(payload);
                }
            }
            match panic::catch_unwind(AssertUnwindSafe(|| Q::fingerprint(value))) {
                Ok(fingerprint) => {
                    self.fingerprints
                        .insert(index, StoredFingerprint::from(fingerprint));
                }
                Err(payload) => {
                    // An older fingerprint of this memo must not stand in for this value.
                    self.fingerprints.remove(&index);
                    drop_contained(payload);
                }
            }
            if let Some(payload) = slot.take_value().and_then(drop_contained) {
                drop_contained(payload);
            }
            if let Some(listener) = listener {
                listener(&Event {
                    kind: EventKind::Evicted,
                    query: Q::NAME,
                    key: &slot.key,
                    revision,
                });
            }
        }
        *self.lru.live_count.get_mut() = kept;
        *self.lru.live_bytes.get_mut() = kept_bytes;
    }
}
