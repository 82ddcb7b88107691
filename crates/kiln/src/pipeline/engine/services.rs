//! The untracked services pipeline queries use: the artifact store, the variant cache, the
//! per-build deduplication of identical texts, and the saves deferred into batches.

use super::queries::ArtifactRef;
use super::scope::VariantScope;
use crate::compile::{
    self, CompileError, CompileRequest, CompilerKind, Constants, FrontEnd, SourceLanguage, Stage,
    Target, TargetConfig,
};
use crate::identity;
use crate::key::VariantKey;
use crate::pipeline::Diagnostic;
use crate::store::{ArtifactStore, ContentKey, Lookup, Namespace};
use crate::variant_cache::{VariantCache, Weigh};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::sync::{Arc, OnceLock, Weak};

/// The compiled outputs of one variant, one per target, in the manifest's target order.
#[derive(Debug)]
pub(crate) struct VariantArtifacts {
    /// `(target, bytes)` for every target.
    pub outputs: Vec<(Target, Arc<[u8]>)>,
    /// blake3 of each output, in the same order: hashed once, when the bytes arrive.
    pub hashes: Vec<ContentKey>,
}

impl VariantArtifacts {
    fn new(outputs: Vec<(Target, Arc<[u8]>)>) -> Self {
        Self::hashed(
            outputs
                .into_iter()
                .map(|(target, bytes)| {
                    let hash = ContentKey::hash(&bytes);
                    (target, bytes, hash)
                })
                .collect(),
        )
    }

    /// From outputs whose hashes are already known.
    fn hashed(outputs: Vec<(Target, Arc<[u8]>, ContentKey)>) -> Self {
        let (outputs, hashes) = outputs
            .into_iter()
            .map(|(target, bytes, hash)| ((target, bytes), hash))
            .unzip();
        Self { outputs, hashes }
    }
}

impl Weigh for VariantArtifacts {
    fn weigh(&self) -> u64 {
        self.outputs
            .iter()
            .map(|(_, bytes)| bytes.len() as u64)
            .sum()
    }
}

/// How a variant's artifacts were obtained in this build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// naga ran.
    Compiled,
    /// Every target was already in the store (or the in-memory cache).
    Cached,
    /// Another variant with an identical preprocessed text produced them in this build.
    Deduplicated,
}

/// A naga failure for one target (or for all when `target` is `None`), before it is mapped to
/// the sources of the variant that asked.
pub(crate) type Failures = Arc<[(Option<Target>, CompileError)]>;

/// What a compile produced for a variant: the artifacts of the targets that succeeded and
/// the failures of the others (a (variant, target) pair fails alone).
#[derive(Clone, Debug)]
pub(crate) struct Produced {
    pub artifacts: Arc<VariantArtifacts>,
    pub outcome: Outcome,
    /// Targets that failed, each with `Some(target)`; empty when every target succeeded.
    pub failed: Failures,
}

/// `Err`: no target could be built (the text does not parse, a constant has no value, or
/// every target failed).
type ProduceResult = Result<Produced, Failures>;

/// What the engine's queries reach outside the engine. Reads of it are not dependencies:
/// everything here is either content-addressed (the store, the dedup table) or keyed by a
/// canonical variant key whose source revision covers every input of the compile (the
/// variant cache, see [`identity`]), so it can never answer with something stale.
///
/// The per-process caches live here; what belongs to one build only is in
/// [`BuildSession`], emptied as a whole when a build starts.
pub(crate) struct Services {
    pub(crate) store: Arc<dyn ArtifactStore>,
    /// Lexed files reused across variants (checked against the engine's text on each use).
    pub(crate) preprocessor: crate::preprocess::Preprocessor,
    pub(crate) cache: VariantCache<Arc<VariantArtifacts>>,
    /// Artifacts still held by the variant cache, by [`identity::job_key`]. Weak: the
    /// variant cache owns the bytes; this lets a variant whose source revision moved but
    /// whose compile did not find its artifacts without a trip to the store.
    resident: Mutex<FxHashMap<ContentKey, Weak<VariantArtifacts>>>,
    namespaces: Mutex<FxHashMap<(CompilerKind, TargetConfig), Arc<Namespace>>>,
    build: BuildSession,
    /// Deferred saves above this many bytes are written at once.
    max_deferred: u64,
}

