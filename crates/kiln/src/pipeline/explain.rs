//! `kiln explain`: every input of one variant's identity, the store entries it maps to, and
//! which of those inputs changed at the last build that changed any, read from the build
//! history ([`super::history`]). Also the count of distinct preprocessed texts per pass
//! (`kiln report`'s funnel), which no build records: a build skips the variants it can prove
//! current without preprocessing them.

use super::engine::queries::{variant_key, CompileJob, CompileTextQ, RevisionQ};
use super::history::{
    read_history, target_record, BuildRecord, FileRecord, HistoryError, PassRecord, ShaderRecord,
    TargetRecord,
};
use super::{Project, VariantId};
use crate::base::ContentKey;
use crate::manifest::ShaderSpec;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// Why a variant cannot be explained.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// No variant of the manifest has this digest, at the last build's revisions or now.
    #[error("no variant has the digest `{0}` (in the last build or in the sources now)")]
    UnknownDigest(String),
    /// Several variants have this digest (it is 48 bits of their key).
    #[error("the digest `{digest}` is shared by {}: name the variant as shader/pass/KEYWORDS", variants.join(", "))]
    AmbiguousDigest {
        /// The digest asked for.
        digest: String,
        /// Every variant that has it, as its outputs are named.
        variants: Vec<String>,
    },
    /// The manifest has no such variant.
    #[error("no variant `{0}` in the manifest (spell it as its outputs are: shader/pass/KEYWORDS, keywords joined by `+`, `_` for none)")]
    UnknownVariant(String),
    /// Neither a digest nor `shader/pass/KEYWORDS`.
    #[error("`{0}` is neither a 12-hex-digit variant digest nor shader/pass/KEYWORDS")]
    Malformed(String),
    /// The build history cannot be read.
    #[error(transparent)]
    History(#[from] HistoryError),
}

/// Every input of one variant's identity, and why it was last rebuilt.
#[derive(Clone, Debug, Serialize)]
pub struct Explanation {
    /// Shader name.
    pub shader: String,
    /// Pass name.
    pub pass: String,
    /// Keywords, canonical order.
    pub keywords: Vec<String>,
    /// `shader/pass/KEYWORDS`, as its outputs are named.
    pub name: String,
    /// Its digest at the shader's revision now (what a build now logs).
    pub digest: String,
    /// Its digest in the last recorded build, when that differs or the sources are as built.
    pub built_digest: Option<String>,
    /// The shader's revision now, 16 hex digits.
    pub revision: String,
    /// kiln's version.
    pub kiln_version: String,
    /// The pass's stage.
    pub stage: String,
    /// The pass's entry point.
    pub entry: String,
    /// The pass's source.
    pub source: String,
    /// Its language.
    pub language: String,
    /// The compiler and its exact version.
    pub compiler: String,
    /// The compiler's options.
    pub options: BTreeMap<String, String>,
    /// Every macro defined before its first line: keywords, the shader's, the pass's.
    pub defines: Vec<Define>,
    /// Its specialization constants (the shader's, the pass's, its keywords').
    pub constants: BTreeMap<String, String>,
    /// Include directories, in search order.
    pub include_dirs: Vec<String>,
    /// Every file its include closure can reach, with its blake3 now.
    pub files: Vec<FileRecord>,
    /// The targets, with their options and capabilities.
    pub targets: Vec<TargetRecord>,
    /// Per target, the store entry of its artifact.
    pub store: Vec<StoreEntry>,
    /// blake3 of its preprocessed text now.
    pub text_hash: Option<String>,
    /// Why it has no text now, when it has none.
    pub text_error: Option<String>,
    /// What changed in its inputs since the last recorded build (not yet built).
    pub since_last_build: Vec<Change>,
    /// The last recorded build that changed its inputs, and what changed.
    pub last_rebuild: Option<Rebuild>,
    /// Builds recorded in the history.
    pub builds_recorded: usize,
    /// Records of the history that could not be read.
    pub history_warnings: Vec<String>,
}

/// A macro a variant is preprocessed with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Define {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
    /// `keyword`, `shader` or `pass`.
    pub origin: &'static str,
}

