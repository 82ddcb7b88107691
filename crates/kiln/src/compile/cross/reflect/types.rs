//! Types, constants and layouts read from a SPIR-V module's words: type names as GLSL spells
//! them, array lengths (specialization constants at their defaults, and the few operations
//! of them shaders size arrays with), and a struct's declared size as SPIRV-Cross computes
//! it (the last member's `Offset` plus that member's declared size). The caller checked the
//! instruction stream (`words::check`); anything missing here is an error or a fallback
//! name, never a panic.

use std::collections::{BTreeMap, BTreeSet};

/// How deep a type may nest before kiln stops following it (a physical pointer can point
/// back at its own struct).
const MAX_DEPTH: u32 = 32;

const DIM_BUFFER: u32 = 5;
const DIM_SUBPASS_DATA: u32 = 6;

/// A type declaration.
#[derive(Clone, Debug)]
enum Ty {
    Bool,
    Int { width: u32, signed: bool },
    Float { width: u32 },
    Vector { component: u32, count: u32 },
    Matrix { column: u32, count: u32 },
    Image(Image),
    Sampler,
    SampledImage { image: u32 },
    Array { element: u32, length: u32 },
    RuntimeArray { element: u32 },
    Struct { members: Vec<u32> },
    Pointer { pointee: u32 },
    AccelerationStructure,
    RayQuery,
}

/// An `OpTypeImage`.
#[derive(Clone, Copy, Debug)]
struct Image {
    sampled_type: u32,
    dim: u32,
    depth: u32,
    arrayed: bool,
    multisampled: bool,
    /// 1: used with a sampler, 2: read and written without one (storage).
    sampled: u32,
}

/// A constant: a literal (its low word), or a specialization constant operation.
#[derive(Clone, Debug)]
enum Constant {
    Literal(u32),
    Operation { opcode: u32, operands: Vec<u32> },
}

/// What [`Types::scan`] reads of a module.
#[derive(Default)]
pub(super) struct Types {
    types: BTreeMap<u32, Ty>,
    constants: BTreeMap<u32, Constant>,
    names: BTreeMap<u32, String>,
    /// (struct, member) -> Offset.
    offsets: BTreeMap<(u32, u32), u32>,
    /// (struct, member) -> MatrixStride.
    matrix_strides: BTreeMap<(u32, u32), u32>,
    row_major: BTreeSet<(u32, u32)>,
    /// Array type -> ArrayStride.
    array_strides: BTreeMap<u32, u32>,
}

impl Types {
    /// Reads the declarations of `words`.
    pub(super) fn scan(words: &[u32]) -> Self {
        let mut types = Self::default();
        for (_, opcode, words) in crate::compile::cross::words::instructions(words) {
            if let Some(operands) = words.get(1..) {
                types.instruction(opcode, operands);
            }
        }
        types
    }

