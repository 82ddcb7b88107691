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
use crate::memo::DerivedSlot;
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
        if verified_at == current {
            // The memo was verified this revision and then evicted (explicit `evict`):
            // its inputs are those it was verified against, so only the value is refilled;
            // dependents may already have read its revisions.
            // SAFETY: we hold the claim; the value is absent, so nobody reads it.
            let old = unsafe { slot.publish_value(value.clone(), current) };
            self.account(slot, old, was_untracked, &value, was_untracked);
            return Ok(value);
        }
        let mut changed_at = if reads.untracked {
            current
        } else if verified_at == Revision::NEVER {
            reads.changed_at
        } else {
            // The value may differ from what dependents read at `verified_at` or earlier.
            reads.changed_at.max(verified_at.next())
        };
        if verified_at != Revision::NEVER
            && self.can_backdate(index, slot, &value, slot.durability(), reads.durability)
        {
            changed_at = slot.changed_at();
            db.emit(EventKind::Backdated, Q::NAME, &slot.key);
        }
        // SAFETY: we hold the claim and hold no reference to the old edges.
        unsafe { slot.set_claimed_edges(reads.edges) };
        slot.changed_at
            .store(changed_at.as_u32(), Ordering::Release);
        slot.set_durability(reads.durability, reads.untracked);
        // SAFETY: we hold the claim and the stamp is not `current | PRESENT`.
        let old = unsafe { slot.publish_value(value.clone(), current) };
        self.account(slot, old, was_untracked, &value, reads.untracked);
        Ok(value)
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
