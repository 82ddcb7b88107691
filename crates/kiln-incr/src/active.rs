//! Per-thread state: the stack of executing queries (where reads are recorded as edges)
//! and the stack of claimed memos (for naming cycles), plus this thread's id.

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
    static CLAIMED: RefCell<Vec<(u64, Edge)>> = const { RefCell::new(Vec::new()) };
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
        stack.len() - 1
    })
}

/// Ends the execution pushed at `depth` (dropping any frame a panic left above it).
pub(crate) fn pop_frame(depth: usize) -> Option<ReadSummary> {
    let frame = ACTIVE.with(|stack| {
        let mut stack = stack.borrow_mut();
        stack.truncate(depth + 1);
        if stack.len() == depth + 1 {
            stack.pop()
        } else {
            None
        }
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

/// Notes that this thread now holds the claim on `edge`.
pub(crate) fn push_claim(database: u64, edge: Edge) {
    CLAIMED.with(|claimed| claimed.borrow_mut().push((database, edge)));
}

/// Notes that this thread released its claim on `edge`. Claims nest (they are held by
/// guards on the call stack), so it is the latest one.
pub(crate) fn pop_claim(database: u64, edge: Edge) {
    CLAIMED.with(|claimed| {
        let popped = claimed.borrow_mut().pop();
        debug_assert_eq!(
            popped,
            Some((database, edge)),
            "claims released out of order"
        );
    });
}

/// The memos this thread has claimed since it claimed `edge`, starting with `edge`.
pub(crate) fn claimed_since(database: u64, edge: Edge) -> Vec<Edge> {
    CLAIMED.with(|claimed| {
        let claimed = claimed.borrow();
        let start = claimed
            .iter()
            .position(|entry| *entry == (database, edge))
            .unwrap_or(claimed.len());
        claimed[start..]
            .iter()
            .filter(|(owner, _)| *owner == database)
            .map(|(_, edge)| *edge)
            .collect()
    })
}
