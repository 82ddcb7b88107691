//! LRU: eviction keeps dependency information (seed 003), capacities by count and bytes.

mod common;

use std::sync::Arc;

use common::{EventLog, HotPotato, LogContext};
use kiln_incr::{Database, Durability, EventKind, Input, Query, QueryError};

struct MyInput;
impl Input for MyInput {
    type Key = u32;
    type Value = u32;
    const NAME: &'static str = "my_input";
}

struct GetHotPotato;
impl Query<LogContext> for GetHotPotato {
    type Key = u32;
    type Value = Arc<HotPotato>;
    const NAME: &'static str = "get_hot_potato";
    fn execute(db: &Database<LogContext>, input: &u32) -> Result<Arc<HotPotato>, QueryError> {
        let field = db.input::<MyInput>(input).unwrap_or(u32::MAX);
        db.context().push_log(format!("get_hot_potato({field})"));
        Ok(Arc::new(HotPotato::new(field, &db.context().live)))
    }
}

struct GetHotPotato2;
impl Query<LogContext> for GetHotPotato2 {
    type Key = u32;
    type Value = u32;
    const NAME: &'static str = "get_hot_potato2";
    fn execute(db: &Database<LogContext>, input: &u32) -> Result<u32, QueryError> {
        let field = db.input::<MyInput>(input).unwrap_or(u32::MAX);
        db.context().push_log(format!("get_hot_potato2({field})"));
        Ok(db.get::<GetHotPotato>(input)?.id)
    }
}

fn database_with_inputs(count: u32) -> Database<LogContext> {
    let mut db = Database::new(LogContext::default());
    for i in 0..count {
        db.set_input::<MyInput>(i, i, Durability::Low);
    }
    db
}

#[test]
fn lru_keeps_dependency_info() {
    let capacity = 3u32;
    let mut db = database_with_inputs(capacity + 1);
    db.set_lru_capacity::<GetHotPotato>(capacity as usize);

    for i in 0..=capacity {
        assert_eq!(db.get::<GetHotPotato2>(&i).unwrap(), i);
    }

    db.synthetic_write(Durability::High);

    assert_eq!(db.context().take_logs().len(), (capacity as usize + 1) * 2);
    // The boundary evicted the least recently used inner value: input 0's.
    assert_eq!(db.context().live(), capacity as usize);
    assert!(!db.memo_info::<GetHotPotato>(&0).unwrap().has_value);

    // `get_hot_potato2(0)` must check `get_hot_potato(0)`; although its value was evicted,
    // its edges show it is still good, so nothing executes.
    assert_eq!(db.get::<GetHotPotato2>(&0).unwrap(), 0);
    assert_eq!(db.context().take_logs(), Vec::<String>::new());
}

#[test]
fn capacity_bounds_live_values_after_the_next_revision() {
    let mut db = database_with_inputs(32);
    db.set_lru_capacity::<GetHotPotato>(8);
    for i in 0..32 {
        assert_eq!(db.get::<GetHotPotato>(&i).unwrap().id, i);
    }
    // Eviction waits for the revision boundary.
    assert_eq!(db.context().live(), 32);
    db.synthetic_write(Durability::Low);
    assert_eq!(db.context().live(), 8);
    assert_eq!(db.memo_stats::<GetHotPotato>().values, 8);
    // The 8 most recently used survive.
    for i in 0..32 {
        assert_eq!(
            db.memo_info::<GetHotPotato>(&i).unwrap().has_value,
            i >= 24,
            "key {i}"
        );
    }
}

#[test]
fn capacity_changes_at_run_time() {
    let mut db = database_with_inputs(32);
    db.set_lru_capacity::<GetHotPotato>(8);
    let fetch_all = |db: &Database<LogContext>| {
        for i in 0..32 {
            assert_eq!(db.get::<GetHotPotato>(&i).unwrap().id, i);
        }
    };
    fetch_all(&db);
    db.synthetic_write(Durability::Low);
    assert_eq!(db.context().live(), 8);

    db.set_lru_capacity::<GetHotPotato>(16);
    fetch_all(&db);
    db.synthetic_write(Durability::Low);
    assert_eq!(db.context().live(), 16);

    db.set_lru_capacity::<GetHotPotato>(0);
    fetch_all(&db);
    db.synthetic_write(Durability::Low);
    assert_eq!(db.context().live(), 32);
    db.synthetic_write(Durability::Low);
    assert_eq!(db.context().live(), 32);
}

