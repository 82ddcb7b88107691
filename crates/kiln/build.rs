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
        #[cfg(feature = "glslang")]
        glslang_options(&version("glslang-sys"));
    }
}

/// Builds `native/glslang_options.cpp`, which sets `hlsl_iomap`, `hlsl_functionality1` and
/// `nan_clamp` through glslang's C++ API: glslang's C interface has no switch for them, but
/// glslang-sys compiles the whole of glslang into its static library and ships its headers.
///
/// glslang-sys publishes no include path (its build script prints no `cargo:include`), so
/// its source directory is found where cargo unpacks registry crates, for the locked version
/// (the headers must be the ones the library was built from). `KILN_GLSLANG_SYS_DIR` names it
/// instead for a vendored or patched glslang-sys.
#[cfg(feature = "glslang")]
fn glslang_options(locked: &str) {
    println!("cargo:rerun-if-env-changed=KILN_GLSLANG_SYS_DIR");
    println!("cargo:rerun-if-changed=native/glslang_options.cpp");
    let dir = match std::env::var_os("KILN_GLSLANG_SYS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => match registry_crate(&format!("glslang-sys-{locked}")) {
            Some(dir) => dir,
            None => fail(&format!(
                "cannot find glslang-sys {locked}'s sources under $CARGO_HOME/registry/src; set KILN_GLSLANG_SYS_DIR to its directory"
            )),
        },
    };
    let include = dir.join("native/glslang");
    if !include.join("glslang/Public/ShaderLang.h").is_file() {
        fail(&format!(
            "{} holds no glslang/Public/ShaderLang.h",
            include.display()
        ));
    }
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        // As glslang-sys builds glslang: the TShader declarations must match the library's.
        .define("ENABLE_SPIRV", "ON")
        .define("ENABLE_HLSL", "ON")
        .include(&include)
        .file("native/glslang_options.cpp");
    if build.get_compiler().is_like_msvc() {
        build.flag("/EHs-c-").define("_HAS_EXCEPTIONS", "0");
    } else {
        build.flag("-fno-exceptions");
    }
    build.compile("kiln_glslang_options");
}

/// `<CARGO_HOME>/registry/src/<index>/<name>`, the first index that has it.
#[cfg(feature = "glslang")]
fn registry_crate(name: &str) -> Option<PathBuf> {
    let home = match std::env::var_os("CARGO_HOME") {
        Some(home) => PathBuf::from(home),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".cargo"),
    };
    let mut indexes: Vec<PathBuf> = std::fs::read_dir(home.join("registry/src"))
        .ok()?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .collect();
    // A fixed order, so that two indexes holding the crate resolve the same way every build.
    indexes.sort();
    indexes
        .into_iter()
        .map(|index| index.join(name))
        .find(|dir| dir.is_dir())
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
