//! Single flight: at most one thread executes (or re-verifies under a claim) a memo at a
//! time. Claims live in a sharded table beside the memos (not in them: a memo pays no
//! bytes for a claim it rarely takes): a thread claims a memo by inserting it, with its
//! own id as the owner, into the memo's shard. Others wait on the shard's condition
//! variable and share the outcome (success: they re-read the memo; failure: they receive
//! the same error). A wait-for graph between threads turns cross-thread cycles into
//! errors instead of deadlocks.
//!
//! # The protocol
//!
//! Everything about a claim happens under its shard's lock: claiming (insert), waiting
//! (register), releasing (remove, hand the outcome over, wake). So a thread that finds a
//! claim taken reads an owner that cannot release meanwhile: under the same lock it
//! checks the graph for a cycle through that owner and records its own wait-for edge
//! `me -> (owner, memo)`. A release removes every edge on its memo under that lock too.
//! So every edge `t -> (o, m)` in the graph means: `o` holds `m` and `t` is blocked on
//! it, and a cycle found in the graph is a real deadlock, never a stale one. (Before
//! issue 10 the claim was a word in the memo, and a waiter recorded its edge before
//! pinning the owner: a releasing owner could go on to block elsewhere and close a
//! "cycle" with an edge that no longer held.) The `loom_model` tests below check the
//! protocol exhaustively within a preemption bound; `tests/false_cycle.rs` stresses it.
//!
//! # Cost
//!
//! A claim is paid only by an execution or a claimed verification, never by a cache hit
//! or an unclaimed verification. It is not free: under callgrind, executing a trivial
//! one-input query costs about 1,430 instructions, of which taking and releasing the claim
//! (shard lock, map insert and remove, the per-thread claim record) is about 410, where the
//! claim word it replaced took about 66 (issue 10 review, item i). Against any real query
//! (a preprocess, a compile) that is noise; a lock-free fast path would need a claim word
//! in every memo (8 bytes each) and a new model-checked protocol, so it is not taken.

use std::collections::hash_map::Entry;
use std::panic::{self, AssertUnwindSafe};

use rustc_hash::FxHashMap;

use crate::active;
use crate::database::Database;
use crate::error::QueryError;
use crate::event::EventKind;
use crate::memo::Edge;
use crate::prims::{self, Arc, Condvar, Mutex};

const SHARDS: usize = 16;

/// How one attempt ended, as seen by the threads that waited for it: success, or its error
/// and, when it failed as a member of a cycle, the cycle's memos (so that a waiter tells
/// its own members by identity, never by their names and keys' text).
type Outcome = Result<(), (QueryError, Vec<Edge>)>;

struct Waiting {
    outcome: Mutex<Option<Outcome>>,
}

/// A held claim: its owner, and where its waiters wait (once there is one).
struct Held {
    owner: u32,
    waiting: Option<Arc<Waiting>>,
}

struct WaitShard {
    claims: Mutex<FxHashMap<Edge, Held>>,
    wake: Condvar,
}

/// The claims and the threads blocked on them. Lock order: a shard, then the graph.
pub(crate) struct WaitTable {
    shards: Box<[WaitShard]>,
    /// Blocked thread -> (thread it waits for, memo it waits on).
    graph: Mutex<FxHashMap<u32, (u32, Edge)>>,
}

/// What asking for a claim that was taken came to.
#[derive(Debug)]
pub(crate) enum Contended {
    /// The claim was released successfully: try again.
    Retry,
    /// The holder's attempt failed with this error; the memos of the cycle it failed in
    /// as a member (empty if it did not).
    Failed(QueryError, Vec<Edge>),
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
                    claims: Mutex::new(FxHashMap::default()),
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

