//! Parallel fetches: single flight, shared panics, cross-thread cycles. Threads are staged
//! with barriers and with the engine's own `WillBlockOn` events, never with sleeps.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use kiln_incr::{Database, EventKind, Query, QueryError};
use parking_lot::{Condvar, Mutex};

/// Lets a query wait until a number of other threads are blocked on it.
#[derive(Default)]
struct Gate {
    blocked: Mutex<usize>,
    changed: Condvar,
    executions: AtomicUsize,
    explode: AtomicBool,
    /// Rendezvous for the cross-thread cycle test.
    pair: Option<Barrier>,
}

impl Gate {
    fn note_blocked(&self) {
        *self.blocked.lock() += 1;
        self.changed.notify_all();
    }

    fn wait_for_blocked(&self, count: usize) {
        let mut blocked = self.blocked.lock();
        while *blocked < count {
            self.changed.wait(&mut blocked);
        }
    }
}

const THREADS: usize = 8;

/// Executes only once the seven other threads are blocked waiting for it.
struct Slow;
impl Query<Arc<Gate>> for Slow {
    type Key = u32;
    type Value = u32;
    const NAME: &'static str = "slow";
    fn execute(db: &Database<Arc<Gate>>, key: &u32) -> Result<u32, QueryError> {
        let gate = db.context();
        gate.executions.fetch_add(1, Ordering::SeqCst);
        gate.wait_for_blocked(THREADS - 1);
        if gate.explode.load(Ordering::SeqCst) {
            panic!("slow {key} exploded");
        }
        Ok(key * 2)
    }
}

fn gated_database(gate: Gate) -> Database<Arc<Gate>> {
    let gate = Arc::new(gate);
    let mut db = Database::new(Arc::clone(&gate));
    db.set_event_listener(move |event| {
        if event.kind == EventKind::WillBlockOn {
            gate.note_blocked();
        }
    });
    db
}

fn fetch_from_all_threads(db: &Database<Arc<Gate>>) -> Vec<Result<u32, QueryError>> {
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    db.get::<Slow>(&21)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap())
            .collect()
    })
}

#[test]
fn eight_threads_one_key_one_execution() {
    let db = gated_database(Gate::default());
    let results = fetch_from_all_threads(&db);
    assert_eq!(results, vec![Ok(42); THREADS]);
    assert_eq!(db.context().executions.load(Ordering::SeqCst), 1);
    assert_eq!(*db.context().blocked.lock(), THREADS - 1);
}

#[test]
fn panic_reaches_every_waiter_and_the_key_recovers() {
    let gate = Gate::default();
    gate.explode.store(true, Ordering::SeqCst);
    let db = gated_database(gate);
    let results = fetch_from_all_threads(&db);
    assert_eq!(db.context().executions.load(Ordering::SeqCst), 1);
    for result in results {
        match result {
            Err(QueryError::Panicked { frame, message }) => {
                assert_eq!((frame.query, frame.key.as_str()), ("slow", "21"));
                assert_eq!(message, "slow 21 exploded");
            }
            other => panic!("expected a panic error, got {other:?}"),
        }
    }
    // The slot is reusable: a later fetch executes again.
    db.context().explode.store(false, Ordering::SeqCst);
    assert_eq!(db.get::<Slow>(&21), Ok(42));
    assert_eq!(db.context().executions.load(Ordering::SeqCst), 2);
}

/// `left(k)` and `right(k)` call each other after both have started.
struct Left;
impl Query<Arc<Gate>> for Left {
    type Key = u32;
    type Value = u32;
    const NAME: &'static str = "left";
    fn execute(db: &Database<Arc<Gate>>, key: &u32) -> Result<u32, QueryError> {
        if let Some(pair) = &db.context().pair {
            pair.wait();
        }
        db.get::<Right>(key)
    }
}

struct Right;
impl Query<Arc<Gate>> for Right {
    type Key = u32;
    type Value = u32;
    const NAME: &'static str = "right";
    fn execute(db: &Database<Arc<Gate>>, key: &u32) -> Result<u32, QueryError> {
        if let Some(pair) = &db.context().pair {
            pair.wait();
        }
        db.get::<Left>(key)
    }
}

#[test]
fn cross_thread_cycle_is_an_error_not_a_deadlock() {
    let db = gated_database(Gate {
        pair: Some(Barrier::new(2)),
        ..Gate::default()
    });
    let (left, right) = std::thread::scope(|scope| {
        let left = scope.spawn(|| db.get::<Left>(&1));
        let right = scope.spawn(|| db.get::<Right>(&1));
        (left.join().unwrap(), right.join().unwrap())
    });
    for result in [left, right] {
        let error = result.unwrap_err();
        let members = error.cycle_members().expect("a cycle error");
        let mut names: Vec<String> = members.iter().map(ToString::to_string).collect();
        names.sort();
        assert_eq!(names, vec!["left(1)", "right(1)"], "{error}");
    }
}

/// `sum(n) = n + sum(n - 1)`, counting executions per key.
struct Sum;
impl Query<Arc<Counts>> for Sum {
    type Key = u64;
    type Value = u64;
    const NAME: &'static str = "sum";
    fn execute(db: &Database<Arc<Counts>>, n: &u64) -> Result<u64, QueryError> {
        db.context().0[*n as usize].fetch_add(1, Ordering::SeqCst);
        if *n == 0 {
            return Ok(0);
        }
        Ok(n + db.get::<Sum>(&(n - 1))?)
    }
}

struct Counts(Vec<AtomicUsize>);

#[test]
fn overlapping_parallel_fetches_execute_each_key_once() {
    let counts = Arc::new(Counts((0..200).map(|_| AtomicUsize::new(0)).collect()));
    let db = Database::new(Arc::clone(&counts));
    let barrier = Barrier::new(4);
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let (db, barrier) = (&db, &barrier);
            scope.spawn(move || {
                barrier.wait();
                for n in (0..200u64).rev().skip(thread as usize * 7) {
                    assert_eq!(db.get::<Sum>(&n).unwrap(), n * (n + 1) / 2);
                }
            });
        }
    });
    assert!(counts
        .0
        .iter()
        .all(|count| count.load(Ordering::SeqCst) == 1));
}
