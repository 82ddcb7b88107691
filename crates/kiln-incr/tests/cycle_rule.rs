//! Issue 10, defect 4: the cycle rule. Every member of a cycle fails with the cycle's
//! error, also a member whose `execute` handles that error and returns a value; a query
//! outside the cycle that reads a member may handle the error like any other. So what a
//! fetch returns does not depend on which member was fetched first, and an incremental
//! read equals a from-scratch run.

use kiln_incr::{Database, Durability, Input, Query, QueryError};

struct Gate;
impl Input for Gate {
    type Key = ();
    type Value = bool;
    const NAME: &'static str = "gate";
}

/// With the gate open, `b(()).unwrap_or(1)`; else 10.
struct A;
impl Query for A {
    type Key = ();
    type Value = u32;
    const NAME: &'static str = "a";
    fn execute(db: &Database, _: &()) -> Result<u32, QueryError> {
        if db.input::<Gate>(&()).unwrap_or(false) {
            return Ok(db.get::<B>(&()).unwrap_or(1));
        }
        Ok(10)
    }
}

/// `a(()).unwrap_or(2)`: with the gate open, `a` and `b` each handle the other's error.
struct B;
impl Query for B {
    type Key = ();
    type Value = u32;
    const NAME: &'static str = "b";
    fn execute(db: &Database, _: &()) -> Result<u32, QueryError> {
        Ok(db.get::<A>(&()).unwrap_or(2))
    }
}

/// Outside the cycle: reads `a` and handles its error.
struct Outside;
impl Query for Outside {
    type Key = ();
    type Value = u32;
    const NAME: &'static str = "outside";
    fn execute(db: &Database, _: &()) -> Result<u32, QueryError> {
        Ok(db.get::<A>(&()).map_or(7, |a| a + 100))
    }
}

/// What each of `a`, `b`, `outside` gives when fetched in `order` (indices) on `db`.
fn fetch_in(db: &Database, order: [usize; 3]) -> [Result<u32, QueryError>; 3] {
    let mut results = [Ok(0), Ok(0), Ok(0)];
    for which in order {
        results[which] = match which {
            0 => db.get::<A>(&()),
            1 => db.get::<B>(&()),
            _ => db.get::<Outside>(&()),
        };
    }
    results
}

/// Cycle errors compared by their member set (the list starts at the member entered
/// first, which depends on the fetch order); other results exactly.
fn normalized(results: [Result<u32, QueryError>; 3]) -> Vec<Result<u32, Vec<String>>> {
    results
        .into_iter()
        .map(|result| {
            result.map_err(|error| {
                let mut members: Vec<String> = error
                    .cycle_members()
                    .unwrap_or_default()
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                members.sort();
                members
            })
        })
        .collect()
}

const ORDERS: [[usize; 3]; 6] = [
    [0, 1, 2],
    [0, 2, 1],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
];

fn from_scratch(gate: bool, order: [usize; 3]) -> Vec<Result<u32, Vec<String>>> {
    let mut db = Database::default();
    db.set_input::<Gate>((), gate, Durability::Low);
    normalized(fetch_in(&db, order))
}

#[test]
fn members_that_handle_each_others_errors_fail_in_every_fetch_order() {
    let cycle = vec!["a(())".to_string(), "b(())".to_string()];
    for order in ORDERS {
        assert_eq!(
            from_scratch(true, order),
            vec![Err(cycle.clone()), Err(cycle.clone()), Ok(7)],
            "order {order:?}"
        );
    }
}

#[test]
fn incremental_reads_equal_from_scratch_runs_as_the_cycle_comes_and_goes() {
    for order in ORDERS {
        let mut db = Database::default();
        db.set_input::<Gate>((), false, Durability::Low);
        for step in 0..6 {
            let gate = step % 2 == 1;
            db.set_input::<Gate>((), gate, Durability::Low);
            assert_eq!(
                normalized(fetch_in(&db, order)),
                from_scratch(gate, order),
                "order {order:?}, step {step}"
            );
            // A revision in which nothing changed: verification must agree too.
            db.synthetic_write(Durability::Low);
            assert_eq!(
                normalized(fetch_in(&db, order)),
                from_scratch(gate, order),
                "order {order:?}, step {step}, after an unrelated write"
            );
        }
    }
}
