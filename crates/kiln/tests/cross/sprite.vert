#version 450
// kiln test shader: a point sprite whose size only Vulkan, Metal and OpenGL can honour.

layout(location = 0) in vec4 a_position;
layout(location = 1) in float a_size;

void main() {
    gl_Position = a_position;
    gl_PointSize = a_size;
}
