//! The manifest's specialization constant values in SPIR-V from glslang.
//!
//! glslang keeps `layout(constant_id = N) const` (HLSL `[[vk::constant_id(N)]]`) as SPIR-V
//! specialization constants: `OpSpecConstant`, `OpSpecConstantTrue` or `OpSpecConstantFalse`
//! decorated `SpecId N`, whose literal is the default value. kiln sets that default to the
//! manifest's value (matched by name or by `constant_id`, as for naga) once, right after
//! glslang, so that every target gets the same value from one place: the SPIR-V artifact
//! (still specializable, now with the manifest's default), and the MSL, HLSL, GLSL and WGSL
//! translated from it (SPIRV-Cross writes the default into its function constants and
//! `SPIRV_CROSS_CONSTANT_ID_N` macros, naga into `override` declarations).
//!
//! Values convert to the constant's type as naga's pipeline-constant processing converts
//! them (integers truncate toward zero and must fit, floats must be finite in the type,
//! booleans are true when non-zero), so a manifest means the same for either front end.

use super::words::instructions;
use super::{CompileError, CompilePhase};
use crate::compile::{ConstantValue, Constants};
use std::borrow::Cow;
use std::collections::BTreeMap;

const OP_NAME: u32 = 5;
const OP_TYPE_BOOL: u32 = 20;
const OP_TYPE_INT: u32 = 21;
const OP_TYPE_FLOAT: u32 = 22;
const OP_SPEC_CONSTANT_TRUE: u32 = 48;
const OP_SPEC_CONSTANT_FALSE: u32 = 49;
const OP_SPEC_CONSTANT: u32 = 50;
const OP_DECORATE: u32 = 71;
const DECORATION_SPEC_ID: u32 = 1;

/// A scalar type a specialization constant can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scalar {
    Bool,
    Int { width: u32, signed: bool },
    Float { width: u32 },
}

impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Bool => f.write_str("bool"),
            Self::Int { width, signed } => write!(f, "{}{width}", if *signed { 'i' } else { 'u' }),
            Self::Float { width } => write!(f, "f{width}"),
        }
    }
}

/// One specialization constant of the module: where its instruction starts, its type and
/// how the manifest can name it.
struct SpecConstant {
    at: usize,
    scalar: Option<Scalar>,
    id: u32,
    name: Option<String>,
}

impl SpecConstant {
    fn describe(&self) -> String {
        match &self.name {
            Some(name) => format!("`{name}` (constant_id {})", self.id),
            None => format!("constant_id {}", self.id),
        }
    }

    fn matches(&self, key: &str) -> bool {
        self.name.as_deref() == Some(key) || self.id.to_string() == key
    }
}

/// `spirv` with the default of each specialization constant the manifest names set to the
/// manifest's value; borrowed unchanged when `constants` is empty. A name or id the module
/// does not declare, or a value its type cannot hold, is an error of the whole variant
/// ([`CompilePhase::Constants`]), as for naga.
pub fn specialize<'a>(
    spirv: &'a [u32],
    constants: &Constants,
) -> Result<Cow<'a, [u32]>, CompileError> {
    if constants.is_empty() {
        return Ok(Cow::Borrowed(spirv));
    }
    super::words::check(spirv)?;
    let declared = spec_constants(spirv);
    let mut out = spirv.to_vec();
    for (key, value) in constants {
        let found: Vec<&SpecConstant> = declared.iter().filter(|c| c.matches(key)).collect();
        if found.is_empty() {
            let names: Vec<String> = declared.iter().map(SpecConstant::describe).collect();
            let names = if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            };
            return Err(CompileError::new(
                CompilePhase::Constants,
                format!(
                    "the manifest sets specialization constant `{key}`, which this shader does not declare (declared: {names})"
                ),
                None,
            ));
        }
        for constant in found {
            set_default(&mut out, constant, *value)?;
        }
    }
    Ok(Cow::Owned(out))
}

/// A literal string's text (SPIR-V packs UTF-8 little-endian, NUL-terminated).
fn literal_string(words: &[u32]) -> Option<String> {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let end = bytes.iter().position(|b| *b == 0)?;
    String::from_utf8(bytes[..end].to_vec()).ok()
}

