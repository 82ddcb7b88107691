#version 450
// A blur whose tap count and weight are specialization constants (the manifest sets them),
// with a keyword block; no combined image sampler, so that naga can translate it to WGSL.

layout(constant_id = 0) const int TAPS = 3;
layout(constant_id = 1) const float WEIGHT = 0.5;
layout(constant_id = 2) const bool CLAMPED = false;

layout(set = 0, binding = 0) uniform Params {
    vec4 tint;
    vec2 step;
} params;

layout(location = 0) in vec2 in_uv;
layout(location = 0) out vec4 out_color;

void main() {
    vec4 sum = vec4(0.0);
    for (int i = 0; i < TAPS; ++i) {
        sum += params.tint * WEIGHT * (in_uv.x + params.step.x * float(i));
    }
#ifdef SOFT
    sum *= 0.5;
#endif
    if (CLAMPED) {
        sum = clamp(sum, vec4(0.0), vec4(1.0));
    }
    out_color = sum;
}
