//! The artifact store: compiled artifacts kept by content key, behind one small trait.
//!
//! A compiled artifact is addressed by a [`ContentKey`] (the blake3 hash of everything that
//! determines it) inside a [`Namespace`] (kiln version, compiler version, target, target
//! options, capabilities), so two builds that could produce different bytes never share an
//! entry. The [`ArtifactStore`] trait is all the pipeline sees: [`LocalStore`] keeps entries
//! in a SQLite database on disk, [`MemoryStore`] in memory; a shared remote cache, a build
//! farm's cache or a compile server are further implementations, not rewrites.
//!
//! Design decisions:
//! - A store never serves bytes it cannot vouch for: every entry carries its length and
//!   blake3 checksum ([`verify`]), checked on every read, and a bad entry is removed and
//!   reported as [`Lookup::Corrupt`] so the caller rebuilds it.
//! - Atomicity, crash safety and sharing between processes are SQLite's (WAL mode, short
//!   write transactions, a busy timeout); an entry's content is a function of its key, so
//!   concurrent writers of one key write identical bytes.
//! - Saves come in batches ([`ArtifactStore::save_many`]): a build defers its saves to the
//!   end and writes them in a few transactions. Loads never write: the recency a hit earns
//!   is buffered and written with the next batch ([`ArtifactStore::flush`]).

mod content_key;
mod error;
mod gc;
mod local;
mod memory;
mod namespace;
pub mod remote;
mod tiered;
pub mod verify;

use std::sync::Arc;

pub use content_key::{ContentKey, ParseContentKeyError};
pub use error::{SaveManyError, StoreError};
pub use gc::{GcReport, NamespaceUsage, StoreUsage};
pub use local::LocalStore;
pub use memory::MemoryStore;
pub use namespace::{Namespace, KILN_VERSION};
pub use remote::{RemoteConfig, RemoteConfigError, RemoteReport, RemoteStore};
pub use tiered::TieredStore;
pub use verify::CorruptReason;

/// What a [`ArtifactStore::load`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The artifact's bytes, verified against their checksum.
    Hit(Vec<u8>),
    /// No entry for this key in this namespace.
    Miss,
    /// An entry existed but failed verification. It has been discarded; the caller should
    /// report it and rebuild (saving the rebuilt artifact replaces it).
    Corrupt {
        /// The file the bad entry was in (for [`LocalStore`], its database).
        path: std::path::PathBuf,
        /// Which entry it was: `<namespace>/<content key hex>`.
        entry: String,
        /// What was wrong with it.
        reason: CorruptReason,
    },
}

/// One entry to save: namespace, content key, bytes.
pub type SaveEntry<'a> = (&'a Namespace, &'a ContentKey, &'a [u8]);

/// A place to keep compiled artifacts by content key.
///
/// Implementations must be safe to share between threads, and `save` followed by `load` of
/// the same namespace and key must return the saved bytes unless something (garbage
/// collection, another process, corruption) removed them in between: a store is a cache, and
/// a `Miss` is always an acceptable answer.
pub trait ArtifactStore: Send + Sync {
    /// Looks up the artifact stored under `key` in `ns`.
    fn load(&self, ns: &Namespace, key: &ContentKey) -> Result<Lookup, StoreError>;

    /// Stores `bytes` as the artifact for `key` in `ns`, replacing any previous entry.
    ///
    /// Callers must only ever save one content per key (the key is a hash of everything that
    /// determines the artifact), which is what makes concurrent saves of one key harmless.
    fn save(&self, ns: &Namespace, key: &ContentKey, bytes: &[u8]) -> Result<(), StoreError>;

