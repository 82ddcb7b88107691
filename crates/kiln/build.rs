//! Build-time facts that become part of every artifact's identity:
//!
//! - the exact version of naga this build links, read from the workspace's `Cargo.lock`, so
//!   that the compiler identity follows `cargo update` instead of a literal written by hand;
//! - with the `glslang` feature: links glslang's own static libraries after shaderc's (Debian's
//!   `libshaderc_combined.a` does not contain glslang, unlike the one the Vulkan SDK ships),
//!   and records the versions of shaderc, glslang and SPIRV-Tools that are linked. The
//!   libraries are static, so the versions found here are the code inside the binary;
//! - with the `glslang` feature: the version of SPIRV-Cross (`spirv-cross-sys`, naming the
//!   vendored SPIRV-Cross commit) from `Cargo.lock`.

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
    match locked_version(&text, "naga") {
        Some(version) => println!("cargo:rustc-env=KILN_NAGA_VERSION={version}"),
        None => fail(&format!(
            "{} names no single `naga` package",
            lock.display()
        )),
    }
    if std::env::var_os("CARGO_FEATURE_GLSLANG").is_some() {
        let shaderc_crate = locked_version(&text, "shaderc").unwrap_or_else(|| "unknown".into());
        glslang::link_and_version(&shaderc_crate);
        match locked_version(&text, "spirv-cross-sys") {
            Some(version) => println!("cargo:rustc-env=KILN_SPIRV_CROSS_VERSION={version}"),
            None => fail(&format!(
                "{} names no single `spirv-cross-sys` package",
                lock.display()
            )),
        }
    }
}

fn fail(message: &str) -> ! {
    println!("cargo:error={message}");
    std::process::exit(1);
}

#[cfg(feature = "glslang")]
mod glslang {
    use super::fail;
    use std::path::Path;

    /// glslang's static libraries, in the order a single-pass linker needs them (users
    /// before what they use).
    const LIBRARIES: &[&str] = &[
        "glslang",
        "MachineIndependent",
        "GenericCodeGen",
        "OSDependent",
        "OGLCompiler",
        "HLSL",
        "SPIRV",
        "SPIRV-Tools-opt",
        "SPIRV-Tools",
        "glslang-default-resource-limits",
    ];

    pub(super) fn link_and_version(shaderc_crate: &str) {
        println!("cargo:rerun-if-env-changed=SHADERC_LIB_DIR");
        let shaderc = probe("shaderc_combined");
        let spirv_tools = probe("SPIRV-Tools");
        let lib_dir = std::env::var("SHADERC_LIB_DIR").ok().or_else(|| {
            shaderc
                .link_paths
                .first()
                .map(|p| p.to_string_lossy().into_owned())
        });
        let Some(lib_dir) = lib_dir else {
            fail("pkg-config gives no library directory for shaderc_combined");
        };
        println!("cargo:rustc-link-search=native={lib_dir}");
        for name in LIBRARIES {
            if !Path::new(&lib_dir).join(format!("lib{name}.a")).exists() {
                fail(&format!(
                    "lib{name}.a is not in {lib_dir}: install glslang's static libraries \
                     (Debian: apt-get install libshaderc-dev glslang-dev)"
                ));
            }
            println!("cargo:rustc-link-lib=static={name}");
        }
        let glslang = glslang_version(&shaderc.include_paths);
        println!(
            "cargo:rustc-env=KILN_GLSLANG_VERSION=shaderc {} (crate {shaderc_crate}), glslang {glslang}, SPIRV-Tools {}",
            shaderc.version, spirv_tools.version
        );
    }

    fn probe(name: &str) -> pkg_config::Library {
        match pkg_config::Config::new()
            .cargo_metadata(false)
            .statik(true)
            .probe(name)
        {
            Ok(library) => library,
            Err(e) => fail(&format!(
                "the `glslang` feature needs {name} (Debian: apt-get install libshaderc-dev): {e}"
            )),
        }
    }

    /// glslang's version from its `build_info.h`, which the library was built with.
    fn glslang_version(include_paths: &[std::path::PathBuf]) -> String {
        let mut dirs: Vec<std::path::PathBuf> = include_paths.to_vec();
        dirs.push("/usr/include".into());
        dirs.push("/usr/local/include".into());
        for dir in dirs {
            let header = dir.join("glslang/build_info.h");
            let Ok(text) = std::fs::read_to_string(&header) else {
                continue;
            };
            println!("cargo:rerun-if-changed={}", header.display());
            let field = |name: &str| {
                text.lines().find_map(|line| {
                    let rest = line.trim().strip_prefix("#define")?.trim_start();
                    let value = rest.strip_prefix(name)?;
                    value
                        .starts_with(char::is_whitespace)
                        .then(|| value.trim().trim_matches('"').to_owned())
                })
            };
            if let (Some(major), Some(minor), Some(patch)) = (
                field("GLSLANG_VERSION_MAJOR"),
                field("GLSLANG_VERSION_MINOR"),
                field("GLSLANG_VERSION_PATCH"),
            ) {
                let flavor = field("GLSLANG_VERSION_FLAVOR").unwrap_or_default();
                return format!("{major}.{minor}.{patch}{flavor}");
            }
        }
        fail("glslang/build_info.h not found: install glslang-dev (Debian)")
    }
}

#[cfg(not(feature = "glslang"))]
mod glslang {
    pub(super) fn link_and_version(_: &str) {}
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
