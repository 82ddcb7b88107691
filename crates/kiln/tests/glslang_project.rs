//! End to end through the pipeline with glslang, as the WGSL tests do with naga: a project of
//! Vulkan GLSL (every stage naga lacks, an `#include`) and HLSL (two entry points of one
//! file, keyword-driven `#if` blocks in the style of Unity's multi_compile). A cold build
//! compiles every variant to SPIR-V that `spirv-val` accepts; a warm rebuild and a comment
//! edit compile nothing; an edit under `#if defined(_SHADOWS_SOFT)` recompiles exactly those
//! variants; a broken shader fails alone, located at its file and line.
//!
//! Needs the `glslang` feature; without it the tests print why they skip, and fail when
//! `KILN_REQUIRE_GLSLANG=1`. One test runs only without the feature: the same project's
//! glslang shaders then fail alone, naming what to install, and its WGSL shader builds.

mod common;

use common::glslang::{require_glslang, spirv_val, test_shader};
use kiln::pipeline::{BuildReport, Outcome, VariantId};
use kiln_test_support::{LiveProject, TempProject};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const MANIFEST: &str = r#"
[project]
targets = ["spirv"]

[[shader]]
name = "Surface"
source = "shaders/surface.hlsl"
axes = [["_", "_NORMALMAP"], ["_", "_FOG"], ["_", "_SHADOWS_SOFT"]]

[shader.glslang]
optimization = "performance"

[shader.passes.Vertex]
stage = "vertex"
entry = "VSMain"

[shader.passes.Pixel]
stage = "fragment"
entry = "PSMain"
shader_model = "6.0"

[[shader]]
name = "Textured"
axes = [["_", "FOG"]]

[shader.passes.Vertex]
stage = "vertex"
entry = "main"
source = "shaders/textured.vert"

[shader.passes.Fragment]
stage = "fragment"
entry = "main"
source = "shaders/textured.frag"

[[shader]]
name = "Explode"
source = "shaders/explode.geom"

[shader.passes.Main]
stage = "geometry"
entry = "main"

[[shader]]
name = "Patch"

[shader.passes.Control]
stage = "tess_control"
entry = "main"
source = "shaders/patch.tesc"

[shader.passes.Evaluation]
stage = "tess_evaluation"
entry = "main"
source = "shaders/patch.tese"

[[shader]]
name = "Histogram"
source = "shaders/histogram.comp"

[shader.passes.Main]
stage = "compute"
entry = "main"

[[shader]]
name = "Fill"
source = "shaders/fill.wgsl"

[shader.passes.Main]
stage = "compute"
entry = "main"
"#;

/// The fragment shader of `Textured`: an include, a comment, and a `FOG` block.
const TEXTURED_FRAG: &str = r#"#version 450
#extension GL_GOOGLE_include_directive : require
#include "include/fog.glsl"

layout(set = 0, binding = 0) uniform sampler2D albedo;

layout(location = 0) in vec2 in_uv;
layout(location = 0) out vec4 out_color;

// Tinted albedo.
void main() {
    vec4 color = texture(albedo, in_uv);
#ifdef FOG
    color.rgb = apply_fog(color.rgb, gl_FragCoord.z);
#endif
    out_color = color;
}
"#;

const FOG_GLSL: &str = r#"#pragma once
vec3 apply_fog(vec3 color, float depth) {
    return mix(color, vec3(0.6, 0.7, 0.8), clamp(depth * 0.5, 0.0, 1.0));
}
"#;

const FILL_WGSL: &str = r#"@group(0) @binding(0) var<storage, read_write> data: array<f32>;

@compute @workgroup_size(1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    data[id.x] = 1.0;
}
"#;

/// Variants: Surface 8 x 2, Textured 2 x 2, Explode, Patch x 2, Histogram, Fill.
const VARIANTS: usize = 16 + 4 + 1 + 2 + 1 + 1;