/// The state shared by the variants of the build in progress: what one variant's execution
/// produces for its build alone comes back to its worker instead ([`VariantScope`]).
#[derive(Default)]
struct BuildSession {
    /// Identical compiles run once per build: [`identity::job_key`] -> result. The bytes
    /// are held weakly: a twin finds them while the variant cache keeps them, else among
    /// the pending saves or in the store, so this table never keeps a build's artifacts
    /// alive on its own.
    dedup: Mutex<FxHashMap<ContentKey, Arc<OnceLock<TwinResult>>>>,
    /// Jobs of this build that succeeded for every target in an earlier chunk, moved out of
    /// `dedup` by [`Services::settle`]: how the first got its artifacts, all a twin still
    /// needs (a build of 100,000 variants would otherwise hold a cell, a weak handle and an
    /// artifact's allocation for each until the end).
    settled: Mutex<FxHashMap<ContentKey, Outcome>>,
    /// Compiled artifacts not yet saved to the store, by compile key, and their total
    /// size. Saved in batches: at the end of the build, or once this holds
    /// [`MAX_DEFERRED_COMPILES`] compiles or more bytes than `Services::max_deferred`.
    /// Loads look here before the store.
    deferred: Mutex<Deferred>,
}

/// Artifacts waiting to be saved: compile key -> (namespace, bytes) per target.
#[derive(Default)]
struct Deferred {
    by_key: FxHashMap<ContentKey, Vec<TargetBytes>>,
    bytes: u64,
}

/// One target's artifact: its store namespace, bytes and their blake3 hash.
type TargetBytes = (Arc<Namespace>, Arc<[u8]>, ContentKey);

/// What a twin (same compile input) finds in the dedup table: the first one's outcome and
/// failures, and its artifacts if they are still in memory.
#[derive(Clone)]
struct Twin {
    artifacts: Weak<VariantArtifacts>,
    outcome: Outcome,
    failed: Failures,
}

type TwinResult = Result<Twin, Failures>;

/// How a twin got its artifacts, given how the first of its job did: a twin of a compiled
/// variant was deduplicated; a twin of a cached one is simply cached too.
fn twin_outcome(first: Outcome) -> Outcome {
    match first {
        Outcome::Compiled => Outcome::Deduplicated,
        other => other,
    }
}

impl BuildSession {
    fn reset(&self) {
        // Dropped, not cleared: a long-lived project keeps no table of its largest build.
        drop(std::mem::take(&mut *self.dedup.lock()));
        drop(std::mem::take(&mut *self.settled.lock()));
        // `deferred` is not per-build data to forget: every build flushes it.
    }
}

/// An artifact waiting to be saved to the store.
type PendingSave = (Arc<Namespace>, ContentKey, Arc<[u8]>, ContentKey);

/// Deferred store saves above this many bytes are written at once, to bound memory (less
/// under `--max-memory`: see [`Services::new`]).
const MAX_DEFERRED_BYTES: u64 = 16 << 20;

/// Deferred saves of this many compiles are written at once: another kiln building the
/// same project at the same time looks in the store right before each compile, so it finds
/// what this one compiled within a batch instead of at the end of the build. A batch is one
/// short transaction (no fsync in WAL mode with `synchronous=NORMAL`).
const MAX_DEFERRED_COMPILES: usize = 128;

/// The variant cache's byte budget without `--max-memory`: artifact bytes need not stay in
/// memory once written (the outputs and the store hold them); this keeps the most recent
/// ones for rebuilds under `kiln watch` without growing with the project.
pub(crate) const DEFAULT_CACHE_BYTES: u64 = 8 << 20;

/// What determines a compile's result besides the target: the compile-input hash.
pub(crate) struct CompileInput<'a> {
    pub front_end: FrontEnd,
    pub language: SourceLanguage,
    pub stage: Stage,
    pub entry: &'a str,
    pub text: &'a str,
    pub text_hash: ContentKey,
    pub constants: &'a Constants,
}

impl CompileInput<'_> {
    /// The store key of this compile within a target's namespace.
    pub(crate) fn compile_key(&self) -> ContentKey {
        identity::compile_key(
            &self.front_end,
            self.language,
            self.stage,
            self.entry,
            &self.text_hash,
            self.constants,
        )
    }
}

