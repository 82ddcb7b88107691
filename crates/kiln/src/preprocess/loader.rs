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
use crate::boundary::{read_project_file, DEFAULT_MAX_SOURCE_BYTES};

/// Reads a source file by its project-root-relative, normalised, `/`-separated path.
///
/// A file that does not exist must be reported as [`io::ErrorKind::NotFound`]: the
/// preprocessor reports it as a missing include, and the include closure lists it as missing.
pub trait SourceLoader {
    /// The file's full text.
    fn load(&self, path: &Path) -> Result<Arc<str>, io::Error>;

    /// The file's full text, for a run that will say through [`SourceLoader::viewed`]
    /// which part of it the output depends on. A loader that records reads as dependencies
    /// may record this one as that part alone; a failed read must be recorded as `load`
    /// records it. By default, `load`.
    fn load_viewed(&self, path: &Path) -> Result<Arc<str>, io::Error> {
        self.load(path)
    }

    /// After a run, for each file it read through [`SourceLoader::load_viewed`] (its path,
    /// shared by every run of the same [`super::Preprocessor`], so a loader may keep it):
    /// the part of the text the run's output (or its error) depends on. By default, nothing.
    fn viewed(&self, path: &Arc<str>, view: &FileView) {
        let _ = (path, view);
    }
}

/// The part of a file one preprocessing run depends on: every directive line, and the code
/// lines of the conditional blocks the run found active (a block is the run of code lines
/// after a directive, numbered by the directives before it). An edit that changes only code
/// lines in other blocks leaves the run's output as it was, line map included.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FileView {
    /// Lines as the C preprocessor reads them (GLSL, HLSL), else as WGSL's.
    c: bool,
    active_blocks: Blocks,
}

/// Bit `b` of word `b / 64`: block `b` was active. Most files have fewer than 64 blocks:
/// their view is one word, kept inline (the pipeline keys a query by each distinct view).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Blocks {
    One(u64),
    Many(Arc<[u64]>),
}

impl FileView {
    pub(crate) fn new(c: bool, mut active_blocks: Vec<u64>) -> Self {
        while active_blocks.len() > 1 && active_blocks.last() == Some(&0) {
            active_blocks.pop();
        }
        let active_blocks = match active_blocks[..] {
            [] => Blocks::One(0),
            [word] => Blocks::One(word),
            _ => Blocks::Many(active_blocks.into()),
        };
        Self { c, active_blocks }
    }

    /// Marks block `block` active in a view being gathered.
    pub(crate) fn mark(active_blocks: &mut Vec<u64>, block: usize) {
        let word = block / 64;
        if active_blocks.len() <= word {
            active_blocks.resize(word + 1, 0);
        }
        active_blocks[word] |= 1 << (block % 64);
    }

    pub(crate) fn is_c(&self) -> bool {
        self.c
    }

    /// The hash of a file's lines under this view: `hash_line` feeds each directive line
    /// and each line of an active block (blocks numbered by the directives before them, as
    /// the drivers number them) to the hasher, after `tag` and the view itself.
    pub(crate) fn hash<L>(
        &self,
        tag: &[u8],
        lines: &[L],
        is_directive: impl Fn(&L) -> bool,
        mut hash_line: impl FnMut(&mut blake3::Hasher, &L),
    ) -> [u8; 32] {
        let mut hasher = blake3::Hasher::new();
        hasher.update(tag);
        for word in self.words() {
            hasher.update(&word.to_le_bytes());
        }
        let mut block = 0;
        for line in lines {
            let directive = is_directive(line);
            if directive || self.block_active(block) {
                hasher.update(&[u8::from(directive)]);
                hash_line(&mut hasher, line);
            }
            if directive {
                block += 1;
            }
        }
        *hasher.finalize().as_bytes()
    }

    pub(crate) fn block_active(&self, block: usize) -> bool {
        self.words()
            .get(block / 64)
            .is_some_and(|word| word & (1 << (block % 64)) != 0)
    }

    pub(crate) fn words(&self) -> &[u64] {
        match &self.active_blocks {
            Blocks::One(word) => std::slice::from_ref(word),
            Blocks::Many(words) => words,
        }
    }
}

impl<F> SourceLoader for F
where
    F: Fn(&Path) -> Result<Arc<str>, io::Error>,
{
    fn load(&self, path: &Path) -> Result<Arc<str>, io::Error> {
        self(path)
    }
}

/// Reads files under a project root on disk, through the project boundary
/// ([`crate::boundary::read_project_file`]): by their real paths, inside the root (a symbolic
/// link that leaves it is refused), regular files only, at most
/// [`crate::boundary::DEFAULT_MAX_SOURCE_BYTES`] unless [`DiskLoader::with_max_bytes`] says
/// otherwise. A missing file is [`io::ErrorKind::NotFound`]; every other refusal carries
/// the boundary's reason.
#[derive(Clone, Debug)]
pub struct DiskLoader {
    root: PathBuf,
    max_bytes: u64,
}

impl DiskLoader {
    /// A loader for the project whose root directory is `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            max_bytes: DEFAULT_MAX_SOURCE_BYTES,
        }
    }

    /// The same loader with another cap on the size of one file (a project's
    /// `max_source_bytes`).
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
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
        read_project_file(&self.root, Path::new(&relative), self.max_bytes)
            .map(Arc::from)
            .map_err(|refused| refused.to_io_error())
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