    fn instruction(&mut self, opcode: u32, operands: &[u32]) {
        const DECORATION_ROW_MAJOR: u32 = 4;
        const DECORATION_ARRAY_STRIDE: u32 = 6;
        const DECORATION_MATRIX_STRIDE: u32 = 7;
        const DECORATION_OFFSET: u32 = 35;
        let ty = |t: Ty, types: &mut Self| {
            if let Some(&id) = operands.first() {
                types.types.insert(id, t);
            }
        };
        match (opcode, operands) {
            // OpName
            (5, [id, name @ ..]) => {
                self.names.insert(*id, literal_string(name));
            }
            // OpDecorate
            (71, [id, DECORATION_ARRAY_STRIDE, stride, ..]) => {
                self.array_strides.insert(*id, *stride);
            }
            // OpMemberDecorate
            (72, [id, member, DECORATION_OFFSET, offset, ..]) => {
                self.offsets.insert((*id, *member), *offset);
            }
            (72, [id, member, DECORATION_MATRIX_STRIDE, stride, ..]) => {
                self.matrix_strides.insert((*id, *member), *stride);
            }
            (72, [id, member, DECORATION_ROW_MAJOR, ..]) => {
                self.row_major.insert((*id, *member));
            }
            (20, [_, ..]) => ty(Ty::Bool, self),
            (21, [_, width, signed, ..]) => ty(
                Ty::Int {
                    width: *width,
                    signed: *signed != 0,
                },
                self,
            ),
            (22, [_, width, ..]) => ty(Ty::Float { width: *width }, self),
            (23, [_, component, count, ..]) => ty(
                Ty::Vector {
                    component: *component,
                    count: *count,
                },
                self,
            ),
            (24, [_, column, count, ..]) => ty(
                Ty::Matrix {
                    column: *column,
                    count: *count,
                },
                self,
            ),
            (25, [_, sampled_type, dim, depth, arrayed, ms, sampled, ..]) => ty(
                Ty::Image(Image {
                    sampled_type: *sampled_type,
                    dim: *dim,
                    depth: *depth,
                    arrayed: *arrayed != 0,
                    multisampled: *ms != 0,
                    sampled: *sampled,
                }),
                self,
            ),
            (26, [_, ..]) => ty(Ty::Sampler, self),
            (27, [_, image, ..]) => ty(Ty::SampledImage { image: *image }, self),
            (28, [_, element, length, ..]) => ty(
                Ty::Array {
                    element: *element,
                    length: *length,
                },
                self,
            ),
            (29, [_, element, ..]) => ty(Ty::RuntimeArray { element: *element }, self),
            (30, [_, members @ ..]) => ty(
                Ty::Struct {
                    members: members.to_vec(),
                },
                self,
            ),
            (32, [_, _, pointee, ..]) => ty(Ty::Pointer { pointee: *pointee }, self),
            (4472, [_, ..]) => ty(Ty::RayQuery, self),
            (5341, [_, ..]) => ty(Ty::AccelerationStructure, self),
            // OpConstant, OpSpecConstant: the low word (array lengths and sizes are 32-bit).
            (43 | 50, [_, id, value, ..]) => {
                self.constants.insert(*id, Constant::Literal(*value));
            }
            // OpSpecConstantOp
            (52, [_, id, opcode, rest @ ..]) => {
                self.constants.insert(
                    *id,
                    Constant::Operation {
                        opcode: *opcode,
                        operands: rest.to_vec(),
                    },
                );
            }
            _ => {}
        }
    }

    /// The value of an integer constant: a literal, a specialization constant's default,
    /// or an arithmetic operation of those.
    pub(super) fn constant(&self, id: u32) -> Option<u64> {
        self.evaluate(id, 0).and_then(|v| u64::try_from(v).ok())
    }