impl Services {
    /// Services over `store`. Artifact bytes are bounded by `max_memory` (half of it for
    /// the variant cache, a quarter for deferred saves, the engine's texts take the rest:
    /// see `Project::with_store`), else by [`DEFAULT_CACHE_BYTES`] and
    /// [`MAX_DEFERRED_BYTES`].
    pub(crate) fn new(store: Arc<dyn ArtifactStore>, max_memory: Option<u64>) -> Self {
        let (cache_bytes, max_deferred) = match max_memory {
            Some(bytes) => (bytes / 2, (bytes / 4).min(MAX_DEFERRED_BYTES)),
            None => (DEFAULT_CACHE_BYTES, MAX_DEFERRED_BYTES),
        };
        Self {
            store,
            preprocessor: crate::preprocess::Preprocessor::new(),
            cache: VariantCache::with_capacity(cache_bytes),
            resident: Mutex::default(),
            namespaces: Mutex::default(),
            build: BuildSession::default(),
            max_deferred,
        }
    }

    fn defer_save(&self, ns: Arc<Namespace>, key: ContentKey, bytes: Arc<[u8]>, hash: ContentKey) {
        let overflow = {
            let mut deferred = self.build.deferred.lock();
            deferred.bytes += bytes.len() as u64;
            deferred
                .by_key
                .entry(key)
                .or_default()
                .push((ns, bytes, hash));
            if deferred.bytes > self.max_deferred || deferred.by_key.len() >= MAX_DEFERRED_COMPILES
            {
                Some(std::mem::take(&mut *deferred))
            } else {
                None
            }
        };
        if let Some(overflow) = overflow {
            if let Some(warning) = self.save_all(overflow) {
                VariantScope::record(|made| made.warnings.push(warning));
            }
        }
    }

    /// The bytes of `key` in `ns` if they wait among the deferred saves.
    fn deferred(&self, ns: &Namespace, key: &ContentKey) -> Option<Arc<[u8]>> {
        let deferred = self.build.deferred.lock();
        deferred
            .by_key
            .get(key)?
            .iter()
            .find(|(n, _, _)| **n == *ns)
            .map(|(_, bytes, _)| bytes.clone())
    }

    /// Writes every deferred artifact to the store, and what the store buffered (recency);
    /// records `costs`, this build's compile times, in the remote cache, if any
    /// (`provisional` from a shard, see [`crate::store::RemoteStore::record_costs`]).
    /// Returns the warning of a failed save.
    pub(crate) fn flush_saves(
        &self,
        costs: &[(ContentKey, u64)],
        provisional: bool,
    ) -> Option<Diagnostic> {
        if let Some(remote) = self.store.remote() {
            remote.record_costs(costs, provisional);
        }
        let pending = std::mem::take(&mut *self.build.deferred.lock());
        let warning = self.save_all(pending);
        if let Err(error) = self.store.flush() {
            // Only recency is lost: garbage collection may evict these entries earlier.
            tracing::debug!(%error, "cannot write store recency");
        }
        warning
    }

    /// One batched save: the store writes it in a few transactions, not one per entry.
    fn save_all(&self, pending: Deferred) -> Option<Diagnostic> {
        if pending.by_key.is_empty() {
            return None;
        }
        let pending: Vec<PendingSave> = pending
            .by_key
            .into_iter()
            .flat_map(|(key, outputs)| {
                outputs
                    .into_iter()
                    .map(move |(ns, bytes, hash)| (ns, key, bytes, hash))
            })
            .collect();
        let entries: Vec<crate::store::SaveEntry<'_>> = pending
            .iter()
            .map(|(ns, key, bytes, _)| (&**ns, key, &bytes[..]))
            .collect();
        let hashes: Vec<ContentKey> = pending.iter().map(|(_, _, _, hash)| *hash).collect();
        self.store
            .save_many_hashed(&entries, &hashes)
            .err()
            .map(|failure| crate::pipeline::out_dir::store_save_warning(&failure))
    }

    /// Called between chunks of variants, when no query runs: forgets the artifacts the
    /// variant cache let go of, and keeps of each finished job only its outcome.
    pub(crate) fn settle(&self) {
        self.resident
            .lock()
            .retain(|_, artifacts| artifacts.strong_count() > 0);
        let mut dedup = self.build.dedup.lock();
        let mut settled = self.build.settled.lock();
        dedup.retain(|key, cell| match cell.get() {
            Some(Ok(twin)) if twin.failed.is_empty() && Arc::strong_count(cell) == 1 => {
                settled.insert(*key, twin.outcome);
                false
            }
            _ => true,
        });
    }