/// Where one target's artifact of a variant lives in the store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoreEntry {
    /// Target name.
    pub target: String,
    /// The store namespace (kiln, compiler, target, options, capabilities).
    pub namespace: String,
    /// The compiler and its exact version, as the namespace names it.
    pub compiler: String,
    /// The translator from SPIR-V to this target and its version, when one writes it.
    pub translator: Option<String>,
    /// The compile key in that namespace, 64 hex digits; none without a text.
    pub compile_key: Option<String>,
    /// The output's path in the output directory.
    pub output: String,
}

/// The last recorded build that changed a variant's inputs.
#[derive(Clone, Debug, Serialize)]
pub struct Rebuild {
    /// When it finished, ms since the Unix epoch.
    pub time_ms: u64,
    /// 0: the last build; 1: the one before; ...
    pub builds_ago: usize,
    /// The first recorded build of the history: no build before it to compare with.
    pub first_recorded: bool,
    /// What changed since the build before it.
    pub changes: Vec<Change>,
}

/// One input of a variant's identity that differs between two builds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    /// Which kind of input.
    pub kind: ChangeKind,
    /// Which one (a define's name, a file's path, a target, ...).
    pub name: String,
    /// Its value before; none when it was added.
    pub before: Option<String>,
    /// Its value after; none when it was removed.
    pub after: Option<String>,
}

/// The kinds of inputs a variant's identity has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// The shader was not in the build before.
    NewShader,
    /// The pass was not in the build before.
    NewPass,
    /// kiln's version.
    KilnVersion,
    /// A target added, removed, or its options or capabilities.
    Target,
    /// A `#define` of the shader or the pass.
    Define,
    /// A file of the include closure: its contents, or whether it is in the closure.
    File,
    /// A specialization constant.
    Constant,
    /// The include directories.
    IncludeDirs,
    /// The pass's stage, entry point, source or language.
    Pass,
    /// The compiler or its version.
    Compiler,
    /// A compiler option.
    CompilerOption,
    /// A store namespace (a compiler's or translator's version, a target's options).
    Namespace,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            ChangeKind::NewShader => return write!(f, "shader `{}` is new", self.name),
            ChangeKind::NewPass => return write!(f, "pass `{}` is new", self.name),
            ChangeKind::KilnVersion => "kiln version",
            ChangeKind::Target => "target",
            ChangeKind::Define => "define",
            ChangeKind::File => "file",
            ChangeKind::Constant => "constant",
            ChangeKind::IncludeDirs => "include directories",
            ChangeKind::Pass => "pass",
            ChangeKind::Compiler => "compiler",
            ChangeKind::CompilerOption => "compiler option",
            ChangeKind::Namespace => "store namespace of",
        };
        let value = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
        match (&self.before, &self.after) {
            (None, Some(after)) => write!(f, "{what} `{}` added: {after}", self.name),
            (Some(before), None) => write!(f, "{what} `{}` removed (was {before})", self.name),
            _ => write!(
                f,
                "{what} `{}` changed: {} -> {}",
                self.name,
                value(&self.before),
                value(&self.after)
            ),
        }
    }
}

