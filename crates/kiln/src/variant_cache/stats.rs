//! Counters describing what the cache did.

/// A snapshot of the cache's counters, each counted since the cache was made.
///
/// `requests == hits + compiles + joined_waits`: every `get_or_compile` call either hit,
/// ran the compiler, or waited on a compile already running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Calls of `get_or_compile`.
    pub requests: u64,
    /// Requests served from the cache without compiling.
    pub hits: u64,
    /// Times the compiler ran.
    pub compiles: u64,
    /// Requests that waited on a compile of the same key already running, and shared its
    /// outcome.
    pub joined_waits: u64,
    /// Compiles that returned an error or panicked.
    pub failures: u64,
    /// Entries removed by `invalidate_shader`.
    pub invalidated: u64,
    /// Entries removed to stay within the byte capacity, plus artifacts larger than the whole
    /// capacity, which are returned but never held.
    pub evicted: u64,
    /// Successful compiles not inserted because their key's revision was no longer the
    /// shader's current one (set by `invalidate_shader`) when they finished.
    pub stale_discarded: u64,
}
