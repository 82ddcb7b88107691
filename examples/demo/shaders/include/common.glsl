// Frame-wide data for the GLSL shaders of the demo, laid out like `Globals` in common.wgsl so
// that one uniform buffer serves both languages.

#ifndef DEMO_COMMON_GLSL
#define DEMO_COMMON_GLSL

layout(std140, set = 0, binding = 0) uniform Globals {
    mat4 u_view_proj;
    mat4 u_view;
    vec4 u_camera_position; // xyz: camera position; w: time in seconds
    vec4 u_sun_direction;
    vec4 u_sun_color;
    vec4 u_ambient;
    vec4 u_fog_color;       // rgb: colour; a: exponential density
    vec4 u_fog_params;      // x: linear start, y: linear end, z: fog floor, w: height falloff
    vec4 u_depth_params;    // x: near plane, y: far plane
    vec4 u_screen_size;     // xy: size in pixels; zw: 1 / size
};

float saturate(float x) {
    return clamp(x, 0.0, 1.0);
}

vec3 saturate(vec3 x) {
    return clamp(x, vec3(0.0), vec3(1.0));
}

float luminance(vec3 color) {
    return dot(color, vec3(0.2126, 0.7152, 0.0722));
}

// View-space distance of a depth-buffer value (standard perspective projection, 0..1 depth).
float linear_depth(float depth) {
    float near = u_depth_params.x;
    float far = u_depth_params.y;
    return near * far / (far - depth * (far - near));
}

#endif
