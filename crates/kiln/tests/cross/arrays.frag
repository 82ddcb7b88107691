#version 450
// kiln test shader: arrays of separate textures and samplers, indexed by push constants.

layout(set = 0, binding = 0) uniform texture2D layers[4];
layout(set = 0, binding = 1) uniform sampler filters[2];

layout(push_constant) uniform Pick {
    int layer;
    int filter_index;
} pick;

layout(location = 0) in vec2 v_uv;
layout(location = 0) out vec4 out_color;

void main() {
    out_color = texture(sampler2D(layers[pick.layer], filters[pick.filter_index]), v_uv);
}
