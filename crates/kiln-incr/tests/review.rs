//! Findings of the review of issue 10's engine changes, each pinned by a test that failed
//! before its fix (the letters are the review's):
//!
//! - (a) a verification that re-executes a memo dropped the value `execute` handed back
//!   outside panic containment, with the claim held: a panicking `Drop` unwound out of
//!   `get`, and the claim was released as if nothing had happened;
//! - (b) a panic in the `WillBlockOn` listener left the thread's wait-for edge behind, so
//!   a later, unrelated wait closed a false cycle through it;
//! - (c) a thread that received a cross-thread cycle's error marked its own claims as
//!   members by comparing query names and key `Debug` text, so a query outside the cycle
//!   whose key printed like a member's failed with the cycle;
//! - (d) the `Backdated` event was sent before the new value was published;
//! - (e) a `size_bytes` panic during eviction evicted every older value too;
//! - (f) the replaced value's panicking `Drop` failed a fetch that had already committed
//!   its new value;
//! - (g) a reader that handled a dependency's failure stayed valid in later revisions when
//!   the dependency failed and then succeeded within one revision;
//! - (h) the `WillExecute`, `DidDeepVerify` and `DidValidateMemoizedValue` listener calls
//!   ran outside panic containment: a panicking listener unwound out of `get`;
//! - (i) a panic while dropping the duplicate value of an execution whose memo had been
//!   verified meanwhile (`keep_verified`) failed a fetch whose memo holds a valid value.
//!
//! Threads are staged with the engine's own `WillBlockOn` events, never with sleeps; waits
//! have a generous timeout so that a regression fails instead of hanging.

use std::cell::Cell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use kiln_incr::{Database, Durability, EventKind, Input, Query, QueryError};
use parking_lot::{Condvar, Mutex};

struct Num;
impl Input for Num {
    type Key = u8;
    type Value = u64;
    const NAME: &'static str = "num";
}

thread_local! {
    /// The payload whose next `Drop` panics, on this thread (each test has its own).
    static DROP_BOMB: Cell<Option<u64>> = const { Cell::new(None) };
    /// How many bombs went off on this thread.
    static EXPLODED: Cell<u32> = const { Cell::new(0) };
    /// Executions of `Wrap` on this thread.
    static WRAP_RUNS: Cell<u32> = const { Cell::new(0) };
}

/// A value whose `Drop` panics once, for the armed payload.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Bomb(u64);

impl Drop for Bomb {
    fn drop(&mut self) {
        if DROP_BOMB.with(Cell::get) == Some(self.0) && !std::thread::panicking() {
            DROP_BOMB.with(|bomb| bomb.set(None));
            EXPLODED.with(|count| count.set(count.get() + 1));
            panic!("bomb {} went off", self.0);
        }
    }
}

fn arm(payload: Option<u64>) {
    DROP_BOMB.with(|bomb| bomb.set(payload));
}

/// `num(k)` as a `Bomb`.
struct Wrap;
impl Query for Wrap {
    type Key = u8;
    type Value = Bomb;
    const NAME: &'static str = "wrap";
    fn execute(db: &Database, key: &u8) -> Result<Bomb, QueryError> {
        WRAP_RUNS.with(|runs| runs.set(runs.get() + 1));
        Ok(Bomb(db.input::<Num>(key).unwrap_or(0)))
    }
}

/// `wrap(k) + 1`. It forgets its copy of `wrap` so that its own `Drop` never runs: the
/// only drops of `wrap`'s values are the engine's.
struct Outer;
impl Query for Outer {
    type Key = u8;
    type Value = u64;
    const NAME: &'static str = "outer";
    fn execute(db: &Database, key: &u8) -> Result<u64, QueryError> {
        let wrapped = db.get::<Wrap>(key)?;
        let next = wrapped.0 + 1;
        std::mem::forget(wrapped);
        Ok(next)
    }
}

fn wrap_runs() -> u32 {
    WRAP_RUNS.with(Cell::get)
}