    /// Stores many entries, as [`ArtifactStore::save`] does each; a store may write them
    /// together (one transaction per batch). On error, some entries may have been stored
    /// and others not, and each is stored whole or not at all; the error counts those not
    /// stored.
    ///
    /// The default saves them one by one, going on after a failure.
    fn save_many(&self, entries: &[SaveEntry<'_>]) -> Result<(), SaveManyError> {
        let mut failure: Option<SaveManyError> = None;
        for (ns, key, bytes) in entries {
            if let Err(first) = self.save(ns, key, bytes) {
                failure
                    .get_or_insert(SaveManyError { failed: 0, first })
                    .failed += 1;
            }
        }
        failure.map_or(Ok(()), Err)
    }

    /// The size and blake3 hash recorded with the entry for `key` in `ns`, without reading
    /// or verifying its bytes (a use, for recency); `None` when not held, or not known
    /// without loading. A caller that then needs the bytes loads them, verified, with
    /// [`ArtifactStore::load`]. The default knows nothing.
    fn recorded(&self, _ns: &Namespace, _key: &ContentKey) -> Option<(u64, ContentKey)> {
        None
    }

    /// [`ArtifactStore::recorded`] for `key` in each of `namespaces` (a variant's targets),
    /// all or nothing: `None` as soon as one is not held. A store may answer them together.
    fn recorded_all(
        &self,
        namespaces: &[&Namespace],
        key: &ContentKey,
    ) -> Option<Vec<(u64, ContentKey)>> {
        namespaces.iter().map(|ns| self.recorded(ns, key)).collect()
    }

    /// Writes what the store buffered (the recency of recent hits); called at the end of a
    /// build. The default has nothing to write.
    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Announces the entries a build is about to load, so that a store with a remote
    /// level fetches them in batches first; says which came from the remote. The default
    /// does nothing (none did).
    fn prefetch(&self, entries: &[(Namespace, ContentKey)]) -> Vec<bool> {
        vec![false; entries.len()]
    }

    /// Which of `entries` the store holds, without reading their bytes where it can (a held
    /// entry may still turn out corrupt when loaded; an error is "not held"). The default
    /// loads each.
    fn contains_many(&self, entries: &[(Namespace, ContentKey)]) -> Vec<bool> {
        entries
            .iter()
            .map(|(ns, key)| matches!(self.load(ns, key), Ok(Lookup::Hit(_))))
            .collect()
    }

    /// The remote cache behind this store, if any (for its report and recorded compile
    /// times). The default has none.
    fn remote(&self) -> Option<&RemoteStore> {
        None
    }
}

impl<S: ArtifactStore + ?Sized> ArtifactStore for Arc<S> {
    fn load(&self, ns: &Namespace, key: &ContentKey) -> Result<Lookup, StoreError> {
        (**self).load(ns, key)
    }

    fn save(&self, ns: &Namespace, key: &ContentKey, bytes: &[u8]) -> Result<(), StoreError> {
        (**self).save(ns, key, bytes)
    }

    fn save_many(&self, entries: &[SaveEntry<'_>]) -> Result<(), SaveManyError> {
        (**self).save_many(entries)
    }

    fn flush(&self) -> Result<(), StoreError> {
        (**self).flush()
    }

    fn prefetch(&self, entries: &[(Namespace, ContentKey)]) -> Vec<bool> {
        (**self).prefetch(entries)
    }

    fn contains_many(&self, entries: &[(Namespace, ContentKey)]) -> Vec<bool> {
        (**self).contains_many(entries)
    }

    fn recorded(&self, ns: &Namespace, key: &ContentKey) -> Option<(u64, ContentKey)> {
        (**self).recorded(ns, key)
    }

    fn remote(&self) -> Option<&RemoteStore> {
        (**self).remote()
    }
}

impl<S: ArtifactStore + ?Sized> ArtifactStore for &S {
    fn load(&self, ns: &Namespace, key: &ContentKey) -> Result<Lookup, StoreError> {
        (**self).load(ns, key)
    }

    fn save(&self, ns: &Namespace, key: &ContentKey, bytes: &[u8]) -> Result<(), StoreError> {
        (**self).save(ns, key, bytes)
    }

    fn save_many(&self, entries: &[SaveEntry<'_>]) -> Result<(), SaveManyError> {
        (**self).save_many(entries)
    }

    fn flush(&self) -> Result<(), StoreError> {
        (**self).flush()
    }

    fn prefetch(&self, entries: &[(Namespace, ContentKey)]) -> Vec<bool> {
        (**self).prefetch(entries)
    }

    fn contains_many(&self, entries: &[(Namespace, ContentKey)]) -> Vec<bool> {
        (**self).contains_many(entries)
    }

    fn recorded(&self, ns: &Namespace, key: &ContentKey) -> Option<(u64, ContentKey)> {
        (**self).recorded(ns, key)
    }

    fn remote(&self) -> Option<&RemoteStore> {
        (**self).remote()
    }
}
