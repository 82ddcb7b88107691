//! The memo of one derived `(query, key)`: its value (absent once evicted), revisions,
//! durability and dependency edges, and the slot that holds it. What not every memo
//! needs is kept beside the slots, so that memos do not pay for it: the key (in the
//! interner of its key type, `table::Interner`), the LRU stamp (only for bounded queries,
//! `eviction::Lru`) and the 128-bit fingerprint of an evicted value
//! (`DerivedTable::fingerprints`).
//!
//! A memo is plain data: edges are `(query id, key index)` pairs of dense `u32`s, never
//! pointers, so that a later step can write memos to disk as they are.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::durability::Durability;
use crate::query::Fingerprint;
use crate::revision::Revision;
use crate::table::{allocate_array, free_array};

/// Bit of [`DerivedSlot::stamp`] set while the memo holds a value.
pub(crate) const PRESENT: u64 = 1 << 63;
/// Bit of [`DerivedSlot::stamp`] set while the claim holder commits a new execution
/// (edges, revisions, value): unclaimed verifiers must not publish over it.
pub(crate) const BUSY: u64 = 1 << 62;
/// The `verified_at` bits of a stamp.
pub(crate) const REVISION_MASK: u64 = BUSY - 1;

/// The `verified_at` recorded in a stamp.
#[inline]
pub(crate) fn verified_at_of(stamp: u64) -> Revision {
    Revision::from_u64(stamp & REVISION_MASK)
}
/// [`DerivedSlot::history`]: the low 60 bits hold `changed_at`; the flags sit above.
const CHANGED_AT_MASK: u64 = (1 << 60) - 1;
/// Durability (two bits) in [`DerivedSlot::history`].
const DURABILITY_SHIFT: u32 = 60;
/// Bit of [`DerivedSlot::history`] set when the last execution made an untracked read.
const UNTRACKED: u64 = 1 << 62;
/// Bit of [`DerivedSlot::history`] set when an attempt failed since the last commit: a
/// reader may have handled that failure, so the memo's next value counts as a change
/// (never backdated, never validated without executing).
const FAILED: u64 = 1 << 63;

fn durability_of(history: u64) -> Durability {
    match (history >> DURABILITY_SHIFT) & 0b11 {
        0 => Durability::Low,
        1 => Durability::Medium,
        _ => Durability::High,
    }
}

/// One dependency: the query (or input) id and the key's dense index in that query.
/// `repr(C)`: two `u32`s, 4-aligned, so that edge lists are arrays of `u32` (see
/// [`EdgeList`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub(crate) struct Edge {
    /// Index of the query or input in the database's ingredient table.
    pub(crate) query: u32,
    /// Index of the key in that query's slot table.
    pub(crate) key: u32,
}

/// The edge recorded right after a read that failed (the reader handled the error): it
/// always counts as changed, so the reader runs again in any later revision whatever the
/// failed memo's revisions say. (That memo may fail and then succeed within one revision,
/// its `changed_at` then equal to the reader's `verified_at`.) No query has this id.
pub(crate) const FAILED_READ: Edge = Edge {
    query: u32::MAX,
    key: 0,
};

/// A memo's dependency edges, in the order they were read. A single edge (the common
/// one-input query) is stored inline, without an allocation.
#[derive(Debug, Default)]
pub(crate) enum Edges {
    /// Read nothing tracked.
    #[default]
    None,
    /// Read exactly one thing.
    One(Edge),
    /// Read two things whose ids are small: packed into the edge word (see [`pack_pair`]).
    Pair(u64),
    /// Read several things.
    Many(EdgeList),
}

impl Edges {
    pub(crate) fn from_slice(edges: &[Edge]) -> Edges {
        match edges {
            [] => Edges::None,
            [edge] => Edges::One(*edge),
            [first, second] => match pack_pair([*first, *second]) {
                Some(word) => Edges::Pair(word),
                None => Edges::Many(EdgeList::new(edges)),
            },
            many => Edges::Many(EdgeList::new(many)),
        }
    }

