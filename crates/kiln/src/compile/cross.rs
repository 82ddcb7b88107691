//! From SPIR-V to the other targets: what a shader compiled by glslang (GLSL or HLSL to
//! SPIR-V) becomes for MSL, HLSL, GLSL and WGSL.
//!
//! Two translators exist, and kiln picks one per target by measured coverage
//! (`docs/spirv-translation.md`: on the public Vulkan samples SPIRV-Cross writes MSL, HLSL
//! and GLSL for 602, 553 and 578 of 632 modules, naga's SPIR-V front end for 332, 326, 344):
//! - [`Translator::SpirvCross`]: Khronos SPIRV-Cross through the `spirv-cross2` crate, which
//!   builds SPIRV-Cross's C++ from source. It is native code with a noticeable build time, so
//!   it is compiled only with the cargo feature `glslang` (as is glslang itself); without it,
//!   a target that needs it fails with an error naming the feature.
//! - [`Translator::Naga`]: naga's SPIR-V front end (`spv-in`), naga's validator and naga's back
//!   ends, exactly as naga compiles WGSL. The only way to WGSL; always built.
//!
//! The SPIR-V itself is the artifact of the SPIR-V target: [`from_spirv`] returns its bytes
//! unchanged. Neither translator adjusts coordinates: the outputs keep the clip-space
//! convention the SPIR-V was written for, as SPIRV-Cross's and wgpu's defaults do.
//!
//! Every call runs on its own stack under `catch_unwind`, like the naga calls (a panic in a
//! translator or in its bindings fails that translation alone). SPIRV-Cross reports its C++
//! exceptions as error codes; a structural check of the SPIR-V header and instruction stream
//! comes first, because SPIRV-Cross trusts its input.

mod naga_in;
#[cfg(feature = "glslang")]
mod reflect;
mod spec;
#[cfg(feature = "glslang")]
mod spirv_cross;
pub(crate) mod words;

pub use spec::specialize;

use super::{contain_named, CompileError, CompilePhase, Stage, Target, TargetConfig};

/// A way from SPIR-V to a target's source language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Translator {
    /// naga's SPIR-V front end, validator and back ends (all targets).
    Naga,
    /// Khronos SPIRV-Cross (MSL, HLSL, GLSL); built with the cargo feature `glslang`.
    SpirvCross,
}

impl Translator {
    /// Both translators, in a stable order.
    pub const ALL: [Translator; 2] = [Self::Naga, Self::SpirvCross];

    /// The translator kiln uses for `target`; `None` for SPIR-V, whose artifact is the
    /// SPIR-V itself, and for reflection, which translates nothing ([`reflect()`]). Chosen by
    /// measured coverage (see the module documentation).
    pub fn for_target(target: Target) -> Option<Self> {
        match target {
            Target::Spirv | Target::Reflection => None,
            Target::Msl | Target::Hlsl | Target::Glsl => Some(Self::SpirvCross),
            Target::Wgsl => Some(Self::Naga),
        }
    }

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Naga => "naga",
            Self::SpirvCross => "SPIRV-Cross",
        }
    }

    /// Whether this translator writes `target` (in this build).
    pub fn writes(self, target: Target) -> bool {
        match self {
            Self::Naga => target.is_shader() && target != Target::Spirv,
            Self::SpirvCross => {
                cfg!(feature = "glslang")
                    && matches!(target, Target::Msl | Target::Hlsl | Target::Glsl)
            }
        }
    }

    /// The translator's exact version, for store namespaces: naga's and SPIRV-Cross's are
    /// read from `Cargo.lock` at build time (`spirv-cross-sys`'s version names the vendored
    /// SPIRV-Cross commit).
    pub fn version(self) -> String {
        match self {
            Self::Naga => format!("naga {}", super::NAGA_VERSION),
            Self::SpirvCross => spirv_cross_version(),
        }
    }
}

impl std::fmt::Display for Translator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(feature = "glslang")]
fn spirv_cross_version() -> String {
    format!("spirv-cross-sys {}", env!("KILN_SPIRV_CROSS_VERSION"))
}

#[cfg(not(feature = "glslang"))]
fn spirv_cross_version() -> String {
    "spirv-cross (not built)".to_owned()
}

/// The exact version of everything [`from_spirv`] can run for `target` (the translator kiln
/// uses for it; SPIRV-Cross, the reflector, for reflection), for the store namespace of
/// artifacts made from SPIR-V. Empty for the SPIR-V target, whose bytes are the front end's.
pub fn version(target: Target) -> String {
    if target == Target::Reflection {
        return spirv_cross_version();
    }
    Translator::for_target(target)
        .map(Translator::version)
        .unwrap_or_default()
}