    /// Claims `edge` for thread `me`, or waits for its holder (calling `will_block`
    /// first, outside any lock) unless that would deadlock. `Ok` when this thread now
    /// holds the claim.
    pub(crate) fn acquire(
        &self,
        edge: Edge,
        me: u32,
        will_block: impl FnOnce(),
    ) -> Result<(), Contended> {
        let shard = self.shard(edge);
        let mut claims = shard.claims.lock();
        let owner = match claims.entry(edge) {
            Entry::Vacant(vacant) => {
                vacant.insert(Held {
                    owner: me,
                    waiting: None,
                });
                return Ok(());
            }
            Entry::Occupied(held) => held.get().owner,
        };
        if owner == me {
            return Err(Contended::SameThread);
        }
        // `owner` holds the claim until it takes this shard's lock to release it.
        {
            let mut graph = self.graph.lock();
            if let Some(chain) = Self::cycle_through(&graph, owner, me) {
                return Err(Contended::Cycle(Self::cycle_members(chain, edge)));
            }
            graph.insert(me, (owner, edge));
        }
        let entry = match claims.get_mut(&edge) {
            Some(held) => Arc::clone(held.waiting.get_or_insert_with(|| {
                Arc::new(Waiting {
                    outcome: Mutex::new(None),
                })
            })),
            None => unreachable_claim(),
        };
        // The event runs user code: not under the shard lock. The outcome is kept in
        // `entry`, so a release meanwhile is not missed.
        drop(claims);
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(will_block)) {
            // This thread will not wait after all: its wait-for edge must go, or a later
            // wait by another thread would find a false cycle through it.
            let claims = shard.claims.lock();
            let mut graph = self.graph.lock();
            if graph.get(&me).is_some_and(|(_, waited)| *waited == edge) {
                graph.remove(&me);
            }
            drop((graph, claims));
            panic::resume_unwind(payload);
        }
        let mut claims = shard.claims.lock();
        let outcome = loop {
            if let Some(outcome) = entry.outcome.lock().clone() {
                break outcome;
            }
            claims = prims::wait(&shard.wake, claims);
        };
        // The release removed this thread's wait-for edge.
        drop(claims);
        match outcome {
            Ok(()) => Err(Contended::Retry),
            Err((error, members)) => Err(Contended::Failed(error, members)),
        }
    }

    /// Releases the claim on `edge` (held by this thread) and hands `failure` (if any) to
    /// its waiters, with `members`: the memos of the cycle it failed in as a member.
    pub(crate) fn release(&self, edge: Edge, failure: Option<&QueryError>, members: &[Edge]) {
        let shard = self.shard(edge);
        let mut claims = shard.claims.lock();
        let Some(waiting) = claims.remove(&edge).and_then(|held| held.waiting) else {
            return;
        };
        self.graph.lock().retain(|_, (_, waited)| *waited != edge);
        *waiting.outcome.lock() = Some(match failure {
            None => Ok(()),
            Some(error) => Err((error.clone(), members.to_vec())),
        });
        drop(claims);
        shard.wake.notify_all();
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

/// The claim inserted under the lock still held vanished: a bug in kiln-incr.
#[cold]
fn unreachable_claim() -> ! {
    crate::ingredient::invariant_broken("a held claim vanished under its shard lock")
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
        let members = active::pop_claim();
        self.waits.release(self.edge, outcome, &members);
        std::mem::forget(self);
        result
    }
}

impl Drop for ClaimGuard<'_> {
    fn drop(&mut self) {
        active::pop_claim();
        self.waits.release(self.edge, None, &[]);
    }
}

