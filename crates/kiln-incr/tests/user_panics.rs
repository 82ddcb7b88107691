//! Issue 10, defect 3: user code the engine calls besides `execute` (`Eq`, `Hash` and
//! `fingerprint`, `size_bytes`, `Clone`, `Drop` of values) is contained like `execute`: a
//! panic in it during an execution becomes that fetch's `QueryError::Panicked`, and a
//! panic during eviction is absorbed, never unwinding out of the engine with a claim or a
//! half-made change behind it. Afterwards the database gives what a from-scratch run gives.

use std::cell::Cell;
use std::hash::{Hash, Hasher};
use std::panic::{self, AssertUnwindSafe};

use kiln_incr::{Database, Durability, Input, Query, QueryError};

thread_local! {
    /// Which user hook panics on this thread (each test runs on its own thread).
    static PANIC_IN: Cell<Option<Hook>> = const { Cell::new(None) };
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Hook {
    Eq,
    Hash,
    Clone,
    Drop,
    Size,
}

fn maybe_panic(hook: Hook) {
    if PANIC_IN.with(Cell::get) == Some(hook) && !std::thread::panicking() {
        panic!("{hook:?} panicked");
    }
}

fn arm(hook: Option<Hook>) {
    PANIC_IN.with(|armed| armed.set(hook));
}

/// A value whose every trait impl can be made to panic.
#[derive(Debug)]
struct Touchy(u64);

impl Clone for Touchy {
    fn clone(&self) -> Self {
        maybe_panic(Hook::Clone);
        Touchy(self.0)
    }
}
impl PartialEq for Touchy {
    fn eq(&self, other: &Self) -> bool {
        maybe_panic(Hook::Eq);
        self.0 == other.0
    }
}
impl Eq for Touchy {}
impl Hash for Touchy {
    fn hash<H: Hasher>(&self, state: &mut H) {
        maybe_panic(Hook::Hash);
        self.0.hash(state);
    }
}
impl Drop for Touchy {
    fn drop(&mut self) {
        maybe_panic(Hook::Drop);
    }
}

struct Num;
impl Input for Num {
    type Key = u8;
    type Value = u64;
    const NAME: &'static str = "num";
}

/// `num(k) / 2`, so that 4 and 5 give an equal value (backdating compares with `Eq`).
struct Half;
impl Query for Half {
    type Key = u8;
    type Value = Touchy;
    const NAME: &'static str = "half";
    fn execute(db: &Database, key: &u8) -> Result<Touchy, QueryError> {
        Ok(Touchy(db.input::<Num>(key).unwrap_or(0) / 2))
    }
    fn size_bytes(_: &Touchy) -> usize {
        maybe_panic(Hook::Size);
        8
    }
}

/// `half(k) + 1`, as a plain number.
struct Next;
impl Query for Next {
    type Key = u8;
    type Value = u64;
    const NAME: &'static str = "next";
    fn execute(db: &Database, key: &u8) -> Result<u64, QueryError> {
        Ok(db.get::<Half>(key)?.0 + 1)
    }
}

/// Fetches `half(key)` with `hook` armed; whatever happens must come back as a value.
fn fetch_armed(db: &Database, key: u8, hook: Hook) -> Result<u64, QueryError> {
    arm(Some(hook));
    let got = panic::catch_unwind(AssertUnwindSafe(|| db.get::<Next>(&key)));
    arm(None);
    match got {
        Ok(result) => result,
        Err(_) => panic!("a panic in {hook:?} unwound out of `get`"),
    }
}

fn assert_panicked_in(result: Result<u64, QueryError>, hook: Hook) {
    match result {
        Err(QueryError::Panicked { frame, message }) => {
            // Under `Drop`, the reader's own `execute` drops its copy of `half` too. Under
            // `Clone`, the verification that re-executes `half` keeps no copy of it: the
            // first clone is the reader's read, contained by the reader's `execute`.
            let readers_too = matches!(hook, Hook::Drop | Hook::Clone) && frame.query == "next";
            assert!(frame.query == "half" || readers_too, "{frame}");
            assert_eq!(message, format!("{hook:?} panicked"));
        }
        other => panic!("{hook:?}: expected a contained panic, got {other:?}"),
    }
}

/// A re-execution whose hook panics: the fetch gets the panic as an error, and the next
/// fetch (hook disarmed) gives the from-scratch value.
///
/// Backdating's `Eq` (or `fingerprint`) runs only when re-executing a memo whose last
/// attempt did not fail: when it panics while the reader is being verified, the reader runs
/// again, its read executes the memo again, now without comparing, and the fetch gives the
/// right value (`retried`). Either way nothing unwinds.
fn reexecution_contains(hook: Hook, new_input: u64) {
    let mut db = Database::default();
    db.set_input::<Num>(1, 4, Durability::Low);
    assert_eq!(db.get::<Next>(&1), Ok(3));
    db.set_input::<Num>(1, new_input, Durability::Low);
    let got = fetch_armed(&db, 1, hook);
    let retried = matches!(hook, Hook::Eq | Hook::Hash);
    if retried {
        assert_eq!(got, Ok(new_input / 2 + 1), "{hook:?}");
    } else {
        assert_panicked_in(got, hook);
    }
    assert_eq!(db.get::<Next>(&1), Ok(new_input / 2 + 1));
    // And the memo is sound afterwards: a further change is seen.
    db.set_input::<Num>(1, 20, Durability::Low);
    assert_eq!(db.get::<Next>(&1), Ok(11));
}

#[test]
fn a_panicking_eq_during_backdating_is_contained() {
    // 4 -> 5: an equal value, compared with `Eq`.
    reexecution_contains(Hook::Eq, 5);
}

#[test]
fn a_panicking_clone_of_a_new_value_is_contained() {
    reexecution_contains(Hook::Clone, 8);
}

/// Fetched directly, the execution hands back a copy of the new value: its `Clone` runs
/// under the claim, contained.
#[test]
fn a_panicking_clone_of_a_fetched_value_is_contained() {
    let mut db = Database::default();
    db.set_input::<Num>(1, 4, Durability::Low);
    assert_eq!(db.get::<Half>(&1).map(|half| half.0), Ok(2));
    db.set_input::<Num>(1, 8, Durability::Low);
    arm(Some(Hook::Clone));
    let got = panic::catch_unwind(AssertUnwindSafe(|| db.get::<Half>(&1).map(|half| half.0)));
    arm(None);
    match got.unwrap_or_else(|_| panic!("a panic in Clone unwound out of `get`")) {
        Err(QueryError::Panicked { frame, message }) => {
            assert_eq!((frame.query, message.as_str()), ("half", "Clone panicked"));
        }
        other => panic!("expected a contained panic, got {other:?}"),
    }
    assert_eq!(db.get::<Next>(&1), Ok(5));
}

#[test]
fn a_panicking_size_bytes_is_contained() {
    reexecution_contains(Hook::Size, 8);
}

#[test]
fn a_panicking_drop_of_the_replaced_value_is_contained() {
    reexecution_contains(Hook::Drop, 8);
}

#[test]
fn a_panicking_fingerprint_of_a_new_value_is_contained() {
    // The old value was evicted, so backdating compares fingerprints (`Hash`).
    let mut db = Database::default();
    db.set_lru_capacity::<Half>(1);
    db.set_input::<Num>(1, 4, Durability::Low);
    db.set_input::<Num>(2, 4, Durability::Low);
    assert_eq!(db.get::<Next>(&1), Ok(3));
    assert_eq!(db.get::<Next>(&2), Ok(3));
    db.set_input::<Num>(1, 5, Durability::Low); // evicts half(1), the older value
    assert!(db.memo_info::<Half>(&1).is_some_and(|info| !info.has_value));
    // Fetched directly, the memo's own execution meets the panic.
    arm(Some(Hook::Hash));
    let got = panic::catch_unwind(AssertUnwindSafe(|| db.get::<Half>(&1).map(|half| half.0)));
    arm(None);
    let got = got.unwrap_or_else(|_| panic!("a panic in Hash unwound out of `get`"));
    match got {
        Err(QueryError::Panicked { frame, message }) => {
            assert_eq!((frame.query, message.as_str()), ("half", "Hash panicked"));
        }
        other => panic!("expected a contained panic, got {other:?}"),
    }
    assert_eq!(db.get::<Next>(&1), Ok(3));
}

/// Eviction runs user code at a revision boundary (`size_bytes`, `fingerprint`, `Drop`):
/// a panic there must not unwind out of `set_input` and must not cost soundness.
fn eviction_contains(hook: Hook) {
    let mut db = Database::default();
    db.set_lru_capacity::<Half>(1);
    for key in 0..4u8 {
        db.set_input::<Num>(key, u64::from(key) * 2, Durability::Low);
        assert_eq!(db.get::<Next>(&key), Ok(u64::from(key) + 1));
    }
    arm(Some(hook));
    let boundary = panic::catch_unwind(AssertUnwindSafe(|| {
        db.set_input::<Num>(9, 1, Durability::Low);
    }));
    arm(None);
    assert!(
        boundary.is_ok(),
        "a panic in {hook:?} unwound out of `set_input`"
    );
    // Every value is still right, and an edit after the boundary is still seen.
    for key in 0..4u8 {
        assert_eq!(db.get::<Next>(&key), Ok(u64::from(key) + 1), "{hook:?}");
    }
    db.set_input::<Num>(0, 7, Durability::Low);
    assert_eq!(db.get::<Next>(&0), Ok(4));
    db.evict();
    assert_eq!(
        db.memo_stats::<Half>().values,
        1,
        "{hook:?}: LRU accounting"
    );
}

#[test]
fn a_panicking_size_bytes_during_eviction_is_contained() {
    eviction_contains(Hook::Size);
}

#[test]
fn a_panicking_fingerprint_during_eviction_is_contained() {
    eviction_contains(Hook::Hash);
}

#[test]
fn a_panicking_drop_during_eviction_is_contained() {
    eviction_contains(Hook::Drop);
}