impl Project {
    /// Explains the variant named `query`: `shader/pass/KEYWORDS` as its outputs are named,
    /// or its 12-hex-digit digest (at the last build's revision or the sources' now).
    pub fn explain(&mut self, query: &str) -> Result<Explanation, ExplainError> {
        let history = read_history(&self.cache_dir)?;
        self.discover_files();
        let last = history.records.last();
        let variant = self.resolve(query, last)?;
        let Some(spec) = self
            .manifest
            .shaders
            .iter()
            .find(|s| *s.name == *variant.shader)
            .cloned()
        else {
            return Err(ExplainError::UnknownVariant(query.to_owned()));
        };
        let now = self.shader_record(&spec, &mut HashMap::new());
        let Some(pass) = now.passes.iter().find(|p| *p.name == *variant.pass) else {
            return Err(ExplainError::UnknownVariant(query.to_owned()));
        };
        let keywords: Vec<String> = variant.keywords.iter().map(|k| k.to_string()).collect();
        let targets: Vec<TargetRecord> = self.manifest.targets.iter().map(target_record).collect();
        let current = VariantInputs {
            kiln_version: crate::base::KILN_VERSION,
            targets: &targets,
            shader: &now,
            pass,
            keywords: &keywords,
        };
        let text = self.text_of(&variant);
        let store = self.store_entries(&spec, &variant, text.compile_key.as_deref())?;
        let since_last_build = last
            .map(
                |record| match VariantInputs::of(record, &variant, &keywords) {
                    Some(built) => built.changes_to(&current),
                    None => absent_from(record, &variant),
                },
            )
            .unwrap_or_default();
        let built_digest = last.and_then(|record| {
            let shader = record.shaders.iter().find(|s| *s.name == *variant.shader)?;
            digest_at(&variant, &shader.revision)
        });
        Ok(Explanation {
            shader: variant.shader.to_string(),
            pass: variant.pass.to_string(),
            name: output_name(&variant),
            digest: digest_at(&variant, &now.revision).unwrap_or_default(),
            built_digest,
            revision: now.revision.clone(),
            kiln_version: crate::base::KILN_VERSION.to_owned(),
            stage: pass.stage.clone(),
            entry: pass.entry.clone(),
            source: pass.source.clone(),
            language: pass.language.clone(),
            compiler: pass.compiler.clone(),
            options: pass.options.clone(),
            defines: current.defines(),
            constants: current.constants(),
            include_dirs: now.include_dirs.clone(),
            files: pass.files.clone(),
            targets: targets.clone(),
            store,
            text_hash: text.hash,
            text_error: text.error,
            since_last_build,
            last_rebuild: last_rebuild(&history.records, &variant, &keywords),
            builds_recorded: history.records.len(),
            history_warnings: history.warnings,
            keywords,
        })
    }

    /// The hash of `variant`'s preprocessed text now and its compile key, or why it has none.
    fn text_of(&self, variant: &VariantId) -> TextNow {
        match CompileJob::of(&self.db, variant) {
            Ok(Ok(job)) => {
                let input = job.input();
                TextNow {
                    hash: Some(input.text_hash.to_hex()),
                    compile_key: Some(input.compile_key().to_hex()),
                    error: None,
                }
            }
            Ok(Err(d)) => TextNow::failed(d.message),
            Err(e) => TextNow::failed(e.to_string()),
        }
    }

    /// Per target, where `variant`'s artifact is in the store and its output's path.
    fn store_entries(
        &self,
        spec: &ShaderSpec,
        variant: &VariantId,
        compile_key: Option<&str>,
    ) -> Result<Vec<StoreEntry>, ExplainError> {
        let kind = spec
            .passes
            .iter()
            .find(|p| *p.name == *variant.pass)
            .map(|p| p.front_end.kind())
            .ok_or_else(|| ExplainError::UnknownVariant(output_name(variant)))?;
        let entry = |t: &crate::compile::TargetConfig| {
            let target = t.target();
            let namespace = crate::identity::namespace(kind, t);
            StoreEntry {
                target: target.name().to_owned(),
                namespace: namespace.dir_name().to_owned(),
                compiler: namespace.compiler_version().to_owned(),
                // Targets written by the compiler itself name an empty translator.
                translator: namespace
                    .target_options()
                    .get("translator")
                    .filter(|t| !t.is_empty())
                    .cloned(),
                compile_key: compile_key.map(str::to_owned),
                output: super::output_path(
                    &variant.shader,
                    &variant.pass,
                    &variant.keywords[..],
                    target.extension(),
                ),
            }
        };
        Ok(self.manifest.targets.iter().map(entry).collect())
    }

