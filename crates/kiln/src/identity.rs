//! The identity of an artifact: everything that reaches the compiler, hashed with one
//! explicit, versioned encoding. Every key that decides whether a compiled artifact may be
//! reused is computed here and nowhere else:
//!
//! - [`shader_revision`]: a shader's source revision — the contents of every file its passes
//!   can include, *and* its manifest entry, the project's targets (with their options and
//!   capabilities), kiln's version and the compiler's identity. With the pass and keyword
//!   set, it names a variant's artifacts in the variant cache ([`crate::key::VariantKey`]),
//!   so no edit of a source or of the manifest can hit an old artifact.
//! - [`input_stamp`]: the same revision, narrowed to one variant; `index.json` records it per
//!   output, so a build in a new process can trust an output without preprocessing.
//! - [`compile_key`] and [`namespace`]: the store's key for one target's artifact — the
//!   language, stage, entry point and preprocessed text (defines and keywords included), in
//!   a namespace of kiln's version, the compiler, the target, its options and capabilities.
//! - [`job_key`]: a compile for a whole target list, for deduplicating identical texts.
//!
//! Encodings destructure the manifest types exhaustively, so a field added to a shader,
//! a pass or a target fails to compile here until it is hashed.

use crate::base::{hex_lower, ContentKey, KILN_VERSION};
use crate::compile::{
    self, CompilerKind, Constants, FrontEnd, GlslangOptions, SlangOptions, SourceLanguage, Stage,
    TargetConfig,
};
use crate::manifest::{PassSpec, ShaderSpec};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

/// The compiler that produces artifacts: its name and exact version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compiler {
    /// Name (`naga`).
    pub name: &'static str,
    /// Exact version, from `Cargo.lock` at build time.
    pub version: &'static str,
}

/// naga, linked in-process.
pub const NAGA: Compiler = Compiler {
    name: "naga",
    version: compile::NAGA_VERSION,
};

/// glslang (and SPIRV-Tools' optimizer), built from source with the default feature
/// `glslang` (its version says `not linked` otherwise: nothing is ever compiled under that
/// name).
pub const GLSLANG: Compiler = Compiler {
    name: "glslang",
    version: compile::glslang::VERSION,
};

impl Compiler {
    /// The compiler of a kind.
    pub fn of(kind: CompilerKind) -> Compiler {
        match kind {
            CompilerKind::Naga => NAGA,
            CompilerKind::Glslang => GLSLANG,
            // The library this process found: its build tag, or why there is none.
            CompilerKind::Slang => Compiler {
                name: "slang",
                version: compile::slang::version_label(),
            },
        }
    }

    /// `naga 30.0.2`.
    pub fn label(&self) -> String {
        format!("{} {}", self.name, self.version)
    }
}

/// Version of the encodings below; bump it whenever one of them changes.
const ENCODING: &str = "kiln.identity.v4";

/// Length-prefixed fields into blake3, so that no two field lists share an encoding.
struct Encoder(blake3::Hasher);

impl Encoder {
    fn new(domain: &str) -> Self {
        let mut encoder = Encoder(blake3::Hasher::new());
        encoder.str(ENCODING).str(domain);
        encoder
    }

