//! Verification: is a memo from an earlier revision still valid? First by durability
//! (shallow), then through its dependency edges in order (deep), stopping at the first
//! edge that changed. Evicted memos are verified the same way: only their value is gone.

use std::sync::atomic::Ordering;

use crate::database::Database;
use crate::derived::DerivedTable;
use crate::event::EventKind;
use crate::memo::{DerivedSlot, PRESENT};
use crate::query::Query;
use crate::revision::Revision;
use crate::sync::{Claimed, Failure};

impl<Q: Query<C>, C: Send + Sync + 'static> DerivedTable<Q, C> {
    /// Whether the memo, last verified at `verified_at`, is valid at the current revision
    /// without re-executing it.
    ///
    /// Preconditions: this thread holds `slot.claim`.
    pub(crate) fn validate(
        &self,
        db: &Database<C>,
        index: u32,
        slot: &DerivedSlot<Q::Key, Q::Value>,
        verified_at: Revision,
    ) -> Result<bool, Failure> {
        if verified_at == Revision::NEVER || slot.is_untracked() {
            return Ok(false);
        }
        if db.last_changed(slot.durability()) <= verified_at {
            return Ok(true);
        }
        db.emit_for(EventKind::DidDeepVerify, self.edge(index));
        // SAFETY: we hold the claim; nothing below replaces this memo's edges (a cycle
        // back to it is refused by the claim).
        let edges = unsafe { slot.claimed_edges() };
        db.any_changed_after(edges.as_slice(), verified_at)
            .map(|changed| !changed)
    }

    /// Whether the value at `index` changed after `after`: verifies the memo at the
    /// current revision, re-executing it only when one of its edges really changed (and
    /// then compares values, so an equal result counts as unchanged).
    pub(crate) fn maybe_changed_after_impl(
        &self,
        db: &Database<C>,
        index: u32,
        after: Revision,
    ) -> Result<bool, Failure> {
        let slot = self.slot(index);
        let current = db.current_revision();
        loop {
            let stamp = slot.stamp.load(Ordering::Acquire);
            if stamp & !PRESENT == current.as_u32() {
                return Ok(slot.changed_at() > after);
            }
            let guard = match db.claim(&slot.claim, self.edge(index))? {
                Claimed::Retry => continue,
                Claimed::Owned(guard) => guard,
            };
            return guard.finish(db, self.verify_claimed(db, index, slot, after));
        }
    }

    /// Preconditions: this thread holds `slot.claim`.
    fn verify_claimed(
        &self,
        db: &Database<C>,
        index: u32,
        slot: &DerivedSlot<Q::Key, Q::Value>,
        after: Revision,
    ) -> Result<bool, Failure> {
        let current = db.current_revision();
        let stamp = slot.stamp.load(Ordering::Acquire);
        let verified_at = Revision::from_u32(stamp & !PRESENT);
        if verified_at == current {
            return Ok(slot.changed_at() > after);
        }
        if verified_at == Revision::NEVER {
            // Never computed successfully (its last execution failed): whoever depended on
            // it must run again.
            return Ok(true);
        }
        if self.validate(db, index, slot, verified_at)? {
            slot.mark_verified(current);
            db.emit_for(EventKind::DidValidateMemoizedValue, self.edge(index));
            return Ok(slot.changed_at() > after);
        }
        self.execute(db, index, slot, verified_at)?;
        Ok(slot.changed_at() > after)
    }
}
