//! Targets (naga back ends) with their options, and shader stages.

use super::{CompileError, CompilePhase, ValidatedModule};
use naga::valid::Capabilities;
use std::collections::BTreeMap;
use std::fmt;

/// The default register space of HLSL's push-constant buffer (see `immediates_space`).
pub const DEFAULT_IMMEDIATES_SPACE: u8 = 255;

/// An output kind: a shader language (a naga back end), or the reflection of a variant's
/// SPIR-V interface as JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// SPIR-V binary (Vulkan).
    Spirv,
    /// Metal Shading Language source.
    Msl,
    /// HLSL source (Direct3D).
    Hlsl,
    /// GLSL source (OpenGL / GLES).
    Glsl,
    /// WGSL source (WebGPU).
    Wgsl,
    /// The interface of the variant's SPIR-V (bindings, push constants, stage inputs and
    /// outputs, workgroup size) as canonical JSON, read by SPIRV-Cross
    /// (`compile::cross::reflect`); not a shader language.
    Reflection,
}

impl Target {
    /// Every target, in a stable order.
    pub const ALL: [Target; 6] = [
        Self::Spirv,
        Self::Msl,
        Self::Hlsl,
        Self::Glsl,
        Self::Wgsl,
        Self::Reflection,
    ];

    /// [`Target::name`] as one shared allocation per process: every index entry of an
    /// output for this target holds it.
    pub fn shared_name(self) -> std::sync::Arc<str> {
        static NAMES: std::sync::OnceLock<Vec<std::sync::Arc<str>>> = std::sync::OnceLock::new();
        let names = NAMES.get_or_init(|| Self::ALL.iter().map(|t| t.name().into()).collect());
        let at = Self::ALL.iter().position(|t| *t == self).unwrap_or(0);
        std::sync::Arc::clone(&names[at])
    }

    /// The manifest spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Spirv => "spirv",
            Self::Msl => "msl",
            Self::Hlsl => "hlsl",
            Self::Glsl => "glsl",
            Self::Wgsl => "wgsl",
            Self::Reflection => "reflection",
        }
    }

    /// Whether the target is a shader language (its artifact is code a driver or another
    /// compiler reads), not the reflection of one.
    pub fn is_shader(self) -> bool {
        self != Self::Reflection
    }

    /// The extension of output files.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Spirv => "spv",
            Self::Msl => "metal",
            Self::Hlsl => "hlsl",
            Self::Glsl => "glsl",
            Self::Wgsl => "wgsl",
            Self::Reflection => "reflect.json",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A pipeline stage of an entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Vertex shader.
    Vertex,
    /// Fragment (pixel) shader.
    Fragment,
    /// Compute shader.
    Compute,
    /// Geometry shader (glslang only).
    Geometry,
    /// Tessellation control (hull) shader (glslang only).
    TessControl,
    /// Tessellation evaluation (domain) shader (glslang only).
    TessEvaluation,
    /// Task (amplification) shader (glslang only).
    Task,
    /// Mesh shader (glslang only).
    Mesh,
    /// Ray generation shader (glslang only).
    RayGeneration,
    /// Any-hit shader (glslang only).
    AnyHit,
    /// Closest-hit shader (glslang only).
    ClosestHit,
    /// Miss shader (glslang only).
    Miss,
    /// Intersection shader (glslang only).
    Intersection,
    /// Callable shader (glslang only).
    Callable,
}

impl Stage {
    /// Every stage, in a stable order.
    pub const ALL: [Stage; 14] = [
        Self::Vertex,
        Self::Fragment,
        Self::Compute,
        Self::Geometry,
        Self::TessControl,
        Self::TessEvaluation,
        Self::Task,
        Self::Mesh,
        Self::RayGeneration,
        Self::AnyHit,
        Self::ClosestHit,
        Self::Miss,
        Self::Intersection,
        Self::Callable,
    ];

