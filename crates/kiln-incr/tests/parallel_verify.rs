//! Verification from many threads at once: memos are verified without claims when nothing
//! must re-execute, so these tests check that racing verifiers never execute a memo twice
//! in one revision, never execute one whose inputs did not change, and always agree with a
//! from-scratch run; and that a cycle among stored edges still ends in an error.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

mod common;

use common::EventLog;
use kiln_incr::{Database, Durability, Input, Query, QueryError};

const INPUTS: u32 = 64;
const PAIRS_PER_ROOT: u32 = 8;
const ROOTS: u32 = INPUTS / PAIRS_PER_ROOT;
const THREADS: usize = 8;

/// Executions per key of each query.
struct Counts {
    leaf: Vec<AtomicUsize>,
    pair: Vec<AtomicUsize>,
    root: Vec<AtomicUsize>,
}

impl Counts {
    fn new() -> Self {
        let zeros = |n: u32| (0..n).map(|_| AtomicUsize::new(0)).collect();
        Counts {
            leaf: zeros(INPUTS),
            pair: zeros(INPUTS),
            root: zeros(ROOTS),
        }
    }

    /// Takes the counts, resetting them to zero.
    fn take(&self) -> [Vec<usize>; 3] {
        let take = |counts: &[AtomicUsize]| {
            counts
                .iter()
                .map(|count| count.swap(0, Ordering::SeqCst))
                .collect()
        };
        [take(&self.leaf), take(&self.pair), take(&self.root)]
    }
}

type Db = Database<Arc<Counts>>;

struct Num;
impl Input for Num {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "num";
}

/// `num(k) / 10`: inputs within one ten give an equal value (backdating).
struct Leaf;
impl Query<Arc<Counts>> for Leaf {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "leaf";
    fn execute(db: &Db, key: &u32) -> Result<u64, QueryError> {
        db.context().leaf[*key as usize].fetch_add(1, Ordering::SeqCst);
        Ok(db.input::<Num>(key).unwrap_or(0) / 10)
    }
}

/// `leaf(k) + 2 * leaf(k + 1)` (wrapping around).
struct Pair;
impl Query<Arc<Counts>> for Pair {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "pair";
    fn execute(db: &Db, key: &u32) -> Result<u64, QueryError> {
        db.context().pair[*key as usize].fetch_add(1, Ordering::SeqCst);
        Ok(db.get::<Leaf>(key)? + 2 * db.get::<Leaf>(&((key + 1) % INPUTS))?)
    }
}

/// Sum of eight consecutive pairs.
struct Root;
impl Query<Arc<Counts>> for Root {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "root";
    fn execute(db: &Db, key: &u32) -> Result<u64, QueryError> {
        db.context().root[*key as usize].fetch_add(1, Ordering::SeqCst);
        let mut sum = 0;
        for pair in key * PAIRS_PER_ROOT..(key + 1) * PAIRS_PER_ROOT {
            sum += db.get::<Pair>(&pair)?;
        }
        Ok(sum)
    }
}

fn expected_roots(inputs: &[u64]) -> Vec<u64> {
    let leaf = |k: u32| inputs[k as usize] / 10;
    let pair = |k: u32| leaf(k) + 2 * leaf((k + 1) % INPUTS);
    (0..ROOTS)
        .map(|root| {
            (root * PAIRS_PER_ROOT..(root + 1) * PAIRS_PER_ROOT)
                .map(pair)
                .sum()
        })
        .collect()
}

/// Every thread fetches every root (each from a different first root), after one barrier.
fn fetch_roots_from_all_threads(db: &Db) -> Vec<Vec<u64>> {
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS as u32)
            .map(|thread| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    let mut values = vec![0; ROOTS as usize];
                    for step in 0..ROOTS {
                        let root = (thread + step) % ROOTS;
                        values[root as usize] = db.get::<Root>(&root).unwrap();
                    }
                    values
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap())
            .collect()
    })
}

/// Sets up the database; returns it with its inputs.
fn database(leaf_capacity: usize) -> (Db, Vec<u64>) {
    let mut db = Database::new(Arc::new(Counts::new()));
    db.set_lru_capacity::<Leaf>(leaf_capacity);
    let inputs: Vec<u64> = (0..INPUTS as u64).map(|k| k * 10).collect();
    for (key, value) in inputs.iter().enumerate() {
        db.set_input::<Num>(key as u32, *value, Durability::Low);
    }
    // An input nobody reads, so that a write to it forces deep verification.
    db.set_input::<Num>(u32::MAX, 0, Durability::Low);
    for root in 0..ROOTS {
        db.get::<Root>(&root).unwrap();
    }
    db.context().take();
    (db, inputs)
}

