//! glslang shaders built for every target through the pipeline: SPIR-V from glslang, MSL,
//! HLSL and GLSL from SPIRV-Cross, WGSL from naga (`compile::cross`).
//!
//! - The manifest's specialization constants reach every output of a glslang shader (the
//!   SPIR-V's defaults, SPIRV-Cross's function constants and macros, naga's `override`s),
//!   and changing one rebuilds exactly the variants that use the value.
//! - A GLSL and an HLSL project build to all five targets: each output is checked by a
//!   validator installed here (`spirv-val` for SPIR-V, `glslangValidator` for GLSL and for
//!   HLSL through glslang's HLSL front end, naga for WGSL; nothing here checks MSL), each
//!   (variant, target) pair the stage table refuses fails alone as "unsupported by target",
//!   and a warm rebuild compiles nothing.
//!
//! Needs the `glslang` feature; without it the tests say why they skip (and fail with
//! `KILN_REQUIRE_GLSLANG=1`).

mod common;

use common::glslang::{glslang_validator, require_glslang, spirv_val, test_shader, Checked};
use kiln::compile::Target;
use kiln::pipeline::{BuildReport, Outcome};
use kiln_test_support::{LiveProject, TempProject};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A project of `files` ((path, text)) with `kiln.toml` = `manifest`, kept open.
fn fixture(manifest: &str, files: &[(&str, String)]) -> LiveProject {
    let manifest = ("kiln.toml", manifest.to_owned());
    TempProject::from_files(std::iter::once(manifest).chain(files.iter().cloned())).live()
}

fn compiled(report: &BuildReport) -> BTreeSet<String> {
    report
        .outcomes
        .iter()
        .filter(|(_, outcome)| **outcome == Outcome::Compiled)
        .map(|(id, _)| id.to_string())
        .collect()
}

fn words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect()
}

/// The default of each specialization constant of a module, by `SpecId`: `Ok(literal
/// words)` for `OpSpecConstant`, `Err(bool)` for `OpSpecConstantTrue`/`False`.
fn spec_defaults(spirv: &[u32]) -> BTreeMap<u32, Result<Vec<u32>, bool>> {
    let mut ids = BTreeMap::new();
    let mut values = BTreeMap::new();
    let mut at = 5;
    while at < spirv.len() {
        let count = (spirv[at] >> 16) as usize;
        let op = &spirv[at..at + count];
        match (spirv[at] & 0xffff, op) {
            (71, [_, target, 1, id]) => {
                ids.insert(*target, *id);
            }
            (48, [_, _, result]) => {
                values.insert(*result, Err(true));
            }
            (49, [_, _, result]) => {
                values.insert(*result, Err(false));
            }
            (50, [_, _, result, literal @ ..]) => {
                values.insert(*result, Ok(literal.to_vec()));
            }
            _ => {}
        }
        at += count.max(1);
    }
    ids.into_iter()
        .filter_map(|(target, id)| Some((id, values.get(&target)?.clone())))
        .collect()
}

/// Parses and validates WGSL with naga (the check kiln's WGSL outputs get here).
fn wgsl_valid(text: &str, what: &str) {
    let module =
        naga::front::wgsl::parse_str(text).unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{what}: {e:?}\n{text}"));
}

const CONSTANTS_MANIFEST: &str = r#"
[project]
targets = ["spirv", "msl", "hlsl", "glsl", "wgsl"]

[[shader]]
name = "Blur"
source = "shaders/blur.frag"
axes = [["_", "WIDE"], ["_", "SOFT"]]
constants = { TAPS = 37, "1" = 0.75 }

[shader.keyword_constants.WIDE]
TAPS = 53
CLAMPED = true

[shader.passes.Main]
stage = "fragment"
entry = "main"

[[shader]]
name = "Levels"
source = "shaders/levels.hlsl"

[shader.passes.Main]
stage = "compute"
entry = "main"
constants = { LEVELS = 29 }
"#;