    /// Parses the manifest spelling (`vertex`, `fragment`, `compute`, `geometry`,
    /// `tess_control`, `tess_evaluation`, `task`, `mesh`, `ray_generation`, `any_hit`,
    /// `closest_hit`, `miss`, `intersection`, `callable`).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The manifest spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Vertex => "vertex",
            Self::Fragment => "fragment",
            Self::Compute => "compute",
            Self::Geometry => "geometry",
            Self::TessControl => "tess_control",
            Self::TessEvaluation => "tess_evaluation",
            Self::Task => "task",
            Self::Mesh => "mesh",
            Self::RayGeneration => "ray_generation",
            Self::AnyHit => "any_hit",
            Self::ClosestHit => "closest_hit",
            Self::Miss => "miss",
            Self::Intersection => "intersection",
            Self::Callable => "callable",
        }
    }

    /// Whether naga's front ends and back ends handle this stage (vertex, fragment, compute).
    pub fn naga_supports(self) -> bool {
        self.to_naga().is_some()
    }

    pub(crate) fn to_naga(self) -> Option<naga::ShaderStage> {
        match self {
            Self::Vertex => Some(naga::ShaderStage::Vertex),
            Self::Fragment => Some(naga::ShaderStage::Fragment),
            Self::Compute => Some(naga::ShaderStage::Compute),
            _ => None,
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A target option that kiln does not understand, or a value it cannot parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetParseError {
    /// The target name is not one of `spirv`, `msl`, `hlsl`, `glsl`, `wgsl`, `reflection`.
    #[error("unknown target `{0}` (expected one of spirv, msl, hlsl, glsl, wgsl, reflection)")]
    UnknownTarget(String),
    /// An option the target does not have.
    #[error("target `{target}` has no option `{option}`")]
    UnknownOption {
        /// The target.
        target: Target,
        /// The option as written.
        option: String,
    },
    /// A capability name naga does not know.
    #[error("unknown capability `{0}` (expected one of naga's validator capabilities, e.g. push_constant, float64, clip_distances, multiview; see the README)")]
    UnknownCapability(String),
    /// An option value that does not parse.
    #[error("target `{target}`: option `{option}` = `{value}` is invalid: {why}")]
    InvalidValue {
        /// The target.
        target: Target,
        /// The option.
        option: String,
        /// The value as written.
        value: String,
        /// What was expected.
        why: &'static str,
    },
}

/// The reflected SPIR-V version of a reflection target in a project without a spirv target
/// (its SPIR-V is then each front end's default: see [`TargetConfig::reflected_spirv`]).
const NO_SPIRV_TARGET: (u16, u16) = (0, 0);

/// A target with its options resolved to naga settings.
///
/// Its [`TargetConfig::options_string`] is canonical: two configs that emit identical code
/// have the same string, and it is part of the store namespace.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TargetConfig {
    target: Target,
    /// (major, minor) language version: SPIR-V, MSL; GLSL uses `major` as e.g. 450 / 310;
    /// reflection: the version of the project's spirv target, whose SPIR-V it reads
    /// ([`NO_SPIRV_TARGET`] without one).
    version: (u16, u16),
    /// GLSL ES instead of desktop GLSL.
    es: bool,
    /// What naga's validator allows for this target's artifacts (bits of
    /// `naga::valid::Capabilities`): by default everything the back end can write.
    capabilities: u64,
    /// HLSL: the register (`b<n>`) and space of the constant buffer push constants
    /// (naga's immediates) become; naga needs one, and `space255` keeps clear of the spaces
    /// bind groups map to.
    immediates: (u32, u8),
}

impl TargetConfig {
    /// The target with default options.
    pub fn new(target: Target) -> Self {
        let version = match target {
            Target::Spirv => (1, 0),
            Target::Msl => (2, 1),
            Target::Hlsl => (5, 1),
            Target::Glsl => (450, 0),
            Target::Wgsl => (0, 0),
            Target::Reflection => NO_SPIRV_TARGET,
        };
        Self {
            target,
            version,
            es: false,
            capabilities: supported_capabilities(target).bits(),
            immediates: (0, DEFAULT_IMMEDIATES_SPACE),
        }
    }

    /// The same target validated against exactly `capabilities` instead of its default.
    pub fn with_capabilities(mut self, capabilities: Capabilities) -> Self {
        self.capabilities = capabilities.bits();
        self
    }

    /// A reflection target reads the SPIR-V of the project's spirv target, of `version`
    /// (`None`: the project has none): recorded here so that it is part of the reflection's
    /// identity (store namespace, revision). Other targets come back unchanged.
    pub fn reflecting(mut self, version: Option<(u16, u16)>) -> Self {
        if self.target == Target::Reflection {
            self.version = version.unwrap_or(NO_SPIRV_TARGET);
        }
        self
    }

    /// For a reflection target, the version of the spirv target it reads (`None` when the
    /// project has none: then glslang writes its environment's default, Slang 1.3, and naga
    /// SPIR-V 1.0, with the spirv target's other options); `None` for other targets.
    pub fn reflected_spirv(&self) -> Option<(u16, u16)> {
        (self.target == Target::Reflection && self.version != NO_SPIRV_TARGET)
            .then_some(self.version)
    }

    /// The capabilities naga's validator allows for this target's artifacts.
    pub fn capabilities(&self) -> Capabilities {
        Capabilities::from_bits_retain(self.capabilities)
    }

    /// Parses a target name and its options (`version` for spirv/msl/glsl, `shader_model`
    /// for hlsl, `es` for glsl).
    pub fn parse(name: &str, options: &BTreeMap<String, String>) -> Result<Self, TargetParseError> {
        let target =
            Target::from_name(name).ok_or_else(|| TargetParseError::UnknownTarget(name.into()))?;
        let mut config = Self::new(target);
        for (option, value) in options {
            let invalid = |why| TargetParseError::InvalidValue {
                target,
                option: option.clone(),
                value: value.clone(),
                why,
            };
            match (target, option.as_str()) {
                (Target::Spirv, "version") => {
                    config.version = parse_dotted(value)
                        .filter(|&(major, minor)| major == 1 && minor <= 6)
                        .ok_or_else(|| invalid("expected 1.0 ..= 1.6"))?;
                }
                (Target::Msl, "version") => {
                    config.version = parse_dotted(value)
                        .filter(|&(major, minor)| (1..=3).contains(&major) && minor <= 2)
                        .ok_or_else(|| invalid("expected e.g. 2.1"))?;
                }
                (Target::Hlsl, "shader_model") => {
                    config.version = parse_dotted(&value.replace('_', "."))
                        .filter(|sm| hlsl_shader_model(*sm).is_some())
                        .ok_or_else(|| invalid("expected 5.0, 5.1 or 6.0 ..= 6.7"))?;
                }
                (Target::Glsl, "version") => {
                    config.version = (
                        value
                            .parse::<u16>()
                            .ok()
                            .filter(|v| {
                                [300, 310, 320, 330, 400, 410, 420, 430, 440, 450, 460].contains(v)
                            })
                            .ok_or_else(|| invalid("expected e.g. 450 or 310"))?,
                        0,
                    );
                }
                (Target::Hlsl, "immediates_register") => {
                    config.immediates.0 = value
                        .parse::<u32>()
                        .map_err(|_| invalid("expected a register number"))?;
                }
                (Target::Hlsl, "immediates_space") => {
                    config.immediates.1 = value
                        .parse::<u8>()
                        .map_err(|_| invalid("expected a register space, 0 ..= 255"))?;
                }
                (Target::Glsl, "es") => {
                    config.es = value
                        .parse::<bool>()
                        .map_err(|_| invalid("expected true or false"))?;
                }
                _ => {
                    return Err(TargetParseError::UnknownOption {
                        target,
                        option: option.clone(),
                    })
                }
            }
        }
        Ok(config)
    }

    /// The back end.
    pub fn target(&self) -> Target {
        self.target
    }

    /// The SPIR-V version this target asks for, when it is the SPIR-V target.
    pub fn spirv_version(&self) -> Option<(u16, u16)> {
        (self.target == Target::Spirv).then_some(self.version)
    }

    /// The language version: (major, minor) for SPIR-V, MSL and the HLSL shader model; GLSL's
    /// version (e.g. 450 or 310) in `.0`.
    pub fn version(&self) -> (u16, u16) {
        self.version
    }

    /// Whether a GLSL target is GLSL ES.
    pub fn es(&self) -> bool {
        self.es
    }

    /// The canonical spelling of the options, for store namespaces and logs.
    pub fn options_string(&self) -> String {
        match self.target {
            Target::Spirv | Target::Msl => format!("version={}.{}", self.version.0, self.version.1),
            Target::Hlsl => format!(
                "shader_model={}.{};immediates=b{},space{}",
                self.version.0, self.version.1, self.immediates.0, self.immediates.1
            ),
            Target::Glsl => format!("version={};es={}", self.version.0, self.es),
            Target::Wgsl => String::new(),
            Target::Reflection => match self.reflected_spirv() {
                Some((major, minor)) => format!("spirv={major}.{minor}"),
                None => "spirv=none".to_owned(),
            },
        }
    }

    pub(super) fn emit(&self, m: &ValidatedModule) -> Result<Vec<u8>, CompileError> {
        let emit_error = |e: &dyn std::error::Error| {
            CompileError::new(
                CompilePhase::Emit,
                format!("{}: {}", self.target, super::error_chain(e)),
                None,
            )
        };
        let stage = m.stage.to_naga().ok_or_else(|| {
            CompileError::new(
                CompilePhase::Unsupported,
                format!("naga cannot emit {} shaders", m.stage),
                None,
            )
        })?;
        match self.target {
            Target::Spirv => {
                let words =
                    emit_spirv(m, stage, self.version, false).map_err(|e| emit_error(&e))?;
                Ok(words.iter().flat_map(|w| w.to_le_bytes()).collect())
            }
            Target::Reflection => {
                // The SPIR-V the spirv target writes (same options; without a spirv target,
                // SPIR-V 1.0) with its names, read back by the reflector.
                let version = self.reflected_spirv().unwrap_or((1, 0));
                let words = emit_spirv(m, stage, version, true).map_err(|e| emit_error(&e))?;
                super::cross::reflect(&words, m.stage, &m.entry)
            }
            Target::Msl => {
                use naga::back::msl;
                let options = msl::Options {
                    lang_version: (self.version.0 as u8, self.version.1 as u8),
                    ..msl::Options::default()
                };
                let pipeline = msl::PipelineOptions {
                    entry_point: Some((stage, m.entry.clone())),
                    ..msl::PipelineOptions::default()
                };
                let (text, _) = msl::write_string(&m.module, &m.info, &options, &pipeline)
                    .map_err(|e| emit_error(&e))?;
                Ok(text.into_bytes())
            }
            Target::Hlsl => {
                use naga::back::hlsl;
                let shader_model = hlsl_shader_model(self.version).ok_or_else(|| {
                    CompileError::new(CompilePhase::Emit, "bad shader model".into(), None)
                })?;
                let options = hlsl::Options {
                    shader_model,
                    immediates_target: Some(hlsl::BindTarget {
                        space: self.immediates.1,
                        register: self.immediates.0,
                        binding_array_size: None,
                        dynamic_storage_buffer_offsets_index: None,
                        restrict_indexing: false,
                    }),
                    ..hlsl::Options::default()
                };
                let pipeline = hlsl::PipelineOptions {
                    entry_point: Some((stage, m.entry.clone())),
                };
                let mut text = String::new();
                hlsl::Writer::new(&mut text, &options, &pipeline)
                    .write(&m.module, &m.info, None)
                    .map_err(|e| emit_error(&e))?;
                Ok(text.into_bytes())
            }
            Target::Glsl => {
                use naga::back::glsl;
                let version = if self.es {
                    glsl::Version::new_gles(self.version.0)
                } else {
                    glsl::Version::Desktop(self.version.0)
                };
                let options = glsl::Options {
                    version,
                    ..glsl::Options::default()
                };
                let pipeline = glsl::PipelineOptions {
                    shader_stage: stage,
                    entry_point: m.entry.clone(),
                    multiview: None,
                };
                let mut text = String::new();
                glsl::Writer::new(
                    &mut text,
                    &m.module,
                    &m.info,
                    &options,
                    &pipeline,
                    naga::proc::BoundsCheckPolicies::default(),
                )
                .and_then(|mut writer| writer.write())
                .map_err(|e| emit_error(&e))?;
                Ok(text.into_bytes())
            }
            Target::Wgsl => {
                use naga::back::wgsl;
                let text = wgsl::write_string(&m.module, &m.info, wgsl::WriterFlags::empty())
                    .map_err(|e| emit_error(&e))?;
                Ok(text.into_bytes())
            }
        }
    }
}

/// naga's SPIR-V for the spirv target (of `version`), and for the reflection target: the
/// same module with `names` (naga's `DEBUG` flag: `OpName`s of types, members, variables;
/// nothing that changes a binding, a location or a layout), without which a reflection
/// would name every resource by its SPIR-V id.
fn emit_spirv(
    m: &ValidatedModule,
    stage: naga::ShaderStage,
    version: (u16, u16),
    names: bool,
) -> Result<Vec<u32>, naga::back::spv::Error> {
    use naga::back::spv;
    // Fixed flags (naga adds DEBUG in its own debug builds): output must not depend on how
    // kiln was compiled.
    let mut flags = spv::WriterFlags::ADJUST_COORDINATE_SPACE
        | spv::WriterFlags::LABEL_VARYINGS
        | spv::WriterFlags::CLAMP_FRAG_DEPTH;
    if names {
        flags |= spv::WriterFlags::DEBUG;
    }
    let options = spv::Options {
        lang_version: (version.0 as u8, version.1 as u8),
        flags,
        ..spv::Options::default()
    };
    let pipeline = spv::PipelineOptions {
        shader_stage: stage,
        entry_point: m.entry.clone(),
    };
    spv::write_vec(&m.module, &m.info, &options, Some(&pipeline))
}

/// Everything naga's back end for `target` can write, as naga's own command-line tool
/// validates for an output of that kind: a module using a capability outside this set fails
/// validation for this target alone.
pub fn supported_capabilities(target: Target) -> Capabilities {
    use naga::back;
    match target {
        // Reflection reads naga's SPIR-V.
        Target::Spirv | Target::Reflection => back::spv::supported_capabilities(),
        Target::Msl => back::msl::supported_capabilities(),
        Target::Hlsl => back::hlsl::supported_capabilities(),
        Target::Glsl => back::glsl::supported_capabilities(),
        Target::Wgsl => back::wgsl::supported_capabilities(),
    }
}

/// The validator capability a manifest name stands for: naga's flag names in any case
/// (`immediates`, `FLOAT64`, `clip_distances`), and `push_constant(s)`, the Vulkan name of
/// what naga 30 calls immediates.
pub fn parse_capability(name: &str) -> Result<Capabilities, TargetParseError> {
    let upper = name.trim().to_ascii_uppercase();
    let flag = match upper.as_str() {
        "PUSH_CONSTANT" | "PUSH_CONSTANTS" => Some(Capabilities::IMMEDIATES),
        other => Capabilities::from_name(other),
    };
    flag.ok_or_else(|| TargetParseError::UnknownCapability(name.to_owned()))
}

/// The manifest spelling of a set of capabilities, sorted: for logs and documentation.
pub fn capability_names(capabilities: Capabilities) -> Vec<String> {
    let mut names: Vec<String> = capabilities
        .iter_names()
        .map(|(name, _)| name.to_ascii_lowercase())
        .collect();
    names.sort();
    names
}

fn parse_dotted(text: &str) -> Option<(u16, u16)> {
    let (major, minor) = text.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

fn hlsl_shader_model(version: (u16, u16)) -> Option<naga::back::hlsl::ShaderModel> {
    use naga::back::hlsl::ShaderModel as Sm;
    Some(match version {
        (5, 0) => Sm::V5_0,
        (5, 1) => Sm::V5_1,
        (6, 0) => Sm::V6_0,
        (6, 1) => Sm::V6_1,
        (6, 2) => Sm::V6_2,
        (6, 3) => Sm::V6_3,
        (6, 4) => Sm::V6_4,
        (6, 5) => Sm::V6_5,
        (6, 6) => Sm::V6_6,
        (6, 7) => Sm::V6_7,
        _ => return None,
    })
}
