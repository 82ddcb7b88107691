//! The project manifest (`kiln.toml`): targets, shaders, passes and keyword axes, parsed and
//! checked into a [`Manifest`] whose every error points at a line of the file.

use crate::boundary::check_name;
use crate::compile::{
    parse_capability, BindingBase, Capabilities, CompilerKind, ConstantValue, Constants, FrontEnd,
    GlslangOptions, Optimization, SourceLanguage, Stage, TargetConfig, VulkanVersion,
};
use crate::preprocess::normalize_entry;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use toml::Spanned;

/// The keyword spelling meaning "no keyword from this axis".
pub const NONE_KEYWORD: &str = "_";

/// A manifest that does not parse or does not make sense, with the place in the file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}:{line}: {message}", path = path.display())]
pub struct ManifestError {
    /// The manifest file.
    pub path: PathBuf,
    /// 1-based line of the offending text (1 when unknown).
    pub line: usize,
    /// Byte range of the offending text, when known.
    pub span: Option<Range<usize>>,
    /// What is wrong.
    pub message: String,
}

/// A checked manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The manifest file.
    pub path: PathBuf,
    /// The directory holding the manifest: sources and includes must stay inside it.
    pub root: PathBuf,
    /// Targets every variant is compiled for.
    pub targets: Vec<TargetConfig>,
    /// The shaders, in manifest order.
    pub shaders: Vec<Arc<ShaderSpec>>,
    /// Variant and source-size limits.
    pub limits: Limits,
    /// `[cache]`: the remote cache (never part of any artifact's identity).
    pub cache: CacheSettings,
}

/// `[cache]`: where the shared remote cache is (`remote = "redis://host:6379/0"`) and
/// whether this project only reads it (`read_only = true`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CacheSettings {
    /// The remote cache's URL (may hold a password: never printed).
    pub remote: Option<String>,
    /// Read the remote, never write it.
    pub read_only: bool,
}

impl std::fmt::Debug for CacheSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password.
        f.debug_struct("CacheSettings")
            .field("remote", &self.remote.as_ref().map(|_| "<set>"))
            .field("read_only", &self.read_only)
            .finish()
    }
}

/// One shader: its passes and its variants.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShaderSpec {
    /// Unique name.
    pub name: String,
    /// Every keyword the shader may be compiled with (the union of its axes and `keywords`).
    pub keywords: BTreeSet<String>,
    /// Keyword sets to build, each sorted and deduplicated, without repeats, in a stable order.
    pub variants: Vec<Vec<String>>,
    /// Passes, by name order.
    pub passes: Vec<PassSpec>,
    /// Extra `#define`s for every variant of this shader.
    pub defines: BTreeMap<String, String>,
    /// Include directories, root-relative and normalised, in search order: the shader's
    /// own `include_dirs`, then the project's.
    pub include_dirs: Vec<PathBuf>,
    /// Specialization constant values (by name or `constant_id`) for every variant.
    pub constants: Constants,
    /// Specialization constant values for the variants holding a keyword, by keyword; they
    /// take precedence over the shader's and the pass's.
    pub keyword_constants: BTreeMap<String, Constants>,
}

impl ShaderSpec {
    /// The specialization constants of one variant: the shader's, then the pass's, then
    /// those of the variant's keywords, each overriding the one before (the manifest refuses
    /// two keywords of one variant that disagree).
    pub fn constants_for<'k>(
        &self,
        pass: &PassSpec,
        keywords: impl IntoIterator<Item = &'k str>,
    ) -> Constants {
        let mut constants = self.constants.clone();
        constants.extend(pass.constants.iter().map(|(k, v)| (k.clone(), *v)));
        for keyword in keywords {
            if let Some(values) = self.keyword_constants.get(keyword) {
                constants.extend(values.iter().map(|(k, v)| (k.clone(), *v)));
            }
        }
        constants
    }
}

/// One pass of a shader: an entry point of a stage in a source file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PassSpec {
    /// Pass name (`Forward`, `Shadow`, ...).
    pub name: String,
    /// The stage.
    pub stage: Stage,
    /// Entry point name.
    pub entry: String,
    /// Source file, relative to the project root, `/`-separated.
    pub source: PathBuf,
    /// Language, from the source's extension.
    pub language: SourceLanguage,
    /// Specialization constant values for this pass (over the shader's).
    pub constants: Constants,
    /// The compiler and its options: the pass's `compiler`, else the shader's, else the
    /// language's default ([`SourceLanguage::default_compiler`]).
    pub front_end: FrontEnd,
    /// HLSL only: the shader model (`shader_model = "6.0"`), defined for the pass's text as
    /// `__SHADER_TARGET_MAJOR` / `__SHADER_TARGET_MINOR` (as DXC and fxc define them).
    pub shader_model: Option<(u8, u8)>,
}