/// (a) Deep verification of `outer` re-executes `wrap`, whose new value (payload 2) must
/// not be dropped outside containment. The new value is committed: the fetch succeeds and
/// nothing runs again.
#[test]
fn a_verification_that_re_executes_drops_nothing_outside_containment() {
    let mut db = Database::default();
    db.set_input::<Num>(1, 1, Durability::Low);
    assert_eq!(db.get::<Outer>(&1), Ok(2));
    db.set_input::<Num>(1, 2, Durability::Low);
    arm(Some(2));
    let got = panic::catch_unwind(AssertUnwindSafe(|| db.get::<Outer>(&1)));
    arm(None);
    let got = got.unwrap_or_else(|_| panic!("a value's Drop unwound out of `get`"));
    assert_eq!(got, Ok(3));
    assert_eq!(wrap_runs(), 2);
    assert_eq!(db.get::<Outer>(&1), Ok(3));
    assert_eq!(db.get::<Wrap>(&1), Ok(Bomb(2)));
    assert_eq!(wrap_runs(), 2, "the committed value was not kept");
}

/// (f) The replaced value (payload 1) panics when dropped after the new one is committed:
/// the fetch still gives the new value, which stays memoized.
#[test]
fn a_panicking_drop_of_a_replaced_value_does_not_fail_the_committed_fetch() {
    let mut db = Database::default();
    db.set_input::<Num>(1, 1, Durability::Low);
    assert_eq!(db.get::<Wrap>(&1), Ok(Bomb(1)));
    db.set_input::<Num>(1, 2, Durability::Low);
    arm(Some(1));
    let got = panic::catch_unwind(AssertUnwindSafe(|| db.get::<Wrap>(&1)));
    arm(None);
    let got = got.unwrap_or_else(|_| panic!("a value's Drop unwound out of `get`"));
    assert_eq!(
        EXPLODED.with(Cell::get),
        1,
        "the old value's Drop did not run"
    );
    assert_eq!(got, Ok(Bomb(2)));
    assert_eq!(db.get::<Wrap>(&1), Ok(Bomb(2)));
    assert_eq!(wrap_runs(), 2);
    // Still sound afterwards.
    db.set_input::<Num>(1, 3, Durability::Low);
    assert_eq!(db.get::<Outer>(&1), Ok(4));
}

thread_local! {
    /// The value whose `size_bytes` panics, on this thread.
    static SIZE_PANICS_FOR: Cell<Option<u64>> = const { Cell::new(None) };
}

/// `num(k)`, with a `size_bytes` that can be made to panic for one value.
struct Measured;
impl Query for Measured {
    type Key = u8;
    type Value = u64;
    const NAME: &'static str = "measured";
    fn execute(db: &Database, key: &u8) -> Result<u64, QueryError> {
        Ok(db.input::<Num>(key).unwrap_or(0))
    }
    fn size_bytes(value: &u64) -> usize {
        if SIZE_PANICS_FOR.with(Cell::get) == Some(*value) {
            panic!("size of {value}");
        }
        8
    }
}

/// (e) Four values, room for three: the second newest cannot be measured. It alone is
/// evicted; the newest and the two oldest fit and stay.
#[test]
fn a_size_bytes_panic_during_eviction_evicts_only_that_memo() {
    let mut db = Database::default();
    for key in 0..4u8 {
        db.set_input::<Num>(key, 10 + u64::from(key), Durability::High);
    }
    db.set_lru_capacity::<Measured>(3);
    for key in 0..4u8 {
        assert_eq!(db.get::<Measured>(&key), Ok(10 + u64::from(key)));
    }
    SIZE_PANICS_FOR.with(|value| value.set(Some(12)));
    let boundary = panic::catch_unwind(AssertUnwindSafe(|| db.evict()));
    SIZE_PANICS_FOR.with(|value| value.set(None));
    assert!(boundary.is_ok(), "size_bytes unwound out of `evict`");
    let held: Vec<bool> = (0..4u8)
        .map(|key| {
            db.memo_info::<Measured>(&key)
                .is_some_and(|info| info.has_value)
        })
        .collect();
    assert_eq!(held, [true, true, false, true]);
    assert_eq!(db.memo_stats::<Measured>().values, 3);
}

