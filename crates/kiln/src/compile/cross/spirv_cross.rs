//! SPIR-V to MSL, HLSL and GLSL through Khronos SPIRV-Cross (the `spirv-cross2` bindings,
//! which build SPIRV-Cross from source; compiled with the cargo feature `glslang`).

use super::{pick_entry, stage_support, translator_error, unsupported_by_target, Translator};
use crate::compile::{CompileError, CompilePhase, Stage, Target, TargetConfig};
use spirv_cross2::compile::{glsl, hlsl, msl, CompilableTarget};
use spirv_cross2::spirv::ExecutionModel;
use spirv_cross2::{targets, Compiler, Module, SpirvCrossError};

/// Capabilities whose modules SPIRV-Cross (aa217ae) cannot read: its parser asserts on them
/// (`get_pointee_type_id: Assertion 'p_type->parent_type' failed` on untyped pointers), and an
/// assertion aborts the whole process, which no `catch_unwind` contains. glslang writes them
/// for `GL_EXT_descriptor_heap` (the public samples' `descriptorheapuntyped`).
const UNHANDLED_CAPABILITIES: [(u32, &str); 2] =
    [(4473, "UntypedPointersKHR"), (5128, "DescriptorHeapEXT")];

/// Refuses a module declaring a capability SPIRV-Cross cannot read (the caller has checked
/// the instruction stream).
pub(super) fn refuse_unhandled(spirv: &[u32], target: Target) -> Result<(), CompileError> {
    const OP_CAPABILITY: u32 = 17;
    for (_, opcode, words) in super::words::instructions(spirv) {
        if opcode != OP_CAPABILITY {
            continue;
        }
        if let Some((_, name)) = words
            .get(1)
            .and_then(|c| UNHANDLED_CAPABILITIES.iter().find(|(id, _)| id == c))
        {
            return Err(CompileError::new(
                CompilePhase::Unsupported,
                format!(
                    "{target} through SPIRV-Cross: the module uses capability {name}, which SPIRV-Cross cannot read"
                ),
                None,
            ));
        }
    }
    Ok(())
}

/// Translates the entry point `entry` (of `stage`, when given) of `spirv` for `target`.
pub(super) fn translate(
    spirv: &[u32],
    entry: &str,
    stage: Option<Stage>,
    target: &TargetConfig,
) -> Result<Vec<u8>, CompileError> {
    refuse_unhandled(spirv, target.target())?;
    let module = Module::from_words(spirv);
    let error = |e: SpirvCrossError| {
        let phase = match e {
            SpirvCrossError::InvalidSpirv(_) => CompilePhase::Parse,
            _ => CompilePhase::Emit,
        };
        translator_error(phase, Translator::SpirvCross, target.target(), e)
    };
    let text = match target.target() {
        Target::Msl => {
            let mut compiler = Compiler::<targets::Msl>::new(module).map_err(error)?;
            select_entry(&mut compiler, entry, stage, target)?;
            let mut options = msl::CompilerOptions::default();
            let (major, minor) = target.version();
            options.version = msl::MslVersion::new(u32::from(major), u32::from(minor), 0);
            compiler.compile(&options).map_err(error)?.to_string()
        }
        Target::Hlsl => {
            let mut compiler = Compiler::<targets::Hlsl>::new(module).map_err(error)?;
            select_entry(&mut compiler, entry, stage, target)?;
            let mut options = hlsl::CompilerOptions::default();
            options.shader_model = shader_model(target)?;
            // Direct3D 10 and later have no point size (points are one pixel): writes to
            // `gl_PointSize` are dropped instead of failing the shader (21 of the public
            // Vulkan GLSL samples write it).
            options.point_size_compat = true;
            compiler.compile(&options).map_err(error)?.to_string()
        }
        Target::Glsl => {
            let mut compiler = Compiler::<targets::Glsl>::new(module).map_err(error)?;
            select_entry(&mut compiler, entry, stage, target)?;
            // OpenGL has no separate images and samplers: pair them into combined samplers
            // (a shader written in HLSL uses separate ones), as SPIRV-Cross's own CLI does.
            let proof = compiler
                .create_dummy_sampler_for_combined_images()
                .map_err(error)?;
            compiler
                .build_combined_image_samplers(proof)
                .map_err(error)?;
            name_combined_samplers(&mut compiler).map_err(error)?;
            let mut options = glsl::CompilerOptions::default();
            options.version = glsl_version(target)?;
            compiler.compile(&options).map_err(error)?.to_string()
        }
        Target::Spirv | Target::Wgsl | Target::Reflection => {
            return Err(translator_error(
                CompilePhase::Emit,
                Translator::SpirvCross,
                target.target(),
                "not a SPIRV-Cross target",
            ))
        }
    };
    Ok(text.into_bytes())
}