/// Why the reflection target fails in a kiln built without SPIRV-Cross.
pub const REFLECTION_NEEDS_GLSLANG: &str =
    "the reflection target needs kiln built with the `glslang` feature (the default features; it reads SPIR-V with SPIRV-Cross, which needs a C++ compiler)";

/// The reflection target's artifact: the interface of the entry point `entry` of `stage` in
/// `spirv`, read with SPIRV-Cross's reflection API, as canonical compact JSON (the schema is
/// in the README's "Reflection" section). Any stage is reflected. Without the cargo feature
/// `glslang` (no SPIRV-Cross), an [`CompilePhase::Unsupported`] error.
pub fn reflect(spirv: &[u32], stage: Stage, entry: &str) -> Result<Vec<u8>, CompileError> {
    words::check(spirv)?;
    #[cfg(feature = "glslang")]
    {
        contain_named("SPIRV-Cross", CompilePhase::Emit, || {
            reflect::reflect(spirv, stage, entry)
        })
    }
    #[cfg(not(feature = "glslang"))]
    {
        let _ = (stage, entry);
        Err(CompileError::new(
            CompilePhase::Unsupported,
            REFLECTION_NEEDS_GLSLANG.to_owned(),
            None,
        ))
    }
}

/// Turns SPIR-V (as glslang wrote it) into the artifact of `target`, for the entry point
/// `entry` of `stage`, with the target's options (MSL version, HLSL shader model, GLSL
/// version and ES). SPIR-V comes back unchanged; the other targets go through the
/// translator [`Translator::for_target`] names, where [`stage_support`] allows the pair.
pub fn from_spirv(
    spirv: &[u32],
    stage: Stage,
    entry: &str,
    target: &TargetConfig,
) -> Result<Vec<u8>, CompileError> {
    if target.target() == Target::Reflection {
        return reflect(spirv, stage, entry);
    }
    match Translator::for_target(target.target()) {
        None => {
            words::check(spirv)?;
            Ok(spirv.iter().flat_map(|w| w.to_le_bytes()).collect())
        }
        Some(translator) => translate(translator, spirv, entry, Some(stage), target),
    }
}

/// Whether `translator` writes `target` for a shader of `stage`: `Err` says why not. The one
/// table of which stage reaches which target from SPIR-V; [`translate`] refuses what it
/// refuses, so a refused pair fails as "unsupported by target" before a translator runs.
///
/// naga reads only vertex, fragment and compute SPIR-V. For SPIRV-Cross, measured on our own
/// shaders (`tests/cross/`, and the GLSL outputs checked by `glslangValidator` in
/// `tests/glslang_targets.rs`) and the public Vulkan samples (`docs/spirv-translation.md`):
/// GLSL has geometry and tessellation; MSL has tessellation (a compute kernel writing the
/// factors, then a post-tessellation vertex function, as MoltenVK runs them) and no geometry;
/// SPIRV-Cross's HLSL has neither. Mesh, task and ray-tracing stages stay SPIR-V only: OpenGL
/// GLSL has none of them, and for MSL and HLSL SPIRV-Cross's output is either refused at
/// the default versions or unchecked here (no Metal or DXC compiler to validate it).
pub fn stage_support(
    translator: Translator,
    stage: Stage,
    target: Target,
) -> Result<(), &'static str> {
    use Stage as S;
    use Target as T;
    if matches!(target, T::Spirv | T::Reflection) {
        return Ok(());
    }
    if stage.naga_supports() {
        return Ok(());
    }
    match translator {
        Translator::Naga => Err("naga reads only vertex, fragment and compute SPIR-V"),
        Translator::SpirvCross => match (stage, target) {
            (S::Geometry, T::Glsl) | (S::TessControl | S::TessEvaluation, T::Glsl | T::Msl) => {
                Ok(())
            }
            (S::Geometry, T::Msl) => Err("Metal has no geometry shaders"),
            (S::Geometry, T::Hlsl) => {
                Err("SPIRV-Cross's geometry shaders in HLSL read GLSL built-ins it never declares")
            }
            (S::TessControl | S::TessEvaluation, T::Hlsl) => {
                Err("SPIRV-Cross writes no HLSL hull or domain shaders")
            }
            (S::Task | S::Mesh, T::Glsl) => Err("OpenGL GLSL has no task or mesh shaders"),
            (S::Task | S::Mesh, _) => Err(
                "SPIRV-Cross's task and mesh shaders need Metal 3 or shader model 6.5, which kiln does not check",
            ),
            (_, T::Glsl) => Err("OpenGL GLSL has no ray-tracing shaders"),
            _ => Err("SPIRV-Cross writes no ray-tracing shaders for this target"),
        },
    }
}

