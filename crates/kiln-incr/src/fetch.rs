//! Fetching a derived value: the lock-free hit path, and the claimed slow path that
//! validates or executes.

use std::sync::atomic::Ordering;

use crate::database::Database;
use crate::derived::DerivedTable;
use crate::error::QueryError;
use crate::event::EventKind;
use crate::memo::{DerivedSlot, MemoValue, PRESENT};
use crate::query::Query;
use crate::revision::Revision;
use crate::sync::Claimed;

impl<Q: Query<C>, C: Send + Sync + 'static> DerivedTable<Q, C> {
    /// The value of `key` at the current revision.
    #[inline]
    pub(crate) fn fetch(&self, db: &Database<C>, key: &Q::Key) -> Result<Q::Value, QueryError> {
        let index = self.intern(key);
        self.fetch_index(db, index)
    }

    /// The value at key index `index`. Hit path: one atomic load and compare, an LRU stamp
    /// check (read-only once stamped this revision), the read record, a clone.
    #[inline]
    pub(crate) fn fetch_index(&self, db: &Database<C>, index: u32) -> Result<Q::Value, QueryError> {
        let slot = self.slot(index);
        let hit = db.current_revision().as_u32() | PRESENT;
        loop {
            if slot.stamp.load(Ordering::Acquire) == hit {
                // SAFETY: we observed `stamp == current | PRESENT` under `&Database`.
                if let Some(value) = unsafe { slot.verified_value() } {
                    self.lru.touch(slot);
                    db.record_read(self.edge(index), slot.durability(), slot.changed_at());
                    return Ok(value.clone());
                }
            }
            if let Some(value) = self.fetch_cold(db, index, slot)? {
                return Ok(value);
            }
        }
    }

    /// Claims the memo and produces its value; `None` when another thread finished first
    /// (the caller retries the hit path).
    #[inline(never)]
    fn fetch_cold(
        &self,
        db: &Database<C>,
        index: u32,
        slot: &DerivedSlot<Q::Key, Q::Value>,
    ) -> Result<Option<Q::Value>, QueryError> {
        let edge = self.edge(index);
        let mut guard = match db.claim(&slot.claim, edge)? {
            Claimed::Retry => return Ok(None),
            Claimed::Owned(guard) => guard,
        };
        let result = self.fetch_claimed(db, index, slot);
        if let Err(error) = &result {
            guard.fail(error);
        }
        drop(guard);
        let value = result?;
        db.record_read(edge, slot.durability(), slot.changed_at());
        Ok(Some(value))
    }

    /// Preconditions: this thread holds `slot.claim`.
    fn fetch_claimed(
        &self,
        db: &Database<C>,
        index: u32,
        slot: &DerivedSlot<Q::Key, Q::Value>,
    ) -> Result<Q::Value, QueryError> {
        let current = db.current_revision();
        let stamp = slot.stamp.load(Ordering::Acquire);
        if stamp == current.as_u32() | PRESENT {
            // Someone verified it between our hit check and our claim: readers may share it.
            // SAFETY: we observed `stamp == current | PRESENT`.
            if let Some(value) = unsafe { slot.verified_value() } {
                self.lru.touch(slot);
                return Ok(value.clone());
            }
        }
        // SAFETY: we hold the claim and the stamp is not `current | PRESENT`, so no thread
        // reads the memo's value or edges.
        let memo = unsafe { slot.claimed_memo() };
        let verified_at = Revision::from_u32(stamp & !PRESENT);
        if stamp & PRESENT != 0 && self.validate(db, index, slot, memo, verified_at)? {
            db.emit_for(EventKind::DidValidateMemoizedValue, self.edge(index));
            if let MemoValue::Present(value) = &memo.value {
                let value = value.clone();
                self.lru.touch(slot);
                slot.stamp.store(current.as_u32() | PRESENT, Ordering::Release);
                return Ok(value);
            }
        }
        // No value (never computed or evicted) or an input changed: run it. When the value
        // was evicted, the fingerprint kept in the memo still allows backdating.
        self.execute(db, index, slot, memo, verified_at)
    }
}
