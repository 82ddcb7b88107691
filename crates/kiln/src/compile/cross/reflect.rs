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
//! What is reported is what SPIRV-Cross's `--reflect` reports, so the two can be compared
//! (`scripts/reflect_check.sh`): every resource the module declares (not only those the
//! entry point uses), each resource's name as SPIRV-Cross names it (the block's name for
//! uniform and storage buffers, the variable's otherwise, `_<id>` when the module has no
//! name), no built-in stage variable.

use super::spirv_cross::{execution_model, refuse_unhandled};
use super::{pick_entry, translator_error, Translator};
use crate::compile::{CompileError, CompilePhase, Stage, Target};
use serde::Serialize;
use spirv_cross2::handle::{Handle, TypeId};
use spirv_cross2::reflect::{
    ArrayDimension, BitWidth, Resource, ResourceType, Scalar, ScalarKind, TypeInner,
};
use spirv_cross2::spirv::{Decoration, ExecutionMode, ExecutionModel};
use spirv_cross2::{targets, Compiler, Module, SpirvCrossError};
use std::collections::BTreeMap;

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
    let error = |e: SpirvCrossError| {
        let phase = match e {
            SpirvCrossError::InvalidSpirv(_) => CompilePhase::Parse,
            _ => CompilePhase::Emit,
        };
        translator_error(phase, Translator::SpirvCross, Target::Reflection, e)
    };
    let mut compiler = Compiler::<targets::None>::new(Module::from_words(spirv)).map_err(error)?;
    let entries: Vec<_> = compiler
        .entry_points()
        .map_err(error)?
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
    compiler.set_entry_point(entry, model).map_err(error)?;
    let images = ImageTypes::scan(spirv);
    let reader = Reader {
        compiler: &compiler,
        images: &images,
    };
    reader.reflection(entry, model).map_err(error)
}

/// The reading of one module, its entry point set.
struct Reader<'a> {
    compiler: &'a Compiler<targets::None>,
    images: &'a ImageTypes,
}