    /// Whether a job ran in this build, and if so whether it was compiled.
    fn ran_in_this_build(&self, job: &ContentKey) -> Option<bool> {
        if let Some(outcome) = self.build.settled.lock().get(job) {
            return Some(*outcome == Outcome::Compiled);
        }
        let dedup = self.build.dedup.lock();
        let cell = dedup.get(job)?;
        Some(matches!(cell.get(), Some(Ok(p)) if p.outcome == Outcome::Compiled))
    }

    /// Forgets what belongs to one build only.
    pub(crate) fn start_build(&self) {
        self.resident
            .lock()
            .retain(|_, artifacts| artifacts.strong_count() > 0);
        self.build.reset();
    }

    /// The namespace in the store of a target's artifacts made by a compiler.
    pub(crate) fn namespace(
        &self,
        compiler: CompilerKind,
        target: &TargetConfig,
    ) -> Arc<Namespace> {
        // Shared: every (variant, target) asks, and a namespace is several strings.
        Arc::clone(
            self.namespaces
                .lock()
                .entry((compiler, target.clone()))
                .or_insert_with(|| Arc::new(identity::namespace(compiler, target))),
        )
    }

    /// The sizes and hashes of a variant's outputs as the store recorded them, when it holds
    /// every target, none is refused, and no twin of the text ran in this build: what the
    /// index needs, without loading or hashing any bytes. A variant whose text an edit did
    /// not change (its revision did) is then settled by one small query per target; an
    /// output that must be written is loaded, verified, when written
    /// (`build::commit::write`).
    pub(crate) fn recorded_outputs(
        &self,
        input: &CompileInput<'_>,
        targets: &[TargetConfig],
    ) -> Option<Arc<[ArtifactRef]>> {
        let compile_key = input.compile_key();
        // A twin compiled or loaded in this build is deduplication, and is reported so.
        if self
            .ran_in_this_build(&identity::job_key(&compile_key, targets))
            .is_some()
        {
            return None;
        }
        let compiler = input.front_end.kind();
        if targets.iter().any(|config| {
            compile::refused(&input.front_end, input.stage, config.target()).is_some()
        }) {
            return None;
        }
        let namespaces: Vec<Arc<Namespace>> = targets
            .iter()
            .map(|config| self.namespace(compiler, config))
            .collect();
        let borrowed: Vec<&Namespace> = namespaces.iter().map(|ns| &**ns).collect();
        let recorded = self.store.recorded_all(&borrowed, &compile_key)?;
        Some(
            targets
                .iter()
                .zip(recorded)
                .map(|(config, (bytes, hash))| ArtifactRef {
                    target: config.target(),
                    bytes,
                    hash,
                })
                .collect(),
        )
    }

    /// The artifacts of `key` for every target: from the variant cache, else from this
    /// build's twin with the same text, else from the store, else from naga (then saved).
    /// Only a variant every target of which succeeded enters the variant cache: a failed
    /// compile is never an artifact there; the targets that did succeed are still returned
    /// (and saved to the store).
    pub(crate) fn materialize(
        &self,
        key: &VariantKey,
        input: &CompileInput<'_>,
        targets: &[TargetConfig],
    ) -> ProduceResult {
        let mut outcome = Outcome::Cached;
        let artifacts = self.cache.get_or_compile(key, |_| {
            let produced = self.produce_resident(input, targets)?;
            if !produced.failed.is_empty() {
                return Err(FailureList {
                    failures: produced.failed.clone(),
                    partial: Some(produced),
                });
            }
            outcome = produced.outcome;
            Ok::<_, FailureList>(produced.artifacts)
        });
        match artifacts {
            Ok(artifacts) => Ok(Produced {
                artifacts,
                outcome,
                failed: Arc::from(Vec::new()),
            }),
            Err(crate::variant_cache::CacheError::Compile { source, .. }) => {
                match &source.partial {
                    Some(partial) => Ok(partial.clone()),
                    None => Err(source.failures.clone()),
                }
            }
            Err(other) => Err(Arc::from(vec![(
                None,
                CompileError::new(compile::CompilePhase::Panic, other.to_string(), None),
            )])),
        }
    }