/// One edit per round, then all threads verify at once: exactly the queries downstream of a
/// changed leaf value run, once each.
fn racing_verifiers_execute_exactly_what_changed(leaf_capacity: usize) {
    let (mut db, mut inputs) = database(leaf_capacity);
    for round in 0..24u32 {
        let key = (round * 7) % INPUTS;
        // Every third round stays within the same ten: the leaf re-runs and is backdated.
        let value_changes = round % 3 != 0;
        let new = if value_changes {
            inputs[key as usize] + 10
        } else {
            inputs[key as usize] + 1
        };
        inputs[key as usize] = new;
        db.set_input::<Num>(key, new, Durability::Low);

        let results = fetch_roots_from_all_threads(&db);
        let want = expected_roots(&inputs);
        for values in &results {
            assert_eq!(values, &want, "round {round}");
        }

        let [leaf, pair, root] = db.context().take();
        let previous = (key + INPUTS - 1) % INPUTS;
        let next = (key + 1) % INPUTS;
        for k in 0..INPUTS {
            let leaf_runs = leaf[k as usize];
            if k == key {
                assert_eq!(
                    leaf_runs, 1,
                    "round {round}: leaf({k}) ran {leaf_runs} times"
                );
            } else if value_changes && leaf_capacity != 0 && (k == previous || k == next) {
                // Read by a re-executed pair: executed again only if its value was evicted.
                assert!(
                    leaf_runs <= 1,
                    "round {round}: leaf({k}) ran {leaf_runs} times"
                );
            } else {
                assert_eq!(leaf_runs, 0, "round {round}: leaf({k}) ran needlessly");
            }
            let pair_runs = pair[k as usize];
            let pair_reads_key = k == key || k == previous;
            let want_pair = usize::from(value_changes && pair_reads_key);
            assert_eq!(
                pair_runs, want_pair,
                "round {round}: pair({k}) ran {pair_runs} times"
            );
        }
        for r in 0..ROOTS {
            let reads_changed_pair = [key, previous]
                .iter()
                .any(|pair| pair / PAIRS_PER_ROOT == r);
            let want_root = usize::from(value_changes && reads_changed_pair);
            assert_eq!(root[r as usize], want_root, "round {round}: root({r})");
        }

        // A write nobody reads: every memo is deep-verified by racing threads, none runs.
        db.synthetic_write(Durability::Low);
        for values in fetch_roots_from_all_threads(&db) {
            assert_eq!(values, want, "round {round}, after an unrelated write");
        }
        assert_eq!(
            db.context().take(),
            [
                vec![0; INPUTS as usize],
                vec![0; INPUTS as usize],
                vec![0; ROOTS as usize]
            ],
            "round {round}: an unrelated write re-executed something"
        );
    }
}

#[test]
fn racing_verifiers_execute_each_changed_memo_once() {
    racing_verifiers_execute_exactly_what_changed(0);
}

#[test]
fn racing_verifiers_through_evicted_leaves_execute_each_changed_memo_once() {
    racing_verifiers_execute_exactly_what_changed(4);
}

struct Flag;
impl Input for Flag {
    type Key = ();
    type Value = bool;
    const NAME: &'static str = "flag";
}

/// `down(()) + 1`.
struct Up;
impl Query for Up {
    type Key = ();
    type Value = u32;
    const NAME: &'static str = "up";
    fn execute(db: &Database, _: &()) -> Result<u32, QueryError> {
        Ok(db.get::<Down>(&())? + 1)
    }
}

/// With the flag set, reads `up(())` and handles its error: so it would succeed while
/// `up` fails, if the cycle rule let a member of a cycle handle the cycle's error.
struct Down;
impl Query for Down {
    type Key = ();
    type Value = u32;
    const NAME: &'static str = "down";
    fn execute(db: &Database, _: &()) -> Result<u32, QueryError> {
        if db.input::<Flag>(&()).unwrap_or(false) {
            return Ok(db.get::<Up>(&()).unwrap_or(100));
        }
        Ok(0)
    }
}

/// `Q(())` on a fresh database with the flag at `flag`.
fn from_scratch<Q: Query<Key = (), Value = u32>>(flag: bool) -> Result<u32, QueryError> {
    let mut db = Database::default();
    db.set_input::<Flag>((), flag, Durability::Low);
    db.get::<Q>(&())
}

/// Issue 10, defect 4. This test used to pin `down` at `Ok(100)` and then `up` at
/// `Ok(101)` (through a cycle among stored edges), where a from-scratch run of `up`
/// reports the cycle. The cycle rule: every member of a cycle fails with the cycle's
/// error, even one that handles it, so each read equals a from-scratch run.
#[test]
fn a_member_that_handles_its_cycle_fails_like_a_from_scratch_run() {
    let mut db = Database::default();
    db.set_input::<Flag>((), false, Durability::Low);
    assert_eq!(db.get::<Up>(&()), Ok(1));
    db.set_input::<Flag>((), true, Durability::Low);
    // `down` runs, reads `up`, which reads `down`: both are on the cycle.
    let down = db.get::<Down>(&());
    assert_eq!(down, from_scratch::<Down>(true));
    assert_eq!(
        down.unwrap_err().to_string(),
        "cycle detected: down(()) -> up(()) -> down(())"
    );
    db.synthetic_write(Durability::Low);
    let events = EventLog::attach(&mut db);
    let up = db.get::<Up>(&());
    assert_eq!(up, from_scratch::<Up>(true));
    assert!(up.is_err_and(|error| error.cycle_members().is_some()));
    assert_eq!(db.get::<Down>(&()), from_scratch::<Down>(true));
    let executed = events.executed();
    assert!(executed.contains(&"up(())".to_string()), "{executed:?}");
    // Nothing stays claimed, and nothing failed was memoized.
    db.set_input::<Flag>((), false, Durability::Low);
    assert_eq!(db.get::<Up>(&()), Ok(1));
    assert_eq!(db.get::<Down>(&()), Ok(0));
}
