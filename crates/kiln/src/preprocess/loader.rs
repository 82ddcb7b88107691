//! Where source text comes from: the [`SourceLoader`] the caller provides.
//!
//! The preprocessor never touches the disk itself: the pipeline routes every read through the
//! incremental engine's inputs, so that each file read becomes a tracked dependency.
//! [`DiskLoader`] (tools, tests) and [`MemoryLoader`] (tests, benches) are simple loaders.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::path::normalize_entry;

/// Reads a source file by its project-root-relative, normalised, `/`-separated path.
///
/// A file that does not exist must be reported as [`io::ErrorKind::NotFound`]: the
/// preprocessor reports it as a missing include, and the include closure lists it as missing.
pub trait SourceLoader {
    /// The file's full text.
    fn load(&self, path: &Path) -> Result<Arc<str>, io::Error>;
}

impl<F> SourceLoader for F
where
    F: Fn(&Path) -> Result<Arc<str>, io::Error>,
{
    fn load(&self, path: &Path) -> Result<Arc<str>, io::Error> {
        self(path)
    }
}

/// Reads files under a project root on disk.
///
/// Confinement is lexical (done by the preprocessor on the path); a symbolic link inside the
/// root that points outside it is followed.
#[derive(Clone, Debug)]
pub struct DiskLoader {
    root: PathBuf,
}

impl DiskLoader {
    /// A loader for the project whose root directory is `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The project root.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl SourceLoader for DiskLoader {
    fn load(&self, path: &Path) -> Result<Arc<str>, io::Error> {
        // A direct caller could pass anything; the preprocessor always passes clean paths.
        let relative = normalize_entry(path).map_err(|problem| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: {problem}", path.display()),
            )
        })?;
        std::fs::read_to_string(self.root.join(relative)).map(Arc::from)
    }
}

/// Source files held in memory, by root-relative path.
#[derive(Clone, Debug, Default)]
pub struct MemoryLoader {
    files: BTreeMap<PathBuf, Arc<str>>,
}

impl MemoryLoader {
    /// An empty set of files.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a file; `path` is root-relative and `/`-separated.
    pub fn insert(&mut self, path: impl Into<PathBuf>, text: impl Into<Arc<str>>) {
        self.files.insert(path.into(), text.into());
    }

    /// Removes a file, returning its text.
    pub fn remove(&mut self, path: &Path) -> Option<Arc<str>> {
        self.files.remove(path)
    }
}

impl SourceLoader for MemoryLoader {
    fn load(&self, path: &Path) -> Result<Arc<str>, io::Error> {
        self.files.get(path).cloned().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} not found", path.display()),
            )
        })
    }
}
