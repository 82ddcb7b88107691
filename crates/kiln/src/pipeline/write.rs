//! Writing a build's outputs and `index.json`: a file is written only when the one on disk
//! does not already hold its bytes; outputs of variants or targets that left the manifest
//! are removed; a failed variant's previous outputs are removed, or kept and marked stale.
//! One output that cannot be written fails its variant alone.

use super::diagnostic::Diagnostic;
use super::output::{self, output_path, Index, IndexEntry, IndexVariant, OutDirLock, INDEX_FILE};
use super::queries::{variant_key, Artifacts};
use super::services::VariantArtifacts;
use super::stat::{FileStat, OutputStats};
use super::{Failed, LastBuild, Project, ProjectError, VariantId};
use crate::identity::{self, Revision};
use crate::store::ContentKey;
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

/// What writing the outputs did.
pub(super) struct Written {
    pub written: usize,
    pub removed: usize,
    /// Variants that failed, to compile or to be written, for every target or for some.
    pub failed: usize,
    /// (variant, target) pairs that failed.
    pub failed_outputs: usize,
    pub diagnostics: Vec<Diagnostic>,
}

/// One variant's outputs after writing: its index entries and the stats to record.
pub(super) type VariantWrite = (Vec<IndexEntry>, Vec<(String, FileStat)>, usize);

/// Writing one variant's outputs: done, or why not (that variant fails alone).
pub(super) type WriteResult = Result<VariantWrite, Diagnostic>;

/// Each shader's current revision and its hex name (16 digits) for the index.
pub(super) type ShaderRevisions = FxHashMap<Arc<str>, (Revision, Arc<str>)>;

/// What the variants built so far left to record, gathered chunk by chunk as they finish
/// (`Project::gather`): a build of 100,000 variants holds these, not every variant's result
/// until the end.
#[derive(Default)]
pub(super) struct Gathered {
    /// The index entries of the variants built.
    pub entries: Vec<IndexEntry>,
    pub failed: Failed,
    /// Outputs written.
    pub written: usize,
    /// Why some variants' outputs could not be written (each such variant failed).
    pub diagnostics: Vec<Diagnostic>,
}

impl Project {
    /// Creates and locks the output directory (another kiln building into it finishes
    /// first) and removes what killed writers left in it, before the last build's index is
    /// read. Returns the lock, to hold until `index.json` is written, and whether it waited.
    pub(super) fn prepare_out_dir(&self) -> Result<(OutDirLock, bool), ProjectError> {
        let out_dir = &self.out_dir;
        let (lock, waited) =
            OutDirLock::acquire(out_dir).map_err(|source| ProjectError::Output {
                path: out_dir.clone(),
                source,
            })?;
        output::remove_stale_temps(out_dir, &lock);
        Ok((lock, waited))
    }

