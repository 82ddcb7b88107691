//! The variant cache: one artifact per `VariantKey`, compiled once, never served stale.
//!
//! The founding document's contract: `get_or_compile` runs the compiler only on a miss, and
//! `invalidate_shader(shader, current)` removes exactly that shader's entries whose revision
//! differs. On top of it:
//!
//! - Single flight: concurrent requesters of one key cause one compile; the others wait and
//!   share its outcome, an error included. A failed or panicking compile is never inserted,
//!   and the next request compiles again.
//! - Entries are grouped by shader (the reverse index shader -> keys is the layout itself),
//!   so invalidation costs that shader's entries, not the cache's.
//! - Each shader's current revision (set by `invalidate_shader`) gates insertion, so a
//!   compile still running for a stale revision is returned to its requesters but never
//!   inserted after the invalidation.
//! - An optional byte capacity, kept by evicting the least recently used artifacts.
//!
//! The current revision is one per shader, as in the founding document: after
//! `invalidate_shader(s, r)`, every key of `s` at a revision other than `r` is stale, whatever
//! its pass or keywords. A caller whose revisions differ between a shader's variants (say, a
//! hash of each variant's own include closure) should not call `invalidate_shader` with one
//! of them; such keys simply differ, and old ones can be dropped with `remove` or left to the
//! byte capacity. A shader never invalidated admits every revision.
//!
//! Locking: one table behind a reader-striped lock (`striped`): a hit read-locks only its
//! thread's stripe and counts itself there, so hits on different threads write no shared
//! cache line. Everything that changes the table (placeholders, inserts, removals,
//! invalidation, eviction) takes the write side. No lock is held while a compiler runs.

mod error;
mod eviction;
mod flight;
mod stats;
mod striped;
mod weigh;

pub use error::CacheError;
pub use stats::CacheStats;
pub use weigh::Weigh;

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::key::{name_symbol, Symbol, VariantKey};
use eviction::EvictionQueue;
use flight::{panic_message, Failure, Flight};
use striped::Striped;

/// A thread-safe cache of compiled artifacts keyed by [`VariantKey`].
///
/// `A` is the artifact (cheap to clone: typically an `Arc`; its `Clone` must not call back
/// into the cache). All methods take `&self`; share the cache between threads by reference
/// or in an `Arc`.
pub struct VariantCache<A> {
    table: Striped<Table<A>>,
    capacity: Option<u64>,
    weigh: Box<dyn Fn(&A) -> u64 + Send + Sync>,
    /// Source of access stamps for LRU; advanced on hits only when a capacity is set.
    clock: AtomicU64,
    /// Hits found under the write lock (inserted while the requester upgraded); the usual
    /// hits are counted per stripe.
    late_hits: AtomicU64,
    compiles: AtomicU64,
    joined_waits: AtomicU64,
    failures: AtomicU64,
    invalidated: AtomicU64,
    evicted: AtomicU64,
    stale_discarded: AtomicU64,
}

/// Everything the lock guards.
struct Table<A> {
    shaders: FxHashMap<Symbol, ShaderTable<A>>,
    /// Ready entries (placeholders of running compiles excluded).
    entries: usize,
    /// Total weight of ready entries.
    bytes: u64,
    eviction: EvictionQueue,
}

/// One shader's entries and its current revision.
struct ShaderTable<A> {
    /// Set by `invalidate_shader`: once set, only results at this revision are inserted.
    current: Option<u64>,
    slots: FxHashMap<VariantKey, Slot<A>>,
}

enum Slot<A> {
    Ready(Entry<A>),
    /// A compile is running; requesters join it. Never counted as an entry, never evicted or
    /// invalidated: its leader decides whether its result is inserted.
    Compiling(Arc<Flight<A>>),
}

struct Entry<A> {
    artifact: A,
    bytes: u64,
    /// The clock value at the last use; unique per use when a capacity is set.
    stamp: AtomicU64,
}

impl<A> Table<A> {
    #[inline]
    fn slot(&self, key: &VariantKey) -> Option<&Slot<A>> {
        self.shaders.get(&key.shader_symbol())?.slots.get(key)
    }

    fn ready(&self, key: &VariantKey) -> Option<&Entry<A>> {
        match self.slot(key)? {
            Slot::Ready(entry) => Some(entry),
            Slot::Compiling(_) => None,
        }
    }

