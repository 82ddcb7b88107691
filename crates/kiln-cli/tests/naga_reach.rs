//! End-to-end tests of issue 11's "naga, used right": push constants validate with what each
//! target supports, specialization constants take the manifest's values or their defaults,
//! and a (variant, target) pair fails alone. Each runs the real `kiln build` on a temporary
//! project of our own shaders and asserts on what reached the disk and `index.json`.

use kiln_test_support::TempProject;
use serde_json::Value;
use std::process::Command;

const MANIFEST: &str = r#"
[project]
targets = ["spirv", "msl", "hlsl", "glsl"]

[[shader]]
name = "Push"
source = "shaders/push.vert"
compiler = "naga"

[shader.passes.Main]
stage = "vertex"
entry = "main"

[[shader]]
name = "Blur"
source = "shaders/blur.frag"
compiler = "naga"
axes = [["_", "WIDE"]]
constants = { STRENGTH = 0.25 }

[shader.keyword_constants.WIDE]
TAPS = 9

[shader.passes.Main]
stage = "fragment"
entry = "main"

[[shader]]
name = "Fog"
source = "shaders/fog.wgsl"
constants = { fog_density = 0.5 }

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"

[[shader]]
name = "Basis"
source = "shaders/basis.vert"
compiler = "naga"
axes = [["_", "INVERT"]]

[shader.passes.Main]
stage = "vertex"
entry = "main"
"#;

/// Push constants: naga's default capabilities refuse them.
const PUSH: &str = "#version 450
layout(push_constant) uniform Push { mat4 mvp; vec4 tint; } pc;
layout(location = 0) in vec3 a_pos;
layout(location = 0) out vec4 v_tint;
void main() {
    v_tint = pc.tint;
    gl_Position = pc.mvp * vec4(a_pos, 1.0);
}
";

/// Specialization constants with defaults; the manifest sets STRENGTH, and TAPS for WIDE.
const BLUR: &str = "#version 450
layout(constant_id = 0) const int TAPS = 4;
layout(constant_id = 1) const float STRENGTH = 0.75;
layout(location = 0) in vec2 v_uv;
layout(location = 0) out vec4 o_color;
void main() {
    vec4 c = vec4(0.0);
    for (int i = 0; i < TAPS; i++) {
        c += vec4(v_uv * float(i), STRENGTH, 1.0);
    }
    o_color = c / float(TAPS);
}
";

/// A WGSL override without a default (the manifest gives it) and one with an id.
const FOG: &str = "override fog_density: f32;
@id(7) override steps: u32 = 3u;

@fragment
fn fs_main() -> @location(0) vec4<f32> {
    var c = vec4<f32>(0.0);
    for (var i = 0u; i < steps; i++) {
        c += vec4<f32>(fog_density);
    }
    return c;
}
";

/// Under INVERT, `inverse`: naga's MSL and HLSL back ends do not implement it.
const BASIS: &str = "#version 450
layout(location = 0) in vec3 a_x;
layout(location = 1) in vec3 a_y;
void main() {
    mat3 basis = mat3(a_x, a_y, cross(a_x, a_y));
#ifdef INVERT
    basis = inverse(basis);
#else
    basis = transpose(basis);
#endif
    gl_Position = vec4(basis * a_x, 1.0);
}
";

/// The line of `inverse(` in [`BASIS`].
const INVERSE_LINE: u64 = 7;

const KILN: &str = env!("CARGO_BIN_EXE_kiln");

fn project() -> TempProject {
    TempProject::from_files([
        ("kiln.toml", MANIFEST),
        ("shaders/push.vert", PUSH),
        ("shaders/blur.frag", BLUR),
        ("shaders/fog.wgsl", FOG),
        ("shaders/basis.vert", BASIS),
    ])
}

/// `kiln build --json`: the report and the exit code.
fn build(p: &TempProject) -> (Value, i32) {
    let build = p.build_cli(KILN, &[]);
    (build.report, build.code)
}