/// `num(k) / 2`: 4 and 5 give equal values (backdated).
struct Half;
impl Query for Half {
    type Key = u8;
    type Value = u64;
    const NAME: &'static str = "half";
    fn execute(db: &Database, key: &u8) -> Result<u64, QueryError> {
        Ok(db.input::<Num>(key).unwrap_or(0) / 2)
    }
}

/// (d) A listener that reads the memo on `Backdated` sees the value that event is about.
#[test]
fn the_backdated_event_comes_after_the_value_is_published() {
    let mut db = Database::default();
    let handle: Arc<Mutex<Option<Weak<Database>>>> = Arc::default();
    let seen: Arc<Mutex<Vec<Option<u64>>>> = Arc::default();
    {
        let (handle, seen) = (Arc::clone(&handle), Arc::clone(&seen));
        db.set_event_listener(move |event| {
            if event.kind != EventKind::Backdated {
                return;
            }
            if let Some(db) = handle.lock().as_ref().and_then(Weak::upgrade) {
                seen.lock().push(db.peek::<Half>(&1));
            }
        });
    }
    db.set_input::<Num>(1, 4, Durability::Low);
    let mut db = Arc::new(db);
    *handle.lock() = Some(Arc::downgrade(&db));
    assert_eq!(db.get::<Half>(&1), Ok(2));
    // A revision boundary needs the database alone: the listener's handle goes meanwhile.
    *handle.lock() = None;
    Arc::get_mut(&mut db)
        .expect("no other handle")
        .set_input::<Num>(1, 5, Durability::Low);
    *handle.lock() = Some(Arc::downgrade(&db));
    assert_eq!(db.get::<Half>(&1), Ok(2));
    assert_eq!(*seen.lock(), [Some(2)], "the event came before the value");
}

thread_local! {
    /// `flaky` panics at its next execution on this thread.
    static FAIL_ONCE: Cell<bool> = const { Cell::new(false) };
}

/// `num(k)`, failing once when told to (a transient failure: not memoized, retried).
struct Flaky;
impl Query for Flaky {
    type Key = u8;
    type Value = u64;
    const NAME: &'static str = "flaky";
    fn execute(db: &Database, key: &u8) -> Result<u64, QueryError> {
        if FAIL_ONCE.with(|fail| fail.replace(false)) {
            panic!("transient");
        }
        Ok(db.input::<Num>(key).unwrap_or(0))
    }
}

/// `flaky(k)`, or -1 when it fails: handles the failure.
struct Handler;
impl Query for Handler {
    type Key = u8;
    type Value = i64;
    const NAME: &'static str = "handler";
    fn execute(db: &Database, key: &u8) -> Result<i64, QueryError> {
        Ok(db.get::<Flaky>(key).map_or(-1, |value| value as i64))
    }
}

/// (g) In one revision `flaky` fails (`handler` handles it: -1) and then succeeds. In the
/// next revision `handler` must not stay -1: a from-scratch run gives 5.
#[test]
fn a_reader_of_a_failure_runs_again_after_the_dependency_recovers_in_the_same_revision() {
    let mut db = Database::default();
    db.set_input::<Num>(1, 5, Durability::Low);
    FAIL_ONCE.with(|fail| fail.set(true));
    assert_eq!(db.get::<Handler>(&1), Ok(-1));
    assert_eq!(db.get::<Flaky>(&1), Ok(5));
    db.set_input::<Num>(2, 1, Durability::Low);
    assert_eq!(db.get::<Handler>(&1), Ok(5));
    // And it is an ordinary memo again: an unrelated write does not run it.
    db.set_input::<Num>(2, 2, Durability::Low);
    assert_eq!(db.get::<Handler>(&1), Ok(5));
    assert_eq!(
        db.memo_info::<Flaky>(&1)
            .map(|info| info.dependencies.len()),
        Some(1)
    );
}

/// Named conditions that threads wait for, with a timeout (a regression fails, not hangs).
#[derive(Default)]
struct Stage {
    reached: Mutex<Vec<&'static str>>,
    changed: Condvar,
    armed: AtomicBool,
    cycles: AtomicUsize,
}

impl Stage {
    fn reach(&self, what: &'static str) {
        self.reached.lock().push(what);
        self.changed.notify_all();
    }

