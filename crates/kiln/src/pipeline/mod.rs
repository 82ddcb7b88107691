//! The build pipeline: a manifest's variants through the engine's queries into the store and
//! the output directory. [`Project`] owns one engine database for the life of a process, so
//! that `kiln watch` rebuilds incrementally; `kiln build` is one [`Project::build`].

mod diagnostic;
mod discover;
mod events;
mod farm;
mod freshness;
mod interned;
mod outcomes;
mod output;
mod queries;
mod recycle;
mod safe_output;
mod services;
mod stat;
mod write;

pub use diagnostic::{describe_variant, Diagnostic, Location, Severity};
pub use farm::ShardReport;
pub use outcomes::Outcomes;
pub use output::{output_path, Index, IndexEntry, IndexFailure, IndexVariant, INDEX_FILE};
pub use recycle::write_new_output;
pub use services::{Outcome, VariantArtifacts};
pub use stat::STAT_FILE;

use crate::boundary::SourceReadError;
use crate::identity::Revision;
use crate::manifest::{Manifest, ManifestError};
use crate::shard::Shard;
use crate::store::{
    ArtifactStore, LocalStore, RemoteConfig, RemoteConfigError, RemoteReport, RemoteStore,
    TieredStore,
};
use kiln_incr::Durability;
use queries::{ArtifactsQ, Db, ManifestInput, RevisionQ, SourceFile};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use services::Services;
use std::collections::BTreeSet;
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
    /// Byte budget for what a project keeps in memory besides its per-variant records:
    /// half for compiled artifacts (the variant cache), a quarter for artifacts waiting to
    /// be saved to the store, an eighth each for preprocessed and compile texts. Default:
    /// 32 MiB of artifacts, 16 MiB of pending saves, 8 MiB per kind of text. Artifact bytes
    /// need not stay in memory once written: evicted ones are reloaded from the store,
    /// never recompiled.
    pub max_memory: Option<u64>,
    /// Keep the last good outputs of a variant that fails, marked `stale` in the index (for
    /// hot reload under `kiln watch`); by default they are removed, so that the output
    /// directory is exactly what a clean build would write.
    pub keep_failed_outputs: bool,
    /// The remote cache's URL, overriding `[cache] remote` in the manifest.
    pub remote: Option<String>,
    /// Use no remote cache, whatever the manifest says.
    pub no_remote: bool,
    /// Only read the remote cache (also `[cache] read_only = true`).
    pub remote_read_only: bool,
    /// Give up on a remote round trip after this long (default 10 s; connecting: 2 s).
    pub remote_timeout: Option<Duration>,
    /// Build only this shard's share of the compile jobs, upload it, write no outputs.
    pub shard: Option<Shard>,
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
    /// The remote cache's URL cannot be used (it is redacted here).
    #[error(transparent)]
    Remote(#[from] RemoteConfigError),
    /// A shard build without a remote cache it may write to.
    #[error("shard {shard}: a shard build uploads its share, so it needs a remote cache it may write (`--remote URL`, KILN_REMOTE or `[cache] remote`, not read-only)")]
    ShardWithoutRemote {
        /// The shard.
        shard: Shard,
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
    /// Variants that failed, for every target or for some (see `failed_outputs`).
    pub failed: usize,
    /// (variant, target) pairs that failed: a pair fails alone, its variant's other targets
    /// are written.
    pub failed_outputs: usize,
    /// Output files written (new or changed).
    pub outputs_written: usize,
    /// Output files removed (their variant or target left the manifest).
    pub outputs_removed: usize,
    /// Errors (failed variants) and warnings (repaired store entries), errors first.
    pub diagnostics: Vec<Diagnostic>,
    /// Per variant that was (re)computed in this build, how its artifacts were obtained.
    pub outcomes: Outcomes,
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
    /// The variants naga compiled, with why: the first [`RECOMPILED_LISTED`] of them
    /// (`compiled` counts them all; a cold build of 100,000 variants would otherwise hold a
    /// record for each).
    pub recompiled: Vec<Recompiled>,
    /// Time until every output and the index were written (new artifacts are saved to the
    /// store after that, within `elapsed`).
    pub outputs_ready: Duration,
    /// Wall time.
    pub elapsed: Duration,
    /// What the remote cache did, when there is one.
    pub remote: Option<RemoteReport>,
    /// What a shard build was given to do.
    pub shard: Option<ShardReport>,
}

/// How many recompiled variants a [`BuildReport`] lists with their reasons.
pub const RECOMPILED_LISTED: usize = 1000;

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

/// What failed in a build: whole variants, and (variant, target) pairs of variants whose
/// other targets were built; with what `index.json` says of each failed pair.
#[derive(Default)]
struct Failed {
    variants: BTreeSet<VariantId>,
    pairs: BTreeSet<(VariantId, &'static str)>,
    index: Vec<IndexFailure>,
}

impl Failed {
    /// Whether the output of `variant` for the target named `target` failed in this build.
    fn pair(&self, variant: &VariantId, target: &str) -> bool {
        self.variants.contains(variant)
            || crate::compile::Target::ALL
                .iter()
                .find(|t| t.name() == target)
                .is_some_and(|t| self.pairs.contains(&(variant.clone(), t.name())))
    }
}

/// A build runs its variants in chunks of this many, evicting what the engine's byte
/// budgets do not allow after each.
const VARIANTS_PER_EVICTION: usize = 1024;

/// Without `--max-memory`, the byte budget of each of the two text queries (preprocessed
/// text with line map, compile text) kept between builds.
const DEFAULT_TEXT_BYTES: u64 = 8 << 20;

/// What the engine answers for one variant.
type VariantResult =
    Result<Result<queries::Artifacts, queries::VariantFailure>, kiln_incr::QueryError>;

/// A project open for building: the manifest, the engine database, the store.
pub struct Project {
    db: Db,
    manifest: Arc<Manifest>,
    out_dir: PathBuf,
    cache_dir: PathBuf,
    pool: rayon::ThreadPool,
    keep_failed_outputs: bool,
    /// Every project file the engine has read, also those that did not exist.
    known_files: BTreeSet<PathBuf>,
    /// Files whose contents changed since the last build, for the next report.
    changed_files: BTreeSet<PathBuf>,
    manifest_changed: bool,
    /// What the last build in this process wrote; `None` before it (then `index.json` and
    /// `.kiln-stat` are read from disk).
    last: Option<LastBuild>,
    events: Arc<events::EventCounts>,
    /// A farm shard: builds its share, uploads, writes no outputs.
    shard: Option<Shard>,
    /// The spare files outputs are swapped with (`recycle`); emptied after each build's
    /// output writes.
    spares: recycle::Spares,
}

/// What a build left in the output directory, as this process knows it.
struct LastBuild {
    index: Index,
    stats: stat::OutputStats,
    /// The index was written by this process: every entry names bytes this process wrote
    /// or verified, so an output whose artifact has the entry's hash needs no look on disk
    /// in the next build, unless [`LastBuild::suspect`] names it.
    written_here: bool,
    /// Outputs (index paths) someone else may have changed since: checked on disk next time.
    suspect: BTreeSet<String>,
    /// `index.json` or `.kiln-stat` changed behind kiln's back: rewrite them.
    index_suspect: bool,
}

impl LastBuild {
    /// What `out_dir` says of the previous build, with warnings about what was ignored.
    fn read(out_dir: &Path) -> (Self, Vec<Diagnostic>) {
        let (mut index, warnings) = Index::read_checked(out_dir);
        // Sorted by path, as kiln writes it, also when edited by hand: lookups bisect, and a
        // shuffled file is rewritten.
        let sorted = index.entries.is_sorted_by(|a, b| a.path <= b.path);
        index.entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        let last = LastBuild {
            index,
            stats: stat::OutputStats::read(out_dir),
            written_here: false,
            suspect: BTreeSet::new(),
            index_suspect: !sorted,
        };
        (last, warnings)
    }
}

impl Project {
    /// Opens the project of `options.manifest`, with a store on disk.
    pub fn open(options: &BuildOptions) -> Result<Self, ProjectError> {
        let manifest = Manifest::load(&options.manifest)?;
        let cache_dir = options
            .cache_dir
            .clone()
            .unwrap_or_else(|| manifest.root.join(".kiln"));
        let mut store: Arc<dyn ArtifactStore> = Arc::new(LocalStore::new(&cache_dir));
        let url = match &options.remote {
            _ if options.no_remote => None,
            Some(url) => Some(url.clone()),
            None => manifest.cache.remote.clone(),
        };
        if let Some(url) = url {
            let mut config = RemoteConfig::new(url);
            config.read_only = options.remote_read_only || manifest.cache.read_only;
            if let Some(timeout) = options.remote_timeout {
                config.io_timeout = timeout;
                config.connect_timeout = config.connect_timeout.min(timeout);
            }
            store = Arc::new(TieredStore::new(store, RemoteStore::new(config)?));
        }
        Self::with_store(manifest, options, store, cache_dir)
    }

    /// Opens a project whose manifest is already loaded, with any store.
    pub fn with_store(
        manifest: Manifest,
        options: &BuildOptions,
        store: Arc<dyn ArtifactStore>,
        cache_dir: PathBuf,
    ) -> Result<Self, ProjectError> {
        if let Some(shard) = options.shard {
            if store.remote().is_none_or(RemoteStore::read_only) {
                return Err(ProjectError::ShardWithoutRemote { shard });
            }
        }
        let jobs = options.jobs.unwrap_or(0);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(jobs)
            .thread_name(|i| format!("kiln-worker-{i}"))
            .stack_size(crate::compile::WORKER_STACK_BYTES)
            .build()
            .map_err(|source| ProjectError::Workers { jobs, source })?;
        let out_dir = options
            .out_dir
            .clone()
            .unwrap_or_else(|| manifest.root.join("out"));
        let mut db = Db::new(Services::new(store, options.max_memory));
        // Without a bound, texts are still bounded: they are only needed until compiled.
        let text_bytes = options
            .max_memory
            .map_or(DEFAULT_TEXT_BYTES, |bytes| bytes / 8);
        {
            // Preprocessed texts are the engine's largest memos; evicting them keeps their
            // edges, so dependents re-verify without re-executing. The bound is shared: half
            // for the variant cache, a quarter for deferred saves (`Services::new`), an
            // eighth for each of these two.
            let bytes = usize::try_from(text_bytes).unwrap_or(usize::MAX);
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
            keep_failed_outputs: options.keep_failed_outputs,
            known_files: BTreeSet::new(),
            changed_files: BTreeSet::new(),
            manifest_changed: false,
            last: None,
            events,
            shard: options.shard,
            spares: recycle::Spares::default(),
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
        let cap_changed = manifest.limits.max_source_bytes != self.manifest.limits.max_source_bytes;
        self.manifest = Arc::new(manifest);
        self.manifest_changed = true;
        self.db
            .set_input::<ManifestInput>((), self.manifest.clone(), Durability::Medium);
        if cap_changed {
            // A file refused as too large (or read under a larger cap) is read again.
            self.refresh_all_files();
        }
        Ok(true)
    }

    /// Re-reads the project files at or under the given paths (absolute, or relative to the
    /// project root) that the build depends on; returns those whose contents changed. A path
    /// may name a directory that was created, renamed, moved or removed: every known file
    /// under it is re-read. A file touched without a change, or one no variant reads,
    /// changes nothing and costs no rebuild.
    pub fn refresh_files(&mut self, paths: &[PathBuf]) -> Vec<PathBuf> {
        let mut affected = BTreeSet::new();
        for path in paths {
            let relative = match path.strip_prefix(&self.manifest.root) {
                Ok(r) => r.to_owned(),
                Err(_) => path.clone(),
            };
            // Component-wise order puts a directory's files right after it.
            affected.extend(
                self.known_files
                    .range(relative.clone()..)
                    .take_while(|known| known.starts_with(&relative))
                    .cloned(),
            );
        }
        self.refresh(affected)
    }

    /// Re-reads every file the build depends on (after the file watcher lost events).
    pub fn refresh_all_files(&mut self) -> Vec<PathBuf> {
        let all = self.known_files.clone();
        self.refresh(all)
    }

    fn refresh(&mut self, files: BTreeSet<PathBuf>) -> Vec<PathBuf> {
        let mut changed = Vec::new();
        for relative in files {
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
        self.manifest_changed
            || !self.changed_files.is_empty()
            || self
                .last
                .as_ref()
                .is_none_or(|last| !last.suspect.is_empty() || last.index_suspect)
    }

    /// Checks the given paths, relative to the output directory (from file events; empty:
    /// the whole directory), against what kiln wrote there; returns whether any output, the
    /// index or the stat file differs (was edited, replaced or removed behind kiln's back),
    /// and marks those for the next build. kiln's own writes and removals match and change
    /// nothing, so they never trigger a rebuild. A directory covers every output under it.
    pub fn outputs_changed(&mut self, paths: &[PathBuf]) -> bool {
        let out_dir = &self.out_dir;
        let Some(last) = &mut self.last else {
            return !paths.is_empty();
        };
        let mut changed = false;
        for path in paths {
            let relative = path.to_string_lossy().replace('\\', "/");
            // `.kiln-stat` is a cache: edited or lost, it only costs re-hashing outputs.
            if relative == STAT_FILE {
                continue;
            }
            if (relative.is_empty() || relative == INDEX_FILE)
                && !write::index_holds(out_dir, &last.index, &mut last.stats)
            {
                last.index_suspect = true;
                changed = true;
            }
            for entry in write::entries_at(&last.index.entries, &relative) {
                if !last.suspect.contains(&*entry.path)
                    && !write::holds(out_dir, entry, &mut last.stats)
                {
                    last.suspect.insert(entry.path.to_string());
                    changed = true;
                }
            }
        }
        changed
    }

    /// The variant cache's statistics (requests, hits, compiles, invalidations, evictions).
    pub fn cache_stats(&self) -> crate::variant_cache::CacheStats {
        self.db.context().cache.stats()
    }

    fn read_text(&self, relative: &Path) -> Result<Arc<str>, SourceReadError> {
        let max_bytes = self.manifest.limits.max_source_bytes;
        crate::boundary::read_project_file(&self.manifest.root, relative, max_bytes).map(Arc::from)
    }

    fn set_file(&mut self, relative: PathBuf, text: Result<Arc<str>, SourceReadError>) {
        self.known_files.insert(relative.clone());
        self.db
            .set_input::<SourceFile>(relative, text, Durability::Low);
    }

    /// Every variant of the manifest, in manifest order.
    pub fn variants(&self) -> Vec<VariantId> {
        let mut out = Vec::with_capacity(self.manifest.variant_count());
        // One allocation per distinct keyword and per distinct keyword set, shared by every
        // variant that has it (shaders and passes repeat the same sets): these ids are the
        // engine's keys and the index entries' names for the whole build.
        let mut words: FxHashMap<&str, Arc<str>> = FxHashMap::default();
        let mut sets: FxHashMap<&[String], Arc<[Arc<str>]>> = FxHashMap::default();
        for shader in &self.manifest.shaders {
            let name: Arc<str> = Arc::from(shader.name.as_str());
            for pass in &shader.passes {
                let pass_name: Arc<str> = Arc::from(pass.name.as_str());
                for keywords in &shader.variants {
                    let set = sets.entry(keywords).or_insert_with(|| {
                        keywords
                            .iter()
                            .map(|k| Arc::clone(words.entry(k).or_insert_with(|| Arc::from(&**k))))
                            .collect()
                    });
                    out.push(VariantId {
                        shader: name.clone(),
                        pass: pass_name.clone(),
                        keywords: Arc::clone(set),
                    });
                }
            }
        }
        out
    }

    /// Builds every variant for every target, writes changed outputs and the index.
    ///
    /// A failed variant does not stop the build: every other variant is built, stored and
    /// written, and the failure is a diagnostic in the report. The previous outputs of a
    /// failed variant are removed, or kept and marked stale with
    /// [`BuildOptions::keep_failed_outputs`]. In a project already built in this process,
    /// only what changed since re-executes.
    pub fn build(
        &mut self,
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Result<BuildReport, ProjectError> {
        let started = Instant::now();
        self.db.context().start_build();
        // Evictions at the revision boundaries since the last build belong to this report.
        let evicted_before = self.events.take().evicted;
        self.discover_files();

        let all_variants = self.variants();
        let total = all_variants.len();
        // A shard writes no outputs, so it leaves the output directory alone.
        let (out_lock, waited) = match self.shard {
            Some(_) => (None, false),
            None => {
                let (lock, waited) = self.prepare_out_dir()?;
                (Some(lock), waited)
            }
        };
        let (last, revisions, expected) = self.read_last_build(&all_variants);
        let pinned = self.invalidate_stale_revisions(&revisions);
        // A shard writes no outputs: what is on its disk says nothing of its share.
        let (up_to_date, variants) = match self.shard {
            Some(_) => (Vec::new(), all_variants),
            None => self.up_to_date(&last, all_variants, &revisions, expected.as_ref()),
        };
        drop(expected);
        let (variants, shard) = self.plan_remote(variants);
        // Shared with the report's outcomes, which name variants by their position here.
        let variants: Arc<[VariantId]> = Arc::from(variants);
        // Each up-to-date variant contributed one entry per target.
        let up_to_date_variants = up_to_date.len() / self.manifest.targets.len().max(1);
        // Outputs are about to be written: a kill from here on may leave temporary files
        // anywhere under `out/`, which the marker tells the next build to look for.
        let marker = self.out_dir.join(output::WRITING_MARKER);
        let marked = out_lock.is_some() && !variants.is_empty();
        if marked {
            std::fs::write(&marker, b"").map_err(|source| ProjectError::Output {
                path: marker.clone(),
                source,
            })?;
        }
        let mut report = BuildReport {
            variants: total,
            cached: up_to_date_variants,
            changed_files: std::mem::take(&mut self.changed_files)
                .into_iter()
                .collect(),
            manifest_changed: std::mem::take(&mut self.manifest_changed),
            ..BuildReport::default()
        };
        if waited {
            report.diagnostics.push(Diagnostic::warning(format!(
                "waited for another kiln process building into {}",
                self.out_dir.display()
            )));
        }
        let mut last = last;
        let mut gathered = write::Gathered::default();
        if self.shard.is_none() {
            let outputs = variants.len() * self.manifest.targets.len();
            gathered.entries.reserve_exact(outputs);
            last.stats.reserve(outputs);
        }
        // In chunks, with the engine's byte budgets enforced after each: a text is needed
        // only until its variant is compiled, and a cold build of 100,000 variants would
        // otherwise hold every one until the end. Each chunk's results are folded into
        // the report and `gathered` as soon as it finishes, for the same reason.
        let mut done = up_to_date_variants;
        // Index entries name their shader's revision in hex: one string per shader, shared.
        let shader_revisions: write::ShaderRevisions = revisions
            .iter()
            .map(|(shader, r)| {
                let name = Arc::from(format!("{:016x}", r.short()));
                (Arc::clone(shader), (*r, name))
            })
            .collect();
        report.outcomes = Outcomes::of(Arc::clone(&variants));
        for (number, chunk) in variants.chunks(VARIANTS_PER_EVICTION).enumerate() {
            let results = self.run_variants(chunk, &last, &shader_revisions, done, total, progress);
            done += chunk.len();
            let first = number * VARIANTS_PER_EVICTION;
            self.gather(
                chunk,
                first,
                results,
                &mut report,
                &mut gathered,
                &mut last.stats,
            );
            self.db.context().settle();
            self.db.evict();
            release_free_memory();
        }
        // Before the marker goes: the spares are temporary files.
        self.spares.remove_all();
        drop(pinned);

        let counts = self.events.take();
        report.verified = counts.artifacts_validated;
        report.early_cutoff = counts.backdated;
        report.evicted = counts.evicted + evicted_before;
        report.shard = shard;
        if self.shard.is_some() {
            drop(gathered);
            report.outputs_ready = started.elapsed();
            self.pool.install(|| self.db.context().flush_saves(true));
            self.finish_report(&mut report, started);
            return Ok(report);
        }

        let written = self.write_outputs(gathered, last, up_to_date, &revisions);
        if marked {
            // Every temporary file is gone: renamed into place, or removed on an error.
            let _ = std::fs::remove_file(&marker);
        }
        drop(out_lock);
        report.outputs_ready = started.elapsed();
        // Even when writing outputs failed, what was compiled is kept.
        self.pool.install(|| self.db.context().flush_saves(false));
        if !variants.is_empty() {
            // The previous index and this build's last chunk were freed inside the arenas;
            // under `kiln watch` they would stay resident until the next edit. A no-op
            // build ran nothing and frees little: it skips the walk.
            release_free_memory();
        }
        let written = written?;
        report.outputs_written = written.written;
        report.outputs_removed = written.removed;
        report.failed = written.failed;
        report.failed_outputs = written.failed_outputs;
        report.diagnostics.extend(written.diagnostics);
        self.finish_report(&mut report, started);
        Ok(report)
    }

    /// The store's warnings and the remote's report (one warning per kind of trouble).
    fn finish_report(&self, report: &mut BuildReport, started: Instant) {
        if self.shard.is_some() {
            // No outputs: a variant failed when any of its targets failed.
            report.failed = report
                .diagnostics
                .iter()
                .filter(|d| d.severity == Severity::Error)
                .filter_map(|d| d.variant.as_deref())
                .collect::<BTreeSet<_>>()
                .len();
        }
        let services = self.db.context();
        report
            .diagnostics
            .extend(std::mem::take(&mut *services.build.warnings.lock()));
        if let Some(remote) = services.store.remote() {
            let remote = remote.take_report();
            report.diagnostics.extend(farm::remote_warnings(&remote));
            report.remote = Some(remote);
        }
        report
            .diagnostics
            .sort_by_key(|d| std::cmp::Reverse(d.severity));
        report.elapsed = started.elapsed();
    }

    /// The previous build's outputs (in memory, or read from the output directory), every
    /// shader's revision now, and, in a new process, the stats of `variants`' outputs.
    ///
    /// In a new process the previous build is read from the output directory (`index.json`
    /// parsed, `.kiln-stat` decoded) on a thread of its own while this one hashes the
    /// sources and the pool stats the outputs at the paths kiln gives them: in a warm build
    /// the parse and the stats take about as long, and none of the three needs another.
    fn read_last_build(
        &mut self,
        variants: &[VariantId],
    ) -> (
        LastBuild,
        FxHashMap<Arc<str>, Revision>,
        Option<freshness::ExpectedOutputs>,
    ) {
        if let Some(last) = self.last.take() {
            return (last, self.revisions(), None);
        }
        // Nothing to stat ahead when there is no index (a cold build), nor in a shard.
        let stat_ahead = self.shard.is_none()
            && std::fs::symlink_metadata(self.out_dir.join(INDEX_FILE))
                .is_ok_and(|meta| meta.is_file());
        let out_dir = &self.out_dir;
        let this = &*self;
        let (last, warnings, revisions, expected) = std::thread::scope(|scope| {
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
            let (expected, (revisions, (last, warnings))) = if stat_ahead {
                let (expected, read) = this.stat_expected_outputs(variants, || {
                    let revisions = this.revisions();
                    (revisions, read())
                });
                (Some(expected), read)
            } else {
                (None, (this.revisions(), read()))
            };
            (last, warnings, revisions, expected)
        });
        self.db.context().build.warnings.lock().extend(warnings);
        (last, revisions, expected)
    }

    /// Every variant's artifacts through the engine, in parallel, reporting progress; each
    /// variant's outputs are written as soon as its artifacts are known, while their bytes
    /// are still in memory (a build of 100,000 variants does not hold every artifact until
    /// the end).
    fn run_variants(
        &self,
        variants: &[VariantId],
        last: &LastBuild,
        revisions: &write::ShaderRevisions,
        done_before: usize,
        total: usize,
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Vec<(VariantResult, Option<write::WriteResult>)> {
        let done = AtomicUsize::new(done_before);
        let artifacts_query = self.db.query::<ArtifactsQ>();
        self.pool.install(|| {
            variants
                .par_iter()
                .map(|variant| {
                    let result = artifacts_query.get(variant);
                    let written = match &result {
                        Ok(Ok(artifacts)) if self.shard.is_none() => {
                            Some(self.write_variant(variant, artifacts, last, revisions))
                        }
                        _ => None,
                    };
                    let result = (result, written);
                    let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                    progress(Progress {
                        done: finished,
                        total,
                    });
                    result
                })
                .collect()
        })
    }

    /// Folds one chunk's results into the report (how each variant was obtained, each
    /// failure's diagnostics) and into `gathered` (index entries, failures, outputs written),
    /// and records the stats of the outputs written or verified. A variant whose targets
    /// failed only in part is built (its other targets are written) and its failed pairs
    /// are listed.
    fn gather(
        &self,
        variants: &[VariantId],
        first: usize,
        results: Vec<(VariantResult, Option<write::WriteResult>)>,
        report: &mut BuildReport,
        gathered: &mut write::Gathered,
        stats: &mut stat::OutputStats,
    ) {
        let outcomes = std::mem::take(&mut *self.db.context().build.outcomes.lock());
        let failed = &mut gathered.failed;
        for (at, (variant, (result, written))) in variants.iter().zip(results).enumerate() {
            let outcome = outcomes.get(variant).copied();
            if let Some(outcome) = outcome {
                report.outcomes.record(first + at, outcome);
            }
            let diagnostics = match result {
                Ok(Ok(artifacts)) => {
                    match outcome {
                        Some(Outcome::Compiled) => {
                            report.compiled += 1;
                            if report.recompiled.len() < RECOMPILED_LISTED {
                                report.recompiled.push(Recompiled {
                                    variant: variant.clone(),
                                    digest: self.digest_of(variant),
                                    reason: self.reason(variant, report),
                                });
                            }
                        }
                        Some(Outcome::Deduplicated) => report.deduplicated += 1,
                        Some(Outcome::Cached) | None => report.cached += 1,
                    }
                    for d in artifacts.failed.iter() {
                        let Some(target) = d.target else { continue };
                        failed.pairs.insert((variant.clone(), target.name()));
                        failed
                            .index
                            .push(IndexFailure::new(variant, target.name(), d));
                        report.diagnostics.push(d.clone());
                    }
                    if self.shard.is_some() {
                        // A shard writes no outputs.
                        continue;
                    }
                    // Written by `run_variants` for every built variant.
                    match written.unwrap_or_else(|| {
                        Err(Diagnostic::error(format!("{variant}: outputs not written")))
                    }) {
                        Ok((entries, variant_stats, count)) => {
                            gathered.entries.extend(entries);
                            for (path, stat) in variant_stats {
                                stats.record(&path, stat);
                            }
                            gathered.written += count;
                        }
                        Err(diagnostic) => {
                            failed.variants.insert(variant.clone());
                            failed.index.extend(self.manifest.targets.iter().map(|t| {
                                IndexFailure::new(variant, t.target().name(), &diagnostic)
                            }));
                            gathered.diagnostics.push(diagnostic);
                        }
                    }
                    continue;
                }
                Ok(Err(diagnostics)) => diagnostics.to_vec(),
                Err(engine) => vec![Diagnostic::error(engine.to_string())],
            };
            failed.variants.insert(variant.clone());
            for mut d in diagnostics {
                if d.variant.is_none() {
                    d.variant = Some(variant.to_string());
                }
                if d.severity == Severity::Error {
                    match d.target {
                        Some(target) => {
                            failed
                                .index
                                .push(IndexFailure::new(variant, target.name(), &d))
                        }
                        None => failed.index.extend(
                            self.manifest
                                .targets
                                .iter()
                                .map(|t| IndexFailure::new(variant, t.target().name(), &d)),
                        ),
                    }
                }
                report.diagnostics.push(d);
            }
        }
    }

    /// Why naga had to compile `variant` in this build.
    fn reason(&self, variant: &VariantId, report: &BuildReport) -> String {
        // Only an edit needs the variant's files; without one (a cold build), fetching them
        // would preprocess every variant again after the engine evicted its text.
        let pre = if report.changed_files.is_empty() {
            None
        } else {
            self.db.get::<queries::PreprocessQ>(variant).ok()
        };
        if let Some(Ok(pre)) = pre {
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

    /// The digest of `variant`'s key at its shader's current revision (for logs).
    fn digest_of(&self, variant: &VariantId) -> String {
        match self.db.get::<RevisionQ>(&variant.shader) {
            Ok(Ok(revision)) => queries::variant_key(variant, revision.short())
                .map(|key| key.digest())
                .unwrap_or_default(),
            _ => String::new(),
        }
    }

    /// Every shader's current source revision; shaders whose revision cannot be computed
    /// are absent (their variants fail with the reason).
    fn revisions(&self) -> FxHashMap<Arc<str>, Revision> {
        self.manifest
            .shaders
            .iter()
            .filter_map(|shader| {
                let name: Arc<str> = Arc::from(shader.name.as_str());
                match self.db.get::<RevisionQ>(&name) {
                    Ok(Ok(revision)) => Some((name, revision)),
                    _ => None,
                }
            })
            .collect()
    }

    /// A new source revision makes that shader's cached artifacts stale: they are
    /// invalidated before anything is looked up at the new revision. Their bytes are pinned
    /// for the length of the build, so that variants whose compile did not change find them
    /// by content instead of reloading them from the store.
    fn invalidate_stale_revisions(
        &self,
        revisions: &FxHashMap<Arc<str>, Revision>,
    ) -> Vec<Arc<VariantArtifacts>> {
        let cache = &self.db.context().cache;
        let mut pinned = Vec::new();
        for (shader, revision) in revisions {
            let revision = revision.short();
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

/// Gives the allocator's wholly free pages back to the system. A build's workers allocate
/// and free parsed modules, texts and artifacts in their own malloc arenas, and glibc by
/// itself returns only the top of a thread's arena: the pages a chunk's compiles freed
/// would otherwise stay resident for the rest of the build and under `kiln watch`.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only walks the allocator's own free lists; any thread may call it.
    unsafe {
        libc::malloc_trim(0);
    }
}