impl PassSpec {
    /// The defines this pass adds to its shader's for every variant.
    pub fn defines(&self) -> Vec<(&'static str, String)> {
        match self.shader_model {
            Some((major, minor)) => vec![
                ("__SHADER_TARGET_MAJOR", major.to_string()),
                ("__SHADER_TARGET_MINOR", minor.to_string()),
            ],
            None => Vec::new(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    project: RawProject,
    #[serde(default)]
    cache: RawCache,
    #[serde(default)]
    shader: Vec<RawShader>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCache {
    remote: Option<String>,
    #[serde(default)]
    read_only: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProject {
    targets: Spanned<Vec<Spanned<RawTarget>>>,
    max_variants: Option<Spanned<u64>>,
    max_source_bytes: Option<Spanned<u64>>,
    #[serde(default)]
    include_dirs: Vec<Spanned<String>>,
    capabilities: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawTarget {
    Name(String),
    WithOptions(BTreeMap<String, toml::Value>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShader {
    name: Spanned<String>,
    source: Option<Spanned<String>>,
    #[serde(default)]
    axes: Vec<Vec<Spanned<String>>>,
    #[serde(default)]
    keywords: Vec<Spanned<String>>,
    variants: Option<Vec<Vec<Spanned<String>>>>,
    #[serde(default)]
    defines: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    passes: BTreeMap<String, Spanned<RawPass>>,
    compiler: Option<Spanned<String>>,
    glslang: Option<Spanned<RawGlslang>>,
    #[serde(default)]
    include_dirs: Vec<Spanned<String>>,
    #[serde(default)]
    constants: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    keyword_constants: BTreeMap<String, Spanned<BTreeMap<String, Spanned<toml::Value>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPass {
    stage: Spanned<String>,
    entry: Spanned<String>,
    source: Option<Spanned<String>>,
    #[serde(default)]
    constants: BTreeMap<String, Spanned<toml::Value>>,
    compiler: Option<Spanned<String>>,
    shader_model: Option<Spanned<String>>,
}

/// `[shader.glslang]`: glslang's options, namespaced so that no other compiler reads them.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawGlslang {
    optimization: Option<Spanned<String>>,
    #[serde(default)]
    auto_map_locations: bool,
    #[serde(default)]
    auto_bind_uniforms: bool,
    #[serde(default)]
    hlsl_iomap: bool,
    #[serde(default)]
    invert_y: bool,
    target_env: Option<Spanned<String>>,
    #[serde(default)]
    generate_debug_info: bool,
    #[serde(default)]
    hlsl_functionality1: bool,
    #[serde(default)]
    hlsl_offsets: bool,
    #[serde(default)]
    nan_clamp: bool,
    #[serde(default)]
    binding_base: RawBindingBase,
}

/// `[shader.glslang.binding_base]`: glslc's `-f<kind>-binding-base`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawBindingBase {
    #[serde(default)]
    image: u32,
    #[serde(default)]
    sampler: u32,
    #[serde(default)]
    texture: u32,
    #[serde(default)]
    ubo: u32,
    #[serde(default)]
    ssbo: u32,
    #[serde(default)]
    uav: u32,
}

/// At most this many variants per shader: a product of axes can explode, and a typo should
/// fail loudly instead of queueing millions of compiles.
pub const MAX_VARIANTS_PER_SHADER: usize = 65_536;

/// The default cap on the project's variants ((shader, pass, keyword set) triples), all
/// shaders together; `[project] max_variants` changes it.
pub const DEFAULT_MAX_VARIANTS: usize = 1 << 20;

/// Limits that keep one input from exhausting the machine; `[project]` may change them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    /// At most this many variants in the project (`max_variants`, default
    /// [`DEFAULT_MAX_VARIANTS`]); a shader has at most [`MAX_VARIANTS_PER_SHADER`] keyword
    /// sets, or `max_variants` if lower.
    pub max_variants: usize,
    /// At most this many bytes in one source or include file (`max_source_bytes`, default
    /// [`crate::boundary::DEFAULT_MAX_SOURCE_BYTES`], 4 MiB).
    pub max_source_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_variants: DEFAULT_MAX_VARIANTS,
            max_source_bytes: crate::boundary::DEFAULT_MAX_SOURCE_BYTES,
        }
    }
}

impl Manifest {
    /// Reads and checks the manifest at `path`.
    pub fn load(path: &Path) -> Result<Self, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|e| ManifestError {
            path: path.to_owned(),
            line: 1,
            span: None,
            message: format!("cannot read manifest: {e}"),
        })?;
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        // Absolute, so that file-watcher paths and include confinement compare as paths.
        let root = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_owned());
        Self::parse(path, &root, &text)
    }

    /// Checks manifest `text` read from `path`; sources are relative to `root`.
    ///
    /// The steps: TOML into raw tables; the limits; the targets; each shader (its name,
    /// keywords, variants, defines and passes); the project's variant count.
    pub fn parse(path: &Path, root: &Path, text: &str) -> Result<Self, ManifestError> {
        let cx = Context { path, text };
        let raw: RawManifest =
            toml::from_str(text).map_err(|e| cx.error(e.span(), e.message().to_owned()))?;
        let limits = cx.limits(&raw.project)?;
        let capabilities = cx.project_capabilities(&raw.project)?;
        let targets = cx.targets(&raw.project.targets, capabilities)?;
        let project_dirs = cx.include_dirs(&raw.project.include_dirs, &[])?;
        let mut shaders: Vec<Arc<ShaderSpec>> = Vec::new();
        let mut total: usize = 0;
        for shader in &raw.shader {
            let name = shader.name.get_ref();
            if shaders.iter().any(|s| &s.name == name) {
                return Err(cx.error(
                    Some(shader.name.span()),
                    format!("shader `{name}` is defined twice"),
                ));
            }
            let spec = cx.shader(shader, &limits, &project_dirs)?;
            cx.check_target_env(shader, &targets)?;
            total = spec
                .variants
                .len()
                .checked_mul(spec.passes.len())
                .and_then(|n| n.checked_add(total))
                .filter(|n| *n <= limits.max_variants)
                .ok_or_else(|| {
                    cx.error(
                        Some(shader.name.span()),
                        format!(
                            "with shader `{name}` the project has more than {} variants (raise `max_variants` in `[project]`)",
                            limits.max_variants
                        ),
                    )
                })?;
            shaders.push(Arc::new(spec));
        }
        Ok(Self {
            path: path.to_owned(),
            root: root.to_owned(),
            targets,
            shaders,
            limits,
            cache: CacheSettings {
                remote: raw
                    .cache
                    .remote
                    .clone()
                    .filter(|url| !url.trim().is_empty()),
                read_only: raw.cache.read_only,
            },
        })
    }

    /// The total number of (shader, pass, keyword set) variants.
    pub fn variant_count(&self) -> usize {
        self.shaders
            .iter()
            .map(|s| s.variants.len() * s.passes.len())
            .sum()
    }
}

/// The manifest being checked: where errors point.
struct Context<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Context<'_> {
    fn error(&self, span: Option<Range<usize>>, message: String) -> ManifestError {
        let line = span
            .as_ref()
            .map(|s| line_of(self.text, s.start))
            .unwrap_or(1);
        ManifestError {
            path: self.path.to_owned(),
            line,
            span,
            message,
        }
    }

