//! GLSL and HLSL through Khronos glslang, the reference front end (what `glslc` and the
//! Vulkan SDK use), in-process through the `shaderc` crate, to SPIR-V.
//!
//! glslang is native code linked from Debian's static `libshaderc-dev` behind the cargo
//! feature `glslang` (off by default, so that kiln builds on a machine with no native
//! compiler). Without the feature every glslang compile fails alone with
//! [`CompilePhase::Unsupported`] and a message saying what to install and how to build.
//!
//! glslang sees kiln's preprocessed text (includes expanded, keywords and defines applied),
//! so identity, deduplication and early cutoff work as for naga; its error lines are lines of
//! that text, which the pipeline maps back to the sources through the line map.
//!
//! Targets other than SPIR-V are produced from glslang's SPIR-V by [`translate`], the one
//! place that decides how (and whether) a SPIR-V module becomes MSL, HLSL, GLSL or WGSL.

use super::{
    CompileError, CompilePhase, CompileRequest, Stage, Target, TargetConfig, TargetResult,
    TextLocation,
};
use std::fmt;

/// Whether this build of kiln links glslang (the cargo feature `glslang`).
pub const AVAILABLE: bool = cfg!(feature = "glslang");

/// The exact versions of what this build links (shaderc, its crate, glslang, SPIRV-Tools),
/// read at build time from the static libraries' pkg-config files and headers; part of
/// every glslang artifact's identity. `"not linked"` without the feature.
#[cfg(feature = "glslang")]
pub const VERSION: &str = env!("KILN_GLSLANG_VERSION");
/// The exact versions of what this build links; `"not linked"` without the feature.
#[cfg(not(feature = "glslang"))]
pub const VERSION: &str = "not linked";

/// How to get glslang, for errors that need it.
pub const HOW_TO_ENABLE: &str = "install libshaderc-dev and glslang-dev (Debian: `apt-get install libshaderc-dev glslang-dev`) and build kiln with `--features glslang` (e.g. `cargo run --release -p kiln-cli --features glslang -- build`)";

/// glslang's optimisation level (glslc's `-O0`, `-Os`, `-O`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Optimization {
    /// No optimisation (glslc's default).
    #[default]
    Zero,
    /// Smaller code.
    Size,
    /// Faster code.
    Performance,
}

impl Optimization {
    /// Parses the manifest spelling (`zero`, `size`, `performance`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "zero" => Some(Self::Zero),
            "size" => Some(Self::Size),
            "performance" => Some(Self::Performance),
            _ => None,
        }
    }

    /// The manifest spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Zero => "zero",
            Self::Size => "size",
            Self::Performance => "performance",
        }
    }
}

/// A Vulkan version glslang can compile for (glslc's `--target-env=vulkanX.Y`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VulkanVersion {
    /// Vulkan 1.0 (SPIR-V 1.0).
    V1_0,
    /// Vulkan 1.1 (SPIR-V up to 1.3).
    V1_1,
    /// Vulkan 1.2 (SPIR-V up to 1.5).
    V1_2,
    /// Vulkan 1.3 (SPIR-V up to 1.6).
    V1_3,
}

impl VulkanVersion {
    /// Every version, oldest first.
    pub const ALL: [Self; 4] = [Self::V1_0, Self::V1_1, Self::V1_2, Self::V1_3];

    /// Parses the manifest spelling (`vulkan1.0` ..= `vulkan1.3`, as glslc spells it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == name)
    }

    /// The manifest spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::V1_0 => "vulkan1.0",
            Self::V1_1 => "vulkan1.1",
            Self::V1_2 => "vulkan1.2",
            Self::V1_3 => "vulkan1.3",
        }
    }

    /// The newest SPIR-V this Vulkan version consumes; also the SPIR-V glslc writes for it
    /// when no version is given.
    pub fn max_spirv(self) -> (u16, u16) {
        match self {
            Self::V1_0 => (1, 0),
            Self::V1_1 => (1, 3),
            Self::V1_2 => (1, 5),
            Self::V1_3 => (1, 6),
        }
    }

    /// The oldest Vulkan version that consumes SPIR-V `version`.
    pub fn for_spirv(version: (u16, u16)) -> Self {
        Self::ALL
            .into_iter()
            .find(|v| v.max_spirv() >= version)
            .unwrap_or(Self::V1_3)
    }
}

