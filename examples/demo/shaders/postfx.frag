#version 450
// The final post-processing pass: bloom composite, vignette, film grain and tone mapping.

#include "include/common.glsl"
#include "include/tonemap.glsl"

layout(location = 0) in vec2 v_uv;
layout(location = 0) out vec4 o_color;

layout(std140, set = 1, binding = 0) uniform PostParams {
    vec4 u_exposure;  // x: exposure
    vec4 u_bloom;     // x: intensity
    vec4 u_vignette;  // x: intensity, y: smoothness
    vec4 u_grain;     // x: intensity, y: size
};
layout(set = 1, binding = 1) uniform texture2D t_scene;
layout(set = 1, binding = 2) uniform sampler s_linear;
#ifdef BLOOM
layout(set = 1, binding = 3) uniform texture2D t_bloom;
#endif

#ifdef GRAIN
// A cheap hash: good enough for noise that changes every frame.
float hash(vec2 p) {
    vec3 p3 = fract(vec3(p.xyx) * 0.1031);
    p3 += dot(p3, p3.yzx + 33.33);
    return fract((p3.x + p3.y) * p3.z);
}
#endif

void main() {
    vec3 color = texture(sampler2D(t_scene, s_linear), v_uv).rgb;
#ifdef BLOOM
    color += texture(sampler2D(t_bloom, s_linear), v_uv).rgb * u_bloom.x;
#endif
    color *= u_exposure.x;
#ifdef VIGNETTE
    vec2 centered = v_uv - 0.5;
    float falloff = smoothstep(0.8, 0.8 - u_vignette.y, length(centered) * 1.41421356);
    color *= mix(1.0, falloff, u_vignette.x);
#endif
    color = tonemap(color);
#ifdef GRAIN
    // Grain after tone mapping, so it is equally visible in shadows and highlights.
    vec2 cell = floor(gl_FragCoord.xy / max(u_grain.y, 1.0));
    float noise = hash(cell + fract(u_camera_position.w) * 1000.0) - 0.5;
    color = saturate(color + noise * u_grain.x);
#endif
    o_color = vec4(color, 1.0);
}
