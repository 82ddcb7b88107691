//! Two levels: the local store, then the remote cache. A build asks the local store first;
//! what it lacks comes from the remote (and is kept locally); what neither has is compiled,
//! then saved to both.
//!
//! Design decisions:
//! - Batches, not round trips: before a build loads anything, [`ArtifactStore::prefetch`]
//!   receives every key it is about to load; what the local store lacks (asked without
//!   reading bytes) is fetched from the remote in pipelines and written to the local store
//!   in one batch. The loads that follow are answered from memory, up to a bound, then from
//!   the local store. A load that was not announced still works, one round trip.
//! - The local store's answers and errors are the build's; the remote's failures never are
//!   (see [`super::remote`]): they end up in one report per build.

use std::sync::Arc;

use parking_lot::Mutex;
use rustc_hash::{FxHashMap, FxHashSet};

use super::remote::RemoteStore;
use super::{ArtifactStore, ContentKey, Lookup, Namespace, SaveEntry, SaveManyError, StoreError};

/// Bytes fetched from the remote kept in memory for their load at most; past it, a load
/// reads them back from the local store, where every fetched entry was saved.
const MAX_PREFETCH_BYTES: usize = 64 << 20;

/// The local store in front of a remote cache.
pub struct TieredStore {
    local: Arc<dyn ArtifactStore>,
    remote: RemoteStore,
    /// Fetched or read ahead by [`ArtifactStore::prefetch`], waiting for their load.
    ahead: Mutex<FxHashMap<(String, ContentKey), Vec<u8>>>,
    /// Announced, and neither level had them (or the remote failed): their load is a miss
    /// without another round trip.
    absent: Mutex<FxHashSet<(String, ContentKey)>>,
    /// Fetched one by one from the remote: saved locally at the next flush.
    fill: Mutex<Vec<(Namespace, ContentKey, Vec<u8>)>>,
}

impl TieredStore {
    /// `local` in front of `remote`.
    pub fn new(local: Arc<dyn ArtifactStore>, remote: RemoteStore) -> Self {
        Self {
            local,
            remote,
            ahead: Mutex::default(),
            absent: Mutex::default(),
            fill: Mutex::default(),
        }
    }

    fn save_local_fill(&self) {
        let fill = std::mem::take(&mut *self.fill.lock());
        if fill.is_empty() {
            return;
        }
        let entries: Vec<SaveEntry<'_>> = fill.iter().map(|(ns, k, b)| (ns, k, &b[..])).collect();
        if let Err(e) = self.local.save_many(&entries) {
            tracing::debug!(%e, "cannot keep fetched artifacts in the local store");
        }
    }
}

impl ArtifactStore for TieredStore {
    fn load(&self, ns: &Namespace, key: &ContentKey) -> Result<Lookup, StoreError> {
        if let Some(bytes) = self.ahead.lock().remove(&(ns.dir_name().to_owned(), *key)) {
            return Ok(Lookup::Hit(bytes));
        }
        match self.local.load(ns, key)? {
            Lookup::Miss => {}
            other => return Ok(other),
        }
        if self.absent.lock().remove(&(ns.dir_name().to_owned(), *key)) {
            return Ok(Lookup::Miss);
        }
        match self.remote.get_many(&[(ns, key)]).pop().flatten() {
            Some(bytes) => {
                self.fill.lock().push((ns.clone(), *key, bytes.clone()));
                Ok(Lookup::Hit(bytes))
            }
            None => Ok(Lookup::Miss),
        }
    }

    fn recorded(&self, ns: &Namespace, key: &ContentKey) -> Option<(u64, ContentKey)> {
        self.local.recorded(ns, key)
    }

    fn recorded_all(
        &self,
        namespaces: &[&Namespace],
        key: &ContentKey,
    ) -> Option<Vec<(u64, ContentKey)>> {
        self.local.recorded_all(namespaces, key)
    }

    fn save(&self, ns: &Namespace, key: &ContentKey, bytes: &[u8]) -> Result<(), StoreError> {
        let saved = self.local.save(ns, key, bytes);
        self.remote.put_many(&[(ns, key, bytes)]);
        saved
    }

    fn save_many(&self, entries: &[SaveEntry<'_>]) -> Result<(), SaveManyError> {
        let saved = self.local.save_many(entries);
        self.remote.put_many(entries);
        saved
    }

    fn save_many_hashed(
        &self,
        entries: &[SaveEntry<'_>],
        hashes: &[ContentKey],
    ) -> Result<(), SaveManyError> {
        let saved = self.local.save_many_hashed(entries, hashes);
        self.remote.put_many(entries);
        saved
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.save_local_fill();
        self.local.flush()
    }

    fn prefetch(&self, entries: &[(Namespace, ContentKey)]) -> Vec<bool> {
        // What an earlier build announced and never loaded is forgotten: the remote may
        // have it by now.
        self.ahead.lock().clear();
        self.absent.lock().clear();
        // What the local store holds is loaded from it as usual; only its absence is
        // asked here, without reading any bytes.
        let missing: Vec<usize> = self
            .local
            .contains_many(entries)
            .into_iter()
            .enumerate()
            .filter_map(|(index, held)| (!held).then_some(index))
            .collect();
        let mut held = 0;
        let mut from_remote = vec![false; entries.len()];
        if missing.is_empty() {
            return from_remote;
        }
        // Round trip by round trip, so that a large build never holds every fetched byte at
        // once: each round trip's values (a bounded amount, see `RemoteStore::get_each`) are
        // kept locally (the next build needs no remote), then held for their load while the
        // bound allows.
        let mut ahead = self.ahead.lock();
        let mut absent = self.absent.lock();
        let asked: Vec<(&Namespace, &ContentKey)> = missing
            .iter()
            .map(|&i| (&entries[i].0, &entries[i].1))
            .collect();
        self.remote.get_each(&asked, |fetched| {
            let found: Vec<SaveEntry<'_>> = fetched
                .iter()
                .map(|(at, bytes)| (asked[*at].0, asked[*at].1, &bytes[..]))
                .collect();
            if let Err(e) = self.local.save_many(&found) {
                tracing::debug!(%e, "cannot keep fetched artifacts in the local store");
            }
            drop(found);
            for (at, bytes) in fetched {
                let index = missing[at];
                from_remote[index] = true;
                if held + bytes.len() <= MAX_PREFETCH_BYTES {
                    held += bytes.len();
                    let (ns, key) = &entries[index];
                    ahead.insert((ns.dir_name().to_owned(), *key), bytes);
                }
            }
        });
        for &index in &missing {
            if !from_remote[index] {
                let (ns, key) = &entries[index];
                absent.insert((ns.dir_name().to_owned(), *key));
            }
        }
        from_remote
    }

    fn remote(&self) -> Option<&RemoteStore> {
        Some(&self.remote)
    }
}