/// Every specialization constant decorated with a `SpecId` (those without one cannot be
/// specialized, and the manifest cannot name them).
fn spec_constants(spirv: &[u32]) -> Vec<SpecConstant> {
    let mut names = BTreeMap::new();
    let mut ids = BTreeMap::new();
    let mut types = BTreeMap::new();
    let mut constants = Vec::new();
    for (at, opcode, words) in instructions(spirv) {
        match (opcode, words) {
            (OP_NAME, [_, target, name @ ..]) => {
                if let Some(name) = literal_string(name) {
                    names.insert(*target, name);
                }
            }
            (OP_DECORATE, [_, target, DECORATION_SPEC_ID, id, ..]) => {
                ids.insert(*target, *id);
            }
            (OP_TYPE_BOOL, [_, result]) => {
                types.insert(*result, Scalar::Bool);
            }
            (OP_TYPE_INT, [_, result, width, signed]) => {
                types.insert(
                    *result,
                    Scalar::Int {
                        width: *width,
                        signed: *signed != 0,
                    },
                );
            }
            // A fourth operand is a floating-point encoding (e.g. bfloat16): not an IEEE type.
            (OP_TYPE_FLOAT, [_, result, width]) => {
                types.insert(*result, Scalar::Float { width: *width });
            }
            (
                OP_SPEC_CONSTANT_TRUE | OP_SPEC_CONSTANT_FALSE | OP_SPEC_CONSTANT,
                [_, ty, result, ..],
            ) => {
                constants.push((at, *ty, *result));
            }
            _ => {}
        }
    }
    constants
        .into_iter()
        .filter_map(|(at, ty, result)| {
            Some(SpecConstant {
                at,
                scalar: types.get(&ty).copied(),
                id: *ids.get(&result)?,
                name: names.get(&result).cloned(),
            })
        })
        .collect()
}

/// Writes `value` as the default of `constant` in `spirv`.
fn set_default(
    spirv: &mut [u32],
    constant: &SpecConstant,
    value: ConstantValue,
) -> Result<(), CompileError> {
    let unusable = |why: String| {
        CompileError::new(
            CompilePhase::Constants,
            format!(
                "specialization constant {}: the manifest's value {value} {why}",
                constant.describe()
            ),
            None,
        )
    };
    let Some(scalar) = constant.scalar else {
        return Err(unusable(
            "cannot be given: its type is not a scalar kiln knows".to_owned(),
        ));
    };
    let literal = encode(value.0, scalar).map_err(|why| unusable(format!("{why} {scalar}")))?;
    let at = constant.at;
    let first = spirv[at];
    let (count, opcode) = ((first >> 16) as usize, first & 0xffff);
    match literal {
        Literal::Bool(on) => {
            if opcode == OP_SPEC_CONSTANT {
                return Err(unusable(
                    "cannot be given: malformed boolean constant".into(),
                ));
            }
            let opcode = if on {
                OP_SPEC_CONSTANT_TRUE
            } else {
                OP_SPEC_CONSTANT_FALSE
            };
            spirv[at] = (first & 0xffff_0000) | opcode;
        }
        Literal::Words(words) => {
            if opcode != OP_SPEC_CONSTANT || count != 3 + words.len() {
                return Err(unusable(format!(
                    "cannot be given: its instruction does not hold a {scalar} literal"
                )));
            }
            spirv[at + 3..at + count].copy_from_slice(&words);
        }
    }
    Ok(())
}

/// A constant's new literal: a boolean (the opcode says it) or the literal's words.
#[derive(Debug, PartialEq)]
enum Literal {
    Bool(bool),
    Words(Vec<u32>),
}

