// Distance and height fog for the GLSL shaders; the same model as fog.wgsl. Under
// `#ifdef FOG`, so an edit here rebuilds only the FOG variants.

#ifndef DEMO_FOG_GLSL
#define DEMO_FOG_GLSL

#include "common.glsl"

#ifdef FOG
float fog_factor(float view_distance, float world_height) {
    float start = u_fog_params.x;
    float end = u_fog_params.y;
    float linear_fog = saturate((view_distance - start) / max(end - start, 1e-4));
    float exponential = 1.0 - exp(-u_fog_color.a * view_distance);
    float height = exp(-max(world_height - u_fog_params.z, 0.0) * u_fog_params.w);
    return saturate(max(linear_fog, exponential) * height);
}
#endif

#endif
