// compare: SKIN | SKIN BONES=64 | INSTANCED
// include-dirs: lib include
#version 450
#extension GL_GOOGLE_include_directive : require
// Includes found next to this file, then in the include directories, in order.
#include "include/transform.glsl"
#include "skinning.glsl"
#include "palette.glsl"

layout(location = 0) in vec3 a_position;
layout(location = 0) out vec3 v_world;
#ifdef INSTANCED
layout(location = 1) in mat4 a_instance;
#define MODEL a_instance
#else
#define MODEL u_model
#endif

void main() {
    vec4 p = vec4(a_position, 1.0);
#ifdef SKIN
    p = skin(p);
#endif
    v_world = TRANSFORM(MODEL, p).xyz;
    gl_Position = p + vec4(PALETTE_SIZE);
    int where = __LINE__;
    int which = __FILE__;
}