    /// Waits until one of `any` is reached; false on timeout.
    fn wait_any(&self, any: &[&'static str]) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut reached = self.reached.lock();
        while !any.iter().any(|what| reached.contains(what)) {
            if self.changed.wait_until(&mut reached, deadline).timed_out() {
                return false;
            }
        }
        true
    }
}

type Staged = Database<Arc<Stage>>;

fn waited(db: &Staged, any: &[&'static str]) -> Result<(), QueryError> {
    if db.context().wait_any(any) {
        Ok(())
    } else {
        panic!("timed out waiting for {any:?}")
    }
}

/// Thread X: holds `b` until told to go, then reads `e`.
struct B;
impl Query<Arc<Stage>> for B {
    type Key = ();
    type Value = u32;
    const NAME: &'static str = "b";
    fn execute(db: &Staged, _: &()) -> Result<u32, QueryError> {
        db.context().reach("b started");
        waited(db, &["go x"])?;
        let e = db.get::<E>(&());
        db.context().reach("b done");
        Ok(e? + 1)
    }
}

/// Thread O: holds `a` and waits for `b`.
struct A;
impl Query<Arc<Stage>> for A {
    type Key = ();
    type Value = u32;
    const NAME: &'static str = "a";
    fn execute(db: &Staged, _: &()) -> Result<u32, QueryError> {
        Ok(db.get::<B>(&())? + 1)
    }
}

/// Thread T: asks for `a`; the `WillBlockOn` listener panics.
struct C;
impl Query<Arc<Stage>> for C {
    type Key = ();
    type Value = u32;
    const NAME: &'static str = "c";
    fn execute(db: &Staged, _: &()) -> Result<u32, QueryError> {
        db.get::<A>(&())
    }
}

/// Thread T, afterwards: holds `e` until X waits for it (or gave up on it).
struct E;
impl Query<Arc<Stage>> for E {
    type Key = ();
    type Value = u32;
    const NAME: &'static str = "e";
    fn execute(db: &Staged, _: &()) -> Result<u32, QueryError> {
        db.context().reach("go x");
        waited(db, &["x blocked on e", "b done"])?;
        Ok(7)
    }
}

/// (b) T waits for O (which waits for X) and its `WillBlockOn` listener panics. Later X
/// asks for a memo T holds: T waits for nobody, so X must wait, not see a cycle
/// `X -> T -> O -> X` through T's stale edge.
#[test]
fn a_panicking_will_block_listener_leaves_no_stale_wait_edge() {
    let stage = Arc::new(Stage::default());
    stage.armed.store(true, Ordering::SeqCst);
    let mut db = Database::new(Arc::clone(&stage));
    db.set_event_listener(move |event| {
        if event.kind != EventKind::WillBlockOn {
            return;
        }
        match event.query {
            "b" => stage.reach("o blocked on b"),
            "e" => stage.reach("x blocked on e"),
            "a" if stage.armed.swap(false, Ordering::SeqCst) => panic!("listener panicked"),
            _ => {}
        }
    });
    let db = &db;
    std::thread::scope(|scope| {
        let x = scope.spawn(|| db.get::<B>(&()));
        db.context().wait_any(&["b started"]);
        let o = scope.spawn(|| db.get::<A>(&()));
        db.context().wait_any(&["o blocked on b"]);
        // T is this thread.
        match db.get::<C>(&()) {
            Err(QueryError::Panicked { frame, message }) => {
                assert_eq!((frame.query, message.as_str()), ("c", "listener panicked"));
            }
            other => panic!("expected the listener's panic, got {other:?}"),
        }
        assert_eq!(db.get::<E>(&()), Ok(7));
        assert_eq!(x.join().unwrap(), Ok(8), "X saw a false cycle");
        assert_eq!(o.join().unwrap(), Ok(9));
    });
}

/// A key whose `Debug` shows only `id`: `outer` keys print like the inner ones.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Tagged {
    id: u32,
    outer: bool,
}

impl fmt::Debug for Tagged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.id)
    }
}

