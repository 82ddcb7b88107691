// compare: FOG | FOG LIGHTS=4 | SCALE=3
#version 450
#extension GL_ARB_separate_shader_objects : enable
#pragma optimize(off)
// Function-like macros, pasting, continuations and the built-in macros.
#define SQUARE(x) ((x) * (x))
#define MIX3(a, b, t) mix(a, b, \
                          t)
#define FIELD(prefix, n) prefix##n
#define OP(a, b) a##b
#define TWICE(f, v) f(f(v))
#define NOTHING
#define CALL_LATER SQUARE
#define SELF SELF + 1
#define LEFT(x) x RIGHT
#define RIGHT(x) LEFT(x)

#ifndef SCALE
#define SCALE 2
#endif

layout(location = 0) in vec2 v_uv;
layout(location = 0) out vec4 o_color;

float FIELD(weight, 0) = 0.5;
float FIELD(weight, 1) = SQUARE(SCALE + 1);
int version_seen = __VERSION__;
int line_seen = __LINE__;

float shade(float v) {
    float a = TWICE(SQUARE, v);
    float b = CALL_LATER(v) NOTHING;
    float c = MIX3(a,
                   b, 0.25);
    int d = SELF;
    float e = LEFT(1.0)(2.0);
    int f = 1 OP(<, <) 2;
    int g = 3 OP(+, =) 0;
    return a + b + c + float(d) + e;
}

#if defined(FOG) && !defined(NO_FOG) && (SCALE * 2 > 3 || SCALE == 1)
vec3 fog(vec3 c) { return mix(c, vec3(0.5), 0.1 * float(__LINE__)); }
#elif SCALE >= 3
vec3 fog(vec3 c) { return c * float(SCALE); }
#else
vec3 fog(vec3 c) { return c; }
#endif

#ifdef LIGHTS
#if LIGHTS > 2
const int light_count = LIGHTS;
#else
const int light_count = 2;
#endif
#endif

#undef SQUARE
#ifdef SQUARE
#error SQUARE should be gone
#endif
float SQUARE = 1.0;

#line 500
int moved_line = __LINE__;
#line 20 7
int string_number = __LINE__ + __FILE__;

void main() {
    float long_sum = weight0 + \
        weight1;
    o_color = vec4(fog(vec3(shade(v_uv.x))), long_sum);
}
