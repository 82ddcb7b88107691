//! A (variant, target) pair fails alone, also under `kiln watch`'s rule: the failed pair's
//! last good output is kept and marked stale, while the variant's other targets are rebuilt
//! and current. (`kiln build`'s rule, removal, is tested end to end in kiln-cli.)

use kiln::pipeline::{BuildOptions, Index, Project};
use std::path::PathBuf;

const MANIFEST: &str = r#"
[project]
targets = ["spirv", "msl"]

[[shader]]
name = "Basis"
source = "basis.vert"
compiler = "naga"

[shader.passes.Main]
stage = "vertex"
entry = "main"
"#;

const BASIS: &str = "#version 450
layout(location = 0) in vec3 a_x;
layout(location = 1) in vec3 a_y;
void main() {
    mat3 basis = mat3(a_x, a_y, cross(a_x, a_y));
    basis = transpose(basis);
    gl_Position = vec4(basis * a_x, 1.0);
}
";

#[test]
fn under_watch_a_failed_pair_keeps_its_last_output_marked_stale_and_the_others_move_on() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kiln.toml"), MANIFEST).unwrap();
    let source: PathBuf = dir.path().join("basis.vert");
    std::fs::write(&source, BASIS).unwrap();
    let mut project = Project::open(&BuildOptions {
        manifest: dir.path().join("kiln.toml"),
        jobs: Some(1),
        keep_failed_outputs: true,
        ..BuildOptions::default()
    })
    .unwrap();
    let out = dir.path().join("out");
    let report = project.build(&|_| {}).unwrap();
    assert_eq!((report.compiled, report.failed), (1, 0));
    let good_msl = std::fs::read(out.join("Basis/Main/_.metal")).unwrap();
    let good_spirv = std::fs::read(out.join("Basis/Main/_.spv")).unwrap();

    std::fs::write(&source, BASIS.replace("transpose(basis)", "inverse(basis)")).unwrap();
    project.refresh_files(std::slice::from_ref(&source));
    let report = project.build(&|_| {}).unwrap();
    assert_eq!(report.failed, 1, "{report:?}");
    assert_eq!(report.failed_outputs, 1, "{report:?}");
    let index = Index::read(&out);
    let entry = |target: &str| {
        index
            .entries
            .iter()
            .find(|e| &*e.target == target)
            .unwrap_or_else(|| panic!("no {target} entry: {index:?}"))
            .clone()
    };
    let (msl, spirv) = (entry("msl"), entry("spirv"));
    assert!(
        msl.stale,
        "the failed pair's last good output is marked stale"
    );
    assert!(msl.failed_revision.is_some());
    assert_eq!(std::fs::read(out.join(&*msl.path)).unwrap(), good_msl);
    assert!(!spirv.stale, "the SPIR-V pair built and is current");
    let new_spirv = std::fs::read(out.join(&*spirv.path)).unwrap();
    assert_ne!(new_spirv, good_spirv, "SPIR-V holds the edited code");
    assert_eq!(index.failures.len(), 1);
    assert_eq!(index.failures[0].target, "msl");
    assert_eq!(index.failures[0].line, Some(6));

    // Fixed: the pair is current again and the index lists no failure.
    std::fs::write(&source, BASIS.replace("transpose(basis)", "basis * 2.0")).unwrap();
    project.refresh_files(std::slice::from_ref(&source));
    let report = project.build(&|_| {}).unwrap();
    assert_eq!(report.failed, 0, "{report:?}");
    let index = Index::read(&out);
    assert!(index.entries.iter().all(|e| !e.stale), "{index:?}");
    assert!(index.failures.is_empty());
    assert_ne!(
        std::fs::read(out.join("Basis/Main/_.metal")).unwrap(),
        good_msl
    );
}