/// An HLSL compute shader with a specialization constant (`[[vk::constant_id]]`).
const LEVELS_HLSL: &str = r#"[[vk::constant_id(3)]] const int LEVELS = 2;

RWStructuredBuffer<float> Data : register(u0);

[numthreads(64, 1, 1)]
void main(uint3 id : SV_DispatchThreadID)
{
    Data[id.x] = floor(Data[id.x] * LEVELS) / LEVELS;
}
"#;

/// What each text output of Blur says for TAPS = `taps`, WEIGHT = 0.75 and CLAMPED.
fn assert_blur_constants(f: &TempProject, stem: &str, taps: u32, clamped: bool) {
    let spirv = words(&std::fs::read(f.path(&format!("out/Blur/Main/{stem}.spv"))).expect("spv"));
    spirv_val(
        &spirv
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect::<Vec<_>>(),
        stem,
    );
    let defaults = spec_defaults(&spirv);
    assert_eq!(defaults[&0], Ok(vec![taps]), "{stem}: TAPS");
    assert_eq!(defaults[&1], Ok(vec![0.75f32.to_bits()]), "{stem}: WEIGHT");
    assert_eq!(defaults[&2], Err(clamped), "{stem}: CLAMPED");

    let msl = f.read(&format!("out/Blur/Main/{stem}.metal"));
    for expected in [
        format!("constant int TAPS = is_function_constant_defined(TAPS_tmp) ? TAPS_tmp : {taps};"),
        "constant float WEIGHT = is_function_constant_defined(WEIGHT_tmp) ? WEIGHT_tmp : 0.75;"
            .to_owned(),
        format!(
            "constant bool CLAMPED = is_function_constant_defined(CLAMPED_tmp) ? CLAMPED_tmp : {clamped};"
        ),
    ] {
        assert!(msl.contains(&expected), "{stem}.metal lacks {expected:?}:\n{msl}");
    }
    for ext in ["hlsl", "glsl"] {
        let text = f.read(&format!("out/Blur/Main/{stem}.{ext}"));
        for expected in [
            format!("#define SPIRV_CROSS_CONSTANT_ID_0 {taps}\n"),
            "#define SPIRV_CROSS_CONSTANT_ID_1 0.75".to_owned(),
            format!("#define SPIRV_CROSS_CONSTANT_ID_2 {clamped}\n"),
        ] {
            assert!(
                text.contains(&expected),
                "{stem}.{ext} lacks {expected:?}:\n{text}"
            );
        }
    }
    let wgsl = f.read(&format!("out/Blur/Main/{stem}.wgsl"));
    wgsl_valid(&wgsl, &format!("{stem}.wgsl"));
    for expected in [
        format!("@id(0) override TAPS: i32 = {taps}i;"),
        "@id(1) override WEIGHT: f32 = 0.75f;".to_owned(),
        format!("@id(2) override CLAMPED: bool = {clamped};"),
    ] {
        assert!(
            wgsl.contains(&expected),
            "{stem}.wgsl lacks {expected:?}:\n{wgsl}"
        );
    }
}

