//! Which outputs are already current, decided without preprocessing or loading anything:
//! an output is current when its index entry's input stamp equals the variant's stamp now
//! and the file on disk is, by its size, modification time and inode, the one kiln wrote
//! or verified. This is what makes a build in a new process cost about a stat per output.

use super::output::{Index, IndexEntry};
use super::queries::ArtifactsQ;
use super::stat::DirStats;
use super::{LastBuild, Project, VariantId};
use crate::identity::{self, Revision};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// [`identity::input_stamp`] of `variant` at its shader's current revision; `None` when the
/// revision cannot be computed (the build reports why).
fn input_stamp(variant: &VariantId, revisions: &FxHashMap<Arc<str>, Revision>) -> Option<String> {
    let revision = revisions.get(&variant.shader)?;
    Some(identity::input_stamp(
        revision,
        &variant.pass,
        variant.keywords.iter().map(|k| &**k),
    ))
}

impl Project {
    /// Splits `variants` into the index entries of those whose outputs are current (see the
    /// module documentation), as ascending positions in `last.index.entries`, and the
    /// variants the engine must look at. A variant this process already built goes to the
    /// engine, whose verification is cheaper still.
    pub(super) fn up_to_date(
        &self,
        last: &LastBuild,
        variants: Vec<VariantId>,
        revisions: &FxHashMap<Arc<str>, Revision>,
    ) -> (Vec<usize>, Vec<VariantId>) {
        // What this process built goes to the engine; the rest is looked up by stamp.
        let artifacts = self.db.query::<ArtifactsQ>();
        let (mut stale, variants): (Vec<VariantId>, Vec<VariantId>) = variants
            .into_iter()
            .partition(|variant| artifacts.database().has_memo::<ArtifactsQ>(variant));
        if variants.is_empty() {
            // Held for the whole build (grown by doubling: up to twice its size).
            stale.shrink_to_fit();
            return (Vec::new(), stale);
        }
        let by_stamp = entries_by_stamp(&last.index);
        let targets = self.manifest.targets.len();
        let outputs = DirStats::open(
            &self.out_dir,
            last.index.entries.iter().map(|entry| &*entry.path),
        );
        let checked: Vec<Result<Vec<usize>, VariantId>> = self.pool.install(|| {
            variants
                .into_par_iter()
                .map(|variant| {
                    let entries = input_stamp(&variant, revisions)
                        .and_then(|stamp| by_stamp.get(stamp.as_str()))
                        .filter(|entries| entries.len() == targets);
                    let current = entries.filter(|entries| {
                        entries.iter().all(|&(_, e)| {
                            !e.stale
                                && !last.suspect.contains(&*e.path)
                                && outputs
                                    .file_stat(&e.path)
                                    .is_some_and(|stat| last.stats.trusts(&e.path, &stat))
                        })
                    });
                    match current {
                        Some(entries) => Ok(entries.iter().map(|&(at, _)| at).collect()),
                        None => Err(variant),
                    }
                })
                .collect()
        });
        let mut current = Vec::new();
        for result in checked {
            match result {
                Ok(entries) => current.extend(entries),
                Err(variant) => stale.push(variant),
            }
        }
        current.sort_unstable();
        stale.shrink_to_fit();
        (current, stale)
    }
}

/// The index's entries (with their positions) by input stamp.
fn entries_by_stamp(index: &Index) -> FxHashMap<&str, Vec<(usize, &IndexEntry)>> {
    let mut by_stamp: FxHashMap<&str, Vec<(usize, &IndexEntry)>> = FxHashMap::default();
    for (at, entry) in index.entries.iter().enumerate() {
        by_stamp
            .entry(&*entry.variant.inputs)
            .or_default()
            .push((at, entry));
    }
    by_stamp
}
