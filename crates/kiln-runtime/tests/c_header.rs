//! `include/kiln_runtime.h` is what cbindgen makes of `src/ffi.rs` today, byte for byte.
//! `KILN_BLESS_HEADER=1 cargo test -p kiln-runtime --test c_header` rewrites it.

use std::path::Path;

#[test]
fn the_checked_in_header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .unwrap_or_else(|error| panic!("cbindgen.toml: {error}"));
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/ffi.rs"))
        .generate()
        .unwrap_or_else(|error| panic!("cbindgen on src/ffi.rs: {error}"));
    let mut generated = Vec::new();
    bindings.write(&mut generated);

    let path = crate_dir.join("include/kiln_runtime.h");
    if std::env::var_os("KILN_BLESS_HEADER").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated)
            .unwrap_or_else(|error| panic!("cannot write {}: {error}", path.display()));
        return;
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/kiln_runtime.h is stale: run KILN_BLESS_HEADER=1 cargo test -p kiln-runtime \
         --test c_header\n--- generated ---\n{}",
        String::from_utf8_lossy(&generated)
    );
}
