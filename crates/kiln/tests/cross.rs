//! SPIR-V written by the reference front ends (`glslc`, `glslangValidator`) from our own
//! shaders in `tests/cross/`, translated to every target by `kiln::compile::cross`.
//!
//! The front ends run as executables here (kiln's in-process glslang is another module's
//! business): without them the tests print why they skip, and `KILN_REQUIRE_GLSLANG=1`
//! (set by CI) makes their absence a failure. MSL, HLSL and GLSL need the `glslang` feature
//! (SPIRV-Cross); without it those targets must fail with an error naming the feature.

use kiln::compile::cross::{self, Translator};
use kiln::compile::{CompileError, CompilePhase, Stage, Target, TargetConfig};
use std::path::{Path, PathBuf};
use std::process::Command;

fn shader_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cross")
}

/// Runs a front end; `None` (after saying why) when it is not installed and not required.
fn front_end(program: &str, args: &[&str], source: &str) -> Option<Vec<u32>> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("out.spv");
    let result = Command::new(program)
        .args(args)
        .arg("-o")
        .arg(&out)
        .arg(shader_dir().join(source))
        .output();
    let output = match result {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            assert!(
                std::env::var_os("KILN_REQUIRE_GLSLANG").is_none_or(|v| v != "1"),
                "KILN_REQUIRE_GLSLANG=1 but `{program}` is not installed"
            );
            eprintln!(
                "skipped: `{program}` is not installed (apt-get install glslc glslang-tools)"
            );
            return None;
        }
        Err(e) => panic!("cannot run {program}: {e}"),
    };
    assert!(
        output.status.success(),
        "{program} failed on {source}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let bytes = std::fs::read(&out).expect("the front end's output");
    assert_eq!(bytes.len() % 4, 0, "{source}: SPIR-V is whole words");
    Some(
        bytes
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect(),
    )
}

fn glslc(source: &str) -> Option<Vec<u32>> {
    front_end("glslc", &[], source)
}

fn hlsl(source: &str, entry: &str, stage: &str) -> Option<Vec<u32>> {
    front_end(
        "glslangValidator",
        &["-V", "-D", "-e", entry, "-S", stage],
        source,
    )
}

fn text(result: Result<Vec<u8>, CompileError>, what: &str) -> String {
    match result {
        Ok(bytes) => String::from_utf8(bytes).expect("translators write UTF-8 text"),
        Err(e) => panic!("{what}: {e}"),
    }
}

/// What each text target must say about a translated shader: the language's own markers,
/// and the shader's resources under the names the source gave them.
fn assert_translated(target: Target, source: &str, out: &str, resources: &[&str]) {
    let marker = match target {
        Target::Msl => "#include <metal_stdlib>",
        Target::Hlsl => "SPIRV_Cross_",
        Target::Glsl => "#version 450",
        Target::Wgsl => "@",
        Target::Spirv | Target::Reflection => unreachable!("not a translated text"),
    };
    assert!(
        out.contains(marker),
        "{source} -> {target}: no `{marker}` in\n{out}"
    );
    for name in resources {
        assert!(
            out.contains(name),
            "{source} -> {target}: `{name}` missing from\n{out}"
        );
    }
}

/// A WGSL output parses and validates again with naga.
fn assert_wgsl_reparses(source: &str, wgsl: &str) {
    let module = naga::front::wgsl::parse_str(wgsl).unwrap_or_else(|e| {
        panic!(
            "{source}: WGSL output does not parse: {}\n{wgsl}",
            e.message()
        )
    });
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{source}: WGSL output does not validate: {e}\n{wgsl}"));
}

struct Case {
    source: &'static str,
    spirv: Vec<u32>,
    stage: Stage,
    entry: &'static str,
    resources: &'static [&'static str],
}

fn cases() -> Option<Vec<Case>> {
    Some(vec![
        Case {
            source: "lit.frag",
            spirv: glslc("lit.frag")?,
            stage: Stage::Fragment,
            entry: "main",
            resources: &[
                "albedo",
                "material",
                "light_colors",
                "frame",
                "LIGHT_COUNT",
                "EXPOSURE",
            ],
        },
        Case {
            source: "tint.frag",
            spirv: glslc("tint.frag")?,
            stage: Stage::Fragment,
            entry: "main",
            resources: &["tint", "STRENGTH"],
        },
        Case {
            source: "lit.vert",
            spirv: glslc("lit.vert")?,
            stage: Stage::Vertex,
            entry: "main",
            resources: &["camera", "view_projection", "push"],
        },
        Case {
            source: "scale.comp",
            spirv: glslc("scale.comp")?,
            stage: Stage::Compute,
            entry: "main",
            resources: &["data", "params", "SCALE"],
        },
        Case {
            source: "unlit.hlsl (PSMain)",
            spirv: hlsl("unlit.hlsl", "PSMain", "frag")?,
            stage: Stage::Fragment,
            entry: "PSMain",
            resources: &["diffuse", "tint"],
        },
        Case {
            source: "unlit.hlsl (VSMain)",
            spirv: hlsl("unlit.hlsl", "VSMain", "vert")?,
            stage: Stage::Vertex,
            entry: "VSMain",
            resources: &["world_view_projection"],
        },
    ])
}

