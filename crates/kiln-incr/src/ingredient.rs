//! The registry of queries and inputs ("ingredients", as salsa calls them): one table per
//! query or input type, found by `TypeId` without locks and by dense `u32` id from edges.

use std::any::TypeId;
use std::fmt::Debug;

use crate::database::Database;
use crate::error::QueryFrame;
use crate::event::Listener;
use crate::memo::Edge;
use crate::revision::Revision;
use crate::sync::Failure;
use crate::table::Keyed;

/// What the engine needs from a query's or input's table without knowing its types.
pub(crate) trait Ingredient<C>: Send + Sync + 'static {
    /// Calls `visit` with the query name and the key at `key` (for events and errors).
    fn with_key(&self, key: u32, visit: &mut dyn FnMut(&'static str, &dyn Debug));

    /// Whether the value at `key` changed after revision `after`, verifying (and if needed
    /// re-executing) it at the current revision.
    fn maybe_changed_after(
        &self,
        db: &Database<C>,
        key: u32,
        after: Revision,
    ) -> Result<bool, Failure>;

    /// Whether any of `edges` (all of this ingredient, in read order) changed after
    /// `after`; stops at the first that did.
    fn any_changed_after(
        &self,
        db: &Database<C>,
        edges: &[Edge],
        after: Revision,
    ) -> Result<bool, Failure> {
        for edge in edges {
            if self.maybe_changed_after(db, edge.key, after)? {
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

/// Reports a broken internal invariant (a bug in kiln-incr, never caused by input).
#[cold]
#[inline(never)]
pub(crate) fn invariant_broken(what: &str) -> ! {
    panic!("kiln-incr internal invariant broken: {what}")
}