    fn produce_resident(
        &self,
        input: &CompileInput<'_>,
        targets: &[TargetConfig],
    ) -> Result<Produced, FailureList> {
        let compile_key = input.compile_key();
        let key = identity::job_key(&compile_key, targets);
        if let Some(artifacts) = self.resident.lock().get(&key).and_then(Weak::upgrade) {
            // Compiled earlier in this very build for a twin text: that is deduplication.
            let outcome = if self.ran_in_this_build(&key) == Some(true) {
                Outcome::Deduplicated
            } else {
                Outcome::Cached
            };
            return Ok(Produced {
                artifacts,
                outcome,
                failed: Arc::from(Vec::new()),
            });
        }
        let produced = self.produce(&key, &compile_key, input, targets)?;
        if produced.failed.is_empty() {
            self.resident
                .lock()
                .insert(key, Arc::downgrade(&produced.artifacts));
        }
        Ok(produced)
    }

    fn produce(
        &self,
        key: &ContentKey,
        compile_key: &ContentKey,
        input: &CompileInput<'_>,
        targets: &[TargetConfig],
    ) -> Result<Produced, FailureList> {
        let settled = self.build.settled.lock().get(key).copied();
        if let Some(outcome) = settled {
            // Its artifacts left memory (`produce_resident` looked): as for an evicted twin.
            return self.produce_again(key, compile_key, input, targets, outcome);
        }
        let cell = self.build.dedup.lock().entry(*key).or_default().clone();
        let mut produced_here: Option<ProduceResult> = None;
        let twin = cell
            .get_or_init(|| {
                let produced = self.load_or_compile(key, compile_key, input, targets);
                let twin = match &produced {
                    Ok(p) => Ok(Twin {
                        artifacts: Arc::downgrade(&p.artifacts),
                        outcome: p.outcome,
                        failed: p.failed.clone(),
                    }),
                    Err(failures) => Err(failures.clone()),
                };
                produced_here = Some(produced);
                twin
            })
            .clone();
        let failure = |failures| FailureList {
            failures,
            partial: None,
        };
        if let Some(produced) = produced_here {
            return produced.map_err(failure);
        }
        let twin = twin.map_err(failure)?;
        if let Some(artifacts) = twin.artifacts.upgrade() {
            return Ok(Produced {
                artifacts,
                outcome: twin_outcome(twin.outcome),
                failed: twin.failed,
            });
        }
        self.produce_again(key, compile_key, input, targets, twin.outcome)
    }

    /// A twin's artifacts after the first's left memory: they wait among the deferred saves
    /// or are in the store (only if the store lost them is anything compiled again).
    fn produce_again(
        &self,
        key: &ContentKey,
        compile_key: &ContentKey,
        input: &CompileInput<'_>,
        targets: &[TargetConfig],
        first: Outcome,
    ) -> Result<Produced, FailureList> {
        let again = self
            .load_or_compile(key, compile_key, input, targets)
            .map_err(|failures| FailureList {
                failures,
                partial: None,
            })?;
        Ok(Produced {
            outcome: match again.outcome {
                Outcome::Cached => twin_outcome(first),
                other => other,
            },
            ..again
        })
    }

    fn load_or_compile(
        &self,
        job: &ContentKey,
        key: &ContentKey,
        input: &CompileInput<'_>,
        targets: &[TargetConfig],
    ) -> ProduceResult {
        // Pairs the stage table refuses fail without a lookup or a compile, so that a variant
        // whose other targets are all stored is not compiled again for them.
        let mut failures = Vec::new();
        let mut wanted = Vec::with_capacity(targets.len());
        for config in targets {
            match compile::refused(&input.front_end, input.stage, config.target()) {
                Some(e) => failures.push((Some(config.target()), e)),
                None => wanted.push(config),
            }
        }
        if wanted.is_empty() {
            return Err(Failures::from(failures));
        }
        let compiler = input.front_end.kind();
        let outputs: Vec<(Target, Option<Arc<[u8]>>)> = wanted
            .iter()
            .map(|config| (config.target(), self.load(compiler, config, key)))
            .collect();
        if outputs.iter().all(|(_, bytes)| bytes.is_some()) {
            let outputs = outputs
                .into_iter()
                .filter_map(|(target, bytes)| Some((target, bytes?)))
                .collect();
            return Ok(Produced {
                artifacts: Arc::new(VariantArtifacts::new(outputs)),
                outcome: Outcome::Cached,
                failed: Failures::from(failures),
            });
        }
        self.compile_missing(job, key, input, &wanted, outputs, failures)
    }