    /// Records the outputs written while the variants ran (see `run_variants`), removes
    /// those nobody produces any more, and writes `index.json` and `.kiln-stat`.
    pub(super) fn write_outputs(
        &mut self,
        gathered: Gathered,
        mut last: LastBuild,
        up_to_date: Vec<usize>,
        revisions: &FxHashMap<Arc<str>, Revision>,
    ) -> Result<Written, ProjectError> {
        let out_dir = &self.out_dir;

        let mut stats = last.stats;
        // Every entry of the last index still current (a no-op build, or one that only
        // added variants): they are moved, not copied, and none is retired. Positions are
        // distinct, so equal counts mean all of them.
        let all_current = up_to_date.len() == last.index.entries.len();
        let mut entries = if all_current {
            std::mem::take(&mut last.index.entries)
        } else {
            up_to_date
                .iter()
                .map(|&at| last.index.entries[at].clone())
                .collect()
        };
        let Gathered {
            entries: built_entries,
            mut failed,
            written,
            diagnostics,
        } = gathered;
        if entries.is_empty() {
            entries = built_entries;
        } else {
            entries.extend(built_entries);
        }
        let mut written = Written {
            written,
            removed: 0,
            failed: 0,
            failed_outputs: 0,
            diagnostics,
        };
        let partly: BTreeSet<&VariantId> = failed
            .pairs
            .iter()
            .map(|(v, _)| v)
            .filter(|v| !failed.variants.contains(*v))
            .collect();
        written.failed = failed.variants.len() + partly.len();
        written.failed_outputs = failed.variants.len() * self.manifest.targets.len()
            + failed
                .pairs
                .iter()
                .filter(|(v, _)| !failed.variants.contains(v))
                .count();
        // A variant that failed to be written lists each target once.
        failed.index.sort();
        failed.index.dedup_by(|a, b| {
            (&a.shader, &a.pass, &a.keywords, &a.target)
                == (&b.shader, &b.pass, &b.keywords, &b.target)
        });

        // Outputs nobody produces now: a failed variant's (kept, marked stale, on request),
        // and those of variants or targets that left the manifest.
        // In place: paths are distinct, and a stable sort allocates half the entries again
        // (12 MB at 40,000 variants, at the build's peak).
        entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        let mut kept = Vec::new();
        for old in &last.index.entries {
            if find(&entries, &old.path).is_some() {
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
                && failed.pair(&variant, &old.target)
                && !last.suspect.contains(&*old.path)
            {
                let mut stale = old.clone();
                stale.stale = true;
                stale.failed_revision = revisions
                    .get(&variant.shader)
                    .map(|r| format!("{:016x}", r.short()).into());
                kept.push(stale);
                continue;
            }
            match output::remove_output(out_dir, old) {
                Ok(true) => written.removed += 1,
                // Not provably kiln's bytes any more: left alone, and said so.
                Ok(false) if out_dir.join(&*old.path).exists() => {
                    written.diagnostics.push(Diagnostic::warning(format!(
                        "left {} alone: it no longer holds the bytes kiln wrote",
                        out_dir.join(&*old.path).display()
                    )))
                }
                Ok(false) => {}
                Err(e) => written.diagnostics.push(Diagnostic::warning(format!(
                    "cannot remove retired output {}: {e}",
                    out_dir.join(&*old.path).display()
                ))),
            }
            stats.forget(&old.path);
        }

        if !kept.is_empty() {
            entries.extend(kept);
            entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        }
        let index = Index {
            kiln_version: crate::base::KILN_VERSION.to_owned(),
            entries,
            failures: failed.index,
        };
        let index_error = |source| ProjectError::Output {
            path: out_dir.join(INDEX_FILE),
            source,
        };
        // With the entries moved out of `last.index`, it holds them iff nothing was added.
        let unchanged = if all_current {
            index.entries.len() == up_to_date.len()
                && index.failures == last.index.failures
                && index.kiln_version == last.index.kiln_version
        } else {
            index == last.index
        };
        if !unchanged || last.index_suspect {
            let meta = index.write(out_dir).map_err(index_error)?;
            stats.record(INDEX_FILE, FileStat::of(&meta));
        }
        if !unchanged {
            stats.retain_only(
                std::iter::once(INDEX_FILE).chain(index.entries.iter().map(|e| &*e.path)),
            );
        }
        if stats.needs_write() || last.index_suspect {
            stats.seal_and_write(out_dir).map_err(index_error)?;
        }
        self.last = Some(LastBuild {
            index,
            stats,
            written_here: true,
            suspect: BTreeSet::new(),
            index_suspect: false,
        });
        Ok(written)
    }

    /// Writes one variant's outputs that the disk does not already hold. Run as soon as the
    /// variant's artifacts are known, so their bytes are written while still in memory.
    pub(super) fn write_variant(
        &self,
        variant: &VariantId,
        artifacts: &Artifacts,
        last: &LastBuild,
        revisions: &ShaderRevisions,
    ) -> WriteResult {
        let fail = |message: String| {
            let mut d = Diagnostic::error(message);
            d.variant = Some(variant.to_string());
            d
        };
        // Artifacts produced in this build are handed over once, here; after this the
        // variant cache (bounded) is all that keeps their bytes.
        let mut bytes_of_variant: Option<Arc<VariantArtifacts>> =
            self.db.context().take_fresh(variant);
        let (revision, revision_name) = revisions
            .get(&variant.shader)
            .ok_or_else(|| fail(format!("no revision of shader {}", variant.shader)))?;
        let key = || variant_key(variant, revision.short());
        // Shared by the variant's entries, one per target.
        let mut shared: Option<Arc<IndexVariant>> = None;
        let mut entries = Vec::with_capacity(artifacts.outputs.len());
        let mut stats = Vec::new();
        let mut count = 0;
        for output in artifacts.outputs.iter() {
            let relative = output_path(
                &variant.shader,
                &variant.pass,
                &variant.keywords,
                output.target.extension(),
            );
            let previous = find(&last.index.entries, &relative);
            let shared = match &shared {
                Some(shared) => Arc::clone(shared),
                None => {
                    let made = match previous.filter(|_| last.written_here) {
                        Some(e) if e.variant.names(variant, revision_name) => {
                            Arc::clone(&e.variant)
                        }
                        _ => Arc::new(IndexVariant {
                            shader: Arc::clone(&variant.shader),
                            pass: Arc::clone(&variant.pass),
                            keywords: Arc::clone(&variant.keywords),
                            revision: Arc::clone(revision_name),
                            digest: key()?.digest().into(),
                            inputs: identity::input_stamp(
                                revision,
                                &variant.pass,
                                variant.keywords.iter().map(|k| &**k),
                            )
                            .into(),
                        }),
                    };
                    Arc::clone(shared.insert(made))
                }
            };
            let path = crate::boundary::output_file(&self.out_dir, &relative)
                .map_err(|e| fail(format!("output path {relative}: {e}")))?;
            // An output this process wrote or verified with the same bytes needs no look on
            // disk, unless a file event said someone touched it since.
            let current = last.written_here
                && previous
                    .is_some_and(|e| e.content_hash == output.hash && e.bytes == output.bytes)
                && !last.suspect.contains(&relative);
            let found = if current {
                OnDisk::Current
            } else {
                on_disk(&path, &relative, output.bytes, &output.hash, last)
            };
            let held = match found {
                OnDisk::Current => true,
                OnDisk::Holds(stat) => {
                    stats.push((relative.clone(), stat));
                    true
                }
                OnDisk::Differs | OnDisk::Missing => false,
            };
            // What the entry records: the artifact's size and hash, or, when its bytes had to
            // be loaded (the artifacts query took them from the store's record), those of
            // the bytes written, so that the index never names bytes the disk lacks.
            let (mut len, mut hash) = (output.bytes, output.hash);
            if !held {
                if bytes_of_variant.is_none() {
                    let key = key()?;
                    bytes_of_variant = self
                        .db
                        .context()
                        .cache
                        .get(&key)
                        .or_else(|| self.reload(&key, variant));
                }
                let (bytes, written_hash) = bytes_of_variant
                    .as_ref()
                    .and_then(|all| {
                        all.outputs
                            .iter()
                            .zip(&all.hashes)
                            .find(|((t, _), _)| *t == output.target)
                            .map(|((_, b), h)| (b.clone(), *h))
                    })
                    .ok_or_else(|| {
                        fail(format!(
                            "{}: the artifact vanished from the store; build again",
                            path.display()
                        ))
                    })?;
                let written = match found {
                    OnDisk::Missing => self.spares.write_new(&path, &bytes),
                    _ => self.spares.write(&path, &bytes),
                };
                let meta = written
                    .map_err(|e| fail(format!("cannot write output {}: {e}", path.display())))?;
                stats.push((relative.clone(), FileStat::of(&meta)));
                count += 1;
                (len, hash) = (bytes.len() as u64, written_hash);
            }
            entries.push(IndexEntry {
                variant: shared,
                target: output.target.shared_name(),
                path: relative.into(),
                bytes: len,
                content_hash: hash,
                stale: false,
                failed_revision: None,
            });
        }
        Ok((entries, stats, count))
    }

    /// The artifacts of a variant the variant cache does not hold (evicted, or never loaded:
    /// the artifacts query took the store's record of them): from the store, verified, never
    /// from naga unless the store lost them too.
    fn reload(
        &self,
        key: &crate::key::VariantKey,
        variant: &VariantId,
    ) -> Option<Arc<VariantArtifacts>> {
        let job = super::queries::CompileJob::of(&self.db, variant)
            .ok()?
            .ok()?;
        let services = self.db.context();
        let produced = services.materialize(key, &job.input(), &job.targets).ok()?;
        if produced.outcome != super::Outcome::Cached {
            // The store lost them (a corrupt entry): the report says they were compiled.
            services
                .build
                .outcomes
                .lock()
                .insert(variant.clone(), produced.outcome);
        }
        Some(produced.artifacts)
    }
}

/// What an output's path holds, as far as writing it is concerned.
enum OnDisk {
    /// This process wrote or verified these bytes there: not looked at.
    Current,
    /// Exactly the output's bytes: proven by the stat kiln recorded for the same contents,
    /// else by reading them. The stat is recorded.
    Holds(FileStat),
    /// Something else (other bytes, a directory, a link): replaced.
    Differs,
    /// Nothing: created.
    Missing,
}

/// What the file at `path` holds against the output of `len` bytes hashing to `hash`.
fn on_disk(path: &Path, relative: &str, len: u64, hash: &ContentKey, last: &LastBuild) -> OnDisk {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return OnDisk::Missing,
        Err(_) => return OnDisk::Differs,
    };
    if !meta.is_file() || meta.len() != len {
        return OnDisk::Differs;
    }
    let stat = FileStat::of(&meta);
    // The recorded stat proves the bytes the previous index names (entries sorted by path).
    let recorded_same =
        find(&last.index.entries, relative).is_some_and(|e| e.content_hash == *hash);
    if recorded_same && last.stats.trusts(relative, &stat) {
        return OnDisk::Holds(stat);
    }
    match std::fs::read(path) {
        Ok(bytes) if ContentKey::hash(&bytes) == *hash => OnDisk::Holds(stat),
        _ => OnDisk::Differs,
    }
}

