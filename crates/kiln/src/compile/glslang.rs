//! GLSL and HLSL through Khronos glslang, the reference front end (what `glslc` and the
//! Vulkan SDK use), in-process through glslang's C interface (`glslang-sys`), to SPIR-V;
//! `optimization` runs SPIRV-Tools' optimizer (the `spirv-tools` crate) on the result.
//!
//! Both are C++ vendored by their crates and built from source with `cc` (no cmake, no
//! system library) behind the cargo feature `glslang`, on by default; `--no-default-features`
//! gives a pure-Rust kiln in which every glslang compile fails alone with
//! [`CompilePhase::Unsupported`] and a message saying how to build.
//!
//! glslang's C interface has no switch for glslc's `-fhlsl-iomap`, `-fhlsl_functionality1`
//! and `-fnan-clamp`: `native/glslang_options.cpp`, built by build.rs against glslang-sys's
//! headers, sets them through glslang's C++ API on the C interface's shader.
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

/// The exact versions of what this build compiles in: the `glslang` and `glslang-sys` crates
/// (the latter's build metadata names the vendored glslang commit) and the `spirv-tools`
/// and `spirv-tools-sys` crates (which pin the vendored SPIRV-Tools), read by `build.rs`
/// from `Cargo.lock`; part of every glslang artifact's identity. `"not linked"` without the
/// feature.
#[cfg(feature = "glslang")]
pub const VERSION: &str = env!("KILN_GLSLANG_VERSION");
/// The exact versions of what this build links; `"not linked"` without the feature.
#[cfg(not(feature = "glslang"))]
pub const VERSION: &str = "not linked";

/// How to get glslang, for errors that need it.
pub const HOW_TO_ENABLE: &str = "build kiln with its default features (the `glslang` feature, on by default, builds glslang and SPIRV-Tools from source with a C++ compiler; `--no-default-features` leaves them out)";

/// The optimisation level (glslc's `-O0`, `-Os`, `-O`): SPIRV-Tools' optimizer recipes run
/// on glslang's module.
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
    /// `-fhlsl-iomap`: HLSL register assignments become Vulkan bindings, each register class
    /// shifted by its own base. Set through glslang's C++ API (`native/glslang_options.cpp`).
    pub hlsl_iomap: bool,
    /// `-finvert-y`: flip the vertex Y output (Vulkan's clip space to GL's).
    pub invert_y: bool,
    /// `--target-env=vulkanX.Y`: the Vulkan version glslang compiles for (which built-ins,
    /// extensions and SPIR-V it allows). `None`: the oldest that consumes the SPIR-V version.
    pub target_env: Option<VulkanVersion>,
    /// `-g`: debug information (source text, line numbers) in the SPIR-V.
    pub generate_debug_info: bool,
    /// `-fhlsl_functionality1`: HLSL semantics and counter buffers as SPIR-V decorations.
    /// Set through glslang's C++ API (`native/glslang_options.cpp`).
    pub hlsl_functionality1: bool,
    /// `-fhlsl-offsets`: HLSL packing offsets for uniform and storage buffer members.
    pub hlsl_offsets: bool,
    /// `-fnan-clamp`: `min`, `max` and `clamp` return the non-NaN operand (GLSL.std.450's
    /// `NMin`/`NMax`/`NClamp`). Set through glslang's C++ API (`native/glslang_options.cpp`).
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
    // The manifest's values become the constants' defaults, once, for every target; before
    // the optimizer, which keeps them specialization constants but may fold what uses them.
    let words = super::cross::specialize(&words, constants)?;
    let words = imp::optimize(words.into_owned(), language, options, version)?;
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

