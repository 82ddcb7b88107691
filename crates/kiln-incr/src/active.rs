//! Per-thread state: the executing query's read frame (where reads are recorded as edges),
//! the cycle being named while its error unwinds, and this thread's id.

use std::cell::{Cell, RefCell};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::durability::Durability;
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
    static OPEN_CYCLE: Cell<Option<(u64, Edge)>> = const { Cell::new(None) };
    static THREAD_ID: Cell<u32> = const { Cell::new(0) };
}

static NEXT_THREAD_ID: AtomicU32 = AtomicU32::new(1);

/// This thread's id: non-zero, below the claim word's waiters bit.
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

/// Starts naming a same-thread cycle: the claim on `start` (held further up this thread's
/// stack) was requested again. Each claim holder the error unwinds through adds itself
/// (see [`add_to_open_cycle`]) until the holder of `start` closes the list.
pub(crate) fn open_cycle(database: u64, start: Edge) {
    OPEN_CYCLE.with(|open| open.set(Some((database, start))));
}

/// Forgets any cycle being named (a cross-thread cycle names itself at once).
pub(crate) fn close_cycle() {
    OPEN_CYCLE.with(|open| open.set(None));
}

/// Called by the holder of `edge` when a cycle error unwinds through it: whether `edge`
/// belongs to the cycle being named, and whether it is the cycle's first member.
pub(crate) fn add_to_open_cycle(database: u64, edge: Edge) -> Option<bool> {
    OPEN_CYCLE.with(|open| {
        let (owner, start) = open.get()?;
        if owner != database {
            return None;
        }
        if start == edge {
            open.set(None);
            return Some(true);
        }
        Some(false)
    })
}
