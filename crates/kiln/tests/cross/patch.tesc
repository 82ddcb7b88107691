#version 450
// kiln test shader: a tessellation control stage with a fixed level.

layout(vertices = 3) out;

layout(push_constant) uniform Level {
    float level;
} push;

void main() {
    gl_out[gl_InvocationID].gl_Position = gl_in[gl_InvocationID].gl_Position;
    if (gl_InvocationID == 0) {
        gl_TessLevelOuter[0] = push.level;
        gl_TessLevelOuter[1] = push.level;
        gl_TessLevelOuter[2] = push.level;
        gl_TessLevelInner[0] = push.level;
    }
}