/// The entry at `path` among entries sorted by path.
fn find<'e>(entries: &'e [IndexEntry], path: &str) -> Option<&'e IndexEntry> {
    let at = entries.binary_search_by(|e| (*e.path).cmp(path)).ok()?;
    entries.get(at)
}

/// The entries at `relative` or under it as a directory, among entries sorted by path;
/// every entry for the empty path (the whole output directory).
pub(super) fn entries_at<'e>(
    entries: &'e [IndexEntry],
    relative: &str,
) -> impl Iterator<Item = &'e IndexEntry> {
    let (exact, under) = if relative.is_empty() {
        (None, entries)
    } else {
        let prefix = format!("{relative}/");
        let start = entries.partition_point(|e| *e.path < *prefix);
        // Sorted strings sharing a prefix are contiguous.
        let len = entries[start..].partition_point(|e| e.path.starts_with(&prefix));
        (find(entries, relative), &entries[start..start + len])
    };
    exact.into_iter().chain(under)
}

/// Whether `index.json` still holds `index`: proven by its recorded stat, else by reading
/// it (then its stat is recorded).
pub(super) fn index_holds(out_dir: &Path, index: &Index, stats: &mut OutputStats) -> bool {
    let path = out_dir.join(INDEX_FILE);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return false;
    };
    let stat = FileStat::of(&meta);
    if stats.trusts(INDEX_FILE, &stat) {
        return true;
    }
    let same = std::fs::read(&path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Index>(&bytes).ok())
        .is_some_and(|on_disk| on_disk == *index);
    if same {
        stats.record(INDEX_FILE, stat);
    }
    same
}

/// Whether the file of `entry` still holds the entry's bytes; records its stat when that
/// had to be proven by reading it.
pub(super) fn holds(out_dir: &Path, entry: &IndexEntry, stats: &mut OutputStats) -> bool {
    let path = out_dir.join(&*entry.path);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return false;
    };
    if !meta.is_file() || meta.len() != entry.bytes {
        return false;
    }
    let stat = FileStat::of(&meta);
    if stats.trusts(&entry.path, &stat) {
        return true;
    }
    let same =
        std::fs::read(&path).is_ok_and(|bytes| ContentKey::hash(&bytes) == entry.content_hash);
    if same {
        stats.record(&entry.path, stat);
    }
    same
}
