// Flat-coloured geometry (UI in the world, emissive props, debug meshes): a texture times a
// tint, with optional vertex colours, alpha testing and fog.

#include "include/common.wgsl"
#include "include/fog.wgsl"

struct UnlitMaterial {
    color: vec4<f32>,
    // x: alpha cutoff, y: emissive multiplier.
    params: vec4<f32>,
};

@group(1) @binding(0) var<uniform> material: UnlitMaterial;
@group(1) @binding(1) var color_texture: texture_2d<f32>;
@group(1) @binding(2) var color_sampler: sampler;

struct VertexInput {
    @location(0) position: vec3<f32>,
    @location(2) uv: vec2<f32>,
#ifdef VERTEX_COLOR
    @location(6) color: vec4<f32>,
#endif
};

struct VertexOutput {
    @builtin(position) clip_position: vec4<f32>,
    @location(0) uv: vec2<f32>,
#ifdef VERTEX_COLOR
    @location(1) color: vec4<f32>,
#endif
#ifdef FOG
    @location(2) fog: f32,
#endif
};

@vertex
fn vs_main(input: VertexInput) -> VertexOutput {
    let world_position = (object.model * vec4<f32>(input.position, 1.0)).xyz;
    var out: VertexOutput;
    out.clip_position = globals.view_proj * vec4<f32>(world_position, 1.0);
    out.uv = input.uv;
#ifdef VERTEX_COLOR
    // Vertex colours are stored in sRGB; blending happens in linear space.
    out.color = vec4<f32>(srgb_to_linear(input.color.rgb), input.color.a);
#endif
#ifdef FOG
    out.fog = fog_factor(distance(world_position, camera_position()), world_position.y);
#endif
    return out;
}

@fragment
fn fs_main(input: VertexOutput) -> @location(0) vec4<f32> {
    var color = textureSample(color_texture, color_sampler, input.uv) * material.color * object.tint;
#ifdef VERTEX_COLOR
    color *= input.color;
#endif
#ifdef ALPHA_TEST
    if color.a < material.params.x {
        discard;
    }
#endif
    var rgb = color.rgb * material.params.y;
#ifdef FOG
    rgb = apply_fog(rgb, input.fog);
#endif
    return vec4<f32>(rgb, color.a);
}