/// `value` in `scalar`'s encoding, converted as naga converts pipeline constants; `Err` says
/// why it does not fit ("does not fit in").
fn encode(value: f64, scalar: Scalar) -> Result<Literal, &'static str> {
    const NOT_FINITE: &str = "is not finite, which is required for";
    const RANGE: &str = "is out of the range of";
    match scalar {
        Scalar::Bool => Ok(Literal::Bool(value != 0.0 && !value.is_nan())),
        Scalar::Int { width, signed } => {
            if !value.is_finite() {
                return Err(NOT_FINITE);
            }
            let value = value.trunc();
            // Literals narrower than a word are sign-extended (signed) or zero-extended.
            let (min, max) = match (width, signed) {
                (8 | 16 | 32 | 64, true) => {
                    let bits = i32::try_from(width - 1).map_err(|_| RANGE)?;
                    (-(2f64.powi(bits)), 2f64.powi(bits) - 1.0)
                }
                (8 | 16 | 32 | 64, false) => {
                    let bits = i32::try_from(width).map_err(|_| RANGE)?;
                    (0.0, 2f64.powi(bits) - 1.0)
                }
                _ => return Err(RANGE),
            };
            if value < min || value > max {
                return Err(RANGE);
            }
            // Exact: |value| <= 2^53 (the manifest refuses inexact integers), and in range.
            let bits = if signed {
                value as i64 as u64
            } else {
                value as u64
            };
            Ok(Literal::Words(if width == 64 {
                vec![bits as u32, (bits >> 32) as u32]
            } else {
                vec![bits as u32]
            }))
        }
        Scalar::Float { width } => {
            if !value.is_finite() {
                return Err(NOT_FINITE);
            }
            match width {
                16 => {
                    let half = half::f16::from_f64(value);
                    if !half.is_finite() {
                        return Err(RANGE);
                    }
                    Ok(Literal::Words(vec![u32::from(half.to_bits())]))
                }
                32 => {
                    let single = value as f32;
                    if !single.is_finite() {
                        return Err(RANGE);
                    }
                    Ok(Literal::Words(vec![single.to_bits()]))
                }
                64 => {
                    let bits = value.to_bits();
                    Ok(Literal::Words(vec![bits as u32, (bits >> 32) as u32]))
                }
                _ => Err(RANGE),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_convert_as_naga_converts_pipeline_constants() {
        let int = Scalar::Int {
            width: 32,
            signed: true,
        };
        let uint = Scalar::Int {
            width: 32,
            signed: false,
        };
        let words = |w: &[u32]| Ok(Literal::Words(w.to_vec()));
        assert_eq!(encode(-2.7, int), words(&[(-2i32) as u32]));
        assert_eq!(encode(2.7, uint), words(&[2]));
        assert_eq!(encode(-1.0, uint), Err("is out of the range of"));
        assert_eq!(encode(2f64.powi(31), int), Err("is out of the range of"));
        assert_eq!(
            encode(f64::NAN, int),
            Err("is not finite, which is required for")
        );
        let short = Scalar::Int {
            width: 16,
            signed: true,
        };
        assert_eq!(encode(-1.0, short), words(&[u32::MAX]));
        assert_eq!(encode(40000.0, short), Err("is out of the range of"));
        let long = Scalar::Int {
            width: 64,
            signed: false,
        };
        assert_eq!(encode(2f64.powi(40) + 3.0, long), words(&[3, 1 << 8]));
        assert_eq!(
            encode(1.5, Scalar::Float { width: 32 }),
            words(&[1.5f32.to_bits()])
        );
        assert_eq!(
            encode(1e39, Scalar::Float { width: 32 }),
            Err("is out of the range of")
        );
        assert_eq!(
            encode(1e5, Scalar::Float { width: 16 }),
            Err("is out of the range of")
        );
        assert_eq!(encode(0.5, Scalar::Float { width: 16 }), words(&[0x3800]));
        let double = 0.1f64.to_bits();
        assert_eq!(
            encode(0.1, Scalar::Float { width: 64 }),
            words(&[double as u32, (double >> 32) as u32])
        );
        assert_eq!(encode(0.0, Scalar::Bool), Ok(Literal::Bool(false)));
        assert_eq!(encode(f64::NAN, Scalar::Bool), Ok(Literal::Bool(false)));
        assert_eq!(encode(-3.0, Scalar::Bool), Ok(Literal::Bool(true)));
    }

    /// A hand-written module: `int COUNT = 4` (SpecId 7), `bool SHARP = false` (SpecId 2),
    /// and an unnamed `float` (SpecId 3) = 1.0.
    fn module() -> Vec<u32> {
        let op = |opcode: u32, operands: &[u32]| {
            let mut words = vec![((operands.len() as u32 + 1) << 16) | opcode];
            words.extend_from_slice(operands);
            words
        };
        let name = |target: u32, text: &str| {
            let mut bytes = text.as_bytes().to_vec();
            bytes.resize((bytes.len() / 4 + 1) * 4, 0);
            let mut operands = vec![target];
            operands.extend(
                bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
            op(OP_NAME, &operands)
        };
        let mut words = vec![0x0723_0203, 0x0001_0000, 0, 20, 0];
        for instruction in [
            name(4, "COUNT"),
            name(6, "SHARP"),
            op(OP_DECORATE, &[4, DECORATION_SPEC_ID, 7]),
            op(OP_DECORATE, &[6, DECORATION_SPEC_ID, 2]),
            op(OP_DECORATE, &[8, DECORATION_SPEC_ID, 3]),
            op(OP_TYPE_INT, &[1, 32, 1]),
            op(OP_TYPE_BOOL, &[2]),
            op(OP_TYPE_FLOAT, &[3, 32]),
            op(OP_SPEC_CONSTANT, &[1, 4, 4]),
            op(OP_SPEC_CONSTANT_FALSE, &[2, 6]),
            op(OP_SPEC_CONSTANT, &[3, 8, 1.0f32.to_bits()]),
        ] {
            words.extend(instruction);
        }
        words
    }

    #[test]
    fn defaults_are_set_by_name_or_id_and_nothing_else_changes() {
        let spirv = module();
        let none = specialize(&spirv, &Constants::new()).expect("no constants");
        assert!(matches!(none, Cow::Borrowed(_)));
        let constants = Constants::from([
            ("COUNT".to_owned(), ConstantValue(9.0)),
            ("SHARP".to_owned(), ConstantValue(1.0)),
            ("3".to_owned(), ConstantValue(0.25)),
        ]);
        let out = specialize(&spirv, &constants).expect("specialized");
        let changed: Vec<(usize, u32, u32)> = spirv
            .iter()
            .zip(out.iter())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(i, (a, b))| (i, *a, *b))
            .collect();
        let len = spirv.len();
        assert_eq!(
            changed,
            vec![
                (len - 8, 4, 9),
                (
                    len - 7,
                    (3 << 16) | OP_SPEC_CONSTANT_FALSE,
                    (3 << 16) | OP_SPEC_CONSTANT_TRUE
                ),
                (len - 1, 1.0f32.to_bits(), 0.25f32.to_bits()),
            ]
        );
        // By id, the same as by name.
        let by_id = Constants::from([("7".to_owned(), ConstantValue(9.0))]);
        let by_name = Constants::from([("COUNT".to_owned(), ConstantValue(9.0))]);
        assert_eq!(
            specialize(&spirv, &by_id).expect("by id"),
            specialize(&spirv, &by_name).expect("by name")
        );
    }

    #[test]
    fn unknown_constants_and_unfit_values_are_errors_naming_them() {
        let spirv = module();
        let e = specialize(
            &spirv,
            &Constants::from([("RADIUS".to_owned(), ConstantValue(1.0))]),
        )
        .unwrap_err();
        assert_eq!(e.phase, CompilePhase::Constants);
        assert_eq!(
            e.message,
            "the manifest sets specialization constant `RADIUS`, which this shader does not declare (declared: `COUNT` (constant_id 7), `SHARP` (constant_id 2), constant_id 3)"
        );
        let e = specialize(
            &spirv,
            &Constants::from([("COUNT".to_owned(), ConstantValue(1e10))]),
        )
        .unwrap_err();
        assert_eq!(e.phase, CompilePhase::Constants);
        assert_eq!(
            e.message,
            "specialization constant `COUNT` (constant_id 7): the manifest's value 10000000000 is out of the range of i32"
        );
        let broken = &spirv[..spirv.len() - 1];
        let e = specialize(
            broken,
            &Constants::from([("COUNT".to_owned(), ConstantValue(1.0))]),
        )
        .unwrap_err();
        assert_eq!(e.phase, CompilePhase::Parse, "{e}");
    }
}
