//! The pipeline as engine queries: source files and the manifest are inputs; include
//! closures, source revisions, preprocessed texts and compiled artifacts are derived, so that
//! what an edit invalidates is computed by the engine, never written by hand.
//!
//! ```text
//! SourceFile(path), ManifestInput        inputs
//!   -> ShaderSpecQ(shader), TargetsQ, LimitsQ   the manifest, per shader (backdated)
//!   -> ClosureQ(source) -> RevisionQ(shader)      include closure, content hash
//!   -> PreprocessQ(variant)               text + line map, through FileViewQ(file, blocks)
//!   -> CompileTextQ(variant)              text only: a comment edit stops here (backdated)
//!   -> ArtifactsQ(variant)                artifacts for every target, via the variant cache;
//!                                         the revision only names failures
//! ```

use super::scope::VariantScope;
use super::services::{CompileInput, Outcome, Services};
use crate::compile::slang::SlangBundle;
use crate::compile::{Constants, SourceLanguage, Target, TargetConfig};
use crate::identity::{self, Revision};
use crate::key::VariantKey;
use crate::manifest::{Limits, Manifest, PassSpec, ShaderSpec};
use crate::pipeline::{Diagnostic, VariantId};
use crate::preprocess::{
    Dialect, FileView, IncludeClosure, LineMap, PreprocessBudget, PreprocessRequest, Preprocessed,
    SourceLoader,
};
use crate::store::ContentKey;
use kiln_incr::{Database, Input, Query, QueryError};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) type Db = Database<Services>;

/// The text of a project file, or why it cannot be read (missing, outside the root, not a
/// regular file, too large, not UTF-8).
pub(crate) struct SourceFile;
impl Input for SourceFile {
    type Key = PathBuf;
    type Value = Result<Arc<str>, crate::boundary::SourceReadError>;
    const NAME: &'static str = "source_file";
}

/// The checked manifest.
pub(crate) struct ManifestInput;
impl Input for ManifestInput {
    type Key = ();
    type Value = Arc<Manifest>;
    const NAME: &'static str = "manifest";
}

/// Reads a file through the engine, so that the read is a dependency. The pipeline reads
/// every file of every include closure before variants run (see `Project::discover_files`);
/// a file it has not read yet is reported as missing, and discovery reads it.
fn read_source(db: &Db, path: &Path) -> Result<Arc<str>, io::Error> {
    match db.input::<SourceFile>(&path.to_path_buf()) {
        Some(Ok(text)) => Ok(text),
        Some(Err(e)) => Err(e.to_io_error()),
        None => Err(io::Error::new(io::ErrorKind::NotFound, "not read yet")),
    }
}

fn manifest(db: &Db) -> Arc<Manifest> {
    // The pipeline sets the manifest before any query runs.
    db.input::<ManifestInput>(&()).unwrap_or_else(|| {
        Arc::new(Manifest {
            path: PathBuf::new(),
            root: PathBuf::new(),
            targets: Vec::new(),
            shaders: Vec::new(),
            limits: Default::default(),
            cache: Default::default(),
            output: Default::default(),
            variants_from: Vec::new(),
        })
    })
}

/// One shader's part of the manifest: editing another shader does not touch this one.
pub(crate) struct ShaderSpecQ;
impl Query<Services> for ShaderSpecQ {
    type Key = Arc<str>;
    type Value = Option<Arc<ShaderSpec>>;
    const NAME: &'static str = "shader_spec";
    fn execute(db: &Db, name: &Arc<str>) -> Result<Self::Value, QueryError> {
        let manifest = manifest(db);
        Ok(manifest
            .shaders
            .iter()
            .find(|s| *s.name == **name)
            .map(Arc::clone))
    }
}

/// The manifest's targets.
pub(crate) struct TargetsQ;
impl Query<Services> for TargetsQ {
    type Key = ();
    type Value = Arc<[TargetConfig]>;
    const NAME: &'static str = "targets";
    fn execute(db: &Db, _: &()) -> Result<Self::Value, QueryError> {
        Ok(Arc::from(manifest(db).targets.clone()))
    }
}

/// The project's limits: one value for every variant's preprocessing budget, backdated, so
/// that an edit elsewhere in the manifest re-executes no variant through it.
pub(crate) struct LimitsQ;
impl Query<Services> for LimitsQ {
    type Key = ();
    type Value = Limits;
    const NAME: &'static str = "limits";
    fn execute(db: &Db, _: &()) -> Result<Self::Value, QueryError> {
        Ok(manifest(db).limits)
    }
}

