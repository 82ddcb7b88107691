//! Verification: early cutoff (also after eviction), durability, inputs that change,
//! disappear or are set to an equal value.

mod common;

use common::EventLog;
use kiln_incr::{Database, Durability, EventKind, Input, Query, QueryError};

struct Number;
impl Input for Number {
    type Key = u32;
    type Value = u32;
    const NAME: &'static str = "number";
}

/// `number(k) / 10`: many inputs give the same value.
struct Tens;
impl Query for Tens {
    type Key = u32;
    type Value = u32;
    const NAME: &'static str = "tens";
    fn execute(db: &Database, key: &u32) -> Result<u32, QueryError> {
        Ok(db.input::<Number>(key).unwrap_or(0) / 10)
    }
}

/// `tens(k) + 1`.
struct TensPlusOne;
impl Query for TensPlusOne {
    type Key = u32;
    type Value = u32;
    const NAME: &'static str = "tens_plus_one";
    fn execute(db: &Database, key: &u32) -> Result<u32, QueryError> {
        Ok(db.get::<Tens>(key)? + 1)
    }
}

#[test]
fn equal_value_is_backdated_and_dependents_do_not_rerun() {
    let mut db = Database::default();
    let events = EventLog::attach(&mut db);
    db.set_input::<Number>(0, 5, Durability::Low);
    assert_eq!(db.get::<TensPlusOne>(&0).unwrap(), 1);
    events.take();

    db.set_input::<Number>(0, 7, Durability::Low);
    assert_eq!(db.get::<TensPlusOne>(&0).unwrap(), 1);
    let log = events.take();
    assert!(log.contains(&"Backdated tens(0)".to_string()), "{log:?}");
    let executed: Vec<_> = log
        .iter()
        .filter(|line| line.starts_with("WillExecute"))
        .collect();
    assert_eq!(executed, vec!["WillExecute tens(0)"]);

    db.set_input::<Number>(0, 42, Durability::Low);
    assert_eq!(db.get::<TensPlusOne>(&0).unwrap(), 5);
    assert_eq!(events.executed(), vec!["tens(0)", "tens_plus_one(0)"]);
}

#[test]
fn early_cutoff_after_eviction() {
    let mut db = Database::default();
    let events = EventLog::attach(&mut db);
    db.set_lru_capacity::<Tens>(1);
    db.set_input::<Number>(0, 5, Durability::Low);
    db.set_input::<Number>(1, 15, Durability::Low);
    assert_eq!(db.get::<TensPlusOne>(&0).unwrap(), 1);
    assert_eq!(db.get::<TensPlusOne>(&1).unwrap(), 2);
    events.take();

    // The change is a revision boundary: `tens(0)` (least recently used) is evicted.
    db.set_input::<Number>(0, 7, Durability::Low);
    assert_eq!(events.take_kind(EventKind::Evicted), vec!["tens(0)"]);
    assert!(!db.memo_info::<Tens>(&0).unwrap().has_value);

    // `tens(0)` re-executes, its fingerprint matches the evicted value's: backdated, and
    // the outer query is not re-executed.
    assert_eq!(db.get::<TensPlusOne>(&0).unwrap(), 1);
    let log = events.take();
    let executed: Vec<_> = log
        .iter()
        .filter(|line| line.starts_with("WillExecute"))
        .collect();
    assert_eq!(executed, vec!["WillExecute tens(0)"], "{log:?}");
    assert!(log.contains(&"Backdated tens(0)".to_string()), "{log:?}");
}

#[test]
fn verifying_through_an_evicted_memo_executes_nothing() {
    let mut db = Database::default();
    let events = EventLog::attach(&mut db);
    db.set_lru_capacity::<Tens>(1);
    for key in 0..3 {
        db.set_input::<Number>(key, key * 10, Durability::Low);
        db.get::<TensPlusOne>(&key).unwrap();
    }
    db.set_input::<Number>(2, 99, Durability::Low);
    events.take();
    assert_eq!(db.get::<TensPlusOne>(&0).unwrap(), 1);
    let log = events.take();
    assert!(
        log.iter().all(|line| !line.starts_with("WillExecute")),
        "{log:?}"
    );
    assert!(
        log.contains(&"DidValidateMemoizedValue tens(0)".to_string()),
        "{log:?}"
    );
    assert!(
        !db.memo_info::<Tens>(&0).unwrap().has_value,
        "verified, still evicted"
    );
}

struct Setting;
impl Input for Setting {
    type Key = &'static str;
    type Value = u32;
    const NAME: &'static str = "setting";
}

/// Reads only a high-durability input.
struct FromSetting;
impl Query for FromSetting {
    type Key = &'static str;
    type Value = u32;
    const NAME: &'static str = "from_setting";
    fn execute(db: &Database, key: &&'static str) -> Result<u32, QueryError> {
        Ok(db.input::<Setting>(key).unwrap_or(0) * 2)
    }
}

/// Reads a high- and a low-durability input.
struct Mixed;
impl Query for Mixed {
    type Key = u32;
    type Value = u32;
    const NAME: &'static str = "mixed";
    fn execute(db: &Database, key: &u32) -> Result<u32, QueryError> {
        Ok(db.get::<FromSetting>(&"scale")? + db.input::<Number>(key).unwrap_or(0))
    }
}