/// `kiln build` with the human report: stderr and the exit code.
fn build_text(p: &TempProject) -> (String, i32) {
    let out = p.command(KILN, "build").output().unwrap();
    (
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

fn read_index(p: &TempProject) -> Value {
    serde_json::from_slice(&std::fs::read(p.path("out/index.json")).unwrap()).unwrap()
}

fn output(p: &TempProject, relative: &str) -> Option<Vec<u8>> {
    std::fs::read(p.path("out").join(relative)).ok()
}

fn output_text(p: &TempProject, relative: &str) -> String {
    String::from_utf8(output(p, relative).unwrap_or_else(|| panic!("{relative} was not written")))
        .unwrap()
}

fn count(report: &Value, field: &str) -> u64 {
    report[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field} in {report}"))
}

fn failures(index: &Value) -> Vec<Value> {
    index["failures"].as_array().cloned().unwrap_or_default()
}

/// Runs spirv-val on every SPIR-V output in the index; returns how many passed. Skipped
/// (0) when spirv-val is not installed, unless `KILN_REQUIRE_SPIRV_VAL=1`.
fn spirv_val_all(p: &TempProject) -> usize {
    if Command::new("spirv-val").arg("--version").output().is_err() {
        assert_ne!(
            std::env::var("KILN_REQUIRE_SPIRV_VAL").as_deref(),
            Ok("1"),
            "KILN_REQUIRE_SPIRV_VAL=1 but spirv-val is not installed"
        );
        eprintln!("spirv-val not installed: skipping validation");
        return 0;
    }
    let mut checked = 0;
    for entry in read_index(p)["entries"].as_array().unwrap() {
        if entry["target"] != "spirv" {
            continue;
        }
        let file = p.path("out").join(entry["path"].as_str().unwrap());
        let out = Command::new("spirv-val").arg(&file).output().unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        checked += 1;
    }
    checked
}

#[test]
fn one_target_s_failure_is_that_target_s_alone() {
    let p = project();
    let (report, code) = build(&p);
    assert_eq!(code, 1, "a failed pair fails the build: {report}");
    // Push 1 + Blur 2 + Fog 1 + Basis 2 variants; only Basis[INVERT] fails, for MSL and HLSL.
    assert_eq!(count(&report, "variants"), 6, "{report}");
    assert_eq!(count(&report, "failed"), 1, "{report}");
    assert_eq!(count(&report, "failed_outputs"), 2, "{report}");
    let errors: Vec<&Value> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["severity"] == "error")
        .collect();
    let mut targets: Vec<&str> = errors
        .iter()
        .map(|d| d["target"].as_str().unwrap())
        .collect();
    targets.sort();
    assert_eq!(targets, ["hlsl", "msl"], "{report}");
    for d in &errors {
        assert_eq!(d["file"], "shaders/basis.vert", "{d}");
        assert_eq!(d["line"], INVERSE_LINE, "{d}");
        assert!(
            d["variant"]
                .as_str()
                .unwrap()
                .starts_with("Basis/Main[INVERT]"),
            "{d}"
        );
    }

    // Its SPIR-V and GLSL are written; MSL and HLSL are not.
    assert!(output(&p, "Basis/Main/INVERT.spv").is_some());
    assert!(output(&p, "Basis/Main/INVERT.glsl").is_some());
    assert!(output(&p, "Basis/Main/INVERT.metal").is_none());
    assert!(output(&p, "Basis/Main/INVERT.hlsl").is_none());
    // 6 variants x 4 targets, less the two failed pairs.
    let index = read_index(&p);
    assert_eq!(index["entries"].as_array().unwrap().len(), 22);
    let failed = failures(&index);
    assert_eq!(failed.len(), 2, "{index}");
    for (f, target) in failed.iter().zip(["hlsl", "msl"]) {
        assert_eq!(f["shader"], "Basis", "{f}");
        assert_eq!(f["keywords"], serde_json::json!(["INVERT"]), "{f}");
        assert_eq!(f["target"], target, "{f}");
        assert_eq!(f["file"], "shaders/basis.vert", "{f}");
        assert_eq!(f["line"], INVERSE_LINE, "{f}");
        assert!(f["message"].as_str().unwrap().contains("Inverse"), "{f}");
    }
    // Every SPIR-V output, the failing variant's included, is valid.
    let checked = spirv_val_all(&p);
    assert!(
        checked == 0 || checked == 6,
        "{checked} SPIR-V outputs checked"
    );

    // The text report names the file, line and target too.
    let (stderr, code) = build_text(&p);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("shaders/basis.vert:{INVERSE_LINE}:")),
        "{stderr}"
    );
    assert!(stderr.contains("target: msl"), "{stderr}");
    assert!(stderr.contains("1 failed (2 outputs)"), "{stderr}");

    // Fixed, the pairs are written and the failures leave the index.
    p.edit("shaders/basis.vert", "inverse(basis)", "transpose(basis)");
    let (report, code) = build(&p);
    assert_eq!(code, 0, "{report}");
    assert!(output(&p, "Basis/Main/INVERT.metal").is_some());
    assert!(output(&p, "Basis/Main/INVERT.hlsl").is_some());
    assert!(failures(&read_index(&p)).is_empty());
}

