#version 450
// Luminance histogram: workgroup size from specialization constants, shared atomics.

layout(local_size_x_id = 0, local_size_y_id = 1) in;
layout(constant_id = 2) const uint BINS = 64;

layout(set = 0, binding = 0) uniform sampler2D image;
layout(set = 0, binding = 1, std430) buffer Histogram {
    uint counts[];
} histogram;

shared uint local_counts[BINS];

void main() {
    uint index = gl_LocalInvocationIndex;
    if (index < BINS) {
        local_counts[index] = 0u;
    }
    barrier();
    vec3 rgb = texelFetch(image, ivec2(gl_GlobalInvocationID.xy), 0).rgb;
    float luminance = dot(rgb, vec3(0.2126, 0.7152, 0.0722));
    uint bin = min(uint(luminance * float(BINS)), BINS - 1u);
    atomicAdd(local_counts[bin], 1u);
    barrier();
    if (index < BINS) {
        atomicAdd(histogram.counts[index], local_counts[index]);
    }
}