    fn evaluate(&self, id: u32, depth: u32) -> Option<i64> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.constants.get(&id)? {
            Constant::Literal(value) => Some(i64::from(*value)),
            Constant::Operation { opcode, operands } => {
                let a = self.evaluate(*operands.first()?, depth + 1)?;
                let b = || self.evaluate(*operands.get(1)?, depth + 1);
                // OpIAdd, OpISub, OpIMul, OpUDiv and OpSDiv, OpUMod, OpSRem and OpSMod,
                // the shifts, OpBitwiseOr, Xor and And, OpUConvert, OpSConvert, OpBitcast.
                match opcode {
                    128 => a.checked_add(b()?),
                    130 => a.checked_sub(b()?),
                    132 => a.checked_mul(b()?),
                    134 | 135 => a.checked_div(b()?),
                    137..=139 => a.checked_rem(b()?),
                    194 | 195 => a.checked_shr(u32::try_from(b()?).ok()?),
                    196 => a.checked_shl(u32::try_from(b()?).ok()?),
                    197 => Some(a | b()?),
                    198 => Some(a ^ b()?),
                    199 => Some(a & b()?),
                    113 | 114 | 124 => Some(a),
                    _ => None,
                }
            }
        }
    }

    /// The type a pointer type points to.
    pub(super) fn pointee(&self, pointer: u32) -> Option<u32> {
        match self.types.get(&pointer)? {
            Ty::Pointer { pointee } => Some(*pointee),
            _ => None,
        }
    }

    /// A variable of pointer type `pointer`: the number of elements of its arrays (their
    /// product; 0 when one is runtime-sized; 1 for no array) and the element type. Without
    /// the pointer type, `element` (SPIRV-Cross's base type) and 1.
    pub(super) fn variable_array(&self, pointer: u32, element: u32) -> Result<(u32, u32), String> {
        let Some(mut ty) = self.pointee(pointer) else {
            return Ok((1, element));
        };
        let mut count: u32 = 1;
        for _ in 0..MAX_DEPTH {
            match self.types.get(&ty) {
                Some(Ty::Array { element, length }) => {
                    count = count.saturating_mul(self.length(*length)?);
                    ty = *element;
                }
                Some(Ty::RuntimeArray { element }) => {
                    count = 0;
                    ty = *element;
                }
                _ => return Ok((count, ty)),
            }
        }
        Err(format!("type %{pointer} nests too deep"))
    }

    fn length(&self, constant: u32) -> Result<u32, String> {
        self.constant(constant)
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| {
                format!("an array length (constant %{constant}) is not a value kiln can compute")
            })
    }

    /// Whether `ty` is a texel buffer's image (dimension Buffer), sampled or not.
    pub(super) fn is_buffer_image(&self, ty: u32) -> bool {
        self.image(ty)
            .is_some_and(|(image, _)| image.dim == DIM_BUFFER)
    }

    /// The image of an image or sampled-image type, and whether it is combined.
    fn image(&self, ty: u32) -> Option<(Image, bool)> {
        match self.types.get(&ty)? {
            Ty::Image(image) => Some((*image, false)),
            Ty::SampledImage { image } => match self.types.get(image)? {
                Ty::Image(image) => Some((*image, true)),
                _ => None,
            },
            _ => None,
        }
    }

    /// The GLSL name of a type: `vec3`, `mat4x3`, `sampler2DArrayShadow`, a struct's name
    /// (`_<id>` without one), arrays outermost first (`vec4[2][3]`, `[]` runtime-sized).
    pub(super) fn name(&self, ty: u32) -> Result<String, String> {
        self.name_at(ty, 0)
    }

    fn name_at(&self, ty: u32, depth: u32) -> Result<String, String> {
        if depth > MAX_DEPTH {
            return Err(format!("type %{ty} nests too deep"));
        }
        let Some(declared) = self.types.get(&ty) else {
            return Ok(format!("_{ty}"));
        };
        Ok(match declared {
            Ty::Bool | Ty::Int { .. } | Ty::Float { .. } => scalar_name(declared).to_owned(),
            Ty::Vector { component, count } => {
                format!("{}vec{count}", self.prefix(*component))
            }
            Ty::Matrix { column, count } => {
                let (prefix, rows) = match self.types.get(column) {
                    Some(Ty::Vector { component, count }) => (self.prefix(*component), *count),
                    _ => ("", *count),
                };
                if rows == *count {
                    format!("{prefix}mat{count}")
                } else {
                    format!("{prefix}mat{count}x{rows}")
                }
            }
            Ty::Image(_) | Ty::SampledImage { .. } => match self.image(ty) {
                Some((image, combined)) => self.image_name(&image, combined),
                None => format!("_{ty}"),
            },
            Ty::Sampler => "sampler".to_owned(),
            Ty::AccelerationStructure => "accelerationStructureEXT".to_owned(),
            Ty::RayQuery => "rayQueryEXT".to_owned(),
            Ty::Struct { members } => match self.names.get(&ty).filter(|n| !n.is_empty()) {
                Some(name) => name.clone(),
                // naga wraps a uniform or storage global that is not a struct block in an
                // unnamed one-member block (`var<uniform> globals: Globals`): the type of
                // that member is what the shader wrote.
                None => match members.as_slice() {
                    [only] => {
                        let inner = self.name_at(*only, depth + 1)?;
                        if inner.starts_with('_') {
                            format!("_{ty}")
                        } else {
                            inner
                        }
                    }
                    _ => format!("_{ty}"),
                },
            },
            Ty::Pointer { pointee } => self.name_at(*pointee, depth + 1)?,
            Ty::Array { .. } | Ty::RuntimeArray { .. } => {
                let mut dims = String::new();
                let mut element = ty;
                for _ in 0..MAX_DEPTH {
                    match self.types.get(&element) {
                        Some(Ty::Array {
                            element: inner,
                            length,
                        }) => {
                            dims.push_str(&format!("[{}]", self.length(*length)?));
                            element = *inner;
                        }
                        Some(Ty::RuntimeArray { element: inner }) => {
                            dims.push_str("[]");
                            element = *inner;
                        }
                        _ => break,
                    }
                }
                format!("{}{dims}", self.name_at(element, depth + 1)?)
            }
        })
    }

    /// GLSL's prefix of vectors and matrices of `component` (`""`, `i`, `u`, `b`, `d`,
    /// `f16`, `i64`, ...).
    fn prefix(&self, component: u32) -> &'static str {
        match self.types.get(&component) {
            Some(Ty::Bool) => "b",
            Some(Ty::Float { width: 16 }) => "f16",
            Some(Ty::Float { width: 64 }) => "d",
            Some(Ty::Float { .. }) => "",
            Some(Ty::Int { width, signed }) => match (width, signed) {
                (8, true) => "i8",
                (8, false) => "u8",
                (16, true) => "i16",
                (16, false) => "u16",
                (64, true) => "i64",
                (64, false) => "u64",
                (_, true) => "i",
                (_, false) => "u",
            },
            _ => "",
        }
    }

    /// `sampler2DArrayShadow`, `utexture2D`, `image3D`, `subpassInputMS`, `samplerBuffer`.
    fn image_name(&self, image: &Image, combined: bool) -> String {
        let prefix = match self.types.get(&image.sampled_type) {
            Some(Ty::Int { signed: true, .. }) => "i",
            Some(Ty::Int { signed: false, .. }) => "u",
            _ => "",
        };
        let ms = if image.multisampled { "MS" } else { "" };
        if image.dim == DIM_SUBPASS_DATA {
            return format!("{prefix}subpassInput{ms}");
        }
        let base = if combined {
            "sampler"
        } else if image.sampled == 2 {
            "image"
        } else {
            "texture"
        };
        let dim = match image.dim {
            0 => "1D",
            1 => "2D",
            2 => "3D",
            3 => "Cube",
            4 => "2DRect",
            DIM_BUFFER => "Buffer",
            _ => "",
        };
        let array = if image.arrayed { "Array" } else { "" };
        let shadow = if combined && image.depth == 1 {
            "Shadow"
        } else {
            ""
        };
        format!("{prefix}{base}{dim}{ms}{array}{shadow}")
    }

    /// A struct's declared size, as SPIRV-Cross's `get_declared_struct_size`: its last
    /// member's offset plus that member's declared size (no padding to an alignment).
    pub(super) fn declared_size(&self, ty: u32) -> Result<u64, String> {
        self.size_at(ty, 0)
    }

    fn size_at(&self, ty: u32, depth: u32) -> Result<u64, String> {
        if depth > MAX_DEPTH {
            return Err(format!("type %{ty} nests too deep"));
        }
        let unsized_type = || format!("type %{ty} has no size kiln can compute");
        Ok(match self.types.get(&ty).ok_or_else(unsized_type)? {
            Ty::Bool => 4,
            Ty::Int { width, .. } | Ty::Float { width } => u64::from(*width / 8),
            Ty::Vector { component, count } => {
                u64::from(*count) * self.size_at(*component, depth + 1)?
            }
            Ty::Array { element, length } => {
                let length = u64::from(self.length(*length)?);
                match self.array_strides.get(&ty) {
                    Some(stride) => u64::from(*stride) * length,
                    None => self.size_at(*element, depth + 1)? * length,
                }
            }
            Ty::RuntimeArray { .. } => 0,
            // A physical storage buffer address.
            Ty::Pointer { .. } => 8,
            Ty::Struct { members } => {
                let Some((last, &member)) = members.iter().enumerate().next_back() else {
                    return Ok(0);
                };
                let last = u32::try_from(last).map_err(|_| unsized_type())?;
                let offset = self.offsets.get(&(ty, last)).copied().unwrap_or(0);
                let size = match self.types.get(&member) {
                    // A matrix's size is its stride times its columns (rows, row-major).
                    Some(Ty::Matrix { column, count }) => {
                        let stride = self.matrix_strides.get(&(ty, last)).copied();
                        let rows = match self.types.get(column) {
                            Some(Ty::Vector { count, .. }) => *count,
                            _ => 0,
                        };
                        match stride {
                            Some(stride) if self.row_major.contains(&(ty, last)) => {
                                u64::from(stride) * u64::from(rows)
                            }
                            Some(stride) => u64::from(stride) * u64::from(*count),
                            None => self.size_at(member, depth + 1)?,
                        }
                    }
                    _ => self.size_at(member, depth + 1)?,
                };
                u64::from(offset) + size
            }
            Ty::Matrix { column, count } => u64::from(*count) * self.size_at(*column, depth + 1)?,
            Ty::Image(_)
            | Ty::Sampler
            | Ty::SampledImage { .. }
            | Ty::AccelerationStructure
            | Ty::RayQuery => return Err(unsized_type()),
        })
    }
}

fn scalar_name(ty: &Ty) -> &'static str {
    match ty {
        Ty::Bool => "bool",
        Ty::Float { width: 16 } => "float16_t",
        Ty::Float { width: 64 } => "double",
        Ty::Float { .. } => "float",
        Ty::Int { width, signed } => match (width, signed) {
            (8, true) => "int8_t",
            (8, false) => "uint8_t",
            (16, true) => "int16_t",
            (16, false) => "uint16_t",
            (64, true) => "int64_t",
            (64, false) => "uint64_t",
            (_, true) => "int",
            (_, false) => "uint",
        },
        _ => "unknown",
    }
}

/// A SPIR-V literal string: UTF-8 bytes, nul-terminated, packed little-endian into words.
fn literal_string(words: &[u32]) -> String {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}