#[test]
fn manifest_constants_reach_every_target_of_a_glslang_shader() {
    if !require_glslang() {
        return;
    }
    let mut f = fixture(
        CONSTANTS_MANIFEST,
        &[
            ("shaders/blur.frag", test_shader("blur.frag")),
            ("shaders/levels.hlsl", LEVELS_HLSL.to_owned()),
        ],
    );
    let cold = f.build();
    assert_eq!(
        (cold.failed, cold.variants),
        (0, 5),
        "{:#?}",
        cold.diagnostics
    );
    // WIDE is not in the text, but its constants differ: four distinct compiles.
    assert_eq!(cold.compiled, 5, "{cold:?}");
    assert_blur_constants(&f, "_", 37, false);
    assert_blur_constants(&f, "SOFT", 37, false);
    assert_blur_constants(&f, "WIDE", 53, true);
    assert_blur_constants(&f, "SOFT+WIDE", 53, true);
    // The HLSL source's constant, set per pass.
    let spirv = words(&std::fs::read(f.path("out/Levels/Main/_.spv")).expect("spv"));
    assert_eq!(spec_defaults(&spirv)[&3], Ok(vec![29]));
    assert!(f
        .read("out/Levels/Main/_.hlsl")
        .contains("#define SPIRV_CROSS_CONSTANT_ID_3 29\n"));
    assert!(f
        .read("out/Levels/Main/_.metal")
        .contains("is_function_constant_defined(LEVELS_tmp) ? LEVELS_tmp : 29;"));

    // A value change rebuilds exactly the variants that hold it.
    let manifest = f.path("kiln.toml");
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    std::fs::write(&manifest, text.replace("TAPS = 53", "TAPS = 59")).expect("write");
    assert!(f.project.reload_manifest().expect("reload"));
    let report = f.build();
    assert_eq!(report.failed, 0, "{:#?}", report.diagnostics);
    assert_eq!(
        compiled(&report),
        BTreeSet::from([
            "Blur/Main[SOFT;WIDE]".to_owned(),
            "Blur/Main[WIDE]".to_owned()
        ])
    );
    assert_eq!(report.outputs_written, 2 * 5, "{report:?}");
    assert_blur_constants(&f, "WIDE", 59, true);
    assert_blur_constants(&f, "SOFT+WIDE", 59, true);
    assert_blur_constants(&f, "_", 37, false);

    // A constant the shader does not declare fails its variants, naming what it declares.
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    std::fs::write(&manifest, text.replace("LEVELS = 29", "LEVEL = 29")).expect("write");
    assert!(f.project.reload_manifest().expect("reload"));
    let report = f.build();
    assert_eq!(report.failed, 1, "{report:?}");
    let error = &report.diagnostics[0];
    assert!(
        error.message.contains(
            "the manifest sets specialization constant `LEVEL`, which this shader does not declare (declared: `LEVELS` (constant_id 3))"
        ),
        "{error:?}"
    );
    assert!(!f.path("out/Levels/Main/_.spv").exists());
}

const REACH_MANIFEST: &str = r#"
[project]
targets = ["spirv", "msl", "hlsl", "glsl", "wgsl", "reflection"]

[[shader]]
name = "Surface"
source = "shaders/surface.hlsl"
axes = [["_", "_NORMALMAP"], ["_", "_FOG"]]

[shader.passes.Vertex]
stage = "vertex"
entry = "VSMain"

[shader.passes.Pixel]
stage = "fragment"
entry = "PSMain"

[[shader]]
name = "Textured"

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
name = "Blur"
source = "shaders/blur.frag"

[shader.passes.Main]
stage = "fragment"
entry = "main"
"#;

/// glslangValidator's name of a pass's stage.
fn stage_of(shader: &str, pass: &str) -> &'static str {
    match (shader, pass) {
        ("Surface" | "Textured", "Vertex") => "vert",
        ("Surface", "Pixel") | ("Textured", "Fragment") | ("Blur", _) => "frag",
        ("Explode", _) => "geom",
        ("Patch", "Control") => "tesc",
        ("Patch", _) => "tese",
        ("Histogram", _) => "comp",
        other => panic!("no stage for {other:?}"),
    }
}

