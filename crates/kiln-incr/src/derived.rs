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
use crate::table::{DensePages, Interner, Located};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// The memo slot type of query `Q`.
pub(crate) type SlotOf<Q, C> = DerivedSlot<<Q as Query<C>>::Value>;

/// All memos of the derived query `Q`.
pub(crate) struct DerivedTable<Q: Query<C>, C> {
    /// This query's id in the database's ingredient table (the `query` of its edges).
    pub(crate) id: u32,
    /// Key ids, shared with every query and input keyed by `Q::Key` (the `key` of edges).
    pub(crate) keys: Arc<Interner<Q::Key>>,
    /// The memos, by key id.
    pub(crate) memos: DensePages<SlotOf<Q, C>>,
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
    pub(crate) fn new(id: u32, keys: Arc<Interner<Q::Key>>) -> Self {
        DerivedTable {
            id,
            keys,
            memos: DensePages::new(),
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

    /// The slot of an interned key that this query fetched (its page exists).
    #[inline]
    pub(crate) fn slot(&self, key: u32) -> &SlotOf<Q, C> {
        match self.memos.get(key) {
            Some(slot) => slot,
            None => invariant_broken("an edge names a memo never made"),
        }
    }

    /// The key with id `key`.
    #[inline]
    pub(crate) fn key(&self, key: u32) -> &Q::Key {
        match self.keys.key(key) {
            Some(key) => key,
            None => invariant_broken("a key id outlived its key"),
        }
    }

    /// The index and slot of `key`, if it was ever fetched.
    pub(crate) fn lookup(&self, key: &Q::Key) -> Option<(u32, &SlotOf<Q, C>)> {
        let index = self.keys.find(key)?;
        let slot = self.memos.get(index)?;
        slot.is_used().then_some((index, slot))
    }

    /// The index, location (the same in every page by key id, the LRU stamps' too) and
    /// slot of `key`, interning it.
    #[inline(always)]
    pub(crate) fn intern_located(&self, key: &Q::Key) -> (Located, &SlotOf<Q, C>) {
        let at = self.keys.id_located(key);
        (at, self.memos.get_or_make_at(at))
    }

    /// Memos fetched at least once.
    pub(crate) fn used_memos(&self) -> usize {
        let mut used = 0;
        self.memos
            .for_each(|_, slot| used += usize::from(slot.is_used()));
        used
    }
}

impl<Q: Query<C>, C: Send + Sync + 'static> Ingredient<C> for DerivedTable<Q, C> {
    fn with_key(&self, key: u32, visit: &mut dyn FnMut(&'static str, &dyn Debug)) {
        if let Some(key) = self.keys.key(key) {
            visit(Q::NAME, key);
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
        // No verifier can be walking a replaced edge list under `&mut`.
        self.retired_edges.get_mut().clear();
    }
}
