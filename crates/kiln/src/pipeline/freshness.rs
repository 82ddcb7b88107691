//! Which outputs are already current, decided without preprocessing or loading anything:
//! an output is current when its index entry's input stamp equals the variant's stamp now
//! and the file on disk is, by its size, modification time and inode, the one kiln wrote
//! or verified. This is what makes a build in a new process cost about a stat per output.

use super::output::{is_output_path, write_output_path, Index, IndexEntry};
use super::queries::ArtifactsQ;
use super::stat::{DirStats, FileStat};
use super::{LastBuild, Project, VariantId};
use crate::identity::{self, Revision};
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
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

/// The stats of every variant's outputs at the paths kiln gives them, taken before the
/// previous index is known: a new process reads the index (a parse) while it stats the
/// outputs, instead of one after the other.
pub(super) struct ExpectedOutputs {
    /// Variant `i`'s output for target `j` at `i * extensions.len() + j`, in the order of
    /// the variants given to [`Project::stat_expected_outputs`].
    stats: Vec<Option<FileStat>>,
    /// The targets' file extensions, in the manifest's order.
    extensions: Vec<&'static str>,
}

impl ExpectedOutputs {
    /// The stat taken of `path` if it is one of the outputs of `variant`, at `at` in the
    /// variants stat'ed; `None` if it is not (an index edited by hand may put an entry
    /// anywhere).
    fn stat(&self, at: usize, variant: &VariantId, path: &str) -> Option<Option<FileStat>> {
        let target = self.extensions.iter().position(|extension| {
            is_output_path(
                path,
                &variant.shader,
                &variant.pass,
                &variant.keywords,
                extension,
            )
        })?;
        let position = at.checked_mul(self.extensions.len())?.checked_add(target)?;
        self.stats.get(position).copied()
    }
}

impl Project {
    /// Stats the outputs `variants` would have (see [`ExpectedOutputs`]), on the pool.
    pub(super) fn stat_expected_outputs(&self, variants: &[VariantId]) -> ExpectedOutputs {
        let extensions: Vec<&'static str> = self
            .manifest
            .targets
            .iter()
            .map(|config| config.target().extension())
            .collect();
        // Every output of a variant lies in its shader's and pass's directory.
        let parents: FxHashSet<String> = variants
            .iter()
            .map(|variant| format!("{}/{}/", variant.shader, variant.pass))
            .collect();
        let dirs = DirStats::open(&self.out_dir, parents.iter().map(String::as_str));
        let (dirs, extensions_ref) = (&dirs, &extensions);
        let stats = self.pool.install(|| {
            variants
                .par_iter()
                .flat_map_iter(|variant| {
                    let mut path = String::new();
                    extensions_ref.iter().map(move |extension| {
                        write_output_path(
                            &mut path,
                            &variant.shader,
                            &variant.pass,
                            &variant.keywords,
                            extension,
                        );
                        dirs.file_stat(&path)
                    })
                })
                .collect()
        });
        ExpectedOutputs { stats, extensions }
    }

    /// Splits `variants` into the index entries of those whose outputs are current (see the
    /// module documentation), as ascending positions in `last.index.entries`, and the
    /// variants the engine must look at. A variant this process already built goes to the
    /// engine, whose verification is cheaper still. `expected`, when given, holds the
    /// stats of `variants`' outputs (else they are taken here).
    pub(super) fn up_to_date(
        &self,
        last: &LastBuild,
        variants: Vec<VariantId>,
        revisions: &FxHashMap<Arc<str>, Revision>,
        expected: Option<&ExpectedOutputs>,
    ) -> (Vec<usize>, Vec<VariantId>) {
        // What this process built goes to the engine; the rest is looked up by stamp.
        let artifacts = self.db.query::<ArtifactsQ>();
        // Each variant with its position in `variants` (that of its expected outputs).
        type Numbered = Vec<(usize, VariantId)>;
        let (stale, variants): (Numbered, Numbered) = variants
            .into_iter()
            .enumerate()
            .partition(|(_, variant)| artifacts.database().has_memo::<ArtifactsQ>(variant));
        let mut stale: Vec<VariantId> = stale.into_iter().map(|(_, variant)| variant).collect();
        if variants.is_empty() {
            // Held for the whole build (grown by doubling: up to twice its size).
            stale.shrink_to_fit();
            return (Vec::new(), stale);
        }
        let by_stamp = entries_by_stamp(&last.index);
        let targets = self.manifest.targets.len();
        // Entries the expected stats do not cover are stat'ed by their own path.
        let outputs = match expected {
            Some(_) => DirStats::open(&self.out_dir, std::iter::empty()),
            None => DirStats::open(
                &self.out_dir,
                last.index.entries.iter().map(|entry| &*entry.path),
            ),
        };
        let file_stat = |at: usize, variant: &VariantId, path: &str| {
            expected
                .and_then(|expected| expected.stat(at, variant, path))
                .unwrap_or_else(|| outputs.file_stat(path))
        };
        let checked: Vec<Result<Vec<usize>, VariantId>> = self.pool.install(|| {
            variants
                .into_par_iter()
                .map(|(at, variant)| {
                    let entries = input_stamp(&variant, revisions)
                        .and_then(|stamp| by_stamp.get(stamp.as_str()))
                        .filter(|entries| entries.len() == targets);
                    let current = entries.filter(|entries| {
                        entries.iter().all(|&(_, e)| {
                            !e.stale
                                && !last.suspect.contains(&*e.path)
                                && file_stat(at, &variant, &e.path)
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
