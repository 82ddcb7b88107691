#version 450
// Particle shading: an atlas frame times the particle colour, alpha-blended or additive,
// optionally faded where it meets opaque geometry (soft particles) and fogged.

#include "include/common.glsl"
#include "include/fog.glsl"

layout(location = 0) in vec2 v_uv;
layout(location = 1) in vec4 v_color;
#ifdef SOFT
layout(location = 2) in float v_view_depth;
#endif
#ifdef FOG
layout(location = 3) in float v_fog;
#endif

layout(location = 0) out vec4 o_color;

layout(std140, set = 1, binding = 0) uniform ParticleParams {
    vec4 u_atlas;
    vec4 u_fade;   // x: soft fade distance, y: intensity
};
layout(set = 1, binding = 1) uniform texture2D t_atlas;
layout(set = 1, binding = 2) uniform sampler s_atlas;
#ifdef SOFT
layout(set = 1, binding = 3) uniform texture2D t_scene_depth;
#endif

void main() {
    vec4 color = texture(sampler2D(t_atlas, s_atlas), v_uv) * v_color;
    color.rgb *= u_fade.y;
#ifdef SOFT
    // Fade out as the particle approaches the opaque surface behind it.
    vec2 screen_uv = gl_FragCoord.xy * u_screen_size.zw;
    float scene = linear_depth(textureLod(sampler2D(t_scene_depth, s_atlas), screen_uv, 0.0).r);
    color.a *= saturate((scene - v_view_depth) / max(u_fade.x, 1e-4));
#endif
#ifdef ADDITIVE
    // Blend state ONE, ONE: premultiply, and fog fades the contribution towards nothing.
#ifdef FOG
    color.rgb *= 1.0 - v_fog;
#endif
    o_color = vec4(color.rgb * color.a, 0.0);
#else
#ifdef FOG
    color.rgb = mix(color.rgb, u_fog_color.rgb, v_fog);
#endif
    o_color = color;
#endif
}
