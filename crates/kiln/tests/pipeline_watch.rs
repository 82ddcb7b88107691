//! Incremental rebuilds in one process, as `kiln watch` does them: edit files, refresh the
//! project, rebuild, and assert on exactly what the engine and naga did.

use kiln::pipeline::{BuildOptions, BuildReport, Index, Project};
use kiln_test_support::{LiveProject, TempProject};
use std::path::{Path, PathBuf};

const MANIFEST: &str = r#"
[project]
targets = ["spirv", "msl"]

[[shader]]
name = "Lit"
source = "shaders/lit.wgsl"
axes = [["_", "FOG"], ["_", "SKIN"]]

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"

[[shader]]
name = "Sky"
source = "shaders/sky.wgsl"
axes = [["_", "STARS"]]

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"
"#;

const LIT: &str = r#"#include "include/fog.wgsl"
@fragment
fn fs_main() -> @location(0) vec4<f32> {
    var c = vec4<f32>(1.0, 0.5, 0.25, 1.0);
#ifdef SKIN
    c = c * 0.5;
#endif
    return apply_fog(c);
}
"#;

const FOG: &str = r#"// Fog helpers.
fn apply_fog(c: vec4<f32>) -> vec4<f32> {
#ifdef FOG
    return mix(c, vec4<f32>(0.5), 0.25);
#else
    return c;
#endif
}
"#;

const SKY: &str = r#"@fragment
fn fs_main() -> @location(0) vec4<f32> {
#ifdef STARS
    return vec4<f32>(1.0);
#else
    return vec4<f32>(0.0, 0.0, 0.2, 1.0);
#endif
}
"#;

/// The project, with a [`Project`] kept open as `kiln watch` keeps it.
fn fixture(max_memory: Option<u64>) -> LiveProject {
    TempProject::from_files([
        ("kiln.toml", MANIFEST),
        ("shaders/lit.wgsl", LIT),
        ("shaders/include/fog.wgsl", FOG),
        ("shaders/sky.wgsl", SKY),
    ])
    .with_options(|o| {
        o.max_memory = max_memory;
        // As `kiln watch` does.
        o.keep_failed_outputs = true;
    })
    .live()
}

fn recompiled(report: &BuildReport) -> Vec<String> {
    let mut names: Vec<String> = report
        .recompiled
        .iter()
        .map(|r| r.variant.to_string())
        .collect();
    names.sort();
    names
}

fn output(f: &TempProject, relative: &str) -> Vec<u8> {
    std::fs::read(f.out_dir().join(relative)).unwrap()
}

fn assert_exists(path: &Path) {
    assert!(path.exists(), "{} missing", path.display());
}

#[test]
fn editing_an_include_recompiles_only_its_dependents() {
    let mut f = fixture(None);
    let cold = f.build();
    assert_eq!(cold.compiled, 6);
    f.edit("shaders/include/fog.wgsl", "0.25);", "0.5);");
    let report = f.build();
    assert_eq!(
        recompiled(&report),
        ["Lit/Forward[FOG;SKIN]", "Lit/Forward[FOG]"]
    );
    assert_eq!(
        report.changed_files,
        [PathBuf::from("shaders/include/fog.wgsl")]
    );
    assert!(
        report.recompiled[0]
            .reason
            .contains("shaders/include/fog.wgsl changed (included by shaders/lit.wgsl)"),
        "{:?}",
        report.recompiled[0]
    );
    // Lit without FOG did not even preprocess again: the edit is inside `#ifdef FOG`, a
    // block it skips, so its view of fog.wgsl came out equal (nothing to cut off early).
    // Sky was only re-verified.
    assert_eq!(report.early_cutoff, 0, "{report:?}");
    assert!(report.verified >= 2, "{report:?}");
    assert_eq!(report.outputs_written, 2 * 2);
    // The new revision invalidated Lit's 4 entries; all 4 came back at the new revision
    // (2 compiled, 2 found by content), none refused as stale.
    let stats = f.project.cache_stats();
    assert_eq!(stats.invalidated, 4, "{stats:?}");
    assert_eq!(stats.stale_discarded, 0, "{stats:?}");
}

