//! SPIR-V to any naga back end: naga's SPIR-V front end, naga's validator, then the same
//! emission as every naga-compiled artifact ([`TargetConfig::emit`]).

use super::super::{error_chain, ValidatedModule};
use super::{pick_entry, translator_error, Translator};
use crate::compile::{CompileError, CompilePhase, Stage, TargetConfig};

/// Parses `spirv` with naga, validates it against the target's capabilities and emits
/// `entry` for `target`.
pub(super) fn translate(
    spirv: &[u32],
    entry: &str,
    stage: Option<Stage>,
    target: &TargetConfig,
) -> Result<Vec<u8>, CompileError> {
    let error =
        |phase, what: String| translator_error(phase, Translator::Naga, target.target(), what);
    let options = naga::front::spv::Options {
        // The outputs keep the SPIR-V's clip-space convention (as wgpu reads SPIR-V).
        adjust_coordinate_space: false,
        // Capabilities the front end does not know are left to the validator and the back
        // ends, which reject what they cannot express (as naga's CLI does).
        strict_capabilities: false,
        block_ctx_dump_prefix: None,
    };
    let module = naga::front::spv::Frontend::new(spirv.iter().copied(), &options)
        .parse()
        .map_err(|e| error(CompilePhase::Parse, error_chain(&e)))?;
    let entries: Vec<_> = module
        .entry_points
        .iter()
        .map(|ep| {
            let kiln_stage = kiln_stage(ep.stage);
            let matches = stage.is_none_or(|s| Some(s) == kiln_stage);
            (
                ep.name.clone(),
                format!("{:?}", ep.stage),
                kiln_stage,
                matches,
            )
        })
        .collect();
    let found = pick_entry(&entries, entry, stage)?.ok_or_else(|| {
        error(
            CompilePhase::Emit,
            format!("kiln has no stage for naga's entry point `{entry}`"),
        )
    })?;
    let info =
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), target.capabilities())
            .validate(&module)
            .map_err(|e| error(CompilePhase::Validate, error_chain(e.as_inner())))?;
    let validated = ValidatedModule {
        module,
        info,
        stage: found,
        entry: entry.to_owned(),
    };
    target.emit(&validated)
}

/// kiln's stage for naga's, when kiln has one.
fn kiln_stage(stage: naga::ShaderStage) -> Option<Stage> {
    match stage {
        naga::ShaderStage::Vertex => Some(Stage::Vertex),
        naga::ShaderStage::Fragment => Some(Stage::Fragment),
        naga::ShaderStage::Compute => Some(Stage::Compute),
        _ => None,
    }
}
