//! Executing a query: running the user's function under a fresh read-recording frame,
//! catching panics, then storing the value with its revisions (backdated when equal).

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::Ordering;

use crate::active;
use crate::database::Database;
use crate::derived::DerivedTable;
use crate::error::QueryError;
use crate::event::EventKind;
use crate::ingredient::invariant_broken;
use crate::memo::{verified_at_of, DerivedSlot, PRESENT};
use crate::query::Query;
use crate::revision::Revision;
use crate::sync::Failure;

impl<Q: Query<C>, C: Send + Sync + 'static> DerivedTable<Q, C> {
    /// Runs `Q::execute` for the key at `index` and stores the result; returns a copy of
    /// the value.
    ///
    /// Preconditions: this thread holds the memo's claim (see `sync.rs`); `verified_at` is
    /// the revision the memo was last verified at (`NEVER` if it was never computed).
    pub(crate) fn execute(
        &self,
        db: &Database<C>,
        index: u32,
        slot: &DerivedSlot<Q::Value>,
        verified_at: Revision,
    ) -> Result<Q::Value, Failure> {
        match self.execute_and_store(db, index, slot, verified_at, true)? {
            Some(value) => Ok(value),
            None => invariant_broken("an execution asked for its value kept none"),
        }
    }

    /// Runs `Q::execute` and stores the result, keeping no copy: what a verification
    /// needs, which reads only `changed_at` afterwards. (A copy would be one more value
    /// whose `Drop`, user code, runs under the claim.)
    ///
    /// Preconditions: as for [`DerivedTable::execute`].
    pub(crate) fn execute_in_place(
        &self,
        db: &Database<C>,
        index: u32,
        slot: &DerivedSlot<Q::Value>,
        verified_at: Revision,
    ) -> Result<(), Failure> {
        self.execute_and_store(db, index, slot, verified_at, false)
            .map(drop)
    }

    /// `copy`: whether the caller wants a copy of the value (else `Ok(None)`).
    fn execute_and_store(
        &self,
        db: &Database<C>,
        index: u32,
        slot: &DerivedSlot<Q::Value>,
        verified_at: Revision,
        copy: bool,
    ) -> Result<Option<Q::Value>, Failure> {
        // The listener is user code too: its panic fails this attempt, like `execute`'s.
        db.emit_contained(EventKind::WillExecute, self.edge(index))?;
        active::begin_attempt();
        let (outcome, reads) = active::record_reads(db.id, || {
            panic::catch_unwind(AssertUnwindSafe(|| Q::execute(db, self.key(index))))
        });
        // The cycle rule: an execution that took part in a cycle fails with it, even if
        // it handled the error and returned a value (see the crate documentation).
        if let Some(cycle) = active::take_cycle_mark() {
            if let Ok(Ok(value)) = outcome {
                drop_contained(value);
            }
            return Err(Box::new(cycle));
        }
        let value = match outcome {
            Ok(Ok(value)) => value,
            Ok(Err(error)) => return Err(Box::new(error)),
            Err(payload) => return Err(self.contained_panic(db, index, &*payload)),
        };
        let current = db.current_revision();
        let was_untracked = slot.is_untracked();
        // After a failed attempt, readers may have handled the failure: the value counts
        // as new, so that they run again.
        let failed_before = slot.has_failed();
        let mut changed_at = if reads.untracked || failed_before {
            current
        } else if verified_at == Revision::NEVER {
            reads.changed_at
        } else {
            // The value may differ from what dependents read at `verified_at` or earlier.
            reads.changed_at.max(verified_at.next())
        };
        // Everything of the user's that the commit needs (`eq` or `fingerprint` for
        // backdating, `clone`, `size_bytes`) runs before it and is contained like
        // `execute`: a panic here leaves the memo as it was and becomes the fetch's error.
        let prepared = panic::catch_unwind(AssertUnwindSafe(|| {
            let backdated = verified_at != Revision::NEVER
                && verified_at != current
                && !failed_before
                && self.can_backdate(index, slot, &value, slot.durability(), reads.durability);
            // SAFETY: we hold the claim.
            let old_size = unsafe { slot.claimed_value() }.map(Q::size_bytes);
            let copied = copy.then(|| value.clone());
            (backdated, copied, Q::size_bytes(&value), old_size)
        }));
        let (backdated, copied, new_size, old_size) = match prepared {
            Ok(prepared) => prepared,
            Err(payload) => {
                let failure = self.contained_panic(db, index, &*payload);
                drop_contained(value);
                return Err(failure);
            }
        };
        if backdated {
            changed_at = slot.changed_at();
        }
        loop {
            let stamp = slot.stamp.load(Ordering::Acquire);
            if verified_at_of(stamp) == current {
                return self.keep_verified(db, index, slot, stamp, value, copied, new_size);
            }
            if slot.begin_commit(stamp) {
                break;
            }
        }
        // The commit: no user code runs between `BUSY` and the published stamp.
        if let Some(retired) = slot.replace_edges(reads.edges) {
            self.retired_edges.lock().push(retired);
        }
        slot.set_history(changed_at, reads.durability, reads.untracked);
        // SAFETY: we hold the claim and set `BUSY`, so the stamp is not `current | PRESENT`.
        let old = unsafe { slot.publish_value(value, current) };
        self.account(index, old_size, was_untracked, new_size, reads.untracked);
        // The old value's `Drop` is user code too. The new value is committed by now and
        // this fetch succeeded: a panic there is absorbed, as during eviction (failing the
        // fetch would hand an error to waiters for a memo that holds a valid value).
        if let Some(payload) = old.and_then(drop_contained) {
            drop_contained(payload);
        }
        // After the publication, so that a listener reading the memo sees the new value.
        // Its listener's panic is absorbed like that `Drop`'s: the commit stands.
        if backdated {
            let _ = db.emit_contained(EventKind::Backdated, self.edge(index));
        }
        Ok(copied)
    }

    /// The end of an execution whose memo is already verified at the current revision
    /// (stamp `stamp`): it was verified and then evicted (explicit `evict`), or an
    /// unclaimed verifier proved it valid while it ran. Its edges and revisions stand,
    /// since dependents may have read them; only a missing value is filled in.
    ///
    /// Preconditions: this thread holds the memo's claim (see `sync.rs`).
    #[allow(clippy::too_many_arguments)]
    fn keep_verified(
        &self,
        db: &Database<C>,
        index: u32,
        slot: &DerivedSlot<Q::Value>,
        stamp: u64,
        value: Q::Value,
        copied: Option<Q::Value>,
        new_size: usize,
    ) -> Result<Option<Q::Value>, Failure> {
        let current = verified_at_of(stamp);
        if stamp & PRESENT != 0 {
            // Both are duplicates of the memo's valid value: a panic in their `Drop` is
            // absorbed, as for a replaced value (failing the fetch would hand waiters an
            // error for a memo that holds a valid value).
            let copy = copied.is_some();
            for payload in [drop_contained(value), copied.and_then(drop_contained)]
                .into_iter()
                .flatten()
            {
                drop_contained(payload);
            }
            if !copy {
                return Ok(None);
            }
            // SAFETY: we observed `stamp == current | PRESENT`.
            return self
                .clone_contained(db, index, unsafe { slot.value_unchecked() })
                .map(Some);
        }
        let was_untracked = slot.is_untracked();
        // SAFETY: we hold the claim; the stamp is `current` without a value, which only
        // the claim holder changes.
        let old = unsafe { slot.publish_value(value, current) };
        debug_assert!(old.is_none());
        self.account(index, None, was_untracked, new_size, was_untracked);
        Ok(copied)
    }

    /// A clone of `value` (user code) for a claim holder: a panic becomes an error.
    pub(crate) fn clone_contained(
        &self,
        db: &Database<C>,
        index: u32,
        value: &Q::Value,
    ) -> Result<Q::Value, Failure> {
        panic::catch_unwind(AssertUnwindSafe(|| value.clone()))
            .map_err(|payload| self.contained_panic(db, index, &*payload))
    }

    /// The error for a panic caught in this query's user code.
    #[cold]
    fn contained_panic(&self, db: &Database<C>, index: u32, payload: &(dyn Any + Send)) -> Failure {
        Box::new(QueryError::Panicked {
            frame: db.frame_of(self.edge(index)),
            message: panic_message(payload),
        })
    }
}

/// Drops `value` (its `Drop` is user code), returning the payload if that panicked.
pub(crate) fn drop_contained<T>(value: T) -> Option<Box<dyn Any + Send>> {
    panic::catch_unwind(AssertUnwindSafe(move || drop(value))).err()
}

/// The text of a panic payload, when it is a string.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}
