//! The build pipeline: a manifest's variants through the engine's queries into the store and
//! the output directory. [`Project`] owns one engine database for the life of a process, so
//! that `kiln watch` rebuilds incrementally; `kiln build` is one [`Project::build`].

mod diagnostic;
mod events;
mod output;
mod queries;
mod safe_output;
mod services;

pub use diagnostic::{describe_variant, Diagnostic, Location, Severity};
pub use output::{output_path, Index, IndexEntry, INDEX_FILE};
pub use services::{Outcome, VariantArtifacts};

use crate::manifest::{Manifest, ManifestError};
use crate::store::{ArtifactStore, LocalStore};
use kiln_incr::Durability;
use queries::{ArtifactsQ, ClosureQ, Db, ManifestInput, RevisionQ, SourceFile};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use services::Services;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One variant: a shader, a pass and a canonical keyword set (sorted, distinct).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VariantId {
    /// Shader name.
    pub shader: Arc<str>,
    /// Pass name.
    pub pass: Arc<str>,
    /// Keywords, sorted and distinct.
    pub keywords: Arc<[Arc<str>]>,
}

impl std::fmt::Display for VariantId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let words: Vec<&str> = self.keywords.iter().map(|k| &**k).collect();
        write!(f, "{}/{}[{}]", self.shader, self.pass, words.join(";"))
    }
}

/// Where a project's inputs and outputs are.
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    /// The manifest, `kiln.toml`.
    pub manifest: PathBuf,
    /// Output directory; default `out/` beside the manifest.
    pub out_dir: Option<PathBuf>,
    /// Store directory; default `.kiln/` beside the manifest.
    pub cache_dir: Option<PathBuf>,
    /// Worker threads; default: one per core.
    pub jobs: Option<usize>,
    /// Byte budget for compiled artifacts kept in memory; default unbounded.
    pub max_memory: Option<u64>,
}

/// Why a project could not be opened or built at all (a variant's failure is not this: it is
/// a diagnostic in the [`BuildReport`]).
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// The manifest is missing or wrong.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The worker pool could not start.
    #[error("cannot start {jobs} worker threads: {source}")]
    Workers {
        /// Requested threads.
        jobs: usize,
        /// Why.
        source: rayon::ThreadPoolBuildError,
    },
    /// The output directory or its index could not be written.
    #[error("cannot write outputs in {}: {source}", path.display())]
    Output {
        /// The path that failed.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Progress of a build, reported after each variant.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Variants done.
    pub done: usize,
    /// Variants in all.
    pub total: usize,
}

/// What one build did.
#[derive(Clone, Debug, Default)]
pub struct BuildReport {
    /// Variants in the manifest ((shader, pass, keyword set) triples).
    pub variants: usize,
    /// Variants compiled by naga in this build.
    pub compiled: usize,
    /// Variants whose artifacts came from the store or memory, or were already up to date.
    pub cached: usize,
    /// Variants whose preprocessed text equalled another's in this build: compiled once.
    pub deduplicated: usize,
    /// Variants that failed.
    pub failed: usize,
    /// Output files written (new or changed).
    pub outputs_written: usize,
    /// Output files removed (their variant or target left the manifest).
    pub outputs_removed: usize,
    /// Errors (failed variants) and warnings (repaired store entries), errors first.
    pub diagnostics: Vec<Diagnostic>,
    /// Per variant that was (re)computed in this build, how its artifacts were obtained.
    pub outcomes: BTreeMap<VariantId, Outcome>,
    /// Project files whose contents changed since the previous build of this project.
    pub changed_files: Vec<PathBuf>,
    /// Whether the manifest changed since the previous build.
    pub manifest_changed: bool,
    /// Variants whose artifacts the engine re-verified without re-executing anything.
    pub verified: usize,
    /// Variants whose preprocessing re-ran but whose text (or artifacts) came out equal, so
    /// nothing after it re-executed (early cutoff).
    pub early_cutoff: usize,
    /// Memo values the engine's LRU evicted at this build's revision boundary.
    pub evicted: usize,
    /// Every variant naga compiled, with why.
    pub recompiled: Vec<Recompiled>,
    /// Time until every output and the index were written (new artifacts are saved to the
    /// store after that, within `elapsed`).
    pub outputs_ready: Duration,
    /// Wall time.
    pub elapsed: Duration,
}

