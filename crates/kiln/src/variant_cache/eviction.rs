//! Byte-capacity eviction: least recently used artifacts go first.
//!
//! Hits only store an access stamp in their entry (no list to relink, no lock), so the LRU
//! order is recovered at insert time, when the cache is over its capacity: one scan of every
//! entry's stamp, sorted, keeps the oldest few in a queue. Later evictions pop from the queue
//! and skip any entry whose stamp moved (it was used since) or that is gone. That is still
//! exact LRU: an entry outside the queue was newer than every queued one when the queue was
//! made, and anything inserted or used since is newer still. One scan serves many evictions.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;

use super::{Ledger, Slot, VariantCache};
use crate::key::VariantKey;

/// The oldest entries as of the last scan, oldest first, with their stamps then.
#[derive(Default)]
pub(super) struct EvictionQueue {
    oldest: VecDeque<(u64, VariantKey)>,
}

impl EvictionQueue {
    pub(super) fn clear(&mut self) {
        self.oldest.clear();
    }
}

/// How many entries one scan queues: enough that a full cache scans once per many inserts.
fn batch(entries: usize) -> usize {
    (entries / 8).max(64)
}

impl<A: Clone + Send + Sync> VariantCache<A> {
    /// Evicts least recently used artifacts until the held bytes fit in `capacity`.
    pub(super) fn evict_to(&self, ledger: &mut Ledger, capacity: u64) {
        while ledger.bytes > capacity {
            let Some((stamp, key)) = self.next_oldest(ledger) else {
                return;
            };
            let still_oldest = match self.shard(&key).map.read().get(&key) {
                Some(Slot::Ready(entry)) => entry.stamp.load(Relaxed) == stamp,
                _ => false,
            };
            if still_oldest && self.take_ready(ledger, &key).is_some() {
                self.evicted.fetch_add(1, Relaxed);
            }
        }
    }

    fn next_oldest(&self, ledger: &mut Ledger) -> Option<(u64, VariantKey)> {
        if ledger.eviction.oldest.is_empty() {
            let mut stamps: Vec<(u64, VariantKey)> = Vec::with_capacity(ledger.entries);
            for shard in self.shards.iter() {
                stamps.extend(
                    shard
                        .map
                        .read()
                        .iter()
                        .filter_map(|(key, slot)| match slot {
                            Slot::Ready(entry) => Some((entry.stamp.load(Relaxed), *key)),
                            Slot::Compiling(_) => None,
                        }),
                );
            }
            let keep = batch(stamps.len()).min(stamps.len());
            if keep < stamps.len() {
                stamps.select_nth_unstable_by_key(keep, |&(stamp, _)| stamp);
                stamps.truncate(keep);
            }
            stamps.sort_unstable_by_key(|&(stamp, _)| stamp);
            ledger.eviction.oldest = stamps.into();
        }
        ledger.eviction.oldest.pop_front()
    }
}