    /// The variant `query` names (see [`Project::explain`]).
    fn resolve(&self, query: &str, last: Option<&BuildRecord>) -> Result<VariantId, ExplainError> {
        let variants = self.variants();
        let is_digest = query.len() == 12 && query.bytes().all(|b| b.is_ascii_hexdigit());
        if is_digest {
            let wanted = query.to_ascii_lowercase();
            let mut revisions: HashMap<&str, Vec<String>> = HashMap::new();
            for spec in &self.manifest.shaders {
                let mut known = Vec::new();
                if let Ok(Ok(revision)) = self.db.get::<RevisionQ>(&Arc::from(spec.name.as_str())) {
                    known.push(format!("{:016x}", revision.short()));
                }
                let built = last
                    .and_then(|r| r.shaders.iter().find(|s| s.name == spec.name))
                    .map(|s| s.revision.clone());
                known.extend(built);
                revisions.insert(spec.name.as_str(), known);
            }
            let mut matching = variants.into_iter().filter(|v| {
                revisions.get(&*v.shader).is_some_and(|known| {
                    known
                        .iter()
                        .any(|r| digest_at(v, r).is_some_and(|d| d == wanted))
                })
            });
            let found = matching
                .next()
                .ok_or_else(|| ExplainError::UnknownDigest(query.to_owned()))?;
            // 48 bits can collide: name every variant rather than pick one.
            let others: Vec<VariantId> = matching.collect();
            if !others.is_empty() {
                let variants = std::iter::once(&found)
                    .chain(&others)
                    .map(output_name)
                    .collect();
                return Err(ExplainError::AmbiguousDigest {
                    digest: query.to_owned(),
                    variants,
                });
            }
            return Ok(found);
        }
        let parts: Vec<&str> = query.split('/').collect();
        let [shader, pass, words] = parts[..] else {
            return Err(ExplainError::Malformed(query.to_owned()));
        };
        let mut set: Vec<&str> = match words {
            "" => return Err(ExplainError::Malformed(query.to_owned())),
            crate::manifest::NONE_KEYWORD => Vec::new(),
            words => words.split('+').collect(),
        };
        set = kiln_runtime::canon::canonicalize(set);
        variants
            .into_iter()
            .find(|v| {
                *v.shader == *shader
                    && *v.pass == *pass
                    && (v.keywords.iter().map(|k| &**k).eq(set.iter().copied())
                        || keyword_file_name(&v.keywords) == words)
            })
            .ok_or(ExplainError::UnknownVariant(query.to_owned()))
    }

    /// Per (shader, pass), in manifest order: its variants' distinct preprocessed texts now,
    /// and how many have none (their preprocessing fails). Preprocesses every variant that
    /// the engine holds no text for; compiles nothing.
    pub fn distinct_texts(&mut self) -> Vec<PassTexts> {
        self.discover_files();
        let variants = self.variants();
        let mut texts: HashMap<Arc<str>, HashMap<Arc<str>, Texts>> = HashMap::new();
        // In chunks, evicting between them, as a build does: the texts are not kept.
        for chunk in variants.chunks(1024) {
            let db = &self.db;
            let hashes: Vec<Option<ContentKey>> = self.pool.install(|| {
                chunk
                    .par_iter()
                    .map(|v| match db.get::<CompileTextQ>(v) {
                        Ok(Ok(text)) => Some(text.hash),
                        _ => None,
                    })
                    .collect()
            });
            for (variant, hash) in chunk.iter().zip(hashes) {
                let entry = texts
                    .entry(variant.shader.clone())
                    .or_default()
                    .entry(variant.pass.clone())
                    .or_default();
                match hash {
                    Some(hash) => {
                        entry.0.insert(hash);
                    }
                    None => entry.1 += 1,
                }
            }
            self.db.evict();
        }
        let mut out = Vec::new();
        for spec in &self.manifest.shaders {
            for pass in &spec.passes {
                let found = texts
                    .get(spec.name.as_str())
                    .and_then(|passes| passes.get(pass.name.as_str()))
                    .map(|(set, failed)| (set.len(), *failed));
                let (distinct, without_text) = found.unwrap_or_default();
                out.push(PassTexts {
                    shader: spec.name.clone(),
                    pass: pass.name.clone(),
                    variants: spec.variants.len(),
                    distinct,
                    without_text,
                });
            }
        }
        out
    }
}

/// A variant's preprocessed text now ([`Project::text_of`]).
struct TextNow {
    hash: Option<String>,
    compile_key: Option<String>,
    error: Option<String>,
}

impl TextNow {
    fn failed(error: String) -> Self {
        TextNow {
            hash: None,
            compile_key: None,
            error: Some(error),
        }
    }
}

/// A pass's distinct text hashes, and its variants without a text.
type Texts = (HashSet<ContentKey>, usize);

