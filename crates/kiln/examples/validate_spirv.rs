//! Validates SPIR-V files with the SPIRV-Tools kiln builds from source (the `spirv-tools`
//! crate), which knows newer modules than a distribution's `spirv-val` (Debian's 2023.1
//! rejects every Slang module for its source language). Prints each rejected file with the
//! validator's message and exits 1 if any was.
//!
//! `cargo run --release -p kiln --example validate_spirv -- [--target-env vulkan1.2] FILE...`

use spirv_tools::val::Validator;
use spirv_tools::TargetEnv;
use std::process::ExitCode;

fn target_env(name: &str) -> Option<TargetEnv> {
    Some(match name {
        "vulkan1.0" => TargetEnv::Vulkan_1_0,
        "vulkan1.1" => TargetEnv::Vulkan_1_1,
        "vulkan1.1spv1.4" => TargetEnv::Vulkan_1_1_Spirv_1_4,
        "vulkan1.2" => TargetEnv::Vulkan_1_2,
        "vulkan1.3" => TargetEnv::Vulkan_1_3,
        _ => return None,
    })
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    let mut env = TargetEnv::Vulkan_1_2;
    if args.peek().map(String::as_str) == Some("--target-env") {
        args.next();
        match args.next().as_deref().and_then(target_env) {
            Some(chosen) => env = chosen,
            None => {
                eprintln!("--target-env: one of vulkan1.0, vulkan1.1, vulkan1.1spv1.4, vulkan1.2, vulkan1.3");
                return ExitCode::from(2);
            }
        }
    }
    let validator = spirv_tools::val::create(Some(env));
    let (mut valid, mut rejected) = (0usize, 0usize);
    for path in args {
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) => {
                eprintln!("{path}: {e}");
                rejected += 1;
                continue;
            }
        };
        if !bytes.len().is_multiple_of(4) {
            eprintln!("{path}: not a whole number of words");
            rejected += 1;
            continue;
        }
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        match validator.validate(&words, None) {
            Ok(()) => valid += 1,
            Err(e) => {
                eprintln!("{path}: {e}");
                rejected += 1;
            }
        }
    }
    println!("validate_spirv: {valid} valid, {rejected} rejected");
    if rejected == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
