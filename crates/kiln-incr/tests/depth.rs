//! Issue 10: no depth limit. A chain a million queries deep builds, is edited at the
//! bottom (once with a value that changes, once with one that is backdated), and is
//! verified again, all on a thread with a 2 MiB stack (kiln used to overflow at about
//! 2,100 levels on such a thread, 8,800 on an 8 MiB main thread, as salsa does).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kiln_incr::{Database, Durability, Input, Query, QueryError};

/// Levels of the chain: `KILN_DEPTH_TEST_LEVELS` or a million.
fn levels() -> u32 {
    std::env::var("KILN_DEPTH_TEST_LEVELS")
        .ok()
        .and_then(|levels| levels.parse().ok())
        .unwrap_or(1_000_000)
}

struct Bottom;
impl Input for Bottom {
    type Key = ();
    type Value = u64;
    const NAME: &'static str = "bottom";
}

/// `link(0) = bottom / 2`, `link(n) = link(n - 1) + 1`.
struct Link;
impl Query<Arc<AtomicUsize>> for Link {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "link";
    fn execute(db: &Database<Arc<AtomicUsize>>, n: &u32) -> Result<u64, QueryError> {
        db.context().fetch_add(1, Ordering::Relaxed);
        if *n == 0 {
            return Ok(db.input::<Bottom>(&()).unwrap_or(0) / 2);
        }
        Ok(db.get::<Link>(&(n - 1))? + 1)
    }
}

#[test]
fn a_million_deep_chain_builds_and_reverifies_on_a_2_mib_thread() {
    let worker = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let top = levels() - 1;
            let runs = Arc::new(AtomicUsize::new(0));
            let mut db = Database::new(Arc::clone(&runs));
            db.set_input::<Bottom>((), 10, Durability::Low);
            assert_eq!(db.get::<Link>(&top), Ok(5 + u64::from(top)));
            assert_eq!(runs.swap(0, Ordering::Relaxed), levels() as usize);

            // A new bottom value: every level runs again (the verification walks down
            // the whole chain first, then each level executes on the way up).
            db.set_input::<Bottom>((), 20, Durability::Low);
            assert_eq!(db.get::<Link>(&top), Ok(10 + u64::from(top)));
            assert_eq!(runs.swap(0, Ordering::Relaxed), levels() as usize);

            // The same half: `link(0)` runs, is backdated, and every other level is
            // verified without running.
            db.set_input::<Bottom>((), 21, Durability::Low);
            assert_eq!(db.get::<Link>(&top), Ok(10 + u64::from(top)));
            assert_eq!(runs.swap(0, Ordering::Relaxed), 1);

            // Nothing changed below: deep verification of the whole chain, no run.
            db.synthetic_write(Durability::Low);
            assert_eq!(db.get::<Link>(&top), Ok(10 + u64::from(top)));
            assert_eq!(runs.swap(0, Ordering::Relaxed), 0);
        })
        .expect("spawn the 2 MiB thread");
    worker.join().expect("the deep chain failed");
}