    fn limits(&self, project: &RawProject) -> Result<Limits, ManifestError> {
        let mut limits = Limits::default();
        if let Some(max) = &project.max_variants {
            limits.max_variants = usize::try_from(*max.get_ref())
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    self.error(
                        Some(max.span()),
                        "`max_variants` must be a positive number".into(),
                    )
                })?;
        }
        if let Some(max) = &project.max_source_bytes {
            limits.max_source_bytes = *max.get_ref();
            if limits.max_source_bytes == 0 {
                return Err(self.error(
                    Some(max.span()),
                    "`max_source_bytes` must be a positive number".into(),
                ));
            }
        }
        Ok(limits)
    }

    /// `[project] capabilities`: the validator capabilities of every target without its own.
    fn project_capabilities(
        &self,
        project: &RawProject,
    ) -> Result<Option<Capabilities>, ManifestError> {
        let Some(names) = &project.capabilities else {
            return Ok(None);
        };
        let mut capabilities = Capabilities::empty();
        for name in names.get_ref() {
            capabilities |= parse_capability(name.get_ref())
                .map_err(|e| self.error(Some(name.span()), e.to_string()))?;
        }
        Ok(Some(capabilities))
    }

    fn targets(
        &self,
        raw: &Spanned<Vec<Spanned<RawTarget>>>,
        project_capabilities: Option<Capabilities>,
    ) -> Result<Vec<TargetConfig>, ManifestError> {
        let mut targets = Vec::new();
        for target in raw.get_ref() {
            let mut own_capabilities = None;
            let config = match target.get_ref() {
                RawTarget::Name(name) => TargetConfig::parse(name, &BTreeMap::new()),
                RawTarget::WithOptions(table) => {
                    let mut options = BTreeMap::new();
                    let mut name = None;
                    for (k, v) in table {
                        if k == "capabilities" {
                            own_capabilities = Some(self.capability_list(v, target.span())?);
                            continue;
                        }
                        let value = match v {
                            toml::Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        if k == "name" {
                            name = Some(value);
                        } else {
                            options.insert(k.clone(), value);
                        }
                    }
                    let name = name.ok_or_else(|| {
                        self.error(Some(target.span()), "a target table needs `name`".into())
                    })?;
                    TargetConfig::parse(&name, &options)
                }
            }
            .map_err(|e| self.error(Some(target.span()), e.to_string()))?;
            let config = match own_capabilities.or(project_capabilities) {
                Some(capabilities) => config.with_capabilities(capabilities),
                None => config,
            };
            if targets.iter().any(|t: &TargetConfig| {
                t.target() == config.target() && t.options_string() == config.options_string()
            }) {
                return Err(self.error(
                    Some(target.span()),
                    format!("target `{}` is listed twice", config.target()),
                ));
            }
            targets.push(config);
        }
        if targets.is_empty() {
            return Err(self.error(Some(raw.span()), "`targets` is empty".into()));
        }
        Ok(targets)
    }

    /// A target table's `capabilities = [...]` (inline tables carry no spans of their own:
    /// errors point at the target).
    fn capability_list(
        &self,
        value: &toml::Value,
        span: Range<usize>,
    ) -> Result<Capabilities, ManifestError> {
        let toml::Value::Array(names) = value else {
            return Err(self.error(
                Some(span),
                "`capabilities` must be a list of capability names".into(),
            ));
        };
        let mut capabilities = Capabilities::empty();
        for name in names {
            let toml::Value::String(name) = name else {
                return Err(self.error(
                    Some(span),
                    "`capabilities` must be a list of capability names".into(),
                ));
            };
            capabilities |= parse_capability(name)
                .map_err(|e| self.error(Some(span.clone()), e.to_string()))?;
        }
        Ok(capabilities)
    }

    /// A `constants` table: name or `constant_id` -> number or boolean.
    fn constants(
        &self,
        raw: &BTreeMap<String, Spanned<toml::Value>>,
        whose: &str,
    ) -> Result<Constants, ManifestError> {
        let mut constants = Constants::new();
        for (key, value) in raw {
            let is_id = !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit());
            if is_id {
                key.parse::<u16>().map_err(|_| {
                    self.error(
                        Some(value.span()),
                        format!("constant id `{key}` of {whose} is out of range (0 ..= 65535)"),
                    )
                })?;
            } else {
                check_keyword(key).map_err(|why| {
                    self.error(
                        Some(value.span()),
                        format!(
                            "constant `{key}` of {whose}: a name {why}, or an id must be a number"
                        ),
                    )
                })?;
            }
            let number = match value.get_ref() {
                toml::Value::Integer(i) => {
                    let f = *i as f64;
                    // Beyond 2^53 an integer has no exact f64, naga's pipeline-constant type.
                    if f as i64 != *i || i.unsigned_abs() > 1 << 53 {
                        return Err(self.error(
                            Some(value.span()),
                            format!(
                                "constant `{key}` of {whose}: {i} cannot be represented exactly"
                            ),
                        ));
                    }
                    f
                }
                toml::Value::Float(f) if f.is_finite() => *f,
                toml::Value::Boolean(b) => f64::from(u8::from(*b)),
                _ => {
                    return Err(self.error(
                        Some(value.span()),
                        format!("constant `{key}` of {whose} must be a finite number or a boolean"),
                    ))
                }
            };
            constants.insert(key.clone(), ConstantValue(number));
        }
        Ok(constants)
    }

    /// Per-keyword constants, and no variant whose keywords disagree on a constant.
    fn keyword_constants(
        &self,
        shader: &RawShader,
        keywords: &BTreeSet<String>,
        variants: &[Vec<String>],
    ) -> Result<BTreeMap<String, Constants>, ManifestError> {
        let name = shader.name.get_ref();
        let mut by_keyword = BTreeMap::new();
        for (keyword, table) in &shader.keyword_constants {
            if !keywords.contains(keyword) {
                return Err(self.error(
                    Some(table.span()),
                    format!(
                        "`keyword_constants` of shader `{name}` names unknown keyword `{keyword}` (declared: {})",
                        list(keywords)
                    ),
                ));
            }
            let whose = format!("shader `{name}` with keyword `{keyword}`");
            by_keyword.insert(keyword.clone(), self.constants(table.get_ref(), &whose)?);
        }
        for variant in variants {
            let mut seen: BTreeMap<&str, (&str, ConstantValue)> = BTreeMap::new();
            for keyword in variant {
                for (constant, value) in by_keyword.get(keyword).into_iter().flatten() {
                    if let Some((other, v)) = seen.insert(constant, (keyword, *value)) {
                        if v != *value {
                            return Err(self.error(
                                shader.keyword_constants.get(keyword).map(|t| t.span()),
                                format!(
                                    "shader `{name}`, variant [{}]: keywords `{other}` and `{keyword}` give constant `{constant}` different values ({v} and {value})",
                                    variant.join(";")
                                ),
                            ));
                        }
                    }
                }
            }
        }
        Ok(by_keyword)
    }

    /// Checks include directories: root-relative, `/`-separated, never leaving the root
    /// (the preprocessor's own normalisation). `inherited` (the project's) follow `dirs`,
    /// each directory once.
    fn include_dirs(
        &self,
        dirs: &[Spanned<String>],
        inherited: &[PathBuf],
    ) -> Result<Vec<PathBuf>, ManifestError> {
        let mut out: Vec<PathBuf> = Vec::new();
        for dir in dirs {
            let text = dir.get_ref();
            if text.contains('\\') {
                return Err(self.error(
                    Some(dir.span()),
                    format!("include directory `{text}`: use '/' as the path separator"),
                ));
            }
            let normal = normalize_entry(Path::new(text))
                .map(PathBuf::from)
                .map_err(|why| {
                    self.error(
                        Some(dir.span()),
                        format!(
                            "include directory `{text}` must be inside the project root: {why}"
                        ),
                    )
                })?;
            if !out.contains(&normal) {
                out.push(normal);
            }
        }
        for dir in inherited {
            if !out.contains(dir) {
                out.push(dir.clone());
            }
        }
        Ok(out)
    }

    fn shader(
        &self,
        shader: &RawShader,
        limits: &Limits,
        project_dirs: &[PathBuf],
    ) -> Result<ShaderSpec, ManifestError> {
        let name = shader.name.get_ref();
        check_name(name).map_err(|why| {
            self.error(
                Some(shader.name.span()),
                format!("shader name `{name}`: {why}"),
            )
        })?;
        let keywords = self.keywords(shader)?;
        let variants = self.variants(shader, &keywords, limits)?;
        let defines = self.defines(shader)?;
        let passes = self.passes(shader)?;
        let include_dirs = self.include_dirs(&shader.include_dirs, project_dirs)?;
        let constants = self.constants(&shader.constants, &format!("shader `{name}`"))?;
        let keyword_constants = self.keyword_constants(shader, &keywords, &variants)?;
        Ok(ShaderSpec {
            name: name.clone(),
            keywords,
            variants,
            passes,
            defines,
            include_dirs,
            constants,
            keyword_constants,
        })
    }

    fn keywords(&self, shader: &RawShader) -> Result<BTreeSet<String>, ManifestError> {
        let mut keywords = BTreeSet::new();
        for word in shader.axes.iter().flatten().chain(&shader.keywords) {
            let w = word.get_ref();
            if w == NONE_KEYWORD {
                continue;
            }
            check_keyword(w)
                .map_err(|why| self.error(Some(word.span()), format!("keyword `{w}` {why}")))?;
            keywords.insert(w.clone());
        }
        Ok(keywords)
    }

    /// The axes' product (counted with checked arithmetic before anything is built) and the
    /// explicit variants, canonical and without repeats.
    fn variants(
        &self,
        shader: &RawShader,
        keywords: &BTreeSet<String>,
        limits: &Limits,
    ) -> Result<Vec<Vec<String>>, ManifestError> {
        let name = shader.name.get_ref();
        let cap = MAX_VARIANTS_PER_SHADER.min(limits.max_variants);
        let product = shader
            .axes
            .iter()
            .try_fold(1usize, |n, axis| n.checked_mul(axis.len().max(1)));
        match product {
            Some(product) if product <= cap => {}
            Some(product) => {
                return Err(self.error(
                    Some(shader.name.span()),
                    format!("shader `{name}` has {product} variants from its axes (at most {cap})"),
                ))
            }
            None => {
                return Err(self.error(
                    Some(shader.name.span()),
                    format!(
                        "shader `{name}` has more than {} variants from its axes (at most {cap})",
                        usize::MAX
                    ),
                ))
            }
        }
        let mut variants: Vec<Vec<String>> = Vec::new();
        let mut seen = BTreeSet::new();
        let mut push = |set: Vec<String>| {
            if seen.insert(set.clone()) {
                variants.push(set);
            }
        };
        if shader.variants.is_none() || !shader.axes.is_empty() {
            for combination in axis_product(&shader.axes) {
                push(canonical(combination));
            }
        }
        for explicit in shader.variants.iter().flatten() {
            for word in explicit {
                let w = word.get_ref();
                if w != NONE_KEYWORD && !keywords.contains(w) {
                    return Err(self.error(
                        Some(word.span()),
                        format!(
                            "unknown keyword `{w}` in a variant of shader `{name}` (declared: {})",
                            list(keywords)
                        ),
                    ));
                }
            }
            push(canonical(
                explicit.iter().map(|w| w.get_ref().as_str()).collect(),
            ));
        }
        if variants.len() > cap {
            return Err(self.error(
                Some(shader.name.span()),
                format!(
                    "shader `{name}` has {} variants (at most {cap})",
                    variants.len()
                ),
            ));
        }
        Ok(variants)
    }

    fn defines(&self, shader: &RawShader) -> Result<BTreeMap<String, String>, ManifestError> {
        let mut defines = BTreeMap::new();
        for (k, v) in &shader.defines {
            check_keyword(k)
                .map_err(|why| self.error(Some(v.span()), format!("define `{k}` {why}")))?;
            let value = match v.get_ref() {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => u8::from(*b).to_string(),
                _ => {
                    return Err(self.error(
                        Some(v.span()),
                        format!("define `{k}` must be a string, number or boolean"),
                    ))
                }
            };
            defines.insert(k.clone(), value);
        }
        Ok(defines)
    }

    fn passes(&self, shader: &RawShader) -> Result<Vec<PassSpec>, ManifestError> {
        let name = shader.name.get_ref();
        if shader.passes.is_empty() {
            return Err(self.error(
                Some(shader.name.span()),
                format!("shader `{name}` has no passes"),
            ));
        }
        let mut passes = Vec::new();
        for (pass_name, pass) in &shader.passes {
            let span = pass.span();
            let pass = pass.get_ref();
            check_name(pass_name).map_err(|why| {
                self.error(
                    Some(span.clone()),
                    format!("pass name `{pass_name}`: {why}"),
                )
            })?;
            let stage = Stage::from_name(pass.stage.get_ref()).ok_or_else(|| {
                let known: Vec<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
                self.error(
                    Some(pass.stage.span()),
                    format!(
                        "unknown stage `{}` (expected one of {})",
                        pass.stage.get_ref(),
                        known.join(", ")
                    ),
                )
            })?;
            let source = pass.source.as_ref().or(shader.source.as_ref()).ok_or_else(|| {
                self.error(Some(span.clone()), format!("pass `{pass_name}` of shader `{name}` has no source (set `source` on the shader or the pass)"))
            })?;
            // The preprocessor's own normalisation, so that the pipeline and the
            // preprocessor name every file the same way.
            let relative = normalize_entry(Path::new(source.get_ref()))
                .map(PathBuf::from)
                .map_err(|why| {
                    self.error(
                        Some(source.span()),
                        format!("source `{}`: {why}", source.get_ref()),
                    )
                })?;
            let language = SourceLanguage::from_path(&relative).ok_or_else(|| {
                self.error(
                    Some(source.span()),
                    format!("cannot tell the language of `{}` (expected .wgsl, .hlsl, .glsl or a GLSL stage extension: .{})", source.get_ref(), SourceLanguage::GLSL_EXTENSIONS.join(", .")),
                )
            })?;
            let front_end = self.front_end(shader, pass, pass_name, language, stage)?;
            let shader_model = self.shader_model(pass, pass_name, language)?;
            let constants = self.constants(
                &pass.constants,
                &format!("pass `{pass_name}` of shader `{name}`"),
            )?;
            passes.push(PassSpec {
                name: pass_name.clone(),
                stage,
                entry: pass.entry.get_ref().clone(),
                source: relative,
                language,
                front_end,
                shader_model,
                constants,
            });
        }
        if let Some(options) = &shader.glslang {
            if !passes
                .iter()
                .any(|p| p.front_end.kind() == CompilerKind::Glslang)
            {
                return Err(self.error(
                    Some(options.span()),
                    format!("shader `{name}` sets `[shader.glslang]` options but no pass of it uses glslang"),
                ));
            }
        }
        Ok(passes)
    }

    /// The pass's compiler (the pass's `compiler`, else the shader's, else the language's
    /// default), checked against its language and stage, with the shader's glslang options.
    fn front_end(
        &self,
        shader: &RawShader,
        pass: &RawPass,
        pass_name: &str,
        language: SourceLanguage,
        stage: Stage,
    ) -> Result<FrontEnd, ManifestError> {
        let written = pass.compiler.as_ref().or(shader.compiler.as_ref());
        let kind = match written {
            Some(name) => CompilerKind::from_name(name.get_ref()).ok_or_else(|| {
                self.error(
                    Some(name.span()),
                    format!(
                        "unknown compiler `{}` (expected naga or glslang)",
                        name.get_ref()
                    ),
                )
            })?,
            None => language.default_compiler(),
        };
        let span = written
            .map(|w| w.span())
            .unwrap_or_else(|| pass.stage.span());
        if !kind.reads(language) {
            return Err(self.error(
                Some(span),
                format!(
                    "pass `{pass_name}`: {} cannot compile {} (use compiler = \"{}\")",
                    kind.name(),
                    language.name(),
                    language.default_compiler().name()
                ),
            ));
        }
        if kind == CompilerKind::Naga && !stage.naga_supports() {
            return Err(self.error(
                Some(pass.stage.span()),
                format!(
                    "pass `{pass_name}`: naga has no {stage} stage (use compiler = \"glslang\")"
                ),
            ));
        }
        Ok(match kind {
            CompilerKind::Naga => FrontEnd::Naga,
            CompilerKind::Glslang => FrontEnd::Glslang(self.glslang_options(shader)?),
        })
    }

    fn glslang_options(&self, shader: &RawShader) -> Result<GlslangOptions, ManifestError> {
        let Some(raw) = &shader.glslang else {
            return Ok(GlslangOptions::default());
        };
        let RawGlslang {
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
        } = raw.get_ref();
        let target_env = match target_env {
            Some(env) => Some(VulkanVersion::from_name(env.get_ref()).ok_or_else(|| {
                self.error(
                    Some(env.span()),
                    format!(
                        "unknown target_env `{}` (expected vulkan1.0, vulkan1.1, vulkan1.2 or vulkan1.3)",
                        env.get_ref()
                    ),
                )
            })?),
            None => None,
        };
        let RawBindingBase {
            image,
            sampler,
            texture,
            ubo,
            ssbo,
            uav,
        } = *binding_base;
        let optimization = match optimization {
            Some(level) => Optimization::from_name(level.get_ref()).ok_or_else(|| {
                self.error(
                    Some(level.span()),
                    format!(
                        "unknown optimization `{}` (expected zero, size or performance)",
                        level.get_ref()
                    ),
                )
            })?,
            None => Optimization::default(),
        };
        Ok(GlslangOptions {
            optimization,
            auto_map_locations: *auto_map_locations,
            auto_bind_uniforms: *auto_bind_uniforms,
            hlsl_iomap: *hlsl_iomap,
            invert_y: *invert_y,
            target_env,
            generate_debug_info: *generate_debug_info,
            hlsl_functionality1: *hlsl_functionality1,
            hlsl_offsets: *hlsl_offsets,
            nan_clamp: *nan_clamp,
            binding_base: BindingBase {
                image,
                sampler,
                texture,
                ubo,
                ssbo,
                uav,
            },
        })
    }

    /// A `target_env` too old for the SPIR-V the project's spirv target asks for (glslc
    /// would write a module that Vulkan version cannot consume): refused, located.
    fn check_target_env(
        &self,
        shader: &RawShader,
        targets: &[TargetConfig],
    ) -> Result<(), ManifestError> {
        let Some(env) = shader
            .glslang
            .as_ref()
            .and_then(|g| g.get_ref().target_env.as_ref())
        else {
            return Ok(());
        };
        let Some(version) = targets.iter().find_map(TargetConfig::spirv_version) else {
            return Ok(());
        };
        match VulkanVersion::from_name(env.get_ref()) {
            Some(vulkan) if vulkan.max_spirv() < version => Err(self.error(
                Some(env.span()),
                format!(
                    "shader `{}`: target_env {} consumes SPIR-V up to {}.{}, but the spirv target's version is {}.{}",
                    shader.name.get_ref(),
                    vulkan.name(),
                    vulkan.max_spirv().0,
                    vulkan.max_spirv().1,
                    version.0,
                    version.1
                ),
            )),
            _ => Ok(()),
        }
    }

    /// `shader_model = "6.0"` on an HLSL pass.
    fn shader_model(
        &self,
        pass: &RawPass,
        pass_name: &str,
        language: SourceLanguage,
    ) -> Result<Option<(u8, u8)>, ManifestError> {
        let Some(model) = &pass.shader_model else {
            return Ok(None);
        };
        if language != SourceLanguage::Hlsl {
            return Err(self.error(
                Some(model.span()),
                format!("pass `{pass_name}`: `shader_model` applies to HLSL sources only"),
            ));
        }
        let parsed = model
            .get_ref()
            .replace('_', ".")
            .split_once('.')
            .and_then(|(major, minor)| Some((major.parse::<u8>().ok()?, minor.parse::<u8>().ok()?)))
            .filter(|&(major, minor)| (major == 5 && minor <= 1) || (major == 6 && minor <= 8));
        parsed.map(Some).ok_or_else(|| {
            self.error(
                Some(model.span()),
                format!(
                    "pass `{pass_name}`: shader model `{}` (expected 5.0, 5.1 or 6.0 ..= 6.8)",
                    model.get_ref()
                ),
            )
        })
    }
}

