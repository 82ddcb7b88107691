// Frame-wide data shared by every WGSL shader of the demo: camera, sun, fog settings, and
// the per-object transform. Bind group 0 is the frame, 1 the material, 2 the object.

#ifndef DEMO_COMMON_WGSL
#define DEMO_COMMON_WGSL

const PI: f32 = 3.14159265;

struct Globals {
    view_proj: mat4x4<f32>,
    view: mat4x4<f32>,
    // xyz: camera position in world space; w: time in seconds.
    camera_position: vec4<f32>,
    // xyz: direction towards the sun (normalised); w: unused.
    sun_direction: vec4<f32>,
    // rgb: sun radiance; a: intensity.
    sun_color: vec4<f32>,
    // rgb: ambient (sky) radiance; a: ambient occlusion strength.
    ambient: vec4<f32>,
    // rgb: fog colour; a: exponential density.
    fog_color: vec4<f32>,
    // x: linear start, y: linear end, z: height of the fog floor, w: height falloff.
    fog_params: vec4<f32>,
};

@group(0) @binding(0) var<uniform> globals: Globals;

struct Object {
    model: mat4x4<f32>,
    // Inverse-transpose of `model`; only the upper 3x3 is used.
    normal_matrix: mat4x4<f32>,
    tint: vec4<f32>,
};

@group(2) @binding(0) var<uniform> object: Object;

fn camera_position() -> vec3<f32> {
    return globals.camera_position.xyz;
}

fn time_seconds() -> f32 {
    return globals.camera_position.w;
}

fn transform_normal(normal: vec3<f32>) -> vec3<f32> {
    let m = object.normal_matrix;
    return normalize(mat3x3<f32>(m[0].xyz, m[1].xyz, m[2].xyz) * normal);
}

fn srgb_to_linear(color: vec3<f32>) -> vec3<f32> {
    let low = color / 12.92;
    let high = pow((color + 0.055) / 1.055, vec3<f32>(2.4));
    return select(high, low, color <= vec3<f32>(0.04045));
}

fn luminance(color: vec3<f32>) -> f32 {
    return dot(color, vec3<f32>(0.2126, 0.7152, 0.0722));
}

#endif