    /// Removes `key`'s ready entry, keeping the counts right.
    fn take_ready(&mut self, key: &VariantKey) -> Option<Entry<A>> {
        let slots = &mut self.shaders.get_mut(&key.shader_symbol())?.slots;
        if !matches!(slots.get(key), Some(Slot::Ready(_))) {
            return None;
        }
        let Some(Slot::Ready(entry)) = slots.remove(key) else {
            return None;
        };
        // A shader's table grows to as many of its variants as were ever resident at once;
        // evicted ones give the room back, or a bounded cache over 100,000 variants would
        // keep a slot's worth of memory for each.
        if slots.capacity() > 64 && slots.len() < slots.capacity() / 4 {
            slots.shrink_to(slots.len() * 2);
        }
        self.entries -= 1;
        self.bytes -= entry.bytes;
        Some(entry)
    }

    /// Removes `flight`'s placeholder, if it is still there.
    fn withdraw(&mut self, key: &VariantKey, flight: &Arc<Flight<A>>) {
        if let Some(shader) = self.shaders.get_mut(&key.shader_symbol()) {
            if let Some(Slot::Compiling(placeholder)) = shader.slots.get(key) {
                if Arc::ptr_eq(placeholder, flight) {
                    shader.slots.remove(key);
                }
            }
        }
    }
}

impl<A: Clone + Send + Sync + Weigh> VariantCache<A> {
    /// An unbounded cache.
    pub fn new() -> Self {
        Self::with_weigher(None, |artifact: &A| artifact.weigh())
    }

    /// A cache that holds at most `bytes` of artifacts (by [`Weigh`]), evicting the least
    /// recently used ones.
    pub fn with_capacity(bytes: u64) -> Self {
        Self::with_weigher(Some(bytes), |artifact: &A| artifact.weigh())
    }
}

impl<A: Clone + Send + Sync + Weigh> Default for VariantCache<A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: Clone + Send + Sync> VariantCache<A> {
    /// A cache weighing artifacts with `weigh`, bounded to `capacity` bytes if given.
    pub fn with_weigher(
        capacity: Option<u64>,
        weigh: impl Fn(&A) -> u64 + Send + Sync + 'static,
    ) -> Self {
        VariantCache {
            table: Striped::new(Table {
                shaders: FxHashMap::default(),
                entries: 0,
                bytes: 0,
                eviction: EvictionQueue::default(),
            }),
            capacity,
            weigh: Box::new(weigh),
            clock: AtomicU64::new(0),
            late_hits: AtomicU64::new(0),
            compiles: AtomicU64::new(0),
            joined_waits: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            invalidated: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            stale_discarded: AtomicU64::new(0),
        }
    }

    /// The artifact of `key`: from the cache on a hit; otherwise from `compile`, run once
    /// however many threads ask for `key` at the same time (the others wait and share its
    /// outcome).
    ///
    /// A compile error or panic is returned to this caller and to every waiter, and nothing
    /// is inserted: the next request compiles again. A successful artifact is inserted unless
    /// `invalidate_shader` has since made `key`'s revision stale (it is still returned), or
    /// it alone exceeds the capacity.
    #[inline]
    pub fn get_or_compile<E, F>(&self, key: &VariantKey, compile: F) -> Result<A, CacheError<E>>
    where
        F: FnOnce(&VariantKey) -> Result<A, E>,
        E: fmt::Display + Send + Sync + 'static,
    {
        {
            let table = self.table.read();
            if let Some(entry) = table.ready(key) {
                table.count_hit();
                self.touch(entry);
                return Ok(entry.artifact.clone());
            }
        }
        self.miss(key, compile)
    }

    #[cold]
    fn miss<E, F>(&self, key: &VariantKey, compile: F) -> Result<A, CacheError<E>>
    where
        F: FnOnce(&VariantKey) -> Result<A, E>,
        E: fmt::Display + Send + Sync + 'static,
    {
        let flight = {
            let mut table = self.table.write();
            let slots = &mut table
                .shaders
                .entry(key.shader_symbol())
                .or_insert_with(|| ShaderTable {
                    current: None,
                    slots: FxHashMap::default(),
                })
                .slots;
            match slots.get(key) {
                // Inserted between our read and write locks.
                Some(Slot::Ready(entry)) => {
                    self.late_hits.fetch_add(1, Relaxed);
                    self.touch(entry);
                    return Ok(entry.artifact.clone());
                }
                Some(Slot::Compiling(flight)) => Err(Arc::clone(flight)),
                None => {
                    let flight = Arc::new(Flight::new());
                    slots.insert(*key, Slot::Compiling(Arc::clone(&flight)));
                    Ok(flight)
                }
            }
        };
        match flight {
            Ok(flight) => self.lead(key, flight, compile),
            Err(flight) => {
                self.joined_waits.fetch_add(1, Relaxed);
                flight.wait().map_err(|failure| failure_for(key, failure))
            }
        }
    }