impl<C: Send + Sync + 'static> Database<C> {
    /// Claims the memo `edge`, waiting while another thread holds it; `reading`: an
    /// execution reads the memo (else a verification walks an edge to it). Errors: a
    /// cycle (this thread, or a chain of threads, already holds it), or the failure of
    /// the attempt waited for.
    pub(crate) fn claim(&self, edge: Edge, reading: bool) -> Result<Claimed<'_>, Failure> {
        let me = active::thread_id();
        let contended = match self.waits.acquire(edge, me, || {
            self.emit_for(EventKind::WillBlockOn, edge);
        }) {
            Ok(()) => {
                active::push_claim(self.id, edge);
                return Ok(Claimed::Owned(ClaimGuard {
                    edge,
                    waits: &self.waits,
                }));
            }
            Err(contended) => contended,
        };
        self.claim_contended(edge, contended, reading)
    }

    #[cold]
    #[inline(never)]
    fn claim_contended(
        &self,
        edge: Edge,
        contended: Contended,
        reading: bool,
    ) -> Result<Claimed<'_>, Failure> {
        let error = match contended {
            Contended::Retry => return Ok(Claimed::Retry),
            Contended::Failed(error, members) => {
                // The memo waited for failed as a member of a cycle through threads: the
                // claims this thread holds on that cycle fail with it too. (Its members
                // are memos, compared as such: two queries may share a name, and keys of
                // one query may print alike.)
                if !members.is_empty() {
                    active::mark_cycle(self.id, &error, reading, &members);
                }
                error
            }
            Contended::SameThread => {
                // Every claim from the one on `edge` up is on the cycle.
                let members = active::claim_path(self.id, edge);
                let error = self.cycle_error(members.clone());
                active::mark_cycle(self.id, &error, reading, &members);
                error
            }
            Contended::Cycle(members) => {
                let error = self.cycle_error(members.clone());
                active::mark_cycle(self.id, &error, reading, &members);
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

    use super::{Contended, WaitTable};
    use crate::error::{QueryError, QueryFrame};
    use crate::memo::Edge;
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::Arc;
    use loom::thread;

    /// Two memos in different shards.
    const A: Edge = Edge { query: 1, key: 0 };
    const B: Edge = Edge { query: 2, key: 5 };

    fn model(scenario: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(4);
        }
        builder.check(scenario);
    }

    /// What a fetch does with the claim protocol: claim, or wait and retry (a retry
    /// follows only a release).
    fn acquire(waits: &WaitTable, edge: Edge, me: u32) -> Result<(), Contended> {
        loop {
            match waits.acquire(edge, me, || {}) {
                Err(Contended::Retry) => thread::yield_now(),
                other => return other,
            }
        }
    }

    /// Takes a claim that must be free (the scenario's starting state).
    fn hold(waits: &WaitTable, edge: Edge, owner: u32) {
        assert!(waits.acquire(edge, owner, || {}).is_ok());
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

    fn cycle_error() -> QueryError {
        QueryError::Cycle {
            members: Vec::new(),
        }
    }

    /// Issue 10, defect 1: thread 2 holds `a` and then asks for `b`; thread 1 holds `b`
    /// and asks for `a`, which thread 2 releases meanwhile. Nothing is cyclic: both must
    /// get their claim, never a cycle error.
    #[test]
    fn releasing_then_blocking_is_no_cycle() {
        model(|| {
            let waits = Arc::new(WaitTable::new());
            hold(&waits, A, 2);
            hold(&waits, B, 1);
            let one = {
                let waits = Arc::clone(&waits);
                thread::spawn(move || {
                    let got = acquire(&waits, A, 1);
                    waits.release(A, None, &[]);
                    waits.release(B, None, &[]);
                    got
                })
            };
            waits.release(A, None, &[]);
            let two = acquire(&waits, B, 2);
            waits.release(B, None, &[]);
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
            hold(&waits, A, 1);
            hold(&waits, B, 2);
            let one = {
                let waits = Arc::clone(&waits);
                thread::spawn(move || {
                    let got = acquire(&waits, B, 1);
                    let failure = got.as_ref().err().map(|_| cycle_error());
                    if got.is_ok() {
                        waits.release(B, None, &[]);
                    }
                    waits.release(A, failure.as_ref(), &[]);
                    got
                })
            };
            let two = acquire(&waits, A, 2);
            let failure = two.as_ref().err().map(|_| cycle_error());
            if two.is_ok() {
                waits.release(A, None, &[]);
            }
            waits.release(B, failure.as_ref(), &[]);
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
                    Ok(()) | Err(Contended::Failed(QueryError::Cycle { .. }, _)) => {}
                    other => panic!("unexpected {other:?}"),
                }
            }
        });
    }

    /// Single flight and failure hand-off: two threads ask for a memo whose holder
    /// fails (a contained panic); each either receives that failure or, arriving after the
    /// release, claims the memo itself, and never two at a time. No waiter is left asleep.
    #[test]
    fn a_failure_reaches_every_waiter_and_claims_stay_exclusive() {
        model(|| {
            let waits = Arc::new(WaitTable::new());
            hold(&waits, A, 1);
            let inside = Arc::new(AtomicBool::new(false));
            let waiters: Vec<_> = [2u32, 3]
                .into_iter()
                .map(|me| {
                    let (waits, inside) = (Arc::clone(&waits), Arc::clone(&inside));
                    thread::spawn(move || match acquire(&waits, A, me) {
                        Ok(()) => {
                            assert!(!inside.swap(true, Ordering::SeqCst), "two holders");
                            inside.store(false, Ordering::SeqCst);
                            waits.release(A, None, &[]);
                        }
                        Err(Contended::Failed(error, _)) => assert_eq!(error, panicked()),
                        Err(other) => panic!("thread {me} got {other:?}"),
                    })
                })
                .collect();
            waits.release(A, Some(&panicked()), &[]);
            for waiter in waiters {
                waiter.join().unwrap();
            }
            // The claim is free again.
            assert!(waits.acquire(A, 9, || {}).is_ok(), "the claim stayed taken");
        });
    }

    /// Two threads race for a free memo: one claims it, the other waits and retries, and
    /// the claim is never held twice.
    #[test]
    fn racing_claims_are_exclusive() {
        model(|| {
            let waits = Arc::new(WaitTable::new());
            let inside = Arc::new(AtomicBool::new(false));
            let racers: Vec<_> = [1u32, 2]
                .into_iter()
                .map(|me| {
                    let (waits, inside) = (Arc::clone(&waits), Arc::clone(&inside));
                    thread::spawn(move || {
                        let got = acquire(&waits, A, me);
                        assert!(got.is_ok(), "thread {me} got {got:?}");
                        assert!(!inside.swap(true, Ordering::SeqCst), "two holders");
                        inside.store(false, Ordering::SeqCst);
                        waits.release(A, None, &[]);
                    })
                })
                .collect();
            for racer in racers {
                racer.join().unwrap();
            }
            assert!(waits.acquire(A, 9, || {}).is_ok());
        });
    }
}
