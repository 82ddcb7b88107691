//! The reflection target: a SPIR-V entry point's interface, read with SPIRV-Cross's
//! reflection API (the `spirv-cross2` bindings; cargo feature `glslang`), written as
//! canonical compact JSON.
//!
//! One reflector serves every front end, because every one of them has SPIR-V: glslang's and
//! Slang's are their output, naga's is written by its SPIR-V back end for the purpose (or is
//! the spirv target's). The JSON's keys are in byte order at every level and its arrays in a
//! fixed order (bindings by set then binding, stage variables by location), with no
//! whitespace: the same SPIR-V gives the same bytes. The schema is the README's
//! "Reflection" section; [`Reflection`] is its definition.
//!
//! SPIRV-Cross says which variables are resources of which kind, their decorations, names,
//! entry points and execution modes. Types, array sizes and the push-constant block's size
//! are read from the words themselves (`types.rs`): `spirv-cross2`'s type reflection
//! computes the size of every struct it describes, and an array sized by a specialization
//! constant operation (`uint counts[MAX + 1]`, in the public samples) makes it read a
//! constant that is not one, which crashes the process.
//!
//! What is reported is what SPIRV-Cross's `--reflect` reports, so the two can be compared
//! (`scripts/reflect_check.sh`): every resource the module declares (not only those the
//! entry point uses), each resource's name as SPIRV-Cross names it (the block's name for
//! uniform and storage buffers, the variable's otherwise, `_<id>` when the module has no
//! name), no built-in stage variable.

mod types;

use super::spirv_cross::{execution_model, refuse_unhandled};
use super::{pick_entry, translator_error, Translator};
use crate::compile::{CompileError, CompilePhase, Stage, Target};
use serde::Serialize;
use spirv_cross2::reflect::{Resource, ResourceType};
use spirv_cross2::spirv::{Decoration, ExecutionMode, ExecutionModel};
use spirv_cross2::{targets, Compiler, Module, SpirvCrossError};
use types::Types;

/// A reflected entry point: the JSON document. Fields are declared in byte order of their
/// names, which is the order serde writes them in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Reflection {
    /// Descriptor bindings, by (set, binding, name).
    pub bindings: Vec<Binding>,
    /// The entry point's name in the SPIR-V.
    pub entry_point: String,
    /// Stage inputs (no built-ins), by (location, name).
    pub inputs: Vec<StageVariable>,
    /// Stage outputs (no built-ins), by (location, name).
    pub outputs: Vec<StageVariable>,
    /// The declared size in bytes of the push-constant block; absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub push_constant_size: Option<u32>,
    /// The stage, as the manifest names it (`vertex`, `compute`, `ray_generation`, ...).
    pub stage: &'static str,
    /// Compute, task and mesh shaders: the workgroup size, literal values (a dimension set by
    /// a specialization constant has that constant's default, which is the manifest's value
    /// when it gives one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workgroup_size: Option<[u32; 3]>,
}

/// One descriptor binding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Binding {
    /// Elements of an arrayed binding (the product of its dimensions): 1 when it is not an
    /// array, 0 for a runtime-sized array.
    pub array_size: u32,
    /// `Binding` decoration (0 when absent).
    pub binding: u32,
    /// The descriptor type, Vulkan's (`uniform_buffer`, `storage_buffer`,
    /// `combined_image_sampler`, `sampled_image`, `storage_image`, `uniform_texel_buffer`,
    /// `storage_texel_buffer`, `sampler`, `subpass_input`, `acceleration_structure`).
    pub kind: &'static str,
    /// The resource's name as SPIRV-Cross reports it.
    pub name: String,
    /// Storage buffers, storage images and storage texel buffers: whether the shader cannot
    /// write them (`NonWritable`, on the variable or on every member of the block).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readonly: Option<bool>,
    /// `DescriptorSet` decoration (0 when absent).
    pub set: u32,
    /// The element type: a block's struct name, or a GLSL type name (`sampler2DArray`,
    /// `utexture2D`, `image2D`, `accelerationStructureEXT`).
    #[serde(rename = "type")]
    pub ty: String,
}

/// One stage input or output.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub(crate) struct StageVariable {
    /// `Location` decoration; absent when the variable has none (a block whose members
    /// carry them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<u32>,
    /// The variable's name (`_<id>` without one).
    pub name: String,
    /// Its GLSL type, arrays included (`vec3`, `mat4`, `vec4[3]`).
    #[serde(rename = "type")]
    pub ty: String,
}

impl Reflection {
    /// The canonical bytes.
    pub(crate) fn to_json(&self) -> Result<Vec<u8>, CompileError> {
        serde_json::to_vec(self).map_err(|e| {
            CompileError::new(
                CompilePhase::Emit,
                format!("reflection: cannot write JSON: {e}"),
                None,
            )
        })
    }
}

/// Reflects the entry point `entry` of `stage` in `spirv` (the caller checked the
/// instruction stream).
pub(super) fn reflect(spirv: &[u32], stage: Stage, entry: &str) -> Result<Vec<u8>, CompileError> {
    read(spirv, stage, entry)?.to_json()
}

