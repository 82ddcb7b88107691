//! Manifests the section modules' tests start from, and the parse they all go through.

use super::{Manifest, ManifestError};
use std::path::Path;

pub(super) fn parse(text: &str) -> Result<Manifest, ManifestError> {
    Manifest::parse(Path::new("kiln.toml"), Path::new("."), text)
}

pub(super) const LIT: &str = r#"
[project]
targets = ["spirv", { name = "msl", version = "2.0" }]

[[shader]]
name = "Lit"
source = "shaders/lit.wgsl"
axes = [["_", "FOG"], ["_", "SKIN"], ["LIGHTS_1", "LIGHTS_4"]]
variants = [["FOG", "FOG"], ["SKIN", "LIGHTS_1", "FOG"]]

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"

[shader.passes.Depth]
stage = "vertex"
entry = "vs_main"
"#;

pub(super) fn one_pass(shader_extra: &str, source: &str, pass_extra: &str) -> String {
    format!(
        "[project]\ntargets = [\"spirv\"]\n\n[[shader]]\nname = \"S\"\nsource = \"{source}\"\n{shader_extra}\n\n[shader.passes.P]\nstage = \"fragment\"\nentry = \"main\"\n{pass_extra}\n"
    )
}

fn axes(count: usize, per_axis: usize) -> String {
    let axes: Vec<String> = (0..count)
        .map(|a| {
            let words: Vec<String> = (0..per_axis).map(|w| format!("\"K{a}_{w}\"")).collect();
            format!("[{}]", words.join(", "))
        })
        .collect();
    format!("axes = [{}]", axes.join(", "))
}

pub(super) fn with_axes(count: usize, per_axis: usize) -> String {
    LIT.replace(
        r#"axes = [["_", "FOG"], ["_", "SKIN"], ["LIGHTS_1", "LIGHTS_4"]]"#,
        &axes(count, per_axis),
    )
    .replace(
        r#"variants = [["FOG", "FOG"], ["SKIN", "LIGHTS_1", "FOG"]]"#,
        "",
    )
}
