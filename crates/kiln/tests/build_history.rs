//! The build history (`pipeline::history`): every `Project::build` that writes outputs
//! records itself, also in a project kept open across builds as `kiln watch` keeps it, and
//! `Project::explain` names what changed between two of them.

use kiln::pipeline::history::read_history;
use kiln::pipeline::ChangeKind;
use kiln_test_support::TempProject;

const FIXTURE: &str = r#"
//- /kiln.toml
[project]
targets = ["spirv"]

[[shader]]
name = "Lit"
source = "shaders/lit.wgsl"
axes = [["_", "FOG"], ["_", "UNUSED"]]
constants = { EXPOSURE = 1.5 }

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"
//- /shaders/lit.wgsl
#include "include/common.wgsl"

override EXPOSURE: f32 = 1.0;

@fragment
fn fs_main() -> @location(0) vec4<f32> {
    var color = base_color() * EXPOSURE;
#ifdef FOG
    color = color * 0.5;
#endif
    return color;
}
//- /shaders/include/common.wgsl
fn base_color() -> vec4<f32> {
    return vec4<f32>(1.0, 0.5, 0.25, 1.0);
}
"#;

#[test]
fn every_build_of_a_project_kept_open_is_recorded_with_its_counts() {
    let mut live = TempProject::new(FIXTURE).live();
    let cold = live.build_ok();
    live.edit("shaders/include/common.wgsl", "0.25", "0.75");
    let edited = live.build_ok();
    let noop = live.build_ok();

    let history = read_history(live.project.cache_dir()).unwrap();
    assert!(history.warnings.is_empty(), "{:?}", history.warnings);
    let records = &history.records;
    assert_eq!(records.len(), 3);
    for (record, report) in records.iter().zip([&cold, &edited, &noop]) {
        assert_eq!(record.counts.variants, report.variants);
        assert_eq!(record.counts.compiled, report.compiled);
        assert_eq!(record.counts.cached, report.cached);
        assert_eq!(record.counts.deduplicated, report.deduplicated);
        assert_eq!(record.counts.outputs_written, report.outputs_written);
    }
    // UNUSED changes no text: two of the four variants compiled, two deduplicated.
    let pass = &records[0].shaders[0].passes[0];
    assert_eq!(
        (
            pass.counts.compiled,
            pass.counts.deduplicated,
            pass.counts.cached
        ),
        (2, 2, 0)
    );
    assert!(pass.counts.compile_us > 0);
    assert_eq!(records[2].shaders[0].passes[0].counts.cached, 4);
    assert_eq!(records[2].shaders[0].passes[0].counts.compile_us, 0);
    let outputs = &records[2].shaders[0].outputs;
    assert_eq!((outputs.len(), outputs[0].outputs), (1, 4));
    assert_eq!(records[0].shaders[0].axes, [["_", "FOG"], ["_", "UNUSED"]]);
}

#[test]
fn a_constant_edit_is_the_one_change_explain_names() {
    let mut live = TempProject::new(FIXTURE).live();
    live.build_ok();
    live.edit_manifest("EXPOSURE = 1.5", "EXPOSURE = 2.5");
    live.build_ok();
    let explained = live.project.explain("Lit/Forward/FOG+UNUSED").unwrap();
    let rebuild = explained.last_rebuild.unwrap();
    assert_eq!(rebuild.builds_ago, 0);
    assert_eq!(rebuild.changes.len(), 1, "{:?}", rebuild.changes);
    let change = &rebuild.changes[0];
    assert_eq!(change.kind, ChangeKind::Constant);
    assert_eq!(change.name, "EXPOSURE");
    assert_eq!(
        (change.before.as_deref(), change.after.as_deref()),
        (Some("1.5"), Some("2.5"))
    );
    assert_eq!(explained.constants["EXPOSURE"], "2.5");
}