/// The project, kept open.
fn fixture() -> LiveProject {
    let mut files: Vec<(String, String)> = vec![
        ("kiln.toml".into(), MANIFEST.into()),
        ("shaders/textured.frag".into(), TEXTURED_FRAG.into()),
        ("shaders/include/fog.glsl".into(), FOG_GLSL.into()),
        ("shaders/fill.wgsl".into(), FILL_WGSL.into()),
    ];
    for name in [
        "surface.hlsl",
        "textured.vert",
        "explode.geom",
        "patch.tesc",
        "patch.tese",
        "histogram.comp",
    ] {
        files.push((format!("shaders/{name}"), test_shader(name)));
    }
    TempProject::from_files(files).live()
}

fn compiled(report: &BuildReport) -> BTreeSet<String> {
    report
        .outcomes
        .iter()
        .filter(|(_, outcome)| **outcome == Outcome::Compiled)
        .map(|(id, _)| id.to_string())
        .collect()
}

fn has(id: &VariantId, keyword: &str) -> bool {
    id.keywords.iter().any(|k| &**k == keyword)
}

#[test]
fn a_glsl_and_hlsl_project_builds_incrementally() {
    if !require_glslang() {
        return;
    }
    let mut f = fixture();

    // Cold: every variant compiled, every output valid SPIR-V.
    let cold = f.build();
    assert_eq!(cold.failed, 0, "{:#?}", cold.diagnostics);
    assert_eq!(cold.variants, VARIANTS);
    assert_eq!(cold.compiled + cold.deduplicated, VARIANTS, "{cold:?}");
    let mut outputs = 0;
    for entry in walk(&f.path("out")) {
        if entry.extension().and_then(|e| e.to_str()) == Some("spv") {
            let bytes = std::fs::read(&entry).expect("read output");
            spirv_val(&bytes, &entry.display().to_string());
            outputs += 1;
        }
    }
    assert_eq!(outputs, VARIANTS, "one .spv per variant");
    // The HLSL pass got its shader model's defines from kiln's preprocessor.
    let pixel = std::fs::read(f.path("out/Surface/Pixel/_.spv")).expect("pixel output");
    assert_eq!(&pixel[..4], &0x0723_0203u32.to_le_bytes());

    // Warm, same process: nothing compiled.
    let warm = f.build();
    assert_eq!(warm.failed, 0);
    assert!(compiled(&warm).is_empty(), "{:?}", compiled(&warm));
    // Warm, new process: nothing compiled, nothing rewritten.
    let mut fresh = f.open();
    let warm = fresh.build(&|_| {}).expect("build");
    assert_eq!(
        (warm.compiled, warm.failed, warm.outputs_written),
        (0, 0, 0)
    );
    drop(fresh);

    // A comment edit: text identical after preprocessing, nothing compiled.
    f.edit(
        "shaders/surface.hlsl",
        "// A lit surface",
        "// A lit (and shaded) surface",
    );
    f.edit(
        "shaders/textured.frag",
        "// Tinted albedo.",
        "// Albedo, tinted.",
    );
    let comment = f.build();
    assert_eq!(comment.failed, 0);
    assert!(compiled(&comment).is_empty(), "{:?}", compiled(&comment));

    // An edit under `#if defined(_SHADOWS_SOFT)`: exactly those variants (both passes: the
    // whole file is each pass's text).
    f.edit(
        "shaders/surface.hlsl",
        "diffuse = smoothstep(0.0, 1.0, diffuse);",
        "diffuse = smoothstep(0.1, 0.9, diffuse);",
    );
    let edit = f.build();
    assert_eq!(edit.failed, 0, "{:#?}", edit.diagnostics);
    let expected: BTreeSet<String> = f
        .project
        .variants()
        .into_iter()
        .filter(|id| &*id.shader == "Surface" && has(id, "_SHADOWS_SOFT"))
        .map(|id| id.to_string())
        .collect();
    assert_eq!(expected.len(), 8);
    assert_eq!(compiled(&edit), expected);

    // An edit of an include: only the variants of the one pass that includes it.
    f.edit("shaders/include/fog.glsl", "depth * 0.5", "depth * 0.25");
    let edit = f.build();
    assert_eq!(
        compiled(&edit),
        BTreeSet::from([
            "Textured/Fragment[]".to_owned(),
            "Textured/Fragment[FOG]".to_owned()
        ])
    );
}

