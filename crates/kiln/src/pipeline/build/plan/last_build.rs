//! What the previous build left in the output directory, as this process knows it: kept in
//! memory after a build, else read from `index.json` and `.kiln-stat` — in a new process on
//! a thread of its own, while this one hashes the sources and the pool stats the outputs.

use super::freshness::ExpectedOutputs;
use crate::pipeline::engine::queries::RevisionQ;
use crate::pipeline::engine::scope::Revisions;
use crate::pipeline::out_dir::stat::OutputStats;
use crate::pipeline::VariantId;
use crate::pipeline::{Diagnostic, Index, Project, ProjectError, INDEX_FILE};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

/// What a build left in the output directory, as this process knows it.
pub(crate) struct LastBuild {
    /// Its index, entries sorted by path.
    pub index: Index,
    pub stats: OutputStats,
    /// The index was written by this process: every entry names bytes this process wrote
    /// or verified, so an output whose artifact has the entry's hash needs no look on disk
    /// in the next build, unless [`LastBuild::suspect`] names it.
    pub written_here: bool,
    /// Outputs (index paths) someone else may have changed since: checked on disk next time.
    pub suspect: BTreeSet<String>,
    /// `index.json` or `.kiln-stat` changed behind kiln's back: rewrite them.
    pub index_suspect: bool,
}

/// The previous build as read: its outputs, every shader's revision now, the stats taken
/// ahead of the index (in a new process), and warnings about what was ignored.
pub(super) struct ReadBack {
    pub last: LastBuild,
    pub revisions: Revisions,
    pub expected: Option<ExpectedOutputs>,
    pub warnings: Vec<Diagnostic>,
}

impl LastBuild {
    /// What `out_dir` says of the previous build, with warnings about what was ignored.
    fn read(out_dir: &Path) -> Result<(Self, Vec<Diagnostic>), ProjectError> {
        let (mut index, warnings) = Index::read_own(out_dir)?;
        // Sorted by path, as kiln writes it, also when edited by hand: lookups bisect, and a
        // shuffled file is rewritten.
        let sorted = index.entries.is_sorted_by(|a, b| a.path <= b.path);
        index.entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        let last = LastBuild {
            index,
            stats: OutputStats::read(out_dir),
            written_here: false,
            suspect: BTreeSet::new(),
            index_suspect: !sorted,
        };
        Ok((last, warnings))
    }
}

impl Project {
    /// The previous build's outputs (in memory, or read from the output directory), every
    /// shader's revision now, and, in a new process, the stats of `variants`' outputs.
    ///
    /// In a new process the previous build is read from the output directory (`index.json`
    /// parsed, `.kiln-stat` decoded) on a thread of its own while this one hashes the
    /// sources and the pool stats the outputs at the paths kiln gives them: in a warm build
    /// the parse and the stats take about as long, and none of the three needs another.
    pub(super) fn read_last_build(
        &mut self,
        variants: &[VariantId],
    ) -> Result<ReadBack, ProjectError> {
        if let Some(last) = self.last.take() {
            let revisions = self.revisions();
            return Ok(ReadBack {
                last,
                revisions,
                expected: None,
                warnings: Vec::new(),
            });
        }
        // Nothing to stat ahead when there is no index (a cold build).
        let stat_ahead = std::fs::symlink_metadata(self.out_dir.join(INDEX_FILE))
            .is_ok_and(|meta| meta.is_file());
        let out_dir = &self.out_dir;
        let this = &*self;
        std::thread::scope(|scope| {
            let reading = std::thread::Builder::new()
                .name("kiln-index".into())
                .spawn_scoped(scope, || LastBuild::read(out_dir));
            let read = || match reading {
                Ok(reading) => reading
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                // No thread to be had: read it here.
                Err(_) => LastBuild::read(out_dir),
            };
            // The pool stats the outputs while this thread hashes the sources and waits for
            // the index, then helps with the stats: the parse cannot be shared, the stats
            // can, so the parse is not made to share a core with them.
            let (expected, (revisions, read)) = if stat_ahead {
                let (expected, read) =
                    this.stat_expected_outputs(variants, || (this.revisions(), read()));
                (Some(expected), read)
            } else {
                (None, (this.revisions(), read()))
            };
            let (last, warnings) = read?;
            Ok(ReadBack {
                last,
                revisions,
                expected,
                warnings,
            })
        })
    }

    /// Every shader's current source revision; shaders whose revision cannot be computed
    /// are absent (their variants fail with the reason).
    pub(in crate::pipeline) fn revisions(&self) -> Revisions {
        Revisions::new(self.manifest.shaders.iter().filter_map(|shader| {
            let name: Arc<str> = Arc::from(shader.name.as_str());
            match self.db.get::<RevisionQ>(&name) {
                Ok(Ok(revision)) => Some((name, revision)),
                _ => None,
            }
        }))
    }
}