    /// The bytes of `key` for one target: among the deferred saves, else in the store
    /// (verified); a damaged entry is reported and reads as missing.
    fn load(
        &self,
        compiler: CompilerKind,
        target: &TargetConfig,
        key: &ContentKey,
    ) -> Option<Arc<[u8]>> {
        let ns = self.namespace(compiler, target);
        if let Some(bytes) = self.deferred(&ns, key) {
            return Some(bytes);
        }
        let warning = match self.store.load(&ns, key) {
            Ok(Lookup::Hit(bytes)) => return Some(Arc::from(bytes)),
            Ok(Lookup::Miss) => return None,
            Ok(Lookup::Corrupt {
                path,
                entry,
                reason,
            }) => Diagnostic::warning(format!(
                "corrupt store entry {entry} in {} ({reason}): discarded and rebuilt",
                path.display()
            )),
            Err(e) => Diagnostic::warning(format!("store read failed, compiling instead: {e}")),
        };
        VariantScope::record(|made| made.warnings.push(warning));
        None
    }

    /// Compiles the targets `outputs` lacks (the others were loaded), saves what compiled
    /// (deferred) and records the compile's time for the remote.
    fn compile_missing(
        &self,
        job: &ContentKey,
        key: &ContentKey,
        input: &CompileInput<'_>,
        targets: &[&TargetConfig],
        outputs: Vec<(Target, Option<Arc<[u8]>>)>,
        mut failures: Vec<(Option<Target>, CompileError)>,
    ) -> ProduceResult {
        let missing: Vec<Option<&TargetConfig>> = outputs
            .iter()
            .zip(targets)
            .map(|((_, bytes), config)| bytes.is_none().then_some(*config))
            .collect();
        let request = CompileRequest {
            language: input.language,
            text: input.text,
            stage: input.stage,
            entry: input.entry,
            constants: input.constants,
        };
        let started = std::time::Instant::now();
        let compiled = compile::compile_with(&input.front_end, &request, &missing)
            .map_err(|e| Failures::from(vec![(None, e)]))?;
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        // Only a remote cache receives them (see `flush_saves`): a local build of 100,000
        // variants would hold 5 MB of them for nothing.
        let remote = self.store.remote().is_some();
        VariantScope::record(|made| {
            made.compile_us = made.compile_us.saturating_add(micros);
            if remote {
                made.costs.push((*job, micros.max(1)));
            }
        });
        let compiler = input.front_end.kind();
        let mut done = Vec::with_capacity(outputs.len());
        for (((target, bytes), config), result) in outputs.into_iter().zip(targets).zip(compiled) {
            // Hashed once: for the index and as the store's checksum.
            let (bytes, hash) = match (bytes, result) {
                (Some(bytes), _) => {
                    let hash = ContentKey::hash(&bytes);
                    (bytes, hash)
                }
                (None, Some(Ok(bytes))) => {
                    let bytes: Arc<[u8]> = Arc::from(bytes);
                    let hash = ContentKey::hash(&bytes);
                    self.defer_save(self.namespace(compiler, config), *key, bytes.clone(), hash);
                    (bytes, hash)
                }
                (None, Some(Err(e))) => {
                    failures.push((Some(target), e));
                    continue;
                }
                (None, None) => {
                    let message = "the compiler returned no result for this target".into();
                    let e = CompileError::new(compile::CompilePhase::Emit, message, None);
                    failures.push((Some(target), e));
                    continue;
                }
            };
            done.push((target, bytes, hash));
        }
        if done.is_empty() {
            return Err(Failures::from(failures));
        }
        Ok(Produced {
            artifacts: Arc::new(VariantArtifacts::hashed(done)),
            outcome: Outcome::Compiled,
            failed: Failures::from(failures),
        })
    }
}

/// [`Failures`] as an error the variant cache can carry, with the targets that succeeded
/// when only some failed.
#[derive(Debug)]
pub(crate) struct FailureList {
    pub failures: Failures,
    pub partial: Option<Produced>,
}

impl std::fmt::Display for FailureList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let messages: Vec<String> = self.failures.iter().map(|(_, e)| e.to_string()).collect();
        f.write_str(&messages.join("; "))
    }
}
