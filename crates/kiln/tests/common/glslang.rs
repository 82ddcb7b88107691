//! For tests of the glslang front end: whether to run them, and `spirv-val`.

use std::path::Path;
use std::process::Command;

/// Whether glslang is linked. Without it the caller skips, saying why, unless
/// `KILN_REQUIRE_GLSLANG=1` (as in CI), which makes the missing feature a failure.
pub fn require_glslang() -> bool {
    if kiln::compile::glslang::AVAILABLE {
        return true;
    }
    assert!(
        std::env::var("KILN_REQUIRE_GLSLANG").as_deref() != Ok("1"),
        "KILN_REQUIRE_GLSLANG=1 but kiln was built without the `glslang` feature (on by default: drop `--no-default-features`)"
    );
    eprintln!("skipped: kiln is built without the default `glslang` feature (`cargo test -p kiln` runs this)");
    false
}

/// Checks SPIR-V 1.0 `bytes` with `spirv-val` (Vulkan 1.0), when it is installed (required
/// with `KILN_REQUIRE_SPIRV_VAL=1`).
pub fn spirv_val(bytes: &[u8], what: &str) {
    spirv_val_env(bytes, what, "vulkan1.0");
}

/// Checks SPIR-V with `spirv-val --target-env env`.
pub fn spirv_val_env(bytes: &[u8], what: &str, env: &str) {
    if Command::new("spirv-val").arg("--version").output().is_err() {
        assert!(
            std::env::var("KILN_REQUIRE_SPIRV_VAL").as_deref() != Ok("1"),
            "KILN_REQUIRE_SPIRV_VAL=1 but spirv-val is not on PATH (Debian: spirv-tools)"
        );
        eprintln!("spirv-val not found: {what} is not validated");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("module.spv");
    std::fs::write(&file, bytes).expect("write module");
    let output = Command::new("spirv-val")
        .arg("--target-env")
        .arg(env)
        .arg(&file)
        .output()
        .expect("run spirv-val");
    assert!(
        output.status.success(),
        "spirv-val rejects {what}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// What `glslangValidator` checks of a translated output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    /// OpenGL GLSL (glslangValidator's default client).
    Glsl,
    /// HLSL, compiled to SPIR-V by glslang's HLSL front end (`-V -D`), entry point `main`.
    Hlsl,
}

/// Checks a GLSL or HLSL `text` of `stage` (glslangValidator's `-S` name: `vert`, `frag`,
/// `comp`, `geom`, `tesc`, `tese`) with `glslangValidator`, when it is installed (required
/// with `KILN_REQUIRE_GLSLANG=1`). Returns whether it ran.
pub fn glslang_validator(text: &str, stage: &str, checked: Checked, what: &str) -> bool {
    if Command::new("glslangValidator")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var("KILN_REQUIRE_GLSLANG").as_deref() != Ok("1"),
            "KILN_REQUIRE_GLSLANG=1 but glslangValidator is not on PATH (Debian: glslang-tools)"
        );
        eprintln!("glslangValidator not found: {what} is not validated");
        return false;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("shader.txt");
    std::fs::write(&file, text).expect("write shader");
    let mut command = Command::new("glslangValidator");
    command.arg("-S").arg(stage);
    if checked == Checked::Hlsl {
        // glslang reads HLSL only to write SPIR-V.
        command
            .args(["-V", "-D", "-e", "main", "-o"])
            .arg(dir.path().join("shader.spv"));
    }
    let output = command.arg(&file).output().expect("run glslangValidator");
    assert!(
        output.status.success(),
        "glslangValidator rejects {what}: {}{}\n{text}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    true
}

/// The text of `tests/shaders/glslang/<name>`.
pub fn test_shader(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/shaders/glslang")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
