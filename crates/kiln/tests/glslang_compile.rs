//! glslang as a compiler: GLSL and HLSL (our own test shaders in `tests/shaders/glslang/`)
//! to SPIR-V that `spirv-val` accepts, every stage naga lacks, located errors, and the clear
//! error of a build without the `glslang` feature.
//!
//! Needs the `glslang` feature; without it each test prints why it is skipped, and fails if
//! `KILN_REQUIRE_GLSLANG=1` (CI sets it and builds with the feature).

mod common;

use common::glslang::{require_glslang, spirv_val, spirv_val_env};
use kiln::compile::{
    compile_with, CompileError, CompilePhase, CompileRequest, Constants, FrontEnd, GlslangOptions,
    Optimization, SourceLanguage, Stage, Target, TargetConfig, TargetResult, VulkanVersion,
};

/// glslang's results for each of `targets`.
fn glslang(
    options: GlslangOptions,
    language: SourceLanguage,
    text: &str,
    stage: Stage,
    entry: &str,
    targets: &[TargetConfig],
) -> Result<Vec<TargetResult>, CompileError> {
    let constants = Constants::new();
    let request = CompileRequest {
        language,
        text,
        stage,
        entry,
        constants: &constants,
    };
    let slots: Vec<Option<&TargetConfig>> = targets.iter().map(Some).collect();
    let results = compile_with(&FrontEnd::Glslang(options), &request, &slots)?;
    Ok(results
        .into_iter()
        .map(|r| r.expect("every target asked has a result"))
        .collect())
}

fn shader(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/shaders/glslang")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn spirv(language: SourceLanguage, text: &str, stage: Stage, entry: &str) -> Vec<u8> {
    let targets = [TargetConfig::new(Target::Spirv)];
    let mut results = glslang(
        GlslangOptions::default(),
        language,
        text,
        stage,
        entry,
        &targets,
    )
    .unwrap_or_else(|e| panic!("{entry} ({stage}): {e}"));
    results.remove(0).unwrap_or_else(|e| panic!("{entry}: {e}"))
}

#[test]
fn without_the_feature_a_glslang_shader_fails_with_what_to_install() {
    if kiln::compile::glslang::AVAILABLE {
        return;
    }
    let e = glslang(
        GlslangOptions::default(),
        SourceLanguage::Hlsl,
        "float4 main() : SV_Target { return 1; }",
        Stage::Fragment,
        "main",
        &[TargetConfig::new(Target::Spirv)],
    )
    .expect_err("no glslang in this build");
    assert_eq!(e.phase, CompilePhase::Unsupported);
    assert!(e.message.contains("default features"), "{e}");
}

#[test]
fn vulkan_glsl_stages_compile_to_valid_spirv() {
    if !require_glslang() {
        return;
    }
    let cases = [
        ("textured.vert", Stage::Vertex),
        ("textured.frag", Stage::Fragment),
        ("explode.geom", Stage::Geometry),
        ("patch.tesc", Stage::TessControl),
        ("patch.tese", Stage::TessEvaluation),
        ("histogram.comp", Stage::Compute),
    ];
    for (file, stage) in cases {
        let bytes = spirv(SourceLanguage::Glsl, &shader(file), stage, "main");
        assert_eq!(
            &bytes[..4],
            &0x0723_0203u32.to_le_bytes(),
            "{file}: SPIR-V magic"
        );
        spirv_val(&bytes, file);
    }
}

#[test]
fn hlsl_entry_points_of_one_file_compile_to_valid_spirv() {
    if !require_glslang() {
        return;
    }
    let text = shader("surface.hlsl");
    for (entry, stage) in [("VSMain", Stage::Vertex), ("PSMain", Stage::Fragment)] {
        let bytes = spirv(SourceLanguage::Hlsl, &text, stage, entry);
        spirv_val(&bytes, entry);
    }
}

/// `optimization` runs SPIRV-Tools' recipes: for HLSL after its legalization passes, which
/// also run at `zero` (glslang writes a resource passed to a function as a function-local
/// copy, which only legalization makes valid Vulkan SPIR-V). Every level differs from the
/// others and passes `spirv-val`.
#[test]
fn hlsl_is_legalized_and_each_optimization_level_is_valid() {
    if !require_glslang() {
        return;
    }
    let text = "Texture2D Albedo : register(t0);\nSamplerState Linear : register(s0);\n\
        float4 fetch(Texture2D t, SamplerState s, float2 uv) { return t.Sample(s, uv); }\n\
        float4 main(float2 uv : TEXCOORD0) : SV_Target {\n\
        float4 c = 0;\n\
        for (int i = 0; i < 4; i++) { c += fetch(Albedo, Linear, uv * (i + 1)) * 0.25; }\n\
        return c;\n}\n";
    let compile = |optimization| {
        let options = GlslangOptions {
            optimization,
            ..GlslangOptions::default()
        };
        glslang(
            options,
            SourceLanguage::Hlsl,
            text,
            Stage::Fragment,
            "main",
            &[TargetConfig::new(Target::Spirv)],
        )
        .expect("compiles")
        .remove(0)
        .expect("spirv")
    };
    let zero = compile(Optimization::Zero);
    let fast = compile(Optimization::Performance);
    let small = compile(Optimization::Size);
    spirv_val(&zero, "legalized HLSL");
    spirv_val(&fast, "HLSL, performance");
    spirv_val(&small, "HLSL, size");
    assert_ne!(zero, fast, "the performance passes changed nothing");
    assert_ne!(zero, small, "the size passes changed nothing");
    assert!(fast.len() < zero.len(), "{} >= {}", fast.len(), zero.len());
}

