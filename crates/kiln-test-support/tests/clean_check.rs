//! `assert_same_as_clean` is what many integration tests rest on: it must fail when the
//! outputs differ from a clean build's, not only pass when they agree.

use kiln_test_support::TempProject;

const PROJECT: &str = r#"
//- /kiln.toml
[project]
targets = ["wgsl"]

[[shader]]
name = "Flat"
source = "flat.wgsl"
axes = [["_", "RED"]]

[shader.passes.Forward]
stage = "fragment"
entry = "main"
//- /flat.wgsl
@fragment fn main() -> @location(0) vec4<f32> {
#ifdef RED
    return vec4<f32>(1.0, 0.0, 0.0, 1.0);
#else
    return vec4<f32>(0.5);
#endif
}
"#;

fn built() -> TempProject {
    let project = TempProject::new(PROJECT);
    let report = project.build();
    assert_eq!(
        (report.compiled, report.failed),
        (2, 0),
        "{:?}",
        report.diagnostics
    );
    project
}

#[test]
fn a_built_project_is_the_same_as_a_clean_build() {
    built().assert_same_as_clean("after one build");
}

#[test]
#[should_panic(expected = "differs: Flat/Forward/RED.wgsl")]
fn an_output_edited_behind_kilns_back_is_caught() {
    let project = built();
    project.write("out/Flat/Forward/RED.wgsl", "// not what kiln wrote\n");
    project.assert_same_as_clean("after an edit of an output");
}

#[test]
#[should_panic(expected = "only here: Flat/Forward/stray.wgsl")]
fn a_file_a_clean_build_lacks_is_caught() {
    let project = built();
    project.write("out/Flat/Forward/stray.wgsl", "// stray\n");
    project.assert_same_as_clean("with a stray file");
}