/// One pass's distinct preprocessed texts ([`Project::distinct_texts`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PassTexts {
    /// Shader name.
    pub shader: String,
    /// Pass name.
    pub pass: String,
    /// Its variants.
    pub variants: usize,
    /// Distinct texts among them.
    pub distinct: usize,
    /// Variants whose preprocessing fails.
    pub without_text: usize,
}

fn keyword_file_name(keywords: &[Arc<str>]) -> String {
    let mut name = String::new();
    kiln_runtime::canon::write_keyword_file_name(&mut name, keywords);
    name
}

/// `shader/pass/KEYWORDS`.
fn output_name(variant: &VariantId) -> String {
    format!(
        "{}/{}/{}",
        variant.shader,
        variant.pass,
        keyword_file_name(&variant.keywords)
    )
}

/// The digest of `variant` at the revision spelled `revision` (16 hex digits).
fn digest_at(variant: &VariantId, revision: &str) -> Option<String> {
    let short = u64::from_str_radix(revision, 16).ok()?;
    variant_key(variant, short).ok().map(|key| key.digest())
}

/// Why a variant has no inputs in `before`: its shader was not in that build, or its pass.
fn absent_from(before: &BuildRecord, variant: &VariantId) -> Vec<Change> {
    let shader_known = before.shaders.iter().any(|s| *s.name == *variant.shader);
    let (kind, name) = if shader_known {
        (ChangeKind::NewPass, variant.pass.to_string())
    } else {
        (ChangeKind::NewShader, variant.shader.to_string())
    };
    vec![Change {
        kind,
        name,
        before: None,
        after: None,
    }]
}

/// The last build of `records` (oldest first) whose inputs for `variant` differ from the
/// build's before it.
fn last_rebuild(
    records: &[BuildRecord],
    variant: &VariantId,
    keywords: &[String],
) -> Option<Rebuild> {
    let newest = records.len().checked_sub(1)?;
    for at in (0..records.len()).rev() {
        let Some(after) = VariantInputs::of(&records[at], variant, keywords) else {
            continue;
        };
        let changes = match at.checked_sub(1) {
            None => {
                return Some(Rebuild {
                    time_ms: records[at].time_ms,
                    builds_ago: newest - at,
                    first_recorded: true,
                    changes: Vec::new(),
                })
            }
            Some(before) => match VariantInputs::of(&records[before], variant, keywords) {
                Some(before) => before.changes_to(&after),
                None => absent_from(&records[before], variant),
            },
        };
        if !changes.is_empty() {
            return Some(Rebuild {
                time_ms: records[at].time_ms,
                builds_ago: newest - at,
                first_recorded: false,
                changes,
            });
        }
    }
    None
}

/// What one build recorded of one variant's identity.
struct VariantInputs<'a> {
    kiln_version: &'a str,
    targets: &'a [TargetRecord],
    shader: &'a ShaderRecord,
    pass: &'a PassRecord,
    keywords: &'a [String],
}

impl<'a> VariantInputs<'a> {
    /// `variant`'s inputs in `record`; none when its shader or pass was not in it.
    fn of(record: &'a BuildRecord, variant: &VariantId, keywords: &'a [String]) -> Option<Self> {
        let shader = record.shaders.iter().find(|s| *s.name == *variant.shader)?;
        let pass = shader.passes.iter().find(|p| *p.name == *variant.pass)?;
        Some(VariantInputs {
            kiln_version: &record.kiln_version,
            targets: &record.targets,
            shader,
            pass,
            keywords,
        })
    }

    fn defines(&self) -> Vec<Define> {
        let keywords = self.keywords.iter().map(|k| Define {
            name: k.clone(),
            value: "1".into(),
            origin: "keyword",
        });
        let shader = self.shader.defines.iter().map(|(k, v)| Define {
            name: k.clone(),
            value: v.clone(),
            origin: "shader",
        });
        let pass = self.pass.defines.iter().map(|(k, v)| Define {
            name: k.clone(),
            value: v.clone(),
            origin: "pass",
        });
        keywords.chain(shader).chain(pass).collect()
    }

