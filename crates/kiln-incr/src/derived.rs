//! The table of one derived query: its memos, interned by key, and its LRU policy. The
//! algorithm's steps are `impl` blocks on [`DerivedTable`] in `fetch.rs`, `verify.rs`,
//! `execute.rs`, `backdate.rs` and `eviction.rs`.

use std::fmt::Debug;
use std::marker::PhantomData;

use crate::database::Database;
use crate::event::Listener;
use crate::eviction::Lru;
use crate::ingredient::{invariant_broken, Ingredient};
use crate::memo::{DerivedSlot, Edge, RetiredEdges, StoredFingerprint};
use crate::query::Query;
use crate::revision::Revision;
use crate::sync::Failure;
use crate::table::KeyTable;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;

/// The memo slot type of query `Q`.
pub(crate) type SlotOf<Q, C> = DerivedSlot<<Q as Query<C>>::Key, <Q as Query<C>>::Value>;

/// All memos of the derived query `Q`.
pub(crate) struct DerivedTable<Q: Query<C>, C> {
    /// This query's id in the database's ingredient table (the `query` of its edges).
    pub(crate) id: u32,
    pub(crate) slots: KeyTable<DerivedSlot<Q::Key, Q::Value>>,
    pub(crate) lru: Lru,
    /// Fingerprints of evicted values, by key index: written only at eviction (under
    /// `&mut Database`), read by a claim holder re-executing an evicted memo. An entry
    /// whose memo holds a value again is stale and ignored.
    pub(crate) fingerprints: FxHashMap<u32, StoredFingerprint>,
    /// Edge lists replaced by re-executions in this revision, which unclaimed verifiers
    /// may still be walking; freed at the next boundary.
    pub(crate) retired_edges: Mutex<Vec<RetiredEdges>>,
    _query: PhantomData<fn() -> (Q, C)>,
}

impl<Q: Query<C>, C: Send + Sync + 'static> DerivedTable<Q, C> {
    pub(crate) fn new(id: u32) -> Self {
        DerivedTable {
            id,
            slots: KeyTable::new(),
            lru: Lru::new(),
            fingerprints: FxHashMap::default(),
            retired_edges: Mutex::new(Vec::new()),
            _query: PhantomData,
        }
    }

    #[inline]
    pub(crate) fn edge(&self, key: u32) -> Edge {
        Edge {
            query: self.id,
            key,
        }
    }

    /// The slot of an interned key.
    #[inline]
    pub(crate) fn slot(&self, key: u32) -> &DerivedSlot<Q::Key, Q::Value> {
        match self.slots.get(key) {
            Some(slot) => slot,
            None => invariant_broken("a key index outlived its slot"),
        }
    }

    /// The index and slot of `key`, if it was ever fetched.
    pub(crate) fn lookup(&self, key: &Q::Key) -> Option<(u32, &SlotOf<Q, C>)> {
        self.slots
            .lookup(key, KeyTable::<DerivedSlot<Q::Key, Q::Value>>::hash(key))
    }

    /// The index and slot of `key`, interning it.
    #[inline]
    pub(crate) fn intern(&self, key: &Q::Key) -> (u32, &SlotOf<Q, C>) {
        self.slots.intern(key, |_| DerivedSlot::new(key.clone()))
    }
}

impl<Q: Query<C>, C: Send + Sync + 'static> Ingredient<C> for DerivedTable<Q, C> {
    fn with_key(&self, key: u32, visit: &mut dyn FnMut(&'static str, &dyn Debug)) {
        if let Some(slot) = self.slots.get(key) {
            visit(Q::NAME, &slot.key);
        }
    }

    fn maybe_changed_after(
        &self,
        db: &Database<C>,
        key: u32,
        after: Revision,
        depth: u32,
    ) -> Result<bool, Failure> {
        self.maybe_changed_after_impl(db, key, after, depth)
    }

    fn at_boundary(&mut self, listener: Option<&Listener>, revision: Revision) {
        self.evict_lru(listener, revision);
        self.slots.release_retired();
        // No verifier can be walking a replaced edge list under `&mut`.
        self.retired_edges.get_mut().clear();
    }
}
