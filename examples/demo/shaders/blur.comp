#version 450
// Separable Gaussian blur, one direction per dispatch.
//
// Each invocation reads its own taps: naga's GLSL front end turns `barrier()` into a barrier
// that includes subgroups, which needs a validator capability kiln does not enable, so a
// shared-memory tile (load, barrier, filter) cannot be used here.

#if defined(RADIUS_3)
#define RADIUS 3
#elif defined(RADIUS_5)
#define RADIUS 5
#elif defined(RADIUS_9)
#define RADIUS 9
#else
#error Blur needs RADIUS_3, RADIUS_5 or RADIUS_9
#endif

#if defined(HORIZONTAL)
#define DIRECTION ivec2(1, 0)
#elif defined(VERTICAL)
#define DIRECTION ivec2(0, 1)
#else
#error Blur needs HORIZONTAL or VERTICAL
#endif

layout(local_size_x = 8, local_size_y = 8, local_size_z = 1) in;

layout(set = 0, binding = 0) uniform texture2D t_source;
layout(set = 0, binding = 1) uniform sampler s_point;
layout(set = 0, binding = 2, rgba16f) uniform writeonly image2D i_target;

// Gaussian weight of tap `offset`; sigma puts the kernel's edge near 1% of its centre.
float weight(int offset) {
    float sigma = float(RADIUS) / 3.0 + 0.5;
    return exp(-float(offset * offset) / (2.0 * sigma * sigma));
}

void main() {
    ivec2 size = textureSize(sampler2D(t_source, s_point), 0);
    ivec2 pixel = ivec2(gl_GlobalInvocationID.xy);
    if (pixel.x >= size.x || pixel.y >= size.y) {
        return;
    }
    vec4 sum = vec4(0.0);
    float total = 0.0;
    for (int offset = -RADIUS; offset <= RADIUS; offset++) {
        // Clamp to the edge: the border pixel repeats outwards.
        ivec2 tap = clamp(pixel + DIRECTION * offset, ivec2(0), size - 1);
        float w = weight(offset);
        sum += texelFetch(sampler2D(t_source, s_point), tap, 0) * w;
        total += w;
    }
    imageStore(i_target, pixel, sum / total);
}
