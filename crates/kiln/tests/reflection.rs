//! The reflection target through the pipeline: `targets = [..., "reflection"]` writes one
//! `<keywords>.reflect.json` per variant next to its other outputs, listed in `index.json`
//! like any output; a keyword that adds a binding shows in its variant's reflection; a warm
//! build compiles nothing; the spirv target's version is part of the reflection's identity.
//! Without the `glslang` feature (no SPIRV-Cross), each reflection pair fails alone, saying
//! how to build, and the other targets are built.

use kiln::pipeline::Index;
use kiln_test_support::TempProject;

const MANIFEST: &str = r#"
[project]
targets = ["spirv", "msl", "reflection"]

[[shader]]
name = "Sprite"
source = "shaders/sprite.wgsl"
axes = [["_", "TINT"]]

[shader.passes.Vertex]
stage = "vertex"
entry = "vs_main"

[shader.passes.Fragment]
stage = "fragment"
entry = "fs_main"

[[shader]]
name = "Blit"
source = "shaders/blit.frag"

[shader.passes.Main]
stage = "fragment"
entry = "main"
"#;

const SPRITE: &str = "
@group(0) @binding(0) var atlas: texture_2d<f32>;
@group(0) @binding(1) var atlas_sampler: sampler;
#ifdef TINT
struct Tint { colour: vec4<f32> }
@group(1) @binding(0) var<uniform> tint: Tint;
#endif

struct Out {
    @builtin(position) position: vec4<f32>,
    @location(0) uv: vec2<f32>,
}

@vertex
fn vs_main(@location(0) corner: vec2<f32>) -> Out {
    var out: Out;
    out.position = vec4<f32>(corner, 0.0, 1.0);
    out.uv = corner * 0.5 + vec2<f32>(0.5);
    return out;
}

@fragment
fn fs_main(@location(0) uv: vec2<f32>) -> @location(0) vec4<f32> {
    var colour = textureSample(atlas, atlas_sampler, uv);
#ifdef TINT
    colour = colour * tint.colour;
#endif
    return colour;
}
";

const BLIT: &str = "#version 450
layout(push_constant) uniform Push { vec2 scale; vec2 offset; } pc;
layout(set = 0, binding = 0) uniform sampler2D source_image;
layout(location = 0) in vec2 v_uv;
layout(location = 0) out vec4 o_colour;
void main() { o_colour = texture(source_image, v_uv * pc.scale + pc.offset); }
";

fn project() -> TempProject {
    TempProject::from_files([
        ("kiln.toml", MANIFEST),
        ("shaders/sprite.wgsl", SPRITE),
        ("shaders/blit.frag", BLIT),
    ])
}

fn json(project: &TempProject, relative: &str) -> serde_json::Value {
    serde_json::from_str(&project.read(relative)).expect("reflection is JSON")
}

