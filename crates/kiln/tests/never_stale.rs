//! Regression tests of issue 8: no edit of a source or of the manifest, and no change made to
//! the outputs behind kiln's back, makes a build serve an old artifact. Each compares an
//! incremental build, byte for byte, with a clean build of the same project into new
//! directories.

use kiln::pipeline::{BuildOptions, Project};
use kiln_test_support::{LiveProject, TempProject};
use std::path::PathBuf;

const MANIFEST: &str = r#"
[project]
targets = ["spirv", "wgsl"]

[[shader]]
name = "Fill"
source = "fill.wgsl"
axes = [["_", "FOG"]]
defines = { Q = 1 }

[shader.passes.Main]
stage = "compute"
entry = "main"

[shader.passes.Alt]
stage = "compute"
entry = "alt"
source = "alt.wgsl"
"#;

const FILL: &str = r#"#include "inc/consts.wgsl"
@group(0) @binding(0) var<storage, read_write> data: array<f32>;

@compute @workgroup_size(1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    var v: f32 = K;
#if Q > 1
    v = v * 3.0;
#endif
#ifdef FOG
    v = v + 0.5;
#endif
    data[id.x] = v;
}

@compute @workgroup_size(1)
fn other(@builtin(global_invocation_id) id: vec3<u32>) {
    data[id.x] = K + 7.0;
}

@fragment
fn frag() -> @location(0) vec4<f32> {
    return vec4<f32>(K);
}
"#;

const ALT: &str = r#"#include "inc/consts.wgsl"
@group(0) @binding(0) var<storage, read_write> data: array<f32>;

@compute @workgroup_size(1)
fn alt(@builtin(global_invocation_id) id: vec3<u32>) {
    data[id.x] = K * 2.0;
}

@compute @workgroup_size(1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    data[id.x] = K * 5.0;
}
"#;

const CONSTS: &str = "#pragma once\nconst K: f32 = 1.5;\n";

/// The project, with a [`Project`] kept open as `kiln watch` keeps it.
fn fixture() -> LiveProject {
    TempProject::from_files([
        ("kiln.toml", MANIFEST),
        ("fill.wgsl", FILL),
        ("alt.wgsl", ALT),
        ("inc/consts.wgsl", CONSTS),
    ])
    .with_options(|o| o.keep_failed_outputs = true)
    .live()
}

#[test]
fn manifest_edits_never_serve_old_artifacts() {
    let edits: [(&str, &str, &str); 5] = [
        ("defines", "defines = { Q = 1 }", "defines = { Q = 2 }"),
        ("entry", "entry = \"main\"", "entry = \"other\""),
        (
            "stage and entry",
            "stage = \"compute\"\nentry = \"other\"",
            "stage = \"fragment\"\nentry = \"frag\"",
        ),
        (
            "sources swapped",
            "entry = \"alt\"\nsource = \"alt.wgsl\"",
            "entry = \"alt\"\nsource = \"alt.wgsl\"\n\n[shader.passes.Third]\nstage = \"compute\"\nentry = \"main\"\nsource = \"alt.wgsl\"",
        ),
        ("targets", "targets = [\"spirv\", \"wgsl\"]", "targets = [\"wgsl\", \"msl\"]"),
    ];
    let mut f = fixture();
    f.build_ok();
    f.assert_same_as_clean("first build");
    for (what, from, to) in edits {
        f.edit_manifest(from, to);
        let report = f.build_ok();
        f.assert_same_as_clean(what);
        assert!(report.manifest_changed);
    }
}

#[test]
fn swapping_the_sources_of_two_passes_swaps_their_outputs() {
    let mut f = fixture();
    f.build_ok();
    let main_before = std::fs::read(f.path("out/Fill/Main/_.wgsl")).unwrap();
    // Main reads fill.wgsl (the shader's source), Alt reads alt.wgsl. Swapped: Main reads
    // alt.wgsl's `main`, Alt reads fill.wgsl's `other` (fill.wgsl has no `alt`).
    f.edit_manifest(
        "entry = \"main\"\n",
        "entry = \"main\"\nsource = \"alt.wgsl\"\n",
    );
    f.edit_manifest(
        "entry = \"alt\"\nsource = \"alt.wgsl\"",
        "entry = \"other\"\nsource = \"fill.wgsl\"",
    );
    f.build_ok();
    f.assert_same_as_clean("swap");
    assert_ne!(
        std::fs::read(f.path("out/Fill/Main/_.wgsl")).unwrap(),
        main_before
    );
}

