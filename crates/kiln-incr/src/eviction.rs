//! LRU eviction per derived query, by value count and/or value bytes.
//!
//! The hit path takes no lock: each memo of a query with an LRU bound has a `last_used`
//! sequence number (beside the memos, by key id, so that queries without a bound pay
//! nothing for it), stamped from a per-query counter the first time the memo is used in a
//! revision (later hits in the same revision only read it). Memos used before a bound was
//! set count as the oldest. Victims are chosen only at a revision boundary (or an
//! explicit [`Database::evict`](crate::Database::evict)), under `&mut Database`, oldest
//! first. Eviction replaces the value with its fingerprint and keeps everything else, so a
//! dependent still verifies through the memo without re-executing it (seed 003). Memos
//! with untracked reads are never evicted: nothing could rebuild their value's history.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use crate::derived::DerivedTable;
use crate::event::{Event, EventKind, Listener};
use crate::execute::drop_contained;
use crate::memo::{StoredFingerprint, PRESENT};
use crate::query::Query;
use crate::revision::Revision;
use crate::table::{DensePages, Located};

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
    /// Whether a bound was ever set: only then are uses stamped.
    enabled: AtomicBool,
    /// LRU order, by key id: sequence number of the memo's first use in the latest
    /// revision that used it (0: not since the bound was set).
    last_used: DensePages<AtomicU32>,
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
            enabled: AtomicBool::new(false),
            last_used: DensePages::new(),
        }
    }

    /// Sets the count bound (0 = unbounded).
    pub(crate) fn set_capacity(&self, capacity: usize) {
        self.capacity.store(capacity, Ordering::Relaxed);
        self.enable(capacity);
    }

    /// Sets the byte bound (0 = unbounded).
    pub(crate) fn set_byte_budget(&self, bytes: usize) {
        self.byte_budget.store(bytes, Ordering::Relaxed);
        self.enable(bytes);
    }

    fn enable(&self, bound: usize) {
        if bound != 0 {
            self.enabled.store(true, Ordering::Relaxed);
        }
    }

    /// Marks the memo of key id `index` as used; a write only on its first use in this
    /// revision, and nothing at all without a bound.
    #[inline]
    pub(crate) fn touch(&self, index: u32) {
        if self.enabled.load(Ordering::Relaxed) {
            self.touch_bounded(index);
        }
    }

    #[inline]
    fn touch_bounded(&self, index: u32) {
        self.check_stamp(self.last_used.get_or_make(index));
    }

    /// [`Lru::touch`] for a key id already located (the hit path's).
    #[inline]
    pub(crate) fn touch_at(&self, at: Located) {
        if self.enabled.load(Ordering::Relaxed) {
            match self.last_used.get_at(at) {
                Some(used) => self.check_stamp(used),
                None => self.touch_bounded_unpaged(at.index),
            }
        }
    }

    // Out of line: once per page of stamps.
    #[inline(never)]
    fn touch_bounded_unpaged(&self, index: u32) {
        self.touch_bounded(index);
    }

    #[inline]
    fn check_stamp(&self, used: &AtomicU32) {
        if used.load(Ordering::Relaxed) < self.epoch_start.load(Ordering::Relaxed) {
            self.stamp(used);
        }
    }

    // Out of line: it runs once per memo per revision, and keeping it out of the hit path
    // keeps `Database::get` small enough to be inlined into its callers.
    #[inline(never)]
    fn stamp(&self, used: &AtomicU32) {
        let sequence = self.clock.fetch_add(1, Ordering::Relaxed);
        used.store(sequence, Ordering::Relaxed);
    }

    /// Stamps the memo of key id `index` as just used (after a commit), if bounded.
    fn stamp_index(&self, index: u32) {
        if self.enabled.load(Ordering::Relaxed) {
            self.stamp(self.last_used.get_or_make(index));
        }
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
        index: u32,
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
        self.lru.stamp_index(index);
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
        let last_used = &self.lru.last_used;
        self.memos.for_each_mut(|index, slot| {
            if *slot.stamp.get_mut() & PRESENT != 0 && !slot.is_untracked() {
                let used = last_used
                    .get(index)
                    .map_or(0, |used| used.load(Ordering::Relaxed));
                candidates.push((used, index));
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
            let Some(slot) = self.memos.get_mut(index) else {
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
            if let (Some(listener), Some(key)) = (listener, self.keys.key(index)) {
                listener(&Event {
                    kind: EventKind::Evicted,
                    query: Q::NAME,
                    key,
                    revision,
                });
            }
        }
        *self.lru.live_count.get_mut() = kept;
        *self.lru.live_bytes.get_mut() = kept_bytes;
    }
}