#[test]
fn reflection_outputs_are_written_and_indexed_per_variant() {
    let f = project();
    let report = f.build();
    let index = Index::read(&f.path("out"));
    if !kiln::compile::glslang::AVAILABLE {
        // Every reflection pair fails alone, saying why; the naga shader's other targets
        // are built.
        assert!(
            index
                .failures
                .iter()
                .any(|failure| failure.target == "reflection"
                    && failure.message.contains(
                        "the reflection target needs kiln built with the `glslang` feature"
                    )),
            "{:?}",
            index.failures
        );
        assert!(f.path("out/Sprite/Vertex/_.spv").exists());
        assert!(!f.path("out/Sprite/Vertex/_.reflect.json").exists());
        return;
    }
    assert!(index.failures.is_empty(), "{:?}", index.failures);
    assert_eq!(report.failed_outputs, 0, "{report:?}");
    let reflections: Vec<&str> = index
        .entries
        .iter()
        .filter(|e| &*e.target == "reflection")
        .map(|e| &*e.path)
        .collect();
    assert_eq!(
        reflections,
        [
            "Blit/Main/_.reflect.json",
            "Sprite/Fragment/TINT.reflect.json",
            "Sprite/Fragment/_.reflect.json",
            "Sprite/Vertex/TINT.reflect.json",
            "Sprite/Vertex/_.reflect.json",
        ]
    );
    for entry in index.entries.iter().filter(|e| &*e.target == "reflection") {
        let bytes = std::fs::read(f.path(&format!("out/{}", entry.path))).expect("written");
        assert_eq!(bytes.len() as u64, entry.bytes, "{}", entry.path);
    }

    // The keyword's uniform buffer is in the TINT variant only (naga writes the globals an
    // entry point uses).
    let plain = json(&f, "out/Sprite/Fragment/_.reflect.json");
    let tinted = json(&f, "out/Sprite/Fragment/TINT.reflect.json");
    let kinds = |v: &serde_json::Value| -> Vec<(u64, u64, String)> {
        v["bindings"]
            .as_array()
            .expect("bindings")
            .iter()
            .map(|b| {
                (
                    b["set"].as_u64().unwrap(),
                    b["binding"].as_u64().unwrap(),
                    b["kind"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let texture = (0, 0, "sampled_image".to_owned());
    let sampler = (0, 1, "sampler".to_owned());
    assert_eq!(kinds(&plain), [texture.clone(), sampler.clone()]);
    assert_eq!(
        kinds(&tinted),
        [texture, sampler, (1, 0, "uniform_buffer".to_owned())]
    );
    assert_eq!(plain["entry_point"], "fs_main");
    let vertex = json(&f, "out/Sprite/Vertex/_.reflect.json");
    assert_eq!(vertex["stage"], "vertex");
    assert_eq!(
        vertex["inputs"],
        serde_json::json!([{"location": 0, "name": "corner", "type": "vec2"}])
    );
    // glslang's: the push-constant block (two vec2) and the combined image sampler.
    let blit = json(&f, "out/Blit/Main/_.reflect.json");
    assert_eq!(blit["push_constant_size"], 16);
    assert_eq!(
        blit["bindings"],
        serde_json::json!([{"array_size": 1, "binding": 0, "kind": "combined_image_sampler",
            "name": "source_image", "set": 0, "type": "sampler2D"}])
    );

    // Warm: nothing compiles, nothing is written.
    let warm = f.build();
    assert_eq!((warm.compiled, warm.outputs_written), (0, 0), "{warm:?}");

    // The reflection reads the spirv target's SPIR-V: another version is another identity,
    // so every variant is compiled again; the JSON of the same shader stays the same.
    let before = f.read("out/Blit/Main/_.reflect.json");
    f.write(
        "kiln.toml",
        MANIFEST.replace(r#""spirv","#, r#"{ name = "spirv", version = "1.3" },"#),
    );
    let again = f.build();
    assert_eq!(again.compiled, 5, "{again:?}");
    assert_eq!(f.read("out/Blit/Main/_.reflect.json"), before);
}

#[test]
fn a_reflection_target_alone_needs_no_spirv_target() {
    let f = TempProject::from_files([
        (
            "kiln.toml",
            MANIFEST.replace(r#"["spirv", "msl", "reflection"]"#, r#"["reflection"]"#),
        ),
        ("shaders/sprite.wgsl", SPRITE.to_owned()),
        ("shaders/blit.frag", BLIT.to_owned()),
    ]);
    f.build();
    if !kiln::compile::glslang::AVAILABLE {
        return;
    }
    let index = Index::read(&f.path("out"));
    assert!(index.failures.is_empty(), "{:?}", index.failures);
    assert_eq!(index.entries.len(), 5);
    assert!(index
        .entries
        .iter()
        .all(|e| e.path.ends_with(".reflect.json")));
    assert!(!f.path("out/Blit/Main/_.spv").exists());
    assert_eq!(
        json(&f, "out/Blit/Main/_.reflect.json")["push_constant_size"],
        16
    );
}

const SLANG: &str = r#"struct Params { float4 tint; float exposure; };
ConstantBuffer<Params> params;
Texture2D albedo;
SamplerState albedo_sampler;

[shader("fragment")]
float4 fragmentMain(float2 uv : TEXCOORD0) : SV_Target
{
    return albedo.Sample(albedo_sampler, uv) * params.tint * params.exposure;
}
"#;

/// Slang's SPIR-V is reflected as glslang's is; its entry point is `main` in the SPIR-V, as
/// slangc names it.
#[test]
fn a_slang_shader_is_reflected_from_slang_s_spirv() {
    if let Err(e) = kiln::compile::slang::version() {
        assert!(
            std::env::var("KILN_REQUIRE_SLANG").as_deref() != Ok("1"),
            "KILN_REQUIRE_SLANG=1 but {e}"
        );
        eprintln!("skipped: {e}");
        return;
    }
    if !kiln::compile::glslang::AVAILABLE {
        return;
    }
    let f = TempProject::from_files([
        (
            "kiln.toml",
            "[project]\ntargets = [\"reflection\"]\n\n[[shader]]\nname = \"Lit\"\nsource = \"lit.slang\"\n\n[shader.passes.Fragment]\nstage = \"fragment\"\nentry = \"fragmentMain\"\n",
        ),
        ("lit.slang", SLANG),
    ]);
    f.build();
    let index = Index::read(&f.path("out"));
    assert!(index.failures.is_empty(), "{:?}", index.failures);
    let value = json(&f, "out/Lit/Fragment/_.reflect.json");
    assert_eq!(value["entry_point"], "main", "{value}");
    assert_eq!(value["stage"], "fragment", "{value}");
    let kinds: Vec<(u64, u64, &str, &str)> = value["bindings"]
        .as_array()
        .expect("bindings")
        .iter()
        .map(|b| {
            (
                b["set"].as_u64().unwrap(),
                b["binding"].as_u64().unwrap(),
                b["kind"].as_str().unwrap(),
                b["type"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds.iter().map(|k| k.2).collect::<Vec<_>>(),
        ["uniform_buffer", "sampled_image", "sampler"],
        "{value}"
    );
    assert_eq!(kinds[1].3, "texture2D", "{value}");
    assert_eq!(value["inputs"][0]["type"], "vec2", "{value}");
    assert_eq!(value["outputs"][0]["location"], 0, "{value}");
}