/// The first error in glslang's info log (`ERROR: <string>:<line>: <message>`), located.
#[cfg_attr(not(feature = "glslang"), allow(dead_code))]
fn first_error(log: &str) -> (String, Option<TextLocation>) {
    let mut fallback = None;
    for line in log.lines() {
        let Some(rest) = line.trim_start().strip_prefix("ERROR: ") else {
            continue;
        };
        // `0:12: 'x' : undeclared identifier`: source string 0 (kiln passes one), line 12.
        let located = rest.split_once(':').and_then(|(string, rest)| {
            string.trim().parse::<u32>().ok()?;
            let (line, message) = rest.split_once(':')?;
            let line = line.trim().parse::<u32>().ok().filter(|n| *n > 0)?;
            Some((message.trim().to_owned(), line))
        });
        if let Some((message, line)) = located {
            let location = TextLocation {
                line,
                column: 1,
                length: 1,
            };
            return (message, Some(location));
        }
        // glslang ends with "N compilation errors.  No code generated.": a count, not a cause.
        if !rest.contains("compilation errors") {
            fallback.get_or_insert_with(|| rest.trim().to_owned());
        }
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
    use glslang_sys as sys;
    use spirv_tools::opt::Optimizer as _;
    use std::ffi::{c_char, c_int, c_void, CStr, CString};
    use std::ptr::NonNull;

    /// glslang's default resource limits (what glslangValidator and glslc assume), from the
    /// `glslang` crate; its C interface has no default of its own.
    static LIMITS: glslang::limits::ResourceLimits = glslang::limits::DEFAULT_LIMITS;

    fn started() -> Result<(), CompileError> {
        // Initialises glslang's process-wide state once; the crate keeps it for the process.
        glslang::Compiler::acquire().map(|_| ()).ok_or_else(|| {
            CompileError::new(
                CompilePhase::Unsupported,
                "glslang did not start (glslang_initialize_process failed)".into(),
                None,
            )
        })
    }

    fn stage_of(stage: Stage) -> sys::glslang_stage_t {
        use sys::glslang_stage_t as S;
        match stage {
            Stage::Vertex => S::Vertex,
            Stage::Fragment => S::Fragment,
            Stage::Compute => S::Compute,
            Stage::Geometry => S::Geometry,
            Stage::TessControl => S::TesselationControl,
            Stage::TessEvaluation => S::TesselationEvaluation,
            Stage::Task => S::Task,
            Stage::Mesh => S::Mesh,
            Stage::RayGeneration => S::RayGeneration,
            Stage::AnyHit => S::AnyHit,
            Stage::ClosestHit => S::ClosestHit,
            Stage::Miss => S::Miss,
            Stage::Intersection => S::Intersect,
            Stage::Callable => S::Callable,
        }
    }

    /// The Vulkan environment: the manifest's `target_env`, else the oldest Vulkan version
    /// that consumes `version` (glslc's `--target-env`).
    fn vulkan(target_env: Option<VulkanVersion>, version: (u16, u16)) -> VulkanVersion {
        target_env.unwrap_or_else(|| VulkanVersion::for_spirv(version))
    }

    fn client_version(env: VulkanVersion) -> sys::glslang_target_client_version_t {
        use sys::glslang_target_client_version_t as C;
        match env {
            VulkanVersion::V1_0 => C::Vulkan1_0,
            VulkanVersion::V1_1 => C::Vulkan1_1,
            VulkanVersion::V1_2 => C::Vulkan1_2,
            VulkanVersion::V1_3 => C::Vulkan1_3,
        }
    }

    fn spirv_version(version: (u16, u16)) -> sys::glslang_target_language_version_t {
        use sys::glslang_target_language_version_t as V;
        match version {
            (1, 0) => V::SPIRV1_0,
            (1, 1) => V::SPIRV1_1,
            (1, 2) => V::SPIRV1_2,
            (1, 3) => V::SPIRV1_3,
            (1, 4) => V::SPIRV1_4,
            (1, 5) => V::SPIRV1_5,
            _ => V::SPIRV1_6,
        }
    }

    /// SPIRV-Tools' environment for the optimizer: the same Vulkan version, and SPIR-V 1.4 on
    /// Vulkan 1.1 where the target asks for it (the one pairing with its own name).
    fn tools_env(env: VulkanVersion, version: (u16, u16)) -> spirv_tools::TargetEnv {
        use spirv_tools::TargetEnv as T;
        match env {
            VulkanVersion::V1_0 => T::Vulkan_1_0,
            VulkanVersion::V1_1 if version >= (1, 4) => T::Vulkan_1_1_Spirv_1_4,
            VulkanVersion::V1_1 => T::Vulkan_1_1,
            VulkanVersion::V1_2 => T::Vulkan_1_2,
            VulkanVersion::V1_3 => T::Vulkan_1_3,
        }
    }

    /// A C string glslang returned (a log), read lossily: a log is for people.
    ///
    /// # Safety
    /// `ptr` is null or a NUL-terminated string that lives for this call.
    unsafe fn log(ptr: *const c_char) -> String {
        if ptr.is_null() {
            return String::new();
        }
        // SAFETY: non-null, NUL-terminated and alive (the caller's contract).
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned()
    }

    /// A glslang shader, deleted when dropped.
    struct ShaderHandle(NonNull<sys::glslang_shader_t>);

    impl Drop for ShaderHandle {
        fn drop(&mut self) {
            // SAFETY: created by glslang_shader_create, deleted once, after every program
            // that holds it (a `ProgramHandle` is declared after and so dropped before it).
            unsafe { sys::glslang_shader_delete(self.0.as_ptr()) }
        }
    }

    /// A glslang program, deleted when dropped.
    struct ProgramHandle(NonNull<sys::glslang_program_t>);

    impl Drop for ProgramHandle {
        fn drop(&mut self) {
            // SAFETY: created by glslang_program_create and deleted once.
            unsafe { sys::glslang_program_delete(self.0.as_ptr()) }
        }
    }

    fn failed(log: &str) -> CompileError {
        let (message, location) = first_error(log);
        CompileError::new(CompilePhase::Parse, message, location)
    }

    extern "C" {
        /// native/glslang_options.cpp (built by build.rs): sets glslc's `-fhlsl-iomap`,
        /// `-fhlsl_functionality1` and `-fnan-clamp` on a C-interface shader through glslang's
        /// C++ API, which the C interface has no switch for; 0 when the handle holds no shader.
        fn kiln_glslang_shader_set_extra_options(
            shader: *mut c_void,
            hlsl_iomap: c_int,
            hlsl_functionality1: c_int,
            nan_clamp: c_int,
        ) -> c_int;
    }

    pub(super) fn compile(
        language: SourceLanguage,
        text: &str,
        stage: Stage,
        entry: &str,
        options: &GlslangOptions,
        version: (u16, u16),
    ) -> Result<Vec<u32>, CompileError> {
        started()?;
        let env = vulkan(options.target_env, version);
        // NULs were refused by the caller; a failure here is still an error, not a panic.
        let nul = |_| CompileError::new(CompilePhase::Parse, "a NUL character".into(), None);
        let code = CString::new(text).map_err(nul)?;
        let entry_c = CString::new(entry).map_err(nul)?;
        let hlsl = language == SourceLanguage::Hlsl;
        let mut messages = sys::glslang_messages_t::DEFAULT.0
            | sys::glslang_messages_t::SPV_RULES.0
            | sys::glslang_messages_t::VULKAN_RULES.0;
        if hlsl {
            messages |= sys::glslang_messages_t::READ_HLSL.0;
        }
        if options.hlsl_offsets {
            messages |= sys::glslang_messages_t::HLSL_OFFSETS.0;
        }
        if options.generate_debug_info {
            // Keeps the source text for OpSource and the line table.
            messages |= sys::glslang_messages_t::DEBUG_INFO.0;
        }
        let input = sys::glslang_input_t {
            language: if hlsl {
                sys::glslang_source_t::HLSL
            } else {
                sys::glslang_source_t::GLSL
            },
            stage: stage_of(stage),
            client: sys::glslang_client_t::Vulkan,
            client_version: client_version(env),
            target_language: sys::glslang_target_language_t::SPIRV,
            target_language_version: spirv_version(version),
            code: code.as_ptr(),
            // glslc's defaults for a shader without `#version`.
            default_version: 100,
            default_profile: sys::glslang_profile_t::None,
            force_default_version_and_profile: 0,
            forward_compatible: 0,
            messages: sys::glslang_messages_t(messages),
            resource: std::ptr::from_ref(&LIMITS).cast::<sys::glslang_resource_t>(),
            // kiln's preprocessor expanded every include: glslang must not resolve any.
            callbacks: sys::glsl_include_callbacks_t {
                include_system: None,
                include_local: None,
                free_include_result: None,
            },
            callbacks_ctx: std::ptr::null_mut(),
        };
        let mut shader_options = sys::glslang_shader_options_t::DEFAULT;
        if options.auto_bind_uniforms {
            shader_options |= sys::glslang_shader_options_t::AUTO_MAP_BINDINGS;
        }
        if options.auto_map_locations {
            shader_options |= sys::glslang_shader_options_t::AUTO_MAP_LOCATIONS;
        }
        // glslang recurses over the syntax tree like naga: the same own stack and guard.
        contain_native("glslang", || {
            // SAFETY: `input` points at `code`, `LIMITS` (static) and null callbacks, all
            // alive until the shader is parsed below; glslang copies what it keeps.
            let raw = unsafe { sys::glslang_shader_create(&input) };
            let shader = ShaderHandle(NonNull::new(raw).ok_or_else(|| {
                CompileError::new(
                    CompilePhase::Panic,
                    "glslang created no shader".into(),
                    None,
                )
            })?);
            let sh = shader.0.as_ptr();
            // SAFETY: `sh` is a live shader; glslang copies the entry point name, and the
            // enumerations are glslang's own.
            unsafe {
                sys::glslang_shader_set_entry_point(sh, entry_c.as_ptr());
                sys::glslang_shader_set_invert_y(sh, options.invert_y);
                sys::glslang_shader_set_options(sh, shader_options.0);
            }
            if options.hlsl_iomap || options.hlsl_functionality1 || options.nan_clamp {
                // SAFETY: `sh` is a live shader made by glslang_shader_create, the handle
                // native/glslang_options.cpp reads the TShader from; it keeps no pointer.
                let set = unsafe {
                    kiln_glslang_shader_set_extra_options(
                        sh.cast(),
                        c_int::from(options.hlsl_iomap),
                        c_int::from(options.hlsl_functionality1),
                        c_int::from(options.nan_clamp),
                    )
                };
                if set == 0 {
                    return Err(CompileError::new(
                        CompilePhase::Panic,
                        "glslang's shader handle held no shader".into(),
                        None,
                    ));
                }
            }
            // SAFETY: `sh` is a live shader; the enumerations are glslang's own.
            unsafe {
                let bases = options.binding_base.values();
                for (kind, base) in [
                    sys::glslang_resource_type_t::Image,
                    sys::glslang_resource_type_t::Sampler,
                    sys::glslang_resource_type_t::Texture,
                    sys::glslang_resource_type_t::UBO,
                    sys::glslang_resource_type_t::SSBO,
                    sys::glslang_resource_type_t::UAV,
                ]
                .into_iter()
                .zip(bases)
                {
                    sys::glslang_shader_shift_binding(sh, kind, base);
                }
            }
            // SAFETY: `sh` is live and `input` (with the text it points at) outlives both
            // calls; the log pointer is read before the shader changes again.
            unsafe {
                if sys::glslang_shader_preprocess(sh, &input) == 0
                    || sys::glslang_shader_parse(sh, &input) == 0
                {
                    return Err(failed(&log(sys::glslang_shader_get_info_log(sh))));
                }
            }
            // SAFETY: no arguments; the result is checked for null.
            let raw = unsafe { sys::glslang_program_create() };
            let program = ProgramHandle(NonNull::new(raw).ok_or_else(|| {
                CompileError::new(
                    CompilePhase::Panic,
                    "glslang created no program".into(),
                    None,
                )
            })?);
            let pr = program.0.as_ptr();
            // SAFETY: `pr` and `sh` are live, and the program is dropped before the shader
            // (declared later); link takes glslang's own message bits; mapIO (bindings,
            // shifts, locations) runs on the linked program, as glslangValidator runs it.
            unsafe {
                sys::glslang_program_add_shader(pr, sh);
                if sys::glslang_program_link(pr, messages) == 0 {
                    return Err(failed(&log(sys::glslang_program_get_info_log(pr))));
                }
                if sys::glslang_program_map_io(pr) == 0 {
                    return Err(failed(&log(sys::glslang_program_get_info_log(pr))));
                }
            }
            // kiln optimizes with SPIRV-Tools itself (`optimize`); glslang-sys is built without
            // its optimizer anyway.
            let mut spv = sys::glslang_spv_options_t {
                generate_debug_info: options.generate_debug_info,
                strip_debug_info: false,
                disable_optimizer: true,
                optimize_size: false,
                optimize_performance: false,
                disassemble: false,
                validate: false,
                emit_nonsemantic_shader_debug_info: false,
                emit_nonsemantic_shader_debug_source: false,
                compile_only: false,
                optimize_allow_expanded_id_bound: false,
                compiler_signature: std::ptr::null(),
                command_line_arguments: std::ptr::null(),
                current_working_directory: std::ptr::null(),
            };
            // SAFETY: `pr` is linked; `spv` lives across the call; the buffer has exactly the
            // size glslang reports for the module it writes.
            let words = unsafe {
                sys::glslang_program_SPIRV_generate_with_options(pr, input.stage, &mut spv);
                let size = sys::glslang_program_SPIRV_get_size(pr);
                let mut words = vec![0u32; size];
                sys::glslang_program_SPIRV_get(pr, words.as_mut_ptr());
                words
            };
            drop(program);
            drop(shader);
            if words.len() < 5 {
                return Err(CompileError::new(
                    CompilePhase::Parse,
                    "glslang wrote no SPIR-V module".into(),
                    None,
                ));
            }
            Ok(words)
        })
    }

    /// SPIRV-Tools' optimizer on glslang's module: HLSL's legalization passes first (glslang
    /// writes HLSL literally, e.g. resources in function-local variables, which only
    /// legalization makes valid Vulkan SPIR-V; glslc runs them for HLSL at every level), then
    /// the `performance` or `size` recipe. The optimizer validates its input first (relaxed
    /// as before legalization for HLSL), so an invalid module is an error here, not an
    /// artifact. Specialization constants stay specializable.
    pub(super) fn optimize(
        words: Vec<u32>,
        language: SourceLanguage,
        options: &GlslangOptions,
        version: (u16, u16),
    ) -> Result<Vec<u32>, CompileError> {
        let hlsl = language == SourceLanguage::Hlsl;
        if options.optimization == Optimization::Zero && !hlsl {
            return Ok(words);
        }
        let env = tools_env(vulkan(options.target_env, version), version);
        contain_native("spirv-opt", || {
            let mut optimizer = spirv_tools::opt::create(Some(env));
            if hlsl {
                optimizer.register_hlsl_legalization_passes();
            }
            match options.optimization {
                Optimization::Zero => {}
                Optimization::Performance => {
                    optimizer.register_performance_passes();
                }
                Optimization::Size => {
                    optimizer.register_size_passes();
                }
            }
            let mut messages = Vec::new();
            let mut collect = |m: spirv_tools::error::Message| {
                if matches!(
                    m.level,
                    spirv_tools::error::MessageLevel::Fatal
                        | spirv_tools::error::MessageLevel::InternalError
                        | spirv_tools::error::MessageLevel::Error
                ) {
                    messages.push(m.message);
                }
            };
            let run = spirv_tools::opt::Options {
                validator_options: Some(spirv_tools::val::ValidatorOptions {
                    before_legalization: hlsl,
                    ..Default::default()
                }),
                preserve_spec_constants: true,
                ..Default::default()
            };
            let result = optimizer.optimize(&words, &mut collect, Some(run));
            match result {
                Ok(binary) => Ok(binary.as_words().to_vec()),
                Err(e) => {
                    let detail = if messages.is_empty() {
                        e.to_string()
                    } else {
                        messages.join("; ")
                    };
                    Err(CompileError::new(
                        CompilePhase::Validate,
                        format!("SPIRV-Tools rejected glslang's module: {detail}"),
                        None,
                    ))
                }
            }
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

    pub(super) fn optimize(
        words: Vec<u32>,
        _language: SourceLanguage,
        _options: &GlslangOptions,
        _version: (u16, u16),
    ) -> Result<Vec<u32>, CompileError> {
        Ok(words)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_located_error_is_reported() {
        let log = "ERROR: 0:7: 'foo' : undeclared identifier\nERROR: 0:7: '' : compilation terminated\nERROR: 2 compilation errors.  No code generated.\n";
        let (message, location) = first_error(log);
        assert_eq!(message, "'foo' : undeclared identifier");
        assert_eq!(location.map(|l| l.line), Some(7));
        let (message, location) = first_error("something odd");
        assert_eq!(message, "something odd");
        assert_eq!(location, None);
        let link = "ERROR: Linking fragment stage: Missing entry point: Each stage requires one entry point\n";
        let (message, location) = first_error(link);
        assert!(
            message.starts_with("Linking fragment stage: Missing entry point"),
            "{message}"
        );
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
