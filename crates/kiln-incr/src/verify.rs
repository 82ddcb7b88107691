//! Verification: is a memo from an earlier revision still valid? First by durability
//! (shallow), then through its dependency edges in order (deep), stopping at the first
//! edge that changed. Evicted memos are verified the same way: only their value is gone.
//!
//! Verification takes no claim when nothing must re-execute: a verifier reads the memo's
//! stamp, walks its edges, and publishes the new `verified_at` with one CAS from the stamp
//! it read. The CAS fails if an execution was committed meanwhile (a commit sets `BUSY`
//! in the stamp before it replaces anything), so a published verification always rests on
//! the edges of record; racing verifiers publish the same stamp. Only when an edge changed
//! (or the memo is untracked, never computed, or being committed) does the verifier claim
//! the memo, re-check under the claim, and execute it if still needed.

use std::sync::atomic::Ordering;

use crate::database::Database;
use crate::derived::DerivedTable;
use crate::event::EventKind;
use crate::memo::{verified_at_of, DerivedSlot, BUSY, PRESENT};
use crate::query::Query;
use crate::revision::Revision;
use crate::stack;
use crate::sync::{Claimed, Failure};

/// How many unclaimed verifications may nest before verification claims each memo again.
/// Claims are what turn a cycle among stored edges (a memo reached again while it is being
/// verified) into an error; past this depth every memo is claimed, so an unclaimed walk
/// around such a cycle cannot recurse without end.
const UNCLAIMED_DEPTH: u32 = 32;

/// How an unclaimed verification ended.
#[derive(Copy, Clone)]
pub(crate) enum Unclaimed {
    /// The stamp was published at the current revision, or changed meanwhile: read it
    /// again.
    Reread,
    /// Claim the memo and verify it under the claim (a commit is in progress, the memo
    /// cannot be verified through its edges, or the nesting is too deep).
    Claim,
    /// An edge changed since the stamp (the one given) was published: claim the memo and,
    /// if its stamp is still that one, execute it without walking its edges again.
    Execute(u64),
}

impl Unclaimed {
    /// The stamp under which the claim holder may execute without validating again.
    pub(crate) fn stale_stamp(self) -> Option<u64> {
        match self {
            Unclaimed::Execute(stamp) => Some(stamp),
            Unclaimed::Reread | Unclaimed::Claim => None,
        }
    }
}

impl<Q: Query<C>, C: Send + Sync + 'static> DerivedTable<Q, C> {
    /// Whether the memo, last verified at `verified_at`, is valid at the current revision
    /// without re-executing it.
    ///
    /// Preconditions: this thread holds the memo's claim (see `sync.rs`).
    pub(crate) fn validate(
        &self,
        db: &Database<C>,
        index: u32,
        slot: &DerivedSlot<Q::Value>,
        verified_at: Revision,
        depth: u32,
    ) -> Result<bool, Failure> {
        let (durability, reverify) = slot.verify_info();
        if verified_at == Revision::NEVER || reverify {
            return Ok(false);
        }
        if db.last_changed(durability) <= verified_at {
            return Ok(true);
        }
        db.emit_contained(EventKind::DidDeepVerify, self.edge(index))?;
        db.any_changed_after(slot.edges().as_slice(), verified_at, depth + 1)
            .map(|changed| !changed)
    }

    /// Tries to verify the memo at the current revision without claiming it, starting from
    /// its stamp `seen`.
    pub(crate) fn verify_unclaimed(
        &self,
        db: &Database<C>,
        index: u32,
        slot: &DerivedSlot<Q::Value>,
        seen: u64,
        depth: u32,
    ) -> Result<Unclaimed, Failure> {
        if seen & BUSY != 0 || depth >= UNCLAIMED_DEPTH {
            return Ok(Unclaimed::Claim);
        }
        let verified_at = verified_at_of(seen);
        let (durability, reverify) = slot.verify_info();
        if verified_at == Revision::NEVER || reverify {
            return Ok(Unclaimed::Claim);
        }
        if db.last_changed(durability) > verified_at {
            db.emit_contained(EventKind::DidDeepVerify, self.edge(index))?;
            // A failure counts as a change (see `Database::any_changed_after`): the memo
            // runs again and meets the failure itself.
            if !matches!(
                db.any_changed_after(slot.edges().as_slice(), verified_at, depth + 1),
                Ok(false)
            ) {
                return Ok(Unclaimed::Execute(seen));
            }
        }
        if slot.publish_verified(seen, db.current_revision()) {
            // The memo is verified whatever the listener does; its panic fails only this
            // fetch (no claim is held, so nothing else is marked).
            db.emit_contained(EventKind::DidValidateMemoizedValue, self.edge(index))?;
        }
        Ok(Unclaimed::Reread)
    }

    /// Whether the value at `index` changed after `after`: verifies the memo at the
    /// current revision, re-executing it only when one of its edges really changed (and
    /// then compares values, so an equal result counts as unchanged).
    pub(crate) fn maybe_changed_after_impl(
        &self,
        db: &Database<C>,
        index: u32,
        after: Revision,
        depth: u32,
    ) -> Result<bool, Failure> {
        let slot = self.slot(index);
        let current = db.current_revision();
        let mut attempt = None;
        loop {
            let stamp = slot.stamp.load(Ordering::Acquire);
            if stamp & !PRESENT == current.as_u64() {
                return Ok(slot.changed_at() > after);
            }
            // One attempt: after it the stamp is current, or the memo must be claimed.
            let outcome = match attempt {
                Some(outcome) => outcome,
                None => *attempt.insert(self.verify_unclaimed(db, index, slot, stamp, depth)?),
            };
            if matches!(outcome, Unclaimed::Reread) {
                attempt = Some(Unclaimed::Claim);
                continue;
            }
            let guard = match db.claim(self.edge(index), false)? {
                Claimed::Retry => continue,
                Claimed::Owned(guard) => guard,
            };
            let stale = outcome.stale_stamp();
            // Deep chains recurse through here: unclaimed walks nest at most
            // `UNCLAIMED_DEPTH` levels (well inside the red zone, see `stack.rs`), then
            // every level is claimed, and checks the stack.
            let result =
                stack::guarded(|| self.verify_claimed(db, index, slot, after, depth, stale));
            if result.is_err() {
                slot.mark_failed();
            }
            return guard.finish(result);
        }
    }

    /// `stale`: a stamp under which an unclaimed walk already found a changed edge.
    ///
    /// Preconditions: this thread holds the memo's claim (see `sync.rs`).
    fn verify_claimed(
        &self,
        db: &Database<C>,
        index: u32,
        slot: &DerivedSlot<Q::Value>,
        after: Revision,
        depth: u32,
        stale: Option<u64>,
    ) -> Result<bool, Failure> {
        let current = db.current_revision();
        let stamp = slot.stamp.load(Ordering::Acquire);
        let verified_at = verified_at_of(stamp);
        if stale == Some(stamp) {
            self.execute_in_place(db, index, slot, verified_at)?;
            return Ok(slot.changed_at() > after);
        }
        if verified_at == current {
            return Ok(slot.changed_at() > after);
        }
        if verified_at == Revision::NEVER {
            // Never computed successfully (its last execution failed): whoever depended on
            // it must run again.
            return Ok(true);
        }
        if self.validate(db, index, slot, verified_at, depth)? {
            slot.mark_verified(current);
            db.emit_contained(EventKind::DidValidateMemoizedValue, self.edge(index))?;
            return Ok(slot.changed_at() > after);
        }
        self.execute_in_place(db, index, slot, verified_at)?;
        Ok(slot.changed_at() > after)
    }
}
