//! A fixed workload for counting instructions under callgrind, where wall-clock figures on a
//! shared VM are too noisy to compare two commits (and there are no hardware counters).
//!
//! - `deep ROUNDS`: 256 trees of seven memos (the shape of `vs_salsa`'s `deep_verify`) are
//!   executed once, then re-verified `ROUNDS` times after a write to an input nobody reads.
//! - `cold N`: `N` fresh one-input memos are executed (each takes and releases a claim).
//! - `hot PASSES` / `lru PASSES`: 256 memos are executed, then hit `PASSES` times each in
//!   one revision (`hot_pass`), on a query without or with an LRU bound.
//!
//! Count only the measured function, and take the difference of two round counts for the
//! cost of verification alone:
//!
//! ```text
//! cargo build --release -p kiln-incr --example instructions
//! valgrind --tool=callgrind --toggle-collect='instructions::verify_round' \
//!     target/release/examples/instructions deep 21     # minus the same with `deep 1`
//! valgrind --tool=callgrind --toggle-collect='instructions::cold_pass' \
//!     target/release/examples/instructions cold 20000
//! valgrind --tool=callgrind --toggle-collect='instructions::hot_pass' \
//!     target/release/examples/instructions hot 100   # or lru 100
//! ```
//!
//! Add `--cache-sim=yes --branch-sim=yes` for simulated cache misses and mispredictions.

use std::hint::black_box;
use std::process::ExitCode;

use kiln_incr::{Database, Durability, Input, Query, QueryError};

struct Num;
impl Input for Num {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "num";
}

fn num(db: &Database, index: u32) -> u64 {
    db.input::<Num>(&index).unwrap_or(0)
}

struct Leaf<const WHICH: u64>;
impl<const WHICH: u64> Query for Leaf<WHICH> {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "leaf";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        Ok(num(db, *key).wrapping_mul(WHICH + 3))
    }
}

struct Left;
impl Query for Left {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "left";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        Ok(db.get::<Leaf<0>>(key)? + db.get::<Leaf<1>>(key)?)
    }
}

struct Right;
impl Query for Right {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "right";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        Ok(db.get::<Leaf<2>>(key)? + db.get::<Leaf<3>>(key)?)
    }
}

struct Root;
impl Query for Root {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "root";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        Ok(db.get::<Left>(key)? + db.get::<Right>(key)?)
    }
}

struct Cold;
impl Query for Cold {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "cold";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        Ok(num(db, *key) + 1)
    }
}

/// `Cold` with an LRU bound (larger than its key count: every fetch is a hit).
struct Bounded;
impl Query for Bounded {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "bounded";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        Ok(num(db, *key) + 2)
    }
}

const ROOTS: u32 = 256;
/// Keys hit by `hot_pass`.
const HOT_KEYS: u32 = 256;
const BYSTANDER: u32 = u32::MAX;

#[inline(never)]
fn verify_round(db: &Database) -> Result<u64, QueryError> {
    (0..ROOTS).try_fold(0u64, |sum, root| {
        Ok(sum.wrapping_add(black_box(db).get::<Root>(&black_box(root))?))
    })
}

#[inline(never)]
fn cold_pass(db: &Database, count: u32) -> Result<u64, QueryError> {
    (0..count).try_fold(0u64, |sum, key| {
        Ok(sum.wrapping_add(black_box(db).get::<Cold>(&black_box(key))?))
    })
}

#[inline(never)]
fn hot_pass<Q: Query<Key = u32, Value = u64>>(
    db: &Database,
    passes: u32,
) -> Result<u64, QueryError> {
    let mut sum = 0u64;
    for _ in 0..passes {
        for key in 0..HOT_KEYS {
            sum = sum.wrapping_add(black_box(db).get::<Q>(&black_box(key))?);
        }
    }
    Ok(sum)
}

fn run(mode: &str, count: u32) -> Result<(), String> {
    let mut db = Database::default();
    match mode {
        "deep" => {
            for index in 0..ROOTS {
                db.set_input::<Num>(index, u64::from(index) * 7 + 1, Durability::Low);
            }
            db.set_input::<Num>(BYSTANDER, 0, Durability::Low);
            let want = verify_round(&db).map_err(|error| error.to_string())?;
            for round in 1..=count {
                db.set_input::<Num>(BYSTANDER, u64::from(round), Durability::Low);
                let got = verify_round(&db).map_err(|error| error.to_string())?;
                if got != want {
                    return Err(format!("round {round}: {got} != {want}"));
                }
            }
        }
        "cold" => {
            for index in 0..count {
                db.set_input::<Num>(index, u64::from(index), Durability::Low);
            }
            black_box(cold_pass(&db, count).map_err(|error| error.to_string())?);
        }
        "hot" | "lru" => {
            for index in 0..HOT_KEYS {
                db.set_input::<Num>(index, u64::from(index), Durability::Low);
            }
            let got = if mode == "hot" {
                hot_pass::<Cold>(&db, 1).and_then(|_| hot_pass::<Cold>(&db, count))
            } else {
                db.set_lru_capacity::<Bounded>(1000);
                hot_pass::<Bounded>(&db, 1).and_then(|_| hot_pass::<Bounded>(&db, count))
            };
            black_box(got.map_err(|error| error.to_string())?);
        }
        other => return Err(format!("unknown mode {other:?} (deep, cold, hot or lru)")),
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = match args.as_slice() {
        [mode, count] => count.parse::<u32>().map(|count| (mode.clone(), count)).ok(),
        _ => None,
    };
    let Some((mode, count)) = parsed else {
        eprintln!("usage: instructions deep ROUNDS | instructions cold COUNT");
        return ExitCode::FAILURE;
    };
    match run(&mode, count) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("instructions: {message}");
            ExitCode::FAILURE
        }
    }
}