#[test]
fn an_edit_inside_a_block_a_variant_skips_leaves_the_variant_alone_unless_lines_move() {
    let mut f = fixture(None);
    f.build();
    // `#else` of `#ifdef FOG`: only the variants without FOG use it.
    f.edit("shaders/include/fog.wgsl", "return c;", "return c * 0.75;");
    let report = f.build();
    assert_eq!(recompiled(&report), ["Lit/Forward[SKIN]", "Lit/Forward[]"]);
    assert_eq!(report.early_cutoff, 0, "{report:?}");

    // A line added inside the FOG block moves every later line: the variants without FOG
    // preprocess again (their line maps changed), get the same text, and stop there.
    f.edit(
        "shaders/include/fog.wgsl",
        "    return mix(",
        "    let unused = 1.0;\n    return mix(",
    );
    let report = f.build();
    assert_eq!(
        recompiled(&report),
        ["Lit/Forward[FOG;SKIN]", "Lit/Forward[FOG]"]
    );
    assert_eq!(report.early_cutoff, 2, "{report:?}");

    // Back to the original text: every output is what a clean build writes.
    f.edit("shaders/include/fog.wgsl", "    let unused = 1.0;\n", "");
    f.edit("shaders/include/fog.wgsl", "return c * 0.75;", "return c;");
    let report = f.build();
    assert_eq!(
        report.compiled, 0,
        "the store holds every earlier text: {report:?}"
    );
    f.assert_same_as_clean("the edits undone");
}

#[test]
fn editing_a_comment_recompiles_nothing() {
    let mut f = fixture(None);
    f.build();
    f.edit(
        "shaders/include/fog.wgsl",
        "// Fog helpers.",
        "// Fog.\n// More words.\n",
    );
    let report = f.build();
    assert_eq!(report.compiled, 0);
    assert!(report.recompiled.is_empty());
    assert_eq!(report.outputs_written, 0);
    assert_eq!(
        report.early_cutoff, 4,
        "every Lit variant cut off: {report:?}"
    );
}

#[test]
fn a_touch_without_change_is_not_a_rebuild() {
    let mut f = fixture(None);
    f.build();
    let path = f.path("shaders/lit.wgsl");
    let text = std::fs::read(&path).unwrap();
    std::fs::write(&path, text).unwrap();
    assert!(f.project.refresh_files(&[path]).is_empty());
    assert!(!f.project.is_dirty());
}

#[test]
fn editing_inside_ifdef_skin_recompiles_only_skin_variants() {
    let mut f = fixture(None);
    f.build();
    f.edit("shaders/lit.wgsl", "c = c * 0.5;", "c = c * 0.75;");
    let report = f.build();
    assert_eq!(
        recompiled(&report),
        ["Lit/Forward[FOG;SKIN]", "Lit/Forward[SKIN]"]
    );
}

#[test]
fn break_then_fix() {
    let mut f = fixture(None);
    f.build();
    let good = output(&f, "Sky/Forward/STARS.spv");
    f.edit(
        "shaders/sky.wgsl",
        "return vec4<f32>(1.0);",
        "return vec4<f32>(1.0) +;",
    );
    let broken = f.build();
    assert_eq!(broken.failed, 1);
    let d = &broken.diagnostics[0];
    let at = d.location.as_ref().unwrap();
    assert_eq!(at.file, PathBuf::from("shaders/sky.wgsl"));
    assert_eq!(at.line, 4);
    assert!(
        d.variant
            .as_deref()
            .unwrap()
            .starts_with("Sky/Forward[STARS]"),
        "{d}"
    );
    // The last good output stays for hot reload, and its index entry says it is stale.
    assert_eq!(output(&f, "Sky/Forward/STARS.spv"), good);
    let index: Index =
        serde_json::from_slice(&std::fs::read(f.path("out/index.json")).unwrap()).unwrap();
    let entry = index
        .entries
        .iter()
        .find(|e| &*e.path == "Sky/Forward/STARS.spv")
        .unwrap();
    assert!(entry.stale, "{entry:?}");
    assert!(entry.failed_revision.is_some());
    assert_ne!(
        entry.failed_revision.as_deref(),
        Some(&*entry.variant.revision)
    );
    assert!(index
        .entries
        .iter()
        .filter(|e| e.stale)
        .all(|e| &*e.variant.shader == "Sky"));

    f.edit(
        "shaders/sky.wgsl",
        "return vec4<f32>(1.0) +;",
        "return vec4<f32>(1.0);",
    );
    let fixed = f.build();
    assert_eq!(fixed.failed, 0);
    // The fixed text is the old one: its artifact comes from the store.
    assert_eq!(fixed.compiled, 0, "{fixed:?}");
    assert_eq!(output(&f, "Sky/Forward/STARS.spv"), good);
    let index = std::fs::read_to_string(f.path("out/index.json")).unwrap();
    assert!(!index.contains("stale"), "{index}");
}

