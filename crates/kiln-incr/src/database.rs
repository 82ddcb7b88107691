//! The database: revisions, the registry of query and input tables, the user context, the
//! event listener, and the public operations (fetch, set, evict, configure).

use std::any::TypeId;
use std::fmt::Debug;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::active;
use crate::derived::DerivedTable;
use crate::durability::Durability;
use crate::error::{QueryError, QueryFrame};
use crate::event::{Event, EventKind, Listener};
use crate::ingredient::{
    invariant_broken, Ingredient, IngredientCache, IngredientSlot, InternerSlot,
};
use crate::input::InputTable;
use crate::memo::{verified_at_of, Edge, FAILED_READ, PRESENT};
use crate::query::{Input, Query};
use crate::revision::{DurabilityClock, Revision};
use crate::sync::{Failure, WaitTable};
use crate::table::Interner;
use crate::table::KeyTable;
use std::sync::Arc;

static NEXT_DATABASE_ID: AtomicU64 = AtomicU64::new(1);

/// An incremental database with a user context `C` (services the queries use without
/// tracking, such as a compiler handle or a disk store).
///
/// `&Database` is `Sync`: fetch from as many threads as you like. Changing inputs takes
/// `&mut self`, so no query runs while a new revision begins.
pub struct Database<C = ()> {
    pub(crate) id: u64,
    context: C,
    pub(crate) clock: DurabilityClock,
    ingredients: KeyTable<IngredientSlot<C>>,
    /// The key interners, one per key type, shared by the tables keyed by it.
    interners: KeyTable<InternerSlot>,
    /// Shortcut to `ingredients` by type, for the per-call table lookup of `get`/`input`.
    ingredient_cache: IngredientCache<C>,
    pub(crate) waits: WaitTable,
    listener: Option<Listener>,
}

impl<C: Default + Send + Sync + 'static> Default for Database<C> {
    fn default() -> Self {
        Database::new(C::default())
    }
}

/// What the engine knows about one memo (for tests, tools and `kiln explain`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoInfo {
    /// Last revision at which the memo was known valid.
    pub verified_at: Revision,
    /// Revision in which its value last changed (kept by backdating).
    pub changed_at: Revision,
    /// Minimum durability over what it read.
    pub durability: Durability,
    /// Whether it holds a value (false once evicted).
    pub has_value: bool,
    /// Whether its last execution made an untracked read.
    pub untracked: bool,
    /// What its last successful execution read, in read order (a query or input name and
    /// its key's `Debug`, as in errors); a repeated read of the same thing right after
    /// itself is recorded once. Empty if it read nothing tracked.
    pub dependencies: Vec<QueryFrame>,
}

/// Value counts of one derived query.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoStats {
    /// Keys ever fetched (one memo slot each).
    pub keys: usize,
    /// Evictable values held (untracked memos are not counted).
    pub values: usize,
    /// Their total [`Query::size_bytes`].
    pub value_bytes: usize,
}

