// The main opaque surface shader: PBR lighting from the sun and point lights, with optional
// skinning, normal mapping, shadows, a detail layer and fog.

#include "include/common.wgsl"
#include "include/lighting.wgsl"
#include "include/fog.wgsl"
#include "include/skinning.wgsl"
#include "include/shadows.wgsl"

struct Material {
    base_color: vec4<f32>,
    // x: roughness, y: metallic, z: normal strength, w: detail uv scale.
    params: vec4<f32>,
};

@group(1) @binding(0) var<uniform> material: Material;
@group(1) @binding(1) var albedo_texture: texture_2d<f32>;
@group(1) @binding(2) var material_sampler: sampler;
#ifdef NORMAL_MAP
@group(1) @binding(3) var normal_texture: texture_2d<f32>;
#endif
#ifdef DETAIL
@group(1) @binding(4) var detail_texture: texture_2d<f32>;
#endif

struct VertexInput {
    @location(0) position: vec3<f32>,
    @location(1) normal: vec3<f32>,
    @location(2) uv: vec2<f32>,
#ifdef NORMAL_MAP
    @location(3) tangent: vec4<f32>,
#endif
#ifdef SKIN
    @location(4) joints: vec4<u32>,
    @location(5) weights: vec4<f32>,
#endif
};

struct VertexOutput {
    @builtin(position) clip_position: vec4<f32>,
    @location(0) world_position: vec3<f32>,
    @location(1) world_normal: vec3<f32>,
    @location(2) uv: vec2<f32>,
#ifdef NORMAL_MAP
    @location(3) world_tangent: vec4<f32>,
#endif
#ifdef SHADOWS
    @location(4) shadow_coord: vec4<f32>,
#endif
#ifdef FOG
    @location(5) fog: f32,
#endif
};

@vertex
fn vs_main(input: VertexInput) -> VertexOutput {
#ifdef SKIN
    let skin = skin_matrix(input.joints, input.weights);
    let local_position = (skin * vec4<f32>(input.position, 1.0)).xyz;
    let local_normal = (skin * vec4<f32>(input.normal, 0.0)).xyz;
#else
    let local_position = input.position;
    let local_normal = input.normal;
#endif
    let world_position = (object.model * vec4<f32>(local_position, 1.0)).xyz;

    var out: VertexOutput;
    out.clip_position = globals.view_proj * vec4<f32>(world_position, 1.0);
    out.world_position = world_position;
    out.world_normal = transform_normal(local_normal);
    out.uv = input.uv;
#ifdef NORMAL_MAP
#ifdef SKIN
    let local_tangent = (skin * vec4<f32>(input.tangent.xyz, 0.0)).xyz;
#else
    let local_tangent = input.tangent.xyz;
#endif
    out.world_tangent = vec4<f32>(normalize((object.model * vec4<f32>(local_tangent, 0.0)).xyz), input.tangent.w);
#endif
#ifdef SHADOWS
    out.shadow_coord = shadow_coord(world_position, out.world_normal);
#endif
#ifdef FOG
    out.fog = fog_factor(distance(world_position, camera_position()), world_position.y);
#endif
    return out;
}

fn surface_normal(input: VertexOutput) -> vec3<f32> {
    let n = normalize(input.world_normal);
#ifdef NORMAL_MAP
    let t = normalize(input.world_tangent.xyz - n * dot(n, input.world_tangent.xyz));
    let b = cross(n, t) * input.world_tangent.w;
    let sampled = textureSample(normal_texture, material_sampler, input.uv).xyz * 2.0 - vec3<f32>(1.0);
    let scaled = vec3<f32>(sampled.xy * material.params.z, sampled.z);
    return normalize(mat3x3<f32>(t, b, n) * scaled);
#else
    return n;
#endif
}

@fragment
fn fs_main(input: VertexOutput) -> @location(0) vec4<f32> {
    var albedo = textureSample(albedo_texture, material_sampler, input.uv) * material.base_color * object.tint;
#ifdef DETAIL
    // Detail maps are authored around mid-grey: 0.5 leaves the albedo unchanged.
    let detail = textureSample(detail_texture, material_sampler, input.uv * material.params.w).rgb;
    albedo = vec4<f32>(albedo.rgb * detail * 2.0, albedo.a);
#endif

    var surface: Surface;
    surface.position = input.world_position;
    surface.normal = surface_normal(input);
    surface.view = normalize(camera_position() - input.world_position);
    surface.albedo = albedo.rgb;
    surface.roughness = clamp(material.params.x, 0.04, 1.0);
    surface.metallic = saturate(material.params.y);

    var sun = sun_light(surface);
#ifdef SHADOWS
    sun *= shadow_visibility(input.shadow_coord);
#endif
    var color = ambient_light(surface) + sun + point_lights(surface);
#ifdef FOG
    color = apply_fog(color, input.fog);
#endif
    return vec4<f32>(color, albedo.a);
}
