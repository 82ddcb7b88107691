//! Per-thread state: the executing query's read frame (where reads are recorded as edges),
//! the claims this thread holds (to name and apply same-thread cycles), and its id.

use std::cell::{Cell, RefCell};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::durability::Durability;
use crate::error::QueryError;
use crate::memo::{Edge, Edges};
use crate::revision::Revision;

/// What one executing query has read so far. It lives on the stack of
/// [`record_reads`]; the thread reaches the innermost one through [`TOP`].
struct ActiveQuery {
    database: u64,
    edges: Vec<Edge>,
    durability: Durability,
    changed_at: Revision,
    untracked: bool,
}

/// What an execution read, once it has finished.
pub(crate) struct ReadSummary {
    pub(crate) edges: Edges,
    /// Minimum durability over the reads (`High` when nothing was read).
    pub(crate) durability: Durability,
    /// Maximum `changed_at` over the reads.
    pub(crate) changed_at: Revision,
    pub(crate) untracked: bool,
}

thread_local! {
    /// The innermost executing query's frame on this thread (null outside any query).
    /// A plain pointer rather than a `RefCell<Vec<_>>`: a read costs one thread-local
    /// load and no borrow flag, and the frames need no thread-local destructor.
    static TOP: Cell<*mut ActiveQuery> = const { Cell::new(ptr::null_mut()) };
    static SPARE_EDGES: RefCell<Vec<Vec<Edge>>> = const { RefCell::new(Vec::new()) };
    static THREAD_ID: Cell<u32> = const { Cell::new(0) };
}

static NEXT_THREAD_ID: AtomicU32 = AtomicU32::new(1);

/// This thread's id: non-zero, never reused (until 2^31 threads have existed).
#[inline]
pub(crate) fn thread_id() -> u32 {
    THREAD_ID.with(|id| {
        let current = id.get();
        if current != 0 {
            return current;
        }
        // Ids are never reused; wrapping after 2^31 threads would need that many threads
        // to exist one after the other, and even then ids only collide with long-gone ones.
        let fresh = (NEXT_THREAD_ID.fetch_add(1, Ordering::Relaxed) & 0x7fff_ffff).max(1);
        id.set(fresh);
        fresh
    })
}

/// Puts the enclosing frame back on [`TOP`] when an execution ends, also by unwinding.
struct RestoreTop(*mut ActiveQuery);

impl Drop for RestoreTop {
    fn drop(&mut self) {
        TOP.with(|top| top.set(self.0));
    }
}

/// Runs `execute` as a new execution of a query of `database`, recording what it reads.
pub(crate) fn record_reads<R>(database: u64, execute: impl FnOnce() -> R) -> (R, ReadSummary) {
    let edges = SPARE_EDGES
        .with(|spare| spare.borrow_mut().pop())
        .unwrap_or_default();
    let mut frame = ActiveQuery {
        database,
        edges,
        durability: Durability::High,
        changed_at: Revision::START,
        untracked: false,
    };
    // `frame` is touched only through this pointer until `restore` is dropped (the
    // pointer is unpublished again), and it does not move before then.
    let restore = RestoreTop(TOP.with(|top| top.replace(&mut frame)));
    let result = execute();
    drop(restore);
    let summary = ReadSummary {
        edges: Edges::from_slice(&frame.edges),
        durability: frame.durability,
        changed_at: frame.changed_at,
        untracked: frame.untracked,
    };
    let mut edges = frame.edges;
    edges.clear();
    SPARE_EDGES.with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < 64 {
            spare.push(edges);
        }
    });
    (result, summary)
}

/// The innermost executing query's frame on this thread, if it belongs to `database`.
///
/// # Safety
/// The caller uses the reference only until it returns to code that could start or end an
/// execution (no user code and no fetch may run while it holds it).
#[inline]
unsafe fn top_frame<'a>(database: u64) -> Option<&'a mut ActiveQuery> {
    let top = TOP.with(Cell::get);
    if top.is_null() {
        return None;
    }
    // SAFETY: a non-null `TOP` points at a live frame on this thread's stack (unpublished
    // before its `record_reads` returns or unwinds), which nothing else accesses while
    // its query runs; the caller keeps this reference short.
    let frame = unsafe { &mut *top };
    (frame.database == database).then_some(frame)
}

/// Records that the executing query of `database` (if any) read `edge`.
#[inline]
pub(crate) fn record_read(database: u64, edge: Edge, durability: Durability, changed_at: Revision) {
    // SAFETY: the reference does not outlive this function, which runs no other code.
    let Some(top) = (unsafe { top_frame(database) }) else {
        return;
    };
    // Reading the same dependency twice in a row is common (a loop); skip the repeat.
    if top.edges.last() != Some(&edge) {
        top.edges.push(edge);
    }
    top.durability = top.durability.min(durability);
    top.changed_at = top.changed_at.max(changed_at);
}