impl<C: Send + Sync + 'static> Database<C> {
    /// A database at revision 1 with no inputs, holding `context`.
    pub fn new(context: C) -> Self {
        Database {
            id: NEXT_DATABASE_ID.fetch_add(1, Ordering::Relaxed),
            context,
            clock: DurabilityClock::new(),
            ingredients: KeyTable::new(),
            interners: KeyTable::new(),
            ingredient_cache: IngredientCache::new(),
            waits: WaitTable::new(),
            listener: None,
        }
    }

    /// The user context: untracked services available to queries.
    pub fn context(&self) -> &C {
        &self.context
    }

    /// The user context, mutably (between revisions).
    pub fn context_mut(&mut self) -> &mut C {
        &mut self.context
    }

    /// The current revision.
    pub fn revision(&self) -> Revision {
        self.clock.current()
    }

    // ----- fetching ------------------------------------------------------------------

    /// The value of query `Q` for `key` at the current revision: memoized, verified, or
    /// executed. Inside a query, the read is recorded as a dependency.
    ///
    /// Errors: [`QueryError::Cycle`] when `Q(key)` (transitively) depends on itself,
    /// [`QueryError::Panicked`] when it or a dependency panicked. Nothing failed is
    /// memoized: the database stays usable and a later fetch tries again.
    #[inline]
    pub fn get<Q: Query<C>>(&self, key: &Q::Key) -> Result<Q::Value, QueryError> {
        self.derived::<Q>()
            .fetch(self, key)
            .map_err(|failure| *failure)
    }

    /// A handle on query `Q` that skips the per-call table lookup: the fast path for
    /// fetching many keys of one query.
    #[inline]
    pub fn query<Q: Query<C>>(&self) -> QueryHandle<'_, Q, C> {
        QueryHandle {
            db: self,
            table: self.derived::<Q>(),
        }
    }

    /// Reads input `I` at `key` (`None` when never set or removed). Inside a query, the
    /// read is recorded as a dependency, also when the key is missing, so that setting it
    /// later invalidates the reader.
    pub fn input<I: Input>(&self, key: &I::Key) -> Option<I::Value> {
        self.input_table::<I>().read(self.id, key)
    }

    /// Reads input `I` at `key` like [`Self::input`], but records no dependency. For a query
    /// that uses only part of the value and records that part itself, by reading a query
    /// that derives it from the input (which depends on the input and is backdated when the
    /// part is unchanged). Anything else the reader uses from the value is then untracked:
    /// its memo would not see the input change.
    pub fn input_untracked<I: Input>(&self, key: &I::Key) -> Option<I::Value> {
        self.input_table::<I>().read_untracked(key)
    }

    /// Marks the executing query as having read state the engine cannot see: its memo is
    /// re-executed in every new revision and never evicted.
    pub fn report_untracked_read(&self) {
        active::record_untracked_read(self.id, self.clock.current());
    }

    /// The memoized value of `Q(key)` if it is verified at the current revision, without
    /// executing or verifying anything and without recording a dependency.
    pub fn peek<Q: Query<C>>(&self, key: &Q::Key) -> Option<Q::Value> {
        let table = self.derived::<Q>();
        let (_, slot) = table.lookup(key)?;
        if slot.stamp.load(Ordering::Acquire) != self.clock.current().as_u64() | PRESENT {
            return None;
        }
        // SAFETY: we observed `stamp == current | PRESENT` under `&self`.
        Some(unsafe { slot.value_unchecked() }.clone())
    }

    /// Whether `Q(key)` was ever fetched here (its memo exists, with or without a value):
    /// fetching it again costs a verification, not an execution.
    pub fn has_memo<Q: Query<C>>(&self, key: &Q::Key) -> bool {
        self.derived::<Q>().lookup(key).is_some()
    }

    /// What the engine knows about the memo of `Q(key)`; `None` if never fetched.
    pub fn memo_info<Q: Query<C>>(&self, key: &Q::Key) -> Option<MemoInfo> {
        let table = self.derived::<Q>();
        let (_, slot) = table.lookup(key)?;
        let stamp = slot.stamp.load(Ordering::Acquire);
        Some(MemoInfo {
            verified_at: verified_at_of(stamp),
            changed_at: slot.changed_at(),
            durability: slot.durability(),
            has_value: stamp & PRESENT != 0,
            untracked: slot.is_untracked(),
            dependencies: slot
                .edges()
                .as_slice()
                .iter()
                .filter(|edge| **edge != FAILED_READ)
                .map(|edge| self.frame_of(*edge))
                .collect(),
        })
    }

    /// How many values query `Q` holds.
    pub fn memo_stats<Q: Query<C>>(&self) -> MemoStats {
        let table = self.derived::<Q>();
        MemoStats {
            keys: table.used_memos(),
            values: table.lru.live_count.load(Ordering::Relaxed),
            value_bytes: table.lru.live_bytes.load(Ordering::Relaxed),
        }
    }

    // ----- changing inputs (revision boundaries) ------------------------------------

    /// Sets input `I` at `key`. A different value (or durability) starts a new revision;
    /// an equal value with the same durability changes nothing.
    pub fn set_input<I: Input>(&mut self, key: I::Key, value: I::Value, durability: Durability) {
        self.write_input::<I>(key, Some(value), durability);
    }

    /// Removes input `I` at `key` (e.g. a deleted file): readers then see `None`.
    pub fn remove_input<I: Input>(&mut self, key: &I::Key) {
        self.write_input::<I>(key.clone(), None, Durability::Low);
    }

    /// Starts a new revision as if an input of `durability` had changed.
    pub fn synthetic_write(&mut self, durability: Durability) {
        self.clock.new_revision(durability);
        self.at_boundary();
    }

    /// Evicts now (without a new revision) whatever the LRU budgets do not allow.
    pub fn evict(&mut self) {
        self.at_boundary();
    }

    /// Bounds how many values of `Q` survive a revision boundary (0 = unbounded).
    pub fn set_lru_capacity<Q: Query<C>>(&self, capacity: usize) {
        self.derived::<Q>().lru.set_capacity(capacity);
    }

    /// Bounds the total [`Query::size_bytes`] of `Q`'s values surviving a revision
    /// boundary (0 = unbounded).
    pub fn set_lru_bytes<Q: Query<C>>(&self, bytes: usize) {
        self.derived::<Q>().lru.set_byte_budget(bytes);
    }

    /// Installs `listener`, called (from any thread) for every [`Event`]. Without a
    /// listener, events cost one branch.
    pub fn set_event_listener(&mut self, listener: impl Fn(&Event<'_>) + Send + Sync + 'static) {
        self.listener = Some(Box::new(listener));
    }

    /// Removes the event listener.
    pub fn clear_event_listener(&mut self) {
        self.listener = None;
    }

    // ----- internals -----------------------------------------------------------------

    fn write_input<I: Input>(
        &mut self,
        key: I::Key,
        value: Option<I::Value>,
        durability: Durability,
    ) {
        let id = self.input_table::<I>().id;
        let Database {
            clock,
            ingredients,
            listener,
            ..
        } = self;
        let Some(table) = ingredients
            .get_mut(id)
            .and_then(|slot| slot.downcast_mut::<InputTable<I>>())
        else {
            invariant_broken("an input table changed type");
        };
        let changed = table.write(key.clone(), value, durability, |old| {
            clock.new_revision(old)
        });
        if !changed {
            return;
        }
        if let Some(listener) = listener {
            listener(&Event {
                kind: EventKind::DidSetInput,
                query: I::NAME,
                key: &key,
                revision: clock.current(),
            });
        }
        self.at_boundary();
    }

    /// Revision-boundary work: LRU eviction and freeing retired index tables.
    fn at_boundary(&mut self) {
        let revision = self.clock.current();
        let listener = self.listener.as_ref();
        self.ingredients.for_each_mut(|_, slot| {
            slot.ingredient_mut().at_boundary(listener, revision);
        });
        self.ingredients.release_retired();
        self.interners.for_each_mut(|_, slot| {
            // SAFETY: under `&mut self`, nobody probes an interner.
            unsafe { slot.release_retired() };
        });
        self.interners.release_retired();
    }

    /// The interner of key type `K`, registering it on first use.
    fn interner<K: crate::query::QueryKey>(&self) -> Arc<Interner<K>> {
        let type_id = TypeId::of::<K>();
        let (_, slot) = self
            .interners
            .intern(&type_id, |_| InternerSlot::new::<K>());
        slot.get::<K>()
    }

    #[inline]
    pub(crate) fn current_revision(&self) -> Revision {
        self.clock.current()
    }

    #[inline]
    pub(crate) fn last_changed(&self, durability: Durability) -> Revision {
        self.clock.last_changed(durability)
    }

    /// The table of `T`, registering it (with id = its index) on first use.
    #[inline]
    fn ingredient<T: Ingredient<C>>(&self, make: impl FnOnce(u32) -> T) -> &T {
        match self.ingredient_cache.get::<T>() {
            Some(found) => found,
            None => self.ingredient_uncached(make),
        }
    }

    #[cold]
    #[inline(never)]
    fn ingredient_uncached<T: Ingredient<C>>(&self, make: impl FnOnce(u32) -> T) -> &T {
        let type_id = TypeId::of::<T>();
        let (index, slot) = self
            .ingredients
            .intern(&type_id, |id| IngredientSlot::new(make(id)));
        if let Some(pointer) = self.ingredients.get_ptr(index) {
            // SAFETY: registry slots never move and are dropped with the database, which
            // owns the cache too; the pointer comes from the registry's raw storage.
            unsafe { self.ingredient_cache.remember(type_id, index, pointer) };
        }
        slot.downcast_interned::<T>()
    }

    #[inline]
    pub(crate) fn derived<Q: Query<C>>(&self) -> &DerivedTable<Q, C> {
        self.ingredient(|id| DerivedTable::<Q, C>::new(id, self.interner::<Q::Key>()))
    }

    fn input_table<I: Input>(&self) -> &InputTable<I> {
        self.ingredient(|id| InputTable::<I>::new(id, self.interner::<I::Key>()))
    }

    #[inline]
    pub(crate) fn ingredient_by_id(&self, id: u32) -> Option<&dyn Ingredient<C>> {
        match self.ingredient_cache.get_by_id(id) {
            Some(slot) => Some(slot.ingredient()),
            None => self.ingredients.get(id).map(IngredientSlot::ingredient),
        }
    }

    /// Whether any of `edges` changed after `after`, in order, stopping at the first that
    /// did; consecutive edges of one query are handed to it in one call. `depth` is
    /// handed on to them (see `verify.rs`).
    pub(crate) fn any_changed_after(
        &self,
        edges: &[Edge],
        after: Revision,
        depth: u32,
    ) -> Result<bool, Failure> {
        let mut rest = edges;
        while let Some(first) = rest.first() {
            // Most runs are one edge long (reads alternate between queries): one compare
            // tells, without scanning.
            let run = if rest.get(1).is_some_and(|next| next.query == first.query) {
                rest.iter()
                    .position(|edge| edge.query != first.query)
                    .unwrap_or(rest.len())
            } else {
                1
            };
            let Some(ingredient) = self.ingredient_by_id(first.query) else {
                if *first == FAILED_READ {
                    // The reader handled a failure here: run it again.
                    return Ok(true);
                }
                invariant_broken("an edge names an unknown query");
            };
            // A lone edge (the common case: a query's reads alternate between queries) skips
            // the run loop: one dynamic call straight to the verification.
            let changed = if run == 1 {
                ingredient.maybe_changed_after(self, first.key, after, depth)
            } else {
                ingredient.any_changed_after(self, &rest[..run], after, depth)
            };
            match changed {
                Ok(false) => {}
                Ok(true) => return Ok(true),
                // A dependency failed while being brought up to date. The reader may
                // handle that failure and still produce a value (a from-scratch run
                // would): count it as a change, so the reader runs again and sees the
                // error itself, where a cycle is also named from its own frames.
                Err(_) => return Ok(true),
            }
            rest = &rest[run..];
        }
        Ok(false)
    }

    #[inline]
    pub(crate) fn record_read(&self, edge: Edge, durability: Durability, changed_at: Revision) {
        active::record_read(self.id, edge, durability, changed_at);
    }

    /// Records that the executing query read `edge` and got an error: it may handle the
    /// error and return a value, which depends on the failure. Conservatively (any write
    /// may matter, and it changed now), followed by [`FAILED_READ`], so that the reader
    /// runs again in every later revision until it reads no failure.
    #[cold]
    pub(crate) fn record_failed_read(&self, edge: Edge) {
        let current = self.current_revision();
        active::record_read(self.id, edge, Durability::Low, current);
        active::record_read(self.id, FAILED_READ, Durability::Low, current);
    }

    /// Sends an event if a listener is installed.
    #[inline]
    pub(crate) fn emit(&self, kind: EventKind, query: &'static str, key: &dyn Debug) {
        if let Some(listener) = &self.listener {
            listener(&Event {
                kind,
                query,
                key,
                revision: self.clock.current(),
            });
        }
    }

    /// Sends an event about the memo `edge` from a fetch, if a listener is installed. The
    /// listener is user code run while the fetch holds the memo's claim or verifies it: a
    /// panic there is contained like one in `execute`, as the memo's
    /// [`QueryError::Panicked`], which the fetch returns (review of issue 10).
    #[inline]
    pub(crate) fn emit_contained(&self, kind: EventKind, edge: Edge) -> Result<(), Failure> {
        if self.listener.is_none() {
            return Ok(());
        }
        self.emit_contained_slow(kind, edge)
    }

    #[cold]
    #[inline(never)]
    fn emit_contained_slow(&self, kind: EventKind, edge: Edge) -> Result<(), Failure> {
        panic::catch_unwind(AssertUnwindSafe(|| self.emit_for(kind, edge))).map_err(|payload| {
            Box::new(QueryError::Panicked {
                frame: self.frame_of(edge),
                message: crate::execute::panic_message(&*payload),
            })
        })
    }

    /// Sends an event about the memo `edge` if a listener is installed.
    #[inline]
    pub(crate) fn emit_for(&self, kind: EventKind, edge: Edge) {
        if self.listener.is_none() {
            return;
        }
        if let Some(ingredient) = self.ingredient_by_id(edge.query) {
            ingredient.with_key(edge.key, &mut |query, key| self.emit(kind, query, key));
        }
    }
}

/// A handle on one query of a database ([`Database::query`]): fetches without looking up
/// the query's table each time.
pub struct QueryHandle<'db, Q: Query<C>, C = ()> {
    db: &'db Database<C>,
    table: &'db DerivedTable<Q, C>,
}

impl<Q: Query<C>, C> Clone for QueryHandle<'_, Q, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Q: Query<C>, C> Copy for QueryHandle<'_, Q, C> {}

impl<'db, Q: Query<C>, C: Send + Sync + 'static> QueryHandle<'db, Q, C> {
    /// Same as [`Database::get`].
    #[inline]
    pub fn get(&self, key: &Q::Key) -> Result<Q::Value, QueryError> {
        self.table.fetch(self.db, key).map_err(|failure| *failure)
    }

    /// The database this handle fetches from.
    pub fn database(&self) -> &'db Database<C> {
        self.db
    }
}

/// Compile-time check: `&Database` can be shared between threads.
#[allow(dead_code)]
fn assert_database_is_sync() {
    fn is_sync<T: Sync + Send>() {}
    is_sync::<Database<()>>();
}
