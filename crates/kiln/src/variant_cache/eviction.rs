//! Byte-capacity eviction: least recently used artifacts go first.
//!
//! Hits only store an access stamp in their entry (no list to relink, no lock to take), so
//! the LRU order is recovered at insert time, when the cache is over its capacity: one scan
//! of every entry's stamp keeps the oldest few, sorted, in a queue. Later evictions pop from
//! the queue and skip any entry whose stamp moved (it was used since) or that is gone. That
//! is still exact LRU: an entry outside the queue was newer than every queued one when the
//! queue was made, and anything inserted or used since is newer still. One scan serves many
//! evictions.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;

use super::{Slot, Table, VariantCache};
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
    pub(super) fn evict_to(&self, table: &mut Table<A>, capacity: u64) {
        while table.bytes > capacity {
            let Some((stamp, key)) = next_oldest(table) else {
                return;
            };
            let unused_since = table
                .ready(&key)
                .is_some_and(|entry| entry.stamp.load(Relaxed) == stamp);
            if unused_since && table.take_ready(&key).is_some() {
                self.evicted.fetch_add(1, Relaxed);
            }
        }
    }
}

fn next_oldest<A>(table: &mut Table<A>) -> Option<(u64, VariantKey)> {
    if table.eviction.oldest.is_empty() {
        let mut stamps: Vec<(u64, VariantKey)> = Vec::with_capacity(table.entries);
        for shader in table.shaders.values() {
            stamps.extend(shader.slots.iter().filter_map(|(key, slot)| match slot {
                Slot::Ready(entry) => Some((entry.stamp.load(Relaxed), *key)),
                Slot::Compiling(_) => None,
            }));
        }
        let keep = batch(stamps.len());
        if keep < stamps.len() {
            stamps.select_nth_unstable_by_key(keep, |&(stamp, _)| stamp);
            stamps.truncate(keep);
        }
        stamps.sort_unstable_by_key(|&(stamp, _)| stamp);
        table.eviction.oldest = stamps.into();
    }
    table.eviction.oldest.pop_front()
}