/// `m(1, outer)` handles the error of `m(1)`; `m(1)` (thread 1) and `m(2)` (thread 2)
/// read each other: a cross-thread cycle that `m(1, outer)` is not on.
struct M;
impl Query<Arc<Stage>> for M {
    type Key = Tagged;
    type Value = u32;
    const NAME: &'static str = "m";
    fn execute(db: &Staged, key: &Tagged) -> Result<u32, QueryError> {
        let inner = |id| Tagged { id, outer: false };
        match (key.id, key.outer) {
            (1, true) => Ok(db.get::<M>(&inner(1)).unwrap_or(99)),
            (1, false) => {
                db.context().reach("t1 holds m(1)");
                waited(db, &["t2 holds m(2)"])?;
                let got = db.get::<M>(&inner(2));
                if db.context().armed.load(Ordering::SeqCst) {
                    // A member that handles the cycle's error still fails with it.
                    return Ok(got.map_or(50, |value| value + 1));
                }
                Ok(got? + 1)
            }
            _ => {
                db.context().reach("t2 holds m(2)");
                waited(db, &["t1 blocked on m(2)"])?;
                let got = db.get::<M>(&inner(1));
                if got.is_err() {
                    db.context().cycles.fetch_add(1, Ordering::SeqCst);
                }
                Ok(got? + 1)
            }
        }
    }
}

fn run_m_cycle(m1_handles: bool) -> (Result<u32, QueryError>, Result<u32, QueryError>) {
    let stage = Arc::new(Stage::default());
    stage.armed.store(m1_handles, Ordering::SeqCst);
    let mut db = Database::new(Arc::clone(&stage));
    db.set_event_listener(move |event| {
        if event.kind == EventKind::WillBlockOn && format!("{:?}", event.key) == "2" {
            stage.reach("t1 blocked on m(2)");
        }
    });
    let db = &db;
    let results = std::thread::scope(|scope| {
        let one = scope.spawn(|| db.get::<M>(&Tagged { id: 1, outer: true }));
        db.context().wait_any(&["t1 holds m(1)"]);
        let two = scope.spawn(|| {
            db.get::<M>(&Tagged {
                id: 2,
                outer: false,
            })
        });
        (one.join().unwrap(), two.join().unwrap())
    });
    assert_eq!(db.context().cycles.load(Ordering::SeqCst), 1);
    results
}

/// (c), the other way: the members handed over with the error still mark this thread's
/// own member. `m(1)` handles `m(2)`'s cycle error, yet fails with it (the cycle rule, as
/// in a from-scratch run, where `m(1)` meets the cycle on one thread); `m(1, outer)`
/// then handles `m(1)`'s error and gives 99.
#[test]
fn a_cross_thread_cycle_member_that_handles_the_error_still_fails() {
    let (one, two) = run_m_cycle(true);
    assert!(
        two.as_ref()
            .is_err_and(|error| error.cycle_members().is_some()),
        "{two:?}"
    );
    assert_eq!(one, Ok(99), "m(1) handled the cycle and gave 50 + 1");
}

/// (c) The cycle is `m(1) <-> m(2)`. Thread 1 reached it through `m(1, outer)`, which is
/// no member: it handles the error and gives 99, as a from-scratch run does, although its
/// frame `m(1)` reads like a member's.
#[test]
fn cross_thread_cycle_members_are_matched_by_identity_not_by_name() {
    let (one, two) = run_m_cycle(false);
    assert!(
        two.as_ref()
            .is_err_and(|error| error.cycle_members().is_some()),
        "{two:?}"
    );
    assert_eq!(one, Ok(99), "a query outside the cycle failed with it");
}

// ---- (h) listener panics on the fetch paths -------------------------------------------

thread_local! {
    /// Executions of `Plus` on this thread.
    static PLUS_RUNS: Cell<u32> = const { Cell::new(0) };
}

/// `num(k) + 1`.
struct Plus;
impl Query for Plus {
    type Key = u8;
    type Value = u64;
    const NAME: &'static str = "plus";
    fn execute(db: &Database, key: &u8) -> Result<u64, QueryError> {
        PLUS_RUNS.with(|runs| runs.set(runs.get() + 1));
        Ok(db.input::<Num>(key).unwrap_or(0) + 1)
    }
}

fn plus_runs() -> u32 {
    PLUS_RUNS.with(Cell::get)
}