#[test]
fn without_keep_failed_outputs_a_failed_variant_has_no_outputs_like_a_clean_build() {
    let mut f = fixture(None);
    f.build();
    let options = BuildOptions {
        manifest: f.path("kiln.toml"),
        ..BuildOptions::default()
    };
    f.edit(
        "shaders/sky.wgsl",
        "return vec4<f32>(1.0);",
        "return vec4<f32>(1.0) +;",
    );
    // As `kiln build` does, in a new process.
    let broken = Project::open(&options).unwrap().build(&|_| {}).unwrap();
    assert_eq!(broken.failed, 1);
    assert!(!f.path("out/Sky/Forward/STARS.spv").exists());
    let index = std::fs::read_to_string(f.path("out/index.json")).unwrap();
    assert!(!index.contains("Sky/Forward/STARS"), "{index}");
    assert!(index.contains("Lit/Forward/FOG.spv"), "{index}");
}

#[test]
fn a_deleted_source_reports_errors_and_recovers() {
    let mut f = fixture(None);
    f.build();
    let text = f.read("shaders/include/fog.wgsl");
    f.remove("shaders/include/fog.wgsl");
    let report = f.build();
    assert_eq!(report.failed, 4, "{report:?}");
    assert_exists(&f.path("out/Lit/Forward/FOG.spv"));
    f.write("shaders/include/fog.wgsl", text);
    let report = f.build();
    assert_eq!(report.failed, 0);
    assert_eq!(report.compiled, 0);
}

#[test]
fn a_manifest_edit_adding_an_axis_compiles_only_what_is_new() {
    let mut f = fixture(None);
    f.build();
    let (one_axis, two_axes) = (
        r#"axes = [["_", "STARS"]]"#,
        r#"axes = [["_", "STARS"], ["_", "MOON"]]"#,
    );
    f.edit_manifest(one_axis, two_axes);
    let report = f.build();
    assert!(report.manifest_changed);
    assert_eq!(report.variants, 8);
    // MOON is not used by the code: its variants equal existing texts, already stored.
    assert_eq!(report.compiled, 0, "{report:?}");
    assert_eq!(report.cached, 8);
    assert_exists(&f.path("out/Sky/Forward/MOON+STARS.spv"));
    assert_eq!(report.outputs_written, 2 * 2);

    // Removing the axis again retires those outputs.
    f.edit_manifest(two_axes, one_axis);
    let report = f.build();
    assert_eq!(report.outputs_removed, 2 * 2);
    assert!(!f.path("out/Sky/Forward/MOON+STARS.spv").exists());
}

#[test]
fn with_a_small_memory_budget_evictions_happen_and_nothing_recompiles() {
    let mut f = fixture(Some(64));
    let cold = f.build();
    assert_eq!(cold.compiled, 6);
    // Any new revision is a boundary where the engine's LRU evicts preprocessed texts.
    f.edit("shaders/sky.wgsl", "0.2, 1.0", "0.3, 1.0");
    let report = f.build();
    assert!(report.evicted > 0, "{report:?}");
    assert_eq!(recompiled(&report), ["Sky/Forward[]"]);
    // Lit's texts were evicted, its artifacts re-verified through the kept edges: nothing
    // of Lit re-executed, nothing compiled. Sky's revision moved, but its STARS variant's
    // text did not change: its artifacts are verified too, not executed again.
    assert_eq!(
        report
            .outcomes
            .keys()
            .map(|v| v.to_string())
            .collect::<Vec<_>>(),
        ["Sky/Forward[]"],
        "{report:?}"
    );
    assert_eq!(report.verified, 5, "{report:?}");

    // Outputs deleted behind kiln's back are rewritten from the store, not recompiled.
    std::fs::remove_dir_all(f.path("out")).unwrap();
    let mut fresh = Project::open(&BuildOptions {
        manifest: f.path("kiln.toml"),
        max_memory: Some(64),
        ..BuildOptions::default()
    })
    .unwrap();
    let report = fresh.build(&|_| {}).unwrap();
    assert_eq!(report.compiled, 0, "{report:?}");
    assert_eq!(report.outputs_written, 6 * 2);
}

