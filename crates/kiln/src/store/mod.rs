//! The artifact store: compiled artifacts kept by content key, behind one small trait.
//!
//! A compiled artifact is addressed by a [`ContentKey`] (the blake3 hash of everything that
//! determines it) inside a [`Namespace`] (kiln version, compiler version, target, target
//! options, capabilities), so two builds that could produce different bytes never share an
//! entry. The [`ArtifactStore`] trait is all the pipeline sees: [`LocalStore`] keeps entries
//! on disk, [`MemoryStore`] in memory; a shared remote cache, a build farm's cache or a
//! compile server are further implementations, not rewrites.
//!
//! Design decisions:
//! - A store never serves bytes it cannot vouch for: every disk entry carries a versioned,
//!   checksummed header ([`entry`]), and a bad entry is removed and reported as
//!   [`Lookup::Corrupt`] so the caller rebuilds it.
//! - Sharing needs no locks: an entry's content is a function of its key, and writes land by
//!   atomic rename, so concurrent writers of one key write identical bytes and readers see a
//!   whole file or none.
//! - The load path is one open and one read per entry; anything that scans directories
//!   (garbage collection, usage) is a separate, explicit call.

mod content_key;
pub mod entry;
mod error;
mod gc;
mod local;
mod memory;
mod namespace;

use std::sync::Arc;

pub use content_key::{ContentKey, ParseContentKeyError};
pub use entry::CorruptReason;
pub use error::StoreError;
pub use gc::{GcReport, NamespaceUsage, StoreUsage};
pub use local::LocalStore;
pub use memory::MemoryStore;
pub use namespace::{Namespace, KILN_VERSION};

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
        /// Where the bad entry was.
        path: std::path::PathBuf,
        /// What was wrong with it.
        reason: CorruptReason,
    },
}

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
}

impl<S: ArtifactStore + ?Sized> ArtifactStore for Arc<S> {
    fn load(&self, ns: &Namespace, key: &ContentKey) -> Result<Lookup, StoreError> {
        (**self).load(ns, key)
    }

    fn save(&self, ns: &Namespace, key: &ContentKey, bytes: &[u8]) -> Result<(), StoreError> {
        (**self).save(ns, key, bytes)
    }
}

impl<S: ArtifactStore + ?Sized> ArtifactStore for &S {
    fn load(&self, ns: &Namespace, key: &ContentKey) -> Result<Lookup, StoreError> {
        (**self).load(ns, key)
    }

    fn save(&self, ns: &Namespace, key: &ContentKey, bytes: &[u8]) -> Result<(), StoreError> {
        (**self).save(ns, key, bytes)
    }
}
