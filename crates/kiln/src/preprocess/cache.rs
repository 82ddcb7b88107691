//! [`Preprocessor`]: lexed files kept across calls, so that the thousands of variants of a
//! shader lex each of its files once rather than once per variant.
//!
//! The loader is still asked for every file on every call, so that the pipeline records each
//! read as a dependency; only the lexing is skipped. An entry is reused only for the very
//! same text: the loader's `Arc<str>` (pointer-equal, the common case when the pipeline's
//! inputs hand out one `Arc` per revision) or an equal string. A file whose text changed is
//! lexed again and replaces the entry, so the cache never serves a stale file; it holds one
//! entry per path ever seen until [`Preprocessor::clear`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use rustc_hash::FxHashMap;

use super::closure::IncludeClosure;
use super::cpp::CLexed;
use super::error::PreprocessError;
use super::lexer::LexedFile;
use super::loader::{FileView, SourceLoader};
use super::{Dialect, PreprocessRequest, Preprocessed};

struct CachedFile<T> {
    source: Arc<str>,
    lexed: Arc<T>,
}

/// How often a [`Preprocessor`] reused a lexed file and how often it lexed one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Files whose lexed form was reused.
    pub hits: u64,
    /// Files lexed (first seen, or changed).
    pub misses: u64,
}

/// Preprocesses like [`super::preprocess`] and [`super::include_closure`], reusing the lexed
/// form of unchanged files across calls. Safe to share between threads.
#[derive(Default)]
pub struct Preprocessor {
    files: RwLock<FxHashMap<Arc<str>, CachedFile<LexedFile>>>,
    /// The same for the C preprocessor's tokens (GLSL, HLSL).
    c_files: RwLock<FxHashMap<Arc<str>, CachedFile<CLexed>>>,
    /// Every path seen, once: a run's files share these (and so do the pipeline's views).
    paths: RwLock<rustc_hash::FxHashSet<Arc<str>>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for Preprocessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preprocessor")
            .field("cached_files", &self.cached_files())
            .field("stats", &self.stats())
            .finish()
    }
}

impl Preprocessor {
    /// A preprocessor with an empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// [`super::preprocess`], with this cache.
    pub fn preprocess(
        &self,
        request: &PreprocessRequest<'_>,
        loader: &dyn SourceLoader,
    ) -> Result<Preprocessed, PreprocessError> {
        super::preprocess_with(request, loader, Some(self)).0
    }

    /// [`super::include_closure`], with this cache.
    pub fn include_closure(
        &self,
        entry: &Path,
        language: Dialect,
        include_dirs: &[PathBuf],
        loader: &dyn SourceLoader,
    ) -> Result<IncludeClosure, PreprocessError> {
        super::closure::include_closure_with(entry, language, include_dirs, loader, Some(self))
    }

    /// The hash of the part of `source` (the text of `path`) that `view` names (see
    /// [`FileView`]); `None` when the text no longer lexes.
    pub fn view_hash(&self, path: &str, source: &Arc<str>, view: &FileView) -> Option<[u8; 32]> {
        if view.is_c() {
            lex_c(Some(self), path, source)
                .ok()
                .map(|lexed| lexed.view_hash(view))
        } else {
            lex(Some(self), path, source)
                .ok()
                .map(|lexed| lexed.view_hash(view))
        }
    }

    /// `path`, shared with every other run that read it.
    pub(crate) fn shared_path(&self, path: &str) -> Arc<str> {
        if let Some(shared) = self.paths.read().get(path) {
            return Arc::clone(shared);
        }
        let mut paths = self.paths.write();
        if let Some(shared) = paths.get(path) {
            return Arc::clone(shared);
        }
        let shared: Arc<str> = Arc::from(path);
        paths.insert(Arc::clone(&shared));
        shared
    }

    /// How many files are cached.
    pub fn cached_files(&self) -> usize {
        self.files.read().len() + self.c_files.read().len()
    }

    /// Reuse counts since creation.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }

    /// Drops every cached file.
    pub fn clear(&self) {
        self.files.write().clear();
        self.c_files.write().clear();
    }

    /// The lexed form of `source`, the current text of `path`.
    fn lexed<T>(
        &self,
        map: &RwLock<FxHashMap<Arc<str>, CachedFile<T>>>,
        path: &str,
        source: &Arc<str>,
        lex: impl FnOnce(&str, &str) -> Result<T, PreprocessError>,
    ) -> Result<Arc<T>, PreprocessError> {
        if let Some(cached) = map.read().get(path) {
            if Arc::ptr_eq(&cached.source, source) || *cached.source == **source {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(Arc::clone(&cached.lexed));
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let lexed = Arc::new(lex(path, source)?);
        map.write().insert(
            path.into(),
            CachedFile {
                source: Arc::clone(source),
                lexed: Arc::clone(&lexed),
            },
        );
        Ok(lexed)
    }
}

/// Lexes `source` through `cache` when there is one.
pub(crate) fn lex(
    cache: Option<&Preprocessor>,
    path: &str,
    source: &Arc<str>,
) -> Result<Arc<LexedFile>, PreprocessError> {
    match cache {
        Some(cache) => cache.lexed(&cache.files, path, source, LexedFile::lex),
        None => LexedFile::lex(path, source).map(Arc::new),
    }
}

/// Lexes `source` into C preprocessing tokens through `cache` when there is one.
pub(crate) fn lex_c(
    cache: Option<&Preprocessor>,
    path: &str,
    source: &Arc<str>,
) -> Result<Arc<CLexed>, PreprocessError> {
    match cache {
        Some(cache) => cache.lexed(&cache.c_files, path, source, CLexed::lex),
        None => CLexed::lex(path, source).map(Arc::new),
    }
}
