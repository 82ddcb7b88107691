//! Fetching a derived value: the lock-free hit path, an unclaimed verification of a memo
//! from an earlier revision (see `verify.rs`), and the claimed slow path that validates
//! or executes.

use std::sync::atomic::Ordering;

use crate::database::Database;
use crate::derived::DerivedTable;
use crate::event::EventKind;
use crate::memo::{verified_at_of, DerivedSlot, PRESENT};
use crate::query::Query;
use crate::stack;
use crate::sync::{Claimed, Failure};
use crate::verify::Unclaimed;

impl<Q: Query<C>, C: Send + Sync + 'static> DerivedTable<Q, C> {
    /// The value of `key` at the current revision.
    #[inline]
    pub(crate) fn fetch(&self, db: &Database<C>, key: &Q::Key) -> Result<Q::Value, Failure> {
        // The key id is located once, for the key compare, the memo and the LRU stamp.
        let (at, slot) = self.intern_located(key);
        let index = at.index;
        if slot.stamp.load(Ordering::Acquire) == db.current_revision().as_u64() | PRESENT {
            self.lru.touch_at(at);
            let (durability, changed_at) = slot.read_info();
            db.record_read(self.edge(index), durability, changed_at);
            // SAFETY: we observed `stamp == current | PRESENT` under `&Database`.
            return Ok(unsafe { slot.value_unchecked() }.clone());
        }
        self.fetch_slot(db, index, slot)
    }

    /// The value of the memo `slot` (key index `index`). Hit path: one atomic load and
    /// compare, an LRU stamp check (read-only once stamped this revision), the read
    /// record, a clone.
    #[inline]
    pub(crate) fn fetch_slot(
        &self,
        db: &Database<C>,
        index: u32,
        slot: &DerivedSlot<Q::Value>,
    ) -> Result<Q::Value, Failure> {
        let hit = db.current_revision().as_u64() | PRESENT;
        loop {
            if slot.stamp.load(Ordering::Acquire) == hit {
                self.lru.touch(index);
                let (durability, changed_at) = slot.read_info();
                db.record_read(self.edge(index), durability, changed_at);
                // SAFETY: we observed `stamp == current | PRESENT` under `&Database`.
                return Ok(unsafe { slot.value_unchecked() }.clone());
            }
            if let Some(value) = self.fetch_cold(db, index, slot)? {
                return Ok(value);
            }
        }
    }

    /// Verifies the memo without a claim if it holds a value, else claims it and produces
    /// its value; `None` when it was verified or another thread finished first (the
    /// caller retries the hit path).
    #[inline(never)]
    fn fetch_cold(
        &self,
        db: &Database<C>,
        index: u32,
        slot: &DerivedSlot<Q::Value>,
    ) -> Result<Option<Q::Value>, Failure> {
        let stamp = slot.stamp.load(Ordering::Acquire);
        let mut stale = None;
        if stamp & PRESENT != 0 && verified_at_of(stamp) != db.current_revision() {
            match self.verify_unclaimed(db, index, slot, stamp, 0) {
                Ok(Unclaimed::Reread) => return Ok(None),
                Ok(Unclaimed::Claim) => {}
                Ok(Unclaimed::Execute(seen)) => stale = Some(seen),
                Err(failure) => {
                    // The listener's panic: the caller may handle it like a failed read.
                    db.record_failed_read(self.edge(index));
                    return Err(failure);
                }
            }
        }
        let edge = self.edge(index);
        let produced = match db.claim(edge, true) {
            Ok(Claimed::Retry) => return Ok(None),
            Ok(Claimed::Owned(guard)) => {
                // Execution recurses through here (the query's reads): with enough stack
                // (see `stack.rs`). A walk of edges checks its own; a shallow verification
                // does not recurse, so the common re-read pays for no check.
                let result = stack::guarded(|| self.fetch_claimed(db, index, slot, stale));
                if result.is_err() {
                    slot.mark_failed();
                }
                guard.finish(result)
            }
            Err(failure) => Err(failure),
        };
        match produced {
            Ok(value) => {
                let (durability, changed_at) = slot.read_info();
                db.record_read(edge, durability, changed_at);
                Ok(Some(value))
            }
            Err(failure) => {
                // The caller may handle the error and return a value anyway: that value
                // depends on this memo's failure.
                db.record_failed_read(edge);
                Err(failure)
            }
        }
    }

    /// `stale`: a stamp under which an unclaimed walk already found a changed edge.
    ///
    /// Preconditions: this thread holds the memo's claim (see `sync.rs`).
    fn fetch_claimed(
        &self,
        db: &Database<C>,
        index: u32,
        slot: &DerivedSlot<Q::Value>,
        stale: Option<u64>,
    ) -> Result<Q::Value, Failure> {
        let current = db.current_revision();
        let stamp = slot.stamp.load(Ordering::Acquire);
        if stamp == current.as_u64() | PRESENT {
            // Someone verified it between our hit check and our claim.
            self.lru.touch(index);
            // SAFETY: we observed `stamp == current | PRESENT`.
            return self.clone_contained(db, index, unsafe { slot.value_unchecked() });
        }
        let verified_at = verified_at_of(stamp);
        if stamp & PRESENT != 0
            && stale != Some(stamp)
            && self.validate(db, index, slot, verified_at, 0)?
        {
            db.emit_contained(EventKind::DidValidateMemoizedValue, self.edge(index))?;
            // SAFETY: we hold the claim and saw the value present.
            let value = self.clone_contained(db, index, unsafe { slot.value_unchecked() })?;
            self.lru.touch(index);
            slot.mark_verified(current);
            return Ok(value);
        }
        // No value (never computed or evicted) or an input changed: run it. When the value
        // was evicted, its fingerprint still allows backdating.
        self.execute(db, index, slot, verified_at)
    }
}
