//! The `index.json` reader: any bytes are an index (possibly empty) whose every path stays
//! inside the output directory; nothing panics.
#![no_main]

use kiln::pipeline::Index;
use libfuzzer_sys::fuzz_target;
use std::path::{Component, Path};

fuzz_target!(|data: &[u8]| {
    let out = Path::new("/p/out");
    let (index, _warnings) = Index::from_json_checked(out, data);
    for entry in &index.entries {
        let path = kiln::boundary::output_file(out, &entry.path).expect("kept entries are safe");
        assert!(path.starts_with(out));
        assert!(path
            .strip_prefix(out)
            .expect("inside")
            .components()
            .all(|c| matches!(c, Component::Normal(_))));
    }
});
