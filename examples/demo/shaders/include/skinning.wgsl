// Linear blend skinning with up to four joints per vertex; joint matrices come from a
// storage buffer in the object's bind group.

#pragma once

#ifdef SKIN
@group(2) @binding(1) var<storage, read> joint_matrices: array<mat4x4<f32>>;

fn skin_matrix(joints: vec4<u32>, weights: vec4<f32>) -> mat4x4<f32> {
    // Weights are renormalised: exporters often leave them summing to slightly less than 1.
    let total = max(weights.x + weights.y + weights.z + weights.w, 1e-4);
    let w = weights / total;
    return joint_matrices[joints.x] * w.x
        + joint_matrices[joints.y] * w.y
        + joint_matrices[joints.z] * w.z
        + joint_matrices[joints.w] * w.w;
}
#endif
