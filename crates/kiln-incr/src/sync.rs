//! Single flight: at most one thread executes (or re-verifies under a claim) a memo at a
//! time. A thread claims a memo by writing its id into the memo's claim word; others wait
//! on a sharded condition variable and share the outcome (success: they re-read the memo;
//! failure: they receive the same error). A wait-for graph between threads turns
//! cross-thread cycles into errors instead of deadlocks.
//!
//! # The protocol
//!
//! A claim word is `0` (free) or `owner | WAITERS?`. Claiming is one CAS from `0`.
//!
//! A thread that finds the word taken locks the memo's wait shard and, **before anything
//! else**, makes sure `WAITERS` is set (a CAS; on failure it re-reads the word, and a free
//! word sends it back to retry). From then on the owner it read is stable: an owner
//! releases a word with `WAITERS` only under that same shard lock, which the waiter holds.
//! Only then does it take the graph lock, check for a cycle through that owner, and record
//! its own wait-for edge `me -> (owner, memo)`.
//!
//! Releasing a word with `WAITERS` takes the shard lock, removes every wait-for edge on
//! the memo *before* freeing the word, hands the outcome to the waiters and wakes them.
//!
//! So every edge `t -> (o, m)` in the graph means: `o` holds `m` (`m`'s word names `o`)
//! and `t` is blocked on it. A chain of edges read under the graph lock is a chain of real
//! waits, and a cycle through it is a real deadlock, never a stale one. (The protocol
//! before issue 10 recorded the edge before setting `WAITERS` and read the owner without
//! pinning it, so a releasing owner could go on to block elsewhere and close a "cycle"
//! with an edge that no longer held.) The `loom_model` tests below check the protocol
//! exhaustively within a preemption bound; `tests/false_cycle.rs` stresses it for real.

use std::sync::atomic::Ordering;

use rustc_hash::FxHashMap;

use crate::active;
use crate::database::Database;
use crate::error::QueryError;
use crate::event::EventKind;
use crate::memo::Edge;
use crate::prims::{self, Arc, Condvar, Mutex};

pub(crate) use crate::prims::AtomicU32 as ClaimWord;

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

/// What asking for a claim that was taken came to.
#[derive(Debug)]
pub(crate) enum Contended {
    /// The claim was released successfully (or was free when re-read): try again.
    Retry,
    /// The holder's attempt failed with this error.
    Failed(QueryError),
    /// This thread holds the claim itself, further up its stack.
    SameThread,
    /// Waiting would close a cycle of threads: the memos of the cycle, starting with the
    /// one this thread holds, then the one it asked for, then the others in wait order.
    Cycle(Vec<Edge>),
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

    /// Tries to claim `word` for thread `me`: `Ok(())` when this thread now holds it, else
    /// `current` (the word as found).
    #[inline]
    pub(crate) fn try_claim(word: &ClaimWord, me: u32) -> Result<(), u32> {
        word.compare_exchange(0, me, Ordering::Acquire, Ordering::Acquire)
            .map(|_| ())
    }