    /// The packed form stored in [`DerivedSlot`]'s edge word; a list is leaked into it
    /// (and freed, once unpublished, as a [`RetiredEdges`]).
    fn into_word(self) -> u64 {
        match self {
            Edges::None => 0,
            Edges::One(edge) if edge.query < ONE_QUERY_LIMIT => {
                (u64::from(edge.key) << 32) | (u64::from(edge.query) << 1) | ONE_TAG
            }
            Edges::One(edge) => Edges::Many(EdgeList::new(&[edge])).into_word(),
            Edges::Pair(word) => word,
            Edges::Many(list) => list.into_raw().expose_provenance() as u64,
        }
    }
}

/// Low bits of an edge word holding two edges inline (bit 0 clear: not one edge; an
/// edge list's pointer is 4-aligned, so its bit 1 is clear too).
const PAIR_TAG: u64 = 0b10;
/// Bits of one edge of a pair: its query id, then its key index.
const PAIR_QUERY_BITS: u32 = 7;
const PAIR_KEY_BITS: u32 = 24;
const PAIR_EDGE_BITS: u32 = PAIR_QUERY_BITS + PAIR_KEY_BITS;

/// The 31-bit form of an edge in a pair, if its ids are small enough (query ids below
/// 128, key indices below 2^24: the common two-read query, e.g. a tree's inner node).
fn pack_edge(edge: Edge) -> Option<u64> {
    (edge.query < 1 << PAIR_QUERY_BITS && edge.key < 1 << PAIR_KEY_BITS)
        .then(|| (u64::from(edge.query) << PAIR_KEY_BITS) | u64::from(edge.key))
}

fn unpack_edge(bits: u64) -> Edge {
    let bits = bits & ((1 << PAIR_EDGE_BITS) - 1);
    Edge {
        query: (bits >> PAIR_KEY_BITS) as u32,
        key: (bits & ((1 << PAIR_KEY_BITS) - 1)) as u32,
    }
}

/// The word of two edges inline: the first at bit 2, the second at bit 33.
fn pack_pair([first, second]: [Edge; 2]) -> Option<u64> {
    Some((pack_edge(second)? << (2 + PAIR_EDGE_BITS)) | (pack_edge(first)? << 2) | PAIR_TAG)
}

fn unpack_pair(word: u64) -> [Edge; 2] {
    [
        unpack_edge(word >> 2),
        unpack_edge(word >> (2 + PAIR_EDGE_BITS)),
    ]
}

/// An owned list of edges in one allocation: its length (a `u32`), then the edges. One
/// allocation of `4 + 8n` bytes, where a boxed slice behind a thin pointer took two.
#[derive(Debug)]
pub(crate) struct EdgeList(std::ptr::NonNull<u32>);

// SAFETY: it owns plain data (`u32`s); the raw pointer is only the allocation's handle.
unsafe impl Send for EdgeList {}

impl EdgeList {
    /// The list's size in `u32`s: the length, then two per edge. (The allocation is an
    /// array of `u32`, through `table.rs`'s helpers.)
    fn words(len: usize) -> usize {
        len.checked_mul(2)
            .and_then(|edges| edges.checked_add(1))
            .unwrap_or_else(|| edge_list_too_long())
    }

    fn new(edges: &[Edge]) -> EdgeList {
        let Ok(len) = u32::try_from(edges.len()) else {
            edge_list_too_long();
        };
        let base = allocate_array::<u32>(Self::words(edges.len()));
        // Never dangling: the array holds at least the length.
        let Some(base) = std::ptr::NonNull::new(base) else {
            edge_list_too_long();
        };
        // SAFETY: the allocation holds a `u32` and then `len` edges (`Edge` is two
        // `u32`s, so its alignment is the length's and it starts right after it).
        unsafe {
            base.as_ptr().write(len);
            std::ptr::copy_nonoverlapping(
                edges.as_ptr(),
                base.as_ptr().add(1).cast::<Edge>(),
                edges.len(),
            );
        }
        EdgeList(base)
    }

    fn into_raw(self) -> *mut u32 {
        let base = self.0.as_ptr();
        std::mem::forget(self);
        base
    }

    /// The edges of a list made by [`EdgeList::new`].
    ///
    /// # Safety
    /// `base` comes from [`EdgeList::into_raw`] and is not freed while `'a` lasts.
    unsafe fn slice<'a>(base: *const u32) -> &'a [Edge] {
        // SAFETY: per the caller, a live list: its length, then that many edges.
        unsafe { std::slice::from_raw_parts(base.add(1).cast::<Edge>(), *base as usize) }
    }

