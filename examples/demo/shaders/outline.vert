#version 450
// Selection outline, compiled by Khronos glslang (GLSL's default compiler): the mesh pushed
// out along its normals, its width and colour in push constants, which naga's GLSL front
// end does not read.

#include "include/common.glsl"
#include "include/fog.glsl"

layout(push_constant) uniform Outline {
    mat4 model;
    vec4 color;  // rgb: colour; a: opacity
    vec4 params; // x: width in world units, y: pulse speed
} u_outline;

layout(location = 0) in vec3 a_position;
layout(location = 1) in vec3 a_normal;

#ifdef FOG
layout(location = 0) out float v_fog;
#endif

void main() {
    float width = u_outline.params.x;
#ifdef PULSE
    // Breathe between half and full width.
    width *= 0.75 + 0.25 * sin(u_camera_position.w * u_outline.params.y);
#endif
    vec4 world = u_outline.model * vec4(a_position + normalize(a_normal) * width, 1.0);
#ifdef FOG
    v_fog = fog_factor(length(world.xyz - u_camera_position.xyz), world.y);
#endif
    gl_Position = u_view_proj * world;
}
