// Tone mapping operators: HDR scene radiance to displayable [0, 1].

#pragma once

#if defined(TONEMAP_ACES)
// Narkowicz's fit of the ACES filmic curve.
vec3 tonemap(vec3 color) {
    const float a = 2.51;
    const float b = 0.03;
    const float c = 2.43;
    const float d = 0.59;
    const float e = 0.14;
    return clamp((color * (a * color + b)) / (color * (c * color + d) + e), 0.0, 1.0);
}
#elif defined(TONEMAP_REINHARD)
// Extended Reinhard on luminance, so saturated highlights keep their hue.
vec3 tonemap(vec3 color) {
    const float white = 4.0;
    float l = luminance(color);
    float mapped = l * (1.0 + l / (white * white)) / (1.0 + l);
    return clamp(color * (mapped / max(l, 1e-4)), 0.0, 1.0);
}
#else
#error tonemap.glsl needs TONEMAP_ACES or TONEMAP_REINHARD
#endif