/// What an include closure depends on besides the files: the source, its preprocessor and
/// the include directories searched.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ClosureKey {
    pub source: PathBuf,
    pub language: Dialect,
    pub include_dirs: Arc<[PathBuf]>,
}

impl ClosureKey {
    pub fn of(pass: &PassSpec, spec: &ShaderSpec) -> Self {
        Self {
            source: pass.source.clone(),
            language: pass.language.into(),
            include_dirs: Arc::from(spec.include_dirs.as_slice()),
        }
    }
}

/// Every file a source can include, under any keyword set.
pub(crate) struct ClosureQ;
impl Query<Services> for ClosureQ {
    type Key = ClosureKey;
    type Value = Result<Arc<IncludeClosure>, Diagnostic>;
    const NAME: &'static str = "include_closure";
    fn execute(db: &Db, key: &ClosureKey) -> Result<Self::Value, QueryError> {
        let loader = |path: &Path| read_source(db, path);
        Ok(db
            .context()
            .preprocessor
            .include_closure(&key.source, key.language, &key.include_dirs, &loader)
            .map(Arc::new)
            .map_err(|e| Diagnostic::from_preprocess(&e)))
    }
}

/// A shader's source revision: its include closures' contents, its manifest entry, the
/// targets and the compiler (see [`identity::shader_revision`]). Stable across processes and
/// machines, so it can name outputs; complete, so it can key the variant cache.
pub(crate) struct RevisionQ;
impl Query<Services> for RevisionQ {
    type Key = Arc<str>;
    type Value = Result<Revision, Diagnostic>;
    const NAME: &'static str = "source_revision";
    fn execute(db: &Db, shader: &Arc<str>) -> Result<Self::Value, QueryError> {
        let Some(spec) = db.get::<ShaderSpecQ>(shader)? else {
            return Ok(Err(Diagnostic::error(format!(
                "no shader named `{shader}`"
            ))));
        };
        let targets = db.get::<TargetsQ>(&())?;
        let mut sources: Vec<ClosureKey> = spec
            .passes
            .iter()
            .map(|p| ClosureKey::of(p, &spec))
            .collect();
        sources.sort();
        sources.dedup();
        let mut files: Vec<(PathBuf, Option<Arc<str>>)> = Vec::new();
        for source in &sources {
            let closure = match db.get::<ClosureQ>(source)? {
                Ok(closure) => closure,
                Err(diagnostic) => return Ok(Err(diagnostic)),
            };
            for file in &closure.files {
                files.push((file.clone(), read_source(db, file).ok()));
            }
            for missing in &closure.missing {
                files.push((missing.path.clone(), None));
            }
        }
        Ok(Ok(identity::shader_revision(
            &spec,
            &targets,
            files
                .iter()
                .map(|(path, text)| (path.as_path(), text.as_deref())),
        )))
    }
}

fn spec_and_pass(
    db: &Db,
    variant: &VariantId,
) -> Result<Result<(Arc<ShaderSpec>, usize), Diagnostic>, QueryError> {
    let Some(spec) = db.get::<ShaderSpecQ>(&variant.shader)? else {
        return Ok(Err(Diagnostic::error(format!(
            "no shader named `{}`",
            variant.shader
        ))));
    };
    match spec.passes.iter().position(|p| *p.name == *variant.pass) {
        Some(index) => Ok(Ok((spec, index))),
        None => Ok(Err(Diagnostic::error(format!(
            "shader `{}` has no pass `{}`",
            variant.shader, variant.pass
        )))),
    }
}

/// The part of a file a preprocessing run used ([`FileView`]): its directive lines and the
/// code lines of the blocks the run found active. A variant's text depends on its files
/// through these, so that an edit inside an `#ifdef` block a variant skips leaves the
/// variant alone: the view's hash comes out equal and is backdated.
pub(crate) struct FileViewQ;
impl Query<Services> for FileViewQ {
    type Key = (Arc<str>, FileView);
    /// `None`: the file cannot be read or lexed now. Half of a blake3: one of these per
    /// distinct view, tens of thousands in a large project.
    type Value = Option<[u8; 16]>;
    const NAME: &'static str = "file_view";
    fn execute(db: &Db, (path, view): &(Arc<str>, FileView)) -> Result<Self::Value, QueryError> {
        Ok(read_source(db, Path::new(&**path)).ok().and_then(|text| {
            let hash = db.context().preprocessor.view_hash(path, &text, view)?;
            let mut half = [0; 16];
            half.copy_from_slice(&hash[..16]);
            Some(half)
        }))
    }
}

