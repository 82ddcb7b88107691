#version 450
// Combined image sampler, a specialization constant and a uniform block.

layout(constant_id = 0) const int TAP_COUNT = 4;
layout(constant_id = 1) const float EXPOSURE = 1.0;

layout(set = 0, binding = 0) uniform sampler2D albedo;
layout(set = 0, binding = 1) uniform Material {
    vec4 tint;
    vec2 texel;
} material;

layout(location = 0) in vec2 in_uv;
layout(location = 0) out vec4 out_color;

void main() {
    vec4 sum = vec4(0.0);
    for (int i = 0; i < TAP_COUNT; ++i) {
        sum += texture(albedo, in_uv + material.texel * float(i));
    }
    out_color = sum / float(TAP_COUNT) * material.tint * EXPOSURE;
}
