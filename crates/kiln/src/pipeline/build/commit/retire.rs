//! The end of a build that writes outputs: outputs nobody produces any more are removed (a
//! failed variant's are kept and marked stale on request), and `index.json` and
//! `.kiln-stat` are written when they changed.

use super::{Failed, IndexParts};
use crate::pipeline::build::plan::LastBuild;
use crate::pipeline::engine::scope::Revisions;
use crate::pipeline::out_dir::holds::{find, holds};
use crate::pipeline::out_dir::pack::{self, pack_file_name, IndexPack};
use crate::pipeline::out_dir::stat::{FileStat, OutputStats};
use crate::pipeline::out_dir::{self, Index, IndexEntry, INDEX_FILE};
use crate::pipeline::{Diagnostic, Project, ProjectError, VariantId};
use rayon::prelude::*;
use std::collections::BTreeSet;
use std::sync::Arc;

/// What retiring outputs did.
#[derive(Default)]
pub(in crate::pipeline) struct Retired {
    /// Outputs removed.
    pub removed: usize,
    /// Outputs left alone or that could not be removed, and packs that could not be
    /// written.
    pub warnings: Vec<Diagnostic>,
    /// Packs written.
    pub packs_written: usize,
    /// Packs that could not be written.
    pub packs_failed: usize,
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
        let mut index = Index {
            kiln_version: crate::base::KILN_VERSION.to_owned(),
            entries,
            failures: failures.into_index(),
            packs: Vec::new(),
        };
        // With the entries moved out of `last.index`, it holds them iff nothing was added.
        let outputs_unchanged = if all_current {
            index.entries.len() == current.len()
                && index.failures == last.index.failures
                && index.kiln_version == last.index.kiln_version
        } else {
            index.entries == last.index.entries
                && index.failures == last.index.failures
                && index.kiln_version == last.index.kiln_version
        };
        index.packs = self.write_packs(&last, &index, outputs_unchanged, &mut stats, &mut retired);
        let unchanged = outputs_unchanged && index.packs == last.index.packs;
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
            match out_dir::remove_output(out_dir, &old.recorded()) {
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

    /// The packs `[output] layout` asks for, one per target, made from `index`'s outputs:
    /// those of the last build kept when its outputs are unchanged and the files still hold
    /// them, the others written; packs no longer asked for removed. A pack that cannot be
    /// made is an error and leaves no pack behind: an old one would serve stale bytes.
    fn write_packs(
        &self,
        last: &LastBuild,
        index: &Index,
        outputs_unchanged: bool,
        stats: &mut OutputStats,
        retired: &mut Retired,
    ) -> Vec<IndexPack> {
        let out_dir = &self.out_dir;
        let wanted: Vec<&'static str> = match self.manifest.output.layout.packs() {
            // Reflection is no pack of its own: it is each entry's reflection blob.
            true => (self.manifest.targets.iter())
                .map(|t| t.target())
                .filter(|t| t.is_shader())
                .map(|t| t.name())
                .collect(),
            false => Vec::new(),
        };
        let mut packs = Vec::with_capacity(wanted.len());
        for old in &last.index.packs {
            let kept =
                wanted.contains(&old.target.as_str()) && old.path == pack_file_name(&old.target);
            if kept {
                continue;
            }
            stats.forget(&old.path);
            let path = out_dir.join(&old.path);
            match out_dir::remove_output(out_dir, &old.recorded()) {
                Ok(true) => retired.removed += 1,
                Ok(false) if path.exists() => retired.warnings.push(Diagnostic::warning(format!(
                    "left {} alone: it no longer holds the pack kiln wrote",
                    path.display()
                ))),
                Ok(false) => {}
                Err(e) => retired.warnings.push(Diagnostic::warning(format!(
                    "cannot remove retired pack {}: {e}",
                    path.display()
                ))),
            }
        }
        // The packs kept as they are, then those to write: one per core.
        let mut to_write = Vec::new();
        for target in wanted {
            let old = last.index.packs.iter().find(|p| p.target == target);
            match old.filter(|_| outputs_unchanged) {
                Some(old)
                    if old.path == pack_file_name(target)
                        && holds(out_dir, &old.recorded(), stats) =>
                {
                    packs.push(old.clone())
                }
                _ => to_write.push((target, old)),
            }
        }
        if to_write.is_empty() {
            return packs;
        }
        let reflections = pack::Reflections::read(out_dir, &index.entries);
        let written: Vec<_> = self.pool.install(|| {
            to_write
                .par_iter()
                .map(|&(target, old)| {
                    let reflections = reflections.as_ref().map_err(Clone::clone)?;
                    // The bytes it shares with the pack it replaces come from that one
                    // (verified by hash as they are read), not from thousands of loose files.
                    let previous = old
                        .and_then(|old| kiln_runtime::Library::open(out_dir.join(&old.path)).ok());
                    let manifest = &self.manifest;
                    let entries = &index.entries;
                    pack::write_pack(
                        out_dir,
                        target,
                        manifest,
                        entries,
                        previous.as_ref(),
                        reflections,
                    )
                })
                .collect()
        });
        for ((target, old), made) in to_write.into_iter().zip(written) {
            match made {
                Ok((record, stat)) => {
                    stats.record(&record.path, stat);
                    packs.push(record);
                    retired.packs_written += 1;
                }
                Err(why) => {
                    // Whatever pack is there no longer describes the outputs.
                    let name = pack_file_name(target);
                    let stale = out_dir.join(&name);
                    if old.is_some() && std::fs::remove_file(&stale).is_ok() {
                        retired.removed += 1;
                    }
                    stats.forget(&name);
                    retired.packs_failed += 1;
                    retired.warnings.push(Diagnostic::error(format!(
                        "cannot write the {target} pack {}: {why}",
                        stale.display()
                    )));
                }
            }
        }
        // In the manifest's target order, whichever finished first.
        packs.sort_by_key(|p| {
            let targets = self.manifest.targets.iter();
            targets
                .map(|t| t.target().name())
                .position(|t| t == p.target)
        });
        packs
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
                std::iter::once(INDEX_FILE)
                    .chain(index.entries.iter().map(|e| &*e.path))
                    .chain(index.packs.iter().map(|p| p.path.as_str())),
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
