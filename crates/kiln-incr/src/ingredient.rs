//! The registry of queries and inputs ("ingredients", as salsa calls them): one table per
//! query or input type, found by `TypeId` without locks and by dense `u32` id from edges.

use std::any::TypeId;
use std::fmt::Debug;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicPtr, Ordering};

use rustc_hash::FxBuildHasher;

use crate::database::Database;
use crate::error::QueryFrame;
use crate::event::Listener;
use crate::memo::Edge;
use crate::revision::Revision;
use crate::sync::Failure;
use crate::table::{Interner, Keyed};
use std::sync::Arc;

/// What the engine needs from a query's or input's table without knowing its types.
pub(crate) trait Ingredient<C>: Send + Sync + 'static {
    /// Calls `visit` with the query name and the key at `key` (for events and errors).
    fn with_key(&self, key: u32, visit: &mut dyn FnMut(&'static str, &dyn Debug));

    /// Whether the value at `key` changed after revision `after`, verifying (and if needed
    /// re-executing) it at the current revision. `depth`: how many unclaimed
    /// verifications this one is nested in (see `verify.rs`).
    fn maybe_changed_after(
        &self,
        db: &Database<C>,
        key: u32,
        after: Revision,
        depth: u32,
    ) -> Result<bool, Failure>;

    /// Whether any of `edges` (all of this ingredient, in read order) changed after
    /// `after`; stops at the first that did.
    fn any_changed_after(
        &self,
        db: &Database<C>,
        edges: &[Edge],
        after: Revision,
        depth: u32,
    ) -> Result<bool, Failure> {
        for edge in edges {
            if self.maybe_changed_after(db, edge.key, after, depth)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Work done when a revision ends or on an explicit eviction: LRU eviction, freeing
    /// retired index tables.
    fn at_boundary(&mut self, listener: Option<&Listener>, revision: Revision);

    /// The name and `Debug` of the key at `key`.
    fn frame(&self, key: u32) -> QueryFrame {
        let mut frame = QueryFrame {
            query: "<unknown query>",
            key: String::new(),
        };
        self.with_key(key, &mut |query, debug| {
            frame = QueryFrame {
                query,
                key: format!("{debug:?}"),
            };
        });
        frame
    }
}

/// One registered ingredient and the type it was registered under.
pub(crate) struct IngredientSlot<C> {
    type_id: TypeId,
    ingredient: Box<dyn Ingredient<C>>,
}

impl<C> Keyed for IngredientSlot<C> {
    type Key = TypeId;
    fn key(&self) -> &TypeId {
        &self.type_id
    }
}

impl<C: 'static> IngredientSlot<C> {
    pub(crate) fn new<T: Ingredient<C>>(ingredient: T) -> Self {
        IngredientSlot {
            type_id: TypeId::of::<T>(),
            ingredient: Box::new(ingredient),
        }
    }

    pub(crate) fn ingredient(&self) -> &dyn Ingredient<C> {
        &*self.ingredient
    }

    pub(crate) fn ingredient_mut(&mut self) -> &mut dyn Ingredient<C> {
        &mut *self.ingredient
    }

    /// The ingredient as a `T`, for a slot found under `TypeId::of::<T>()` (the slot's key
    /// *is* its type id, so the interning lookup already compared it).
    #[inline]
    pub(crate) fn downcast_interned<T: Ingredient<C>>(&self) -> &T {
        debug_assert!(self.type_id == TypeId::of::<T>());
        let erased: *const dyn Ingredient<C> = &*self.ingredient;
        // SAFETY: the slot was found by key `TypeId::of::<T>()`, and `new` recorded the
        // boxed value's own type id as the key.
        unsafe { &*erased.cast::<T>() }
    }

    /// The ingredient as its concrete type, if it is a `T`, mutably.
    pub(crate) fn downcast_mut<T: Ingredient<C>>(&mut self) -> Option<&mut T> {
        if self.type_id != TypeId::of::<T>() {
            return None;
        }
        let erased: *mut dyn Ingredient<C> = &mut *self.ingredient;
        // SAFETY: as in `downcast`.
        Some(unsafe { &mut *erased.cast::<T>() })
    }
}

/// Entries of an [`IngredientCache`] (a power of two).
const CACHE_ENTRIES: usize = 64;

/// A direct-mapped cache from an ingredient's `TypeId` to its registry slot, so that
/// `db.get::<Q>()` finds `Q`'s table with one load and one compare instead of a probe of
/// the registry's hash index and a paged slot lookup.
///
/// An entry is written once, when its type registers and the entry is still empty, and
/// never changes afterwards, so readers need no lock. A type whose entry another type took
/// is found through the registry instead (correct, only slower).
///
/// The first ingredients are also cached by id, for verification, which finds the table of
/// each dependency edge by id.
pub(crate) struct IngredientCache<C> {
    entries: [AtomicPtr<IngredientSlot<C>>; CACHE_ENTRIES],
    by_id: [AtomicPtr<IngredientSlot<C>>; CACHE_ENTRIES],
}

impl<C: 'static> IngredientCache<C> {
    pub(crate) fn new() -> Self {
        IngredientCache {
            entries: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
            by_id: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
        }
    }

    /// The registered ingredient with id `id`, if cached.
    #[inline]
    pub(crate) fn get_by_id(&self, id: u32) -> Option<&IngredientSlot<C>> {
        let slot = self.by_id.get(id as usize)?.load(Ordering::Acquire);
        if slot.is_null() {
            return None;
        }
        // SAFETY: as in `get`.
        Some(unsafe { &*slot })
    }

    /// The entry of `type_id`. The hash of a type's id is a compile-time constant, so in
    /// a monomorphized lookup this folds to a fixed offset.
    #[inline]
    fn entry(&self, type_id: TypeId) -> &AtomicPtr<IngredientSlot<C>> {
        &self.entries[FxBuildHasher.hash_one(type_id) as usize & (CACHE_ENTRIES - 1)]
    }

    /// The registered ingredient of type `T`, if its entry holds it.
    #[inline]
    pub(crate) fn get<T: Ingredient<C>>(&self) -> Option<&T> {
        let type_id = TypeId::of::<T>();
        let slot = self.entry(type_id).load(Ordering::Acquire);
        if slot.is_null() {
            return None;
        }
        // SAFETY: `remember`'s contract: the slot is alive and unmoved for as long as the
        // registry that owns it, which lives as long as `self` (both belong to one
        // database), and it is written only under `&mut Database`, when no `&self` exists.
        let slot = unsafe { &*slot };
        if slot.type_id != type_id {
            return None;
        }
        Some(slot.downcast_interned::<T>())
    }

    /// Caches `slot` (registered under `type_id`) if its entry is still empty.
    ///
    /// # Safety
    /// `slot` points at a registry slot that never moves and outlives `self`, derived
    /// from the registry's raw storage pointer (not from a reference), so that later
    /// `&mut` access to the slot under `&mut Database` does not invalidate it.
    pub(crate) unsafe fn remember(&self, type_id: TypeId, id: u32, slot: *mut IngredientSlot<C>) {
        // Losing the race (or finding the entry taken) is fine: the entry stays valid.
        let _ = self.entry(type_id).compare_exchange(
            std::ptr::null_mut(),
            slot,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        if let Some(entry) = self.by_id.get(id as usize) {
            // Ids are unique, so racing registrations of one type store the same slot.
            entry.store(slot, Ordering::Release);
        }
    }
}

/// Reports a broken internal invariant (a bug in kiln-incr, never caused by input).
#[cold]
#[inline(never)]
pub(crate) fn invariant_broken(what: &str) -> ! {
    panic!("kiln-incr internal invariant broken: {what}")
}

/// One key type's shared [`Interner`](crate::table::Interner), in the database's registry
/// of interners (by the key's `TypeId`).
pub(crate) struct InternerSlot {
    type_id: TypeId,
    interner: Box<dyn SharedInterner>,
}

/// What the database needs from an interner without knowing its key type.
trait SharedInterner: Send + Sync + 'static {
    fn as_any(&self) -> &dyn std::any::Any;
    /// See [`KeyTable::release_retired_shared`](crate::table::KeyTable::release_retired_shared).
    ///
    /// # Safety
    /// As there: called under `&mut Database`.
    unsafe fn release_retired(&self);
}

impl<K: crate::query::QueryKey> SharedInterner for Arc<Interner<K>> {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    unsafe fn release_retired(&self) {
        // SAFETY: per the caller.
        unsafe { self.release_retired_shared() };
    }
}

impl Keyed for InternerSlot {
    type Key = TypeId;
    fn key(&self) -> &TypeId {
        &self.type_id
    }
}

impl InternerSlot {
    pub(crate) fn new<K: crate::query::QueryKey>() -> Self {
        InternerSlot {
            type_id: TypeId::of::<K>(),
            interner: Box::new(Arc::new(Interner::<K>::new())),
        }
    }

    /// The interner, for a slot found under `TypeId::of::<K>()`.
    pub(crate) fn get<K: crate::query::QueryKey>(&self) -> Arc<Interner<K>> {
        match self.interner.as_any().downcast_ref::<Arc<Interner<K>>>() {
            Some(interner) => Arc::clone(interner),
            None => invariant_broken("an interner registered under another key type"),
        }
    }

    /// Frees the interner's retired index tables.
    ///
    /// # Safety
    /// Called under `&mut Database` (no reader probes the interner).
    pub(crate) unsafe fn release_retired(&self) {
        // SAFETY: per the caller.
        unsafe { self.interner.release_retired() };
    }
}
