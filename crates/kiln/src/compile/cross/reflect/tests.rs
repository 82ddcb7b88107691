//! The reflection target on shaders of every front end kiln has in-process (naga's WGSL,
//! glslang's GLSL and HLSL): exact JSON documents, so that a wrong field fails.

use crate::compile::CompileRequest;
use crate::compile::{
    compile_with, ConstantValue, Constants, FrontEnd, GlslangOptions, SourceLanguage, Stage,
    Target, TargetConfig, TargetResult,
};

fn compile(
    front_end: FrontEnd,
    language: SourceLanguage,
    text: &str,
    stage: Stage,
    entry: &str,
    constants: &Constants,
    targets: &[TargetConfig],
) -> Vec<TargetResult> {
    let request = CompileRequest {
        language,
        text,
        stage,
        entry,
        constants,
    };
    let slots: Vec<Option<&TargetConfig>> = targets.iter().map(Some).collect();
    compile_with(&front_end, &request, &slots)
        .expect("the variant compiles")
        .into_iter()
        .map(|r| r.expect("every target was asked for"))
        .collect()
}

/// The reflection JSON of one compile, as text.
fn reflection(
    front_end: FrontEnd,
    language: SourceLanguage,
    text: &str,
    stage: Stage,
    entry: &str,
) -> String {
    let results = compile(
        front_end,
        language,
        text,
        stage,
        entry,
        &Constants::new(),
        &[TargetConfig::new(Target::Reflection)],
    );
    let bytes = results[0].clone().expect("reflection built");
    String::from_utf8(bytes).expect("JSON is UTF-8")
}

fn glslang() -> FrontEnd {
    FrontEnd::Glslang(GlslangOptions::default())
}

const WGSL: &str = "
struct Globals { view: mat4x4<f32>, tint: vec4<f32> }
struct Light { position: vec4<f32>, colour: vec4<f32> }
@group(0) @binding(0) var<uniform> globals: Globals;
@group(0) @binding(1) var<storage, read> lights: array<Light>;
@group(1) @binding(0) var albedo: texture_2d<f32>;
@group(1) @binding(1) var albedo_sampler: sampler;
@group(2) @binding(3) var<storage, read_write> counters: array<atomic<u32>, 4>;

struct VertexIn {
    @location(0) position: vec3<f32>,
    @location(2) uv: vec2<f32>,
    @location(1) normal: vec3<f32>,
}
struct VertexOut {
    @builtin(position) clip: vec4<f32>,
    @location(0) uv: vec2<f32>,
    @location(1) light: f32,
}

@vertex
fn vs_main(v: VertexIn) -> VertexOut {
    var out: VertexOut;
    out.clip = globals.view * vec4<f32>(v.position, 1.0);
    out.uv = v.uv;
    out.light = dot(v.normal, lights[0].position.xyz);
    return out;
}

@fragment
fn fs_main(@location(0) uv: vec2<f32>, @location(1) light: f32) -> @location(0) vec4<f32> {
    atomicAdd(&counters[0], 1u);
    return textureSample(albedo, albedo_sampler, uv) * light * globals.tint;
}

@compute @workgroup_size(8, 4, 2)
fn cs_main(@builtin(global_invocation_id) id: vec3<u32>) {
    atomicAdd(&counters[id.x % 4u], 1u);
}
";