#[test]
fn a_same_size_edit_of_an_output_is_restored_by_the_next_build() {
    let mut f = fixture();
    f.build_ok();
    let path = f.path("out/Fill/Main/FOG.spv");
    let good = std::fs::read(&path).unwrap();
    let mut bad = good.clone();
    bad[good.len() / 2] ^= 0x5a;
    // Right after the build (the racy case) and well after it.
    for wait in [0, 150] {
        std::thread::sleep(std::time::Duration::from_millis(wait));
        std::fs::write(&path, &bad).unwrap();
        let mut fresh = Project::open(&BuildOptions {
            manifest: f.path("kiln.toml"),
            ..BuildOptions::default()
        })
        .unwrap();
        let report = fresh.build(&|_| {}).unwrap();
        assert_eq!(report.outputs_written, 1, "wait {wait}: {report:?}");
        assert_eq!(report.compiled, 0);
        assert_eq!(std::fs::read(&path).unwrap(), good, "wait {wait}");
    }
    // And under watch: the event says which file; the project sees it differs.
    std::fs::write(&path, &bad).unwrap();
    assert!(f
        .project
        .outputs_changed(&[PathBuf::from("Fill/Main/FOG.spv")]));
    let report = f.build_ok();
    assert_eq!(report.outputs_written, 1, "{report:?}");
    assert_eq!(std::fs::read(&path).unwrap(), good);
}

#[test]
fn kilns_own_writes_and_removals_are_not_changes() {
    let mut f = fixture();
    f.build_ok();
    let out = f.path("out");
    let mut written: Vec<PathBuf> = f.tree().keys().map(PathBuf::from).collect();
    written.push(PathBuf::from(".kiln-stat"));
    assert!(!f.project.outputs_changed(&written));
    assert!(!f.project.is_dirty());
    // An axis removed: kiln removes those outputs itself, then sees the events.
    f.edit_manifest("axes = [[\"_\", \"FOG\"]]", "axes = [[\"_\"]]");
    let report = f.build_ok();
    assert_eq!(report.outputs_removed, 4);
    assert!(!f
        .project
        .outputs_changed(&[PathBuf::from("Fill/Main/FOG.spv"), PathBuf::from("Fill")]));
    assert!(!f.project.is_dirty());
    // Someone else removing a directory of outputs is a change.
    std::fs::remove_dir_all(out.join("Fill/Alt")).unwrap();
    assert!(f.project.outputs_changed(&[PathBuf::from("Fill/Alt")]));
    f.build_ok();
    f.assert_same_as_clean("restored");
}

#[test]
fn a_directory_moved_out_and_back_is_read_again() {
    let mut f = fixture();
    f.build_ok();
    let away = tempfile::tempdir().unwrap();
    std::fs::rename(f.path("inc"), away.path().join("inc")).unwrap();
    // The watcher reports the directory, not each file in it.
    let changed = f.project.refresh_files(&[f.path("inc")]);
    assert_eq!(changed, [PathBuf::from("inc/consts.wgsl")]);
    let report = f.project.build(&|_| {}).unwrap();
    assert_eq!(report.failed, 4, "every variant includes it: {report:?}");
    std::fs::rename(away.path().join("inc"), f.path("inc")).unwrap();
    let changed = f.project.refresh_files(&[f.path("inc")]);
    assert_eq!(changed, [PathBuf::from("inc/consts.wgsl")]);
    let report = f.build_ok();
    assert_eq!(report.compiled, 0, "all from the store: {report:?}");
    f.assert_same_as_clean("moved back");
}

