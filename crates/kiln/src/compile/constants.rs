//! Specialization constants (GLSL `layout(constant_id = N) const`, WGSL `override`): their
//! values for one compile, and their replacement by those values before a back end runs.
//!
//! naga 30's back ends write no specialization constants (its SPIR-V writer refuses any
//! `Override` expression, "overrides should not be present at this stage"), so every
//! target, SPIR-V included, gets the module with each override replaced by its value, the
//! way naga's own pipeline-constant processing does (`process_overrides`): the manifest's
//! value (by name or by `constant_id`), else the shader's declared default. A constant with
//! neither is an error naming it; so is a manifest constant the shader does not declare.

use super::{span_location, CompileError, CompilePhase, Stage};
use std::collections::BTreeMap;

/// A constant's value as the manifest gives it. naga takes every pipeline constant as an
/// `f64` and converts it to the constant's type (booleans: non-zero is true).
#[derive(Clone, Copy, Debug)]
pub struct ConstantValue(pub f64);

impl PartialEq for ConstantValue {
    fn eq(&self, other: &Self) -> bool {
        // Bitwise, so that equality agrees with the identity's hash of the value.
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for ConstantValue {}

impl std::hash::Hash for ConstantValue {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

impl std::fmt::Display for ConstantValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The constants of one compile: name or `constant_id` (as decimal text) -> value.
pub type Constants = BTreeMap<String, ConstantValue>;

/// How naga names an override in its pipeline-constant table: its id when it has one, else
/// its name.
fn naga_key(o: &naga::Override) -> Option<String> {
    o.id.map(|id| id.to_string()).or_else(|| o.name.clone())
}

fn describe(o: &naga::Override) -> String {
    match (&o.name, o.id) {
        (Some(name), Some(id)) => format!("`{name}` (constant_id {id})"),
        (Some(name), None) => format!("`{name}`"),
        (None, Some(id)) => format!("constant_id {id}"),
        (None, None) => "an unnamed constant".to_owned(),
    }
}

/// The manifest's constants as naga's table, each matched to a declared override by name or
/// id. A constant the module does not declare is an error listing those it does.
pub(super) fn pipeline_constants(
    module: &naga::Module,
    constants: &Constants,
) -> Result<naga::back::PipelineConstants, CompileError> {
    let mut table = naga::back::PipelineConstants::default();
    for (key, value) in constants {
        let found = module.overrides.iter().find(|(_, o)| {
            o.name.as_deref() == Some(key.as_str())
                || o.id.map(|id| id.to_string()) == Some(key.clone())
        });
        match found.and_then(|(_, o)| naga_key(o)) {
            Some(naga_key) => {
                table.insert(naga_key, value.0);
            }
            None => {
                let declared: Vec<String> =
                    module.overrides.iter().map(|(_, o)| describe(o)).collect();
                let declared = if declared.is_empty() {
                    "none".to_owned()
                } else {
                    declared.join(", ")
                };
                return Err(CompileError::new(
                    CompilePhase::Constants,
                    format!(
                        "the manifest sets specialization constant `{key}`, which this shader does not declare (declared: {declared})"
                    ),
                    None,
                ));
            }
        }
    }
    Ok(table)
}

/// Replaces every override reachable from the entry point with its value (see the module
/// documentation). A module without overrides is returned as it is: naga would otherwise
/// also strip its other entry points, which changes the bytes of every target.
pub(super) fn resolve(
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    stage: Stage,
    entry: &str,
    table: &naga::back::PipelineConstants,
    text: &str,
) -> Result<Option<(naga::Module, naga::valid::ModuleInfo)>, CompileError> {
    use naga::back::pipeline_constants::{process_overrides, PipelineConstantError as E};
    if module.overrides.is_empty() {
        return Ok(None);
    }
    match process_overrides(module, info, Some((stage.to_naga(), entry)), table) {
        Ok((module, info)) => Ok(Some((module.into_owned(), info.into_owned()))),
        Err(error) => {
            let by_key = |key: &str| {
                module
                    .overrides
                    .iter()
                    .find(|(_, o)| naga_key(o).as_deref() == Some(key))
            };
            Err(match &error {
                E::MissingValue(key) => {
                    let (what, location) = match by_key(key) {
                        Some((handle, o)) => (
                            describe(o),
                            span_location(module.overrides.get_span(handle), text),
                        ),
                        None => (format!("`{key}`"), None),
                    };
                    CompileError::new(
                        CompilePhase::Constants,
                        format!(
                            "specialization constant {what} has no value: give it one under `constants` in the manifest or a default in the shader"
                        ),
                        location,
                    )
                }
                E::SrcNeedsToBeFinite | E::DstRangeTooSmall => CompileError::new(
                    CompilePhase::Constants,
                    format!(
                        "a specialization constant's manifest value does not fit its type: {error}"
                    ),
                    None,
                ),
                other => CompileError::new(
                    CompilePhase::Validate,
                    format!(
                        "after specialization constants were applied: {}",
                        super::error_chain(other)
                    ),
                    None,
                ),
            })
        }
    }
}