#[test]
fn glsl_and_hlsl_projects_build_every_target_they_can_express() {
    if !require_glslang() {
        return;
    }
    let names = [
        "surface.hlsl",
        "textured.vert",
        "textured.frag",
        "explode.geom",
        "patch.tesc",
        "patch.tese",
        "histogram.comp",
        "blur.frag",
    ];
    let paths: Vec<String> = names.iter().map(|n| format!("shaders/{n}")).collect();
    let files: Vec<(&str, String)> = paths
        .iter()
        .zip(names)
        .map(|(path, name)| (path.as_str(), test_shader(name)))
        .collect();
    let mut f = fixture(REACH_MANIFEST, &files);
    let cold = f.build();
    // Surface 4 x 2, Textured 2, Explode, Patch 2, Histogram, Blur.
    assert_eq!(cold.variants, 8 + 2 + 1 + 2 + 1 + 1);

    // The pairs that fail, and why: the stage table refuses them, or naga cannot read the
    // SPIR-V for WGSL.
    let failures: BTreeMap<(String, Target), String> = cold
        .diagnostics
        .iter()
        .map(|d| {
            let variant = d.variant.clone().unwrap_or_default();
            let variant = variant.split('@').next().unwrap_or_default().to_owned();
            (
                (
                    variant,
                    d.target.expect("a pair's failure names its target"),
                ),
                d.message.clone(),
            )
        })
        .collect();
    let unsupported = |variant: &str, target: Target| {
        let message = &failures[&(variant.to_owned(), target)];
        assert!(
            message.contains(&format!("unsupported by target {target}")),
            "{variant} {target}: {message}"
        );
    };
    unsupported("Explode/Main[]", Target::Msl);
    unsupported("Explode/Main[]", Target::Hlsl);
    unsupported("Explode/Main[]", Target::Wgsl);
    unsupported("Patch/Control[]", Target::Hlsl);
    unsupported("Patch/Control[]", Target::Wgsl);
    unsupported("Patch/Evaluation[]", Target::Hlsl);
    unsupported("Patch/Evaluation[]", Target::Wgsl);
    // Everything else that fails is naga reading glslang's SPIR-V for WGSL, for reasons
    // `docs/spirv-translation.md` counts on the public samples: a combined image sampler
    // (`Textured/Fragment`), an array sized by a specialization constant (`Histogram`), a
    // texture and a sampler at one binding as HLSL for Vulkan writes them (`Surface/Pixel`),
    // `gl_PointSize` (`Textured/Vertex`).
    let naga_fails: BTreeSet<&str> = failures
        .iter()
        .filter(|(_, message)| !message.contains("unsupported by target"))
        .map(|((variant, target), message)| {
            assert_eq!(*target, Target::Wgsl, "{variant}: {message}");
            variant.as_str()
        })
        .collect();
    assert_eq!(
        naga_fails,
        BTreeSet::from([
            "Histogram/Main[]",
            "Surface/Pixel[]",
            "Surface/Pixel[_FOG]",
            "Surface/Pixel[_FOG;_NORMALMAP]",
            "Surface/Pixel[_NORMALMAP]",
            "Textured/Fragment[]",
            "Textured/Vertex[]",
        ])
    );
    assert_eq!(
        failures.len(),
        cold.failed_outputs,
        "one diagnostic per failed pair"
    );

    // Every output that was written is checked by what is installed here.
    let mut written: BTreeMap<Target, usize> = BTreeMap::new();
    for output in walk(&f.path("out")) {
        let relative = output.strip_prefix(f.path("out")).expect("inside out/");
        let parts: Vec<&str> = relative.iter().filter_map(|p| p.to_str()).collect();
        let [shader, pass, file] = parts.as_slice() else {
            continue;
        };
        let what = relative.display().to_string();
        let Some(target) = Target::ALL
            .into_iter()
            .find(|t| file.ends_with(&format!(".{}", t.extension())))
        else {
            continue;
        };
        *written.entry(target).or_default() += 1;
        let bytes = std::fs::read(&output).expect("read output");
        match target {
            Target::Spirv => spirv_val(&bytes, &what),
            Target::Glsl => {
                let text = String::from_utf8(bytes).expect("text");
                glslang_validator(&text, stage_of(shader, pass), Checked::Glsl, &what);
            }
            Target::Hlsl => {
                let text = String::from_utf8(bytes).expect("text");
                glslang_validator(&text, stage_of(shader, pass), Checked::Hlsl, &what);
            }
            Target::Wgsl => wgsl_valid(&String::from_utf8(bytes).expect("text"), &what),
            Target::Reflection => {
                let value: serde_json::Value = serde_json::from_slice(&bytes).expect("JSON");
                let stage = match stage_of(shader, pass) {
                    "vert" => "vertex",
                    "frag" => "fragment",
                    "geom" => "geometry",
                    "tesc" => "tess_control",
                    "tese" => "tess_evaluation",
                    _ => "compute",
                };
                assert_eq!(value["stage"], stage, "{what}");
                assert_eq!(
                    value["workgroup_size"].is_array(),
                    stage == "compute",
                    "{what}"
                );
            }
            // No Metal compiler here: MSL is checked for its header only.
            Target::Msl => assert!(String::from_utf8(bytes)
                .expect("text")
                .contains("#include <metal_stdlib>\n")),
        }
    }
    let variants = cold.variants;
    let failed = |target: Target| failures.keys().filter(|(_, t)| *t == target).count();
    for target in Target::ALL {
        assert_eq!(
            written.get(&target).copied().unwrap_or(0),
            variants - failed(target),
            "{target}: {failures:#?}"
        );
    }
    // SPIR-V and GLSL for every stage; MSL for all but geometry; HLSL for neither
    // geometry nor tessellation.
    assert_eq!(failed(Target::Spirv), 0);
    assert_eq!(failed(Target::Glsl), 0, "{failures:#?}");
    assert_eq!(failed(Target::Msl), 1, "{failures:#?}");
    assert_eq!(failed(Target::Hlsl), 3, "{failures:#?}");
    // Reflection reads every stage's SPIR-V.
    assert_eq!(failed(Target::Reflection), 0, "{failures:#?}");
    assert!(f.path("out/Patch/Control/_.metal").exists());
    assert!(f.read("out/Explode/Main/_.glsl").contains("EmitVertex()"));

    // Warm, same process: nothing compiled, nothing rewritten.
    let warm = f.build();
    assert!(compiled(&warm).is_empty(), "{:?}", compiled(&warm));
    assert_eq!(warm.outputs_written, 0);
    // Warm, new process: the pairs the stage table refuses are known without compiling, so
    // a variant whose other targets are stored is not compiled again; a pair that failed in
    // a translator is retried (a failure is never an artifact), so only the variants with a
    // naga WGSL failure compile, and nothing is rewritten.
    let mut fresh = f.open();
    let warm = fresh.build(&|_| {}).expect("build");
    let again: BTreeSet<String> = compiled(&warm)
        .into_iter()
        .map(|id| id.split('@').next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        again,
        naga_fails
            .iter()
            .map(|v| (*v).to_owned())
            .collect::<BTreeSet<_>>()
    );
    assert_eq!(warm.outputs_written, 0, "{warm:?}");
    assert_eq!(warm.failed_outputs, cold.failed_outputs);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

const OPTIONS_MANIFEST: &str = r#"
[project]
targets = ["spirv"]

[[shader]]
name = "Surface"
source = "shaders/surface.hlsl"
axes = [["_", "_FOG"]]

[shader.glslang]
hlsl_iomap = true

[shader.passes.Vertex]
stage = "vertex"
entry = "VSMain"

[shader.passes.Pixel]
stage = "fragment"
entry = "PSMain"

[[shader]]
name = "Blur"
source = "shaders/blur.frag"

[shader.passes.Main]
stage = "fragment"
entry = "main"
"#;

/// Whether a module holds an instruction with `opcode` and, when given, `operands` right
/// after its first word.
fn has_instruction(spirv: &[u32], opcode: u32, operands: &[u32]) -> bool {
    let mut at = 5;
    while at < spirv.len() {
        let count = (spirv[at] >> 16) as usize;
        let op = &spirv[at..at + count];
        if spirv[at] & 0xffff == opcode && op[1..].starts_with(operands) {
            return true;
        }
        at += count.max(1);
    }
    false
}

/// Each glslang option of `[shader.glslang]` is part of the identity: setting it recompiles
/// exactly that shader's variants (the other shader compiles nothing), and the SPIR-V shows
/// what the option does.
#[test]
fn every_glslang_option_recompiles_exactly_its_shader() {
    if !require_glslang() {
        return;
    }
    let mut f = fixture(
        OPTIONS_MANIFEST,
        &[
            ("shaders/surface.hlsl", test_shader("surface.hlsl")),
            ("shaders/blur.frag", test_shader("blur.frag")),
        ],
    );
    let cold = f.build();
    assert_eq!(
        (cold.failed, cold.variants),
        (0, 5),
        "{:#?}",
        cold.diagnostics
    );
    let output = f.path("out/Surface/Pixel/_FOG.spv");
    let pixel = || words(&std::fs::read(&output).expect("spv"));
    const OP_STRING: u32 = 7;
    const OP_DECORATE: u32 = 71;
    const OP_DECORATE_STRING: u32 = 5632;
    const BINDING: u32 = 33;
    let before = pixel();
    assert!(!has_instruction(&before, OP_STRING, &[]));
    assert!(!has_instruction(&before, OP_DECORATE_STRING, &[]));

    let surface: BTreeSet<String> = [
        "Surface/Pixel[]",
        "Surface/Pixel[_FOG]",
        "Surface/Vertex[]",
        "Surface/Vertex[_FOG]",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    let mut options = String::from("hlsl_iomap = true");
    let mut set = |f: &mut LiveProject, option: &str| {
        options.push('\n');
        options.push_str(option);
        let manifest = OPTIONS_MANIFEST.replace("hlsl_iomap = true", &options);
        std::fs::write(f.path("kiln.toml"), manifest).expect("write manifest");
        assert!(f.project.reload_manifest().expect("reload"), "{option}");
        let report = f.build();
        assert_eq!(report.failed, 0, "{option}: {:#?}", report.diagnostics);
        let again: BTreeSet<String> = compiled(&report)
            .into_iter()
            .map(|id| id.split('@').next().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(again, surface, "{option}");
        for output in walk(&f.path("out/Surface")) {
            spirv_val(&std::fs::read(&output).expect("read"), option);
        }
    };

    // -g: the source and its file name are in the module.
    set(&mut f, "generate_debug_info = true");
    assert!(has_instruction(&pixel(), OP_STRING, &[]));
    // -fhlsl_functionality1: semantics as string decorations.
    set(&mut f, "hlsl_functionality1 = true");
    assert!(has_instruction(&pixel(), OP_DECORATE_STRING, &[]));
    // These change what glslang may write, not necessarily these bytes: they still rebuild.
    set(&mut f, "hlsl_offsets = true");
    set(&mut f, "nan_clamp = true");
    set(&mut f, "target_env = \"vulkan1.1\"");
    // Register b1 (PerObject) becomes binding 1 + the cbuffer base.
    let binding = |spirv: &[u32], n: u32| {
        has_instruction(spirv, OP_DECORATE, &[]) && {
            let mut at = 5;
            let mut found = false;
            while at < spirv.len() {
                let count = (spirv[at] >> 16) as usize;
                found |= spirv[at] & 0xffff == OP_DECORATE
                    && spirv.get(at + 2) == Some(&BINDING)
                    && spirv.get(at + 3) == Some(&n);
                at += count.max(1);
            }
            found
        }
    };
    assert!(binding(&pixel(), 1) && !binding(&pixel(), 21));
    set(&mut f, "[shader.glslang.binding_base]\nubo = 20");
    assert!(binding(&pixel(), 21) && !binding(&pixel(), 1));
}

/// `glslangValidator -V` on `source` (a file name whose extension says the stage) with
/// `flags`, its SPIR-V as words; `None` when glslangValidator is not installed.
fn validator_spirv(source: &str, text: &str, flags: &[&str]) -> Option<Vec<u32>> {
    if std::process::Command::new("glslangValidator")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var("KILN_REQUIRE_GLSLANG").as_deref() != Ok("1"),
            "KILN_REQUIRE_GLSLANG=1 but glslangValidator is not on PATH (Debian: glslang-tools)"
        );
        eprintln!("glslangValidator not found: {source} is not compared");
        return None;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join(source);
    let output = dir.path().join("out.spv");
    std::fs::write(&input, text).expect("write source");
    let run = std::process::Command::new("glslangValidator")
        .arg("-V")
        .args(flags)
        .arg("-o")
        .arg(&output)
        .arg(&input)
        .output()
        .expect("run glslangValidator");
    assert!(
        run.status.success(),
        "glslangValidator {flags:?} {source}: {}",
        String::from_utf8_lossy(&run.stdout)
    );
    Some(words(&std::fs::read(&output).expect("read spv")))
}

/// Each instruction of a module as (opcode, operands after the first word).
fn instructions(spirv: &[u32]) -> Vec<(u32, &[u32])> {
    let mut out = Vec::new();
    let mut at = 5;
    while at < spirv.len() {
        let count = ((spirv[at] >> 16) as usize).max(1);
        let end = (at + count).min(spirv.len());
        out.push((spirv[at] & 0xffff, &spirv[at + 1..end]));
        at += count;
    }
    out
}

/// The GLSL.std.450 instruction numbers an `OpExtInst` uses, sorted and unique.
fn glsl_std_450(spirv: &[u32]) -> BTreeSet<u32> {
    const OP_EXT_INST: u32 = 12;
    instructions(spirv)
        .into_iter()
        .filter(|(op, _)| *op == OP_EXT_INST)
        .filter_map(|(_, operands)| operands.get(3).copied())
        .collect()
}

/// The `Binding` decorations of a module, sorted.
fn bindings(spirv: &[u32]) -> Vec<u32> {
    const OP_DECORATE: u32 = 71;
    const BINDING: u32 = 33;
    let mut out: Vec<u32> = instructions(spirv)
        .into_iter()
        .filter_map(|(op, operands)| match (op, operands) {
            (OP_DECORATE, [_, BINDING, n]) => Some(*n),
            _ => None,
        })
        .collect();
    out.sort_unstable();
    out
}

/// Whether a module decorates anything with `UserSemantic` (`OpDecorateString`).
fn user_semantics(spirv: &[u32]) -> bool {
    const OP_DECORATE_STRING: u32 = 5632;
    const USER_SEMANTIC: u32 = 5635;
    instructions(spirv)
        .into_iter()
        .any(|(op, operands)| op == OP_DECORATE_STRING && operands.get(1) == Some(&USER_SEMANTIC))
}

const IO_HLSL: &str = "StructuredBuffer<float4> data : register(t2);\n\
float4 main(float4 pos : SV_Position, float2 uv : TEXCOORD0) : SV_Target\n\
{\n    return data[0] * uv.x;\n}\n";

const NAN_FRAG: &str = "#version 450\n\
layout(location = 0) in vec2 v;\n\
layout(location = 0) out vec4 o;\n\
void main() { o = vec4(min(v.x, v.y), max(v.x, v.y), clamp(v.x, v.y, 1.0), 1.0); }\n";

/// The SPIR-V kiln builds for one fragment shader `source` (`text`) with `options` under
/// `[shader.glslang]` (TOML lines, tables last).
fn kiln_spirv(source: &str, text: &str, options: &str) -> Vec<u32> {
    let manifest = format!(
        "[project]\ntargets = [\"spirv\"]\n\n[[shader]]\nname = \"S\"\nsource = \"shaders/{source}\"\n\n[shader.passes.P]\nstage = \"fragment\"\nentry = \"main\"\n\n[shader.glslang]\n{options}\n"
    );
    let mut f = fixture(
        &manifest,
        &[(&format!("shaders/{source}"), text.to_owned())],
    );
    let report = f.build();
    assert_eq!(
        (report.failed, report.variants),
        (0, 1),
        "{options}: {:#?}",
        report.diagnostics
    );
    let file = walk(&f.path("out/S"))
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "spv"))
        .expect("an output");
    let bytes = std::fs::read(file).expect("read spv");
    spirv_val(&bytes, options);
    words(&bytes)
}