#[test]
fn a_broken_glsl_shader_fails_alone_at_its_file_and_line() {
    if !require_glslang() {
        return;
    }
    let mut f = fixture();
    assert_eq!(f.build().failed, 0);
    f.edit(
        "shaders/textured.frag",
        "    out_color = color;",
        "    out_color = colour;",
    );
    let broken = f.build();
    // Both keyword sets of the one pass, nothing else.
    assert_eq!(broken.failed, 2, "{:#?}", broken.diagnostics);
    let errors: Vec<_> = broken
        .diagnostics
        .iter()
        .filter(|d| d.severity == kiln::pipeline::Severity::Error)
        .collect();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    for d in &errors {
        assert!(d.message.contains("colour"), "{d:?}");
        let at = d.location.as_ref().expect("located");
        assert_eq!(at.file, Path::new("shaders/textured.frag"));
        // Line 16 of the source: the include above it does not shift the line.
        assert_eq!(at.line, 16, "{d:?}");
        assert!(
            d.variant
                .as_deref()
                .unwrap_or("")
                .starts_with("Textured/Fragment"),
            "{d:?}"
        );
    }
    assert!(f.path("out/Textured/Vertex/_.spv").exists());
    assert!(!f.path("out/Textured/Fragment/_.spv").exists());
    // An HLSL error names the .hlsl file and line.
    f.edit(
        "shaders/textured.frag",
        "    out_color = colour;",
        "    out_color = color;",
    );
    f.edit(
        "shaders/surface.hlsl",
        "    return color;",
        "    return colr;",
    );
    let broken = f.build();
    let line = test_shader("surface.hlsl")
        .lines()
        .position(|l| l == "    return color;")
        .expect("line")
        + 1;
    assert_eq!(
        broken.failed, 16,
        "every Surface variant reads PSMain's body"
    );
    for d in broken
        .diagnostics
        .iter()
        .filter(|d| d.severity == kiln::pipeline::Severity::Error)
    {
        let at = d.location.as_ref().expect("located");
        assert_eq!(at.file, Path::new("shaders/surface.hlsl"));
        assert_eq!(at.line as usize, line, "{d:?}");
    }
}

