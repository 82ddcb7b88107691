//! The manifest parser: any text is a manifest or a located error, never a panic; every
//! name it accepts is a single safe path component.
#![no_main]

use kiln::manifest::Manifest;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|text: &str| {
    let Ok(manifest) = Manifest::parse(Path::new("kiln.toml"), Path::new("/p"), text) else {
        return;
    };
    let out = Path::new("/p/out");
    for shader in &manifest.shaders {
        assert!(kiln::boundary::check_name(&shader.name).is_ok());
        for pass in &shader.passes {
            assert!(kiln::boundary::check_name(&pass.name).is_ok());
            for keywords in &shader.variants {
                let relative = kiln::pipeline::output_path(&shader.name, &pass.name, keywords, "spv");
                let path = kiln::boundary::output_file(out, &relative)
                    .expect("a path joined from checked names is safe");
                assert!(path.starts_with(out));
            }
        }
    }
    assert!(manifest.variant_count() <= manifest.limits.max_variants);
});
