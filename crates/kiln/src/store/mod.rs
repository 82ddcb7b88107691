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

mod checkpoint;
mod error;
mod gc;
mod local;
mod memory;
mod namespace;
pub mod remote;
mod tiered;
pub mod verify;

use std::sync::Arc;

pub use crate::base::{ContentKey, ParseContentKeyError, KILN_VERSION};
pub use crate::identity::Namespace;
pub use error::{SaveManyError, StoreError};
pub use gc::{GcReport, NamespaceUsage, StoreUsage};
pub use local::LocalStore;
pub use memory::MemoryStore;
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

    /// [`ArtifactStore::save_many`] with each entry's blake3 hash (`hashes[i]` of
    /// `entries[i]`'s bytes), as its caller already computed it: a store that keeps a blake3
    /// checksum per entry records it instead of hashing the bytes again. A wrong hash is
    /// caught when the entry is read (reported as corrupt, never served). The default
    /// ignores the hashes.
    fn save_many_hashed(
        &self,
        entries: &[SaveEntry<'_>],
        hashes: &[ContentKey],
    ) -> Result<(), SaveManyError> {
        let _ = hashes;
        self.save_many(entries)
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

/// A store shared (`Arc`) or borrowed (`&`) answers with its own methods: every method is
/// forwarded, including those with a default, which would otherwise run the default
/// instead (test `wrappers_forward_every_method_to_the_store`).
macro_rules! forward_artifact_store {
    ($($wrapper:ty),*) => {$(
        impl<S: ArtifactStore + ?Sized> ArtifactStore for $wrapper {
            fn load(&self, ns: &Namespace, key: &ContentKey) -> Result<Lookup, StoreError> {
                (**self).load(ns, key)
            }

            fn save(
                &self,
                ns: &Namespace,
                key: &ContentKey,
                bytes: &[u8],
            ) -> Result<(), StoreError> {
                (**self).save(ns, key, bytes)
            }

            fn save_many(&self, entries: &[SaveEntry<'_>]) -> Result<(), SaveManyError> {
                (**self).save_many(entries)
            }

            fn save_many_hashed(
                &self,
                entries: &[SaveEntry<'_>],
                hashes: &[ContentKey],
            ) -> Result<(), SaveManyError> {
                (**self).save_many_hashed(entries, hashes)
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

            fn recorded_all(
                &self,
                namespaces: &[&Namespace],
                key: &ContentKey,
            ) -> Option<Vec<(u64, ContentKey)>> {
                (**self).recorded_all(namespaces, key)
            }

            fn remote(&self) -> Option<&RemoteStore> {
                (**self).remote()
            }
        }
    )*};
}

forward_artifact_store!(Arc<S>, &S);

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Logs every method called on it, overriding each one the trait has a default for.
    #[derive(Default)]
    struct Probe(Mutex<Vec<&'static str>>);

    impl Probe {
        fn log(&self, method: &'static str) {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(method);
        }
    }

    impl ArtifactStore for Probe {
        fn load(&self, _: &Namespace, _: &ContentKey) -> Result<Lookup, StoreError> {
            self.log("load");
            Ok(Lookup::Miss)
        }
        fn save(&self, _: &Namespace, _: &ContentKey, _: &[u8]) -> Result<(), StoreError> {
            self.log("save");
            Ok(())
        }
        fn save_many(&self, _: &[SaveEntry<'_>]) -> Result<(), SaveManyError> {
            self.log("save_many");
            Ok(())
        }
        fn save_many_hashed(
            &self,
            _: &[SaveEntry<'_>],
            _: &[ContentKey],
        ) -> Result<(), SaveManyError> {
            self.log("save_many_hashed");
            Ok(())
        }
        fn recorded(&self, _: &Namespace, _: &ContentKey) -> Option<(u64, ContentKey)> {
            self.log("recorded");
            None
        }
        fn recorded_all(&self, _: &[&Namespace], _: &ContentKey) -> Option<Vec<(u64, ContentKey)>> {
            self.log("recorded_all");
            None
        }
        fn flush(&self) -> Result<(), StoreError> {
            self.log("flush");
            Ok(())
        }
        fn prefetch(&self, entries: &[(Namespace, ContentKey)]) -> Vec<bool> {
            self.log("prefetch");
            vec![false; entries.len()]
        }
        fn contains_many(&self, entries: &[(Namespace, ContentKey)]) -> Vec<bool> {
            self.log("contains_many");
            vec![false; entries.len()]
        }
        fn remote(&self) -> Option<&RemoteStore> {
            self.log("remote");
            None
        }
    }

    fn call_every_method(store: &dyn ArtifactStore) {
        let (ns, key) = (Namespace::new("spirv", "1"), ContentKey::hash(b"k"));
        let _ = store.load(&ns, &key);
        let _ = store.save(&ns, &key, b"x");
        let _ = store.save_many(&[(&ns, &key, b"x")]);
        let _ = store.save_many_hashed(&[(&ns, &key, b"x")], &[ContentKey::hash(b"x")]);
        let _ = store.recorded(&ns, &key);
        let _ = store.recorded_all(&[&ns, &ns], &key);
        let _ = store.flush();
        let _ = store.prefetch(&[(ns.clone(), key)]);
        let _ = store.contains_many(&[(ns.clone(), key)]);
        let _ = store.remote();
    }

    const EVERY_METHOD: [&str; 10] = [
        "load",
        "save",
        "save_many",
        "save_many_hashed",
        "recorded",
        "recorded_all",
        "flush",
        "prefetch",
        "contains_many",
        "remote",
    ];

    /// A store behind `Arc` or `&` must answer with its own methods: a method the wrappers
    /// do not forward silently falls back to the trait's default (once `recorded_all`
    /// became one lookup per target again that way).
    #[test]
    fn wrappers_forward_every_method_to_the_store() {
        let probe = Arc::new(Probe::default());
        let shared: Arc<dyn ArtifactStore> = probe.clone();
        call_every_method(&shared);
        let borrowed: &dyn ArtifactStore = &*probe;
        call_every_method(&borrowed);
        let log = probe.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let expected: Vec<&str> = EVERY_METHOD.iter().chain(&EVERY_METHOD).copied().collect();
        assert_eq!(log, expected);
    }
}
