//! The first phase of a build: everything decided before any variant runs. The project's
//! files are read into the engine, the output directory locked, the previous build read
//! back, every shader's revision computed, what is already current set aside, and the
//! remote told what is about to be loaded (or a shard's share chosen).

mod discover;
mod freshness;
mod last_build;
pub(super) mod remote;

pub(crate) use last_build::LastBuild;

use super::super::engine::scope::Revisions;
use super::super::engine::services::VariantArtifacts;
use super::super::out_dir::{self, OutDirLock};
use super::super::{Diagnostic, Project, ProjectError, VariantId};
use remote::ShardReport;
use std::path::PathBuf;
use std::sync::Arc;

/// What a build will do, decided before any variant runs.
///
/// Invariant: `revisions` holds every shader's revision at this build, computed before any
/// artifacts query runs; the run hands it to each variant's query (`VariantScope`), which
/// names its artifacts in the variant cache with it.
pub(in crate::pipeline) struct Plan {
    /// Whether the build writes outputs, and what it knows of them.
    pub mode: Mode,
    pub revisions: Arc<Revisions>,
    /// The variants to run (the rest are current), shared with the report's outcomes.
    pub variants: Arc<[VariantId]>,
    /// Variants in the manifest.
    pub total: usize,
    /// Warnings met while planning: a wait for another build.
    pub warnings: Vec<Diagnostic>,
    /// What was ignored of the previous build's index.
    pub index_warnings: Vec<Diagnostic>,
    /// Project files whose contents changed since the previous build.
    pub changed_files: Vec<PathBuf>,
    /// Whether the manifest changed since the previous build.
    pub manifest_changed: bool,
    /// What changed in it, field by field.
    pub manifest_changes: Vec<crate::manifest::ManifestChange>,
    /// Memo values the engine evicted at the revision boundaries since the last build.
    pub evicted_before: usize,
    /// The artifacts of shaders whose revision moved, kept for the length of the build so
    /// that variants whose compile did not change find them by content (see
    /// [`Project::invalidate_stale_revisions`]).
    pub pinned: Vec<Arc<VariantArtifacts>>,
}

/// How a build treats the output directory, decided once, in [`Project::plan`].
pub(in crate::pipeline) enum Mode {
    /// Writes changed outputs and `index.json`.
    Outputs(Box<Outputs>),
    /// A farm shard: compiles its share and uploads it; the output directory is not touched.
    Shard(ShardReport),
}

/// What a build that writes outputs holds from planning until its index is written.
pub(in crate::pipeline) struct Outputs {
    /// The output directory's lock: another kiln building into it waits.
    pub lock: OutDirLock,
    /// `out/.kiln-writing`, when outputs are about to be written (see [`mark_writing`]).
    pub marker: Option<PathBuf>,
    pub last: LastBuild,
    /// Ascending positions in `last.index.entries` of the outputs still current.
    pub current: Vec<usize>,
    /// The variants those entries belong to (each has one per target).
    pub current_variants: usize,
    /// The directories under the output directory proven real (not links) in this build.
    pub real_dirs: out_dir::confine::RealDirs,
    /// The build before was killed while writing outputs: files it wrote are not in
    /// `index.json`, and may be replaced although it does not list them.
    pub killed_writer: bool,
}

impl Project {
    /// The plan of the next build (see [`Plan`]).
    pub(super) fn plan(&mut self) -> Result<Plan, ProjectError> {
        // Before anything is made at the project's paths (the output directory first).
        if self.root_gone() {
            return Err(ProjectError::RootGone {
                root: self.manifest.root.clone(),
            });
        }
        self.db.context().start_build();
        let evicted_before = self.events.take().evicted;
        self.discover_files();
        let all = self.variants();
        let total = all.len();
        let mut warnings = Vec::new();
        let mut index_warnings = Vec::new();
        let (mode, revisions, variants) = match self.shard {
            Some(shard) => {
                let revisions = self.revisions();
                let (variants, report) = self.shard_share(shard, all)?;
                (Mode::Shard(report), revisions, variants)
            }
            None => {
                let (outputs, revisions, variants) =
                    self.plan_outputs(all, &mut warnings, &mut index_warnings)?;
                (Mode::Outputs(Box::new(outputs)), revisions, variants)
            }
        };
        let pinned = self.invalidate_stale_revisions(&revisions);
        Ok(Plan {
            mode,
            revisions: Arc::new(revisions),
            variants: Arc::from(variants),
            total,
            warnings,
            index_warnings,
            changed_files: std::mem::take(&mut self.changed_files)
                .into_iter()
                .collect(),
            manifest_changed: std::mem::take(&mut self.manifest_changed),
            manifest_changes: std::mem::take(&mut self.manifest_changes),
            evicted_before,
            pinned,
        })
    }

