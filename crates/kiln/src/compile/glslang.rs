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

/// The glslang options a shader can set in `[shader.glslang]`: what glslc's flags of the
/// same names do. All of them change the SPIR-V, so all of them are part of the identity.
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
    let version = targets
        .iter()
        .flatten()
        .find_map(|t| t.spirv_version())
        .unwrap_or((1, 0));
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
        } = self;
        write!(
            f,
            "optimization={};auto_map_locations={auto_map_locations};auto_bind_uniforms={auto_bind_uniforms};hlsl_iomap={hlsl_iomap};invert_y={invert_y}",
            optimization.name()
        )
    }
}

#[cfg(feature = "glslang")]
mod imp {
    use super::{first_error, GlslangOptions, Optimization};
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

    /// The lowest Vulkan version whose SPIR-V includes `version` (glslc's `--target-env`).
    fn env(version: (u16, u16)) -> (shaderc::EnvVersion, shaderc::SpirvVersion) {
        use shaderc::{EnvVersion as E, SpirvVersion as S};
        match version {
            (1, 0) => (E::Vulkan1_0, S::V1_0),
            (1, 1) => (E::Vulkan1_1, S::V1_1),
            (1, 2) => (E::Vulkan1_1, S::V1_2),
            (1, 3) => (E::Vulkan1_1, S::V1_3),
            (1, 4) => (E::Vulkan1_2, S::V1_4),
            (1, 5) => (E::Vulkan1_2, S::V1_5),
            _ => (E::Vulkan1_3, S::V1_6),
        }
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
        let (env, spirv) = env(version);
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