#[test]
fn errors_carry_the_line_of_the_compiled_text() {
    if !require_glslang() {
        return;
    }
    let text = "#version 450\nlayout(location = 0) out vec4 o;\nvoid main() {\n  o = undeclared_thing;\n}\n";
    let e = glslang(
        GlslangOptions::default(),
        SourceLanguage::Glsl,
        text,
        Stage::Fragment,
        "main",
        &[TargetConfig::new(Target::Spirv)],
    )
    .expect_err("undeclared identifier");
    assert_eq!(e.phase, CompilePhase::Parse);
    assert!(e.message.contains("undeclared_thing"), "{e}");
    assert_eq!(e.location.map(|l| l.line), Some(4), "{e:?}");
}

#[test]
fn options_reach_glslang() {
    if !require_glslang() {
        return;
    }
    let text = shader("textured.frag");
    let compile = |optimization| {
        let targets = [TargetConfig::new(Target::Spirv)];
        let options = GlslangOptions {
            optimization,
            ..GlslangOptions::default()
        };
        let mut results = glslang(
            options,
            SourceLanguage::Glsl,
            &text,
            Stage::Fragment,
            "main",
            &targets,
        )
        .expect("compiles");
        results.remove(0).expect("spirv")
    };
    let zero = compile(Optimization::Zero);
    let fast = compile(Optimization::Performance);
    assert_ne!(zero, fast, "the optimiser changed nothing");
    spirv_val(&fast, "optimised");
    // The SPIR-V target's version reaches glslang (word 1 of the header).
    let mut options = std::collections::BTreeMap::new();
    options.insert("version".to_owned(), "1.3".to_owned());
    let spirv13 = [TargetConfig::parse("spirv", &options).expect("valid")];
    let bytes = glslang(
        GlslangOptions::default(),
        SourceLanguage::Glsl,
        &text,
        Stage::Fragment,
        "main",
        &spirv13,
    )
    .expect("compiles")
    .remove(0)
    .expect("spirv");
    assert_eq!(&bytes[4..8], &0x0001_0300u32.to_le_bytes());
}

#[test]
fn other_targets_of_a_glslang_module_fail_for_that_pair_only() {
    if !require_glslang() {
        return;
    }
    let targets = [
        TargetConfig::new(Target::Spirv),
        TargetConfig::new(Target::Msl),
    ];
    let results = glslang(
        GlslangOptions::default(),
        SourceLanguage::Glsl,
        &shader("explode.geom"),
        Stage::Geometry,
        "main",
        &targets,
    )
    .expect("compiles");
    assert!(results[0].is_ok());
    let e = results[1].clone().expect_err("no geometry in msl");
    assert_eq!(e.phase, CompilePhase::Unsupported);
    assert!(e.message.contains("unsupported by target msl"), "{e}");
}

/// `target_env` is the Vulkan version glslang compiles for. Without a SPIR-V target, the
/// SPIR-V that the other targets are translated from is the newest that version consumes
/// (as glslc writes for `--target-env` alone): a subgroup operation, which needs SPIR-V 1.3,
/// then builds GLSL. An environment older than the SPIR-V target's version is refused.
#[test]
fn target_env_chooses_the_vulkan_version_and_its_spir_v() {
    if !require_glslang() {
        return;
    }
    let text = "#version 450\n#extension GL_KHR_shader_subgroup_arithmetic : require\nlayout(local_size_x = 64) in;\nlayout(set = 0, binding = 0, std430) buffer Data { float d[]; };\nvoid main() {\n  d[gl_GlobalInvocationID.x] = subgroupAdd(d[gl_GlobalInvocationID.x]);\n}\n";
    let glsl = [TargetConfig::new(Target::Glsl)];
    let compile = |options, targets: &[TargetConfig]| {
        glslang(
            options,
            SourceLanguage::Glsl,
            text,
            Stage::Compute,
            "main",
            targets,
        )
    };
    let e = compile(GlslangOptions::default(), &glsl).expect_err("SPIR-V 1.0");
    assert!(e.message.contains("requires SPIR-V 1.3"), "{e}");
    let vulkan11 = GlslangOptions {
        target_env: Some(VulkanVersion::V1_1),
        ..GlslangOptions::default()
    };
    let out = compile(vulkan11, &glsl).expect("compiles").remove(0);
    let out = String::from_utf8(out.expect("glsl")).expect("text");
    assert!(out.contains("subgroupAdd("), "{out}");

    let mut options = std::collections::BTreeMap::new();
    options.insert("version".to_owned(), "1.3".to_owned());
    let spirv13 = [TargetConfig::parse("spirv", &options).expect("valid")];
    let bytes = compile(vulkan11, &spirv13)
        .expect("compiles")
        .remove(0)
        .expect("spirv");
    spirv_val_env(&bytes, "vulkan1.1 subgroups", "vulkan1.1");
    let vulkan10 = GlslangOptions {
        target_env: Some(VulkanVersion::V1_0),
        ..GlslangOptions::default()
    };
    let e = compile(vulkan10, &spirv13).expect_err("too old");
    assert_eq!(e.phase, CompilePhase::Unsupported);
    assert!(
        e.message.contains(
            "target_env vulkan1.0 consumes SPIR-V up to 1.0, but the spirv target's version is 1.3"
        ),
        "{e}"
    );
}
