#version 450
// Pushes every triangle out along its normal.

layout(triangles) in;
layout(triangle_strip, max_vertices = 3) out;

layout(set = 0, binding = 0) uniform Params {
    float distance;
} params;

layout(location = 0) in vec2 in_uv[];
layout(location = 0) out vec2 out_uv;

in gl_PerVertex {
    vec4 gl_Position;
} gl_in[];

out gl_PerVertex {
    vec4 gl_Position;
};

void main() {
    vec3 a = gl_in[1].gl_Position.xyz - gl_in[0].gl_Position.xyz;
    vec3 b = gl_in[2].gl_Position.xyz - gl_in[0].gl_Position.xyz;
    vec3 n = normalize(cross(a, b));
    for (int i = 0; i < 3; ++i) {
        gl_Position = gl_in[i].gl_Position + vec4(n * params.distance, 0.0);
        out_uv = in_uv[i];
        EmitVertex();
    }
    EndPrimitive();
}