    fn bytes(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.update(&(bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
        self
    }

    fn str(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes())
    }

    fn path(&mut self, path: &Path) -> &mut Self {
        self.str(&path.to_string_lossy())
    }

    fn count(&mut self, n: usize) -> &mut Self {
        self.0.update(&(n as u64).to_le_bytes());
        self
    }

    fn key(&mut self, key: &ContentKey) -> &mut Self {
        self.0.update(key.as_bytes());
        self
    }

    fn finish(&self) -> ContentKey {
        ContentKey::from_bytes(*self.0.finalize().as_bytes())
    }

    fn compiler(&mut self, compiler: &Compiler) -> &mut Self {
        self.str(KILN_VERSION)
            .str(compiler.name)
            .str(compiler.version)
    }

    fn target(&mut self, target: &TargetConfig) -> &mut Self {
        self.str(target.target().name())
            .str(&target.options_string())
            .str(&capabilities(target))
    }

    fn constants(&mut self, constants: &Constants) -> &mut Self {
        self.count(constants.len());
        for (name, value) in constants {
            self.str(name).bytes(&value.0.to_bits().to_le_bytes());
        }
        self
    }

    fn language(&mut self, language: SourceLanguage) -> &mut Self {
        self.str(match language {
            SourceLanguage::Wgsl => "wgsl",
            SourceLanguage::Glsl => "glsl",
            SourceLanguage::Hlsl => "hlsl",
            SourceLanguage::Slang => "slang",
        })
    }

    /// The compiler (name and exact version) and every option it is given.
    fn front_end(&mut self, front_end: &FrontEnd) -> &mut Self {
        let compiler = Compiler::of(front_end.kind());
        self.str(compiler.name).str(compiler.version);
        match front_end {
            FrontEnd::Naga => self,
            FrontEnd::Glslang(options) => {
                let GlslangOptions {
                    optimization,
                    auto_map_locations,
                    auto_bind_uniforms,
                    hlsl_iomap,
                    invert_y,
                    target_env,
                    generate_debug_info,
                    hlsl_functionality1,
                    hlsl_offsets,
                    nan_clamp,
                    binding_base,
                } = options;
                self.str(optimization.name())
                    .flags(&[
                        *auto_map_locations,
                        *auto_bind_uniforms,
                        *hlsl_iomap,
                        *invert_y,
                        *generate_debug_info,
                        *hlsl_functionality1,
                        *hlsl_offsets,
                        *nan_clamp,
                    ])
                    .str(target_env.map_or("default", |env| env.name()));
                let bases = binding_base.values();
                self.count(bases.len());
                for base in bases {
                    self.0.update(&base.to_le_bytes());
                }
                self
            }
            FrontEnd::Slang(options) => {
                let SlangOptions {
                    matrix_layout,
                    optimization,
                } = options;
                self.str(matrix_layout.name()).str(optimization.name())
            }
        }
    }

    fn flags(&mut self, flags: &[bool]) -> &mut Self {
        self.count(flags.len());
        for flag in flags {
            self.0.update(&[u8::from(*flag)]);
        }
        self
    }

    fn stage(&mut self, stage: Stage) -> &mut Self {
        self.str(stage.name())
    }

    fn pass(&mut self, pass: &PassSpec) -> &mut Self {
        let PassSpec {
            name,
            stage,
            entry,
            source,
            language,
            front_end,
            shader_model,
            constants,
        } = pass;
        self.str(name)
            .stage(*stage)
            .str(entry)
            .path(source)
            .language(*language)
            .front_end(front_end)
            .constants(constants);
        match shader_model {
            Some((major, minor)) => self
                .str("sm")
                .count(usize::from(*major))
                .count(usize::from(*minor)),
            None => self.str("no-sm"),
        }
    }

    fn shader(&mut self, shader: &ShaderSpec) -> &mut Self {
        let ShaderSpec {
            name,
            keywords,
            variants,
            passes,
            defines,
            include_dirs,
            constants,
            keyword_constants,
            // What the axes make is `variants`, hashed above.
            axes: _,
        } = shader;
        self.str(name).count(keywords.len());
        for keyword in keywords {
            self.str(keyword);
        }
        self.count(variants.len());
        for set in variants {
            self.count(set.len());
            for keyword in set {
                self.str(keyword);
            }
        }
        self.count(passes.len());
        for pass in passes {
            self.pass(pass);
        }
        self.count(defines.len());
        for (name, value) in defines {
            self.str(name).str(value);
        }
        // The search order decides which file an include finds.
        self.count(include_dirs.len());
        for dir in include_dirs {
            self.str(&dir.to_string_lossy());
        }
        self.constants(constants).count(keyword_constants.len());
        for (keyword, constants) in keyword_constants {
            self.str(keyword).constants(constants);
        }
        self
    }
}

/// The validator capabilities artifacts of `target` are checked against, spelled for keys.
pub fn capabilities(target: &TargetConfig) -> String {
    format!("naga-valid-{:#x}", target.capabilities().bits())
}

/// Everything outside the content key that could change an artifact's bytes: the store
/// keeps each namespace's entries apart. (Its record in a store, `namespace.json`, is the
/// store's: `store/namespace.rs`.)
///
/// Entries of different namespaces never mix: a new kiln or naga release, another target,
/// or other target options or capabilities start from an empty namespace instead of serving
/// binaries built under other assumptions. Options and capabilities are kept sorted, so the
/// order they were given in does not matter.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace {
    fields: NamespaceFields,
    /// `<target>-<16 hex>`; derived from `fields`, recomputed by every setter.
    dir_name: String,
}

