//! The untracked services pipeline queries use: the artifact store, the variant cache, the
//! per-build deduplication of identical texts, and the counters a build reports.

use super::diagnostic::Diagnostic;
use super::VariantId;
use crate::compile::{self, CompileError, SourceLanguage, Stage, Target, TargetConfig};
use crate::key::VariantKey;
use crate::store::{ArtifactStore, ContentKey, Lookup, Namespace};
use crate::variant_cache::{VariantCache, Weigh};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, Weak};

/// The compiled outputs of one variant, one per target, in the manifest's target order.
#[derive(Debug)]
pub struct VariantArtifacts {
    /// `(target, bytes)` for every target.
    pub outputs: Vec<(Target, Arc<[u8]>)>,
    /// blake3 of each output, in the same order: hashed once, when the bytes arrive.
    pub hashes: Vec<ContentKey>,
}

impl VariantArtifacts {
    fn new(outputs: Vec<(Target, Arc<[u8]>)>) -> Self {
        let hashes = outputs
            .iter()
            .map(|(_, bytes)| ContentKey::hash(bytes))
            .collect();
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

type Produced = Result<(Arc<VariantArtifacts>, Outcome), Failures>;

/// What the engine's queries reach outside the engine. Reads of it are not dependencies:
/// everything here is either content-addressed (the store, the dedup table) or keyed by a
/// canonical variant key that includes the source revision (the variant cache), so it can
/// never answer with something stale.
pub struct Services {
    pub(crate) store: Arc<dyn ArtifactStore>,
    /// Lexed files reused across variants (checked against the engine's text on each use).
    pub(crate) preprocessor: crate::preprocess::Preprocessor,
    pub(crate) cache: VariantCache<Arc<VariantArtifacts>>,
    /// Identical preprocessed texts compile once per build: compile-input hash -> result.
    session: Mutex<FxHashMap<ContentKey, Arc<OnceLock<Produced>>>>,
    /// Artifacts still held by the variant cache, by compile-input hash. Weak: the variant
    /// cache owns the bytes; this lets a variant whose source revision moved but whose text
    /// did not find its artifacts without a trip to the store.
    resident: Mutex<FxHashMap<ContentKey, Weak<VariantArtifacts>>>,
    /// The targets artifacts were produced for; a change empties the variant cache, whose
    /// keys do not name targets.
    targets: Mutex<Vec<TargetConfig>>,
    namespaces: Mutex<FxHashMap<TargetConfig, Namespace>>,
    /// Files a query asked for that the pipeline has not read yet.
    pub(crate) unknown_files: Mutex<Vec<PathBuf>>,
    /// How each variant whose artifacts query executed in this build got its artifacts.
    pub(crate) outcomes: Mutex<FxHashMap<VariantId, Outcome>>,
    /// Store problems repaired during this build.
    pub(crate) warnings: Mutex<Vec<Diagnostic>>,
    /// Compiled artifacts not yet saved to the store, and their total size. Saving waits
    /// until the build's outputs are written (new store files are the slowest thing a build
    /// does on some file systems, and nobody waits for them), unless this grows too large.
    deferred: Mutex<(Vec<PendingSave>, u64)>,
}

/// An artifact waiting to be saved to the store.
type PendingSave = (Namespace, ContentKey, Arc<[u8]>);

/// Deferred store saves above this many bytes are written at once, to bound memory.
const MAX_DEFERRED_BYTES: u64 = 64 << 20;

/// What determines a compile's result besides the target: the compile-input hash.
pub(crate) struct CompileInput<'a> {
    pub language: SourceLanguage,
    pub stage: Stage,
    pub entry: &'a str,
    pub text: &'a str,
    pub text_hash: ContentKey,
}

impl CompileInput<'_> {
    fn content_key(&self) -> ContentKey {
        let mut hasher = blake3::Hasher::new();
        hasher.update(b"kiln compile input v1\0");
        hasher.update(format!("{:?}\0{}\0{}\0", self.language, self.stage, self.entry).as_bytes());
        hasher.update(self.text_hash.as_bytes());
        ContentKey::from_bytes(*hasher.finalize().as_bytes())
    }
}