/// Where glslang starts numbering the bindings it assigns, per resource kind (glslc's
/// `-f{image,sampler,texture,ubo,ssbo,uav}-binding-base`); used for resources without a
/// binding under `auto_bind_uniforms` and for HLSL registers under `hlsl_iomap`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BindingBase {
    /// Storage images and image buffers.
    pub image: u32,
    /// Separate samplers.
    pub sampler: u32,
    /// Sampled textures (HLSL shader resource views).
    pub texture: u32,
    /// Uniform buffers (HLSL cbuffers).
    pub ubo: u32,
    /// Storage buffers.
    pub ssbo: u32,
    /// HLSL unordered access views.
    pub uav: u32,
}

impl BindingBase {
    /// The manifest's names of the fields, in the order of [`BindingBase::values`].
    pub const NAMES: [&'static str; 6] = ["image", "sampler", "texture", "ubo", "ssbo", "uav"];

    /// The bases in the order of [`BindingBase::NAMES`].
    pub fn values(&self) -> [u32; 6] {
        let Self {
            image,
            sampler,
            texture,
            ubo,
            ssbo,
            uav,
        } = *self;
        [image, sampler, texture, ubo, ssbo, uav]
    }
}

/// The glslang options a shader can set in `[shader.glslang]`: what glslc's flags of the
/// same names do. All of them change the SPIR-V, so all of them are part of the identity.
/// There is no free-form argument list: an option kiln does not know could neither be hashed
/// by meaning nor be kept from breaking the in-process compiler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GlslangOptions {
    /// `-O0` / `-Os` / `-O`.
    pub optimization: Optimization,
    /// `-fauto-map-locations`: assign locations to inputs and outputs without them.
    pub auto_map_locations: bool,
    /// `-fauto-bind-uniforms`: assign bindings to resources without them.
    pub auto_bind_uniforms: bool,
    /// `-fhlsl-iomap`: HLSL register assignments become Vulkan bindings.
    pub hlsl_iomap: bool,
    /// `-finvert-y`: flip the vertex Y output (Vulkan's clip space to GL's).
    pub invert_y: bool,
    /// `--target-env=vulkanX.Y`: the Vulkan version glslang compiles for (which built-ins,
    /// extensions and SPIR-V it allows). `None`: the oldest that consumes the SPIR-V version.
    pub target_env: Option<VulkanVersion>,
    /// `-g`: debug information (source text, line numbers) in the SPIR-V.
    pub generate_debug_info: bool,
    /// `-fhlsl_functionality1`: HLSL semantics and counter buffers as SPIR-V decorations.
    pub hlsl_functionality1: bool,
    /// `-fhlsl-offsets`: HLSL packing offsets for uniform and storage buffer members.
    pub hlsl_offsets: bool,
    /// `-fnan-clamp`: `min`, `max` and `clamp` return the non-NaN operand.
    pub nan_clamp: bool,
    /// `-f*-binding-base`.
    pub binding_base: BindingBase,
}