/// What a namespace is made of; its directory name is derived from these alone. A store
/// records them as they are (`store/namespace.rs`).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub(crate) struct NamespaceFields {
    kiln_version: String,
    compiler_version: String,
    target: String,
    target_options: BTreeMap<String, String>,
    capabilities: BTreeSet<String>,
}

impl Namespace {
    /// A namespace for `target` (e.g. `"spirv"`) built by `compiler_version` (e.g.
    /// `"naga 30.0.0"`), with this crate's [`KILN_VERSION`], no options and no capabilities.
    pub fn new(target: impl Into<String>, compiler_version: impl Into<String>) -> Self {
        Self::from_fields(NamespaceFields {
            kiln_version: KILN_VERSION.to_owned(),
            compiler_version: compiler_version.into(),
            target: target.into(),
            target_options: BTreeMap::new(),
            capabilities: BTreeSet::new(),
        })
    }

    /// Replaces the kiln version (tests, or a tool reading another version's store).
    pub fn with_kiln_version(mut self, version: impl Into<String>) -> Self {
        self.fields.kiln_version = version.into();
        self.rehash()
    }

    /// Sets one target option (e.g. `"lang_version"` = `"2.4"`), replacing an earlier value.
    pub fn with_option(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.fields.target_options.insert(name.into(), value.into());
        self.rehash()
    }

    /// Adds one capability the artifacts may rely on (e.g. `"float64"`).
    pub fn with_capability(mut self, capability: impl Into<String>) -> Self {
        self.fields.capabilities.insert(capability.into());
        self.rehash()
    }

    /// The kiln version.
    pub fn kiln_version(&self) -> &str {
        &self.fields.kiln_version
    }

    /// The compiler version.
    pub fn compiler_version(&self) -> &str {
        &self.fields.compiler_version
    }

    /// The target.
    pub fn target(&self) -> &str {
        &self.fields.target
    }

    /// The target options, sorted by name.
    pub fn target_options(&self) -> &BTreeMap<String, String> {
        &self.fields.target_options
    }

    /// The capabilities, sorted.
    pub fn capabilities(&self) -> &BTreeSet<String> {
        &self.fields.capabilities
    }

    /// The directory name: the target (reduced to `[a-z0-9_]`, at most 32 characters), a
    /// dash, and the first 16 hex digits of the blake3 hash of all fields. Stable across
    /// processes, platforms and releases of kiln that keep store layout `v1`.
    ///
    /// The hashed bytes are `b"kiln.store.namespace.v1\0"`, then the kiln version, compiler
    /// version and target, then the number of options and each name and value (sorted by
    /// name), then the number of capabilities and each capability (sorted); every string is
    /// preceded by its length and every count is a `u64`, little endian.
    pub fn dir_name(&self) -> &str {
        &self.dir_name
    }

    /// What the namespace is made of, as a store records it.
    pub(crate) fn fields(&self) -> &NamespaceFields {
        &self.fields
    }

    /// A namespace from every field, as a store recorded them.
    pub(crate) fn from_fields(fields: NamespaceFields) -> Self {
        Namespace {
            fields,
            dir_name: String::new(),
        }
        .rehash()
    }

    fn rehash(mut self) -> Self {
        let hash = fingerprint(&self.fields);
        let mut name = sanitized_target(&self.fields.target);
        name.push('-');
        name.push_str(&hex_lower(&hash[..8]));
        self.dir_name = name;
        self
    }
}

impl fmt::Debug for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Namespace")
            .field("dir_name", &self.dir_name)
            .field("kiln_version", &self.fields.kiln_version)
            .field("compiler_version", &self.fields.compiler_version)
            .field("target", &self.fields.target)
            .field("target_options", &self.fields.target_options)
            .field("capabilities", &self.fields.capabilities)
            .finish()
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.dir_name)
    }
}

