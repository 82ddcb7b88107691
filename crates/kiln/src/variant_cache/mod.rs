//! The variant cache: one artifact per `VariantKey`, compiled once, never served stale.
//!
//! The founding document's contract: `get_or_compile` runs the compiler only on a miss, and
//! `invalidate_shader(shader, current)` removes exactly that shader's entries whose revision
//! differs. On top of it:
//!
//! - Single flight: concurrent requesters of one key cause one compile; the others wait and
//!   share its outcome, an error included. A failed or panicking compile is never inserted,
//!   and the next request compiles again.
//! - A reverse index shader -> keys makes invalidation cost proportional to that shader's
//!   entries, not to the cache.
//! - Each shader's current revision (set by `invalidate_shader`) gates insertion, so a
//!   compile still running for a stale revision is returned to its requesters but never
//!   inserted after the invalidation.
//! - An optional byte capacity, kept by evicting the least recently used artifacts.
//!
//! Layout: the entries live in shards (a read-write lock and hit counters per cache line),
//! so a hit takes one uncontended read lock and touches no shared cache line. Everything
//! that changes which artifacts are held (insert, remove, invalidate, evict) also holds the
//! `ledger` lock, which owns the reverse index, the byte count and the eviction queue; lock
//! order is always ledger, then shard. No lock is held while a compiler runs.

mod error;
mod eviction;
mod flight;
mod stats;
mod weigh;

pub use error::CacheError;
pub use stats::CacheStats;
pub use weigh::Weigh;

use std::fmt;
use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use rustc_hash::{FxHashMap, FxHashSet, FxHasher};

use crate::key::{Symbol, VariantKey};
use eviction::EvictionQueue;
use flight::{panic_message, Failure, Flight};

/// log2 of the number of shards: 32 shards keep two to eight threads apart on hits.
const SHARD_BITS: u32 = 5;

/// A thread-safe cache of compiled artifacts keyed by [`VariantKey`].
///
/// `A` is the artifact (cheap to clone: typically an `Arc`). All methods take `&self`; share
/// the cache between threads by reference or in an `Arc`.
pub struct VariantCache<A> {
    shards: Box<[Shard<A>]>,
    ledger: Mutex<Ledger>,
    capacity: Option<u64>,
    weigh: Box<dyn Fn(&A) -> u64 + Send + Sync>,
    /// Source of access stamps for LRU; advanced only when a capacity is set.
    clock: AtomicU64,
    compiles: AtomicU64,
    joined_waits: AtomicU64,
    failures: AtomicU64,
    invalidated: AtomicU64,
    evicted: AtomicU64,
    stale_discarded: AtomicU64,
}

/// One slice of the entries, alone on its cache line(s) so that hits on different shards
/// never share a line.
#[repr(align(128))]
struct Shard<A> {
    map: RwLock<FxHashMap<VariantKey, Slot<A>>>,
    requests: AtomicU64,
    hits: AtomicU64,
}

enum Slot<A> {
    Ready(Entry<A>),
    /// A compile is running; requesters join it. Never counted as an entry, never in the
    /// reverse index, never evicted or invalidated (its leader decides whether it is
    /// inserted).
    Compiling(Arc<Flight<A>>),
}

struct Entry<A> {
    artifact: A,
    bytes: u64,
    /// The clock value of the last use; unique per use when a capacity is set.
    stamp: AtomicU64,
}

/// What changes when artifacts come and go; guarded by one mutex, taken off the hit path.
#[derive(Default)]
struct Ledger {
    shaders: FxHashMap<Symbol, ShaderEntries>,
    entries: usize,
    bytes: u64,
    eviction: EvictionQueue,
}