/// The loader of a variant's preprocessing: a file read for a view is recorded as its view
/// once the run says which it is; every other read, and a failed one, as the whole file.
struct ViewLoader<'db> {
    db: &'db Db,
    /// A failure of the engine while recording a view (a cycle, a cancelled query).
    failed: std::cell::RefCell<Option<QueryError>>,
}

impl SourceLoader for ViewLoader<'_> {
    fn load(&self, path: &Path) -> Result<Arc<str>, io::Error> {
        read_source(self.db, path)
    }

    fn load_viewed(&self, path: &Path) -> Result<Arc<str>, io::Error> {
        match self.db.input_untracked::<SourceFile>(&path.to_path_buf()) {
            Some(Ok(text)) => Ok(text),
            _ => read_source(self.db, path),
        }
    }

    fn viewed(&self, path: &Arc<str>, view: &FileView) {
        if let Err(error) = self.db.get::<FileViewQ>(&(Arc::clone(path), view.clone())) {
            self.failed.borrow_mut().get_or_insert(error);
        }
    }
}

/// A variant's preprocessed text and line map.
pub(crate) struct PreprocessQ;
impl Query<Services> for PreprocessQ {
    type Key = VariantId;
    // The error is behind an `Arc`: a memo keeps its value's size after eviction, one per
    // variant, and a `Diagnostic` inline is 96 bytes.
    type Value = Result<Arc<Preprocessed>, Arc<Diagnostic>>;
    const NAME: &'static str = "preprocess";
    fn size_bytes(value: &Self::Value) -> usize {
        std::mem::size_of::<Self::Value>() + value.as_ref().map_or(0, |p| p.heap_bytes())
    }
    fn execute(db: &Db, variant: &VariantId) -> Result<Self::Value, QueryError> {
        let (spec, pass) = match spec_and_pass(db, variant)? {
            Ok(found) => found,
            Err(diagnostic) => return Ok(Err(Arc::new(diagnostic))),
        };
        let pass = &spec.passes[pass];
        let keywords: Vec<&str> = variant.keywords.iter().map(|k| &**k).collect();
        let pass_defines = pass.defines();
        let defines: Vec<(&str, &str)> = spec
            .defines
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(pass_defines.iter().map(|(k, v)| (*k, v.as_str())))
            .collect();
        if pass.language == SourceLanguage::Slang {
            return slang_bundle(db, &spec, pass, &keywords, &defines);
        }
        let limits = db.get::<LimitsQ>(&())?;
        let loader = ViewLoader {
            db,
            failed: Default::default(),
        };
        let request = PreprocessRequest {
            entry: &pass.source,
            language: pass.language.into(),
            include_dirs: &spec.include_dirs,
            keywords: &keywords,
            defines: &defines,
            budget: PreprocessBudget::for_max_source_bytes(limits.max_source_bytes),
        };
        let preprocessed = db.context().preprocessor.preprocess(&request, &loader);
        if let Some(error) = loader.failed.into_inner() {
            return Err(error);
        }
        Ok(preprocessed
            .map(Arc::new)
            .map_err(|e| Arc::new(Diagnostic::from_preprocess(&e))))
    }
}

/// A Slang variant's input ([`SlangBundle`]): its entry file and every file its imports and
/// includes can reach, read here through the engine (so each is a dependency), with its
/// macros and search directories. Slang is given exactly these files, so the bundle is the
/// whole of what its artifacts depend on. Slang runs its own preprocessor: a keyword changes
/// the bundle even where it changes no code, and a comment edit compiles again.
fn slang_bundle(
    db: &Db,
    spec: &ShaderSpec,
    pass: &PassSpec,
    keywords: &[&str],
    defines: &[(&str, &str)],
) -> Result<<PreprocessQ as Query<Services>>::Value, QueryError> {
    let fail = |d: Diagnostic| Ok(Err(Arc::new(d)));
    let closure = match db.get::<ClosureQ>(&ClosureKey::of(pass, spec))? {
        Ok(closure) => closure,
        Err(d) => return fail(d),
    };
    let mut texts: Vec<(String, Arc<str>)> = Vec::with_capacity(closure.files.len());
    for file in &closure.files {
        let text = match read_source(db, file) {
            Ok(text) => text,
            Err(e) => {
                return fail(Diagnostic::error(format!(
                    "cannot read {}: {e}",
                    file.display()
                )))
            }
        };
        texts.push((slang_path(file), text));
    }
    let dirs: Vec<String> = spec.include_dirs.iter().map(|d| slang_path(d)).collect();
    let main = slang_path(&pass.source);
    let bundle = SlangBundle {
        main: &main,
        search_dirs: dirs.iter().map(String::as_str).collect(),
        defines: keywords
            .iter()
            .map(|k| (*k, "1"))
            .chain(defines.iter().copied())
            .collect(),
        files: texts.iter().map(|(p, t)| (p.as_str(), &**t)).collect(),
    };
    let text = bundle.encode();
    // Slang's errors are located in the bundle's text; its lines map back to the files.
    let lines = match SlangBundle::decode(&text) {
        Ok(decoded) => decoded.line_origins(&text),
        Err(_) => Vec::new(),
    };
    Ok(Ok(Arc::new(Preprocessed {
        line_map: LineMap::new(closure.files.clone(), lines),
        text,
    })))
}

