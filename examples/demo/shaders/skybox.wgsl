// The sky behind everything: a cubemap or a procedural gradient, optionally with a sun disk.
// Drawn as a fullscreen triangle at the far plane.

#include "include/common.wgsl"

struct Sky {
    // Inverse of the view-projection matrix without translation.
    inverse_view_proj: mat4x4<f32>,
    zenith_color: vec4<f32>,
    horizon_color: vec4<f32>,
    // x: sun disk angular radius (cosine), y: sun disk intensity, z: exposure.
    params: vec4<f32>,
};

@group(1) @binding(0) var<uniform> sky: Sky;
#ifdef CUBEMAP
@group(1) @binding(1) var sky_cubemap: texture_cube<f32>;
@group(1) @binding(2) var sky_sampler: sampler;
#endif

struct VertexOutput {
    @builtin(position) clip_position: vec4<f32>,
    @location(0) direction: vec3<f32>,
};

@vertex
fn vs_main(@builtin(vertex_index) index: u32) -> VertexOutput {
    // One triangle covering the screen: (-1,-1), (3,-1), (-1,3).
    let uv = vec2<f32>(f32((index << 1u) & 2u), f32(index & 2u));
    let ndc = uv * 2.0 - vec2<f32>(1.0);
    let world = sky.inverse_view_proj * vec4<f32>(ndc, 1.0, 1.0);
    var out: VertexOutput;
    // z = w puts the sky exactly on the far plane.
    out.clip_position = vec4<f32>(ndc, 1.0, 1.0);
    out.direction = world.xyz / world.w;
    return out;
}

@fragment
fn fs_main(input: VertexOutput) -> @location(0) vec4<f32> {
    let direction = normalize(input.direction);
#ifdef CUBEMAP
    var color = textureSample(sky_cubemap, sky_sampler, direction).rgb;
#elif defined(PROCEDURAL)
    let up = saturate(direction.y);
    var color = mix(sky.horizon_color.rgb, sky.zenith_color.rgb, pow(up, 0.5));
    // Below the horizon the ground colour fades towards the horizon.
    color = select(color, sky.horizon_color.rgb * 0.3, direction.y < 0.0);
#else
#error Skybox needs CUBEMAP or PROCEDURAL
#endif
#ifdef SUN_DISK
    let cos_angle = dot(direction, globals.sun_direction.xyz);
    let disk = smoothstep(sky.params.x, mix(sky.params.x, 1.0, 0.1), cos_angle);
    color += globals.sun_color.rgb * disk * sky.params.y;
#endif
    return vec4<f32>(color * sky.params.z, 1.0);
}
