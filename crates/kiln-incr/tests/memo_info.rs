//! `Database::memo_info` exposes a memo's dependency edges (for a later `kiln explain`).

use kiln_incr::{Database, Durability, Input, Query, QueryError, QueryFrame};

struct Setting;
impl Input for Setting {
    type Key = &'static str;
    type Value = u32;
    const NAME: &'static str = "setting";
}

/// `setting(name) * 2`.
struct Double;
impl Query for Double {
    type Key = &'static str;
    type Value = u32;
    const NAME: &'static str = "double";
    fn execute(db: &Database, name: &&'static str) -> Result<u32, QueryError> {
        Ok(db.input::<Setting>(name).unwrap_or(0) * 2)
    }
}

/// Reads `setting("mode")`; in mode 1 also `double("a")` (twice) and `setting("b")`.
struct Report;
impl Query for Report {
    type Key = ();
    type Value = u32;
    const NAME: &'static str = "report";
    fn execute(db: &Database, _: &()) -> Result<u32, QueryError> {
        if db.input::<Setting>(&"mode") != Some(1) {
            return Ok(0);
        }
        let a = db.get::<Double>(&"a")? + db.get::<Double>(&"a")?;
        Ok(a + db.input::<Setting>(&"b").unwrap_or(0))
    }
}

fn frame(query: &'static str, key: &str) -> QueryFrame {
    QueryFrame {
        query,
        key: key.to_string(),
    }
}

#[test]
fn memo_info_lists_dependencies_in_read_order_and_follows_reexecution() {
    let mut db = Database::default();
    assert_eq!(db.memo_info::<Report>(&()), None);
    db.set_input::<Setting>("mode", 1, Durability::Low);
    db.set_input::<Setting>("a", 3, Durability::Low);
    assert_eq!(db.get::<Report>(&()), Ok(12));
    let info = db.memo_info::<Report>(&()).expect("fetched");
    assert_eq!(
        info.dependencies,
        vec![
            frame("setting", "\"mode\""),
            frame("double", "\"a\""),
            frame("setting", "\"b\""),
        ]
    );
    assert_eq!(
        db.memo_info::<Double>(&"a").map(|info| info.dependencies),
        Some(vec![frame("setting", "\"a\"")])
    );

    // A re-execution that reads less replaces the edges.
    db.set_input::<Setting>("mode", 2, Durability::Low);
    assert_eq!(db.get::<Report>(&()), Ok(0));
    assert_eq!(
        db.memo_info::<Report>(&()).map(|info| info.dependencies),
        Some(vec![frame("setting", "\"mode\"")])
    );

    // Eviction keeps the edges (only the value goes).
    db.set_lru_capacity::<Double>(1);
    db.set_input::<Setting>("z", 1, Durability::Low);
    assert_eq!(db.get::<Double>(&"z"), Ok(2));
    db.synthetic_write(Durability::Low);
    let evicted = db.memo_info::<Double>(&"a").expect("fetched");
    assert!(!evicted.has_value);
    assert_eq!(evicted.dependencies, vec![frame("setting", "\"a\"")]);
}