    /// Frees a list made by [`EdgeList::new`].
    ///
    /// # Safety
    /// `base` comes from [`EdgeList::into_raw`], is freed once, and nobody reads it after.
    unsafe fn free(base: *mut u32) {
        // SAFETY: per the caller, a live list: its first word is its length.
        let len = unsafe { *base } as usize;
        free_array(base, Self::words(len));
    }
}

impl Drop for EdgeList {
    fn drop(&mut self) {
        // SAFETY: owned, made by `new`, not leaked (`into_raw` forgets it).
        unsafe { EdgeList::free(self.0.as_ptr()) };
    }
}

/// More edges than a `u32` counts: a query read over four billion things.
#[cold]
fn edge_list_too_long() -> ! {
    crate::ingredient::invariant_broken("an edge list longer than u32::MAX")
}

/// Low bit of an edge word holding one edge inline (a list pointer is aligned, bit clear).
const ONE_TAG: u64 = 1;
/// Query ids that fit an inline edge word (beside the tag bit).
const ONE_QUERY_LIMIT: u32 = 1 << 31;

/// The edges of an edge word, borrowed for as long as the slot is.
pub(crate) enum LoadedEdges<'a> {
    /// Read nothing tracked.
    None,
    /// Read exactly one thing.
    One(Edge),
    /// Read two things, stored inline.
    Two([Edge; 2]),
    /// Read several things.
    Many(&'a [Edge]),
}

impl LoadedEdges<'_> {
    #[inline]
    pub(crate) fn as_slice(&self) -> &[Edge] {
        match self {
            LoadedEdges::None => &[],
            LoadedEdges::One(edge) => std::slice::from_ref(edge),
            LoadedEdges::Two(edges) => edges,
            LoadedEdges::Many(edges) => edges,
        }
    }
}

/// An edge list replaced by a re-execution while unclaimed verifiers may still walk it:
/// kept alive until the next `&mut Database` (see [`DerivedSlot::replace_edges`]).
pub(crate) struct RetiredEdges(*mut u32);

// SAFETY: it owns a plain edge list; the raw pointer only defers the free.
unsafe impl Send for RetiredEdges {}

impl Drop for RetiredEdges {
    fn drop(&mut self) {
        // SAFETY: leaked by `Edges::into_word`, unpublished by `replace_edges`, and
        // dropped only under `&mut Database`, when no verifier can still walk it.
        unsafe { EdgeList::free(self.0) };
    }
}