/// Installs a listener that panics once, at the first `kind` event about `query` (and,
/// if given, the key that prints as `key`) after the returned flag is set.
fn panicking_listener<C: Send + Sync + 'static>(
    db: &mut Database<C>,
    kind: EventKind,
    query: &'static str,
    key: Option<&'static str>,
) -> Arc<AtomicBool> {
    let armed = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&armed);
    db.set_event_listener(move |event| {
        if event.kind == kind
            && event.query == query
            && key.is_none_or(|key| format!("{:?}", event.key) == key)
            && flag.swap(false, Ordering::SeqCst)
        {
            panic!("listener panicked on {kind:?}");
        }
    });
    armed
}

/// A fetch that must return the listener's panic as the memo's error, not unwind.
fn expect_listener_panic(got: std::thread::Result<Result<u64, QueryError>>, kind: EventKind) {
    match got {
        Ok(Err(QueryError::Panicked { frame, message })) => {
            assert_eq!(frame.query, "plus");
            assert_eq!(message, format!("listener panicked on {kind:?}"));
        }
        Ok(other) => panic!("expected the listener's panic as an error, got {other:?}"),
        Err(_) => panic!("a panicking {kind:?} listener unwound out of `get`"),
    }
}

/// (h) `WillExecute`: the attempt fails with the listener's panic, the claim is released
/// as a failure, and the next fetch executes.
#[test]
fn a_panicking_will_execute_listener_fails_the_attempt() {
    let mut db = Database::default();
    let armed = panicking_listener(&mut db, EventKind::WillExecute, "plus", None);
    db.set_input::<Num>(1, 1, Durability::Low);
    armed.store(true, Ordering::SeqCst);
    let got = panic::catch_unwind(AssertUnwindSafe(|| db.get::<Plus>(&1)));
    expect_listener_panic(got, EventKind::WillExecute);
    assert_eq!(plus_runs(), 0, "execute ran after its listener panicked");
    assert_eq!(db.get::<Plus>(&1), Ok(2));
    assert_eq!(plus_runs(), 1);
    // Another thread finds no claim left behind.
    std::thread::scope(|scope| {
        assert_eq!(scope.spawn(|| db.get::<Plus>(&1)).join().unwrap(), Ok(2));
    });
}

/// (h) `DidDeepVerify` and `DidValidateMemoizedValue` on the unclaimed verification of a
/// memo: the fetch fails with the listener's panic; the memo is untouched and the next
/// fetch validates it without executing.
#[test]
fn a_panicking_verification_listener_fails_only_that_fetch() {
    for kind in [
        EventKind::DidDeepVerify,
        EventKind::DidValidateMemoizedValue,
    ] {
        let mut db = Database::default();
        let armed = panicking_listener(&mut db, kind, "plus", None);
        db.set_input::<Num>(1, 1, Durability::Low);
        assert_eq!(db.get::<Plus>(&1), Ok(2));
        let runs = plus_runs();
        // An unrelated write: `plus(1)` must be verified through its edge.
        db.set_input::<Num>(2, 1, Durability::Low);
        armed.store(true, Ordering::SeqCst);
        let got = panic::catch_unwind(AssertUnwindSafe(|| db.get::<Plus>(&1)));
        expect_listener_panic(got, kind);
        assert_eq!(db.get::<Plus>(&1), Ok(2));
        assert_eq!(plus_runs(), runs, "{kind:?}: the valid memo was executed");
    }
}

/// `chain(0) = num(0)`, `chain(k) = chain(k - 1)`: deep enough that verification claims
/// the memos near the bottom (past the unclaimed nesting limit).
struct Chain;
impl Query for Chain {
    type Key = u8;
    type Value = u64;
    const NAME: &'static str = "chain";
    fn execute(db: &Database, key: &u8) -> Result<u64, QueryError> {
        match key.checked_sub(1) {
            None => Ok(db.input::<Num>(&0).unwrap_or(0)),
            Some(below) => db.get::<Chain>(&below),
        }
    }
}