    /// Runs the compiler for `key` as the leader of `flight`, and settles the outcome.
    fn lead<E, F>(
        &self,
        key: &VariantKey,
        flight: Arc<Flight<A>>,
        compile: F,
    ) -> Result<A, CacheError<E>>
    where
        F: FnOnce(&VariantKey) -> Result<A, E>,
        E: fmt::Display + Send + Sync + 'static,
    {
        let mut lead = Lead {
            cache: self,
            key: *key,
            flight,
            finished: false,
        };
        self.compiles.fetch_add(1, Relaxed);
        // The closure is only called here; if it unwinds, nothing it touched is reused.
        match catch_unwind(AssertUnwindSafe(|| compile(key))) {
            Ok(Ok(artifact)) => {
                let bytes = (self.weigh)(&artifact);
                self.admit(key, &lead.flight, artifact.clone(), bytes);
                lead.finish(Ok(artifact.clone()));
                Ok(artifact)
            }
            Ok(Err(error)) => {
                self.failures.fetch_add(1, Relaxed);
                let error = Arc::new(error);
                let message = error.to_string();
                self.table.write().withdraw(key, &lead.flight);
                lead.finish(Err(Failure::Compile {
                    error: Arc::clone(&error) as _,
                    message,
                }));
                Err(CacheError::Compile {
                    key: *key,
                    digest: key.digest(),
                    source: error,
                })
            }
            Err(payload) => {
                self.failures.fetch_add(1, Relaxed);
                let message = panic_message(payload.as_ref());
                self.table.write().withdraw(key, &lead.flight);
                lead.finish(Err(Failure::Panicked {
                    message: message.clone(),
                }));
                Err(CacheError::Panicked {
                    key: *key,
                    digest: key.digest(),
                    message,
                })
            }
        }
    }

    /// Replaces `flight`'s placeholder by the artifact, unless the key went stale or the
    /// artifact cannot fit; then evicts down to the capacity.
    fn admit(&self, key: &VariantKey, flight: &Arc<Flight<A>>, artifact: A, bytes: u64) {
        let mut table = self.table.write();
        let table = &mut *table;
        let Some(shader) = table.shaders.get_mut(&key.shader_symbol()) else {
            return;
        };
        match shader.slots.get(key) {
            Some(Slot::Compiling(placeholder)) if Arc::ptr_eq(placeholder, flight) => {}
            // Our placeholder is gone (only its leader removes it): keep what is there.
            _ => return,
        }
        let stale = shader
            .current
            .is_some_and(|current| current != key.revision());
        let oversized = self.capacity.is_some_and(|capacity| bytes > capacity);
        if stale || oversized {
            shader.slots.remove(key);
            let counter = if stale {
                &self.stale_discarded
            } else {
                &self.evicted
            };
            counter.fetch_add(1, Relaxed);
            return;
        }
        let stamp = self.clock.fetch_add(1, Relaxed) + 1;
        shader.slots.insert(
            *key,
            Slot::Ready(Entry {
                artifact,
                bytes,
                stamp: AtomicU64::new(stamp),
            }),
        );
        table.entries += 1;
        table.bytes += bytes;
        if let Some(capacity) = self.capacity {
            self.evict_to(table, capacity);
        }
    }

    /// The artifact of `key` if it is held (it counts as a use for LRU); never compiles and
    /// does not count as a request.
    pub fn get(&self, key: &VariantKey) -> Option<A> {
        let table = self.table.read();
        let entry = table.ready(key)?;
        self.touch(entry);
        Some(entry.artifact.clone())
    }

    /// Whether an artifact of `key` is held (not a use for LRU).
    pub fn contains(&self, key: &VariantKey) -> bool {
        self.table.read().ready(key).is_some()
    }

    /// Removes and returns the artifact of `key`, if held. A compile in flight for `key` is
    /// not affected.
    pub fn remove(&self, key: &VariantKey) -> Option<A> {
        Some(self.table.write().take_ready(key)?.artifact)
    }

