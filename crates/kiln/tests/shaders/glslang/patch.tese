#version 450
// Interpolates the patch corners at the tessellator's barycentric coordinate.

layout(triangles, equal_spacing, ccw) in;

layout(location = 0) in vec2 in_uv[];
layout(location = 0) out vec2 out_uv;

void main() {
    vec3 w = gl_TessCoord;
    gl_Position = w.x * gl_in[0].gl_Position + w.y * gl_in[1].gl_Position + w.z * gl_in[2].gl_Position;
    out_uv = w.x * in_uv[0] + w.y * in_uv[1] + w.z * in_uv[2];
}