/// A root-relative path as Slang is given it: `/`-separated (kiln's paths are relative and
/// checked, so this is lossless on every platform kiln runs on).
fn slang_path(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

/// A variant's text as naga sees it, with its hash. Editing a comment changes the line map
/// but not this, so nothing downstream re-executes.
///
/// The text is the preprocessed one itself, shared, not a copy: at 100,000 variants a
/// second copy of every text was a large part of a build's memory. Equality is the text's
/// (the line map is not part of this value); the fingerprint is the text's hash.
#[derive(Clone, Debug)]
pub(crate) struct CompileText {
    pre: Arc<Preprocessed>,
    pub hash: ContentKey,
}

impl CompileText {
    pub fn text(&self) -> &str {
        &self.pre.text
    }
}

impl PartialEq for CompileText {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.pre.text == other.pre.text
    }
}

impl Eq for CompileText {}

impl std::hash::Hash for CompileText {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Equal texts have equal hashes, so this agrees with `eq`.
        self.hash.hash(state);
    }
}

pub(crate) struct CompileTextQ;
impl Query<Services> for CompileTextQ {
    type Key = VariantId;
    type Value = Result<CompileText, Arc<Diagnostic>>;
    const NAME: &'static str = "compile_text";
    fn execute(db: &Db, variant: &VariantId) -> Result<Self::Value, QueryError> {
        Ok(db.get::<PreprocessQ>(variant)?.map(|pre| CompileText {
            hash: ContentKey::hash(pre.text.as_bytes()),
            pre,
        }))
    }
    fn size_bytes(value: &Self::Value) -> usize {
        std::mem::size_of::<Self::Value>() + value.as_ref().map_or(0, |t| t.pre.heap_bytes())
    }
}

/// Everything a variant's compile needs besides its key: its text, its pass, the targets.
pub(crate) struct CompileJob {
    text: CompileText,
    spec: Arc<ShaderSpec>,
    pass: usize,
    constants: Constants,
    pub targets: Arc<[TargetConfig]>,
}

impl CompileJob {
    pub(crate) fn of(db: &Db, variant: &VariantId) -> Result<Result<Self, Diagnostic>, QueryError> {
        let text = match db.get::<CompileTextQ>(variant)? {
            Ok(text) => text,
            Err(d) => return Ok(Err(Arc::unwrap_or_clone(d))),
        };
        let (spec, pass) = match spec_and_pass(db, variant)? {
            Ok(found) => found,
            Err(d) => return Ok(Err(d)),
        };
        let targets = db.get::<TargetsQ>(&())?;
        let constants =
            spec.constants_for(&spec.passes[pass], variant.keywords.iter().map(|k| &**k));
        Ok(Ok(Self {
            text,
            spec,
            pass,
            constants,
            targets,
        }))
    }

    pub(crate) fn input(&self) -> CompileInput<'_> {
        let pass: &PassSpec = &self.spec.passes[self.pass];
        CompileInput {
            front_end: pass.front_end,
            language: pass.language,
            stage: pass.stage,
            entry: &pass.entry,
            text: self.text.text(),
            text_hash: self.text.hash,
            constants: &self.constants,
        }
    }
}

/// One compiled output of a variant, as recorded in the index (the bytes live in the variant
/// cache and the store).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ArtifactRef {
    pub target: Target,
    pub bytes: u64,
    /// blake3 of the output bytes.
    pub hash: ContentKey,
}

/// A variant's outputs for the targets that succeeded and why the others failed (a
/// (variant, target) pair fails alone). Its key and input stamp, which name the shader's
/// revision, are made when its index entries are written (`build::commit::write`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Artifacts {
    pub outputs: Arc<[ArtifactRef]>,
    /// One error per target that failed, naming the variant and the target.
    pub failed: Arc<[Diagnostic]>,
}