/// A variant naga compiled in a build, and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recompiled {
    /// The variant.
    pub variant: VariantId,
    /// Its key's digest (for logs).
    pub digest: String,
    /// Why: the changed file and the source that includes it, a manifest change, or an
    /// artifact missing from the store.
    pub reason: String,
}

/// A project open for building: the manifest, the engine database, the store.
pub struct Project {
    db: Db,
    manifest: Arc<Manifest>,
    out_dir: PathBuf,
    cache_dir: PathBuf,
    pool: rayon::ThreadPool,
    /// Every project file the engine has read, also those that did not exist.
    known_files: BTreeSet<PathBuf>,
    /// Files whose contents changed since the last build, for the next report.
    changed_files: BTreeSet<PathBuf>,
    manifest_changed: bool,
    /// What the last build wrote, to skip checking unchanged outputs on the next one.
    last_index: Option<Index>,
    last_artifacts: FxHashMap<VariantId, queries::Artifacts>,
    events: Arc<events::EventCounts>,
}

impl Project {
    /// Opens the project of `options.manifest`, with a store on disk.
    pub fn open(options: &BuildOptions) -> Result<Self, ProjectError> {
        let manifest = Manifest::load(&options.manifest)?;
        let cache_dir = options
            .cache_dir
            .clone()
            .unwrap_or_else(|| manifest.root.join(".kiln"));
        let store: Arc<dyn ArtifactStore> = Arc::new(LocalStore::new(&cache_dir));
        Self::with_store(manifest, options, store, cache_dir)
    }

    /// Opens a project whose manifest is already loaded, with any store.
    pub fn with_store(
        manifest: Manifest,
        options: &BuildOptions,
        store: Arc<dyn ArtifactStore>,
        cache_dir: PathBuf,
    ) -> Result<Self, ProjectError> {
        let jobs = options.jobs.unwrap_or(0);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(jobs)
            .thread_name(|i| format!("kiln-worker-{i}"))
            .build()
            .map_err(|source| ProjectError::Workers { jobs, source })?;
        let out_dir = options
            .out_dir
            .clone()
            .unwrap_or_else(|| manifest.root.join("out"));
        let mut db = Db::new(Services::new(store, options.max_memory));
        if let Some(bytes) = options.max_memory {
            // Preprocessed texts are the engine's largest memos; evicting them keeps their
            // edges, so dependents re-verify without re-executing.
            let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
            db.set_lru_bytes::<queries::PreprocessQ>(bytes);
            db.set_lru_bytes::<queries::CompileTextQ>(bytes);
        }
        let events = Arc::new(events::EventCounts::default());
        let listener = events.clone();
        db.set_event_listener(move |event| listener.record(event));
        let manifest = Arc::new(manifest);
        db.set_input::<ManifestInput>((), manifest.clone(), Durability::Medium);
        Ok(Self {
            db,
            manifest,
            out_dir,
            cache_dir,
            pool,
            known_files: BTreeSet::new(),
            changed_files: BTreeSet::new(),
            manifest_changed: false,
            last_index: None,
            last_artifacts: FxHashMap::default(),
            events,
        })
    }

    /// The manifest in use.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The output directory.
    pub fn out_dir(&self) -> &Path {
        &self.out_dir
    }