#[test]
fn without_glslang_its_shaders_fail_alone_naming_what_to_install() {
    if kiln::compile::glslang::AVAILABLE {
        return;
    }
    let mut f = fixture();
    let report = f.build();
    // Everything but the WGSL shader needs glslang.
    assert_eq!(report.failed, VARIANTS - 1);
    assert!(f.path("out/Fill/Main/_.spv").exists());
    let errors: Vec<_> = report
        .diagnostics
        .iter()
        .filter(|d| d.severity == kiln::pipeline::Severity::Error)
        .collect();
    assert_eq!(errors.len(), VARIANTS - 1);
    for d in errors {
        assert!(d.message.contains("default features"), "{d:?}");
        assert!(d.variant.is_some(), "{d:?}");
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

#[test]
fn the_hlsl_example_builds_and_every_output_is_valid_spirv() {
    if !require_glslang() {
        return;
    }
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hlsl");
    let dir = TempProject::from_files(
        [
            "kiln.toml",
            "shaders/lit.hlsl",
            "shaders/particles.hlsl",
            "shaders/bloom.hlsl",
            "shaders/include/common.hlsli",
            "shaders/include/fog.hlsli",
        ]
        .map(|relative| {
            let text = std::fs::read(example.join(relative)).expect("read example");
            (relative, text)
        }),
    );
    let mut project = dir.open();
    let report = project.build(&|_| {}).expect("build");
    assert_eq!(report.failed, 0, "{:#?}", report.diagnostics);
    // Lit: 2 x 2 x 3 x 2 x 2 keyword sets x 3 passes; Particles 4 x 2; Bloom 2 x 3.
    assert_eq!(report.variants, 144 + 8 + 6);
    let outputs: Vec<PathBuf> = walk(&dir.path("out"))
        .into_iter()
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("spv"))
        .collect();
    assert_eq!(outputs.len(), report.variants);
    for output in outputs {
        let bytes = std::fs::read(&output).expect("read output");
        spirv_val(&bytes, &output.display().to_string());
    }
}

#[test]
fn a_stage_naga_lacks_builds_spirv_and_fails_only_its_other_pairs() {
    if !require_glslang() {
        return;
    }
    let manifest = "[project]\ntargets = [\"spirv\", \"msl\"]\n\n[[shader]]\nname = \"Explode\"\nsource = \"explode.geom\"\n\n[shader.passes.Main]\nstage = \"geometry\"\nentry = \"main\"\n";
    let dir = TempProject::from_files([
        ("kiln.toml", manifest.to_owned()),
        ("explode.geom", test_shader("explode.geom")),
    ]);
    let mut project = dir.open();
    let report = project.build(&|_| {}).expect("build");
    assert_eq!(report.failed_outputs, 1, "{report:?}");
    let spirv = std::fs::read(dir.path("out/Explode/Main/_.spv")).expect("spirv written");
    spirv_val(&spirv, "explode.geom");
    assert!(!dir.path("out/Explode/Main/_.metal").exists());
    let msl: Vec<_> = report
        .diagnostics
        .iter()
        .filter(|d| d.target == Some(kiln::compile::Target::Msl))
        .collect();
    assert_eq!(msl.len(), 1, "{:#?}", report.diagnostics);
    assert!(
        msl[0].message.contains("unsupported by target msl"),
        "{:?}",
        msl[0]
    );
}

/// Issue 26: HLSL named by stage, as the public Vulkan samples name it, is read as HLSL
/// when the manifest says `language = "hlsl"`: no file renamed.
#[test]
fn hlsl_named_by_stage_builds_with_its_language_said() {
    if !require_glslang() {
        return;
    }
    let manifest = r#"
[project]
targets = ["spirv"]

[[shader]]
name = "Surface"
language = "hlsl"
axes = [["_", "_FOG"]]

[shader.passes.Vertex]
stage = "vertex"
entry = "VSMain"
source = "shaders/surface.vert"

[shader.passes.Pixel]
stage = "fragment"
entry = "PSMain"
source = "shaders/surface.frag"
"#;
    let hlsl = test_shader("surface.hlsl");
    let dir = TempProject::from_files([
        ("kiln.toml", manifest),
        ("shaders/surface.vert", hlsl.as_str()),
        ("shaders/surface.frag", hlsl.as_str()),
    ]);
    let report = dir.build();
    assert_eq!(report.failed, 0, "{:#?}", report.diagnostics);
    assert_eq!(report.compiled, 4);
    for output in ["Vertex/_", "Vertex/_FOG", "Pixel/_", "Pixel/_FOG"] {
        let path = dir.path(&format!("out/Surface/{output}.spv"));
        spirv_val(&std::fs::read(&path).expect("read output"), output);
    }
    // Without the field, the same files are GLSL to glslang, and fail as such.
    let glsl = TempProject::from_files([
        (
            "kiln.toml".to_owned(),
            manifest.replace("language = \"hlsl\"\n", ""),
        ),
        ("shaders/surface.vert".to_owned(), hlsl.clone()),
        ("shaders/surface.frag".to_owned(), hlsl),
    ]);
    assert_eq!(glsl.build().failed, 4);
}
