#version 450
// The outline's flat colour, fogged by the factor the vertex stage computed.

#include "include/common.glsl"
#include "include/fog.glsl"

layout(push_constant) uniform Outline {
    mat4 model;
    vec4 color;
    vec4 params;
} u_outline;

#ifdef FOG
layout(location = 0) in float v_fog;
#endif

layout(location = 0) out vec4 o_color;

void main() {
    vec3 color = u_outline.color.rgb;
#ifdef FOG
    color = mix(color, u_fog_color.rgb, v_fog);
#endif
    o_color = vec4(color, u_outline.color.a);
}
