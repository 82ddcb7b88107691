//! The end of a build that writes outputs: outputs nobody produces any more are removed (a
//! failed variant's are kept and marked stale on request), and `index.json` and
//! `.kiln-stat` are written when they changed.

use super::{Failed, IndexParts};
use crate::pipeline::build::plan::LastBuild;
use crate::pipeline::engine::scope::Revisions;
use crate::pipeline::out_dir::holds::find;
use crate::pipeline::out_dir::stat::{FileStat, OutputStats};
use crate::pipeline::out_dir::{self, Index, IndexEntry, INDEX_FILE};
use crate::pipeline::{Diagnostic, Project, ProjectError, VariantId};
use std::collections::BTreeSet;
use std::sync::Arc;

/// What retiring outputs did.
#[derive(Default)]
pub(in crate::pipeline) struct Retired {
    /// Outputs removed.
    pub removed: usize,
    /// Outputs left alone or that could not be removed.
    pub warnings: Vec<Diagnostic>,
}

impl Project {
    /// Makes the new index from the entries still `current` (positions in the last index)
    /// and those built, retires what the last index had and the new one lacks, and writes
    /// the index and the stats if they changed.
    pub(super) fn retire_and_index(
        &mut self,
        mut last: LastBuild,
        current: Vec<usize>,
        parts: IndexParts<'_>,
    ) -> Result<Retired, ProjectError> {
        let IndexParts {
            entries: built,
            failures,
            revisions,
        } = parts;
        // Every entry of the last index still current (a no-op build, or one that only
        // added variants): they are moved, not copied, and none is retired. Positions are
        // distinct, so equal counts mean all of them.
        let all_current = current.len() == last.index.entries.len();
        let mut entries = merge_entries(&mut last.index, &current, all_current, built);
        let mut retired = Retired::default();
        let mut stats = std::mem::take(&mut last.stats);
        let kept = self.retire(
            &last,
            &entries,
            (&failures, revisions),
            &mut stats,
            &mut retired,
        );
        if !kept.is_empty() {
            entries.extend(kept);
            entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        }
        let index = Index {
            kiln_version: crate::base::KILN_VERSION.to_owned(),
            entries,
            failures: failures.into_index(),
        };
        // With the entries moved out of `last.index`, it holds them iff nothing was added.
        let unchanged = if all_current {
            index.entries.len() == current.len()
                && index.failures == last.index.failures
                && index.kiln_version == last.index.kiln_version
        } else {
            index == last.index
        };
        let stats = self.write_index_files(&index, stats, unchanged, last.index_suspect)?;
        self.last = Some(LastBuild {
            index,
            stats,
            written_here: true,
            suspect: BTreeSet::new(),
            index_suspect: false,
        });
        Ok(retired)
    }

    /// Removes the outputs of `last` that `entries` lacks: those of variants or targets
    /// that left the manifest, and a failed variant's (kept instead, marked stale, with
    /// `keep_failed_outputs`: those are returned).
    fn retire(
        &self,
        last: &LastBuild,
        entries: &[IndexEntry],
        (failures, revisions): (&Failed, &Revisions),
        stats: &mut OutputStats,
        retired: &mut Retired,
    ) -> Vec<IndexEntry> {
        let out_dir = &self.out_dir;
        let mut kept = Vec::new();
        for old in &last.index.entries {
            if find(entries, &old.path).is_some() {
                continue;
            }
            let variant = VariantId {
                shader: Arc::clone(&old.variant.shader),
                pass: Arc::clone(&old.variant.pass),
                keywords: Arc::clone(&old.variant.keywords),
            };
            let target_kept = self
                .manifest
                .targets
                .iter()
                .any(|t| t.target().name() == &*old.target);
            // A kept output must still be kiln's bytes: one edited behind kiln's back is
            // removed like a retired one.
            if self.keep_failed_outputs
                && target_kept
                && failures.pair(&variant, &old.target)
                && !last.suspect.contains(&*old.path)
            {
                let mut stale = old.clone();
                stale.stale = true;
                stale.failed_revision = revisions.get(&variant.shader).map(|r| Box::from(&*r.name));
                kept.push(stale);
                continue;
            }
            let path = out_dir.join(&*old.path);
            match out_dir::remove_output(out_dir, old) {
                Ok(true) => retired.removed += 1,
                // Not provably kiln's bytes any more: left alone, and said so.
                Ok(false) if path.exists() => retired.warnings.push(Diagnostic::warning(format!(
                    "left {} alone: it no longer holds the bytes kiln wrote",
                    path.display()
                ))),
                Ok(false) => {}
                Err(e) => retired.warnings.push(Diagnostic::warning(format!(
                    "cannot remove retired output {}: {e}",
                    path.display()
                ))),
            }
            stats.forget(&old.path);
        }
        kept
    }

    /// Writes `index.json` unless `unchanged`, and `.kiln-stat` when its records changed,
    /// each also when it was `suspect` (changed behind kiln's back); returns the stats.
    fn write_index_files(
        &self,
        index: &Index,
        mut stats: OutputStats,
        unchanged: bool,
        suspect: bool,
    ) -> Result<OutputStats, ProjectError> {
        let out_dir = &self.out_dir;
        let index_error = |source| ProjectError::Output {
            path: out_dir.join(INDEX_FILE),
            source,
        };
        if !unchanged || suspect {
            let meta = index.write(out_dir).map_err(index_error)?;
            stats.record(INDEX_FILE, FileStat::of(&meta));
        }
        if !unchanged {
            stats.retain_only(
                std::iter::once(INDEX_FILE).chain(index.entries.iter().map(|e| &*e.path)),
            );
        }
        if stats.needs_write() || suspect {
            stats.seal_and_write(out_dir).map_err(index_error)?;
        }
        Ok(stats)
    }
}

/// The new index's entries, sorted by path: the last index's entries at the positions
/// `current` (moved out when that is all of them) and those `built` in this build.
fn merge_entries(
    last: &mut Index,
    current: &[usize],
    all_current: bool,
    built: Vec<IndexEntry>,
) -> Vec<IndexEntry> {
    let mut entries = if all_current {
        std::mem::take(&mut last.entries)
    } else {
        current.iter().map(|&at| last.entries[at].clone()).collect()
    };
    if entries.is_empty() {
        entries = built;
    } else {
        entries.extend(built);
    }
    // In place: paths are distinct, and a stable sort allocates half the entries again
    // (12 MB at 40,000 variants, at the build's peak).
    entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    entries
}
