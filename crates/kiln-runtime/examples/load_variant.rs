//! The README's "In an engine" example, run on a built output directory:
//! `cargo run -p kiln-runtime --example load_variant -- examples/demo/out` (CI runs it after
//! building the demo). Looks up `Lit/Forward` with `SKIN`, `FOG` and a repeat, then an
//! unknown keyword, and prints what it found.

use kiln_runtime::{Library, LookupError};
use std::process::ExitCode;

fn main() -> ExitCode {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "examples/demo/out".to_owned());
    let library = match Library::open_dir(&out, "spirv") {
        Ok(library) => library,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    match library.get(
        "Lit",
        "Forward",
        &["SKIN", "LIGHTS_4", "FOG", "SKIN"],
        "spirv",
    ) {
        Ok(v) => println!(
            "Lit/Forward[{}] {}: {} bytes",
            v.keywords.text(),
            v.digest,
            v.bytes.len()
        ),
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    }
    match library.get("Lit", "Forward", &["FOGG"], "spirv") {
        Err(LookupError::UnknownKeyword {
            keyword, declared, ..
        }) => {
            println!(
                "unknown keyword {keyword}; Lit declares {}",
                declared.join(" ")
            );
            ExitCode::SUCCESS
        }
        other => {
            eprintln!("expected an unknown-keyword error, got {other:?}");
            ExitCode::FAILURE
        }
    }
}