/// blake3 over a length-prefixed encoding of every field, so that no two distinct field
/// tuples (e.g. `("1.0", "x")` and `("1.0x", "")`) can hash the same input bytes.
fn fingerprint(fields: &NamespaceFields) -> [u8; 32] {
    fn put(hasher: &mut blake3::Hasher, text: &str) {
        hasher.update(&(text.len() as u64).to_le_bytes());
        hasher.update(text.as_bytes());
    }
    let mut hasher = blake3::Hasher::new();
    hasher.update(b"kiln.store.namespace.v1\0");
    put(&mut hasher, &fields.kiln_version);
    put(&mut hasher, &fields.compiler_version);
    put(&mut hasher, &fields.target);
    hasher.update(&(fields.target_options.len() as u64).to_le_bytes());
    for (name, value) in &fields.target_options {
        put(&mut hasher, name);
        put(&mut hasher, value);
    }
    hasher.update(&(fields.capabilities.len() as u64).to_le_bytes());
    for capability in &fields.capabilities {
        put(&mut hasher, capability);
    }
    *hasher.finalize().as_bytes()
}

/// The target as a file-name-safe prefix; the hash that follows it carries the exact text.
fn sanitized_target(target: &str) -> String {
    let name: String = target
        .chars()
        .take(32)
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '_') => c,
            _ => '_',
        })
        .collect();
    if name.is_empty() {
        "target".to_owned()
    } else {
        name
    }
}

/// The store namespace of `target`'s artifacts made by `compiler`: kiln's version, the
/// compiler and its exact version, the target, its options and the capabilities.
pub fn namespace(compiler: CompilerKind, target: &TargetConfig) -> Namespace {
    let namespace = Namespace::new(target.target().name(), Compiler::of(compiler).label())
        .with_option("options", target.options_string())
        .with_capability(capabilities(target));
    match compiler {
        // Reflection reads naga's SPIR-V with SPIRV-Cross.
        CompilerKind::Naga if target.target() == compile::Target::Reflection => {
            namespace.with_option("translator", compile::cross::version(target.target()))
        }
        CompilerKind::Naga => namespace,
        // glslang and Slang write SPIR-V; every other target is the translator's work too.
        CompilerKind::Glslang | CompilerKind::Slang => {
            namespace.with_option("translator", compile::cross::version(target.target()))
        }
    }
}

/// A shader's source revision: see the module documentation. `files` is every file its
/// passes can include with its text (`None`: it does not exist), in a stable order.
pub fn shader_revision<'a>(
    shader: &ShaderSpec,
    targets: &[TargetConfig],
    files: impl IntoIterator<Item = (&'a Path, Option<&'a str>)>,
) -> Revision {
    let mut e = Encoder::new("shader-revision");
    e.compiler(&NAGA).shader(shader).count(targets.len());
    let translated = shader
        .passes
        .iter()
        .any(|pass| matches!(pass.front_end, FrontEnd::Glslang(_) | FrontEnd::Slang(_)));
    for target in targets {
        e.target(target);
        if translated || target.target() == compile::Target::Reflection {
            // glslang's SPIR-V reaches the other targets through a translator; every
            // front end's SPIR-V reaches reflection through SPIRV-Cross.
            e.str(&compile::cross::version(target.target()));
        }
    }
    for (path, text) in files {
        e.path(path);
        match text {
            Some(text) => e.str("file").str(text),
            None => e.str("missing"),
        };
    }
    Revision(e.finish())
}

/// A shader's source revision (see [`shader_revision`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Revision(ContentKey);

impl Revision {
    /// The 64-bit form a [`crate::key::VariantKey`] carries.
    pub fn short(&self) -> u64 {
        let mut first = [0u8; 8];
        first.copy_from_slice(&self.0.as_bytes()[..8]);
        u64::from_le_bytes(first)
    }
}

/// What one variant's outputs are built from: its shader's full revision, its pass and its
/// keyword set; 32 hex digits. Recorded per output in `index.json`.
pub fn input_stamp<'a>(
    revision: &Revision,
    pass: &str,
    keywords: impl ExactSizeIterator<Item = &'a str>,
) -> String {
    let mut e = Encoder::new("input-stamp");
    e.key(&revision.0).str(pass).count(keywords.len());
    for keyword in keywords {
        e.str(keyword);
    }
    e.finish().to_hex()[..32].to_owned()
}

/// The target-independent part of a compile: the compiler with its options, language, stage,
/// entry point, the hash of the preprocessed text and the specialization constants' values
/// (which are not in the text). With a target's [`namespace`], it names one artifact in the
/// store.
pub fn compile_key(
    front_end: &FrontEnd,
    language: SourceLanguage,
    stage: Stage,
    entry: &str,
    text_hash: &ContentKey,
    constants: &Constants,
) -> ContentKey {
    Encoder::new("compile")
        .front_end(front_end)
        .language(language)
        .stage(stage)
        .str(entry)
        .key(text_hash)
        .constants(constants)
        .finish()
}

