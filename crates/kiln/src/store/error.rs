//! Errors of the artifact store: an operation that failed, the path, and the cause.

use std::io;
use std::path::PathBuf;

/// A store operation that failed for a reason other than a missing or corrupt entry (those
/// are [`super::Lookup`] answers, not errors).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A store directory could not be created.
    #[error("cannot create store directory {path}: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The store database could not be opened, read or written.
    #[error("store database {path}: {source}")]
    Database {
        /// The database file.
        path: PathBuf,
        /// What SQLite reported.
        source: rusqlite::Error,
    },
    /// The file is a SQLite database, but not one this kiln can use as its store.
    #[error("store database {path} {problem}; delete it to start an empty store")]
    Incompatible {
        /// The database file.
        path: PathBuf,
        /// What is wrong with it (a schema version, a foreign application).
        problem: String,
    },
    /// A damaged database file could not be removed to start afresh.
    #[error("cannot remove damaged store file {path}: {source}")]
    Remove {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

/// The entries an [`super::ArtifactStore::save_many`] could not save.
#[derive(Debug, thiserror::Error)]
#[error("{failed} entries not saved (the first error: {first})")]
pub struct SaveManyError {
    /// How many entries were not saved.
    pub failed: usize,
    /// Why the first of them was not.
    pub first: StoreError,
}