/// `hlsl_iomap`, `hlsl_functionality1` and `nan_clamp`, which glslang's C interface has no
/// switch for, reach glslang through native/glslang_options.cpp: each changes the SPIR-V as
/// glslangValidator's `--hlsl-iomap`, `-fhlsl_functionality1` and `--nan-clamp` do on the
/// same source.
#[test]
fn the_options_glslangs_c_interface_lacks_change_the_spirv_as_glslang_validator_does() {
    if !require_glslang() {
        return;
    }
    // --hlsl-iomap: a StructuredBuffer at register t2 is a texture-class resource, shifted
    // by the texture base; without it glslang sees a storage buffer, which the ssbo base
    // (0 here) shifts.
    let shift = "[shader.glslang.binding_base]\ntexture = 10";
    let plain = kiln_spirv("io.hlsl", IO_HLSL, shift);
    let mapped = kiln_spirv("io.hlsl", IO_HLSL, &format!("hlsl_iomap = true\n{shift}"));
    assert_eq!(bindings(&plain), [2]);
    assert_eq!(bindings(&mapped), [12]);
    if let Some(reference) =
        validator_spirv("io.frag", IO_HLSL, &["-D", "-e", "main", "--stb", "10"])
    {
        assert_eq!(bindings(&reference), bindings(&plain));
    }
    if let Some(reference) = validator_spirv(
        "io.frag",
        IO_HLSL,
        &["-D", "-e", "main", "--hlsl-iomap", "--stb", "10"],
    ) {
        assert_eq!(bindings(&reference), bindings(&mapped));
    }

    // -fhlsl_functionality1: the HLSL semantics as UserSemantic string decorations.
    let semantics = kiln_spirv("io.hlsl", IO_HLSL, "hlsl_functionality1 = true");
    assert!(user_semantics(&semantics));
    assert!(!user_semantics(&plain));
    if let Some(reference) = validator_spirv(
        "io.frag",
        IO_HLSL,
        &["-D", "-e", "main", "-fhlsl_functionality1"],
    ) {
        assert!(user_semantics(&reference));
    }

    // --nan-clamp: min, max and clamp become GLSL.std.450's NaN-aware NMin, NMax, NClamp.
    const F_MIN_MAX_CLAMP: [u32; 3] = [37, 40, 43];
    const N_MIN_MAX_CLAMP: [u32; 3] = [79, 80, 81];
    let plain = glsl_std_450(&kiln_spirv("nan.frag", NAN_FRAG, ""));
    let clamped = glsl_std_450(&kiln_spirv("nan.frag", NAN_FRAG, "nan_clamp = true"));
    assert_eq!(plain, BTreeSet::from(F_MIN_MAX_CLAMP));
    assert_eq!(clamped, BTreeSet::from(N_MIN_MAX_CLAMP));
    if let Some(reference) = validator_spirv("nan.frag", NAN_FRAG, &[]) {
        assert_eq!(glsl_std_450(&reference), plain);
    }
    if let Some(reference) = validator_spirv("nan.frag", NAN_FRAG, &["--nan-clamp"]) {
        assert_eq!(glsl_std_450(&reference), clamped);
    }
}
