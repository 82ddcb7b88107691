//! Errors of the artifact store: an operation that failed, the path, and the io error.

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
    /// An entry or metadata file exists but could not be read.
    #[error("cannot read store file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// An entry or metadata file could not be written or moved into place.
    #[error("cannot write store file {path}: {source}")]
    Write {
        /// The file being written (its final path, not the temporary one).
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A file could not be removed by garbage collection.
    #[error("cannot remove store file {path}: {source}")]
    Remove {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A store directory could not be listed.
    #[error("cannot list store directory {path}: {source}")]
    Scan {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}