/// Compiles `request` once to SPIR-V (of the version of the SPIR-V target among `targets`,
/// 1.0 when there is none) and answers each target from it: the SPIR-V target with those
/// bytes, every other through [`translate`]. `Err` (the text does not compile, glslang is not
/// in this build, the manifest names a constant the shader lacks) fails the whole variant; a
/// target's own failure is in its slot. Specialization constants stay specialization
/// constants in the SPIR-V, with the manifest's values as their defaults
/// ([`super::cross::specialize`]).
pub fn compile_targets(
    options: &GlslangOptions,
    request: &CompileRequest<'_>,
    targets: &[Option<&TargetConfig>],
) -> Result<Vec<Option<TargetResult>>, CompileError> {
    let CompileRequest {
        language,
        text,
        stage,
        entry,
        constants,
    } = *request;
    if text.contains('\0') || entry.contains('\0') {
        return Err(CompileError::new(
            CompilePhase::Parse,
            "the text or entry point holds a NUL character".into(),
            None,
        ));
    }
    super::check_complexity(text)?;
    // The SPIR-V target's version; without one, what glslc writes for the environment.
    let version = targets
        .iter()
        .flatten()
        .find_map(|t| t.spirv_version())
        .unwrap_or_else(|| options.target_env.map_or((1, 0), VulkanVersion::max_spirv));
    if let Some(env) = options.target_env.filter(|env| env.max_spirv() < version) {
        return Err(CompileError::new(
            CompilePhase::Unsupported,
            format!(
                "target_env {} consumes SPIR-V up to {}.{}, but the spirv target's version is {}.{}: raise `target_env` in `[shader.glslang]` or lower the spirv target's `version`",
                env.name(),
                env.max_spirv().0,
                env.max_spirv().1,
                version.0,
                version.1
            ),
            None,
        ));
    }
    let words = imp::compile(language, text, stage, entry, options, version)?;
    // The manifest's values become the constants' defaults, once, for every target.
    let words = super::cross::specialize(&words, constants)?;
    Ok(targets
        .iter()
        .map(|target| target.map(|target| emit(&words, stage, entry, target)))
        .collect())
}

/// A SPIR-V module produced by glslang, as the bytes of a target.
fn emit(spirv: &[u32], stage: Stage, entry: &str, target: &TargetConfig) -> TargetResult {
    match target.target() {
        Target::Spirv => Ok(spirv.iter().flat_map(|w| w.to_le_bytes()).collect()),
        _ => translate(spirv, stage, entry, target),
    }
}

/// SPIR-V to another target through the SPIR-V translator (`compile::cross`), which decides
/// which stages each target has ([`super::cross::stage_support`]).
fn translate(spirv: &[u32], stage: Stage, entry: &str, target: &TargetConfig) -> TargetResult {
    super::cross::from_spirv(spirv, stage, entry, target)
}

/// The "unsupported by target" error of a glslang shader of `stage` for `target`, when the
/// stage table refuses the pair: known without compiling, so the pipeline neither compiles
/// nor looks up such a pair.
pub fn refused(stage: Stage, target: Target) -> Option<CompileError> {
    let translator = super::cross::Translator::for_target(target)?;
    super::cross::stage_support(translator, stage, target)
        .err()
        .map(|why| super::cross::unsupported_by_target(stage, target, why))
}

/// The first error in glslang's log (`<name>:<line>: error: <message>`), located.
#[cfg_attr(not(feature = "glslang"), allow(dead_code))]
fn first_error(log: &str) -> (String, Option<TextLocation>) {
    let mut fallback = None;
    for line in log.lines() {
        let Some(at) = line.find(": error: ") else {
            continue;
        };
        let message = line[at + ": error: ".len()..].trim().to_owned();
        // `kiln:12` -> line 12.
        let location = line[..at]
            .rsplit_once(':')
            .and_then(|(_, n)| n.trim().parse::<u32>().ok())
            .filter(|n| *n > 0)
            .map(|line| TextLocation {
                line,
                column: 1,
                length: 1,
            });
        // glslang follows a real error with "'' : compilation terminated": keep the first.
        if location.is_some() {
            return (message, location);
        }
        fallback.get_or_insert(message);
    }
    let message = fallback.unwrap_or_else(|| {
        let trimmed = log.trim();
        if trimmed.is_empty() {
            "glslang failed without a message".to_owned()
        } else {
            trimmed.to_owned()
        }
    });
    (message, None)
}

