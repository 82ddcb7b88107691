#version 450
// A textured mesh: push-constant transform, redeclared gl_PerVertex.

layout(push_constant) uniform Transform {
    mat4 model_view_projection;
    float scale;
} transform;

layout(location = 0) in vec3 in_position;
layout(location = 1) in vec2 in_uv;

layout(location = 0) out vec2 out_uv;

out gl_PerVertex {
    vec4 gl_Position;
    float gl_PointSize;
};

void main() {
    out_uv = in_uv;
    gl_PointSize = 1.0;
    gl_Position = transform.model_view_projection * vec4(in_position * transform.scale, 1.0);
}
