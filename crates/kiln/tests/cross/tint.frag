#version 450
// kiln test shader: a specialization constant and a uniform block, no samplers.

layout(constant_id = 3) const float STRENGTH = 0.75;

layout(set = 0, binding = 0) uniform Tint {
    vec4 color;
} tint;

layout(location = 0) out vec4 out_color;

void main() {
    out_color = tint.color * STRENGTH;
}
