#version 450
// kiln test shader: a uniform block of matrices and a push-constant offset.

layout(set = 0, binding = 0) uniform Camera {
    mat4 view_projection;
    mat4 model;
} camera;

layout(push_constant) uniform Offset {
    vec4 offset;
} push;

layout(location = 0) in vec3 a_position;
layout(location = 1) in vec2 a_uv;
layout(location = 0) out vec2 v_uv;

void main() {
    v_uv = a_uv;
    vec4 world = camera.model * vec4(a_position, 1.0) + push.offset;
    gl_Position = camera.view_projection * world;
}