/// (h) The same listeners on a claimed verification, at the bottom of a 60-deep chain:
/// the failure counts as a change above it, the chain runs again, and the fetch gives the
/// from-scratch value without unwinding.
#[test]
fn a_panicking_listener_under_a_claimed_verification_is_contained() {
    for kind in [
        EventKind::DidDeepVerify,
        EventKind::DidValidateMemoizedValue,
    ] {
        let mut db = Database::default();
        let armed = panicking_listener(&mut db, kind, "chain", Some("3"));
        db.set_input::<Num>(0, 7, Durability::Low);
        assert_eq!(db.get::<Chain>(&60), Ok(7));
        db.set_input::<Num>(9, 1, Durability::Low);
        armed.store(true, Ordering::SeqCst);
        let got = panic::catch_unwind(AssertUnwindSafe(|| db.get::<Chain>(&60)));
        assert!(
            !armed.load(Ordering::SeqCst),
            "{kind:?}: the listener was not called for chain(3)"
        );
        let got = got.unwrap_or_else(|_| panic!("a panicking {kind:?} listener unwound"));
        assert_eq!(got, Ok(7), "{kind:?}");
        db.set_input::<Num>(0, 8, Durability::Low);
        assert_eq!(db.get::<Chain>(&60), Ok(8), "{kind:?}");
    }
}

// ---- (i) the duplicate value of an execution whose memo was verified meanwhile ---------

/// `num(1)`, read by `kept`.
struct Leaf;
impl Query<Arc<Stage>> for Leaf {
    type Key = ();
    type Value = u64;
    const NAME: &'static str = "leaf";
    fn execute(db: &Staged, _: &()) -> Result<u64, QueryError> {
        Ok(db.input::<Num>(&1).unwrap_or(0))
    }
}

/// `leaf` as a `Bomb`; once armed, it waits (after its read) until thread B has read it.
struct Kept;
impl Query<Arc<Stage>> for Kept {
    type Key = ();
    type Value = Bomb;
    const NAME: &'static str = "kept";
    fn execute(db: &Staged, _: &()) -> Result<Bomb, QueryError> {
        let leaf = db.get::<Leaf>(&())?;
        if db.context().armed.load(Ordering::SeqCst) {
            db.context().reach("a runs kept");
            waited(db, &["b read kept"])?;
        }
        Ok(Bomb(leaf))
    }
}

/// (i) Thread A's verification of `kept` fails at `leaf` (its `DidDeepVerify` listener
/// panics once: a failure counts as a change), so A executes `kept`. Meanwhile thread B
/// verifies `kept` through `leaf` without a claim and publishes it valid. A's execution
/// then finds the memo verified and drops its own, duplicate value, whose `Drop` panics:
/// the memo holds a valid value, so A's fetch must still succeed with it.
#[test]
fn a_panicking_drop_of_a_duplicate_value_does_not_fail_the_fetch() {
    let stage = Arc::new(Stage::default());
    let mut db = Database::new(Arc::clone(&stage));
    let listener_armed = panicking_listener(&mut db, EventKind::DidDeepVerify, "leaf", None);
    db.set_input::<Num>(1, 4, Durability::Low);
    assert_eq!(db.get::<Kept>(&()), Ok(Bomb(4)));
    db.set_input::<Num>(2, 1, Durability::Low);
    stage.armed.store(true, Ordering::SeqCst);
    listener_armed.store(true, Ordering::SeqCst);
    let exploded = EXPLODED.with(Cell::get);
    let db = &db;
    let got = std::thread::scope(|scope| {
        let b = scope.spawn(|| {
            db.context().wait_any(&["a runs kept"]);
            let got = db.get::<Kept>(&());
            db.context().reach("b read kept");
            got
        });
        // Thread A is this thread, where the bomb is armed.
        arm(Some(4));
        let got = panic::catch_unwind(AssertUnwindSafe(|| db.get::<Kept>(&())));
        arm(None);
        assert_eq!(b.join().unwrap(), Ok(Bomb(4)));
        got
    });
    assert_eq!(
        EXPLODED.with(Cell::get),
        exploded + 1,
        "A's execution did not end in keep_verified with its duplicate dropped"
    );
    let got = got.unwrap_or_else(|_| panic!("a value's Drop unwound out of `get`"));
    assert_eq!(got, Ok(Bomb(4)));
    assert_eq!(db.get::<Kept>(&()), Ok(Bomb(4)));
}
