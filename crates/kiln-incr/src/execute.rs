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
use crate::memo::{verified_at_of, DerivedSlot, PRESENT};
use crate::query::Query;
use crate::revision::Revision;
use crate::sync::Failure;

impl<Q: Query<C>, C: Send + Sync + 'static> DerivedTable<Q, C> {
    /// Runs `Q::execute` for the key at `index` and stores the result.
    ///
    /// Preconditions: this thread holds `slot.claim`; `verified_at` is the revision the
    /// memo was last verified at (`NEVER` if it was never computed).
    pub(crate) fn execute(
        &self,
        db: &Database<C>,
        index: u32,
        slot: &DerivedSlot<Q::Key, Q::Value>,
        verified_at: Revision,
    ) -> Result<Q::Value, Failure> {
        db.emit(EventKind::WillExecute, Q::NAME, &slot.key);
        let (outcome, reads) = active::record_reads(db.id, || {
            panic::catch_unwind(AssertUnwindSafe(|| Q::execute(db, &slot.key)))
        });
        let value = match outcome {
            Ok(Ok(value)) => value,
            Ok(Err(error)) => return Err(Box::new(error)),
            Err(payload) => {
                return Err(Box::new(QueryError::Panicked {
                    frame: db.frame_of(self.edge(index)),
                    message: panic_message(&*payload),
                }))
            }
        };
        let current = db.current_revision();
        let was_untracked = slot.is_untracked();
        let mut changed_at = if reads.untracked {
            current
        } else if verified_at == Revision::NEVER {
            reads.changed_at
        } else {
            // The value may differ from what dependents read at `verified_at` or earlier.
            reads.changed_at.max(verified_at.next())
        };
        // Before the commit: this runs user code (`eq`, `fingerprint`), which may panic.
        let backdated = verified_at != Revision::NEVER
            && verified_at != current
            && self.can_backdate(index, slot, &value, slot.durability(), reads.durability);
        if backdated {
            changed_at = slot.changed_at();
        }
        // Also user code: cloned before the commit, which must not unwind half done.
        let stored = value.clone();
        loop {
            let stamp = slot.stamp.load(Ordering::Acquire);
            if verified_at_of(stamp) == current {
                return Ok(self.keep_verified(slot, stamp, stored, value, was_untracked));
            }
            if slot.begin_commit(stamp) {
                break;
            }
        }
        if backdated {
            db.emit(EventKind::Backdated, Q::NAME, &slot.key);
        }
        if let Some(retired) = slot.replace_edges(reads.edges) {
            self.retired_edges.lock().push(retired);
        }
        slot.changed_at
            .store(changed_at.as_u64(), Ordering::Release);
        slot.set_durability(reads.durability, reads.untracked);
        // SAFETY: we hold the claim and set `BUSY`, so the stamp is not `current | PRESENT`.
        let old = unsafe { slot.publish_value(stored, current) };
        self.account(slot, old, was_untracked, &value, reads.untracked);
        Ok(value)
    }

    /// The end of an execution whose memo is already verified at the current revision
    /// (stamp `stamp`): it was verified and then evicted (explicit `evict`), or an
    /// unclaimed verifier proved it valid while it ran. Its edges and revisions stand,
    /// since dependents may have read them; only a missing value is filled in.
    ///
    /// Preconditions: this thread holds `slot.claim`.
    fn keep_verified(
        &self,
        slot: &DerivedSlot<Q::Key, Q::Value>,
        stamp: u64,
        stored: Q::Value,
        value: Q::Value,
        was_untracked: bool,
    ) -> Q::Value {
        let current = verified_at_of(stamp);
        if stamp & PRESENT != 0 {
            // SAFETY: we observed `stamp == current | PRESENT`.
            return unsafe { slot.value_unchecked() }.clone();
        }
        // SAFETY: we hold the claim; the stamp is `current` without a value, which only
        // the claim holder changes.
        let old = unsafe { slot.publish_value(stored, current) };
        self.account(slot, old, was_untracked, &value, was_untracked);
        value
    }
}

/// The text of a panic payload, when it is a string.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}
