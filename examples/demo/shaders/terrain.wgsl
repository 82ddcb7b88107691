// Heightmap terrain: the vertex stage displaces a flat grid, the fragment stage blends two or
// four material layers by a splat map, optionally with triplanar projection for cliffs.

#include "include/common.wgsl"
#include "include/lighting.wgsl"
#include "include/fog.wgsl"
#include "include/shadows.wgsl"

#if defined(LAYERS_4)
const LAYER_COUNT: i32 = 4;
#elif defined(LAYERS_2)
const LAYER_COUNT: i32 = 2;
#else
#error Terrain needs LAYERS_2 or LAYERS_4
#endif

struct TerrainParams {
    // x: world size of the terrain, y: height scale, z: layer uv scale, w: triplanar sharpness.
    scale: vec4<f32>,
    // Per-layer roughness.
    roughness: vec4<f32>,
};

@group(1) @binding(0) var<uniform> terrain: TerrainParams;
@group(1) @binding(1) var height_map: texture_2d<f32>;
@group(1) @binding(2) var splat_map: texture_2d<f32>;
@group(1) @binding(3) var layer_albedo: texture_2d_array<f32>;
@group(1) @binding(4) var terrain_sampler: sampler;

struct VertexInput {
    // A point of a flat grid in [0, 1]^2.
    @location(0) grid: vec2<f32>,
};

struct VertexOutput {
    @builtin(position) clip_position: vec4<f32>,
    @location(0) world_position: vec3<f32>,
    @location(1) world_normal: vec3<f32>,
    @location(2) splat_uv: vec2<f32>,
#ifdef SHADOWS
    @location(3) shadow_coord: vec4<f32>,
#endif
#ifdef FOG
    @location(4) fog: f32,
#endif
};

fn height_at(uv: vec2<f32>) -> f32 {
    return textureSampleLevel(height_map, terrain_sampler, uv, 0.0).r * terrain.scale.y;
}

@vertex
fn vs_main(input: VertexInput) -> VertexOutput {
    let texel = 1.0 / vec2<f32>(textureDimensions(height_map));
    let h = height_at(input.grid);
    // Central differences give the normal without a separate normal map.
    let dx = height_at(input.grid + vec2<f32>(texel.x, 0.0)) - height_at(input.grid - vec2<f32>(texel.x, 0.0));
    let dz = height_at(input.grid + vec2<f32>(0.0, texel.y)) - height_at(input.grid - vec2<f32>(0.0, texel.y));
    let step = 2.0 * texel * terrain.scale.x;
    let normal = normalize(vec3<f32>(-dx / step.x, 1.0, -dz / step.y));
    let local = vec3<f32>(input.grid.x * terrain.scale.x, h, input.grid.y * terrain.scale.x);
    let world_position = (object.model * vec4<f32>(local, 1.0)).xyz;

    var out: VertexOutput;
    out.clip_position = globals.view_proj * vec4<f32>(world_position, 1.0);
    out.world_position = world_position;
    out.world_normal = transform_normal(normal);
    out.splat_uv = input.grid;
#ifdef SHADOWS
    out.shadow_coord = shadow_coord(world_position, out.world_normal);
#endif
#ifdef FOG
    out.fog = fog_factor(distance(world_position, camera_position()), world_position.y);
#endif
    return out;
}

fn sample_layer(layer: i32, position: vec3<f32>, normal: vec3<f32>) -> vec3<f32> {
    let scale = terrain.scale.z;
#ifdef TRIPLANAR
    // Three planar projections blended by the normal: no stretching on steep slopes.
    var blend = pow(abs(normal), vec3<f32>(terrain.scale.w));
    blend /= blend.x + blend.y + blend.z;
    let x = textureSample(layer_albedo, terrain_sampler, position.zy * scale, layer).rgb;
    let y = textureSample(layer_albedo, terrain_sampler, position.xz * scale, layer).rgb;
    let z = textureSample(layer_albedo, terrain_sampler, position.xy * scale, layer).rgb;
    return x * blend.x + y * blend.y + z * blend.z;
#else
    return textureSample(layer_albedo, terrain_sampler, position.xz * scale, layer).rgb;
#endif
}

@fragment
fn fs_main(input: VertexOutput) -> @location(0) vec4<f32> {
    let normal = normalize(input.world_normal);
    let splat = textureSample(splat_map, terrain_sampler, input.splat_uv);
#ifdef LAYERS_4
    let weights = splat / max(splat.r + splat.g + splat.b + splat.a, 1e-4);
#else
    let weights = vec4<f32>(1.0 - splat.r, splat.r, 0.0, 0.0);
#endif
    // Every layer is sampled unconditionally: textureSample needs uniform control flow.
    var albedo = vec3<f32>(0.0);
    var roughness = 0.0;
    for (var layer = 0; layer < LAYER_COUNT; layer++) {
        albedo += sample_layer(layer, input.world_position, normal) * weights[layer];
        roughness += terrain.roughness[layer] * weights[layer];
    }

    var surface: Surface;
    surface.position = input.world_position;
    surface.normal = normal;
    surface.view = normalize(camera_position() - input.world_position);
    surface.albedo = albedo;
    surface.roughness = clamp(roughness, 0.04, 1.0);
    surface.metallic = 0.0;

    var sun = sun_light(surface);
#ifdef SHADOWS
    sun *= shadow_visibility(input.shadow_coord);
#endif
    var color = ambient_light(surface) + sun;
#ifdef FOG
    color = apply_fog(color, input.fog);
#endif
    return vec4<f32>(color, 1.0);
}