#[test]
fn low_write_does_not_deep_verify_high_durability_memos() {
    let mut db = Database::default();
    let events = EventLog::attach(&mut db);
    db.set_input::<Setting>("scale", 3, Durability::High);
    db.set_input::<Number>(0, 1, Durability::Low);
    db.set_input::<Number>(1, 1, Durability::Low);
    assert_eq!(db.get::<Mixed>(&0).unwrap(), 7);
    assert_eq!(
        db.memo_info::<FromSetting>(&"scale").unwrap().durability,
        Durability::High
    );
    assert_eq!(
        db.memo_info::<Mixed>(&0).unwrap().durability,
        Durability::Low
    );
    events.take();

    db.set_input::<Number>(1, 2, Durability::Low);
    assert_eq!(db.get::<FromSetting>(&"scale").unwrap(), 6);
    assert_eq!(db.get::<Mixed>(&0).unwrap(), 7);
    let log = events.take();
    assert!(
        !log.iter()
            .any(|line| line.contains("DidDeepVerify from_setting")),
        "{log:?}"
    );
    assert!(log.contains(&"DidValidateMemoizedValue from_setting(\"scale\")".to_string()));
    // The low-durability memo is deep-verified and found valid (input 1 is not its input).
    assert!(
        log.contains(&"DidDeepVerify mixed(0)".to_string()),
        "{log:?}"
    );
    assert!(
        !log.iter().any(|line| line.starts_with("WillExecute")),
        "{log:?}"
    );

    // A high write does make the engine look at the high memo.
    db.synthetic_write(Durability::High);
    assert_eq!(db.get::<FromSetting>(&"scale").unwrap(), 6);
    assert!(events
        .take()
        .contains(&"DidDeepVerify from_setting(\"scale\")".to_string()));
}

#[test]
fn setting_an_equal_value_starts_no_revision() {
    let mut db = Database::default();
    let events = EventLog::attach(&mut db);
    db.set_input::<Number>(0, 5, Durability::Low);
    db.get::<TensPlusOne>(&0).unwrap();
    let revision = db.revision();
    events.take();
    db.set_input::<Number>(0, 5, Durability::Low);
    assert_eq!(db.revision(), revision);
    db.get::<TensPlusOne>(&0).unwrap();
    assert_eq!(events.take(), Vec::<String>::new());

    // A different durability is a change.
    db.set_input::<Number>(0, 5, Durability::High);
    assert!(db.revision() > revision);
}

#[test]
fn removed_and_late_inputs_invalidate_their_readers() {
    let mut db = Database::default();
    let events = EventLog::attach(&mut db);
    // Input 7 was never set: reading it is a dependency too.
    assert_eq!(db.get::<TensPlusOne>(&7).unwrap(), 1);
    db.set_input::<Number>(7, 70, Durability::High);
    events.take();
    assert_eq!(db.get::<TensPlusOne>(&7).unwrap(), 8);
    assert_eq!(events.executed(), vec!["tens(7)", "tens_plus_one(7)"]);

    db.remove_input::<Number>(&7);
    assert_eq!(db.input::<Number>(&7), None);
    assert_eq!(db.get::<TensPlusOne>(&7).unwrap(), 1);
    assert_eq!(events.executed(), vec!["tens(7)", "tens_plus_one(7)"]);

    // Removing a missing input is no change.
    let revision = db.revision();
    db.remove_input::<Number>(&7);
    db.remove_input::<Number>(&8);
    assert_eq!(db.revision(), revision);
}

#[test]
fn query_handle_fetches_like_get() {
    let mut db = Database::default();
    db.set_input::<Number>(3, 30, Durability::Low);
    let handle = db.query::<TensPlusOne>();
    assert_eq!(handle.get(&3).unwrap(), 4);
    assert_eq!(db.peek::<TensPlusOne>(&3), Some(4));
    assert_eq!(db.peek::<TensPlusOne>(&4), None);
    db.set_input::<Number>(3, 40, Durability::Low);
    assert_eq!(
        db.peek::<TensPlusOne>(&3),
        None,
        "not verified in the new revision"
    );
    assert_eq!(db.query::<TensPlusOne>().get(&3).unwrap(), 5);
}

/// Reads `number(k)` untracked and uses only its tens, which it records by reading `tens(k)`:
/// the pattern of a reader that depends on part of an input.
struct TensUntracked;
impl Query for TensUntracked {
    type Key = u32;
    type Value = u32;
    const NAME: &'static str = "tens_untracked";
    fn execute(db: &Database, key: &u32) -> Result<u32, QueryError> {
        let number = db.input_untracked::<Number>(key).unwrap_or(0);
        db.get::<Tens>(key)?;
        Ok(number / 10 * 100)
    }
}

#[test]
fn an_untracked_read_depends_only_on_what_the_reader_records() {
    let mut db = Database::default();
    let events = EventLog::attach(&mut db);
    db.set_input::<Number>(0, 5, Durability::Low);
    assert_eq!(db.get::<TensUntracked>(&0).unwrap(), 0);
    assert_eq!(
        db.memo_info::<TensUntracked>(&0)
            .unwrap()
            .dependencies
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec!["tens(0)".to_string()]
    );
    events.take();

    // The part read is unchanged: only `tens` runs, and is backdated.
    db.set_input::<Number>(0, 7, Durability::Low);
    assert_eq!(db.get::<TensUntracked>(&0).unwrap(), 0);
    assert_eq!(events.executed(), vec!["tens(0)"]);

    // It changed: the reader runs again and sees the new value.
    db.set_input::<Number>(0, 42, Durability::Low);
    assert_eq!(db.get::<TensUntracked>(&0).unwrap(), 400);
    assert_eq!(events.executed(), vec!["tens(0)", "tens_untracked(0)"]);

    // Outside a query, and for a key never set.
    assert_eq!(db.input_untracked::<Number>(&0), Some(42));
    assert_eq!(db.input_untracked::<Number>(&9), None);
}