/// Marks the executing query of `database` (if any) as having read untracked state.
pub(crate) fn record_untracked_read(database: u64, current: Revision) {
    // SAFETY: the reference does not outlive this function, which runs no other code.
    if let Some(top) = unsafe { top_frame(database) } {
        top.untracked = true;
        top.durability = Durability::Low;
        top.changed_at = current;
    }
}

/// A claim this thread holds, innermost last (see [`push_claim`]).
struct ClaimRecord {
    database: u64,
    edge: Edge,
    /// Whether the memo is being executed (else it is being verified: its stored edges
    /// are walked, and it executes only if one of them changed).
    executing: bool,
    /// Set when the attempt made under this claim took part in a cycle (boxed: rare, and
    /// a small record keeps taking and releasing a claim cheap).
    cycle: Option<Box<CycleMark>>,
}

/// The cycle an attempt took part in.
struct CycleMark {
    /// The attempt must fail with this error whatever its `execute` returns (the cycle
    /// rule, see `lib.rs`); taken by [`take_cycle_mark`].
    error: Option<QueryError>,
    /// The memos of the cycle, handed to the threads waiting for this claim with its
    /// failure (see `sync.rs`).
    members: Vec<Edge>,
}

thread_local! {
    static CLAIMS: RefCell<Vec<ClaimRecord>> = const { RefCell::new(Vec::new()) };
}

/// Records that this thread now holds the claim on `edge` of `database`.
pub(crate) fn push_claim(database: u64, edge: Edge) {
    CLAIMS.with(|claims| {
        claims.borrow_mut().push(ClaimRecord {
            database,
            edge,
            executing: false,
            cycle: None,
        });
    });
}

/// Forgets the innermost claim (it was released); returns the members of the cycle its
/// attempt was marked to fail with (empty if none).
pub(crate) fn pop_claim() -> Vec<Edge> {
    CLAIMS.with(|claims| {
        claims
            .borrow_mut()
            .pop()
            .and_then(|record| record.cycle)
            .map(|mark| mark.members)
            .unwrap_or_default()
    })
}

/// The claims of `database` from the one on `start` to the innermost, in the order they
/// were taken: a same-thread cycle when `start` is asked for again. Empty if this thread
/// does not hold `start`.
pub(crate) fn claim_path(database: u64, start: Edge) -> Vec<Edge> {
    CLAIMS.with(|claims| {
        let claims = claims.borrow();
        let Some(position) = claims
            .iter()
            .rposition(|record| record.database == database && record.edge == start)
        else {
            return Vec::new();
        };
        claims[position..]
            .iter()
            .filter(|record| record.database == database)
            .map(|record| record.edge)
            .collect()
    })
}

/// Applies the cycle rule after this thread met the cycle `error` while asking for a
/// memo: `reading` when an execution asked (a read), not when a verification walked a
/// stored edge. `members`: the memos of the cycle.
///
/// Executions from this thread's outermost claim on the cycle to the innermost are marked
/// to fail with `error` whatever they return (see [`take_cycle_mark`]): each reads the
/// next, so a from-scratch run meets the same cycle. Except above a claim held for
/// verification: that memo walks *stored* edges, which its next execution may not read
/// again, so only the executions above the innermost such claim are marked; its walk
/// takes their failure as a change and runs the memo again, which meets the cycle (then
/// through executions only) or not. A walk that asked marks nothing: it absorbs the error
/// the same way.
pub(crate) fn mark_cycle(database: u64, error: &QueryError, reading: bool, members: &[Edge]) {
    let is_member = |edge: Edge| members.contains(&edge);
    if !reading {
        return;
    }
    CLAIMS.with(|claims| {
        let mut claims = claims.borrow_mut();
        let Some(first) = claims
            .iter()
            .position(|record| record.database == database && is_member(record.edge))
        else {
            return;
        };
        let from = claims[first..]
            .iter()
            .rposition(|record| record.database == database && !record.executing)
            .map_or(first, |verifying| first + verifying + 1);
        for record in &mut claims[from..] {
            let marked = record
                .cycle
                .as_ref()
                .is_some_and(|mark| mark.error.is_some());
            if record.database == database && !marked {
                record.cycle = Some(Box::new(CycleMark {
                    error: Some(error.clone()),
                    members: members.to_vec(),
                }));
            }
        }
    });
}

/// Starts a new attempt (an execution) under the innermost claim: a cycle mark left by
/// an earlier phase under the same claim (a verification that met the cycle, after which
/// the memo runs again) does not apply to it.
pub(crate) fn begin_attempt() {
    CLAIMS.with(|claims| {
        if let Some(record) = claims.borrow_mut().last_mut() {
            record.executing = true;
            record.cycle = None;
        }
    });
}

/// The cycle the attempt under the innermost claim took part in, if any.
pub(crate) fn take_cycle_mark() -> Option<QueryError> {
    CLAIMS.with(|claims| claims.borrow_mut().last_mut()?.cycle.as_mut()?.error.take())
}
