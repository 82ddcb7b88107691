//! Single flight: at most one thread executes or verifies a memo at a time. A thread
//! claims a memo by writing its id into the memo's claim word; others wait on a sharded
//! condition variable and share the outcome (success: they re-read the memo; failure: they
//! receive the same error). A wait-for graph between threads turns cross-thread cycles into
//! errors instead of deadlocks.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use rustc_hash::FxHashMap;

use crate::active;
use crate::database::Database;
use crate::error::QueryError;
use crate::event::EventKind;
use crate::memo::Edge;

/// Bit of a claim word set when some thread waits for the claim's release.
const WAITERS: u32 = 1 << 31;
const SHARDS: usize = 16;

/// How one attempt ended, as seen by the threads that waited for it.
type Outcome = Result<(), QueryError>;

struct Waiting {
    outcome: Mutex<Option<Outcome>>,
}

struct WaitShard {
    waiting: Mutex<FxHashMap<Edge, Arc<Waiting>>>,
    wake: Condvar,
}

/// Where blocked threads wait. Lock order: a shard, then the graph.
pub(crate) struct WaitTable {
    shards: Box<[WaitShard]>,
    /// Blocked thread -> (thread it waits for, memo it waits on).
    graph: Mutex<FxHashMap<u32, (u32, Edge)>>,
}

impl WaitTable {
    pub(crate) fn new() -> Self {
        WaitTable {
            shards: (0..SHARDS)
                .map(|_| WaitShard {
                    waiting: Mutex::new(FxHashMap::default()),
                    wake: Condvar::new(),
                })
                .collect(),
            graph: Mutex::new(FxHashMap::default()),
        }
    }

    fn shard(&self, edge: Edge) -> &WaitShard {
        let mixed = (edge.query as usize)
            .wrapping_mul(31)
            .wrapping_add(edge.key as usize);
        &self.shards[mixed % SHARDS]
    }

    /// Releases `word` (held by this thread) and hands `failure` (if any) to its waiters.
    fn release(&self, word: &AtomicU32, edge: Edge, failure: Option<&QueryError>) {
        loop {
            let current = word.load(Ordering::Acquire);
            if current & WAITERS == 0 {
                // No waiter registered (they register under the shard lock, setting the
                // bit with a CAS), so a plain CAS back to free is enough.
                if word
                    .compare_exchange(current, 0, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
                continue;
            }
            let shard = self.shard(edge);
            let mut waiting = shard.waiting.lock();
            word.store(0, Ordering::Release);
            self.graph.lock().retain(|_, (_, waited)| *waited != edge);
            if let Some(entry) = waiting.remove(&edge) {
                *entry.outcome.lock() = Some(match failure {
                    None => Ok(()),
                    Some(error) => Err(error.clone()),
                });
            }
            drop(waiting);
            shard.wake.notify_all();
            return;
        }
    }

    /// Follows the wait-for graph from `owner`; returns the memos waited on if it leads
    /// back to `me` (a cross-thread cycle), in the order the threads wait on them.
    fn cycle_through(
        graph: &FxHashMap<u32, (u32, Edge)>,
        owner: u32,
        me: u32,
    ) -> Option<Vec<Edge>> {
        let mut chain = Vec::new();
        let mut thread = owner;
        for _ in 0..=graph.len() {
            let (next, waited) = *graph.get(&thread)?;
            chain.push(waited);
            if next == me {
                return Some(chain);
            }
            thread = next;
        }
        None
    }
}

/// An engine error inside the engine: boxed, so that results on the hot path stay small.
pub(crate) type Failure = Box<QueryError>;

/// The result of trying to claim a memo.
pub(crate) enum Claimed<'a> {
    /// This thread now holds the claim.
    Owned(ClaimGuard<'a>),
    /// Another thread held it and finished successfully: read the memo again.
    Retry,
}

/// Holds a memo's claim. Release it with [`ClaimGuard::finish`]; dropping it (only when
/// unwinding from a bug) releases it as a success, so waiters retry instead of hanging.
pub(crate) struct ClaimGuard<'a> {
    word: &'a AtomicU32,
    edge: Edge,
    waits: &'a WaitTable,
}