    /// Locks the output directory, reads the previous build back, sets aside what is
    /// current, announces the rest to the remote, and marks the directory as being written
    /// when anything will run.
    fn plan_outputs(
        &mut self,
        all: Vec<VariantId>,
        warnings: &mut Vec<Diagnostic>,
        index_warnings: &mut Vec<Diagnostic>,
    ) -> Result<(Outputs, Revisions, Vec<VariantId>), ProjectError> {
        let (lock, waited, killed_writer) = self.prepare_out_dir()?;
        if waited {
            warnings.push(Diagnostic::warning(format!(
                "waited for another kiln process building into {}",
                self.out_dir.display()
            )));
        }
        let read = self.read_last_build(&all)?;
        index_warnings.extend(read.warnings);
        let fresh = self.up_to_date(&read.last, all, &read.revisions, read.expected.as_ref());
        drop(read.expected);
        let variants = self.prefetch_remote(fresh.stale);
        let marker = mark_writing(&self.out_dir, !variants.is_empty())?;
        let outputs = Outputs {
            lock,
            marker,
            last: read.last,
            current: fresh.current,
            current_variants: fresh.current_variants,
            real_dirs: out_dir::confine::RealDirs::default(),
            killed_writer,
        };
        Ok((outputs, read.revisions, variants))
    }

    /// Creates and locks the output directory (another kiln building into it finishes
    /// first) and removes what killed writers left in it, before the last build's index is
    /// read. Returns the lock, to hold until `index.json` is written, whether it waited, and
    /// whether the build before was killed while writing outputs.
    fn prepare_out_dir(&self) -> Result<(OutDirLock, bool, bool), ProjectError> {
        let out_dir = &self.out_dir;
        let files = out_dir::confine::ProjectFiles::of(&self.manifest, &self.known_files);
        out_dir::confine::check_out_dir(&self.manifest.root, out_dir, &files)?;
        let (lock, waited) =
            OutDirLock::acquire(out_dir).map_err(|source| ProjectError::Output {
                path: out_dir.clone(),
                source,
            })?;
        let killed_writer = out_dir.join(out_dir::WRITING_MARKER).exists();
        out_dir::remove_stale_temps(out_dir, &lock);
        Ok((lock, waited, killed_writer))
    }

    /// A new source revision makes that shader's cached artifacts stale: they are
    /// invalidated before anything is looked up at the new revision. Their bytes are pinned
    /// for the length of the build, so that variants whose compile did not change find them
    /// by content instead of reloading them from the store.
    pub(in crate::pipeline) fn invalidate_stale_revisions(
        &self,
        revisions: &Revisions,
    ) -> Vec<Arc<VariantArtifacts>> {
        let cache = &self.db.context().cache;
        let mut pinned = Vec::new();
        for (shader, revision) in revisions.iter() {
            let revision = revision.revision.short();
            if cache.current_revision(shader) != Some(revision) {
                pinned.extend(
                    cache
                        .shader_keys(shader)
                        .iter()
                        .filter_map(|key| cache.get(key)),
                );
                cache.invalidate_shader(shader, revision);
            }
        }
        pinned
    }
}

/// Outputs are about to be written: a kill from here on may leave temporary files anywhere
/// under `out/`, which the marker tells the next build to look for. Returns its path.
fn mark_writing(out_dir: &std::path::Path, running: bool) -> Result<Option<PathBuf>, ProjectError> {
    if !running {
        return Ok(None);
    }
    out_dir::mark_writing(out_dir)
        .map(Some)
        .map_err(|source| ProjectError::Output {
            path: out_dir.join(out_dir::WRITING_MARKER),
            source,
        })
}

impl Plan {
    /// The variants found current before any ran (progress counts them as done).
    pub fn current_variants(&self) -> usize {
        match &self.mode {
            Mode::Outputs(outputs) => outputs.current_variants,
            Mode::Shard(_) => 0,
        }
    }
}
