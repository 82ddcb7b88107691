//! Reading the project's files before variants run: every file of every pass source's
//! include closure becomes an engine input, so that queries never meet a file the pipeline
//! has not read.
//!
//! The engine's include-closure queries find what is missing; the files they could not see
//! yet are then found by one walk per source straight over the disk, so a chain of N nested
//! includes costs one walk, not N rounds of queries.

use crate::boundary::SourceReadError;
use crate::pipeline::engine::queries::{ClosureKey, ClosureQ, SourceFile};
use crate::pipeline::Project;
use parking_lot::Mutex;
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

type SourceText = Result<Arc<str>, SourceReadError>;

/// Walks over the disk after which the engine must see every file; a file that changes
/// during discovery can need a second one, and nothing more is useful.
const MAX_WALKS: usize = 4;

impl Project {
    pub(in crate::pipeline) fn discover_files(&mut self) {
        let sources: BTreeSet<ClosureKey> = self
            .manifest
            .shaders
            .iter()
            .flat_map(|s| s.passes.iter().map(|p| ClosureKey::of(p, s)))
            .collect();
        let unread: BTreeSet<PathBuf> = sources
            .iter()
            .map(|s| s.source.clone())
            .filter(|s| !self.known_files.contains(s))
            .collect();
        for source in unread {
            let text = self.read_text(&source);
            self.set_file(source, text);
        }
        for _ in 0..MAX_WALKS {
            let incomplete = self.sources_with_unread_includes(&sources);
            if incomplete.is_empty() {
                return;
            }
            let found = self.walk_from_disk(&incomplete);
            if found.is_empty() {
                return;
            }
            for (path, text) in found {
                self.set_file(path, text);
            }
        }
    }

    /// The sources whose include closure names a file the engine has no input for, or
    /// failed (it may have stopped before files it could read).
    fn sources_with_unread_includes(&self, sources: &BTreeSet<ClosureKey>) -> Vec<ClosureKey> {
        let db = &self.db;
        let known = &self.known_files;
        self.pool.install(|| {
            sources
                .par_iter()
                .filter(|source| match db.get::<ClosureQ>(*source) {
                    Ok(Ok(closure)) => closure.missing.iter().any(|m| !known.contains(&m.path)),
                    _ => true,
                })
                .cloned()
                .collect()
        })
    }

    /// The include closures of `sources`, reading from disk each file the engine does not
    /// know; returns those files with their texts or why they could not be read.
    fn walk_from_disk(&self, sources: &[ClosureKey]) -> BTreeMap<PathBuf, SourceText> {
        let found: Mutex<BTreeMap<PathBuf, SourceText>> = Mutex::default();
        let loader = |path: &Path| -> Result<Arc<str>, io::Error> {
            let text = match self.db.input::<SourceFile>(&path.to_path_buf()) {
                Some(text) => text,
                None => {
                    let text = self.read_text(path);
                    found.lock().insert(path.to_owned(), text.clone());
                    text
                }
            };
            text.map_err(|e| e.to_io_error())
        };
        let preprocessor = &self.db.context().preprocessor;
        for source in sources {
            // Errors are reported by the engine's own closure query once its files are read.
            let _ = preprocessor.include_closure(
                &source.source,
                source.language,
                &source.include_dirs,
                &loader,
            );
        }
        found.into_inner()
    }
}
