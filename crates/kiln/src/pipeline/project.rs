//! The project between builds: opening it (manifest, store, remote, worker pool, engine),
//! re-reading the files and the manifest that changed, checking the output directory against
//! what kiln wrote there, and the manifest's variants.

use super::engine::events::EventCounts;
use super::engine::queries::{self, Db, ManifestInput, SourceFile};
use super::engine::services::Services;
use super::out_dir::holds;
use super::out_dir::recycle::Spares;
use super::{BuildOptions, Project, ProjectError, VariantId, INDEX_FILE, STAT_FILE};
use crate::boundary::SourceReadError;
use crate::manifest::{Manifest, ManifestError};
use crate::store::{ArtifactStore, LocalStore, RemoteConfig, RemoteStore, TieredStore};
use kiln_incr::Durability;
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Without `--max-memory`, the byte budget of each of the two text queries (preprocessed
/// text with line map, compile text) kept between builds.
const DEFAULT_TEXT_BYTES: u64 = 8 << 20;

impl Project {
    /// Opens the project of `options.manifest`, with a store on disk.
    pub fn open(options: &BuildOptions) -> Result<Self, ProjectError> {
        let manifest = Manifest::load(&options.manifest)?;
        let cache_dir = options
            .cache_dir
            .clone()
            .unwrap_or_else(|| manifest.root.join(".kiln"));
        if let Some(link) = crate::boundary::project_link_on(&manifest.root, &cache_dir) {
            return Err(ProjectError::UnsafeDir {
                path: cache_dir,
                problem: format!(
                    "{} is a symbolic link in the project; the store is written only in a real \
                     directory (name the directory it leads to with `--cache-dir`)",
                    link.display()
                ),
            });
        }
        let mut store: Arc<dyn ArtifactStore> = Arc::new(LocalStore::new(&cache_dir));
        let url = match &options.remote {
            _ if options.no_remote => None,
            Some(url) => Some(url.clone()),
            None => manifest.cache.remote.clone(),
        };
        if let Some(url) = url {
            let mut config = RemoteConfig::new(url);
            // Read-only unless this machine is told to write (CI): a developer's build reads
            // what CI wrote and never chooses what others get. A shard exists to upload.
            let push = options.remote_push || options.shard.is_some();
            config.read_only = !push || options.remote_read_only || manifest.cache.read_only;
            config.key = options.remote_key.clone();
            if let Some(timeout) = options.remote_timeout {
                config.timeout = timeout;
                config.connect_timeout = config.connect_timeout.min(timeout);
            }
            if let Some(cap) = options.remote_max_value_bytes {
                config.max_value_bytes = cap;
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
        let events = Arc::new(EventCounts::default());
        let listener = events.clone();
        db.set_event_listener(move |event| listener.record(event));
        let root = ProjectRoot::open(&manifest.root);
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
            manifest_changes: Vec::new(),
            last: None,
            events,
            shard: options.shard,
            spares: Spares::default(),
            root,
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
        for change in crate::manifest::changes(&self.manifest, &manifest) {
            if !self.manifest_changes.contains(&change) {
                self.manifest_changes.push(change);
            }
        }
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

    /// Whether a project file or the manifest changed since the last build or
    /// [`Project::prepare`].
    pub fn has_changes(&self) -> bool {
        self.manifest_changed || !self.changed_files.is_empty()
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
                && !holds::index_holds(out_dir, &last.index, &mut last.stats)
            {
                last.index_suspect = true;
                changed = true;
            }
            // A pack is an output too: one removed or edited behind kiln's back is made again.
            for pack in &last.index.packs {
                let at = relative.is_empty() || relative == pack.path;
                if at
                    && !last.suspect.contains(&pack.path)
                    && !holds::holds(out_dir, &pack.recorded(), &mut last.stats)
                {
                    last.suspect.insert(pack.path.clone());
                    changed = true;
                }
            }
            for entry in holds::entries_at(&last.index.entries, &relative) {
                if !last.suspect.contains(&*entry.path)
                    && !holds::holds(out_dir, &entry.recorded(), &mut last.stats)
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

    pub(super) fn read_text(&self, relative: &Path) -> Result<Arc<str>, SourceReadError> {
        let max_bytes = self.manifest.limits.max_source_bytes;
        crate::boundary::read_project_file(&self.manifest.root, relative, max_bytes).map(Arc::from)
    }

    pub(super) fn set_file(&mut self, relative: PathBuf, text: Result<Arc<str>, SourceReadError>) {
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
}

/// The project directory as it was when the project was opened, held open: removed, its
/// link count drops to zero (its inode number may be reused at once by a directory made
/// again at the same path, so numbers alone cannot tell); moved away and replaced, the path
/// names another inode while the open one still exists. Either way a build there would
/// make its output directory, and so the project directory, again.
pub(super) struct ProjectRoot {
    #[cfg(unix)]
    dir: Option<std::fs::File>,
}

impl ProjectRoot {
    fn open(root: &Path) -> Self {
        #[cfg(unix)]
        {
            ProjectRoot {
                dir: std::fs::File::open(root).ok(),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = root;
            ProjectRoot {}
        }
    }

    /// Whether `root` is no longer the directory opened.
    pub(super) fn gone(&self, root: &Path) -> bool {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let Some(Ok(open)) = self.dir.as_ref().map(std::fs::File::metadata) else {
                return false;
            };
            let elsewhere = std::fs::metadata(root).map_or(true, |now| {
                (now.dev(), now.ino()) != (open.dev(), open.ino())
            });
            open.nlink() == 0 || elsewhere
        }
        #[cfg(not(unix))]
        {
            let _ = root;
            false
        }
    }
}

impl Project {
    /// Whether the project directory was removed, or replaced by another at its path, since
    /// the project was opened: nothing there can be built any more (see [`ProjectRoot`]).
    pub fn root_gone(&self) -> bool {
        self.root.gone(&self.manifest.root)
    }
}
