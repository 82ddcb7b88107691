//! End to end through the pipeline with Slang, as `glslang_project.rs` does with glslang: a
//! project whose shaders `import` modules from a search directory and branch on keywords.
//! A cold build compiles every variant to SPIR-V that the vendored SPIRV-Tools validator
//! accepts (Debian's `spirv-val` is older than Slang's output); a warm build compiles
//! nothing; an edit of an imported module recompiles exactly the variants that can read it; a
//! new module file that shadows the imported one (an earlier place on Slang's search path)
//! rebuilds them from the new file; a broken shader fails alone, naming its file and line.
//!
//! Needs the Slang compiler library (`pip install slangpy`, or `KILN_SLANG_LIBRARY`): without
//! it the tests print why they skip, and fail when `KILN_REQUIRE_SLANG=1`.

use kiln::pipeline::{BuildReport, Outcome};
use kiln_test_support::{LiveProject, TempProject};
use std::collections::BTreeSet;

const MANIFEST: &str = r#"
[project]
targets = ["spirv", "glsl"]

[[shader]]
name = "Lit"
source = "shaders/lit.slang"
include_dirs = ["shaders/modules"]
axes = [["_", "FOG"], ["_", "SHADOWS"]]

[shader.slang]
matrix_layout = "column_major"

[shader.passes.Vertex]
stage = "vertex"
entry = "vertexMain"

[shader.passes.Fragment]
stage = "fragment"
entry = "fragmentMain"

[[shader]]
name = "Sky"
source = "shaders/sky.slang"
include_dirs = ["shaders/modules"]

[shader.passes.Fragment]
stage = "fragment"
entry = "fragmentMain"
"#;

const LIT: &str = r#"// A lit surface: a module, and keyword blocks around an import and code.
import lighting;
#ifdef SHADOWS
import shadow_utils;
#endif

struct VertexOut
{
    float4 position : SV_Position;
    float3 normal : NORMAL;
};

[shader("vertex")]
VertexOut vertexMain(float3 position : POSITION, float3 normal : NORMAL)
{
    VertexOut output;
    output.position = float4(position, 1.0);
    output.normal = normal;
    return output;
}

[shader("fragment")]
float4 fragmentMain(VertexOut input) : SV_Target
{
    float3 color = lambert(normalize(input.normal));
#ifdef SHADOWS
    color *= shadowFactor(input.position.z);
#endif
#ifdef FOG
    color = lerp(color, float3(0.6, 0.7, 0.8), 0.25);
#endif
    return float4(color, 1.0);
}
"#;

const LIGHTING: &str = r#"module lighting;

public float3 lambert(float3 normal)
{
    return max(dot(normal, normalize(float3(0.3, 0.8, 0.5))), 0.0) * float3(1.0, 0.95, 0.9);
}
"#;

const SHADOW_UTILS: &str = r#"module shadow_utils;

public float shadowFactor(float depth)
{
    return depth > 0.5 ? 0.4 : 1.0;
}
"#;

const SKY: &str = r#"// The sky: no module.
[shader("fragment")]
float4 fragmentMain(float4 position : SV_Position) : SV_Target
{
    return float4(0.4, 0.6, 0.9, 1.0) * (1.0 - position.y * 0.001);
}
"#;

/// Lit: 4 keyword sets x 2 passes; Sky: 1.
const VARIANTS: usize = 8 + 1;

/// Whether the Slang library can be found. Without it the caller skips, saying why, unless
/// `KILN_REQUIRE_SLANG=1` (as in CI), which makes its absence a failure.
fn require_slang() -> bool {
    match kiln::compile::slang::version() {
        Ok(_) => true,
        Err(e) => {
            assert!(
                std::env::var("KILN_REQUIRE_SLANG").as_deref() != Ok("1"),
                "KILN_REQUIRE_SLANG=1 but {e}"
            );
            eprintln!("skipped: {e}");
            false
        }
    }
}

/// Validates SPIR-V with the vendored SPIRV-Tools (Vulkan 1.1, SPIR-V 1.3).
fn validate(bytes: &[u8], what: &str) {
    use spirv_tools::val::Validator;
    assert!(bytes.len().is_multiple_of(4), "{what}: not whole words");
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let validator = spirv_tools::val::create(Some(spirv_tools::TargetEnv::Vulkan_1_1));
    if let Err(e) = validator.validate(&words, None) {
        panic!("{what}: the SPIRV-Tools validator rejects it: {e}");
    }
}

fn fixture() -> LiveProject {
    TempProject::from_files([
        ("kiln.toml", MANIFEST),
        ("shaders/lit.slang", LIT),
        ("shaders/sky.slang", SKY),
        ("shaders/modules/lighting.slang", LIGHTING),
        ("shaders/modules/shadow-utils.slang", SHADOW_UTILS),
    ])
    .live()
}

fn compiled(report: &BuildReport) -> BTreeSet<String> {
    report
        .outcomes
        .iter()
        .filter(|(_, outcome)| **outcome == Outcome::Compiled)
        .map(|(id, _)| id.to_string())
        .collect()
}