impl ClaimGuard<'_> {
    /// Releases the claim, handing the attempt's error (if any) to every waiter. A cycle
    /// error unwinding through this memo gets the memo added to its members.
    pub(crate) fn finish<T, C: Send + Sync + 'static>(
        self,
        db: &Database<C>,
        mut result: Result<T, Failure>,
    ) -> Result<T, Failure> {
        if let Err(error) = &mut result {
            if let QueryError::Cycle { members } = &mut **error {
                if let Some(first) = active::add_to_open_cycle(db.id, self.edge) {
                    members.push(db.frame_of(self.edge));
                    if first {
                        members.reverse();
                    }
                }
            }
        }
        let outcome = match &result {
            Ok(_) => None,
            Err(error) => Some(&**error),
        };
        self.waits.release(self.word, self.edge, outcome);
        std::mem::forget(self);
        result
    }
}

impl Drop for ClaimGuard<'_> {
    fn drop(&mut self) {
        self.waits.release(self.word, self.edge, None);
    }
}

impl<C: Send + Sync + 'static> Database<C> {
    /// Claims the memo `edge` whose claim word is `word`, waiting while another thread
    /// holds it. Errors: a cycle (this thread, or a chain of threads, already holds it),
    /// or the failure of the attempt waited for.
    #[inline]
    pub(crate) fn claim<'a>(
        &'a self,
        word: &'a AtomicU32,
        edge: Edge,
    ) -> Result<Claimed<'a>, Failure> {
        let me = active::thread_id();
        match word.compare_exchange(0, me, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => Ok(Claimed::Owned(ClaimGuard {
                word,
                edge,
                waits: &self.waits,
            })),
            Err(current) => self.claim_contended(word, edge, me, current),
        }
    }

    #[cold]
    #[inline(never)]
    fn claim_contended<'a>(
        &'a self,
        word: &'a AtomicU32,
        edge: Edge,
        me: u32,
        current: u32,
    ) -> Result<Claimed<'a>, Failure> {
        if current & !WAITERS == me {
            // This thread holds it further up its stack: the holders in between name
            // themselves as the error unwinds through them.
            active::open_cycle(self.id, edge);
            return Err(Box::new(QueryError::Cycle {
                members: Vec::new(),
            }));
        }
        self.emit_for(EventKind::WillBlockOn, edge);
        let shard = self.waits.shard(edge);
        let mut waiting = shard.waiting.lock();
        let entry = loop {
            let current = word.load(Ordering::Acquire);
            if current == 0 {
                return Ok(Claimed::Retry);
            }
            let owner = current & !WAITERS;
            {
                let mut graph = self.waits.graph.lock();
                if let Some(chain) = WaitTable::cycle_through(&graph, owner, me) {
                    drop(graph);
                    drop(waiting);
                    // The last memo waited on is held by this thread: start the cycle there.
                    let mut members = Vec::with_capacity(chain.len() + 1);
                    members.extend(chain.last().copied());
                    members.push(edge);
                    members.extend(chain.iter().take(chain.len().saturating_sub(1)).copied());
                    active::close_cycle();
                    return Err(Box::new(self.cycle_error(members)));
                }
                graph.insert(me, (owner, edge));
            }
            if current & WAITERS == 0
                && word
                    .compare_exchange(
                        current,
                        current | WAITERS,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .is_err()
            {
                self.waits.graph.lock().remove(&me);
                continue;
            }
            break Arc::clone(waiting.entry(edge).or_insert_with(|| {
                Arc::new(Waiting {
                    outcome: Mutex::new(None),
                })
            }));
        };
        let outcome = loop {
            if let Some(outcome) = entry.outcome.lock().clone() {
                break outcome;
            }
            shard.wake.wait(&mut waiting);
        };
        self.waits.graph.lock().remove(&me);
        drop(waiting);
        outcome.map(|()| Claimed::Retry).map_err(Box::new)
    }
}