fn axis_product(axes: &[Vec<Spanned<String>>]) -> Vec<Vec<&str>> {
    let mut out: Vec<Vec<&str>> = vec![Vec::new()];
    for axis in axes.iter().filter(|a| !a.is_empty()) {
        out = out
            .iter()
            .flat_map(|prefix| {
                axis.iter().map(move |choice| {
                    let mut next = prefix.clone();
                    next.push(choice.get_ref().as_str());
                    next
                })
            })
            .collect();
    }
    out
}

fn canonical(words: Vec<&str>) -> Vec<String> {
    let set: BTreeSet<&str> = words.into_iter().filter(|w| *w != NONE_KEYWORD).collect();
    set.into_iter().map(str::to_owned).collect()
}

fn list(words: &BTreeSet<String>) -> String {
    if words.is_empty() {
        return "none".into();
    }
    words
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Keywords become preprocessor macros, so they must be identifiers.
fn check_keyword(word: &str) -> Result<(), &'static str> {
    let mut chars = word.chars();
    match chars.next() {
        None => Err("is empty"),
        Some(c) if !(c.is_ascii_alphabetic() || c == '_') => Err("must start with a letter or `_`"),
        _ if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') => {
            Err("may hold only letters, digits and `_`")
        }
        _ => Ok(()),
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        Manifest::parse(Path::new("kiln.toml"), Path::new("."), text)
    }

    const LIT: &str = r#"
