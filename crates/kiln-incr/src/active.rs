//! Per-thread state: the stack of executing queries (where reads are recorded as edges),
//! the cycle being named while its error unwinds, and this thread's id.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::durability::Durability;
use crate::memo::{Edge, Edges};
use crate::revision::Revision;

/// What one executing query has read so far.
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
    static ACTIVE: RefCell<Vec<ActiveQuery>> = const { RefCell::new(Vec::new()) };
    static SPARE_EDGES: RefCell<Vec<Vec<Edge>>> = const { RefCell::new(Vec::new()) };
    /// Number of frames in `ACTIVE`: lets a read outside any query skip the `RefCell`.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
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

/// Starts recording reads for a new execution; returns the depth to pass to [`pop_frame`].
pub(crate) fn push_frame(database: u64) -> usize {
    let edges = SPARE_EDGES
        .with(|spare| spare.borrow_mut().pop())
        .unwrap_or_default();
    ACTIVE.with(|stack| {
        let mut stack = stack.borrow_mut();
        stack.push(ActiveQuery {
            database,
            edges,
            durability: Durability::High,
            changed_at: Revision::START,
            untracked: false,
        });
        DEPTH.with(|depth| depth.set(stack.len()));
        stack.len() - 1
    })
}

/// Ends the execution pushed at `depth` (dropping any frame a panic left above it).
pub(crate) fn pop_frame(depth: usize) -> Option<ReadSummary> {
    let frame = ACTIVE.with(|stack| {
        let mut stack = stack.borrow_mut();
        stack.truncate(depth + 1);
        let frame = if stack.len() == depth + 1 {
            stack.pop()
        } else {
            None
        };
        DEPTH.with(|current| current.set(stack.len()));
        frame
    })?;
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
    Some(summary)
}

/// Records that the executing query of `database` (if any) read `edge`.
#[inline]
pub(crate) fn record_read(database: u64, edge: Edge, durability: Durability, changed_at: Revision) {
    if DEPTH.with(Cell::get) == 0 {
        return;
    }
    ACTIVE.with(|stack| {
        let mut stack = stack.borrow_mut();
        let Some(top) = stack.last_mut() else {
            return;
        };
        if top.database != database {
            return;
        }
        // Reading the same dependency twice in a row is common (a loop); skip the repeat.
        if top.edges.last() != Some(&edge) {
            top.edges.push(edge);
        }
        top.durability = top.durability.min(durability);
        top.changed_at = top.changed_at.max(changed_at);
    });
}

/// Marks the executing query of `database` (if any) as having read untracked state.
pub(crate) fn record_untracked_read(database: u64, current: Revision) {
    ACTIVE.with(|stack| {
        let mut stack = stack.borrow_mut();
        if let Some(top) = stack.last_mut() {
            if top.database == database {
                top.untracked = true;
                top.durability = Durability::Low;
                top.changed_at = current;
            }
        }
    });
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
