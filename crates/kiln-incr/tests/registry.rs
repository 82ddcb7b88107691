//! The registry of query and input tables: with more query types than the per-database
//! type cache has entries (so some types share an entry and fall back to the registry's
//! index), every type still reaches its own table, its own memos and its own edges; and
//! integer keys in patterns that defeat an order-keeping index still intern correctly.

mod common;

use common::EventLog;
use kiln_incr::{Database, Durability, Input, Query, QueryError};

struct Number;
impl Input for Number {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "number";
}

/// `number(key) * 1000 + N`: each `N` is a distinct query type with its own table.
struct Tagged<const N: u64>;
impl<const N: u64> Query for Tagged<N> {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "tagged";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        Ok(db.input::<Number>(key).unwrap_or(0) * 1000 + N)
    }
}

/// Runs `$body` with `Tagged<N>` as `$query` and `N` as `$n` for N in 0..80 (more types
/// than the type cache has entries).
macro_rules! for_each_tagged {
    ($query:ident, $n:ident => $body:block) => {
        for_each_tagged!(@ $query $n $body; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19
            20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46
            47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73
            74 75 76 77 78 79);
    };
    (@ $query:ident $n:ident $body:block; $($value:literal)*) => {
        $({
            type $query = Tagged<$value>;
            let $n: u64 = $value;
            $body
        })*
    };
}

#[test]
fn many_query_types_each_reach_their_own_table() {
    let mut db = Database::default();
    let events = EventLog::attach(&mut db);
    db.set_input::<Number>(7, 3, Durability::Low);
    let mut types = 0;
    for_each_tagged!(Q, n => {
        assert_eq!(db.get::<Q>(&7).unwrap(), 3000 + n);
        types += 1;
    });
    assert_eq!(types, 80);
    assert_eq!(events.executed().len(), 80, "each type executes once");

    // Second pass in the same revision: all hits, from whichever path finds the table.
    for_each_tagged!(Q, n => {
        assert_eq!(db.get::<Q>(&7).unwrap(), 3000 + n);
        assert_eq!(db.query::<Q>().get(&7).unwrap(), 3000 + n);
        assert_eq!(db.memo_stats::<Q>().keys, 1);
    });
    assert!(events.executed().is_empty(), "a cached fetch executed");

    // An edit reaches every type's memo through its edge.
    db.set_input::<Number>(7, 4, Durability::Low);
    for_each_tagged!(Q, n => {
        assert_eq!(db.get::<Q>(&7).unwrap(), 4000 + n);
    });
    assert_eq!(events.executed().len(), 80);
}

/// `number(key)` for any `u64` key (the input is keyed by the low 32 bits).
struct Wide;
impl Query for Wide {
    type Key = u64;
    type Value = u64;
    const NAME: &'static str = "wide";
    fn execute(db: &Database, key: &u64) -> Result<u64, QueryError> {
        Ok(db.input::<Number>(&(*key as u32)).unwrap_or(0) + (key >> 32))
    }
}

#[test]
fn strided_and_high_bit_integer_keys_intern_and_read_back() {
    let mut db = Database::default();
    let events = EventLog::attach(&mut db);
    // Keys that collide in their low bits: multiples of 2^20, and values that differ only
    // above bit 32. An index placing integer keys by their low bits must cope with both.
    let strided: Vec<u64> = (0..3000u64).map(|k| k << 20).collect();
    let high: Vec<u64> = (0..3000u64).map(|k| (k << 32) | 5).collect();
    for k in 0..3000u32 {
        db.set_input::<Number>(k << 20, u64::from(k), Durability::Low);
    }
    db.set_input::<Number>(5, 9, Durability::Low);
    for (i, key) in strided.iter().enumerate() {
        assert_eq!(db.get::<Wide>(key).unwrap(), i as u64);
    }
    for (i, key) in high.iter().enumerate() {
        assert_eq!(db.get::<Wide>(key).unwrap(), 9 + i as u64);
    }
    assert_eq!(events.executed().len(), 6000);
    assert_eq!(db.memo_stats::<Wide>().keys, 6000);
    // Every key is found again (no execution), in reverse order for good measure.
    for key in strided.iter().chain(&high).rev() {
        assert!(db.peek::<Wide>(key).is_some(), "key {key:#x} lost");
    }
    assert!(events.executed().is_empty());
}

/// Queries and inputs keyed by one type share its key ids (one interner), and each query's
/// memos live in pages by those ids: a query still knows exactly the memos it fetched, not
/// the keys others interned or the fresh slots of its pages, and its LRU bound is its own.
#[test]
fn queries_sharing_a_key_type_keep_their_own_memos() {
    let mut db = Database::default();
    let events = EventLog::attach(&mut db);
    for key in 0..100u32 {
        db.set_input::<Number>(key, u64::from(key), Durability::Low);
    }
    for key in 0..10u32 {
        assert_eq!(db.get::<Tagged<0>>(&key), Ok(u64::from(key) * 1000));
    }
    assert_eq!(db.get::<Tagged<1>>(&50), Ok(50_001));
    assert_eq!(events.executed().len(), 11);
    assert_eq!(db.memo_stats::<Tagged<0>>().keys, 10);
    assert_eq!(db.memo_stats::<Tagged<1>>().keys, 1);
    assert!(db.memo_info::<Tagged<0>>(&50).is_none());
    assert!(
        db.memo_info::<Tagged<0>>(&11).is_none(),
        "a fresh slot of a page"
    );
    assert!(db.peek::<Tagged<1>>(&3).is_none());
    assert!(db.memo_info::<Tagged<1>>(&50).is_some());
    // A key no input or query saw before.
    assert_eq!(db.get::<Tagged<1>>(&1_000_000), Ok(1));
    assert_eq!(events.executed().len(), 1);
    db.set_lru_capacity::<Tagged<0>>(4);
    db.synthetic_write(Durability::High);
    assert_eq!(db.memo_stats::<Tagged<0>>().values, 4);
    assert_eq!(
        db.memo_stats::<Tagged<0>>().keys,
        10,
        "eviction keeps the memos"
    );
    assert_eq!(db.memo_stats::<Tagged<1>>().values, 2);
    for key in 0..10u32 {
        assert_eq!(db.get::<Tagged<0>>(&key), Ok(u64::from(key) * 1000));
    }
    assert_eq!(db.get::<Tagged<1>>(&50), Ok(50_001));
    assert_eq!(
        events.executed().len(),
        6,
        "only the evicted values ran again"
    );
}
