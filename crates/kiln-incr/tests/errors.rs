//! Engine errors: cycles and panics reach the caller as typed errors naming the queries,
//! and the database stays usable.

mod common;

use common::EventLog;
use kiln_incr::{Database, Durability, Input, Query, QueryError, QueryFrame};

struct Link;
impl Input for Link {
    type Key = u32;
    type Value = u32;
    const NAME: &'static str = "link";
}

/// Follows `link(k)` to the next key, stopping at a missing link.
struct Chase;
impl Query for Chase {
    type Key = u32;
    type Value = u32;
    const NAME: &'static str = "chase";
    fn execute(db: &Database, key: &u32) -> Result<u32, QueryError> {
        match db.input::<Link>(key) {
            Some(next) => Ok(db.get::<Chase>(&next)? + 1),
            None => Ok(0),
        }
    }
}

fn frame(query: &'static str, key: &str) -> QueryFrame {
    QueryFrame {
        query,
        key: key.to_owned(),
    }
}

#[test]
fn cycle_is_an_error_naming_its_members() {
    let mut db = Database::default();
    db.set_input::<Link>(1, 2, Durability::Low);
    db.set_input::<Link>(2, 3, Durability::Low);
    db.set_input::<Link>(3, 1, Durability::Low);
    let error = db.get::<Chase>(&1).unwrap_err();
    assert_eq!(
        error.cycle_members(),
        Some(
            &[
                frame("chase", "1"),
                frame("chase", "2"),
                frame("chase", "3")
            ][..]
        )
    );
    assert_eq!(
        error.to_string(),
        "cycle detected: chase(1) -> chase(2) -> chase(3) -> chase(1)"
    );
    // Entering the cycle elsewhere names it from there.
    let error = db.get::<Chase>(&3).unwrap_err();
    assert_eq!(
        error.cycle_members().map(|members| members[0].clone()),
        Some(frame("chase", "3"))
    );

    // Breaking the cycle makes every member computable.
    db.remove_input::<Link>(&3);
    assert_eq!(db.get::<Chase>(&1).unwrap(), 2);
    assert_eq!(db.get::<Chase>(&3).unwrap(), 0);
}

#[test]
fn self_cycle_is_an_error() {
    let mut db = Database::default();
    db.set_input::<Link>(5, 5, Durability::Low);
    let error = db.get::<Chase>(&5).unwrap_err();
    assert_eq!(error.cycle_members(), Some(&[frame("chase", "5")][..]));
}

#[test]
fn cycle_appearing_on_reverification_is_an_error() {
    let mut db = Database::default();
    db.set_input::<Link>(1, 2, Durability::Low);
    assert_eq!(db.get::<Chase>(&1).unwrap(), 1);
    db.set_input::<Link>(2, 1, Durability::Low);
    assert!(db.get::<Chase>(&1).unwrap_err().cycle_members().is_some());
    db.remove_input::<Link>(&2);
    assert_eq!(db.get::<Chase>(&1).unwrap(), 1);
}

struct Fuse;
impl Input for Fuse {
    type Key = u32;
    type Value = bool;
    const NAME: &'static str = "fuse";
}

/// Panics while `fuse(k)` is lit.
struct Bomb;
impl Query for Bomb {
    type Key = u32;
    type Value = u32;
    const NAME: &'static str = "bomb";
    fn execute(db: &Database, key: &u32) -> Result<u32, QueryError> {
        if db.input::<Fuse>(key) == Some(true) {
            panic!("bomb {key} went off");
        }
        Ok(*key)
    }
}

struct AroundBomb;
impl Query for AroundBomb {
    type Key = u32;
    type Value = u32;
    const NAME: &'static str = "around_bomb";
    fn execute(db: &Database, key: &u32) -> Result<u32, QueryError> {
        Ok(db.get::<Bomb>(key)? * 10)
    }
}

