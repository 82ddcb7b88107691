//! The in-memory store: the trait's reference implementation, for tests and as the shape of
//! a remote cache (a map from namespace and key to bytes).

use parking_lot::RwLock;
use rustc_hash::FxHashMap;

use super::{ArtifactStore, ContentKey, Lookup, Namespace, StoreError};

/// Artifacts in a hash map per namespace (by directory name), keyed by content key.
///
/// Never corrupt and never evicts; loads copy the bytes out, as a remote cache would.
#[derive(Debug, Default)]
pub struct MemoryStore {
    namespaces: RwLock<FxHashMap<String, FxHashMap<ContentKey, Vec<u8>>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries, over all namespaces.
    pub fn len(&self) -> usize {
        self.namespaces.read().values().map(FxHashMap::len).sum()
    }

    /// True when nothing was saved.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sum of the payload sizes, over all namespaces.
    pub fn total_bytes(&self) -> u64 {
        self.namespaces
            .read()
            .values()
            .flat_map(FxHashMap::values)
            .map(|bytes| bytes.len() as u64)
            .sum()
    }
}

impl ArtifactStore for MemoryStore {
    fn load(&self, ns: &Namespace, key: &ContentKey) -> Result<Lookup, StoreError> {
        let namespaces = self.namespaces.read();
        Ok(
            match namespaces
                .get(ns.dir_name())
                .and_then(|entries| entries.get(key))
            {
                Some(bytes) => Lookup::Hit(bytes.clone()),
                None => Lookup::Miss,
            },
        )
    }

    fn save(&self, ns: &Namespace, key: &ContentKey, bytes: &[u8]) -> Result<(), StoreError> {
        self.namespaces
            .write()
            .entry(ns.dir_name().to_owned())
            .or_default()
            .insert(*key, bytes.to_vec());
        Ok(())
    }
}