    /// The store directory.
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// Re-reads the manifest; returns whether it changed. On error the previous manifest
    /// stays in use.
    pub fn reload_manifest(&mut self) -> Result<bool, ManifestError> {
        let manifest = Manifest::load(&self.manifest.path)?;
        if manifest == *self.manifest {
            return Ok(false);
        }
        self.manifest = Arc::new(manifest);
        self.manifest_changed = true;
        self.db
            .set_input::<ManifestInput>((), self.manifest.clone(), Durability::Medium);
        Ok(true)
    }

    /// Re-reads the given files (absolute, or relative to the project root) that the build
    /// depends on; returns those whose contents changed. A file touched without a change, or
    /// one no variant reads, changes nothing and costs no rebuild.
    pub fn refresh_files(&mut self, paths: &[PathBuf]) -> Vec<PathBuf> {
        let mut changed = Vec::new();
        for path in paths {
            let relative = match path.strip_prefix(&self.manifest.root) {
                Ok(r) => r.to_owned(),
                Err(_) => path.clone(),
            };
            if !self.known_files.contains(&relative) {
                continue;
            }
            let text = self.read_text(&relative);
            if self.db.input::<SourceFile>(&relative) != Some(text.clone()) {
                self.db
                    .set_input::<SourceFile>(relative.clone(), text, Durability::Low);
                self.changed_files.insert(relative.clone());
                changed.push(relative);
            }
        }
        changed
    }

    /// Whether anything changed since the last build (a rebuild would do work).
    pub fn is_dirty(&self) -> bool {
        self.manifest_changed || !self.changed_files.is_empty() || self.last_index.is_none()
    }

    /// Says that something other than kiln changed the output directory (an output was
    /// deleted or edited): the next build checks every output on disk again, instead of
    /// trusting what this process wrote, and restores what is missing from the store.
    pub fn outputs_touched(&mut self) {
        self.last_index = None;
        self.last_artifacts.clear();
    }

    /// The variant cache's statistics (requests, hits, compiles, invalidations, evictions).
    pub fn cache_stats(&self) -> crate::variant_cache::CacheStats {
        self.db.context().cache.stats()
    }

    /// Every project file the engine has read (those that did not exist included), relative
    /// to the project root.
    pub fn known_files(&self) -> &BTreeSet<PathBuf> {
        &self.known_files
    }

    fn read_text(&self, relative: &Path) -> Result<Arc<str>, crate::boundary::SourceReadError> {
        let max_bytes = self.manifest.limits.max_source_bytes;
        crate::boundary::read_project_file(&self.manifest.root, relative, max_bytes).map(Arc::from)
    }

    fn read_file(&mut self, relative: &Path) {
        let text = self.read_text(relative);
        self.known_files.insert(relative.to_owned());
        self.db
            .set_input::<SourceFile>(relative.to_owned(), text, Durability::Low);
    }

    /// Every variant of the manifest, in manifest order.
    pub fn variants(&self) -> Vec<VariantId> {
        let mut out = Vec::with_capacity(self.manifest.variant_count());
        for shader in &self.manifest.shaders {
            let name: Arc<str> = Arc::from(shader.name.as_str());
            for pass in &shader.passes {
                let pass_name: Arc<str> = Arc::from(pass.name.as_str());
                for keywords in &shader.variants {
                    out.push(VariantId {
                        shader: name.clone(),
                        pass: pass_name.clone(),
                        keywords: keywords.iter().map(|k| Arc::from(k.as_str())).collect(),
                    });
                }
            }
        }
        out
    }

