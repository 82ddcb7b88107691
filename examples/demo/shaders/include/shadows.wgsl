// Sun shadow map lookup with 3x3 percentage-closer filtering.

#ifndef DEMO_SHADOWS_WGSL
#define DEMO_SHADOWS_WGSL

#ifdef SHADOWS
struct ShadowData {
    light_view_proj: mat4x4<f32>,
    // x: depth bias, y: texel size, z: normal offset, w: strength.
    params: vec4<f32>,
};

@group(0) @binding(2) var<uniform> shadow: ShadowData;
@group(0) @binding(3) var shadow_map: texture_depth_2d;
@group(0) @binding(4) var shadow_sampler: sampler_comparison;

fn shadow_coord(world_position: vec3<f32>, world_normal: vec3<f32>) -> vec4<f32> {
    // Pushing the lookup along the normal hides acne on surfaces grazing the light.
    let offset = world_normal * shadow.params.z;
    return shadow.light_view_proj * vec4<f32>(world_position + offset, 1.0);
}

fn shadow_visibility(coord: vec4<f32>) -> f32 {
    let ndc = coord.xyz / coord.w;
    let uv = ndc.xy * vec2<f32>(0.5, -0.5) + vec2<f32>(0.5);
    let depth = ndc.z - shadow.params.x;
    var lit = 0.0;
    for (var y = -1; y <= 1; y++) {
        for (var x = -1; x <= 1; x++) {
            let offset = vec2<f32>(f32(x), f32(y)) * shadow.params.y;
            lit += textureSampleCompareLevel(shadow_map, shadow_sampler, uv + offset, depth);
        }
    }
    return mix(1.0, lit / 9.0, shadow.params.w);
}
#endif

#endif