impl Reader<'_> {
    fn reflection(
        &self,
        entry: &str,
        model: ExecutionModel,
    ) -> Result<Reflection, SpirvCrossError> {
        let c = self.compiler;
        let resources = c.shader_resources()?;
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
            for resource in resources.resources_for_type(resource_type)? {
                bindings.push(self.binding(&resource, kind)?);
            }
        }
        bindings.sort_by(|a, b| {
            (a.set, a.binding, &a.name, a.kind).cmp(&(b.set, b.binding, &b.name, b.kind))
        });
        let mut push_constant_size = None;
        for resource in resources.resources_for_type(ResourceType::PushConstant)? {
            if let TypeInner::Struct(block) = c.type_description(resource.base_type_id)?.inner {
                let size = u32::try_from(block.size).unwrap_or(u32::MAX);
                push_constant_size = Some(push_constant_size.map_or(size, |s: u32| s.max(size)));
            }
        }
        let mut inputs = Vec::new();
        for resource in resources.resources_for_type(ResourceType::StageInput)? {
            inputs.push(self.stage_variable(&resource)?);
        }
        inputs.sort();
        let mut outputs = Vec::new();
        for resource in resources.resources_for_type(ResourceType::StageOutput)? {
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

    fn binding(&self, resource: &Resource<'_>, kind: Kind) -> Result<Binding, SpirvCrossError> {
        let c = self.compiler;
        let literal = |decoration| -> Result<Option<u32>, SpirvCrossError> {
            Ok(c.decoration(resource.id, decoration)?
                .and_then(|v| v.as_literal()))
        };
        let set = literal(Decoration::DescriptorSet)?.unwrap_or(0);
        let binding = literal(Decoration::Binding)?.unwrap_or(0);
        let array_size = self.array_size(resource.type_id)?;
        let image = self.images.get(resource.base_type_id.id());
        // A texel buffer is an image of dimension Buffer.
        let buffer_image = image.is_some_and(|i| i.dim == DIM_BUFFER);
        let kind = match kind {
            Kind::CombinedImageSampler | Kind::SampledImage if buffer_image => {
                Kind::UniformTexelBuffer
            }
            Kind::StorageImage if buffer_image => Kind::StorageTexelBuffer,
            kind => kind,
        };
        let readonly = match kind {
            Kind::StorageBuffer => Some(
                c.buffer_block_decorations(resource.id)?
                    .is_some_and(|d| d.contains(&Decoration::NonWritable)),
            ),
            Kind::StorageImage | Kind::StorageTexelBuffer => Some(
                c.decoration(resource.id, Decoration::NonWritable)?
                    .is_some(),
            ),
            _ => None,
        };
        let ty = match image {
            Some(image) => image.glsl_name(self.images),
            None => self.type_name(resource.base_type_id, 0)?,
        };
        Ok(Binding {
            array_size,
            binding,
            kind: kind.name(),
            name: resource_name(resource),
            readonly,
            set,
            ty,
        })
    }

    fn stage_variable(&self, resource: &Resource<'_>) -> Result<StageVariable, SpirvCrossError> {
        let location = self
            .compiler
            .decoration(resource.id, Decoration::Location)?
            .and_then(|v| v.as_literal());
        Ok(StageVariable {
            location,
            name: resource_name(resource),
            ty: self.type_name(resource.type_id, 0)?,
        })
    }

    /// The product of an arrayed type's dimensions (0 when one is runtime-sized), 1 for a
    /// type that is not an array.
    fn array_size(&self, ty: Handle<TypeId>) -> Result<u32, SpirvCrossError> {
        let TypeInner::Array { dimensions, .. } = self.compiler.type_description(ty)?.inner else {
            return Ok(1);
        };
        let mut size: u32 = 1;
        for dimension in &dimensions {
            size = size.saturating_mul(self.dimension(dimension)?);
        }
        Ok(size)
    }

    fn dimension(&self, dimension: &ArrayDimension) -> Result<u32, SpirvCrossError> {
        Ok(match dimension {
            ArrayDimension::Literal(n) => *n,
            ArrayDimension::Constant(c) => {
                self.compiler.specialization_constant_value::<u32>(*c)?
            }
        })
    }

    /// The GLSL spelling of a type (arrays C-style, outermost first; `[]` runtime-sized).
    fn type_name(&self, ty: Handle<TypeId>, depth: u32) -> Result<String, SpirvCrossError> {
        // Pointers to pointers (physical storage buffers) cannot recurse without end.
        if depth > 16 {
            return Ok("unknown".to_owned());
        }
        if let Some(image) = self.images.get(ty.id()) {
            return Ok(image.glsl_name(self.images));
        }
        let description = self.compiler.type_description(ty)?;
        Ok(match description.inner {
            TypeInner::Unknown => "unknown".to_owned(),
            TypeInner::Void => "void".to_owned(),
            TypeInner::Scalar(scalar) => scalar_name(&scalar).to_owned(),
            TypeInner::Vector { width, scalar } => format!("{}vec{width}", prefix(&scalar)),
            TypeInner::Matrix {
                columns,
                rows,
                scalar,
            } => {
                if columns == rows {
                    format!("{}mat{columns}", prefix(&scalar))
                } else {
                    format!("{}mat{columns}x{rows}", prefix(&scalar))
                }
            }
            TypeInner::Struct(_) => description
                .name
                .map(|n| n.to_string())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| format!("_{}", ty.id())),
            TypeInner::Array {
                base, dimensions, ..
            } => {
                let mut name = self.type_name(base, depth + 1)?;
                // SPIR-V lists the innermost dimension first.
                for dimension in dimensions.iter().rev() {
                    match self.dimension(dimension)? {
                        0 => name.push_str("[]"),
                        n => name.push_str(&format!("[{n}]")),
                    }
                }
                name
            }
            TypeInner::Pointer { base, .. } => self.type_name(base, depth + 1)?,
            TypeInner::Image(_) => "image".to_owned(),
            TypeInner::AccelerationStructure => "accelerationStructureEXT".to_owned(),
            TypeInner::Sampler => "sampler".to_owned(),
        })
    }

    /// The literal workgroup size: `LocalSize`'s literals, or `LocalSizeId`'s constants'
    /// values, each dimension that a specialization constant sets (through the
    /// `WorkgroupSize` built-in or `LocalSizeId`) replaced by that constant's default.
    fn workgroup_size(&self) -> Result<[u32; 3], SpirvCrossError> {
        let c = self.compiler;
        let mut size = [1, 1, 1];
        use spirv_cross2::reflect::ExecutionModeArguments as A;
        match c.execution_mode_arguments(ExecutionMode::LocalSizeId)? {
            Some(A::LocalSizeId { x, y, z }) => {
                size = [
                    c.specialization_constant_value::<u32>(x)?,
                    c.specialization_constant_value::<u32>(y)?,
                    c.specialization_constant_value::<u32>(z)?,
                ];
            }
            _ => {
                if let Some(A::LocalSize { x, y, z }) =
                    c.execution_mode_arguments(ExecutionMode::LocalSize)?
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
                size[at] = c.specialization_constant_value::<u32>(constant.id)?;
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

fn scalar_name(scalar: &Scalar) -> &'static str {
    match (scalar.kind, scalar.size) {
        (ScalarKind::Bool, _) => "bool",
        (ScalarKind::Float, BitWidth::HalfWord) => "float16_t",
        (ScalarKind::Float, BitWidth::DoubleWord) => "double",
        (ScalarKind::Float, _) => "float",
        (ScalarKind::Int, BitWidth::Byte) => "int8_t",
        (ScalarKind::Int, BitWidth::HalfWord) => "int16_t",
        (ScalarKind::Int, BitWidth::DoubleWord) => "int64_t",
        (ScalarKind::Int, _) => "int",
        (ScalarKind::Uint, BitWidth::Byte) => "uint8_t",
        (ScalarKind::Uint, BitWidth::HalfWord) => "uint16_t",
        (ScalarKind::Uint, BitWidth::DoubleWord) => "uint64_t",
        (ScalarKind::Uint, _) => "uint",
    }
}

/// GLSL's prefix of vector and matrix types of `scalar` (`vec`, `ivec`, `dmat`, `f16vec`).
fn prefix(scalar: &Scalar) -> &'static str {
    match (scalar.kind, scalar.size) {
        (ScalarKind::Bool, _) => "b",
        (ScalarKind::Float, BitWidth::HalfWord) => "f16",
        (ScalarKind::Float, BitWidth::DoubleWord) => "d",
        (ScalarKind::Float, _) => "",
        (ScalarKind::Int, BitWidth::Byte) => "i8",
        (ScalarKind::Int, BitWidth::HalfWord) => "i16",
        (ScalarKind::Int, BitWidth::DoubleWord) => "i64",
        (ScalarKind::Int, _) => "i",
        (ScalarKind::Uint, BitWidth::Byte) => "u8",
        (ScalarKind::Uint, BitWidth::HalfWord) => "u16",
        (ScalarKind::Uint, BitWidth::DoubleWord) => "u64",
        (ScalarKind::Uint, _) => "u",
    }
}

const DIM_BUFFER: u32 = 5;
const DIM_SUBPASS_DATA: u32 = 6;

/// An `OpTypeImage`, or an `OpTypeSampledImage` of one, read from the words: SPIRV-Cross's
/// type reflection leaves out whether a storage image is arrayed or multisampled.
#[derive(Clone, Copy, Debug)]
struct ImageType {
    /// The sampled type's id.
    sampled_type: u32,
    dim: u32,
    depth: u32,
    arrayed: bool,
    multisampled: bool,
    /// 1: used with a sampler, 2: storage (read/write).
    sampled: u32,
    /// Whether this is the `OpTypeSampledImage` (a combined image sampler).
    combined: bool,
}

/// The image types of a module by id, with the scalar types images sample.
#[derive(Default)]
struct ImageTypes {
    images: BTreeMap<u32, ImageType>,
    /// id -> (is float, is signed int).
    scalars: BTreeMap<u32, (bool, bool)>,
}

impl ImageTypes {
    fn scan(words: &[u32]) -> Self {
        const OP_TYPE_INT: u32 = 21;
        const OP_TYPE_FLOAT: u32 = 22;
        const OP_TYPE_IMAGE: u32 = 25;
        const OP_TYPE_SAMPLED_IMAGE: u32 = 27;
        let mut types = Self::default();
        let mut sampled = Vec::new();
        let mut at = 5;
        while let Some(&first) = words.get(at) {
            let count = (first >> 16) as usize;
            if count == 0 {
                break;
            }
            let Some(operands) = words.get(at + 1..at + count) else {
                break;
            };
            match (first & 0xffff, operands) {
                (OP_TYPE_INT, [id, _, signed, ..]) => {
                    types.scalars.insert(*id, (false, *signed != 0));
                }
                (OP_TYPE_FLOAT, [id, ..]) => {
                    types.scalars.insert(*id, (true, false));
                }
                (OP_TYPE_IMAGE, [id, sampled_type, dim, depth, arrayed, ms, sampled, ..]) => {
                    types.images.insert(
                        *id,
                        ImageType {
                            sampled_type: *sampled_type,
                            dim: *dim,
                            depth: *depth,
                            arrayed: *arrayed != 0,
                            multisampled: *ms != 0,
                            sampled: *sampled,
                            combined: false,
                        },
                    );
                }
                (OP_TYPE_SAMPLED_IMAGE, [id, image, ..]) => sampled.push((*id, *image)),
                _ => {}
            }
            at += count;
        }
        for (id, image) in sampled {
            if let Some(image) = types.images.get(&image).copied() {
                types.images.insert(
                    id,
                    ImageType {
                        combined: true,
                        ..image
                    },
                );
            }
        }
        types
    }

    fn get(&self, id: u32) -> Option<&ImageType> {
        self.images.get(&id)
    }
}

impl ImageType {
    /// The GLSL name: `sampler2DArrayShadow`, `utexture2D`, `image3D`, `subpassInputMS`.
    fn glsl_name(&self, types: &ImageTypes) -> String {
        let prefix = match types.scalars.get(&self.sampled_type) {
            Some((false, true)) => "i",
            Some((false, false)) => "u",
            _ => "",
        };
        if self.dim == DIM_SUBPASS_DATA {
            let ms = if self.multisampled { "MS" } else { "" };
            return format!("{prefix}subpassInput{ms}");
        }
        let base = if self.combined {
            "sampler"
        } else if self.sampled == 2 {
            "image"
        } else {
            "texture"
        };
        let dim = match self.dim {
            0 => "1D",
            1 => "2D",
            2 => "3D",
            3 => "Cube",
            4 => "2DRect",
            DIM_BUFFER => "Buffer",
            _ => "",
        };
        let ms = if self.multisampled { "MS" } else { "" };
        let array = if self.arrayed { "Array" } else { "" };
        let shadow = if self.combined && self.depth == 1 {
            "Shadow"
        } else {
            ""
        };
        format!("{prefix}{base}{dim}{ms}{array}{shadow}")
    }
}

#[cfg(test)]
mod tests;