impl fmt::Display for GlslangOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
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
        } = self;
        write!(
            f,
            "optimization={};auto_map_locations={auto_map_locations};auto_bind_uniforms={auto_bind_uniforms};hlsl_iomap={hlsl_iomap};invert_y={invert_y};target_env={};generate_debug_info={generate_debug_info};hlsl_functionality1={hlsl_functionality1};hlsl_offsets={hlsl_offsets};nan_clamp={nan_clamp};binding_base={:?}",
            optimization.name(),
            target_env.map_or("default", VulkanVersion::name),
            binding_base.values()
        )
    }
}

#[cfg(feature = "glslang")]
mod imp {
    use super::{first_error, GlslangOptions, Optimization, VulkanVersion};
    use crate::compile::{contain_native, CompileError, CompilePhase, SourceLanguage, Stage};
    use std::sync::OnceLock;

    /// One compiler for the process: shaderc's compiler is thread-safe (`Send + Sync`), and
    /// creating one initialises glslang's global state.
    fn compiler() -> Result<&'static shaderc::Compiler, CompileError> {
        static COMPILER: OnceLock<Result<shaderc::Compiler, String>> = OnceLock::new();
        COMPILER
            .get_or_init(|| shaderc::Compiler::new().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| {
                CompileError::new(
                    CompilePhase::Unsupported,
                    format!("glslang did not start: {e}"),
                    None,
                )
            })
    }

    fn kind(stage: Stage) -> shaderc::ShaderKind {
        use shaderc::ShaderKind as K;
        match stage {
            Stage::Vertex => K::Vertex,
            Stage::Fragment => K::Fragment,
            Stage::Compute => K::Compute,
            Stage::Geometry => K::Geometry,
            Stage::TessControl => K::TessControl,
            Stage::TessEvaluation => K::TessEvaluation,
            Stage::Task => K::Task,
            Stage::Mesh => K::Mesh,
            Stage::RayGeneration => K::RayGeneration,
            Stage::AnyHit => K::AnyHit,
            Stage::ClosestHit => K::ClosestHit,
            Stage::Miss => K::Miss,
            Stage::Intersection => K::Intersection,
            Stage::Callable => K::Callable,
        }
    }

    /// shaderc's Vulkan environment and SPIR-V version: the manifest's `target_env`, else
    /// the oldest Vulkan version that consumes `version` (glslc's `--target-env`).
    fn env(
        target_env: Option<VulkanVersion>,
        version: (u16, u16),
    ) -> (shaderc::EnvVersion, shaderc::SpirvVersion) {
        use shaderc::{EnvVersion as E, SpirvVersion as S};
        let env = match target_env.unwrap_or_else(|| VulkanVersion::for_spirv(version)) {
            VulkanVersion::V1_0 => E::Vulkan1_0,
            VulkanVersion::V1_1 => E::Vulkan1_1,
            VulkanVersion::V1_2 => E::Vulkan1_2,
            VulkanVersion::V1_3 => E::Vulkan1_3,
        };
        let spirv = match version {
            (1, 0) => S::V1_0,
            (1, 1) => S::V1_1,
            (1, 2) => S::V1_2,
            (1, 3) => S::V1_3,
            (1, 4) => S::V1_4,
            (1, 5) => S::V1_5,
            _ => S::V1_6,
        };
        (env, spirv)
    }

    pub(super) fn compile(
        language: SourceLanguage,
        text: &str,
        stage: Stage,
        entry: &str,
        options: &GlslangOptions,
        version: (u16, u16),
    ) -> Result<Vec<u32>, CompileError> {
        let compiler = compiler()?;
        let mut o = shaderc::CompileOptions::new()
            .map_err(|e| CompileError::new(CompilePhase::Unsupported, e.to_string(), None))?;
        o.set_source_language(match language {
            SourceLanguage::Hlsl => shaderc::SourceLanguage::HLSL,
            _ => shaderc::SourceLanguage::GLSL,
        });
        let (env, spirv) = env(options.target_env, version);
        o.set_target_env(shaderc::TargetEnv::Vulkan, env as u32);
        o.set_target_spirv(spirv);
        o.set_optimization_level(match options.optimization {
            Optimization::Zero => shaderc::OptimizationLevel::Zero,
            Optimization::Size => shaderc::OptimizationLevel::Size,
            Optimization::Performance => shaderc::OptimizationLevel::Performance,
        });
        o.set_auto_map_locations(options.auto_map_locations);
        o.set_auto_bind_uniforms(options.auto_bind_uniforms);
        o.set_hlsl_io_mapping(options.hlsl_iomap);
        o.set_invert_y(options.invert_y);
        if options.generate_debug_info {
            o.set_generate_debug_info();
        }
        o.set_hlsl_functionality1(options.hlsl_functionality1);
        o.set_hlsl_offsets(options.hlsl_offsets);
        o.set_nan_clamp(options.nan_clamp);
        let bases = options.binding_base.values();
        for (kind, base) in [
            shaderc::ResourceKind::Image,
            shaderc::ResourceKind::Sampler,
            shaderc::ResourceKind::Texture,
            shaderc::ResourceKind::Buffer,
            shaderc::ResourceKind::StorageBuffer,
            shaderc::ResourceKind::UnorderedAccessView,
        ]
        .into_iter()
        .zip(bases)
        {
            o.set_binding_base(kind, base);
        }
        // glslang recurses over the syntax tree like naga: the same own stack and guard.
        contain_native("glslang", || {
            compiler
                .compile_into_spirv(text, kind(stage), "kiln", entry, Some(&o))
                .map(|artifact| artifact.as_binary().to_vec())
                .map_err(|e| {
                    let log = match &e {
                        shaderc::Error::CompilationError(_, log) => log.clone(),
                        other => other.to_string(),
                    };
                    let (message, location) = first_error(&log);
                    CompileError::new(CompilePhase::Parse, message, location)
                })
        })
    }
}