#[test]
fn an_output_deleted_while_watching_is_restored_without_compiling() {
    let mut f = fixture(None);
    f.build();
    let good = output(&f, "Lit/Forward/FOG.spv");
    std::fs::remove_file(f.path("out/Lit/Forward/FOG.spv")).unwrap();
    // Without being told, the project trusts what it wrote: nothing to do.
    assert!(!f.project.is_dirty());
    assert!(f.project.outputs_changed(&["Lit/Forward/FOG.spv".into()]));
    assert!(f.project.is_dirty());
    let report = f.build();
    assert_eq!(report.compiled, 0, "{report:?}");
    assert_eq!(report.outputs_written, 1, "{report:?}");
    assert_eq!(output(&f, "Lit/Forward/FOG.spv"), good);
}

/// Issue 25, item 16: the watch summary said "1 variants ... 2 unchanged": early cutoffs
/// were counted per query that came out equal, and a variant compiled again to the same
/// bytes counted as compiled and as cut off. Each variant is in exactly one class now.
#[test]
fn every_variant_is_counted_once_in_the_summary() {
    let mut f = fixture(None);
    let check = |report: &BuildReport, what: &str| {
        let s = report.summary;
        assert_eq!(s.total(), report.variants, "{what}: {report:?}");
        assert_eq!(s.failed, report.failed, "{what}: {report:?}");
        assert_eq!(s.early_cutoff, report.early_cutoff, "{what}: {report:?}");
        // The old counts said "5 re-verified, 1 recompiled, 1 unchanged by early cutoff"
        // of 6 variants after the whitespace edit below.
        assert!(
            report.verified + report.early_cutoff + s.recompiled <= report.variants,
            "{what}: {report:?}"
        );
        assert!(
            s.recompiled <= report.compiled + report.deduplicated,
            "{what}: {report:?}"
        );
    };
    check(&f.build(), "cold");
    // Whitespace in code: Sky's texts change, naga's output does not (its artifacts are
    // compiled again and come out equal): compiled, not also cut off.
    f.edit(
        "shaders/sky.wgsl",
        "return vec4<f32>(1.0);",
        "return  vec4<f32>(1.0);",
    );
    let report = f.build();
    check(&report, "whitespace");
    assert_eq!(report.summary.recompiled, 1, "{report:?}");
    assert_eq!(report.early_cutoff, 0, "{report:?}");
    assert_eq!(report.summary.unchanged, 5, "{report:?}");
    // A comment of two lines: every Lit variant preprocesses again (its lines moved) and
    // is cut off, once each.
    f.edit(
        "shaders/include/fog.wgsl",
        "// Fog helpers.",
        "// Fog.\n// More words.",
    );
    let report = f.build();
    check(&report, "comment");
    assert_eq!(report.summary.early_cutoff, 4, "{report:?}");
    // A broken include, then repaired.
    f.edit("shaders/include/fog.wgsl", "fn apply_fog", "fn apply_fog(");
    let report = f.build();
    check(&report, "broken");
    assert_eq!(report.summary.failed, 4, "{report:?}");
    f.edit("shaders/include/fog.wgsl", "fn apply_fog(", "fn apply_fog");
    check(&f.build(), "repaired");
    // The manifest: one axis more doubles Sky.
    f.edit_manifest(
        r#"axes = [["_", "STARS"]]"#,
        r#"axes = [["_", "STARS"], ["_", "MOON"]]"#,
    );
    let report = f.build();
    check(&report, "manifest");
    assert_eq!(report.variants, 8);
}