impl Services {
    pub(crate) fn new(store: Arc<dyn ArtifactStore>, max_memory: Option<u64>) -> Self {
        let cache = match max_memory {
            Some(bytes) => VariantCache::with_capacity(bytes),
            None => VariantCache::new(),
        };
        Self {
            store,
            preprocessor: crate::preprocess::Preprocessor::new(),
            cache,
            session: Mutex::default(),
            resident: Mutex::default(),
            targets: Mutex::default(),
            namespaces: Mutex::default(),
            unknown_files: Mutex::default(),
            outcomes: Mutex::default(),
            warnings: Mutex::default(),
            deferred: Mutex::default(),
        }
    }

    fn defer_save(&self, ns: Namespace, key: ContentKey, bytes: Arc<[u8]>) {
        let overflow = {
            let mut deferred = self.deferred.lock();
            deferred.1 += bytes.len() as u64;
            deferred.0.push((ns, key, bytes));
            if deferred.1 > MAX_DEFERRED_BYTES {
                deferred.1 = 0;
                std::mem::take(&mut deferred.0)
            } else {
                Vec::new()
            }
        };
        self.save_all(overflow);
    }

    /// Writes every deferred artifact to the store (in parallel when called from a pool).
    pub(crate) fn flush_saves(&self) {
        let pending = std::mem::take(&mut self.deferred.lock().0);
        self.deferred.lock().1 = 0;
        self.save_all(pending);
    }

    fn save_all(&self, pending: Vec<PendingSave>) {
        use rayon::prelude::*;
        let failed: Vec<crate::store::StoreError> = pending
            .par_iter()
            .filter_map(|(ns, key, bytes)| self.store.save(ns, key, bytes).err())
            .collect();
        self.warnings
            .lock()
            .extend(super::safe_output::store_save_warning(&failed));
    }

    /// Forgets what belongs to one build only.
    pub(crate) fn start_build(&self, targets: &[TargetConfig]) {
        let mut current = self.targets.lock();
        if *current != targets {
            self.cache.clear();
            self.resident.lock().clear();
            *current = targets.to_vec();
        }
        self.resident
            .lock()
            .retain(|_, artifacts| artifacts.strong_count() > 0);
        self.session.lock().clear();
        self.outcomes.lock().clear();
        self.warnings.lock().clear();
        self.unknown_files.lock().clear();
    }

    /// The namespace of a target in the store.
    pub(crate) fn namespace(&self, target: &TargetConfig) -> Namespace {
        self.namespaces
            .lock()
            .entry(target.clone())
            .or_insert_with(|| {
                Namespace::new(target.target().name(), compile::NAGA_VERSION)
                    .with_option("options", target.options_string())
                    .with_capability(format!("naga-valid-{:#x}", compile::capabilities().bits()))
            })
            .clone()
    }

    /// The artifacts of `key` for every target: from the variant cache, else from this
    /// build's twin with the same text, else from the store, else from naga (then saved).
    pub(crate) fn materialize(
        &self,
        key: &VariantKey,
        input: &CompileInput<'_>,
        targets: &[TargetConfig],
    ) -> Produced {
        let mut outcome = Outcome::Cached;
        let artifacts = self
            .cache
            .get_or_compile(key, |_| {
                let (artifacts, produced) = self.produce_resident(input, targets)?;
                outcome = produced;
                Ok::<_, FailureList>(artifacts)
            })
            .map_err(|e| match e {
                crate::variant_cache::CacheError::Compile { source, .. } => source.0.clone(),
                other => Arc::from(vec![(
                    None,
                    CompileError::new(compile::CompilePhase::Panic, other.to_string(), None),
                )]),
            })?;
        Ok((artifacts, outcome))
    }