/// Names each combined sampler built for OpenGL after its image and sampler, as SPIRV-Cross's
/// CLI does (`SPIRV_Cross_Combined<image><sampler>`), and gives it the image's binding, so
/// that an application finds it by name or binding instead of by a SPIR-V ID.
fn name_combined_samplers(compiler: &mut Compiler<targets::Glsl>) -> Result<(), SpirvCrossError> {
    use spirv_cross2::reflect::DecorationValue;
    use spirv_cross2::spirv::Decoration;
    let pairs: Vec<_> = compiler.combined_image_samplers()?.collect();
    for pair in pairs {
        let image = compiler
            .name(pair.image_id)?
            .map(|n| n.to_string())
            .unwrap_or_default();
        let sampler = compiler
            .name(pair.sampler_id)?
            .map(|n| n.to_string())
            .unwrap_or_default();
        let binding = match compiler.decoration(pair.image_id, Decoration::Binding)? {
            Some(DecorationValue::Literal(binding)) => Some(binding),
            _ => None,
        };
        compiler.set_name(
            pair.combined_id,
            format!("SPIRV_Cross_Combined{image}{sampler}"),
        )?;
        if let Some(binding) = binding {
            compiler.set_decoration(pair.combined_id, Decoration::Binding, Some(binding))?;
        }
    }
    Ok(())
}

/// Makes the entry point named `entry` (of `stage`, when given) the one compiled.
fn select_entry<T: CompilableTarget>(
    compiler: &mut Compiler<T>,
    entry: &str,
    stage: Option<Stage>,
    target: &TargetConfig,
) -> Result<(), CompileError> {
    let error = |e: SpirvCrossError| {
        translator_error(
            CompilePhase::Parse,
            Translator::SpirvCross,
            target.target(),
            e,
        )
    };
    let entries: Vec<_> = compiler
        .entry_points()
        .map_err(error)?
        .map(|ep| {
            let matches = stage.is_none_or(|s| execution_model(s) == ep.execution_model);
            (
                ep.name.to_string(),
                format!("{:?}", ep.execution_model),
                ep.execution_model,
                matches,
            )
        })
        .collect();
    let model = pick_entry(&entries, entry, stage)?;
    // An entry point chosen by name alone is held to the same table as a named stage.
    if let Some(stage) = Stage::ALL
        .into_iter()
        .find(|s| execution_model(*s) == model)
    {
        stage_support(Translator::SpirvCross, stage, target.target())
            .map_err(|why| unsupported_by_target(stage, target.target(), why))?;
    }
    compiler.set_entry_point(entry, model).map_err(error)
}

/// SPIR-V's execution model of a kiln stage.
pub(super) fn execution_model(stage: Stage) -> ExecutionModel {
    match stage {
        Stage::Vertex => ExecutionModel::Vertex,
        Stage::Fragment => ExecutionModel::Fragment,
        Stage::Compute => ExecutionModel::GLCompute,
        Stage::Geometry => ExecutionModel::Geometry,
        Stage::TessControl => ExecutionModel::TessellationControl,
        Stage::TessEvaluation => ExecutionModel::TessellationEvaluation,
        Stage::Task => ExecutionModel::TaskEXT,
        Stage::Mesh => ExecutionModel::MeshEXT,
        Stage::RayGeneration => ExecutionModel::RayGenerationKHR,
        Stage::AnyHit => ExecutionModel::AnyHitKHR,
        Stage::ClosestHit => ExecutionModel::ClosestHitKHR,
        Stage::Miss => ExecutionModel::MissKHR,
        Stage::Intersection => ExecutionModel::IntersectionKHR,
        Stage::Callable => ExecutionModel::CallableKHR,
    }
}

fn shader_model(target: &TargetConfig) -> Result<hlsl::HlslShaderModel, CompileError> {
    use hlsl::HlslShaderModel as Sm;
    Ok(match target.version() {
        (5, 0) => Sm::ShaderModel5_0,
        (5, 1) => Sm::ShaderModel5_1,
        (6, 0) => Sm::ShaderModel6_0,
        (6, 1) => Sm::ShaderModel6_1,
        (6, 2) => Sm::ShaderModel6_2,
        (6, 3) => Sm::ShaderModel6_3,
        (6, 4) => Sm::ShaderModel6_4,
        (6, 5) => Sm::ShaderModel6_5,
        (6, 6) => Sm::ShaderModel6_6,
        (6, 7) => Sm::ShaderModel6_7,
        (major, minor) => {
            return Err(unsupported_option(
                target,
                format!("shader model {major}.{minor}"),
            ))
        }
    })
}

fn glsl_version(target: &TargetConfig) -> Result<glsl::GlslVersion, CompileError> {
    use glsl::GlslVersion as V;
    Ok(match (target.version().0, target.es()) {
        (300, true) => V::Glsl300Es,
        (310, true) => V::Glsl310Es,
        (320, true) => V::Glsl320Es,
        (330, false) => V::Glsl330,
        (400, false) => V::Glsl400,
        (410, false) => V::Glsl410,
        (420, false) => V::Glsl420,
        (430, false) => V::Glsl430,
        (440, false) => V::Glsl440,
        (450, false) => V::Glsl450,
        (460, false) => V::Glsl460,
        (version, es) => {
            let es = if es { " es" } else { "" };
            return Err(unsupported_option(target, format!("GLSL {version}{es}")));
        }
    })
}

fn unsupported_option(target: &TargetConfig, what: String) -> CompileError {
    translator_error(
        CompilePhase::Emit,
        Translator::SpirvCross,
        target.target(),
        format!("{what} is not a version SPIRV-Cross writes"),
    )
}
