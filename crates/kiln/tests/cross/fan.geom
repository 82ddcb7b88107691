#version 450
// kiln test shader: a geometry stage (naga has none) that turns each point into a quad.

layout(points) in;
layout(triangle_strip, max_vertices = 4) out;

layout(set = 0, binding = 0) uniform Size {
    vec2 half_extent;
} size;

layout(location = 0) out vec2 g_uv;

void main() {
    vec4 center = gl_in[0].gl_Position;
    for (int i = 0; i < 4; ++i) {
        vec2 corner = vec2(float(i & 1), float(i >> 1));
        g_uv = corner;
        gl_Position = center + vec4((corner * 2.0 - 1.0) * size.half_extent, 0.0, 0.0);
        EmitVertex();
    }
    EndPrimitive();
}