    /// Reads every file the queries asked for and the pipeline had not read, until none is
    /// left. Include closures are a superset of what any variant reads, so after this the
    /// variants find every file they need.
    fn discover_files(&mut self) {
        let sources: BTreeSet<PathBuf> = self
            .manifest
            .shaders
            .iter()
            .flat_map(|s| s.passes.iter().map(|p| p.source.clone()))
            .collect();
        for source in &sources {
            if !self.known_files.contains(source) {
                self.read_file(source);
            }
        }
        // Each round reads at least one new file, and the project is finite.
        loop {
            let db = &self.db;
            self.pool.install(|| {
                sources.par_iter().for_each(|source| {
                    let _ = db.get::<ClosureQ>(source);
                });
            });
            let unknown: Vec<PathBuf> =
                std::mem::take(&mut *self.db.context().unknown_files.lock());
            let new: BTreeSet<PathBuf> = unknown
                .into_iter()
                .filter(|p| !self.known_files.contains(p))
                .collect();
            if new.is_empty() {
                break;
            }
            for path in new {
                self.read_file(&path);
            }
        }
    }

    /// Builds every variant for every target, writes changed outputs and the index.
    ///
    /// A failed variant does not stop the build: every other variant is built, stored and
    /// written, and the failure is a diagnostic in the report. The previous outputs of a
    /// failed variant stay in place. In a project already built in this process, only what
    /// changed since re-executes.
    pub fn build(
        &mut self,
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Result<BuildReport, ProjectError> {
        let started = Instant::now();
        self.db.context().start_build(&self.manifest.targets);
        // Evictions at the revision boundaries since the last build belong to this report.
        let evicted_before = self.events.take().evicted;
        self.discover_files();

        let all_variants = self.variants();
        let total = all_variants.len();
        let previous = match self.last_index.take() {
            Some(index) => index,
            None => {
                let (index, warnings) = Index::read_checked(&self.out_dir);
                self.db.context().warnings.lock().extend(warnings);
                index
            }
        };
        let stamps = self.input_stamps(&all_variants);
        let pinned = self.invalidate_stale_revisions();
        let (up_to_date, variants) = self.up_to_date(&previous, all_variants, &stamps);
        // Each up-to-date variant contributed one entry per target.
        let up_to_date_variants = up_to_date.len() / self.manifest.targets.len().max(1);
        let done = AtomicUsize::new(up_to_date_variants);
        let artifacts_query = self.db.query::<ArtifactsQ>();
        let results: Vec<_> = self.pool.install(|| {
            variants
                .par_iter()
                .map(|variant| {
                    let result = artifacts_query.get(variant);
                    let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                    progress(Progress {
                        done: finished,
                        total,
                    });
                    result
                })
                .collect()
        });

        drop(pinned);

        let outcomes = std::mem::take(&mut *self.db.context().outcomes.lock());
        let counts = self.events.take();
        let mut report = BuildReport {
            variants: total,
            cached: up_to_date_variants,
            changed_files: std::mem::take(&mut self.changed_files)
                .into_iter()
                .collect(),
            manifest_changed: std::mem::take(&mut self.manifest_changed),
            verified: counts.artifacts_validated,
            early_cutoff: counts.backdated,
            evicted: counts.evicted + evicted_before,
            ..BuildReport::default()
        };
        let mut built = Vec::new();
        let mut failed = BTreeSet::new();
        for (variant, result) in variants.iter().zip(results) {
            match result {
                Ok(Ok(artifacts)) => {
                    match outcomes.get(variant) {
                        Some(Outcome::Compiled) => {
                            report.compiled += 1;
                            report.recompiled.push(Recompiled {
                                variant: variant.clone(),
                                digest: artifacts.key.digest(),
                                reason: self.reason(variant, &report),
                            });
                        }
                        Some(Outcome::Deduplicated) => report.deduplicated += 1,
                        Some(Outcome::Cached) | None => report.cached += 1,
                    }
                    built.push((variant, artifacts));
                }
                Ok(Err(diagnostics)) => {
                    report.failed += 1;
                    failed.insert(variant.clone());
                    for d in diagnostics.iter() {
                        let mut d = d.clone();
                        if d.variant.is_none() {
                            d.variant = Some(variant.to_string());
                        }
                        report.diagnostics.push(d);
                    }
                }
                Err(engine) => {
                    report.failed += 1;
                    failed.insert(variant.clone());
                    let mut d = Diagnostic::error(engine.to_string());
                    d.variant = Some(variant.to_string());
                    report.diagnostics.push(d);
                }
            }
        }
        report.outcomes = outcomes.into_iter().collect();

        let written = self.write_outputs(&built, &failed, previous, up_to_date, &stamps);
        report.outputs_ready = started.elapsed();
        // Even when writing outputs failed, what was compiled is kept.
        self.pool.install(|| self.db.context().flush_saves());
        (report.outputs_written, report.outputs_removed) = written?;
        report
            .diagnostics
            .extend(std::mem::take(&mut *self.db.context().warnings.lock()));
        report
            .diagnostics
            .sort_by_key(|d| std::cmp::Reverse(d.severity));
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// Why naga had to compile `variant` in this build.
    fn reason(&self, variant: &VariantId, report: &BuildReport) -> String {
        if let Ok(Ok(pre)) = self.db.get::<queries::PreprocessQ>(variant) {
            let files = pre.files();
            let changed: Vec<&PathBuf> = report
                .changed_files
                .iter()
                .filter(|f| files.contains(f))
                .collect();
            if let (Some(first), Some(entry)) = (changed.first(), files.first()) {
                let mut reason = if *first == entry {
                    format!("{} changed", first.display())
                } else {
                    format!(
                        "{} changed (included by {})",
                        first.display(),
                        entry.display()
                    )
                };
                if changed.len() > 1 {
                    reason.push_str(&format!(" and {} more file(s)", changed.len() - 1));
                }
                return reason;
            }
        }
        if report.manifest_changed {
            "the manifest changed".to_owned()
        } else {
            "no artifact in the store".to_owned()
        }
    }

    /// A new source revision makes that shader's cached artifacts stale: they are
    /// invalidated before anything is looked up at the new revision. Their bytes are pinned
    /// for the length of the build, so that variants whose text did not change find them by
    /// content instead of reloading them from the store.
    fn invalidate_stale_revisions(&self) -> Vec<Arc<VariantArtifacts>> {
        let cache = &self.db.context().cache;
        let mut pinned = Vec::new();
        for shader in &self.manifest.shaders {
            let Ok(Ok(revision)) = self.db.get::<RevisionQ>(&Arc::from(shader.name.as_str()))
            else {
                continue;
            };
            if cache.current_revision(&shader.name) != Some(revision) {
                pinned.extend(
                    cache
                        .shader_keys(&shader.name)
                        .iter()
                        .filter_map(|key| cache.get(key)),
                );
                cache.invalidate_shader(&shader.name, revision);
            }
        }
        pinned
    }

    /// Per variant, a hash of everything its outputs are built from; `None` when its source
    /// revision cannot be computed (the build will report why).
    fn input_stamps(&self, variants: &[VariantId]) -> FxHashMap<VariantId, String> {
        let mut per_shader: FxHashMap<&str, blake3::Hasher> = FxHashMap::default();
        let targets = format!("{:?}", self.manifest.targets);
        for shader in &self.manifest.shaders {
            let Ok(Ok(revision)) = self.db.get::<RevisionQ>(&Arc::from(shader.name.as_str()))
            else {
                continue;
            };
            let mut hasher = blake3::Hasher::new();
            hasher.update(crate::store::KILN_VERSION.as_bytes());
            hasher.update(crate::compile::NAGA_VERSION.as_bytes());
            hasher.update(targets.as_bytes());
            hasher.update(format!("{shader:?}").as_bytes());
            hasher.update(&revision.to_le_bytes());
            per_shader.insert(&shader.name, hasher);
        }
        variants
            .iter()
            .filter_map(|variant| {
                let mut hasher = per_shader.get(&*variant.shader)?.clone();
                hasher.update(variant.to_string().as_bytes());
                let hex = hasher.finalize().to_hex();
                Some((variant.clone(), hex[..32].to_owned()))
            })
            .collect()
    }

    /// Splits `variants` into the index entries of those whose outputs are up to date (same
    /// input stamp, every target present on disk at its recorded size) and the variants the
    /// engine must look at. This is what makes a build in a new process cheap; a variant
    /// this process already built goes to the engine, whose verification is cheaper still.
    fn up_to_date(
        &self,
        previous: &Index,
        variants: Vec<VariantId>,
        stamps: &FxHashMap<VariantId, String>,
    ) -> (Vec<IndexEntry>, Vec<VariantId>) {
        let mut by_stamp: FxHashMap<&str, Vec<&IndexEntry>> = FxHashMap::default();
        for entry in &previous.entries {
            by_stamp
                .entry(entry.inputs.as_str())
                .or_default()
                .push(entry);
        }
        let targets = self.manifest.targets.len();
        let out_dir = &self.out_dir;
        let checked: Vec<Result<Vec<IndexEntry>, VariantId>> = self.pool.install(|| {
            variants
                .into_par_iter()
                .map(|variant| {
                    if self.last_artifacts.contains_key(&variant) {
                        return Err(variant);
                    }
                    let entries = stamps
                        .get(&variant)
                        .and_then(|stamp| by_stamp.get(stamp.as_str()))
                        .filter(|entries| entries.len() == targets);
                    match entries {
                        Some(entries)
                            if entries.iter().all(|e| {
                                std::fs::metadata(out_dir.join(&e.path))
                                    .is_ok_and(|m| m.len() == e.bytes)
                            }) =>
                        {
                            Ok(entries.iter().map(|e| (*e).clone()).collect())
                        }
                        _ => Err(variant),
                    }
                })
                .collect()
        });
        let mut current = Vec::new();
        let mut stale = Vec::new();
        for result in checked {
            match result {
                Ok(entries) => current.extend(entries),
                Err(variant) => stale.push(variant),
            }
        }
        (current, stale)
    }

    fn write_outputs(
        &mut self,
        built: &[(&VariantId, queries::Artifacts)],
        failed: &BTreeSet<VariantId>,
        previous: Index,
        up_to_date: Vec<IndexEntry>,
        stamps: &FxHashMap<VariantId, String>,
    ) -> Result<(usize, usize), ProjectError> {
        let out_dir = &self.out_dir;
        let output_error = |path: &Path, source| ProjectError::Output {
            path: path.to_owned(),
            source,
        };
        std::fs::create_dir_all(out_dir).map_err(|e| output_error(out_dir, e))?;
        output::remove_stale_temps(out_dir);
        let previous_by_path: FxHashMap<&str, &IndexEntry> = previous
            .entries
            .iter()
            .map(|e| (e.path.as_str(), e))
            .collect();

        let services = self.db.context();
        let last_artifacts = &self.last_artifacts;
        let written = AtomicUsize::new(0);
        let entries: Result<Vec<Vec<IndexEntry>>, ProjectError> = self.pool.install(|| {
            built
                .par_iter()
                .map(|(variant, artifacts)| {
                    // Outputs this process wrote with the same bytes need no look on disk,
                    // also when the source revision moved but the compiled text did not.
                    let unchanged = last_artifacts
                        .get(*variant)
                        .is_some_and(|last| last.outputs == artifacts.outputs);
                    let keywords: Vec<String> =
                        variant.keywords.iter().map(|k| k.to_string()).collect();
                    let mut entries = Vec::with_capacity(artifacts.outputs.len());
                    let digest = artifacts.key.digest();
                    let revision = format!("{:016x}", artifacts.key.revision());
                    let mut bytes_of_variant: Option<Arc<VariantArtifacts>> = None;
                    for output in artifacts.outputs.iter() {
                        let relative = output_path(
                            &variant.shader,
                            &variant.pass,
                            &keywords,
                            output.target.extension(),
                        );
                        let path = crate::boundary::output_file(out_dir, &relative)
                            .map_err(|e| output_error(out_dir, std::io::Error::other(e)))?;
                        let hash = output.hash.to_hex();
                        let current = unchanged
                            || output::is_current(
                                &path,
                                previous_by_path.get(relative.as_str()).copied(),
                                output.bytes,
                                &hash,
                            );
                        if !current {
                            if bytes_of_variant.is_none() {
                                bytes_of_variant = services.cache.get(&artifacts.key);
                            }
                            let bytes = match &bytes_of_variant {
                                Some(all) => all
                                    .outputs
                                    .iter()
                                    .find(|(t, _)| *t == output.target)
                                    .map(|(_, b)| b.clone()),
                                None => self.reload(&artifacts.key, variant, output.target),
                            };
                            let bytes = bytes.ok_or_else(|| {
                                output_error(
                                    &path,
                                    std::io::Error::other(
                                        "artifact vanished from the store; build again",
                                    ),
                                )
                            })?;
                            output::write_output(out_dir, &path, &bytes)
                                .map_err(|e| output_error(&path, e))?;
                            written.fetch_add(1, Ordering::Relaxed);
                        }
                        entries.push(IndexEntry {
                            shader: variant.shader.to_string(),
                            pass: variant.pass.to_string(),
                            keywords: keywords.clone(),
                            revision: revision.clone(),
                            digest: digest.clone(),
                            target: output.target.name().to_owned(),
                            path: relative,
                            bytes: output.bytes,
                            content_hash: hash,
                            inputs: stamps.get(*variant).cloned().unwrap_or_default(),
                        });
                    }
                    Ok(entries)
                })
                .collect()
        });
        let mut entries: Vec<IndexEntry> = entries?.into_iter().flatten().collect();
        entries.extend(up_to_date);

        // Failed variants keep their last good outputs; outputs of variants or targets that
        // left the manifest are removed.
        let current: BTreeSet<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        let mut kept = Vec::new();
        let mut removed = 0;
        for old in &previous.entries {
            if current.contains(old.path.as_str()) {
                continue;
            }
            let variant = VariantId {
                shader: Arc::from(old.shader.as_str()),
                pass: Arc::from(old.pass.as_str()),
                keywords: old.keywords.iter().map(|k| Arc::from(k.as_str())).collect(),
            };
            let target_kept = self
                .manifest
                .targets
                .iter()
                .any(|t| t.target().name() == old.target);
            if failed.contains(&variant) && target_kept {
                kept.push(old.clone());
            } else {
                if output::remove_output(out_dir, old)
                    .map_err(|e| output_error(&out_dir.join(&old.path), e))?
                {
                    removed += 1;
                }
            }
        }
        entries.extend(kept);
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        let index = Index {
            kiln_version: crate::store::KILN_VERSION.to_owned(),
            entries,
        };
        if index != previous {
            index
                .write(out_dir)
                .map_err(|e| output_error(&out_dir.join(INDEX_FILE), e))?;
        }
        self.last_index = Some(index);
        self.last_artifacts = built
            .iter()
            .map(|(variant, artifacts)| ((*variant).clone(), artifacts.clone()))
            .collect();
        Ok((written.into_inner(), removed))
    }

    /// Bytes of one output whose variant-cache entry was evicted: from the store, never from
    /// naga unless the store lost it too.
    fn reload(
        &self,
        key: &crate::key::VariantKey,
        variant: &VariantId,
        target: crate::compile::Target,
    ) -> Option<Arc<[u8]>> {
        let job = queries::CompileJob::of(&self.db, variant).ok()?.ok()?;
        let (artifacts, _) = self
            .db
            .context()
            .materialize(key, &job.input(), &job.targets)
            .ok()?;
        artifacts
            .outputs
            .iter()
            .find(|(t, _)| *t == target)
            .map(|(_, b)| b.clone())
    }
}
