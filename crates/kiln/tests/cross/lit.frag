#version 450
// kiln test shader: a combined image sampler, a uniform block, push constants and
// specialization constants, translated from glslc's SPIR-V to every target.

layout(constant_id = 0) const int LIGHT_COUNT = 2;
layout(constant_id = 1) const float EXPOSURE = 1.25;

layout(set = 0, binding = 0) uniform Material {
    vec4 tint;
    vec4 light_colors[4];
} material;

layout(set = 0, binding = 1) uniform sampler2D albedo;

layout(push_constant) uniform Frame {
    float time;
    float fade;
} frame;

layout(location = 0) in vec2 v_uv;
layout(location = 0) out vec4 out_color;

void main() {
    vec4 base = texture(albedo, v_uv) * material.tint;
    vec3 light = vec3(0.0);
    for (int i = 0; i < LIGHT_COUNT; ++i) {
        light += material.light_colors[i].rgb;
    }
    float pulse = 0.5 + 0.5 * sin(frame.time);
    out_color = vec4(base.rgb * light * EXPOSURE * pulse, base.a * frame.fade);
}