    fn produce_resident(
        &self,
        input: &CompileInput<'_>,
        targets: &[TargetConfig],
    ) -> Result<(Arc<VariantArtifacts>, Outcome), FailureList> {
        let key = input.content_key();
        if let Some(artifacts) = self.resident.lock().get(&key).and_then(Weak::upgrade) {
            // Compiled earlier in this very build for a twin text: that is deduplication.
            let compiled_now = self
                .session
                .lock()
                .get(&key)
                .is_some_and(|cell| matches!(cell.get(), Some(Ok((_, Outcome::Compiled)))));
            let outcome = if compiled_now {
                Outcome::Deduplicated
            } else {
                Outcome::Cached
            };
            return Ok((artifacts, outcome));
        }
        let produced = self.produce(&key, input, targets)?;
        self.resident
            .lock()
            .insert(key, Arc::downgrade(&produced.0));
        Ok(produced)
    }

    fn produce(
        &self,
        key: &ContentKey,
        input: &CompileInput<'_>,
        targets: &[TargetConfig],
    ) -> Result<(Arc<VariantArtifacts>, Outcome), FailureList> {
        let cell = self.session.lock().entry(*key).or_default().clone();
        let mut ran = false;
        let produced = cell
            .get_or_init(|| {
                ran = true;
                self.load_or_compile(key, input, targets)
            })
            .clone();
        match produced {
            Ok((artifacts, outcome)) => {
                // A twin of a compiled variant was deduplicated; a twin of a cached one is
                // simply cached too.
                let outcome = match (ran, outcome) {
                    (false, Outcome::Compiled) => Outcome::Deduplicated,
                    (_, outcome) => outcome,
                };
                Ok((artifacts, outcome))
            }
            Err(failures) => Err(FailureList(failures)),
        }
    }

    fn load_or_compile(
        &self,
        key: &ContentKey,
        input: &CompileInput<'_>,
        targets: &[TargetConfig],
    ) -> Produced {
        let mut outputs: Vec<(Target, Option<Arc<[u8]>>)> = Vec::with_capacity(targets.len());
        for target in targets {
            let ns = self.namespace(target);
            let bytes = match self.store.load(&ns, key) {
                Ok(Lookup::Hit(bytes)) => Some(Arc::from(bytes)),
                Ok(Lookup::Miss) => None,
                Ok(Lookup::Corrupt { path, reason }) => {
                    self.warnings.lock().push(Diagnostic::warning(format!(
                        "corrupt store entry {} ({reason}): discarded and rebuilt",
                        path.display()
                    )));
                    None
                }
                Err(e) => {
                    self.warnings.lock().push(Diagnostic::warning(format!(
                        "store read failed, compiling instead: {e}"
                    )));
                    None
                }
            };
            outputs.push((target.target(), bytes));
        }
        if outputs.iter().all(|(_, bytes)| bytes.is_some()) {
            let outputs = outputs
                .into_iter()
                .filter_map(|(target, bytes)| Some((target, bytes?)))
                .collect();
            return Ok((Arc::new(VariantArtifacts::new(outputs)), Outcome::Cached));
        }

        let module =
            compile::parse_and_validate(input.language, input.text, input.stage, input.entry)
                .map_err(|e| Failures::from(vec![(None, e)]))?;
        let mut failures = Vec::new();
        let mut done = Vec::with_capacity(outputs.len());
        for ((target, bytes), config) in outputs.into_iter().zip(targets) {
            let bytes = match bytes {
                Some(bytes) => bytes,
                None => match compile::emit(&module, config) {
                    Ok(bytes) => {
                        let bytes: Arc<[u8]> = Arc::from(bytes);
                        self.defer_save(self.namespace(config), *key, bytes.clone());
                        bytes
                    }
                    Err(e) => {
                        failures.push((Some(target), e));
                        continue;
                    }
                },
            };
            done.push((target, bytes));
        }
        if !failures.is_empty() {
            return Err(Failures::from(failures));
        }
        Ok((Arc::new(VariantArtifacts::new(done)), Outcome::Compiled))
    }
}

/// [`Failures`] as an error the variant cache can carry.
#[derive(Debug)]
pub(crate) struct FailureList(pub Failures);

impl std::fmt::Display for FailureList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let messages: Vec<String> = self.0.iter().map(|(_, e)| e.to_string()).collect();
        f.write_str(&messages.join("; "))
    }
}
