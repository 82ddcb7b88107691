#version 450
// kiln test shader: a workgroup size from specialization constants and a storage buffer.

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;
layout(constant_id = 1) const float SCALE = 2.0;

layout(set = 0, binding = 0) buffer Values {
    float values[];
} data;

layout(set = 0, binding = 1) uniform Params {
    uint count;
} params;

void main() {
    uint index = gl_GlobalInvocationID.x;
    if (index < params.count) {
        data.values[index] = data.values[index] * SCALE;
    }
}