/// The list of a "many" edge word, if it is one.
fn edge_list(word: u64) -> Option<*mut u32> {
    (word != 0 && word & (ONE_TAG | PAIR_TAG) == 0)
        .then(|| std::ptr::with_exposed_provenance_mut(word as usize))
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
/// - `value` is written only by the thread holding the memo's claim (see `sync.rs`), or under
///   `&mut Database` (eviction).
/// - When `stamp == current | PRESENT`, nobody writes `value` until the next
///   `&mut Database`, so any thread that observes that stamp (Acquire) may read it.
/// - `edges` and `history` are replaced only by the claim holder after it has
///   set [`BUSY`] in the stamp (a CAS from the stamp it read), and the stamp without
///   `BUSY` is stored last. So a verifier that read the stamp, then the edges, and then
///   CASes that same stamp to a newer revision knows no execution was committed in
///   between: its walk saw the memo's edges of record. Replaced edge lists are retired,
///   not freed, until the next `&mut Database`, so any thread may walk edges at any time.
///
/// The key is not stored here: memos live in [`DensePages`](crate::table::DensePages) by
/// the key's id in the interner their key type shares with every other query and input
/// keyed by it. The LRU's `last_used` stamps live beside the memos, in the query's `Lru`,
/// paid for only by queries with an LRU bound. A fresh slot (`Default`) is a memo never
/// computed.
pub(crate) struct DerivedSlot<V> {
    /// `verified_at` (low 62 bits, revisions use 60; 0 = never computed) | [`BUSY`] | [`PRESENT`].
    pub(crate) stamp: AtomicU64,
    /// The revision in which the value last changed (kept by backdating; low 60 bits) |
    /// durability | `UNTRACKED` | `FAILED`: one word, read with one load on the hit path
    /// (and no byte of padding for separate flags).
    history: AtomicU64,
    value: UnsafeCell<MaybeUninit<V>>,
    /// The edges, packed: 0 (none), one edge inline (`key << 32 | query << 1 | 1`), or a
    /// pointer to an `EdgeList` (its length, then the edges, in one allocation).
    edges: AtomicU64,
}

// SAFETY: see the access protocol above; `V` values are cloned out to many threads (Sync)
// and dropped on whichever thread evicts or re-executes (Send).
unsafe impl<V: Send + Sync> Sync for DerivedSlot<V> {}

impl<V> Default for DerivedSlot<V> {
    fn default() -> Self {
        DerivedSlot {
            stamp: AtomicU64::new(Revision::NEVER.as_u64()),
            history: AtomicU64::new(Revision::NEVER.as_u64()),
            value: UnsafeCell::new(MaybeUninit::uninit()),
            edges: AtomicU64::new(0),
        }
    }
}

impl<V> DerivedSlot<V> {
    /// Whether the memo was ever fetched to an end (computed, verified, or failed): a
    /// fresh slot of a page is not a memo yet.
    pub(crate) fn is_used(&self) -> bool {
        self.stamp.load(Ordering::Acquire) != Revision::NEVER.as_u64()
            || self.history.load(Ordering::Acquire) != 0
            || self.edges.load(Ordering::Acquire) != 0
    }

    pub(crate) fn changed_at(&self) -> Revision {
        Revision::from_u64(self.history.load(Ordering::Acquire) & CHANGED_AT_MASK)
    }

    pub(crate) fn durability(&self) -> Durability {
        durability_of(self.history.load(Ordering::Acquire))
    }

    /// Durability and `changed_at` together (one load): what a reader records.
    #[inline]
    pub(crate) fn read_info(&self) -> (Durability, Revision) {
        let history = self.history.load(Ordering::Acquire);
        (
            durability_of(history),
            Revision::from_u64(history & CHANGED_AT_MASK),
        )
    }

    /// Durability, and whether the memo must run again whatever its edges say (it made
    /// an untracked read, or an attempt failed since its last commit): one load.
    #[inline]
    pub(crate) fn verify_info(&self) -> (Durability, bool) {
        let history = self.history.load(Ordering::Acquire);
        (durability_of(history), history & (UNTRACKED | FAILED) != 0)
    }

    pub(crate) fn is_untracked(&self) -> bool {
        self.history.load(Ordering::Acquire) & UNTRACKED != 0
    }

    /// Whether an attempt failed since the last commit.
    pub(crate) fn has_failed(&self) -> bool {
        self.history.load(Ordering::Acquire) & FAILED != 0
    }

    /// Records that an attempt failed. Called by the claim holder; the next commit
    /// ([`DerivedSlot::set_history`]) clears it.
    pub(crate) fn mark_failed(&self) {
        self.history.fetch_or(FAILED, Ordering::AcqRel);
    }

    /// Sets `changed_at`, the durability and the untracked flag (clearing `FAILED`).
    ///
    /// Preconditions: the caller holds the claim and has set [`BUSY`] in the stamp.
    pub(crate) fn set_history(
        &self,
        changed_at: Revision,
        durability: Durability,
        untracked: bool,
    ) {
        let untracked = if untracked { UNTRACKED } else { 0 };
        let history = (changed_at.as_u64() & CHANGED_AT_MASK)
            | (durability as u64) << DURABILITY_SHIFT
            | untracked;
        self.history.store(history, Ordering::Release);
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
    /// The caller holds the claim, and the stamp is not `current | PRESENT` (no reader):
    /// either the caller set [`BUSY`] in it, or it is `current` without a value (which
    /// only the claim holder changes).
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
            .store(verified_at.as_u64() | PRESENT, Ordering::Release);
        old
    }

    /// Marks the memo verified at `verified_at`, keeping its value (or its absence).
    /// Called by the claim holder; unclaimed verifiers racing it publish the same stamp.
    pub(crate) fn mark_verified(&self, verified_at: Revision) {
        let present = self.stamp.load(Ordering::Acquire) & PRESENT;
        self.stamp
            .store(verified_at.as_u64() | present, Ordering::Release);
    }

    /// Publishes `verified_at` if the stamp is still `seen` (so nothing was committed since
    /// the caller read it): the unclaimed verifier's single CAS. Returns whether it did.
    #[inline]
    pub(crate) fn publish_verified(&self, seen: u64, verified_at: Revision) -> bool {
        self.stamp
            .compare_exchange(
                seen,
                verified_at.as_u64() | (seen & PRESENT),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// The edges. Any thread may walk them (see the access protocol); they are the memo's
    /// edges of record only if the stamp read before them is unchanged afterwards.
    #[inline]
    pub(crate) fn edges(&self) -> LoadedEdges<'_> {
        let word = self.edges.load(Ordering::Acquire);
        if word == 0 {
            return LoadedEdges::None;
        }
        if word & ONE_TAG != 0 {
            return LoadedEdges::One(Edge {
                query: ((word as u32) >> 1),
                key: (word >> 32) as u32,
            });
        }
        if word & PAIR_TAG != 0 {
            return LoadedEdges::Two(unpack_pair(word));
        }
        match edge_list(word) {
            // SAFETY: a list word points at an edge list leaked by `into_word`, freed
            // only under `&mut` (retired or dropped with the slot), never written again.
            Some(list) => LoadedEdges::Many(unsafe { EdgeList::slice(list) }),
            None => LoadedEdges::None,
        }
    }

    /// Replaces the edges; returns the old list (if any), which verifiers may still be
    /// walking: the caller keeps it until the next `&mut Database`.
    ///
    /// Preconditions: the caller holds the claim and has set [`BUSY`] in the stamp.
    #[must_use]
    pub(crate) fn replace_edges(&self, edges: Edges) -> Option<RetiredEdges> {
        let old = self.edges.swap(edges.into_word(), Ordering::AcqRel);
        edge_list(old).map(RetiredEdges)
    }

    /// Marks a commit in progress, if the stamp is still `seen`.
    ///
    /// Preconditions: the caller holds the claim.
    pub(crate) fn begin_commit(&self, seen: u64) -> bool {
        self.stamp
            .compare_exchange(seen, seen | BUSY, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
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

impl<V> Drop for DerivedSlot<V> {
    fn drop(&mut self) {
        drop(self.take_value());
        drop(edge_list(*self.edges.get_mut()).map(RetiredEdges));
    }
}

#[cfg(test)]
mod tests {
    use super::DerivedSlot;

    #[test]
    fn edge_lists_of_every_length_round_trip() {
        use super::{Edge, Edges};
        let slot = DerivedSlot::<u64>::default();
        for len in 0..40u32 {
            let edges: Vec<Edge> = (0..len)
                .map(|i| Edge {
                    query: i.wrapping_mul(7) | (i << 30),
                    key: u32::MAX - i,
                })
                .collect();
            let retired = slot.replace_edges(Edges::from_slice(&edges));
            assert_eq!(slot.edges().as_slice(), edges.as_slice(), "{len} edges");
            drop(retired);
        }
    }

    /// Pairs are inline when both edges are small, else a list; both read back.
    #[test]
    fn two_edges_are_inline_when_small() {
        use super::{Edge, Edges, LoadedEdges};
        let slot = DerivedSlot::<u64>::default();
        let edge = |query, key| Edge { query, key };
        for pair in [
            [edge(0, 0), edge(127, (1 << 24) - 1)],
            [edge(5, 17), edge(5, 18)],
            [edge(128, 1), edge(3, 4)],
            [edge(1, 1 << 24), edge(3, 4)],
            [edge(3, 4), edge(u32::MAX, 0)],
        ] {
            let retired = slot.replace_edges(Edges::from_slice(&pair));
            assert_eq!(slot.edges().as_slice(), pair.as_slice());
            let small = pair.iter().all(|e| e.query < 128 && e.key < 1 << 24);
            assert_eq!(
                matches!(slot.edges(), LoadedEdges::Two(_)),
                small,
                "{pair:?}"
            );
            drop(retired);
        }
    }

    /// A memo of a query with a `u64` value is four words: the stamp (`verified_at`
    /// and flags), history (`changed_at`, durability and flags), value, edges. Key, LRU
    /// stamp and claim live beside memos.
    #[test]
    fn a_small_memo_is_thirty_two_bytes() {
        assert_eq!(std::mem::size_of::<DerivedSlot<u64>>(), 32);
    }
}