/// The canonical key of `variant` at the shader revision `short`.
pub(crate) fn variant_key(variant: &VariantId, short: u64) -> Result<VariantKey, Diagnostic> {
    VariantKey::new(
        &variant.shader,
        &variant.pass,
        variant.keywords.iter(),
        short,
    )
    .map_err(|e| Diagnostic::error(e.to_string()))
}

/// Why a variant has no artifacts: the errors, each naming the variant.
pub(crate) type VariantFailure = Arc<[Diagnostic]>;

/// No failed target. Even an empty `Arc<[_]>` allocates its counts: one per variant.
fn none_failed() -> Arc<[Diagnostic]> {
    static NONE: std::sync::LazyLock<Arc<[Diagnostic]>> =
        std::sync::LazyLock::new(|| Arc::from(Vec::new()));
    Arc::clone(&NONE)
}

pub(crate) struct ArtifactsQ;
impl Query<Services> for ArtifactsQ {
    type Key = VariantId;
    type Value = Result<Artifacts, VariantFailure>;
    const NAME: &'static str = "artifacts";
    fn execute(db: &Db, variant: &VariantId) -> Result<Self::Value, QueryError> {
        let fail = |d: Diagnostic| Ok(Err(Arc::from(vec![d])));
        let job = match CompileJob::of(db, variant)? {
            Ok(job) => job,
            Err(d) => return fail(d),
        };
        // The outputs depend on the compile input, which is tracked (the text through its
        // files' views, the manifest entry, the targets), not on the shader's revision: a
        // revision that moved without changing this variant's text must not execute it again
        // (a store lookup per variant, for every variant of every shader that includes an
        // edited file). The revision only names the variant in the variant cache, so it is
        // taken from the build's plan, which computed every shader's revision before any
        // variant ran (`VariantScope`); asked outside a build, it is read as a dependency.
        let revision = match VariantScope::revision(&variant.shader) {
            Some(revision) => revision,
            None => match db.get::<RevisionQ>(&variant.shader)? {
                Ok(revision) => revision,
                Err(d) => return fail(d),
            },
        };
        let key = match variant_key(variant, revision.short()) {
            Ok(key) => key,
            Err(d) => return fail(d),
        };
        let services = db.context();
        if !services.cache.contains(&key) {
            if let Some(outputs) = services.recorded_outputs(&job.input(), &job.targets) {
                VariantScope::record(|made| made.outcome = Some(Outcome::Cached));
                return Ok(Ok(Artifacts {
                    outputs,
                    failed: none_failed(),
                }));
            }
        }
        match services.materialize(&key, &job.input(), &job.targets) {
            Ok(produced) => {
                // Its worker writes the outputs from these bytes.
                VariantScope::record(|made| {
                    made.outcome = Some(produced.outcome);
                    made.fresh = Some(produced.artifacts.clone());
                });
                let outputs = produced
                    .artifacts
                    .outputs
                    .iter()
                    .zip(&produced.artifacts.hashes)
                    .map(|((target, bytes), hash)| ArtifactRef {
                        target: *target,
                        bytes: bytes.len() as u64,
                        hash: *hash,
                    })
                    .collect();
                let failed = if produced.failed.is_empty() {
                    none_failed()
                } else {
                    Arc::from(diagnose(db, variant, key, &produced.failed)?)
                };
                Ok(Ok(Artifacts { outputs, failed }))
            }
            Err(failures) => Ok(Err(Arc::from(diagnose(db, variant, key, &failures)?))),
        }
    }
}

/// The compiler's failures for `variant`, mapped from positions in the preprocessed text
/// back to the sources. A diagnostic names the variant's key, revision included, so a
/// failure depends on the revision (`key` is the one the artifacts were looked up under).
fn diagnose(
    db: &Db,
    variant: &VariantId,
    key: VariantKey,
    failures: &[(Option<Target>, crate::compile::CompileError)],
) -> Result<Vec<Diagnostic>, QueryError> {
    let key = match db.get::<RevisionQ>(&variant.shader)? {
        Ok(revision) => variant_key(variant, revision.short()).unwrap_or(key),
        Err(_) => key,
    };
    let pre = db.get::<PreprocessQ>(variant)?.ok();
    Ok(failures
        .iter()
        .map(|(target, error)| {
            let d = Diagnostic::from_compile(error, pre.as_deref()).for_variant(&key);
            match target {
                Some(t) => d.for_target(*t),
                None => d,
            }
        })
        .collect())
}