#[test]
fn spirv_from_the_front_ends_reaches_every_text_target() {
    let Some(cases) = cases() else { return };
    for case in &cases {
        for target in [Target::Msl, Target::Hlsl, Target::Glsl] {
            let config = TargetConfig::new(target);
            let result = cross::from_spirv(&case.spirv, case.stage, case.entry, &config);
            if cfg!(feature = "glslang") {
                let out = text(result, &format!("{} -> {target}", case.source));
                assert_translated(target, case.source, &out, case.resources);
                // Specialization constants stay specializable: Metal function constants,
                // macros a pipeline can define elsewhere.
                if case.source.starts_with("lit.frag") {
                    let spec = match target {
                        Target::Msl => "[[function_constant(0)]]",
                        _ => "SPIRV_CROSS_CONSTANT_ID_0",
                    };
                    assert!(
                        out.contains(spec),
                        "{} -> {target}: no `{spec}` in\n{out}",
                        case.source
                    );
                }
            } else {
                let e = result.expect_err("SPIRV-Cross is not built");
                assert!(e.message.contains("default features"), "{e}");
            }
        }
    }
}

#[test]
fn wgsl_comes_from_naga_and_parses_again() {
    let Some(cases) = cases() else { return };
    let config = TargetConfig::new(Target::Wgsl);
    for case in &cases {
        // Validated with every capability: which ones kiln grants each target is the
        // manifest's business (push constants need one).
        let result = cross::translate(
            Translator::Naga,
            &case.spirv,
            case.entry,
            Some(case.stage),
            &config
                .clone()
                .with_capabilities(naga::valid::Capabilities::all()),
        );
        match case.source {
            // Known limits of naga's SPIR-V front end (naga 30), asserted so that a naga
            // update that lifts them shows up here: a combined image sampler loaded from
            // a variable (every GLSL `sampler2D`) ...
            "lit.frag" => {
                let e = result.expect_err("naga reads no loaded combined image sampler");
                assert!(e.message.contains("invalid id"), "{e}");
            }
            // ... and a workgroup size from specialization constants.
            "scale.comp" => {
                let e = result.expect_err("naga reads no specialized workgroup size");
                assert!(
                    e.message.contains("Initializer must be a const-expression"),
                    "{e}"
                );
            }
            _ => {
                let out = text(result, &format!("{} -> wgsl", case.source));
                assert_translated(Target::Wgsl, case.source, &out, case.resources);
                assert_wgsl_reparses(case.source, &out);
                // A specialization constant stays one: a WGSL pipeline-overridable constant.
                if case.source == "tint.frag" {
                    assert!(out.contains("@id(3) override"), "{out}");
                }
            }
        }
    }
}

#[test]
fn target_options_reach_spirv_cross() {
    if !cfg!(feature = "glslang") {
        return;
    }
    let Some(spirv) = glslc("lit.frag") else {
        return;
    };
    let options = |name: &str, pairs: &[(&str, &str)]| {
        let map = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TargetConfig::parse(name, &map).expect("valid target options")
    };
    let run = |config: &TargetConfig| {
        text(
            cross::from_spirv(&spirv, Stage::Fragment, "main", config),
            &config.options_string(),
        )
    };
    let es = run(&options("glsl", &[("version", "310"), ("es", "true")]));
    assert!(es.starts_with("#version 310 es"), "{es}");
    let gl = run(&options("glsl", &[("version", "430")]));
    assert!(gl.starts_with("#version 430"), "{gl}");
    // MSL 2.1 and 1.2 differ in what SPIRV-Cross may use; the output names the version it
    // targets only through the features it uses, so compare the two texts.
    let msl_21 = run(&options("msl", &[("version", "2.1")]));
    let msl_30 = run(&options("msl", &[("version", "3.0")]));
    assert!(msl_21.contains("main0") && msl_30.contains("main0"));
    let sm50 = run(&options("hlsl", &[("shader_model", "5.0")]));
    let sm60 = run(&options("hlsl", &[("shader_model", "6.0")]));
    assert!(sm50.contains("Texture2D") && sm60.contains("Texture2D"));
}