/// [`reflect`], as a value.
pub(crate) fn read(spirv: &[u32], stage: Stage, entry: &str) -> Result<Reflection, CompileError> {
    refuse_unhandled(spirv, Target::Reflection)?;
    let mut compiler =
        Compiler::<targets::None>::new(Module::from_words(spirv)).map_err(cross_error)?;
    let entries: Vec<_> = compiler
        .entry_points()
        .map_err(cross_error)?
        .map(|ep| {
            (
                ep.name.to_string(),
                format!("{:?}", ep.execution_model),
                ep.execution_model,
                execution_model(stage) == ep.execution_model,
            )
        })
        .collect();
    let model = pick_entry(&entries, entry, Some(stage))?;
    compiler
        .set_entry_point(entry, model)
        .map_err(cross_error)?;
    let types = Types::scan(spirv);
    let reader = Reader {
        compiler: &compiler,
        types: &types,
    };
    reader.reflection(entry, model)
}

/// A SPIRV-Cross error as the reflection target's.
fn cross_error(e: SpirvCrossError) -> CompileError {
    let phase = match e {
        SpirvCrossError::InvalidSpirv(_) => CompilePhase::Parse,
        _ => CompilePhase::Emit,
    };
    translator_error(phase, Translator::SpirvCross, Target::Reflection, e)
}

/// A fact the words do not give (an array length kiln cannot evaluate, a type it cannot
/// size), as the reflection target's error.
fn unreadable(what: String) -> CompileError {
    CompileError::new(CompilePhase::Emit, format!("reflection: {what}"), None)
}

/// The reading of one module, its entry point set.
struct Reader<'a> {
    compiler: &'a Compiler<targets::None>,
    types: &'a Types,
}