    /// The shader's, then the pass's, then its keywords' constants, each overriding the
    /// one before (as [`crate::manifest::ShaderSpec::constants_for`]).
    fn constants(&self) -> BTreeMap<String, String> {
        let mut constants = self.shader.constants.clone();
        constants.extend(self.pass.constants.clone());
        for keyword in self.keywords {
            if let Some(values) = self.shader.keyword_constants.get(keyword) {
                constants.extend(values.clone());
            }
        }
        constants
    }

    /// What differs from `self` (the build before) in `after`.
    fn changes_to(&self, after: &VariantInputs<'_>) -> Vec<Change> {
        let mut changes = Changes::default();
        self.project_changes(after, &mut changes);
        self.shader_changes(after, &mut changes);
        self.pass_changes(after, &mut changes);
        changes.0
    }

    /// kiln's version and the targets.
    fn project_changes(&self, after: &VariantInputs<'_>, changes: &mut Changes) {
        changes.value(
            ChangeKind::KilnVersion,
            "kiln",
            self.kiln_version,
            after.kiln_version,
        );
        let targets = |v: &VariantInputs<'_>| {
            v.targets
                .iter()
                .map(|t| (t.name.clone(), format!("{} {}", t.options, t.capabilities)))
                .collect()
        };
        changes.maps(ChangeKind::Target, targets(self), targets(after));
    }

    /// The shader's and pass's defines (a keyword's is the variant itself), constants and
    /// include directories.
    fn shader_changes(&self, after: &VariantInputs<'_>, changes: &mut Changes) {
        let defines = |v: &VariantInputs<'_>| {
            v.defines()
                .into_iter()
                .filter(|d| d.origin != "keyword")
                .map(|d| (d.name, d.value))
                .collect()
        };
        changes.maps(ChangeKind::Define, defines(self), defines(after));
        changes.maps(ChangeKind::Constant, self.constants(), after.constants());
        changes.value(
            ChangeKind::IncludeDirs,
            "include_dirs",
            &self.shader.include_dirs.join(", "),
            &after.shader.include_dirs.join(", "),
        );
    }

    /// The pass: its entry, stage, source and language, its compiler and options, the
    /// files its closure reaches and its store namespaces.
    fn pass_changes(&self, after: &VariantInputs<'_>, changes: &mut Changes) {
        let (b, a) = (self.pass, after.pass);
        for (field, before, now) in [
            ("stage", &b.stage, &a.stage),
            ("entry", &b.entry, &a.entry),
            ("source", &b.source, &a.source),
            ("language", &b.language, &a.language),
        ] {
            changes.value(ChangeKind::Pass, field, before, now);
        }
        changes.value(ChangeKind::Compiler, "compiler", &b.compiler, &a.compiler);
        changes.maps(
            ChangeKind::CompilerOption,
            b.options.clone(),
            a.options.clone(),
        );
        let files = |p: &PassRecord| {
            p.files
                .iter()
                .map(|f| {
                    let hash = f.hash.clone().unwrap_or_else(|| "missing".into());
                    (f.path.clone(), hash)
                })
                .collect()
        };
        changes.maps(ChangeKind::File, files(b), files(a));
        changes.maps(
            ChangeKind::Namespace,
            b.namespaces.clone(),
            a.namespaces.clone(),
        );
    }
}

/// The changes found so far, in the order they were looked for.
#[derive(Default)]
struct Changes(Vec<Change>);

impl Changes {
    fn push(
        &mut self,
        kind: ChangeKind,
        name: &str,
        before: Option<String>,
        after: Option<String>,
    ) {
        if before != after {
            self.0.push(Change {
                kind,
                name: name.to_owned(),
                before,
                after,
            });
        }
    }

    /// One input present in both builds.
    fn value(&mut self, kind: ChangeKind, name: &str, before: &str, after: &str) {
        self.push(kind, name, Some(before.to_owned()), Some(after.to_owned()));
    }

    /// One change per key whose value differs between `before` and `after` (added and
    /// removed keys included).
    fn maps(
        &mut self,
        kind: ChangeKind,
        mut before: BTreeMap<String, String>,
        after: BTreeMap<String, String>,
    ) {
        for (name, value) in after {
            let old = before.remove(&name);
            self.push(kind, &name, old, Some(value));
        }
        for (name, value) in before {
            self.push(kind, &name, Some(value), None);
        }
    }
}
