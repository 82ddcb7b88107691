//! Which outputs are already current, decided without preprocessing or loading anything:
//! an output is current when its index entry's input stamp equals the variant's stamp now
//! and the file on disk is, by its size, modification time and inode, the one kiln wrote
//! or verified. This is what makes a build in a new process cost about a stat per output.

use super::LastBuild;
use crate::pipeline::engine::queries::ArtifactsQ;
use crate::pipeline::engine::scope::Revisions;
use crate::pipeline::out_dir::stat::{DirStats, FileStat};
use crate::pipeline::out_dir::{is_output_path, write_output_path, Index, IndexEntry};
use crate::pipeline::{Project, VariantId};
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Variants one thread checks at a time: small enough that the threads finish together,
/// large enough that claiming a chunk costs nothing.
const CHUNK: usize = 32;

/// `work` on each [`CHUNK`] of `items`, once each, on every worker of `pool` and on this
/// thread once it has run `meanwhile`; the results in chunk order. Unlike `pool.install`,
/// the thread that asks does its share instead of waiting: under `--jobs 1` a warm build
/// would otherwise keep one core idle while the pool's one worker checks every output.
fn on_pool_and_here<I: Sync, T: Send + Sync, R>(
    pool: &rayon::ThreadPool,
    items: &[I],
    work: impl Fn(&[I]) -> T + Sync,
    meanwhile: impl FnOnce() -> R,
) -> (Vec<T>, R) {
    let chunks: Vec<&[I]> = items.chunks(CHUNK).collect();
    let results: Vec<OnceLock<T>> = chunks.iter().map(|_| OnceLock::new()).collect();
    let next = AtomicUsize::new(0);
    let help = || loop {
        let claimed = next.fetch_add(1, Ordering::Relaxed);
        let (Some(chunk), Some(slot)) = (chunks.get(claimed), results.get(claimed)) else {
            return;
        };
        // Only the thread that claimed the chunk sets its slot.
        let _ = slot.set(work(chunk));
    };
    let help = &help;
    let done = pool.in_place_scope(|scope| {
        for _ in 0..pool.current_num_threads() {
            scope.spawn(move |_| help());
        }
        let done = meanwhile();
        help();
        done
    });
    let results = results
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .expect("every chunk is claimed before the scope ends")
        })
        .collect();
    (results, done)
}

/// The variants a build must run, and the outputs it can keep as they are.
pub(super) struct Fresh {
    /// Ascending positions in the last index of the entries still current.
    pub current: Vec<usize>,
    /// The variants those entries belong to.
    pub current_variants: usize,
    /// The variants the engine must look at.
    pub stale: Vec<VariantId>,
}

/// The stats of every variant's outputs at the paths kiln gives them, taken before the
/// previous index is known: a new process reads the index (a parse) while it stats the
/// outputs, instead of one after the other.
pub(crate) struct ExpectedOutputs {
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
    /// Stats the outputs `variants` would have (see [`ExpectedOutputs`]) on the pool's
    /// workers while this thread runs `meanwhile`, and on this thread too once that is
    /// done: in a warm build the stats are the longest of the three reads, and the thread
    /// that asked would otherwise wait idle for them.
    pub(super) fn stat_expected_outputs<R>(
        &self,
        variants: &[VariantId],
        meanwhile: impl FnOnce() -> R,
    ) -> (ExpectedOutputs, R) {
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
        let (chunks, done) = on_pool_and_here(
            &self.pool,
            variants,
            |chunk| {
                let mut path = String::new();
                let mut stats = Vec::with_capacity(chunk.len() * extensions.len());
                for variant in chunk {
                    for extension in &extensions {
                        write_output_path(
                            &mut path,
                            &variant.shader,
                            &variant.pass,
                            &variant.keywords,
                            extension,
                        );
                        stats.push(dirs.file_stat(&path));
                    }
                }
                stats
            },
            meanwhile,
        );
        let stats = chunks.into_iter().flatten().collect();
        (ExpectedOutputs { stats, extensions }, done)
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
        revisions: &Revisions,
        expected: Option<&ExpectedOutputs>,
    ) -> Fresh {
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
            return Fresh {
                current: Vec::new(),
                current_variants: 0,
                stale,
            };
        }
        let check = CurrentCheck {
            by_stamp: entries_by_stamp(&last.index),
            targets: self.manifest.targets.len(),
            // Entries the expected stats do not cover are stat'ed by their own path.
            outputs: match expected {
                Some(_) => DirStats::open(&self.out_dir, std::iter::empty()),
                None => DirStats::open(
                    &self.out_dir,
                    last.index.entries.iter().map(|entry| &*entry.path),
                ),
            },
            expected,
            last,
            revisions,
        };
        let check = |numbered: &(usize, VariantId)| check.entries(numbered);
        let (checked, ()) = on_pool_and_here(
            &self.pool,
            &variants,
            |chunk| chunk.iter().map(check).collect::<Vec<_>>(),
            || {},
        );
        let mut fresh = Fresh {
            current: Vec::new(),
            current_variants: 0,
            stale,
        };
        for ((_, variant), entries) in variants.into_iter().zip(checked.into_iter().flatten()) {
            match entries {
                Some(entries) => {
                    fresh.current.extend(entries);
                    fresh.current_variants += 1;
                }
                None => fresh.stale.push(variant),
            }
        }
        fresh.current.sort_unstable();
        fresh.stale.shrink_to_fit();
        fresh
    }
}

/// Whether a variant's outputs are current: what [`Project::up_to_date`] asks of each.
struct CurrentCheck<'a> {
    by_stamp: FxHashMap<&'a str, Vec<(usize, &'a IndexEntry)>>,
    targets: usize,
    outputs: DirStats<'a>,
    expected: Option<&'a ExpectedOutputs>,
    last: &'a LastBuild,
    revisions: &'a Revisions,
}

impl CurrentCheck<'_> {
    /// The stat of `path`, an output of `variant` (at `at` among the variants stat'ed).
    fn file_stat(&self, at: usize, variant: &VariantId, path: &str) -> Option<FileStat> {
        self.expected
            .and_then(|expected| expected.stat(at, variant, path))
            .unwrap_or_else(|| self.outputs.file_stat(path))
    }

    /// The positions of the variant's entries in the last index when all are current (its
    /// input stamp is theirs, one per target, none stale or suspect, each file as recorded).
    fn entries(&self, (at, variant): &(usize, VariantId)) -> Option<Vec<usize>> {
        let entries = self
            .revisions
            .get(&variant.shader)
            .map(|shader| shader.input_stamp(&variant.pass, &variant.keywords))
            .and_then(|stamp| self.by_stamp.get(stamp.as_str()))
            .filter(|entries| entries.len() == self.targets)?;
        entries
            .iter()
            .all(|&(_, e)| {
                !e.stale
                    && !self.last.suspect.contains(&*e.path)
                    && self
                        .file_stat(*at, variant, &e.path)
                        .is_some_and(|stat| self.last.stats.trusts(&e.path, &stat))
            })
            .then(|| entries.iter().map(|&(at, _)| at).collect())
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