#[test]
fn push_constants_and_specialization_constants_build_for_every_target() {
    let p = project();
    p.edit("shaders/basis.vert", "inverse(basis)", "transpose(basis)");
    let (report, code) = build(&p);
    assert_eq!(code, 0, "{report}");
    // Basis's two variants have one text once `inverse` is gone.
    assert_eq!(count(&report, "compiled"), 5, "{report}");
    assert_eq!(count(&report, "deduplicated"), 1, "{report}");
    for target in ["spv", "metal", "hlsl", "glsl"] {
        assert!(output(&p, &format!("Push/Main/_.{target}")).is_some());
    }
    // The manifest's STRENGTH everywhere; TAPS 9 only for WIDE (its default 4 elsewhere).
    let plain = output_text(&p, "Blur/Main/_.metal");
    let wide = output_text(&p, "Blur/Main/WIDE.metal");
    assert!(plain.contains("constant float STRENGTH = 0.25;"), "{plain}");
    assert!(wide.contains("constant float STRENGTH = 0.25;"), "{wide}");
    assert!(plain.contains("constant int TAPS = 4;"), "{plain}");
    assert!(wide.contains("constant int TAPS = 9;"), "{wide}");
    assert_ne!(
        output(&p, "Blur/Main/_.spv"),
        output(&p, "Blur/Main/WIDE.spv"),
        "SPIR-V got the values too"
    );
    assert!(output_text(&p, "Fog/Forward/_.hlsl").contains("0.5"));
    assert!(spirv_val_all(&p) == 0 || spirv_val_all(&p) == 6);

    // A constant's value is part of the identity: changing it rebuilds exactly its shader.
    p.edit("kiln.toml", "fog_density = 0.5", "fog_density = 0.125");
    let (report, code) = build(&p);
    assert_eq!(code, 0, "{report}");
    assert_eq!(count(&report, "compiled"), 1, "{report}");
    assert!(output_text(&p, "Fog/Forward/_.hlsl").contains("0.125"));
}

#[test]
fn a_constant_without_value_or_default_fails_naming_shader_pass_variant_and_constant() {
    let p = project();
    p.edit("kiln.toml", "constants = { fog_density = 0.5 }\n", "");
    let (report, code) = build(&p);
    assert_eq!(code, 1, "{report}");
    let d = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| {
            d["variant"]
                .as_str()
                .is_some_and(|v| v.starts_with("Fog/Forward[]"))
        })
        .unwrap_or_else(|| panic!("no Fog diagnostic: {report}"))
        .clone();
    assert!(
        d["message"].as_str().unwrap().contains("`fog_density`"),
        "{d}"
    );
    assert_eq!(d["file"], "shaders/fog.wgsl", "{d}");
    assert_eq!(d["line"], 1, "{d}");
    // A failure before any back end ran fails every target of the variant.
    assert!(d["target"].is_null(), "{d}");
    let fog: Vec<Value> = failures(&read_index(&p))
        .into_iter()
        .filter(|f| f["shader"] == "Fog")
        .collect();
    assert_eq!(fog.len(), 4, "one per target");
    assert!(output(&p, "Fog/Forward/_.spv").is_none());
}

#[test]
fn a_failed_pair_s_previous_output_is_removed_and_its_other_targets_updated() {
    let p = project();
    p.edit("shaders/basis.vert", "inverse(basis)", "transpose(basis)");
    let (report, code) = build(&p);
    assert_eq!(code, 0, "{report}");
    let old_spirv = output(&p, "Basis/Main/INVERT.spv").unwrap();
    assert!(output(&p, "Basis/Main/INVERT.metal").is_some());

    p.edit(
        "shaders/basis.vert",
        "basis = transpose(basis);\n#else",
        "basis = inverse(basis);\n#else",
    );
    let (report, code) = build(&p);
    assert_eq!(code, 1, "{report}");
    assert_eq!(count(&report, "failed_outputs"), 2, "{report}");
    // Never stale: the failed pairs' old files are gone, the others hold the new code.
    assert!(output(&p, "Basis/Main/INVERT.metal").is_none());
    assert!(output(&p, "Basis/Main/INVERT.hlsl").is_none());
    assert_ne!(output(&p, "Basis/Main/INVERT.spv").unwrap(), old_spirv);
    let index = read_index(&p);
    let paths: Vec<&str> = index["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert!(!paths.contains(&"Basis/Main/INVERT.metal"), "{paths:?}");
    assert!(paths.contains(&"Basis/Main/INVERT.spv"), "{paths:?}");
    assert_eq!(failures(&index).len(), 2);
}

#[test]
fn capabilities_from_the_manifest_decide_what_validates() {
    let p = project();
    p.edit("shaders/basis.vert", "inverse(basis)", "transpose(basis)");
    // Without push constants for MSL, Push fails for MSL alone, with a manifest-set list.
    p.edit(
        "kiln.toml",
        "\"msl\"",
        "{ name = \"msl\", capabilities = [\"multisampled_shading\"] }",
    );
    let (report, code) = build(&p);
    assert_eq!(code, 1, "{report}");
    assert_eq!(count(&report, "failed_outputs"), 1, "{report}");
    let failed = failures(&read_index(&p));
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["shader"], "Push");
    assert_eq!(failed[0]["target"], "msl");
    assert!(
        failed[0]["message"]
            .as_str()
            .unwrap()
            .contains("IMMEDIATES"),
        "{failed:?}"
    );
    assert!(output(&p, "Push/Main/_.spv").is_some());
    // An unknown name is a manifest error with its line.
    p.edit("kiln.toml", "multisampled_shading", "psychic_paper");
    let (stderr, code) = build_text(&p);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("psychic_paper"), "{stderr}");
    assert!(stderr.contains("kiln.toml:3"), "{stderr}");
}
