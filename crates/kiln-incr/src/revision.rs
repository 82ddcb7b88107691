//! Revisions: the logical clock of the database, and the per-durability table of when
//! each durability level last saw a change.

use crate::durability::Durability;

/// A logical time: a new revision begins each time an input changes (or on
/// [`Database::synthetic_write`](crate::Database::synthetic_write)).
///
/// Revision 0 means "never"; the first revision of a database is 1.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Revision(u32);

impl Revision {
    /// "Never": no memo is ever verified at this revision.
    pub(crate) const NEVER: Revision = Revision(0);
    /// The first revision of a fresh database.
    pub(crate) const START: Revision = Revision(1);

    /// The revision as a plain number (stable, suitable for serialization).
    pub fn as_u32(self) -> u32 {
        self.0
    }

    /// Rebuilds a revision from [`Revision::as_u32`].
    pub fn from_u32(raw: u32) -> Self {
        Revision(raw)
    }

    /// The highest revision: a memo's stamp keeps two flag bits above it.
    const MAX: Revision = Revision((1 << 30) - 1);

    pub(crate) fn next(self) -> Revision {
        // A billion revisions is more edits than any session makes; saturate rather than
        // wrap so that ordering stays sound.
        Revision(self.0.saturating_add(1).min(Self::MAX.0))
    }
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
