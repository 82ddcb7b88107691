//! Reads the exact versions of naga (and, with the `glslang` feature, SPIRV-Cross) this build
//! links from the workspace's `Cargo.lock`, so that
//! the compiler identity in every artifact key follows `cargo update` instead of a literal
//! written by hand.

use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let lock = manifest_dir.join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = match std::fs::read_to_string(&lock) {
        Ok(text) => text,
        Err(e) => {
            println!(
                "cargo:error=cannot read {} to find naga's version: {e}",
                lock.display()
            );
            std::process::exit(1);
        }
    };
    match locked_version(&text, "naga") {
        Some(version) => println!("cargo:rustc-env=KILN_NAGA_VERSION={version}"),
        None => {
            println!(
                "cargo:error={} names no single `naga` package",
                lock.display()
            );
            std::process::exit(1);
        }
    }
    // SPIRV-Cross, built with the `glslang` feature: `spirv-cross-sys`'s version names the
    // vendored SPIRV-Cross commit (e.g. `0.7.4+aa217ae`).
    if std::env::var_os("CARGO_FEATURE_GLSLANG").is_some() {
        match locked_version(&text, "spirv-cross-sys") {
            Some(version) => println!("cargo:rustc-env=KILN_SPIRV_CROSS_VERSION={version}"),
            None => {
                println!(
                    "cargo:error={} names no single `spirv-cross-sys` package",
                    lock.display()
                );
                std::process::exit(1);
            }
        }
    }
}

/// The version of the one package called `name` in a `Cargo.lock`; `None` when there is none
/// or several (then which one kiln links is not known here).
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let mut found = None;
    for package in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            package.lines().find_map(|line| {
                let value = line.trim().strip_prefix(key)?.trim_start();
                let value = value.strip_prefix('=')?.trim();
                Some(value.trim_matches('"').to_owned())
            })
        };
        if field("name").as_deref() == Some(name) {
            if found.is_some() {
                return None;
            }
            found = field("version");
        }
    }
    found
}
