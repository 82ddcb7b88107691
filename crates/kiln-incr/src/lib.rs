//! kiln-incr: a salsa-style incremental computation engine whose LRU keeps dependency
//! information, so that evicting a value never causes spurious re-execution.
//!
//! # Model
//!
//! - **Inputs** ([`Input`]) are set from outside with [`Database::set_input`] (or removed
//!   with [`Database::remove_input`]); each change starts a new [`Revision`]. Each input
//!   has a [`Durability`].
//! - **Derived queries** ([`Query`]) are pure functions of their key and of what they read
//!   through the database. Their results are memoized per key.
//! - Fetching ([`Database::get`]) returns the memo if it was verified in the current
//!   revision; otherwise the memo is verified **shallowly** (nothing of its durability
//!   changed since it was verified) or **deeply** (each dependency edge, in order, did
//!   not change), and re-executed only if a dependency really changed. A re-executed
//!   query whose value is equal keeps its `changed_at` (**backdating**, early cutoff).
//!
//! # Design decisions
//!
//! - **Eviction keeps everything but the value** (founding document, seed 003). An LRU
//!   per query ([`Database::set_lru_capacity`], [`Database::set_lru_bytes`]) drops only
//!   the value and keeps `verified_at`, `changed_at`, the edges, and a 128-bit fingerprint
//!   of the value ([`Query::fingerprint`]). Dependents verify through an evicted memo
//!   without re-executing it, and a re-executed memo whose old value was evicted is still
//!   backdated when its fingerprint is unchanged (salsa loses early cutoff there).
//!   Inputs and memos that made untracked reads are never evicted.
//! - **Eviction happens only at revision boundaries** (setting an input,
//!   [`Database::synthetic_write`]) or on [`Database::evict`], under `&mut Database`. The
//!   hit path takes no lock for LRU bookkeeping: a memo of a bounded query records the
//!   first time it is used in each revision with one relaxed counter increment (queries
//!   without a bound record nothing), and victims are chosen at the boundary.
//! - **Dense ids, plain-data memos.** Keys are interned into dense `u32` ids by one
//!   interner per key type, shared by every query and input keyed by that type (a key
//!   read by seven queries is stored and indexed once, as salsa keys memos by one
//!   interned id). Each query keeps its memos in pages by key id, found without a lock
//!   and without a per-query index. A dependency edge is a `(query id, key index)` pair of
//!   `u32`s, not a pointer, so memos can later be written to disk as they are. A memo of
//!   a query with a `u64` value is 32 bytes: the stamp (`verified_at` and two flags),
//!   `changed_at` with durability and flags in one word, the value, and the edges (one
//!   inline, two inline when their ids are small, else a pointer to a single
//!   length-prefixed allocation). Keys, LRU stamps and claims are not stored in memos.
//! - **Revisions never run out.** They are 60-bit numbers (36 years at a billion
//!   revisions a second); the clock never saturates or wraps, so a change is always seen.
//! - **Errors travel as values.** [`Query::execute`] returns `Result<Value, QueryError>`
//!   and nested fetches propagate engine errors with `?`. A panic inside `execute` is
//!   caught where it happens and becomes [`QueryError::Panicked`], and so is one in any
//!   other user code the engine runs while it holds a memo's claim (`Eq` and `Hash` or
//!   [`Query::fingerprint`] for backdating, [`Query::size_bytes`], `Clone` and `Drop` of
//!   values): nothing unwinds past a claim. During eviction such a panic is absorbed (the
//!   value is evicted anyway, without a fingerprint if that is what failed, so its next
//!   execution is not backdated; one whose size cannot be measured is evicted alone), and
//!   so is a panic in the `Drop` of a value replaced by a commit (the new value is
//!   published by then and the fetch succeeds) or of the duplicate value of an execution
//!   whose memo another thread verified meanwhile. An event listener run by a fetch
//!   (`WillExecute`, `DidDeepVerify`, `DidValidateMemoizedValue`) is contained too: its
//!   panic is the memo's [`QueryError::Panicked`], returned by that fetch (one about a
//!   published commit, `Backdated`, is absorbed). Only the `Clone` on the lock-free hit path,
//!   which holds no claim and changes nothing, unwinds to the caller. A cycle becomes
//!   [`QueryError::Cycle`] naming its members, from the first re-entered query to the one
//!   that closed it (a per-thread list of held claims names a same-thread cycle at once;
//!   the wait-for graph names a cross-thread one, and hands its members to the waiting
//!   threads as memos, so that each tells its own members by identity, never by text). No error is memoized: the memo keeps
//!   its last good state and a later fetch retries.
//! - **The cycle rule** (issue 10): *every member of a cycle fails with the cycle's
//!   error, also a member whose `execute` handles that error and returns a value*; a query
//!   outside the cycle that reads a member may handle the error like any other error.
//!   Otherwise which member succeeded would depend on which one was fetched first (`a =
//!   b.unwrap_or(1)`, `b = a.unwrap_or(2)` gave `a = 2` or `a = 1`), and an incremental
//!   read could differ from a from-scratch run. Members are the executions on this
//!   thread from the outermost claim on the cycle up (and, through the error handed to
//!   waiters, those on the other threads of a cross-thread cycle); a verification that
//!   meets a cycle while walking stored edges counts it as a change and runs its memo
//!   again, which then meets the cycle through executions (queries being deterministic,
//!   it reads the same edges up to there) or not.
//! - **A failure counts as a change.** A query that handles a dependency's error depends
//!   on that dependency like on any other read. When a memo's attempt fails, its next
//!   value is never backdated and it is not validated without executing. A reader that
//!   handled a failure records, after the failed read, an edge that always counts as
//!   changed: it runs again in every later revision until it reads no failure, also when
//!   the dependency failed and then succeeded within one revision (its `changed_at` is
//!   then the reader's `verified_at`, which the ordinary edge cannot tell apart).
//! - **Single flight.** `&Database` is `Sync`. Each `(query, key)` is executed by one
//!   thread at a time; other threads block and then share its result (or its error).
//!   Claims live in a sharded side table; claiming, waiting and releasing happen under
//!   the shard's lock, so a waiter's view of the owner cannot go stale, and a wait-for
//!   graph between threads detects cross-thread cycles without false alarms (the
//!   protocol is model-checked with `loom`: `sync.rs`).
//! - **Claim-free verification.** A memo whose edges did not change is verified without
//!   claiming it: any thread walks its edges and publishes the new `verified_at` with one
//!   CAS from the stamp it read, which fails if an execution was committed meanwhile.
//!   Edge lists replaced by a re-execution stay alive until the next revision boundary, so
//!   a walk never sees freed edges. Only a memo that must re-execute is claimed.
//! - **Events are free when unobserved**: with no listener
//!   ([`Database::set_event_listener`]) each event site is a single branch.
//!
//! # Example
//!
//! ```
//! use kiln_incr::{Database, Durability, Input, Query, QueryError};
//!
//! /// Source text per file name.
//! struct Source;
//! impl Input for Source {
//!     type Key = String;
//!     type Value = String;
//!     const NAME: &'static str = "source";
//! }
//!
//! /// Number of lines of a file (0 when the file is missing).
//! struct LineCount;
//! impl Query for LineCount {
//!     type Key = String;
//!     type Value = usize;
//!     const NAME: &'static str = "line_count";
//!     fn execute(db: &Database, file: &String) -> Result<usize, QueryError> {
//!         Ok(db.input::<Source>(file).map_or(0, |text| text.lines().count()))
//!     }
//! }
//!
//! /// Total lines over a list of files.
//! struct TotalLines;
//! impl Query for TotalLines {
//!     type Key = Vec<String>;
//!     type Value = usize;
//!     const NAME: &'static str = "total_lines";
//!     fn execute(db: &Database, files: &Vec<String>) -> Result<usize, QueryError> {
//!         let mut total = 0;
//!         for file in files {
//!             total += db.get::<LineCount>(file)?; // engine errors propagate with `?`
//!         }
//!         Ok(total)
//!     }
//! }
//!
//! let mut db = Database::default();
//! db.set_input::<Source>("a".into(), "x\ny".into(), Durability::Low);
//! db.set_input::<Source>("b".into(), "z".into(), Durability::High);
//! db.set_lru_capacity::<LineCount>(1000);
//! let files = vec!["a".to_string(), "b".to_string()];
//! assert_eq!(db.get::<TotalLines>(&files)?, 3);
//!
//! // Same line count: `line_count(a)` re-executes, is backdated, `total_lines` does not run.
//! db.set_input::<Source>("a".into(), "x\nw".into(), Durability::Low);
//! assert_eq!(db.get::<TotalLines>(&files)?, 3);
//!
//! db.remove_input::<Source>(&"b".to_string());
//! assert_eq!(db.get::<TotalLines>(&files)?, 2);
//! # Ok::<(), QueryError>(())
//! ```
//!
//! # API at a glance
//!
//! - Define: `impl Input for T` (key, value, name); `impl Query<C> for T` (key, value,
//!   name, `execute`, optional `fingerprint` and `size_bytes`).
//! - Read: [`Database::get`], [`Database::input`], [`Database::query`] (a
//!   [`QueryHandle`] that skips the per-call table lookup), [`Database::peek`] (a value
//!   verified this revision, executing nothing), [`Database::memo_info`],
//!   [`Database::memo_stats`], [`Database::revision`], [`Database::context`].
//! - Inside `execute`: [`Database::report_untracked_read`].
//! - Write (`&mut self`, revision boundaries): [`Database::set_input`],
//!   [`Database::remove_input`], [`Database::synthetic_write`], [`Database::evict`].
//! - Configure: [`Database::set_lru_capacity`], [`Database::set_lru_bytes`],
//!   [`Database::set_event_listener`].
//!
//! # Limits
//!
//! - Queries must be deterministic functions of what they read.
//! - Fetches made on *other* threads from inside a query (e.g. rayon inside `execute`)
//!   are not recorded as its dependencies, and a thread blocked in a nested
//!   work-stealing pool may run unrelated work under the query's frame. Fan out in
//!   parallel at the top level (outside queries) instead.
//! - None on depth: execution and verification recurse along dependency chains, and grow
//!   the stack on demand (see `stack.rs`), so a chain a million deep builds and verifies on
//!   a 2 MiB thread. The stack it takes is still proportional to the depth, on the heap
//!   (the million-level test peaked at 4.6 GB resident in a debug build).

#![deny(missing_docs)]
// A library reports through its return values and `tracing`, never by printing (only the
// CLI prints); every `unsafe` block states why it is sound.
#![deny(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::undocumented_unsafe_blocks
)]

mod active;
mod backdate;
mod cycle;
mod database;
mod derived;
mod durability;
mod error;
mod event;
mod eviction;
mod execute;
mod fetch;
mod ingredient;
mod input;
mod memo;
mod prims;
mod query;
mod revision;
mod stack;
mod sync;
mod table;
mod verify;

pub use database::{Database, MemoInfo, MemoStats, QueryHandle};
pub use durability::Durability;
pub use error::{QueryError, QueryFrame};
pub use event::{Event, EventKind};
pub use query::{Fingerprint, Input, Query, QueryKey};
pub use revision::Revision;
