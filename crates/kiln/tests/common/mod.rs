//! Helpers shared by integration tests (each test binary uses what it needs).
#![allow(dead_code)]

pub mod glslang;

/// The compute shader of `output_writes` and `memory_bounds`: `FOG` adds `fog_value`, so an
/// edit of it changes the text of the FOG variants alone; `WIDE` changes every one's.
pub fn fill(fog_value: &str) -> String {
    format!(
        r#"@group(0) @binding(0) var<storage, read_write> data: array<f32>;

@compute @workgroup_size(1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {{
    var v: f32 = 1.0;
#ifdef FOG
    v = v + {fog_value};
#endif
#ifdef WIDE
    v = v * 4.0;
#endif
    data[id.x] = v;
}}
"#
    )
}