#[cfg(not(feature = "glslang"))]
mod imp {
    use super::{GlslangOptions, HOW_TO_ENABLE};
    use crate::compile::{CompileError, CompilePhase, SourceLanguage, Stage};

    pub(super) fn compile(
        language: SourceLanguage,
        _text: &str,
        _stage: Stage,
        _entry: &str,
        _options: &GlslangOptions,
        _version: (u16, u16),
    ) -> Result<Vec<u32>, CompileError> {
        Err(CompileError::new(
            CompilePhase::Unsupported,
            format!(
                "this {} shader needs glslang, which this build of kiln does not link: {HOW_TO_ENABLE}",
                language.name()
            ),
            None,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_located_error_is_reported() {
        let log = "kiln:7: error: 'foo' : undeclared identifier\nkiln:7: error: '' : compilation terminated\n2 errors generated.\n";
        let (message, location) = first_error(log);
        assert_eq!(message, "'foo' : undeclared identifier");
        assert_eq!(location.map(|l| l.line), Some(7));
        let (message, location) = first_error("something odd");
        assert_eq!(message, "something odd");
        assert_eq!(location, None);
    }

    #[test]
    fn stages_naga_lacks_are_unsupported_by_other_targets_only() {
        let spirv = [0x0723_0203u32, 0x0001_0000, 0, 1, 0];
        let ok = emit(
            &spirv,
            Stage::Geometry,
            "main",
            &TargetConfig::new(Target::Spirv),
        );
        assert_eq!(ok.map(|b| b.len()), Ok(20));
        let e = emit(
            &spirv,
            Stage::Geometry,
            "main",
            &TargetConfig::new(Target::Msl),
        )
        .expect_err("msl has no geometry stage here");
        assert_eq!(e.phase, CompilePhase::Unsupported);
        assert!(e.message.contains("unsupported by target msl"), "{e}");
    }
}