impl Reader<'_> {
    fn reflection(&self, entry: &str, model: ExecutionModel) -> Result<Reflection, CompileError> {
        let c = self.compiler;
        let resources = c.shader_resources().map_err(cross_error)?;
        let list = |ty: ResourceType| -> Result<Vec<Resource<'static>>, CompileError> {
            Ok(resources
                .resources_for_type(ty)
                .map_err(cross_error)?
                .collect())
        };
        let mut bindings = Vec::new();
        for (resource_type, kind) in [
            (ResourceType::UniformBuffer, Kind::UniformBuffer),
            (ResourceType::StorageBuffer, Kind::StorageBuffer),
            (ResourceType::SampledImage, Kind::CombinedImageSampler),
            (ResourceType::SeparateImage, Kind::SampledImage),
            (ResourceType::StorageImage, Kind::StorageImage),
            (ResourceType::SeparateSamplers, Kind::Sampler),
            (ResourceType::SubpassInput, Kind::SubpassInput),
            (
                ResourceType::AccelerationStructure,
                Kind::AccelerationStructure,
            ),
        ] {
            for resource in list(resource_type)? {
                bindings.push(self.binding(&resource, kind)?);
            }
        }
        bindings.sort_by(|a, b| {
            (a.set, a.binding, &a.name, a.kind).cmp(&(b.set, b.binding, &b.name, b.kind))
        });
        let mut push_constant_size: Option<u32> = None;
        for resource in list(ResourceType::PushConstant)? {
            let size = self
                .types
                .declared_size(resource.base_type_id.id())
                .map_err(unreadable)?;
            let size = u32::try_from(size).unwrap_or(u32::MAX);
            push_constant_size = Some(push_constant_size.map_or(size, |s| s.max(size)));
        }
        let mut inputs = Vec::new();
        for resource in list(ResourceType::StageInput)? {
            inputs.push(self.stage_variable(&resource)?);
        }
        inputs.sort();
        let mut outputs = Vec::new();
        for resource in list(ResourceType::StageOutput)? {
            outputs.push(self.stage_variable(&resource)?);
        }
        outputs.sort();
        let workgroup_size = if matches!(
            model,
            ExecutionModel::GLCompute
                | ExecutionModel::Kernel
                | ExecutionModel::TaskEXT
                | ExecutionModel::MeshEXT
                | ExecutionModel::TaskNV
                | ExecutionModel::MeshNV
        ) {
            Some(self.workgroup_size()?)
        } else {
            None
        };
        Ok(Reflection {
            bindings,
            entry_point: entry.to_owned(),
            inputs,
            outputs,
            push_constant_size,
            stage: stage_name(model),
            workgroup_size,
        })
    }

    fn binding(&self, resource: &Resource<'_>, kind: Kind) -> Result<Binding, CompileError> {
        let c = self.compiler;
        let literal = |decoration| -> Result<Option<u32>, CompileError> {
            Ok(c.decoration(resource.id, decoration)
                .map_err(cross_error)?
                .and_then(|v| v.as_literal()))
        };
        let set = literal(Decoration::DescriptorSet)?.unwrap_or(0);
        let binding = literal(Decoration::Binding)?.unwrap_or(0);
        let (array_size, element) = self
            .types
            .variable_array(resource.type_id.id(), resource.base_type_id.id())
            .map_err(unreadable)?;
        // A texel buffer is an image of dimension Buffer.
        let buffer_image = self.types.is_buffer_image(element);
        let kind = match kind {
            Kind::CombinedImageSampler | Kind::SampledImage if buffer_image => {
                Kind::UniformTexelBuffer
            }
            Kind::StorageImage if buffer_image => Kind::StorageTexelBuffer,
            kind => kind,
        };
        let readonly = match kind {
            Kind::StorageBuffer => Some(
                c.buffer_block_decorations(resource.id)
                    .map_err(cross_error)?
                    .is_some_and(|d| d.contains(&Decoration::NonWritable)),
            ),
            Kind::StorageImage | Kind::StorageTexelBuffer => Some(
                c.decoration(resource.id, Decoration::NonWritable)
                    .map_err(cross_error)?
                    .is_some(),
            ),
            _ => None,
        };
        Ok(Binding {
            array_size,
            binding,
            kind: kind.name(),
            name: resource_name(resource),
            readonly,
            set,
            ty: self.types.name(element).map_err(unreadable)?,
        })
    }

    fn stage_variable(&self, resource: &Resource<'_>) -> Result<StageVariable, CompileError> {
        let location = self
            .compiler
            .decoration(resource.id, Decoration::Location)
            .map_err(cross_error)?
            .and_then(|v| v.as_literal());
        let ty = self
            .types
            .pointee(resource.type_id.id())
            .unwrap_or(resource.base_type_id.id());
        Ok(StageVariable {
            location,
            name: resource_name(resource),
            ty: self.types.name(ty).map_err(unreadable)?,
        })
    }

    /// The literal workgroup size: `LocalSize`'s literals, or the values of `LocalSizeId`'s
    /// constants, each dimension that a specialization constant sets (through the
    /// `WorkgroupSize` built-in or `LocalSizeId`) being that constant's default.
    fn workgroup_size(&self) -> Result<[u32; 3], CompileError> {
        use spirv_cross2::reflect::ExecutionModeArguments as A;
        let c = self.compiler;
        let value = |id: u32| -> Result<u32, CompileError> {
            self.types
                .constant(id)
                .and_then(|v| u32::try_from(v).ok())
                .ok_or_else(|| {
                    unreadable(format!(
                        "the workgroup size's constant %{id} has no value kiln can read"
                    ))
                })
        };
        let mut size = [1, 1, 1];
        match c
            .execution_mode_arguments(ExecutionMode::LocalSizeId)
            .map_err(cross_error)?
        {
            Some(A::LocalSizeId { x, y, z }) => {
                size = [value(x.id())?, value(y.id())?, value(z.id())?];
            }
            _ => {
                if let Some(A::LocalSize { x, y, z }) = c
                    .execution_mode_arguments(ExecutionMode::LocalSize)
                    .map_err(cross_error)?
                {
                    size = [x, y, z];
                }
            }
        }
        let specialized = c.work_group_size_specialization_constants();
        for (at, constant) in [specialized.x, specialized.y, specialized.z]
            .into_iter()
            .enumerate()
        {
            if let Some(constant) = constant {
                size[at] = value(constant.id.id())?;
            }
        }
        Ok(size)
    }
}

/// The name SPIRV-Cross gives a resource, else `_<id>` as its `--reflect` writes.
fn resource_name(resource: &Resource<'_>) -> String {
    let name = resource.name.to_string();
    if name.is_empty() {
        format!("_{}", resource.id.id())
    } else {
        name
    }
}

/// Descriptor types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    UniformBuffer,
    StorageBuffer,
    CombinedImageSampler,
    SampledImage,
    StorageImage,
    UniformTexelBuffer,
    StorageTexelBuffer,
    Sampler,
    SubpassInput,
    AccelerationStructure,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::UniformBuffer => "uniform_buffer",
            Self::StorageBuffer => "storage_buffer",
            Self::CombinedImageSampler => "combined_image_sampler",
            Self::SampledImage => "sampled_image",
            Self::StorageImage => "storage_image",
            Self::UniformTexelBuffer => "uniform_texel_buffer",
            Self::StorageTexelBuffer => "storage_texel_buffer",
            Self::Sampler => "sampler",
            Self::SubpassInput => "subpass_input",
            Self::AccelerationStructure => "acceleration_structure",
        }
    }
}

/// The stage as the manifest names it; SPIR-V's name for models kiln has no stage for.
fn stage_name(model: ExecutionModel) -> &'static str {
    if let Some(stage) = Stage::ALL
        .into_iter()
        .find(|s| execution_model(*s) == model)
    {
        return stage.name();
    }
    match model {
        ExecutionModel::Kernel => "kernel",
        ExecutionModel::TaskNV => "task",
        ExecutionModel::MeshNV => "mesh",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests;
