//! Prints kiln's reflection (the reflection target's JSON) of SPIR-V files, one line each:
//! `cargo run -p kiln --example reflect_spv -- FILE.spv... [--stage vertex] [--entry main]`.
//! The stage is the module's first entry point's unless given.

use kiln::compile::{cross, Stage};

fn main() {
    let mut stage = None;
    let mut entry = "main".to_owned();
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--stage" => stage = args.next().and_then(|s| Stage::from_name(&s)),
            "--entry" => entry = args.next().unwrap_or_default(),
            _ => files.push(arg),
        }
    }
    let mut failed = false;
    for file in files {
        eprintln!("{file}");
        let bytes = match std::fs::read(&file) {
            Ok(bytes) => bytes,
            Err(e) => {
                println!("{file}: {e}");
                failed = true;
                continue;
            }
        };
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let stage = stage
            .or_else(|| first_stage(&words))
            .unwrap_or(Stage::Vertex);
        match cross::reflect(&words, stage, &entry) {
            Ok(json) => println!("{}", String::from_utf8_lossy(&json)),
            Err(e) => {
                println!("{file}: {e}");
                failed = true;
            }
        }
    }
    std::process::exit(i32::from(failed));
}

/// The stage of the module's first `OpEntryPoint`.
fn first_stage(words: &[u32]) -> Option<Stage> {
    let mut at = 5;
    while let Some(&first) = words.get(at) {
        let count = (first >> 16) as usize;
        if count == 0 {
            return None;
        }
        if first & 0xffff == 15 {
            let model = *words.get(at + 1)?;
            return Some(match model {
                0 => Stage::Vertex,
                1 => Stage::TessControl,
                2 => Stage::TessEvaluation,
                3 => Stage::Geometry,
                4 => Stage::Fragment,
                5 => Stage::Compute,
                5364 => Stage::Task,
                5365 => Stage::Mesh,
                5313 => Stage::RayGeneration,
                5314 => Stage::Intersection,
                5315 => Stage::AnyHit,
                5316 => Stage::ClosestHit,
                5317 => Stage::Miss,
                5318 => Stage::Callable,
                _ => return None,
            });
        }
        at += count;
    }
    None
}