#[test]
fn spirv_passes_through_unchanged() {
    let Some(spirv) = glslc("lit.vert") else {
        return;
    };
    let bytes = cross::from_spirv(
        &spirv,
        Stage::Vertex,
        "main",
        &TargetConfig::new(Target::Spirv),
    )
    .expect("SPIR-V is its own artifact");
    let expected: Vec<u8> = spirv.iter().flat_map(|w| w.to_le_bytes()).collect();
    assert_eq!(bytes, expected);
}

#[test]
fn a_missing_entry_or_wrong_stage_is_a_clear_error() {
    let Some(spirv) = hlsl("unlit.hlsl", "PSMain", "frag") else {
        return;
    };
    let mut targets = vec![Target::Wgsl];
    if cfg!(feature = "glslang") {
        targets.extend([Target::Msl, Target::Hlsl, Target::Glsl]);
    }
    for target in targets {
        let config = TargetConfig::new(target);
        let e = cross::from_spirv(&spirv, Stage::Fragment, "VSMain", &config).unwrap_err();
        assert_eq!(e.phase, CompilePhase::Parse, "{target}: {e}");
        assert!(
            e.message.contains("no fragment entry point named `VSMain`")
                && e.message.contains("`PSMain`"),
            "{target}: {e}"
        );
        let e = cross::from_spirv(&spirv, Stage::Vertex, "PSMain", &config).unwrap_err();
        assert!(
            e.message.contains("no vertex entry point named `PSMain`"),
            "{target}: {e}"
        );
    }
}

#[test]
fn broken_spirv_is_an_error_for_every_target() {
    let Some(spirv) = glslc("lit.frag") else {
        return;
    };
    // Cut the module inside its first instruction of more than one word.
    let mut at = 5;
    while spirv[at] >> 16 < 2 {
        at += (spirv[at] >> 16).max(1) as usize;
    }
    let truncated = &spirv[..at + 1];
    for target in Target::ALL {
        let config = TargetConfig::new(target);
        let e = cross::from_spirv(truncated, Stage::Fragment, "main", &config).unwrap_err();
        assert_eq!(e.phase, CompilePhase::Parse, "{target}: {e}");
        assert!(
            e.message
                .starts_with("invalid SPIR-V: the instruction at word"),
            "{target}: {e}"
        );
    }
}

/// Rewrites the execution model of every `OpEntryPoint` to `model`.
fn with_execution_model(spirv: &[u32], model: u32) -> Vec<u32> {
    let mut words = spirv.to_vec();
    let mut at = 5;
    while at < words.len() {
        let (count, opcode) = ((words[at] >> 16) as usize, words[at] & 0xffff);
        if opcode == 15 {
            words[at + 1] = model;
        }
        at += count.max(1);
    }
    words
}

#[test]
fn a_naga_panic_fails_that_translation_alone() {
    let Some(spirv) = glslc("arrays.frag") else {
        return;
    };
    let every =
        |target| TargetConfig::new(target).with_capabilities(naga::valid::Capabilities::all());
    // naga 30's GLSL writer reaches `unreachable!()` on an array of samplers.
    let e = cross::translate(
        Translator::Naga,
        &spirv,
        "main",
        Some(Stage::Fragment),
        &every(Target::Glsl),
    )
    .unwrap_err();
    assert_eq!(e.phase, CompilePhase::Panic, "{e}");
    assert!(e.message.starts_with("naga panicked during emit"), "{e}");
    // The same module still translates to MSL afterwards.
    let msl = cross::translate(
        Translator::Naga,
        &spirv,
        "main",
        Some(Stage::Fragment),
        &every(Target::Msl),
    );
    assert!(text(msl, "arrays.frag -> msl after a panic").contains("fragment"));
    // SPIRV-Cross refuses arrays of separate samplers for OpenGL with its reason.
    if cfg!(feature = "glslang") {
        let e = cross::from_spirv(
            &spirv,
            Stage::Fragment,
            "main",
            &TargetConfig::new(Target::Glsl),
        )
        .unwrap_err();
        assert_eq!(e.phase, CompilePhase::Emit, "{e}");
        assert!(e.message.starts_with("glsl through SPIRV-Cross: "), "{e}");
        assert!(
            e.message.contains("arrays or structs of separate samplers"),
            "{e}"
        );
    }
}

