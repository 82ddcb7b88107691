//! Build-time facts that become part of every artifact's identity:
//!
//! - the exact version of naga this build links, read from the workspace's `Cargo.lock`, so
//!   that the compiler identity follows `cargo update` instead of a literal written by hand;
//! - with the `glslang` feature: the versions of the vendored native compilers from the same
//!   lock file: `glslang` and `glslang-sys` (whose build metadata names the vendored glslang
//!   commit), `spirv-tools-sys` (which pins its vendored SPIRV-Tools) and `spirv-cross-sys`
//!   (naming the vendored SPIRV-Cross commit). They are built from source, so the locked
//!   versions are the code inside the binary.

use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let lock = manifest_dir.join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = match std::fs::read_to_string(&lock) {
        Ok(text) => text,
        Err(e) => fail(&format!(
            "cannot read {} to find naga's version: {e}",
            lock.display()
        )),
    };
    let version = |name: &str| match locked_version(&text, name) {
        Some(version) => version,
        None => fail(&format!(
            "{} names no single `{name}` package",
            lock.display()
        )),
    };
    println!("cargo:rustc-env=KILN_NAGA_VERSION={}", version("naga"));
    if std::env::var_os("CARGO_FEATURE_GLSLANG").is_some() {
        println!(
            "cargo:rustc-env=KILN_GLSLANG_VERSION=glslang crate {}, glslang-sys {}, spirv-tools crate {}, spirv-tools-sys {}",
            version("glslang"),
            version("glslang-sys"),
            version("spirv-tools"),
            version("spirv-tools-sys"),
        );
        println!(
            "cargo:rustc-env=KILN_SPIRV_CROSS_VERSION={}",
            version("spirv-cross-sys")
        );
    }
}

fn fail(message: &str) -> ! {
    println!("cargo:error={message}");
    std::process::exit(1);
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