/// The error of a (variant, target) pair whose stage the target cannot express.
pub fn unsupported_by_target(stage: Stage, target: Target, why: &str) -> CompileError {
    CompileError::new(
        CompilePhase::Unsupported,
        format!(
            "{stage} shaders are unsupported by target {target} ({why}); only spirv builds them"
        ),
        None,
    )
}

/// Translates SPIR-V with a given translator: the entry point named `entry` (of `stage`,
/// when given; otherwise the only entry point of that name, whatever its execution model,
/// which is how tools reach stages kiln does not name). naga validates against the
/// target's capabilities. A stage [`stage_support`] refuses for the target is an
/// [`CompilePhase::Unsupported`] error.
pub fn translate(
    translator: Translator,
    spirv: &[u32],
    entry: &str,
    stage: Option<Stage>,
    target: &TargetConfig,
) -> Result<Vec<u8>, CompileError> {
    words::check(spirv)?;
    if let Some(stage) = stage {
        stage_support(translator, stage, target.target())
            .map_err(|why| unsupported_by_target(stage, target.target(), why))?;
    }
    if !translator.writes(target.target()) {
        return Err(not_written(translator, target.target()));
    }
    contain_named(translator.name(), CompilePhase::Emit, || match translator {
        Translator::Naga => naga_in::translate(spirv, entry, stage, target),
        #[cfg(feature = "glslang")]
        Translator::SpirvCross => spirv_cross::translate(spirv, entry, stage, target),
        #[cfg(not(feature = "glslang"))]
        Translator::SpirvCross => Err(not_written(translator, target.target())),
    })
}

/// Why `translator` gives no `target`: it cannot, or it was not built.
fn not_written(translator: Translator, target: Target) -> CompileError {
    let message = match translator {
        Translator::SpirvCross
            if !cfg!(feature = "glslang")
                && matches!(target, Target::Msl | Target::Hlsl | Target::Glsl) =>
        {
            format!(
                "{target} from SPIR-V needs SPIRV-Cross, which this kiln was built without: \
             rebuild with the default features (the `glslang` feature, which needs a C++ compiler)"
            )
        }
        _ => format!("{translator} does not translate SPIR-V to {target}"),
    };
    CompileError::new(CompilePhase::Emit, message, None)
}

/// The error of a translator, prefixed with the target and the translator.
fn translator_error(
    phase: CompilePhase,
    translator: Translator,
    target: Target,
    what: impl std::fmt::Display,
) -> CompileError {
    CompileError::new(
        phase,
        format!("{target} through {translator}: {what}"),
        None,
    )
}

/// The entry points of a module as (name, stage name) pairs, for an error that lists them.
fn list_entries(entries: &[(String, String)]) -> String {
    if entries.is_empty() {
        return "the module has no entry points".to_owned();
    }
    let names: Vec<String> = entries
        .iter()
        .map(|(name, stage)| format!("`{name}` ({stage})"))
        .collect();
    format!("the module has {}", names.join(", "))
}

/// Picks the one entry point named `entry` (of `stage`, when given) among `entries`
/// (name, stage-name, matches-stage); errors name what the module has.
fn pick_entry<T: Copy>(
    entries: &[(String, String, T, bool)],
    entry: &str,
    stage: Option<Stage>,
) -> Result<T, CompileError> {
    let found: Vec<&(String, String, T, bool)> = entries
        .iter()
        .filter(|(name, _, _, stage_matches)| name == entry && *stage_matches)
        .collect();
    let listed = || {
        list_entries(
            &entries
                .iter()
                .map(|(name, stage, _, _)| (name.clone(), stage.clone()))
                .collect::<Vec<_>>(),
        )
    };
    match (found.as_slice(), stage) {
        ([one], _) => Ok(one.2),
        ([], Some(stage)) => Err(CompileError::new(
            CompilePhase::Parse,
            format!(
                "no {stage} entry point named `{entry}` in the SPIR-V: {}",
                listed()
            ),
            None,
        )),
        ([], None) => Err(CompileError::new(
            CompilePhase::Parse,
            format!("no entry point named `{entry}` in the SPIR-V: {}", listed()),
            None,
        )),
        (_, _) => Err(CompileError::new(
            CompilePhase::Parse,
            format!(
                "several entry points are named `{entry}` in the SPIR-V ({}): name the stage",
                listed()
            ),
            None,
        )),
    }
}

#[cfg(test)]
mod tests;