    /// Removes every entry of `shader` whose revision differs from `current_revision`, and
    /// returns how many. Other shaders are untouched; the cost is proportional to `shader`'s
    /// entries.
    ///
    /// `current_revision` becomes the shader's current revision: from now on, a compile of
    /// `shader` at any other revision (one in flight now included) is returned to its
    /// requesters but not inserted, until a later call names another revision.
    pub fn invalidate_shader(&self, shader: &str, current_revision: u64) -> usize {
        // A name no key can hold (empty, or holding `|`) has no entries and no compiles.
        let Some(symbol) = name_symbol(shader) else {
            return 0;
        };
        let mut table = self.table.write();
        let table = &mut *table;
        let shader = table.shaders.entry(symbol).or_insert_with(|| ShaderTable {
            current: None,
            slots: FxHashMap::default(),
        });
        shader.current = Some(current_revision);
        let (mut removed, mut bytes) = (0, 0);
        shader.slots.retain(|key, slot| match slot {
            Slot::Ready(entry) if key.revision() != current_revision => {
                removed += 1;
                bytes += entry.bytes;
                false
            }
            _ => true,
        });
        table.entries -= removed;
        table.bytes -= bytes;
        self.invalidated.fetch_add(removed as u64, Relaxed);
        removed
    }

    /// The revision last given to `invalidate_shader` for `shader`, if any.
    pub fn current_revision(&self, shader: &str) -> Option<u64> {
        let symbol = Symbol::lookup(shader)?;
        self.table.read().shaders.get(&symbol)?.current
    }

    /// The keys of `shader`'s held artifacts, in ordinal order.
    pub fn shader_keys(&self, shader: &str) -> Vec<VariantKey> {
        let Some(symbol) = Symbol::lookup(shader) else {
            return Vec::new();
        };
        let mut keys: Vec<VariantKey> = match self.table.read().shaders.get(&symbol) {
            Some(shader) => shader
                .slots
                .iter()
                .filter(|(_, slot)| matches!(slot, Slot::Ready(_)))
                .map(|(key, _)| *key)
                .collect(),
            None => Vec::new(),
        };
        keys.sort_unstable();
        keys
    }

    /// Removes every held artifact (compiles in flight are not affected; current revisions
    /// are kept).
    pub fn clear(&self) {
        let mut table = self.table.write();
        for shader in table.shaders.values_mut() {
            shader
                .slots
                .retain(|_, slot| matches!(slot, Slot::Compiling(_)));
        }
        table.entries = 0;
        table.bytes = 0;
        table.eviction.clear();
    }

    /// The number of held artifacts.
    pub fn len(&self) -> usize {
        self.table.read().entries
    }

    /// Whether no artifact is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The total weight of held artifacts, in bytes.
    pub fn bytes(&self) -> u64 {
        self.table.read().bytes
    }

    /// The byte capacity, if bounded.
    pub fn capacity(&self) -> Option<u64> {
        self.capacity
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> CacheStats {
        let hits = self.late_hits.load(Relaxed)
            + self
                .table
                .stripes()
                .iter()
                .map(|stripe| stripe.hits.load(Relaxed))
                .sum::<u64>();
        let compiles = self.compiles.load(Relaxed);
        let joined_waits = self.joined_waits.load(Relaxed);
        CacheStats {
            requests: hits + compiles + joined_waits,
            hits,
            compiles,
            joined_waits,
            failures: self.failures.load(Relaxed),
            invalidated: self.invalidated.load(Relaxed),
            evicted: self.evicted.load(Relaxed),
            stale_discarded: self.stale_discarded.load(Relaxed),
        }
    }

    /// Marks `entry` as the most recently used. Only a bounded cache needs the order, so an
    /// unbounded one writes nothing; a repeated hit on the newest entry writes nothing either.
    #[inline]
    fn touch(&self, entry: &Entry<A>) {
        if self.capacity.is_some() && entry.stamp.load(Relaxed) != self.clock.load(Relaxed) {
            entry
                .stamp
                .store(self.clock.fetch_add(1, Relaxed) + 1, Relaxed);
        }
    }
}

/// Unwinding out of a compile (the compiler or the weigher) would leave requesters waiting
/// forever; dropping an unfinished `Lead` withdraws the placeholder and wakes them with an
/// error instead.
struct Lead<'c, A: Clone + Send + Sync> {
    cache: &'c VariantCache<A>,
    key: VariantKey,
    flight: Arc<Flight<A>>,
    finished: bool,
}

impl<A: Clone + Send + Sync> Lead<'_, A> {
    fn finish(&mut self, outcome: Result<A, Failure>) {
        self.finished = true;
        self.flight.complete(outcome);
    }
}