    /// Waits for the claim on `edge` (word `word`, found as `current`, not free) to be
    /// released, unless that would deadlock.
    #[cold]
    pub(crate) fn wait_for(
        &self,
        word: &ClaimWord,
        edge: Edge,
        me: u32,
        current: u32,
    ) -> Contended {
        if current & !WAITERS == me {
            return Contended::SameThread;
        }
        let shard = self.shard(edge);
        let mut waiting = shard.waiting.lock();
        // Pin the owner first: with `WAITERS` set and the shard locked, it cannot release.
        let owner = loop {
            let current = word.load(Ordering::Acquire);
            if current == 0 {
                return Contended::Retry;
            }
            if current & WAITERS != 0
                || word
                    .compare_exchange(
                        current,
                        current | WAITERS,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .is_ok()
            {
                break current & !WAITERS;
            }
        };
        {
            let mut graph = self.graph.lock();
            if let Some(chain) = Self::cycle_through(&graph, owner, me) {
                // `WAITERS` stays set: the owner's release then only takes the slow path.
                return Contended::Cycle(Self::cycle_members(chain, edge));
            }
            graph.insert(me, (owner, edge));
        }
        let entry = Arc::clone(waiting.entry(edge).or_insert_with(|| {
            Arc::new(Waiting {
                outcome: Mutex::new(None),
            })
        }));
        let outcome = loop {
            if let Some(outcome) = entry.outcome.lock().clone() {
                break outcome;
            }
            waiting = prims::wait(&shard.wake, waiting);
        };
        // The release removed this thread's wait-for edge before freeing the word.
        drop(waiting);
        match outcome {
            Ok(()) => Contended::Retry,
            Err(error) => Contended::Failed(error),
        }
    }

    /// Releases `word` (held by this thread) and hands `failure` (if any) to its waiters.
    pub(crate) fn release(&self, word: &ClaimWord, edge: Edge, failure: Option<&QueryError>) {
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
            // Edges first: an edge in the graph always names a thread that holds its memo.
            self.graph.lock().retain(|_, (_, waited)| *waited != edge);
            word.store(0, Ordering::Release);
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

    /// The memos of a cross-thread cycle in call order: `chain` (the memos waited on from
    /// the owner of `asked` on; the last is held by the asking thread) closed by `asked`.
    fn cycle_members(chain: Vec<Edge>, asked: Edge) -> Vec<Edge> {
        let mut members = Vec::with_capacity(chain.len() + 1);
        members.extend(chain.last().copied());
        members.push(asked);
        members.extend(chain.iter().take(chain.len().saturating_sub(1)).copied());
        members
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
    word: &'a ClaimWord,
    edge: Edge,
    waits: &'a WaitTable,
}

impl ClaimGuard<'_> {
    /// Releases the claim, handing the attempt's error (if any) to every waiter.
    pub(crate) fn finish<T>(self, result: Result<T, Failure>) -> Result<T, Failure> {
        let outcome = match &result {
            Ok(_) => None,
            Err(error) => Some(&**error),
        };
        active::pop_claim();
        self.waits.release(self.word, self.edge, outcome);
        std::mem::forget(self);
        result
    }
}

impl Drop for ClaimGuard<'_> {
    fn drop(&mut self) {
        active::pop_claim();
        self.waits.release(self.word, self.edge, None);
    }
}

impl<C: Send + Sync + 'static> Database<C> {
    /// Claims the memo `edge` whose claim word is `word`, waiting while another thread
    /// holds it; `reading`: an execution reads the memo (else a verification walks an
    /// edge to it). Errors: a cycle (this thread, or a chain of threads, already holds
    /// it), or the failure of the attempt waited for.
    #[inline]
    pub(crate) fn claim<'a>(
        &'a self,
        word: &'a ClaimWord,
        edge: Edge,
        reading: bool,
    ) -> Result<Claimed<'a>, Failure> {
        let me = active::thread_id();
        match WaitTable::try_claim(word, me) {
            Ok(()) => {
                active::push_claim(self.id, edge);
                Ok(Claimed::Owned(ClaimGuard {
                    word,
                    edge,
                    waits: &self.waits,
                }))
            }
            Err(current) => self.claim_contended(word, edge, me, current, reading),
        }
    }

    #[cold]
    #[inline(never)]
    fn claim_contended<'a>(
        &'a self,
        word: &'a ClaimWord,
        edge: Edge,
        me: u32,
        current: u32,
        reading: bool,
    ) -> Result<Claimed<'a>, Failure> {
        if current & !WAITERS != me {
            self.emit_for(EventKind::WillBlockOn, edge);
        }
        let error = match self.waits.wait_for(word, edge, me, current) {
            Contended::Retry => return Ok(Claimed::Retry),
            Contended::Failed(error @ QueryError::Cycle { .. }) => {
                // A cycle through threads, reported by the thread that closed it: the
                // claims this thread holds on it fail with it too.
                if let Some(members) = error.cycle_members() {
                    active::mark_cycle(self.id, &error, reading, |held| {
                        members.contains(&self.frame_of(held))
                    });
                }
                error
            }
            Contended::Failed(error) => error,
            Contended::SameThread => {
                // Every claim from the one on `edge` up is on the cycle.
                let members = active::claim_path(self.id, edge);
                let error = self.cycle_error(members.clone());
                active::mark_cycle(self.id, &error, reading, |held| members.contains(&held));
                error
            }
            Contended::Cycle(members) => {
                let error = self.cycle_error(members.clone());
                active::mark_cycle(self.id, &error, reading, |held| members.contains(&held));
                error
            }
        };
        Err(Box::new(error))
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    //! Model checks of the claim protocol with `loom`, which runs each scenario under
    //! every interleaving of its threads up to a preemption bound. Run with
    //! `RUSTFLAGS="--cfg loom" cargo test -p kiln-incr --lib loom_model` (see `.ci/run`).

    use super::{ClaimWord, Contended, WaitTable};
    use crate::error::{QueryError, QueryFrame};
    use crate::memo::Edge;
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::Arc;
    use loom::thread;

    /// Two memos in different wait shards.
    const A: Edge = Edge { query: 1, key: 0 };
    const B: Edge = Edge { query: 2, key: 5 };

    fn model(scenario: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(4);
        }
        builder.check(scenario);
    }

    struct Memo {
        word: ClaimWord,
        edge: Edge,
    }

    impl Memo {
        fn held_by(edge: Edge, owner: u32) -> Memo {
            Memo {
                word: ClaimWord::new(owner),
                edge,
            }
        }
    }

    /// What a fetch does with the claim protocol: claim, or wait and retry; never spin
    /// (a retry follows only a release).
    fn acquire(waits: &WaitTable, memo: &Memo, me: u32) -> Result<(), Contended> {
        loop {
            let current = match WaitTable::try_claim(&memo.word, me) {
                Ok(()) => return Ok(()),
                Err(current) => current,
            };
            match waits.wait_for(&memo.word, memo.edge, me, current) {
                Contended::Retry => thread::yield_now(),
                other => return Err(other),
            }
        }
    }

    fn panicked() -> QueryError {
        QueryError::Panicked {
            frame: QueryFrame {
                query: "a",
                key: "0".into(),
            },
            message: "boom".into(),
        }
    }

    /// Issue 10, defect 1: thread 2 holds `a` and then asks for `b`; thread 1 holds `b`
    /// and asks for `a`, which thread 2 releases meanwhile. Nothing is cyclic: both must
    /// get their claim, never a cycle error.
    #[test]
    fn releasing_then_blocking_is_no_cycle() {
        model(|| {
            let waits = Arc::new(WaitTable::new());
            let a = Arc::new(Memo::held_by(A, 2));
            let b = Arc::new(Memo::held_by(B, 1));
            let one = {
                let (waits, a, b) = (Arc::clone(&waits), Arc::clone(&a), Arc::clone(&b));
                thread::spawn(move || {
                    let got = acquire(&waits, &a, 1);
                    waits.release(&a.word, A, None);
                    waits.release(&b.word, B, None);
                    got
                })
            };
            waits.release(&a.word, A, None);
            let two = acquire(&waits, &b, 2);
            waits.release(&b.word, B, None);
            let one = one.join().unwrap();
            assert!(one.is_ok(), "thread 1 got {one:?}");
            assert!(two.is_ok(), "thread 2 got {two:?}");
        });
    }

    /// A real cycle (each thread holds what the other asks for) ends in a cycle error on
    /// at least one side, never in a deadlock (loom reports one as a failure).
    #[test]
    fn a_real_cycle_is_reported() {
        model(|| {
            let waits = Arc::new(WaitTable::new());
            let a = Arc::new(Memo::held_by(A, 1));
            let b = Arc::new(Memo::held_by(B, 2));
            let one = {
                let (waits, a, b) = (Arc::clone(&waits), Arc::clone(&a), Arc::clone(&b));
                thread::spawn(move || {
                    let got = acquire(&waits, &b, 1);
                    let failure = got.as_ref().err().map(|_| cycle_error());
                    if got.is_ok() {
                        waits.release(&b.word, B, None);
                    }
                    waits.release(&a.word, A, failure.as_ref());
                    got
                })
            };
            let two = acquire(&waits, &a, 2);
            let failure = two.as_ref().err().map(|_| cycle_error());
            if two.is_ok() {
                waits.release(&a.word, A, None);
            }
            waits.release(&b.word, B, failure.as_ref());
            let one = one.join().unwrap();
            let cycles = [&one, &two]
                .iter()
                .filter(|got| matches!(got, Err(Contended::Cycle(_))))
                .count();
            assert!(cycles >= 1, "no cycle reported: {one:?}, {two:?}");
            for got in [&one, &two] {
                match got {
                    Err(Contended::Cycle(members)) => {
                        assert_eq!(members.len(), 2);
                        assert!(members.contains(&A) && members.contains(&B));
                    }
                    Ok(()) | Err(Contended::Failed(QueryError::Cycle { .. })) => {}
                    other => panic!("unexpected {other:?}"),
                }
            }
        });
    }

    fn cycle_error() -> QueryError {
        QueryError::Cycle {
            members: Vec::new(),
        }
    }

    /// Single flight and failure hand-off: two threads ask for a memo whose holder
    /// fails (a contained panic); each either receives that failure or, arriving after the
    /// release, claims the memo itself, and never two at a time. No waiter is left asleep.
    #[test]
    fn a_failure_reaches_every_waiter_and_claims_stay_exclusive() {
        model(|| {
            let waits = Arc::new(WaitTable::new());
            let a = Arc::new(Memo::held_by(A, 1));
            let inside = Arc::new(AtomicBool::new(false));
            let waiters: Vec<_> = [2u32, 3]
                .into_iter()
                .map(|me| {
                    let (waits, a, inside) =
                        (Arc::clone(&waits), Arc::clone(&a), Arc::clone(&inside));
                    thread::spawn(move || match acquire(&waits, &a, me) {
                        Ok(()) => {
                            assert!(!inside.swap(true, Ordering::SeqCst), "two holders");
                            inside.store(false, Ordering::SeqCst);
                            waits.release(&a.word, A, None);
                        }
                        Err(Contended::Failed(error)) => assert_eq!(error, panicked()),
                        Err(other) => panic!("thread {me} got {other:?}"),
                    })
                })
                .collect();
            waits.release(&a.word, A, Some(&panicked()));
            for waiter in waiters {
                waiter.join().unwrap();
            }
            assert_eq!(a.word.load(Ordering::SeqCst), 0, "the claim stayed taken");
        });
    }

    /// Two threads race for a free memo: one claims it, the other waits and retries, and
    /// the claim is never held twice.
    #[test]
    fn racing_claims_are_exclusive() {
        model(|| {
            let waits = Arc::new(WaitTable::new());
            let a = Arc::new(Memo::held_by(A, 0));
            let inside = Arc::new(AtomicBool::new(false));
            let racers: Vec<_> = [1u32, 2]
                .into_iter()
                .map(|me| {
                    let (waits, a, inside) =
                        (Arc::clone(&waits), Arc::clone(&a), Arc::clone(&inside));
                    thread::spawn(move || {
                        let got = acquire(&waits, &a, me);
                        assert!(got.is_ok(), "thread {me} got {got:?}");
                        assert!(!inside.swap(true, Ordering::SeqCst), "two holders");
                        inside.store(false, Ordering::SeqCst);
                        waits.release(&a.word, A, None);
                    })
                })
                .collect();
            for racer in racers {
                racer.join().unwrap();
            }
            assert_eq!(a.word.load(Ordering::SeqCst), 0);
        });
    }
}
