// Distance and height fog. Everything is under `#ifdef FOG`, so an edit here rebuilds only
// the FOG variants.

#ifndef DEMO_FOG_WGSL
#define DEMO_FOG_WGSL

#include "common.wgsl"

#ifdef FOG
// How much of the surface colour the fog replaces, from 0 (clear) to 1 (fully fogged).
fn fog_factor(view_distance: f32, world_height: f32) -> f32 {
    let start = globals.fog_params.x;
    let end = globals.fog_params.y;
    let linear = saturate((view_distance - start) / max(end - start, 1e-4));
    let exponential = 1.0 - exp(-globals.fog_color.a * view_distance);
    // Fog pools below its floor height and thins out above it.
    let height = exp(-max(world_height - globals.fog_params.z, 0.0) * globals.fog_params.w);
    return saturate(max(linear, exponential) * height);
}

fn apply_fog(color: vec3<f32>, factor: f32) -> vec3<f32> {
    return mix(color, globals.fog_color.rgb, factor);
}
#endif

#endif