#[derive(Default)]
struct ShaderEntries {
    /// Set by `invalidate_shader`: once set, only results at this revision are inserted.
    current: Option<u64>,
    /// The shader's ready entries (the reverse index).
    keys: FxHashSet<VariantKey>,
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
        let shards = (0..1usize << SHARD_BITS)
            .map(|_| Shard {
                map: RwLock::new(FxHashMap::default()),
                requests: AtomicU64::new(0),
                hits: AtomicU64::new(0),
            })
            .collect();
        VariantCache {
            shards,
            ledger: Mutex::new(Ledger::default()),
            capacity,
            weigh: Box::new(weigh),
            clock: AtomicU64::new(0),
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
    pub fn get_or_compile<E, F>(&self, key: &VariantKey, compile: F) -> Result<A, CacheError<E>>
    where
        F: FnOnce(&VariantKey) -> Result<A, E>,
        E: fmt::Display + Send + Sync + 'static,
    {
        let shard = self.shard(key);
        shard.requests.fetch_add(1, Relaxed);
        if let Some(Slot::Ready(entry)) = shard.map.read().get(key) {
            shard.hits.fetch_add(1, Relaxed);
            self.touch(entry);
            return Ok(entry.artifact.clone());
        }
        self.miss(shard, key, compile)
    }

    #[cold]
    fn miss<E, F>(&self, shard: &Shard<A>, key: &VariantKey, compile: F) -> Result<A, CacheError<E>>
    where
        F: FnOnce(&VariantKey) -> Result<A, E>,
        E: fmt::Display + Send + Sync + 'static,
    {
        let flight = {
            let mut map = shard.map.write();
            match map.get(key) {
                // Inserted between our read and write locks.
                Some(Slot::Ready(entry)) => {
                    shard.hits.fetch_add(1, Relaxed);
                    self.touch(entry);
                    return Ok(entry.artifact.clone());
                }
                Some(Slot::Compiling(flight)) => Err(Arc::clone(flight)),
                None => {
                    let flight = Arc::new(Flight::new());
                    map.insert(*key, Slot::Compiling(Arc::clone(&flight)));
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
                self.withdraw(key, &lead.flight);
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
                self.withdraw(key, &lead.flight);
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
        let mut ledger = self.ledger.lock();
        let stale = ledger
            .shaders
            .get(&key.shader_symbol())
            .and_then(|shader| shader.current)
            .is_some_and(|current| current != key.revision());
        let oversized = self.capacity.is_some_and(|capacity| bytes > capacity);
        if stale || oversized {
            drop(ledger);
            self.withdraw(key, flight);
            let counter = if stale {
                &self.stale_discarded
            } else {
                &self.evicted
            };
            counter.fetch_add(1, Relaxed);
            return;
        }
        {
            let mut map = self.shard(key).map.write();
            match map.get(key) {
                Some(Slot::Compiling(placeholder)) if Arc::ptr_eq(placeholder, flight) => {}
                // Our placeholder is gone (only its leader removes it): keep what is there.
                _ => return,
            }
            let stamp = self.clock.fetch_add(1, Relaxed) + 1;
            map.insert(
                *key,
                Slot::Ready(Entry {
                    artifact,
                    bytes,
                    stamp: AtomicU64::new(stamp),
                }),
            );
        }
        ledger.entries += 1;
        ledger.bytes += bytes;
        ledger
            .shaders
            .entry(key.shader_symbol())
            .or_default()
            .keys
            .insert(*key);
        if let Some(capacity) = self.capacity {
            self.evict_to(&mut ledger, capacity);
        }
    }

    /// Removes `flight`'s placeholder (a compile that produced nothing to insert).
    fn withdraw(&self, key: &VariantKey, flight: &Arc<Flight<A>>) {
        let mut map = self.shard(key).map.write();
        if let Some(Slot::Compiling(placeholder)) = map.get(key) {
            if Arc::ptr_eq(placeholder, flight) {
                map.remove(key);
            }
        }
    }

    /// The artifact of `key` if it is held (it counts as a use for LRU); never compiles and
    /// does not count as a request.
    pub fn get(&self, key: &VariantKey) -> Option<A> {
        match self.shard(key).map.read().get(key) {
            Some(Slot::Ready(entry)) => {
                self.touch(entry);
                Some(entry.artifact.clone())
            }
            _ => None,
        }
    }

    /// Whether an artifact of `key` is held (not a use for LRU).
    pub fn contains(&self, key: &VariantKey) -> bool {
        matches!(self.shard(key).map.read().get(key), Some(Slot::Ready(_)))
    }

    /// Removes and returns the artifact of `key`, if held. A compile in flight for `key` is
    /// not affected.
    pub fn remove(&self, key: &VariantKey) -> Option<A> {
        let mut ledger = self.ledger.lock();
        let entry = self.take_ready(&mut ledger, key)?;
        Some(entry.artifact)
    }

    /// Removes every entry of `shader` whose revision differs from `current_revision`, and
    /// returns how many. Other shaders are untouched; the cost is proportional to `shader`'s
    /// entries.
    ///
    /// `current_revision` becomes the shader's current revision: from now on, a compile of
    /// `shader` at any other revision (one in flight now included) is returned to its
    /// requesters but not inserted, until a later call names another revision.
    pub fn invalidate_shader(&self, shader: &str, current_revision: u64) -> usize {
        let symbol = Symbol::intern(shader);
        let mut ledger = self.ledger.lock();
        let entries = ledger.shaders.entry(symbol).or_default();
        entries.current = Some(current_revision);
        let stale: Vec<VariantKey> = entries
            .keys
            .iter()
            .filter(|key| key.revision() != current_revision)
            .copied()
            .collect();
        for key in &stale {
            self.take_ready(&mut ledger, key);
        }
        self.invalidated.fetch_add(stale.len() as u64, Relaxed);
        stale.len()
    }

    /// The revision last given to `invalidate_shader` for `shader`, if any.
    pub fn current_revision(&self, shader: &str) -> Option<u64> {
        let symbol = Symbol::lookup(shader)?;
        self.ledger.lock().shaders.get(&symbol)?.current
    }

    /// The keys of `shader`'s held artifacts, in ordinal order.
    pub fn shader_keys(&self, shader: &str) -> Vec<VariantKey> {
        let Some(symbol) = Symbol::lookup(shader) else {
            return Vec::new();
        };
        let mut keys: Vec<VariantKey> = self
            .ledger
            .lock()
            .shaders
            .get(&symbol)
            .map(|entries| entries.keys.iter().copied().collect())
            .unwrap_or_default();
        keys.sort_unstable();
        keys
    }

    /// Removes every held artifact (compiles in flight are not affected; current revisions
    /// are kept).
    pub fn clear(&self) {
        let mut ledger = self.ledger.lock();
        for shard in self.shards.iter() {
            shard
                .map
                .write()
                .retain(|_, slot| matches!(slot, Slot::Compiling(_)));
        }
        for entries in ledger.shaders.values_mut() {
            entries.keys.clear();
        }
        ledger.entries = 0;
        ledger.bytes = 0;
        ledger.eviction.clear();
    }

    /// The number of held artifacts.
    pub fn len(&self) -> usize {
        self.ledger.lock().entries
    }

    /// Whether no artifact is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The total weight of held artifacts, in bytes.
    pub fn bytes(&self) -> u64 {
        self.ledger.lock().bytes
    }

    /// The byte capacity, if bounded.
    pub fn capacity(&self) -> Option<u64> {
        self.capacity
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> CacheStats {
        let (requests, hits) = self.shards.iter().fold((0, 0), |(requests, hits), shard| {
            (
                requests + shard.requests.load(Relaxed),
                hits + shard.hits.load(Relaxed),
            )
        });
        CacheStats {
            requests,
            hits,
            compiles: self.compiles.load(Relaxed),
            joined_waits: self.joined_waits.load(Relaxed),
            failures: self.failures.load(Relaxed),
            invalidated: self.invalidated.load(Relaxed),
            evicted: self.evicted.load(Relaxed),
            stale_discarded: self.stale_discarded.load(Relaxed),
        }
    }

    /// Removes the ready entry of `key` from its shard and from the ledger.
    fn take_ready(&self, ledger: &mut Ledger, key: &VariantKey) -> Option<Entry<A>> {
        let entry = {
            let mut map = self.shard(key).map.write();
            if !matches!(map.get(key), Some(Slot::Ready(_))) {
                return None;
            }
            match map.remove(key) {
                Some(Slot::Ready(entry)) => entry,
                _ => return None,
            }
        };
        ledger.entries -= 1;
        ledger.bytes -= entry.bytes;
        if let Some(entries) = ledger.shaders.get_mut(&key.shader_symbol()) {
            entries.keys.remove(key);
        }
        Some(entry)
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

    #[inline]
    fn shard(&self, key: &VariantKey) -> &Shard<A> {
        let mut hasher = FxHasher::default();
        key.hash(&mut hasher);
        // The shard's map hashes the key again with the same function and reads both the low
        // bits and the top seven; choose the shard from a remix so that keys within one shard
        // still spread over the map.
        let remixed = hasher.finish().wrapping_mul(0x9E37_79B9_7F4A_7C15);
        &self.shards[(remixed >> (64 - SHARD_BITS)) as usize]
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
        self.cache.withdraw(&self.key, &self.flight);
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