#[test]
fn a_source_edit_made_while_the_manifest_is_broken_is_built_once_it_is_fixed() {
    let mut f = fixture();
    f.build_ok();
    // One batch: the include changes and the manifest breaks. `kiln watch` re-reads the
    // files, then fails to reload the manifest, and builds nothing.
    let consts = f.path("inc/consts.wgsl");
    std::fs::write(&consts, CONSTS.replace("1.5", "2.5")).unwrap();
    f.project.refresh_files(std::slice::from_ref(&consts));
    let manifest = f.path("kiln.toml");
    std::fs::write(&manifest, "[project\n").unwrap();
    assert!(f.project.reload_manifest().is_err());
    // Fixed: the pending edit is built.
    std::fs::write(&manifest, MANIFEST).unwrap();
    assert!(!f.project.reload_manifest().unwrap());
    assert!(f.project.is_dirty());
    let report = f.build_ok();
    // Alt has no FOG code: its two variants share a text and compile once.
    assert_eq!((report.compiled, report.deduplicated), (3, 1), "{report:?}");
    f.assert_same_as_clean("after the fix");
}

#[test]
fn input_stamps_are_those_of_what_was_built() {
    let mut f = fixture();
    f.build_ok();
    f.edit_manifest("defines = { Q = 1 }", "defines = { Q = 2 }");
    f.build_ok();
    // A new process trusts nothing that was built from other inputs: it writes nothing.
    let mut fresh = Project::open(&BuildOptions {
        manifest: f.path("kiln.toml"),
        ..BuildOptions::default()
    })
    .unwrap();
    let report = fresh.build(&|_| {}).unwrap();
    assert_eq!(report.outputs_written, 0, "{report:?}");
    assert_eq!(report.compiled, 0, "{report:?}");
    f.assert_same_as_clean("stamps");
}

#[test]
fn an_output_path_occupied_by_a_directory_fails_that_variant_alone() {
    let f = fixture();
    // A directory (with a file in it) where Fill/Main[FOG]'s SPIR-V goes.
    std::fs::create_dir_all(f.path("out/Fill/Main/FOG.spv/keep")).unwrap();
    let mut fresh = Project::open(&BuildOptions {
        manifest: f.path("kiln.toml"),
        ..BuildOptions::default()
    })
    .unwrap();
    let report = fresh.build(&|_| {}).unwrap();
    assert_eq!(report.failed, 1, "{report:?}");
    let d = &report.diagnostics[0];
    assert!(d.message.contains("FOG.spv"), "{d}");
    assert!(
        d.variant.as_deref().unwrap().starts_with("Fill/Main[FOG]"),
        "{d}"
    );
    // Every other output and the index were written; the directory was left alone.
    assert!(f.path("out/Fill/Main/_.spv").is_file());
    assert!(f.path("out/Fill/Alt/FOG.spv").is_file());
    assert!(f.path("out/Fill/Main/FOG.spv/keep").is_dir());
    let index = kiln::pipeline::Index::read(&f.path("out"));
    let paths: Vec<&str> = index.entries.iter().map(|e| &*e.path).collect();
    assert!(paths.contains(&"Fill/Main/_.spv"), "{paths:?}");
    assert!(!paths.contains(&"Fill/Main/FOG.spv"), "{paths:?}");
    // The index says which pairs failed and why (the variant could not be written).
    assert_eq!(index.failures.len(), 2, "{:?}", index.failures);
    assert!(index.failures.iter().all(|f| f.message.contains("FOG.spv")));
}

#[test]
fn raising_max_source_bytes_reads_a_refused_file_again() {
    let mut f = fixture();
    f.build_ok();
    // A cap below fill.wgsl's size: its variants fail with the cap named.
    f.edit_manifest("[project]\n", "[project]\nmax_source_bytes = 100\n");
    let report = f.project.build(&|_| {}).unwrap();
    assert!(report.failed > 0, "{report:?}");
    assert!(
        report
            .diagnostics
            .iter()
            .any(|d| d.message.contains("max_source_bytes")),
        "{:?}",
        report.diagnostics
    );
    // Raised: the same process reads the files again, without any file event.
    f.edit_manifest("max_source_bytes = 100", "max_source_bytes = 100000");
    f.build_ok();
    f.assert_same_as_clean("cap raised");
}