#[test]
fn evicted_values_are_recomputed_only_when_asked_for() {
    let mut db = database_with_inputs(4);
    let events = EventLog::attach(&mut db);
    db.set_lru_capacity::<GetHotPotato>(1);
    for i in 0..4 {
        db.get::<GetHotPotato>(&i).unwrap();
    }
    events.take();
    db.synthetic_write(Durability::Low);
    let evicted = events.take_kind(EventKind::Evicted);
    assert_eq!(evicted.len(), 3);
    assert!(!evicted.contains(&"get_hot_potato(3)".to_string()));

    assert_eq!(db.get::<GetHotPotato>(&3).unwrap().id, 3);
    assert_eq!(events.executed(), Vec::<String>::new());
    assert_eq!(db.get::<GetHotPotato>(&0).unwrap().id, 0);
    assert_eq!(events.executed(), vec!["get_hot_potato(0)"]);
}

#[test]
fn explicit_evict_within_a_revision_refills_on_demand() {
    let mut db = database_with_inputs(4);
    db.set_lru_capacity::<GetHotPotato>(2);
    for i in 0..4 {
        db.get::<GetHotPotato2>(&i).unwrap();
    }
    db.context().take_logs();
    let revision = db.revision();
    db.evict();
    assert_eq!(db.revision(), revision);
    assert_eq!(db.context().live(), 2);
    // The outer memos are still verified; only the evicted inner value is recomputed.
    assert_eq!(db.get::<GetHotPotato2>(&0).unwrap(), 0);
    assert_eq!(db.context().take_logs(), Vec::<String>::new());
    assert_eq!(db.get::<GetHotPotato>(&0).unwrap().id, 0);
    assert_eq!(db.context().take_logs(), vec!["get_hot_potato(0)"]);
}

/// A value of `key * 100` bytes.
struct Blob;
impl Query<LogContext> for Blob {
    type Key = usize;
    type Value = Vec<u8>;
    const NAME: &'static str = "blob";
    fn execute(db: &Database<LogContext>, key: &usize) -> Result<Vec<u8>, QueryError> {
        db.context().push_log(format!("blob({key})"));
        Ok(vec![0; key * 100])
    }
    fn size_bytes(value: &Vec<u8>) -> usize {
        value.len()
    }
}

#[test]
fn byte_budget_evicts_oldest_values_by_size() {
    let mut db = Database::new(LogContext::default());
    let events = EventLog::attach(&mut db);
    db.set_lru_bytes::<Blob>(1000);
    for key in [4, 3, 2, 5] {
        db.get::<Blob>(&key).unwrap();
    }
    assert_eq!(db.memo_stats::<Blob>().value_bytes, 1400);
    events.take();
    db.synthetic_write(Durability::Low);
    // Newest first: 500 + 200 + 300 = 1000 fit; the oldest (400 bytes) goes.
    assert_eq!(events.take_kind(EventKind::Evicted), vec!["blob(4)"]);
    let stats = db.memo_stats::<Blob>();
    assert_eq!((stats.values, stats.value_bytes), (3, 1000));

    // A large value pushes out everything older than it that no longer fits.
    db.get::<Blob>(&9).unwrap();
    db.synthetic_write(Durability::Low);
    let mut evicted = events.take_kind(EventKind::Evicted);
    evicted.sort();
    assert_eq!(evicted, vec!["blob(2)", "blob(3)", "blob(5)"]);
    assert_eq!(db.memo_stats::<Blob>().value_bytes, 900);
}

struct Untracked;
impl Query<LogContext> for Untracked {
    type Key = u32;
    type Value = u32;
    const NAME: &'static str = "untracked";
    fn execute(db: &Database<LogContext>, key: &u32) -> Result<u32, QueryError> {
        db.report_untracked_read();
        db.context().push_log(format!("untracked({key})"));
        Ok(*key)
    }
}

#[test]
fn untracked_memos_are_never_evicted_and_rerun_each_revision() {
    let mut db = Database::new(LogContext::default());
    db.set_lru_capacity::<Untracked>(1);
    for key in 0..3 {
        db.get::<Untracked>(&key).unwrap();
    }
    assert_eq!(db.context().take_logs().len(), 3);
    // Same revision: memoized.
    db.get::<Untracked>(&0).unwrap();
    assert!(db.context().take_logs().is_empty());

    db.synthetic_write(Durability::High);
    for key in 0..3 {
        let info = db.memo_info::<Untracked>(&key).unwrap();
        assert!(info.has_value && info.untracked, "key {key}: {info:?}");
    }
    db.get::<Untracked>(&1).unwrap();
    assert_eq!(db.context().take_logs(), vec!["untracked(1)"]);
}