impl<A: Clone + Send + Sync> Drop for Lead<'_, A> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.cache.table.write().withdraw(&self.key, &self.flight);
        self.flight.complete(Err(Failure::Panicked {
            message: "the compiling request unwound before finishing".to_owned(),
        }));
    }
}

/// Turns a shared failure into this requester's error type.
fn failure_for<E: Send + Sync + 'static>(key: &VariantKey, failure: Failure) -> CacheError<E> {
    match failure {
        Failure::Compile { error, message } => match error.downcast::<E>() {
            Ok(source) => CacheError::Compile {
                key: *key,
                digest: key.digest(),
                source,
            },
            Err(_) => CacheError::FailedElsewhere {
                key: *key,
                digest: key.digest(),
                message,
            },
        },
        Failure::Panicked { message } => CacheError::Panicked {
            key: *key,
            digest: key.digest(),
            message,
        },
    }
}

impl<A> fmt::Debug for VariantCache<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VariantCache")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::convert::Infallible;

    fn key(keywords: &[&str], revision: u64) -> VariantKey {
        VariantKey::new("Lit", "Forward", keywords, revision).unwrap()
    }

    #[test]
    fn source_revision_invalidates_stale_variant() {
        let cache = VariantCache::<String>::new();
        let k = key(&["FOG"], 7);
        let artifact = cache
            .get_or_compile(&k, |k| Ok::<_, Infallible>(k.digest()))
            .unwrap();
        assert_eq!(artifact, k.digest());
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.invalidate_shader("Lit", 8), 1);
        assert_eq!(cache.len(), 0);
        assert!(!cache.contains(&k));
        assert_eq!(cache.stats().invalidated, 1);
    }

    #[test]
    fn cache_hit_does_not_recompile() {
        let cache = VariantCache::<String>::new();
        let runs = Cell::new(0);
        for keywords in [["FOG", "SKIN"], ["SKIN", "FOG"]] {
            let artifact = cache
                .get_or_compile(&key(&keywords, 7), |k| {
                    runs.set(runs.get() + 1);
                    Ok::<_, Infallible>(k.digest())
                })
                .unwrap();
            assert_eq!(artifact, "2a876a0d5092");
        }
        assert_eq!(runs.get(), 1);
        let stats = cache.stats();
        assert_eq!((stats.requests, stats.hits, stats.compiles), (2, 1, 1));
    }

    #[test]
    fn invalidation_keeps_the_current_revision_and_other_shaders() {
        let cache = VariantCache::<String>::new();
        let other = VariantKey::new("Unlit", "Forward", ["FOG"], 7).unwrap();
        for k in [key(&["FOG"], 7), key(&["SKIN"], 8), other] {
            cache
                .get_or_compile(&k, |k| Ok::<_, Infallible>(k.to_string()))
                .unwrap();
        }
        assert_eq!(cache.invalidate_shader("Lit", 8), 1);
        assert_eq!(cache.shader_keys("Lit"), [key(&["SKIN"], 8)]);
        assert!(cache.contains(&other));
        assert_eq!(cache.current_revision("Lit"), Some(8));
        assert_eq!(cache.current_revision("Unlit"), None);
        // A shader never seen has nothing to remove.
        assert_eq!(cache.invalidate_shader("NeverSeen", 1), 0);
    }

    #[test]
    fn remove_get_and_clear() {
        let cache = VariantCache::<Vec<u8>>::new();
        let k = key(&["FOG"], 1);
        assert_eq!(cache.get(&k), None);
        cache
            .get_or_compile(&k, |_| Ok::<_, Infallible>(vec![1, 2, 3]))
            .unwrap();
        assert_eq!(cache.bytes(), 3);
        assert_eq!(cache.get(&k), Some(vec![1, 2, 3]));
        assert_eq!(cache.remove(&k), Some(vec![1, 2, 3]));
        assert_eq!(cache.remove(&k), None);
        assert_eq!((cache.len(), cache.bytes()), (0, 0));
        cache
            .get_or_compile(&k, |_| Ok::<_, Infallible>(vec![1]))
            .unwrap();
        cache.clear();
        assert!(cache.is_empty());
        assert!(cache.shader_keys("Lit").is_empty());
        // Peeks are not requests.
        assert_eq!(cache.stats().requests, 2);
    }

    #[test]
    fn the_cache_is_shareable_between_threads() {
        fn assert_sync<T: Send + Sync>() {}
        assert_sync::<VariantCache<std::sync::Arc<[u8]>>>();
        assert_sync::<VariantKey>();
    }
}