[project]
targets = ["spirv", { name = "msl", version = "2.0" }]

[[shader]]
name = "Lit"
source = "shaders/lit.wgsl"
axes = [["_", "FOG"], ["_", "SKIN"], ["LIGHTS_1", "LIGHTS_4"]]
variants = [["FOG", "FOG"], ["SKIN", "LIGHTS_1", "FOG"]]

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"

[shader.passes.Depth]
stage = "vertex"
entry = "vs_main"
"#;

    fn one_pass(shader_extra: &str, source: &str, pass_extra: &str) -> String {
        format!(
            "[project]\ntargets = [\"spirv\"]\n\n[[shader]]\nname = \"S\"\nsource = \"{source}\"\n{shader_extra}\n\n[shader.passes.P]\nstage = \"fragment\"\nentry = \"main\"\n{pass_extra}\n"
        )
    }

    #[test]
    fn the_compiler_defaults_by_extension_and_can_be_chosen() {
        let compiler = |text: &str| parse(text).map(|m| m.shaders[0].passes[0].front_end);
        let glslang = Ok(FrontEnd::Glslang(GlslangOptions::default()));
        assert_eq!(compiler(&one_pass("", "a.wgsl", "")), Ok(FrontEnd::Naga));
        for source in ["a.frag", "a.glsl", "a.hlsl", "a.comp"] {
            assert_eq!(compiler(&one_pass("", source, "")), glslang, "{source}");
        }
        let naga = "compiler = \"naga\"";
        assert_eq!(compiler(&one_pass(naga, "a.frag", "")), Ok(FrontEnd::Naga));
        // A pass's choice wins over its shader's.
        assert_eq!(
            compiler(&one_pass(naga, "a.frag", "compiler = \"glslang\"")),
            glslang
        );
        let m = parse(&one_pass("", "a.hlsl", "")).unwrap();
        assert_eq!(m.shaders[0].passes[0].language, SourceLanguage::Hlsl);
    }

    #[test]
    fn a_compiler_that_cannot_read_the_source_is_a_located_error() {
        let e = parse(&one_pass("compiler = \"naga\"", "a.hlsl", "")).unwrap_err();
        assert!(e.message.contains("naga cannot compile hlsl"), "{e}");
        assert_eq!(e.line, 7, "{e}");
        let e = parse(&one_pass("compiler = \"glslang\"", "a.wgsl", "")).unwrap_err();
        assert!(e.message.contains("glslang cannot compile wgsl"), "{e}");
        let e = parse(&one_pass("compiler = \"dxc\"", "a.hlsl", "")).unwrap_err();
        assert!(e.message.contains("unknown compiler `dxc`"), "{e}");
        let geometry = one_pass("compiler = \"naga\"", "a.geom", "")
            .replace("stage = \"fragment\"", "stage = \"geometry\"");
        let e = parse(&geometry).unwrap_err();
        assert!(e.message.contains("naga has no geometry stage"), "{e}");
        let geometry = geometry.replace("compiler = \"naga\"", "");
        assert_eq!(
            parse(&geometry).unwrap().shaders[0].passes[0].stage,
            Stage::Geometry
        );
    }

    #[test]
    fn glslang_options_and_shader_models_are_checked() {
        let options = "[shader.glslang]\noptimization = \"performance\"\nhlsl_iomap = true";
        let m = parse(&one_pass("", "a.hlsl", "shader_model = \"6.2\"").replace(
            "\n\n[shader.passes.P]",
            &format!("\n{options}\n\n[shader.passes.P]"),
        ))
        .unwrap();
        let pass = &m.shaders[0].passes[0];
        assert_eq!(
            pass.front_end,
            FrontEnd::Glslang(GlslangOptions {
                optimization: Optimization::Performance,
                hlsl_iomap: true,
                ..GlslangOptions::default()
            })
        );
        assert_eq!(pass.shader_model, Some((6, 2)));
        assert_eq!(
            pass.defines(),
            [
                ("__SHADER_TARGET_MAJOR", "6".to_owned()),
                ("__SHADER_TARGET_MINOR", "2".to_owned())
            ]
        );
        let e = parse(&one_pass("", "a.frag", "shader_model = \"6.0\"")).unwrap_err();
        assert!(e.message.contains("HLSL sources only"), "{e}");
        let e = parse(&one_pass("", "a.hlsl", "shader_model = \"9.9\"")).unwrap_err();
        assert!(e.message.contains("shader model `9.9`"), "{e}");
        let bad = one_pass("", "a.frag", "").replace(
            "\n\n[shader.passes.P]",
            "\n[shader.glslang]\noptimization = \"fast\"\n\n[shader.passes.P]",
        );
        let e = parse(&bad).unwrap_err();
        assert!(e.message.contains("unknown optimization `fast`"), "{e}");
        let stray = one_pass("compiler = \"naga\"", "a.frag", "").replace(
            "\n\n[shader.passes.P]",
            "\n[shader.glslang]\ninvert_y = true\n\n[shader.passes.P]",
        );
        let e = parse(&stray).unwrap_err();
        assert!(e.message.contains("no pass of it uses glslang"), "{e}");
        // Manifest constants reach glslang passes too (as the defaults of the SPIR-V's
        // specialization constants), per shader and per pass.
        let constants = one_pass("constants = { TAPS = 4 }", "a.frag", "");
        let m = parse(&constants).expect("constants for a glslang shader");
        assert_eq!(m.shaders[0].constants["TAPS"], ConstantValue(4.0));
        let on_pass = one_pass("", "a.hlsl", "constants = { TAPS = 4 }");
        let m = parse(&on_pass).expect("constants for a glslang pass");
        assert_eq!(m.shaders[0].passes[0].constants["TAPS"], ConstantValue(4.0));
    }

    #[test]
    fn glslang_compiler_options_are_read_and_checked_with_their_line() {
        let with = |options: &str, targets: &str| {
            one_pass("", "a.hlsl", "")
                .replace(
                    "\n\n[shader.passes.P]",
                    &format!("\n[shader.glslang]\n{options}\n\n[shader.passes.P]"),
                )
                .replace("targets = [\"spirv\"]", targets)
        };
        let spirv = "targets = [\"spirv\"]";
        let m = parse(&with(
            "target_env = \"vulkan1.2\"\ngenerate_debug_info = true\nhlsl_functionality1 = true\nhlsl_offsets = true\nnan_clamp = true\n[shader.glslang.binding_base]\nubo = 4\nuav = 9",
            spirv,
        ))
        .expect("options");
        assert_eq!(
            m.shaders[0].passes[0].front_end,
            FrontEnd::Glslang(GlslangOptions {
                target_env: Some(VulkanVersion::V1_2),
                generate_debug_info: true,
                hlsl_functionality1: true,
                hlsl_offsets: true,
                nan_clamp: true,
                binding_base: BindingBase {
                    ubo: 4,
                    uav: 9,
                    ..BindingBase::default()
                },
                ..GlslangOptions::default()
            })
        );
        let e = parse(&with("target_env = \"vulkan2.0\"", spirv)).unwrap_err();
        assert!(e.message.contains("unknown target_env `vulkan2.0`"), "{e}");
        assert_eq!(e.line, 9, "{e}");
        let e = parse(&with("[shader.glslang.binding_base]\nubos = 1", spirv)).unwrap_err();
        assert!(e.message.contains("ubos"), "{e}");
        let e = parse(&with("[shader.glslang.binding_base]\nubo = -1", spirv)).unwrap_err();
        assert_eq!(e.line, 10, "{e}");
        // An environment too old for the project's SPIR-V: refused at the option's line.
        let newer = "targets = [{ name = \"spirv\", version = \"1.3\" }]";
        let e = parse(&with("target_env = \"vulkan1.0\"", newer)).unwrap_err();
        assert!(
            e.message.contains("target_env vulkan1.0 consumes SPIR-V up to 1.0, but the spirv target's version is 1.3"),
            "{e}"
        );
        assert_eq!(e.line, 9, "{e}");
        assert!(parse(&with("target_env = \"vulkan1.1\"", newer)).is_ok());
    }

    #[test]
    fn axes_product_and_explicit_variants_are_canonical_and_unique() {
        let m = parse(LIT).unwrap();
        let lit = &m.shaders[0];
        // 2 x 2 x 2 from the axes; ["FOG"] is new, [FOG, LIGHTS_1, SKIN] repeats an axis one.
        assert_eq!(lit.variants.len(), 9);
        assert!(lit.variants.contains(&vec!["FOG".to_string()]));
        assert_eq!(lit.variants[0], vec!["LIGHTS_1".to_string()]);
        assert_eq!(m.variant_count(), 18);
        assert_eq!(m.targets.len(), 2);
        assert_eq!(m.targets[1].options_string(), "version=2.0");
        assert_eq!(lit.passes[0].name, "Depth");
    }

    #[test]
    fn unknown_keyword_in_variants_names_it_and_its_line() {
        let text = LIT.replace(r#"["FOG", "FOG"]"#, r#"["FOG", "RAIN"]"#);
        let e = parse(&text).unwrap_err();
        assert!(e.message.contains("unknown keyword `RAIN`"), "{e}");
        assert_eq!(e.line, 9);
    }

    #[test]
    fn malformed_toml_reports_line() {
        let e = parse("[project]\ntargets = [\"spirv\"\n").unwrap_err();
        assert!(e.line >= 2, "{e:?}");
    }

    #[test]
    fn unknown_target_option_and_stage_are_errors() {
        let e = parse(&LIT.replace("version = \"2.0\"", "colour = \"red\"")).unwrap_err();
        assert!(e.message.contains("no option `colour`"), "{e}");
        let e = parse(&LIT.replace("\"fragment\"", "\"pixel\"")).unwrap_err();
        assert!(e.message.contains("unknown stage `pixel`"), "{e}");
    }

    #[test]
    fn include_dirs_are_normalised_shader_first_and_stay_inside_the_root() {
        let with_dirs = |project: &str, shader: &str| {
            LIT.replace(
                "targets = [",
                &format!("include_dirs = {project}\ntargets = ["),
            )
            .replace(
                "source = \"shaders/lit.wgsl\"",
                &format!("source = \"shaders/lit.wgsl\"\ninclude_dirs = {shader}"),
            )
        };
        let m = parse(&with_dirs(
            r#"["shaders/include", "common/./x/.."]"#,
            r#"["shaders/lit", "common"]"#,
        ))
        .unwrap();
        assert_eq!(
            m.shaders[0].include_dirs,
            ["shaders/lit", "common", "shaders/include"].map(PathBuf::from)
        );
        assert!(parse(LIT).unwrap().shaders[0].include_dirs.is_empty());
        for (project, shader, line) in [
            (r#"["../outside"]"#, "[]", 3),
            ("[]", r#"["/usr/include"]"#, 9),
            ("[]", r#"["a/../../b"]"#, 9),
            (r#"["a\\b"]"#, "[]", 3),
        ] {
            let e = parse(&with_dirs(project, shader)).unwrap_err();
            assert!(e.message.contains("include directory"), "{e}");
            assert_eq!(e.line, line, "{e}");
        }
    }

    #[test]
    fn sources_must_stay_inside_the_root() {
        let e = parse(&LIT.replace("shaders/lit.wgsl", "../../etc/passwd.wgsl")).unwrap_err();
        assert!(e.message.contains("leaves the project root"), "{e}");
        let m = parse(&LIT.replace("shaders/lit.wgsl", "shaders/./x/../lit.wgsl")).unwrap();
        assert_eq!(
            m.shaders[0].passes[0].source,
            PathBuf::from("shaders/lit.wgsl")
        );
    }

    #[test]
    fn keywords_must_be_identifiers() {
        let e = parse(&LIT.replace("\"SKIN\"]", "\"SK IN\"]")).unwrap_err();
        assert!(e.message.contains("keyword `SK IN`"), "{e}");
    }

    fn axes(count: usize, per_axis: usize) -> String {
        let axes: Vec<String> = (0..count)
            .map(|a| {
                let words: Vec<String> = (0..per_axis).map(|w| format!("\"K{a}_{w}\"")).collect();
                format!("[{}]", words.join(", "))
            })
            .collect();
        format!("axes = [{}]", axes.join(", "))
    }

    fn with_axes(count: usize, per_axis: usize) -> String {
        LIT.replace(
            r#"axes = [["_", "FOG"], ["_", "SKIN"], ["LIGHTS_1", "LIGHTS_4"]]"#,
            &axes(count, per_axis),
        )
        .replace(
            r#"variants = [["FOG", "FOG"], ["SKIN", "LIGHTS_1", "FOG"]]"#,
            "",
        )
    }

    #[test]
    fn an_overflowing_axis_product_is_an_error_not_a_crash() {
        // 2^64 overflows a usize: the count is checked before anything is built.
        let e = parse(&with_axes(64, 2)).unwrap_err();
        assert!(e.message.contains("variants from its axes"), "{e}");
        assert_eq!(e.line, 6, "{e}");
        let e = parse(&with_axes(17, 2)).unwrap_err();
        assert!(e.message.contains("131072 variants"), "{e}");
    }

    #[test]
    fn the_project_variant_limit_is_configurable() {
        // 2 passes x 2^10 keyword sets.
        let text = with_axes(10, 2);
        assert_eq!(parse(&text).unwrap().variant_count(), 2048);
        let limited = text.replace("[project]", "[project]\nmax_variants = 2000");
        let e = parse(&limited).unwrap_err();
        assert!(e.message.contains("more than 2000 variants"), "{e}");
        assert!(e.message.contains("max_variants"), "{e}");
        let m = parse(&text.replace("[project]", "[project]\nmax_variants = 2048")).unwrap();
        assert_eq!(m.limits.max_variants, 2048);
        let e = parse(&text.replace("[project]", "[project]\nmax_variants = 0")).unwrap_err();
        assert!(e.message.contains("positive"), "{e}");
    }

    #[test]
    fn capabilities_default_per_target_and_are_set_per_project_and_per_target() {
        use crate::compile::{supported_capabilities, Capabilities, Target};
        let m = parse(LIT).unwrap();
        assert_eq!(
            m.targets[1].capabilities(),
            supported_capabilities(Target::Msl)
        );
        let text = LIT.replace(
            "[project]\ntargets = [\"spirv\", { name = \"msl\", version = \"2.0\" }]",
            "[project]\ncapabilities = [\"push_constant\", \"FLOAT64\"]\ntargets = [\"spirv\", { name = \"msl\", version = \"2.0\", capabilities = [\"immediates\"] }]",
        );
        let m = parse(&text).unwrap();
        assert_eq!(
            m.targets[0].capabilities(),
            Capabilities::IMMEDIATES | Capabilities::FLOAT64
        );
        assert_eq!(m.targets[1].capabilities(), Capabilities::IMMEDIATES);
        let e = parse(&text.replace("\"FLOAT64\"", "\"FLOAT65\"")).unwrap_err();
        assert!(e.message.contains("unknown capability `FLOAT65`"), "{e}");
        assert_eq!(e.line, 3, "{e}");
        let e = parse(&text.replace("[\"immediates\"]", "[\"telepathy\"]")).unwrap_err();
        assert!(e.message.contains("unknown capability `telepathy`"), "{e}");
        assert_eq!(e.line, 4, "{e}");
    }

    #[test]
    fn constants_are_read_per_shader_pass_and_keyword() {
        use crate::compile::ConstantValue;
        let text = format!(
            "{LIT}constants = {{ EXPOSURE = 1.5, \"3\" = 2, SHARP = true }}\n\n[shader.keyword_constants.FOG]\nEXPOSURE = 0.5\n"
        )
        .replace(
            "entry = \"fs_main\"\n",
            "entry = \"fs_main\"\nconstants = { \"3\" = 4 }\n",
        );
        // `constants` after a pass table belongs to that pass: move it under the shader.
        let text = text.replace(
            "[shader.passes.Depth]\nstage = \"vertex\"\nentry = \"vs_main\"\nconstants = { EXPOSURE = 1.5, \"3\" = 2, SHARP = true }",
            "[shader.passes.Depth]\nstage = \"vertex\"\nentry = \"vs_main\"",
        );
        let text = text.replace(
            "variants = [",
            "constants = { EXPOSURE = 1.5, \"3\" = 2, SHARP = true }\nvariants = [",
        );
        let m = parse(&text).unwrap();
        let lit = &m.shaders[0];
        let forward = lit.passes.iter().find(|p| p.name == "Forward").unwrap();
        let depth = lit.passes.iter().find(|p| p.name == "Depth").unwrap();
        let c = lit.constants_for(depth, ["SKIN"]);
        assert_eq!(c["EXPOSURE"], ConstantValue(1.5));
        assert_eq!(c["3"], ConstantValue(2.0));
        assert_eq!(c["SHARP"], ConstantValue(1.0));
        let c = lit.constants_for(forward, ["FOG"]);
        assert_eq!(c["3"], ConstantValue(4.0), "the pass's value wins");
        assert_eq!(
            c["EXPOSURE"],
            ConstantValue(0.5),
            "the keyword's value wins"
        );

        let e = parse(&text.replace("EXPOSURE = 0.5", "EXPOSURE = \"bright\"")).unwrap_err();
        assert!(e.message.contains("must be a finite number"), "{e}");
        let e =
            parse(&text.replace("keyword_constants.FOG", "keyword_constants.RAIN")).unwrap_err();
        assert!(e.message.contains("unknown keyword `RAIN`"), "{e}");
        let e = parse(&text.replace("\"3\" = 2", "\"70000\" = 2")).unwrap_err();
        assert!(e.message.contains("out of range"), "{e}");
        // Two keywords of one variant that disagree.
        let clash = format!("{text}\n[shader.keyword_constants.SKIN]\nEXPOSURE = 0.25\n");
        let e = parse(&clash).unwrap_err();
        assert!(e.message.contains("different values"), "{e}");
        assert!(
            e.message.contains("FOG") && e.message.contains("SKIN"),
            "{e}"
        );
    }

    #[test]
    fn names_that_are_paths_are_refused_with_the_key_s_rules() {
        for bad in ["..", ".", "a/b", "a b"] {
            let e = parse(&LIT.replace("\"Lit\"", &format!("\"{bad}\""))).unwrap_err();
            assert!(e.message.contains("shader name"), "{bad}: {e}");
            assert!(crate::key::VariantKey::new(bad, "Forward", ["FOG"], 1).is_err());
        }
    }
}