#[test]
fn a_spirv_cross_panic_fails_that_translation_alone() {
    if !cfg!(feature = "glslang") {
        return;
    }
    let Some(spirv) = glslc("lit.frag") else {
        return;
    };
    // An execution model no SPIR-V version defines: SPIRV-Cross keeps it, and the bindings
    // panic on it in a debug build (and skip the entry point in a release build).
    let unknown = with_execution_model(&spirv, 0x7ff0);
    let e = cross::translate(
        Translator::SpirvCross,
        &unknown,
        "main",
        None,
        &TargetConfig::new(Target::Msl),
    )
    .unwrap_err();
    if cfg!(debug_assertions) {
        assert_eq!(e.phase, CompilePhase::Panic, "{e}");
        assert!(
            e.message.starts_with("SPIRV-Cross panicked during emit"),
            "{e}"
        );
    } else {
        assert!(e.message.contains("no entry point named `main`"), "{e}");
    }
    // The same process translates the intact module afterwards.
    let out = text(
        cross::from_spirv(
            &spirv,
            Stage::Fragment,
            "main",
            &TargetConfig::new(Target::Msl),
        ),
        "lit.frag -> msl after a panic",
    );
    assert!(out.contains("main0"));
}

/// What SPIRV-Cross and naga make of the stages kiln's `Stage` does not name (selected by
/// entry name alone): GLSL has geometry and tessellation; MSL has tessellation (as MoltenVK
/// runs it) and no geometry; SPIRV-Cross writes no usable HLSL for either; naga reads none.
#[test]
fn stages_naga_lacks_translate_where_the_target_has_them() {
    let (Some(geom), Some(tesc), Some(tese)) =
        (glslc("fan.geom"), glslc("patch.tesc"), glslc("patch.tese"))
    else {
        return;
    };
    let run = |translator, spirv: &[u32], target| {
        cross::translate(translator, spirv, "main", None, &TargetConfig::new(target))
    };
    let stages = [
        ("fan.geom", &geom),
        ("patch.tesc", &tesc),
        ("patch.tese", &tese),
    ];
    for (source, spirv) in stages {
        let naga = run(Translator::Naga, spirv, Target::Wgsl).unwrap_err();
        assert_eq!(naga.phase, CompilePhase::Parse, "{source}: {naga}");
        assert!(
            naga.message.contains("unsupported execution model"),
            "{source}: {naga}"
        );
        if !cfg!(feature = "glslang") {
            continue;
        }
        let glsl = text(run(Translator::SpirvCross, spirv, Target::Glsl), source);
        assert!(glsl.starts_with("#version 450"), "{source}: {glsl}");
        let hlsl = run(Translator::SpirvCross, spirv, Target::Hlsl).unwrap_err();
        assert_eq!(hlsl.phase, CompilePhase::Unsupported, "{source}: {hlsl}");
        assert!(
            hlsl.message
                .contains("shaders are unsupported by target hlsl"),
            "{source}: {hlsl}"
        );
        let msl = run(Translator::SpirvCross, spirv, Target::Msl);
        if source == "fan.geom" {
            let e = msl.unwrap_err();
            assert_eq!(e.phase, CompilePhase::Unsupported, "{e}");
            assert!(e.message.contains("Metal has no geometry shaders"), "{e}");
        } else {
            let out = text(msl, source);
            let marker = if source == "patch.tesc" {
                "kernel void main0"
            } else {
                "[[ patch(triangle, 0) ]] vertex"
            };
            assert!(out.contains(marker), "{source}: {out}");
        }
    }
    if cfg!(feature = "glslang") {
        let geometry = text(run(Translator::SpirvCross, &geom, Target::Glsl), "fan.geom");
        assert!(geometry.contains("EmitVertex()"), "{geometry}");
    }
}

/// Direct3D has no point size: the HLSL of a shader that writes `gl_PointSize` drops it, and
/// the targets that have one keep it.
#[test]
fn point_size_is_dropped_only_where_the_target_has_none() {
    if !cfg!(feature = "glslang") {
        return;
    }
    let Some(spirv) = glslc("sprite.vert") else {
        return;
    };
    let run = |target| {
        text(
            cross::from_spirv(&spirv, Stage::Vertex, "main", &TargetConfig::new(target)),
            &format!("sprite.vert -> {target}"),
        )
    };
    let hlsl = run(Target::Hlsl);
    assert!(
        hlsl.contains("SV_Position") && !hlsl.contains("PSIZE"),
        "{hlsl}"
    );
    assert!(run(Target::Msl).contains("[[point_size]]"));
    assert!(run(Target::Glsl).contains("gl_PointSize = a_size"));
}