fn lit_variants() -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    for pass in ["Vertex", "Fragment"] {
        for keywords in ["", "FOG", "SHADOWS", "FOG;SHADOWS"] {
            all.insert(format!("Lit/{pass}[{keywords}]"));
        }
    }
    all
}

#[test]
fn a_slang_project_with_modules_builds_incrementally_and_never_stale() {
    if !require_slang() {
        return;
    }
    let mut f = fixture();

    let cold = f.build();
    assert_eq!(cold.failed, 0, "{:#?}", cold.diagnostics);
    assert_eq!(cold.variants, VARIANTS);
    assert_eq!(cold.compiled + cold.deduplicated, VARIANTS, "{cold:?}");
    for variant in [
        "Lit/Fragment/FOG+SHADOWS.spv",
        "Lit/Vertex/_.spv",
        "Sky/Fragment/_.spv",
    ] {
        let bytes = std::fs::read(f.path(&format!("out/{variant}")))
            .unwrap_or_else(|e| panic!("{variant}: {e}"));
        validate(&bytes, variant);
    }
    let glsl = f.read("out/Lit/Fragment/FOG+SHADOWS.glsl");
    assert!(glsl.contains("void main()"), "{glsl}");
    f.assert_same_as_clean("cold");

    // Warm, same process and a new one: nothing compiled.
    assert!(compiled(&f.build()).is_empty());
    let mut fresh = f.open();
    let warm = fresh.build(&|_| {}).expect("build");
    assert_eq!(
        (warm.compiled, warm.failed, warm.outputs_written),
        (0, 0, 0)
    );
    drop(fresh);

    // An edit of an imported module: every Lit variant, no Sky variant.
    let before = std::fs::read(f.path("out/Lit/Fragment/_.spv")).expect("output");
    f.edit(
        "shaders/modules/lighting.slang",
        "float3(1.0, 0.95, 0.9)",
        "float3(0.5, 0.5, 0.5)",
    );
    let edit = f.build();
    assert_eq!(edit.failed, 0, "{:#?}", edit.diagnostics);
    assert_eq!(compiled(&edit), lit_variants());
    let edited = std::fs::read(f.path("out/Lit/Fragment/_.spv")).expect("output");
    assert_ne!(edited, before);
    f.assert_same_as_clean("module edit");

    // A module file placed where Slang looks first (the importing file's directory) shadows
    // the search directory's: Lit rebuilds from it.
    f.write(
        "shaders/lighting.slang",
        LIGHTING
            .replace("float3(0.5, 0.5, 0.5)", "float3(0.0, 1.0, 0.0)")
            .replace("float3(1.0, 0.95, 0.9)", "float3(0.0, 1.0, 0.0)"),
    );
    let shadowed = f.build();
    assert_eq!(shadowed.failed, 0, "{:#?}", shadowed.diagnostics);
    assert_eq!(compiled(&shadowed), lit_variants());
    assert_ne!(
        std::fs::read(f.path("out/Lit/Fragment/_.spv")).expect("output"),
        edited
    );
    f.assert_same_as_clean("a shadowing module");
    // And removing it goes back to the search directory's module.
    f.remove("shaders/lighting.slang");
    let unshadowed = f.build();
    assert_eq!(unshadowed.failed, 0, "{:#?}", unshadowed.diagnostics);
    assert_eq!(
        std::fs::read(f.path("out/Lit/Fragment/_.spv")).expect("output"),
        edited
    );
    f.assert_same_as_clean("the shadowing module removed");
}

#[test]
fn a_broken_slang_shader_fails_alone_naming_its_file_and_line() {
    if !require_slang() {
        return;
    }
    let mut f = fixture();
    assert_eq!(f.build().failed, 0);
    f.edit(
        "shaders/modules/shadow-utils.slang",
        "return depth > 0.5 ? 0.4 : 1.0;",
        "return depht > 0.5 ? 0.4 : 1.0;",
    );
    let broken = f.build();
    // The SHADOWS variants of the fragment pass read it; the vertex pass imports it too (the
    // whole file is each pass's module) but does not call it.
    assert!(broken.failed >= 2, "{broken:?}");
    let text = format!("{:#?}", broken.diagnostics);
    assert!(text.contains("depht"), "{text}");
    assert!(text.contains("Lit/Fragment"), "{text}");
    // Located at the module's file and line, through the bundle's line map.
    assert!(
        broken
            .diagnostics
            .iter()
            .all(|d| d.location.as_ref().is_some_and(|at| {
                at.file == std::path::Path::new("shaders/modules/shadow-utils.slang")
                    && at.line == 5
            })),
        "{text}"
    );
    // Sky still built; fixing the module builds the failed variants only.
    assert!(std::fs::metadata(f.path("out/Sky/Fragment/_.spv")).is_ok());
    f.edit(
        "shaders/modules/shadow-utils.slang",
        "return depht > 0.5 ? 0.4 : 1.0;",
        "return depth > 0.5 ? 0.4 : 1.0;",
    );
    let fixed = f.build();
    assert_eq!(fixed.failed, 0, "{:#?}", fixed.diagnostics);
    f.assert_same_as_clean("fixed");
}
