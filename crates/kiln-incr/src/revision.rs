//! Revisions: the logical clock of the database, and the per-durability table of when
//! each durability level last saw a change.

use crate::durability::Durability;

/// A logical time: a new revision begins each time an input changes (or on
/// [`Database::synthetic_write`](crate::Database::synthetic_write)).
///
/// Revision 0 means "never"; the first revision of a database is 1.
///
/// Revisions are 60-bit numbers (a memo keeps flag bits above them): at a billion
/// revisions a second a database would take 36 years to run out. If it ever did,
/// [`Revision::next`] panics rather than reuse or repeat a revision: a revision that stops
/// increasing would hide every later change.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Revision(u64);

impl Revision {
    /// "Never": no memo is ever verified at this revision.
    pub(crate) const NEVER: Revision = Revision(0);
    /// The first revision of a fresh database.
    pub(crate) const START: Revision = Revision(1);

    /// The highest revision: a memo keeps flag bits above it.
    pub(crate) const MAX: Revision = Revision((1 << 60) - 1);

    /// The revision as a plain number (stable, suitable for serialization).
    pub fn as_u64(self) -> u64 {
        self.0
    }

    /// Rebuilds a revision from [`Revision::as_u64`] (bits above the 60th are dropped).
    pub fn from_u64(raw: u64) -> Self {
        Revision(raw & Self::MAX.0)
    }

    pub(crate) fn next(self) -> Revision {
        // Never saturate: a clock that stops would make every later change invisible.
        if self >= Self::MAX {
            revisions_exhausted();
        }
        Revision(self.0 + 1)
    }
}

/// 2^60 revisions have passed: unreachable in practice (36 years at 10^9 a second).
#[cold]
#[inline(never)]
fn revisions_exhausted() -> ! {
    panic!("kiln-incr: the revision clock is exhausted (2^60 revisions)")
}

/// For each durability, the last revision in which an input of that durability (or a
/// higher one) changed. A memo whose durability is `d` and that was verified at or after
/// `last_changed[d]` is still valid without looking at its edges (shallow verify).
#[derive(Clone, Debug)]
pub(crate) struct DurabilityClock {
    current: Revision,
    last_changed: [Revision; Durability::COUNT],
}

impl DurabilityClock {
    pub(crate) fn new() -> Self {
        DurabilityClock {
            current: Revision::START,
            last_changed: [Revision::START; Durability::COUNT],
        }
    }

    pub(crate) fn current(&self) -> Revision {
        self.current
    }

    pub(crate) fn last_changed(&self, durability: Durability) -> Revision {
        self.last_changed[durability.index()]
    }

    /// Moves the clock to `revision` as if that many revisions had passed without a
    /// change (a test hook: crossing old limits without looping billions of times).
    #[cfg(test)]
    pub(crate) fn jump_to(&mut self, revision: Revision) {
        assert!(revision >= self.current);
        self.current = revision;
    }

    /// Starts a new revision in which an input of `durability` changed. A change to a
    /// high-durability input may be read by memos of any durability (their durability is
    /// the minimum over their reads), so every level at or below it is bumped.
    pub(crate) fn new_revision(&mut self, durability: Durability) -> Revision {
        self.current = self.current.next();
        for level in Durability::ALL {
            if level <= durability {
                self.last_changed[level.index()] = self.current;
            }
        }
        self.current
    }
}

#[cfg(test)]
mod tests {
    use crate::{Database, Durability, Input, Query, QueryError, Revision};

    struct Text;
    impl Input for Text {
        type Key = u8;
        type Value = u64;
        const NAME: &'static str = "text";
    }

    struct Double;
    impl Query for Double {
        type Key = u8;
        type Value = u64;
        const NAME: &'static str = "double";
        fn execute(db: &Database, key: &u8) -> Result<u64, QueryError> {
            Ok(db.input::<Text>(key).unwrap_or(0) * 2)
        }
    }

    /// Issue 10, defect 2: revisions were 30 bits and saturated, so past 2^30 - 1 an
    /// input change no longer started a newer revision and reads kept the old value.
    /// Every change is seen across the old 30-bit and 32-bit limits.
    #[test]
    fn changes_are_seen_past_the_old_revision_limits() {
        let mut db = Database::default();
        db.set_input::<Text>(1, 1, Durability::Low);
        db.set_input::<Text>(2, 1, Durability::High);
        assert_eq!(db.get::<Double>(&1), Ok(2));
        assert_eq!(db.get::<Double>(&2), Ok(2));
        for limit in [1u64 << 30, 1 << 32] {
            db.clock.jump_to(Revision::from_u64(limit - 3));
            for step in 0..6u64 {
                let value = limit + step;
                db.set_input::<Text>(1, value, Durability::Low);
                assert_eq!(
                    db.get::<Double>(&1),
                    Ok(value * 2),
                    "limit {limit}, step {step}"
                );
                assert_eq!(db.get::<Double>(&2), Ok(2));
            }
            assert!(db.revision() > Revision::from_u64(limit));
        }
        db.set_input::<Text>(2, 5, Durability::High);
        assert_eq!(db.get::<Double>(&2), Ok(10));
    }
}