/// A compile for every target of a list: identical keys give identical artifacts. (The
/// compile key names the compiler, its version and options.)
pub fn job_key(compile_key: &ContentKey, targets: &[TargetConfig]) -> ContentKey {
    let mut e = Encoder::new("job");
    e.compiler(&NAGA).key(compile_key).count(targets.len());
    for target in targets {
        e.target(target);
    }
    e.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::{ConstantValue, Target};
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::PathBuf;

    fn shader() -> ShaderSpec {
        ShaderSpec {
            name: "Lit".into(),
            keywords: BTreeSet::from(["FOG".to_owned()]),
            variants: vec![vec![], vec!["FOG".into()]],
            axes: vec![vec!["_".into(), "FOG".into()]],
            passes: vec![PassSpec {
                name: "Forward".into(),
                stage: Stage::Fragment,
                entry: "fs_main".into(),
                source: PathBuf::from("lit.wgsl"),
                language: SourceLanguage::Wgsl,
                front_end: FrontEnd::Naga,
                shader_model: None,
                constants: Constants::new(),
            }],
            defines: BTreeMap::from([("Q".to_owned(), "1".to_owned())]),
            include_dirs: vec![PathBuf::from("inc")],
            constants: Constants::from([("EXPOSURE".to_owned(), ConstantValue(1.0))]),
            keyword_constants: BTreeMap::new(),
        }
    }

    fn revision(shader: &ShaderSpec, targets: &[TargetConfig], text: &str) -> Revision {
        shader_revision(shader, targets, [(Path::new("lit.wgsl"), Some(text))])
    }

    #[test]
    fn every_manifest_field_and_file_moves_the_revision() {
        let targets = [TargetConfig::new(Target::Spirv)];
        let base = revision(&shader(), &targets, "a");
        let mut seen = vec![base];
        let mut check = |r: Revision, what: &str| {
            assert!(!seen.contains(&r), "{what} did not change the revision");
            seen.push(r);
        };
        check(revision(&shader(), &targets, "b"), "file text");
        type Edit = (&'static str, fn(&mut ShaderSpec));
        let edits: Vec<Edit> = vec![
            ("defines", |s| {
                s.defines.insert("Q".into(), "2".into());
            }),
            ("entry", |s| s.passes[0].entry = "fs_other".into()),
            ("stage", |s| s.passes[0].stage = Stage::Vertex),
            ("source", |s| s.passes[0].source = "other.wgsl".into()),
            ("pass name", |s| s.passes[0].name = "Shadow".into()),
            ("keywords", |s| {
                s.keywords.insert("SKIN".into());
            }),
            ("variants", |s| s.variants.pop().map(drop).unwrap_or(())),
            ("include dirs", |s| s.include_dirs.push("more".into())),
            ("include dir order", |s| {
                s.include_dirs = vec!["more".into(), "inc".into()];
            }),
            ("compiler", |s| {
                s.passes[0].front_end = FrontEnd::Glslang(GlslangOptions::default())
            }),
            ("glslang optimization", |s| {
                s.passes[0].front_end = FrontEnd::Glslang(GlslangOptions {
                    optimization: compile::Optimization::Performance,
                    ..GlslangOptions::default()
                })
            }),
            ("glslang auto_map_locations", |s| {
                s.passes[0].front_end = FrontEnd::Glslang(GlslangOptions {
                    auto_map_locations: true,
                    ..GlslangOptions::default()
                })
            }),
            ("glslang auto_bind_uniforms", |s| {
                s.passes[0].front_end = FrontEnd::Glslang(GlslangOptions {
                    auto_bind_uniforms: true,
                    ..GlslangOptions::default()
                })
            }),
            ("glslang hlsl_iomap", |s| {
                s.passes[0].front_end = FrontEnd::Glslang(GlslangOptions {
                    hlsl_iomap: true,
                    ..GlslangOptions::default()
                })
            }),
            ("glslang invert_y", |s| {
                s.passes[0].front_end = FrontEnd::Glslang(GlslangOptions {
                    invert_y: true,
                    ..GlslangOptions::default()
                })
            }),
            ("glslang target_env", |s| {
                s.passes[0].front_end = FrontEnd::Glslang(GlslangOptions {
                    target_env: Some(compile::VulkanVersion::V1_1),
                    ..GlslangOptions::default()
                })
            }),
            ("glslang generate_debug_info", |s| {
                s.passes[0].front_end = FrontEnd::Glslang(GlslangOptions {
                    generate_debug_info: true,
                    ..GlslangOptions::default()
                })
            }),
            ("glslang hlsl_functionality1", |s| {
                s.passes[0].front_end = FrontEnd::Glslang(GlslangOptions {
                    hlsl_functionality1: true,
                    ..GlslangOptions::default()
                })
            }),
            ("glslang hlsl_offsets", |s| {
                s.passes[0].front_end = FrontEnd::Glslang(GlslangOptions {
                    hlsl_offsets: true,
                    ..GlslangOptions::default()
                })
            }),
            ("glslang nan_clamp", |s| {
                s.passes[0].front_end = FrontEnd::Glslang(GlslangOptions {
                    nan_clamp: true,
                    ..GlslangOptions::default()
                })
            }),
            ("glslang binding_base ubo", |s| {
                s.passes[0].front_end = FrontEnd::Glslang(GlslangOptions {
                    binding_base: compile::BindingBase {
                        ubo: 4,
                        ..compile::BindingBase::default()
                    },
                    ..GlslangOptions::default()
                })
            }),
            ("glslang binding_base uav", |s| {
                s.passes[0].front_end = FrontEnd::Glslang(GlslangOptions {
                    binding_base: compile::BindingBase {
                        uav: 4,
                        ..compile::BindingBase::default()
                    },
                    ..GlslangOptions::default()
                })
            }),
            ("shader model", |s| s.passes[0].shader_model = Some((6, 0))),
            ("language", |s| s.passes[0].language = SourceLanguage::Hlsl),
            ("shader constants", |s| {
                s.constants.insert("EXPOSURE".into(), ConstantValue(2.0));
            }),
            ("pass constants", |s| {
                s.passes[0].constants.insert("7".into(), ConstantValue(1.0));
            }),
            ("keyword constants", |s| {
                s.keyword_constants.insert(
                    "FOG".into(),
                    Constants::from([("DENSITY".to_owned(), ConstantValue(0.5))]),
                );
            }),
        ];
        for (what, edit) in edits {
            let mut s = shader();
            edit(&mut s);
            check(revision(&s, &targets, "a"), what);
        }
        check(
            revision(&shader(), &[TargetConfig::new(Target::Msl)], "a"),
            "targets",
        );
        let mut options = BTreeMap::new();
        options.insert("version".to_owned(), "1.3".to_owned());
        let spirv13 = TargetConfig::parse("spirv", &options).expect("valid options");
        check(revision(&shader(), &[spirv13], "a"), "target options");
        let immediates_only =
            TargetConfig::new(Target::Spirv).with_capabilities(compile::Capabilities::IMMEDIATES);
        check(
            revision(&shader(), &[immediates_only], "a"),
            "target capabilities",
        );
        check(
            shader_revision(&shader(), &targets, [(Path::new("lit.wgsl"), None)]),
            "a missing file",
        );
    }

    #[test]
    fn the_stamp_names_pass_and_keywords() {
        let r = revision(&shader(), &[TargetConfig::new(Target::Spirv)], "a");
        let a = input_stamp(&r, "Forward", ["FOG"].into_iter());
        assert_ne!(a, input_stamp(&r, "Shadow", ["FOG"].into_iter()));
        assert_ne!(a, input_stamp(&r, "Forward", [].into_iter()));
        assert_eq!(a.len(), 32);
    }

    #[test]
    fn compile_keys_cover_language_stage_entry_text_and_constants() {
        let text = ContentKey::hash(b"x");
        let none = Constants::new();
        let key = |language, stage, entry, text: &ContentKey, constants: &Constants| {
            compile_key(&FrontEnd::Naga, language, stage, entry, text, constants)
        };
        let base = key(SourceLanguage::Wgsl, Stage::Fragment, "main", &text, &none);
        let others = [
            key(SourceLanguage::Glsl, Stage::Fragment, "main", &text, &none),
            key(SourceLanguage::Wgsl, Stage::Vertex, "main", &text, &none),
            key(SourceLanguage::Wgsl, Stage::Fragment, "main2", &text, &none),
            key(
                SourceLanguage::Wgsl,
                Stage::Fragment,
                "main",
                &ContentKey::hash(b"y"),
                &none,
            ),
            key(
                SourceLanguage::Wgsl,
                Stage::Fragment,
                "main",
                &text,
                &Constants::from([("3".to_owned(), ConstantValue(1.0))]),
            ),
            key(
                SourceLanguage::Wgsl,
                Stage::Fragment,
                "main",
                &text,
                &Constants::from([("3".to_owned(), ConstantValue(2.0))]),
            ),
        ];
        for (i, other) in others.iter().enumerate() {
            assert_ne!(base, *other, "variation {i} kept the key");
        }
        // The compiler and each of its options.
        let glslang = |options| {
            compile_key(
                &FrontEnd::Glslang(options),
                SourceLanguage::Wgsl,
                Stage::Fragment,
                "main",
                &text,
                &none,
            )
        };
        let default = glslang(GlslangOptions::default());
        assert_ne!(base, default);
        let size = glslang(GlslangOptions {
            optimization: compile::Optimization::Size,
            ..GlslangOptions::default()
        });
        assert_ne!(default, size);
        let spirv = [TargetConfig::new(Target::Spirv)];
        let msl = [TargetConfig::new(Target::Msl)];
        assert_ne!(job_key(&base, &spirv), job_key(&base, &msl));
    }

    #[test]
    fn a_reflection_s_identity_has_the_spirv_it_reads_and_its_reflector() {
        let reflection = TargetConfig::new(Target::Reflection);
        let of = |spirv| reflection.clone().reflecting(spirv);
        for compiler in [
            CompilerKind::Naga,
            CompilerKind::Glslang,
            CompilerKind::Slang,
        ] {
            let alone = namespace(compiler, &of(None));
            let with_10 = namespace(compiler, &of(Some((1, 0))));
            let with_13 = namespace(compiler, &of(Some((1, 3))));
            assert_ne!(alone, with_10, "{compiler:?}");
            assert_ne!(with_10, with_13, "{compiler:?}");
            assert_eq!(with_13.target_options()["options"], "spirv=1.3");
            // SPIRV-Cross reads every front end's SPIR-V, naga's too.
            assert_eq!(
                with_13.target_options()["translator"],
                compile::cross::version(Target::Reflection),
                "{compiler:?}"
            );
        }
        // A naga shader's revision changes with the reflector as with the target's options.
        let r = |spirv| revision(&shader(), &[of(spirv)], "a");
        assert_ne!(r(None), r(Some((1, 3))));
        // Other targets ignore `reflecting`.
        let msl = TargetConfig::new(Target::Msl);
        assert_eq!(msl.clone().reflecting(Some((1, 3))), msl);
    }

    #[test]
    fn capabilities_are_in_the_namespace_and_the_job_key() {
        let default = TargetConfig::new(Target::Msl);
        let narrowed = default
            .clone()
            .with_capabilities(compile::Capabilities::IMMEDIATES);
        assert_ne!(
            namespace(CompilerKind::Naga, &default),
            namespace(CompilerKind::Naga, &narrowed)
        );
        assert_ne!(capabilities(&default), capabilities(&narrowed));
        let key = ContentKey::hash(b"k");
        assert_ne!(
            job_key(&key, std::slice::from_ref(&default)),
            job_key(&key, &[narrowed])
        );
        // By default a target validates with what naga's back end for it supports.
        assert_eq!(
            default.capabilities(),
            naga::back::msl::supported_capabilities()
        );
    }

    #[test]
    fn the_compiler_version_comes_from_the_lock_file() {
        let lock = include_str!("../../../Cargo.lock");
        let lock: toml::Value = toml::from_str(lock).expect("Cargo.lock is TOML");
        let versions: Vec<&str> = lock["package"]
            .as_array()
            .expect("packages")
            .iter()
            .filter(|p| p["name"].as_str() == Some("naga"))
            .filter_map(|p| p["version"].as_str())
            .collect();
        assert_eq!(versions, [NAGA.version]);
        let spirv = TargetConfig::new(Target::Spirv);
        assert!(namespace(CompilerKind::Naga, &spirv)
            .compiler_version()
            .ends_with(NAGA.version));
        // glslang's artifacts live in a namespace of their own, named by its exact version.
        let glslang = namespace(CompilerKind::Glslang, &spirv);
        assert_ne!(glslang, namespace(CompilerKind::Naga, &spirv));
        assert!(glslang.compiler_version().contains(GLSLANG.version));
    }
}