#[test]
fn wgsl_vertex_bindings_and_inputs() {
    let json = reflection(
        FrontEnd::Naga,
        SourceLanguage::Wgsl,
        WGSL,
        Stage::Vertex,
        "vs_main",
    );
    // naga writes the globals the entry point uses (SPIR-V 1.0 lists only its inputs and
    // outputs in the interface): the uniform and the storage buffer. Names are naga's block
    // wrappers (`<Type>_block_<n><Stage>`); inputs keep their WGSL names.
    let value: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(value["entry_point"], "vs_main", "{json}");
    assert_eq!(value["stage"], "vertex", "{json}");
    assert!(value.get("workgroup_size").is_none(), "{json}");
    assert!(value.get("push_constant_size").is_none(), "{json}");
    let bindings = value["bindings"].as_array().expect("bindings");
    let summary: Vec<(u64, u64, &str, u64, Option<bool>)> = bindings
        .iter()
        .map(|b| {
            (
                b["set"].as_u64().unwrap(),
                b["binding"].as_u64().unwrap(),
                b["kind"].as_str().unwrap(),
                b["array_size"].as_u64().unwrap(),
                b.get("readonly").and_then(|r| r.as_bool()),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (0, 0, "uniform_buffer", 1, None),
            (0, 1, "storage_buffer", 1, Some(true)),
        ],
        "{json}"
    );
    // naga's unnamed block around each global is named by what the shader declared.
    assert_eq!(bindings[0]["type"], "Globals", "{json}");
    assert_eq!(bindings[1]["type"], "Light[]", "{json}");
    assert_eq!(bindings[0]["name"], "globals", "{json}");
    let inputs: Vec<(u64, &str, &str)> = value["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["location"].as_u64().unwrap(),
                v["name"].as_str().unwrap(),
                v["type"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        inputs,
        [
            (0, "position", "vec3"),
            (1, "normal", "vec3"),
            (2, "uv", "vec2")
        ],
        "{json}"
    );
    // The built-in position is not an output.
    let outputs: Vec<(u64, &str)> = value["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["location"].as_u64().unwrap(), v["type"].as_str().unwrap()))
        .collect();
    assert_eq!(outputs, [(0, "vec2"), (1, "float")], "{json}");
}

#[test]
fn wgsl_fragment_texture_sampler_storage_and_outputs() {
    let json = reflection(
        FrontEnd::Naga,
        SourceLanguage::Wgsl,
        WGSL,
        Stage::Fragment,
        "fs_main",
    );
    let value: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    let bindings: Vec<(u64, u64, &str, &str, u64)> = value["bindings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["set"].as_u64().unwrap(),
                b["binding"].as_u64().unwrap(),
                b["kind"].as_str().unwrap(),
                b["type"].as_str().unwrap(),
                b["array_size"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        bindings[1..],
        [
            (1, 0, "sampled_image", "texture2D", 1),
            (1, 1, "sampler", "sampler", 1),
            (2, 3, "storage_buffer", bindings[3].3, 1),
        ],
        "{json}"
    );
    assert_eq!(bindings[0].0..=bindings[0].1, 0..=0, "{json}");
    assert_eq!(bindings[0].2, "uniform_buffer", "{json}");
    let counters = &value["bindings"][3];
    assert_eq!(counters["readonly"], false, "{json}");
    assert_eq!(
        value["outputs"],
        serde_json::json!([{"location":0,"name":value["outputs"][0]["name"],"type":"vec4"}]),
        "{json}"
    );
    assert_eq!(value["inputs"].as_array().unwrap().len(), 2, "{json}");
}

#[test]
fn wgsl_compute_workgroup_size() {
    let json = reflection(
        FrontEnd::Naga,
        SourceLanguage::Wgsl,
        WGSL,
        Stage::Compute,
        "cs_main",
    );
    let value: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(value["stage"], "compute", "{json}");
    assert_eq!(
        value["workgroup_size"],
        serde_json::json!([8, 4, 2]),
        "{json}"
    );
    assert_eq!(
        value["inputs"],
        serde_json::json!([]),
        "built-ins only: {json}"
    );
}

const GLSL: &str = "#version 450
layout(push_constant) uniform Push { mat4 model; vec4 tint; float scale; } pc;
layout(set = 0, binding = 0) uniform Camera { mat4 view_projection; } camera;
layout(set = 1, binding = 2) uniform sampler2D textures[4];
layout(set = 1, binding = 5) uniform sampler2DArrayShadow shadow;
layout(set = 2, binding = 0) readonly buffer Instances { mat4 transforms[]; } instances;
layout(set = 2, binding = 1, rgba8) uniform writeonly image2D target;
layout(location = 0) in vec3 a_position;
layout(location = 3) in vec2 a_uv;
layout(location = 1) out vec2 v_uv;
layout(location = 0) out vec4 v_colour;
void main() {
    vec4 world = pc.model * instances.transforms[gl_InstanceIndex] * vec4(a_position, 1.0);
    v_uv = a_uv * pc.scale;
    v_colour = texture(textures[1], a_uv) * pc.tint
        + vec4(texture(shadow, vec4(a_uv, 0.0, 0.5)));
    imageStore(target, ivec2(0), v_colour);
    gl_Position = camera.view_projection * world;
}
";

#[test]
fn glsl_exact_document() {
    let json = reflection(glslang(), SourceLanguage::Glsl, GLSL, Stage::Vertex, "main");
    // mat4 + vec4 + float: 64 + 16 + 4 = 84 bytes declared.
    let expected = concat!(
        r#"{"bindings":["#,
        r#"{"array_size":1,"binding":0,"kind":"uniform_buffer","name":"Camera","set":0,"type":"Camera"},"#,
        r#"{"array_size":4,"binding":2,"kind":"combined_image_sampler","name":"textures","set":1,"type":"sampler2D"},"#,
        r#"{"array_size":1,"binding":5,"kind":"combined_image_sampler","name":"shadow","set":1,"type":"sampler2DArrayShadow"},"#,
        r#"{"array_size":1,"binding":0,"kind":"storage_buffer","name":"Instances","readonly":true,"set":2,"type":"Instances"},"#,
        r#"{"array_size":1,"binding":1,"kind":"storage_image","name":"target","readonly":false,"set":2,"type":"image2D"}"#,
        r#"],"entry_point":"main","#,
        r#""inputs":[{"location":0,"name":"a_position","type":"vec3"},{"location":3,"name":"a_uv","type":"vec2"}],"#,
        r#""outputs":[{"location":0,"name":"v_colour","type":"vec4"},{"location":1,"name":"v_uv","type":"vec2"}],"#,
        r#""push_constant_size":84,"stage":"vertex"}"#,
    );
    assert_eq!(json, expected);
}

#[test]
fn hlsl_registers_become_bindings() {
    let hlsl = "
cbuffer Frame : register(b0, space1) { float4x4 view; float4 fog; };
Texture2D<float4> albedo : register(t1);
SamplerState linear_sampler : register(s2);
RWStructuredBuffer<uint> counts : register(u3);
struct PsIn { float4 position : SV_Position; float2 uv : TEXCOORD0; };
float4 main(PsIn input) : SV_Target0 {
    counts[0] = 1;
    return albedo.Sample(linear_sampler, input.uv) * fog;
}
";
    let options = GlslangOptions {
        hlsl_iomap: true,
        ..GlslangOptions::default()
    };
    let json = reflection(
        FrontEnd::Glslang(options),
        SourceLanguage::Hlsl,
        hlsl,
        Stage::Fragment,
        "main",
    );
    let value: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(value["stage"], "fragment", "{json}");
    let bindings: Vec<(u64, u64, &str)> = value["bindings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["set"].as_u64().unwrap(),
                b["binding"].as_u64().unwrap(),
                b["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        bindings,
        [
            (0, 1, "sampled_image"),
            (0, 2, "sampler"),
            (0, 3, "storage_buffer"),
            (1, 0, "uniform_buffer"),
        ],
        "{json}"
    );
    // SV_Position is a built-in: only the texture coordinate is an input.
    assert_eq!(value["inputs"].as_array().unwrap().len(), 1, "{json}");
    assert_eq!(value["inputs"][0]["type"], "vec2", "{json}");
    assert_eq!(value["outputs"][0]["location"], 0, "{json}");
}

const COMPUTE: &str = "#version 450
layout(local_size_x = 16, local_size_y_id = 3, local_size_z = 1) in;
layout(set = 0, binding = 0) buffer Data { uint values[]; } data;
void main() { data.values[gl_GlobalInvocationID.x] += 1u; }
";

#[test]
fn glsl_workgroup_size_takes_specialization_constants_values() {
    let run = |constants: &Constants| -> serde_json::Value {
        let results = compile(
            glslang(),
            SourceLanguage::Glsl,
            COMPUTE,
            Stage::Compute,
            "main",
            constants,
            &[TargetConfig::new(Target::Reflection)],
        );
        serde_json::from_slice(&results[0].clone().expect("built")).expect("JSON")
    };
    // The declared default of a `local_size_y_id` constant is 1.
    assert_eq!(
        run(&Constants::new())["workgroup_size"],
        serde_json::json!([16, 1, 1])
    );
    let set = Constants::from([("3".to_owned(), ConstantValue(8.0))]);
    let value = run(&set);
    assert_eq!(value["workgroup_size"], serde_json::json!([16, 8, 1]));
    assert_eq!(value["bindings"][0]["array_size"], 1);
    assert_eq!(value["bindings"][0]["readonly"], false);
}

#[test]
fn identical_inputs_give_identical_bytes_with_or_without_the_spirv_target() {
    let targets = [
        TargetConfig::new(Target::Spirv),
        TargetConfig::new(Target::Reflection),
    ];
    let once = |front_end: FrontEnd, language, text, stage, entry| {
        compile(
            front_end,
            language,
            text,
            stage,
            entry,
            &Constants::new(),
            &targets,
        )
    };
    for (front_end, language, text, stage, entry) in [
        (
            FrontEnd::Naga,
            SourceLanguage::Wgsl,
            WGSL,
            Stage::Fragment,
            "fs_main",
        ),
        (glslang(), SourceLanguage::Glsl, GLSL, Stage::Vertex, "main"),
    ] {
        let a = once(front_end, language, text, stage, entry);
        let b = once(front_end, language, text, stage, entry);
        assert_eq!(a, b, "{language:?}");
        let alone = reflection(front_end, language, text, stage, entry);
        let with_spirv = String::from_utf8(a[1].clone().expect("built")).expect("UTF-8");
        assert_eq!(alone, with_spirv, "{language:?}");
        // glslang's: what the reflector makes of the spirv target's SPIR-V (naga's is
        // written again with names).
        if front_end.kind() != crate::compile::CompilerKind::Glslang {
            continue;
        }
        let spirv: Vec<u32> = a[0]
            .clone()
            .expect("spirv built")
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let direct = super::super::reflect(&spirv, stage, entry).expect("reflected");
        assert_eq!(direct, with_spirv.as_bytes(), "{language:?}");
        // Canonical: compact, and the keys of every object in byte order (serde_json's map
        // sorts them: the document written again is the same text).
        let value: serde_json::Value = serde_json::from_str(&with_spirv).expect("JSON");
        assert_eq!(serde_json::to_string(&value).expect("JSON"), with_spirv);
    }
}

#[test]
fn a_missing_entry_point_and_broken_spirv_fail_the_target_not_the_process() {
    let spirv = [0x0723_0203, 0x0001_0000, 0, 10, 0];
    let error = super::super::reflect(&spirv, Stage::Vertex, "main").unwrap_err();
    assert!(error.message.contains("entry point"), "{error}");
    let error = super::super::reflect(&[1, 2, 3], Stage::Vertex, "main").unwrap_err();
    assert!(error.message.contains("SPIR-V"), "{error}");
}

/// Arrays sized by specialization constants (and operations of them: `spirv-cross2`'s type
/// reflection crashed the process on those, so kiln reads types from the words), and a
/// push-constant block of buffer references (8-byte addresses).
const SIZED_BY_CONSTANTS: &str = "#version 450
#extension GL_EXT_buffer_reference : require
layout(constant_id = 0) const int MAX_LOD = 5;
layout(local_size_x = 4) in;
layout(buffer_reference, std430) readonly buffer Matrices { mat4 m; };
layout(push_constant) uniform Push { Matrices scene; Matrices model; } pc;
layout(set = 0, binding = 0) buffer Stats { uint count; uint lods[MAX_LOD + 1]; } stats;
layout(set = 0, binding = 1) uniform sampler2D maps[MAX_LOD * 2];
void main() {
    stats.lods[gl_LocalInvocationID.x] = uint(textureLod(maps[1], vec2(0.0), 0.0).x);
    stats.count = uint(pc.scene.m[0][0] + pc.model.m[1][1]);
}
";

#[test]
fn arrays_sized_by_constant_operations_and_buffer_references() {
    let run = |constants: &Constants| -> serde_json::Value {
        let results = compile(
            glslang(),
            SourceLanguage::Glsl,
            SIZED_BY_CONSTANTS,
            Stage::Compute,
            "main",
            constants,
            &[TargetConfig::new(Target::Reflection)],
        );
        serde_json::from_slice(&results[0].clone().expect("built")).expect("JSON")
    };
    let value = run(&Constants::new());
    assert_eq!(value["push_constant_size"], 16, "{value}");
    assert_eq!(value["bindings"][0]["name"], "Stats", "{value}");
    assert_eq!(value["bindings"][1]["type"], "sampler2D", "{value}");
    assert_eq!(value["bindings"][1]["array_size"], 10, "{value}");
    assert_eq!(value["workgroup_size"], serde_json::json!([4, 1, 1]));
    let set = Constants::from([("MAX_LOD".to_owned(), ConstantValue(3.0))]);
    assert_eq!(run(&set)["bindings"][1]["array_size"], 6);
}