#[test]
fn panic_is_an_error_and_the_database_stays_usable() {
    let mut db = Database::default();
    let events = EventLog::attach(&mut db);
    db.set_input::<Fuse>(13, true, Durability::Low);
    let error = db.get::<AroundBomb>(&13).unwrap_err();
    assert_eq!(
        error,
        QueryError::Panicked {
            frame: frame("bomb", "13"),
            message: "bomb 13 went off".into(),
        }
    );
    assert_eq!(events.executed(), vec!["around_bomb(13)", "bomb(13)"]);
    // Nothing failed was memoized: fetching again tries again.
    assert!(db.get::<AroundBomb>(&13).is_err());
    assert_eq!(events.executed(), vec!["around_bomb(13)", "bomb(13)"]);
    // Other keys work meanwhile.
    assert_eq!(db.get::<AroundBomb>(&2).unwrap(), 20);

    db.set_input::<Fuse>(13, false, Durability::Low);
    assert_eq!(db.get::<AroundBomb>(&13).unwrap(), 130);
}

#[test]
fn failure_of_a_dependency_reruns_its_dependents_later() {
    let mut db = Database::default();
    db.set_input::<Fuse>(1, false, Durability::Low);
    assert_eq!(db.get::<AroundBomb>(&1).unwrap(), 10);
    db.set_input::<Fuse>(1, true, Durability::Low);
    assert!(db.get::<AroundBomb>(&1).is_err());
    db.set_input::<Fuse>(1, false, Durability::Low);
    assert_eq!(db.get::<AroundBomb>(&1).unwrap(), 10);
}

/// Panics when `link(key)` is 13, else returns it (0 when missing).
struct Fragile;
impl Query for Fragile {
    type Key = u32;
    type Value = u32;
    const NAME: &'static str = "fragile";
    fn execute(db: &Database, key: &u32) -> Result<u32, QueryError> {
        let value = db.input::<Link>(key).unwrap_or(0);
        assert_ne!(value, 13, "fragile saw 13");
        Ok(value)
    }
}

/// `fragile(1)` (or 100 when it fails) plus `link(2)`, read after the nested failure.
struct Tolerant;
impl Query for Tolerant {
    type Key = ();
    type Value = u32;
    const NAME: &'static str = "tolerant";
    fn execute(db: &Database, _: &()) -> Result<u32, QueryError> {
        let first = db.get::<Fragile>(&1).unwrap_or(100);
        Ok(first + db.input::<Link>(&2).unwrap_or(0))
    }
}

#[test]
fn reads_after_a_nested_panic_are_recorded_in_the_outer_query() {
    let mut db = Database::default();
    let events = EventLog::attach(&mut db);
    db.set_input::<Link>(1, 13, Durability::Low);
    db.set_input::<Link>(2, 5, Durability::Low);
    assert_eq!(db.get::<Tolerant>(&()).unwrap(), 105);
    assert_eq!(events.executed(), vec!["tolerant(())", "fragile(1)"]);

    // The read of link(2) made after the panic belongs to `tolerant`: changing it reruns it.
    db.set_input::<Link>(2, 6, Durability::Low);
    assert_eq!(db.get::<Tolerant>(&()).unwrap(), 106);
    assert_eq!(
        events.executed(),
        vec!["tolerant(())", "fragile(1)"],
        "the failed fragile(1) is retried, nothing else runs"
    );

    // A read outside any query is not recorded anywhere (the panic left no frame behind).
    assert_eq!(db.input::<Link>(&1), Some(13));
    db.set_input::<Link>(1, 4, Durability::Low);
    assert_eq!(
        db.get::<Tolerant>(&()).unwrap(),
        10,
        "tolerant served a stale value"
    );
    assert_eq!(events.executed(), vec!["tolerant(())", "fragile(1)"]);
    db.set_input::<Link>(7, 1, Durability::Low);
    assert_eq!(db.get::<Tolerant>(&()).unwrap(), 10);
    assert!(events.executed().is_empty());

    // A dependency that held a value and now fails while `tolerant` is being verified:
    // `tolerant` runs again and handles the failure, as a from-scratch run would.
    db.set_input::<Link>(1, 13, Durability::Low);
    assert_eq!(db.get::<Tolerant>(&()).unwrap(), 106);
    assert_eq!(
        events.executed(),
        vec!["fragile(1)", "tolerant(())", "fragile(1)"]
    );
}
