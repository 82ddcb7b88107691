// Physically based direct lighting: a sun and one or four point lights, Lambert diffuse and
// GGX specular.

#ifndef DEMO_LIGHTING_WGSL
#define DEMO_LIGHTING_WGSL

#include "common.wgsl"

#if defined(LIGHTS_1) && defined(LIGHTS_4)
#error LIGHTS_1 and LIGHTS_4 are exclusive
#endif

struct PointLight {
    // xyz: world position; w: radius of influence.
    position_radius: vec4<f32>,
    // rgb: colour; a: intensity.
    color_intensity: vec4<f32>,
};

struct Lights {
    // x: number of active point lights.
    count: vec4<u32>,
    points: array<PointLight, 4>,
};

@group(0) @binding(1) var<uniform> lights: Lights;

struct Surface {
    position: vec3<f32>,
    normal: vec3<f32>,
    view: vec3<f32>,
    albedo: vec3<f32>,
    roughness: f32,
    metallic: f32,
};

fn distribution_ggx(n_dot_h: f32, roughness: f32) -> f32 {
    let a = roughness * roughness;
    let a2 = a * a;
    let d = n_dot_h * n_dot_h * (a2 - 1.0) + 1.0;
    return a2 / (PI * d * d);
}

fn geometry_smith(n_dot_v: f32, n_dot_l: f32, roughness: f32) -> f32 {
    let k = (roughness + 1.0) * (roughness + 1.0) / 8.0;
    let gv = n_dot_v / (n_dot_v * (1.0 - k) + k);
    let gl = n_dot_l / (n_dot_l * (1.0 - k) + k);
    return gv * gl;
}

fn fresnel_schlick(cos_theta: f32, f0: vec3<f32>) -> vec3<f32> {
    return f0 + (vec3<f32>(1.0) - f0) * pow(1.0 - cos_theta, 5.0);
}

// Radiance reflected towards the viewer from one light arriving along `to_light`.
fn brdf(surface: Surface, to_light: vec3<f32>, radiance: vec3<f32>) -> vec3<f32> {
    let h = normalize(surface.view + to_light);
    let n_dot_l = max(dot(surface.normal, to_light), 0.0);
    let n_dot_v = max(dot(surface.normal, surface.view), 1e-4);
    let n_dot_h = max(dot(surface.normal, h), 0.0);
    let f0 = mix(vec3<f32>(0.04), surface.albedo, surface.metallic);
    let f = fresnel_schlick(max(dot(h, surface.view), 0.0), f0);
    let specular = distribution_ggx(n_dot_h, surface.roughness)
        * geometry_smith(n_dot_v, n_dot_l, surface.roughness) * f
        / max(4.0 * n_dot_v * n_dot_l, 1e-4);
    let diffuse = (vec3<f32>(1.0) - f) * (1.0 - surface.metallic) * surface.albedo / PI;
    return (diffuse + specular) * radiance * n_dot_l;
}

fn point_light(surface: Surface, light: PointLight) -> vec3<f32> {
    let to_light = light.position_radius.xyz - surface.position;
    let distance = length(to_light);
    let falloff = saturate(1.0 - pow(distance / light.position_radius.w, 4.0));
    let attenuation = falloff * falloff / (distance * distance + 1.0);
    let radiance = light.color_intensity.rgb * light.color_intensity.a * attenuation;
    return brdf(surface, to_light / max(distance, 1e-4), radiance);
}

fn sun_light(surface: Surface) -> vec3<f32> {
    let radiance = globals.sun_color.rgb * globals.sun_color.a;
    return brdf(surface, globals.sun_direction.xyz, radiance);
}

fn point_lights(surface: Surface) -> vec3<f32> {
#ifdef LIGHTS_4
    var total = vec3<f32>(0.0);
    let count = min(lights.count.x, 4u);
    for (var i = 0u; i < count; i++) {
        total += point_light(surface, lights.points[i]);
    }
    return total;
#else
    return select(vec3<f32>(0.0), point_light(surface, lights.points[0]), lights.count.x > 0u);
#endif
}

fn ambient_light(surface: Surface) -> vec3<f32> {
    // A hemisphere term: surfaces facing down see less of the sky.
    let sky = 0.5 + 0.5 * surface.normal.y;
    return globals.ambient.rgb * surface.albedo * mix(1.0 - globals.ambient.a, 1.0, sky);
}

#endif
