#version 450
// Camera-facing particle quads, one instance per particle, four corners per quad.

#include "include/common.glsl"
#include "include/fog.glsl"

layout(location = 0) in vec2 a_corner;          // per vertex: (-1,-1) .. (1,1)
layout(location = 1) in vec4 a_center_size;     // per instance: xyz world centre, w size
layout(location = 2) in vec4 a_color;           // per instance
layout(location = 3) in vec2 a_rotation_frame;  // per instance: x rotation, y atlas frame

layout(location = 0) out vec2 v_uv;
layout(location = 1) out vec4 v_color;
#ifdef SOFT
layout(location = 2) out float v_view_depth;
#endif
#ifdef FOG
layout(location = 3) out float v_fog;
#endif

layout(std140, set = 1, binding = 0) uniform ParticleParams {
    vec4 u_atlas;  // xy: frames per row / column
    vec4 u_fade;   // x: soft fade distance, y: intensity
};

void main() {
    float s = sin(a_rotation_frame.x);
    float c = cos(a_rotation_frame.x);
    vec2 corner = mat2(c, s, -s, c) * a_corner * a_center_size.w;
    // The view matrix's rows are the camera's axes in world space.
    vec3 right = vec3(u_view[0][0], u_view[1][0], u_view[2][0]);
    vec3 up = vec3(u_view[0][1], u_view[1][1], u_view[2][1]);
    vec3 world = a_center_size.xyz + right * corner.x + up * corner.y;
    gl_Position = u_view_proj * vec4(world, 1.0);

    float frame = a_rotation_frame.y;
    vec2 cell = vec2(mod(frame, u_atlas.x), floor(frame / u_atlas.x));
    v_uv = (cell + a_corner * 0.5 + 0.5) / u_atlas.xy;
    v_color = a_color;
#ifdef SOFT
    v_view_depth = -(u_view * vec4(world, 1.0)).z;
#endif
#ifdef FOG
    v_fog = fog_factor(distance(world, u_camera_position.xyz), world.y);
#endif
}
