//! The pack the C ABI tests (`tests/ffi.rs`, `tests/c_abi.rs`) look variants up in.
#![allow(dead_code)] // each test crate uses part of it

use std::path::{Path, PathBuf};

use kiln_runtime::canon;
use kiln_runtime::pack::PackWriter;

/// One variant of the sample pack: shader, pass, keywords (as given to the writer), target.
pub struct Sample {
    pub shader: &'static str,
    pub pass: &'static str,
    pub keywords: &'static [&'static str],
    pub target: &'static str,
}

/// Every variant of the sample pack. Lit declares FOG, SKIN, SHADOWS; `Lit/Forward[SHADOWS]`
/// is legal but not built.
pub const SAMPLES: &[Sample] = &[
    sample("Lit", "Forward", &[], "spirv"),
    sample("Lit", "Forward", &["FOG"], "spirv"),
    sample("Lit", "Forward", &["SKIN", "FOG"], "spirv"),
    sample("Lit", "Forward", &["SKIN", "FOG"], "msl"),
    sample("Lit", "Depth", &["SKIN"], "spirv"),
    sample("Unlit", "Forward", &["ALPHA"], "spirv"),
];

const fn sample(
    shader: &'static str,
    pass: &'static str,
    keywords: &'static [&'static str],
    target: &'static str,
) -> Sample {
    Sample {
        shader,
        pass,
        keywords,
        target,
    }
}

impl Sample {
    /// The canonical keyword text (`FOG;SKIN`).
    pub fn text(&self) -> String {
        let set = canon::canonicalize(self.keywords.iter().map(|k| k.to_string()).collect());
        canon::keyword_text(&set)
    }

    pub fn digest(&self) -> String {
        canon::variant_digest(
            self.shader,
            self.pass,
            &self.text(),
            self.target.len() as u64,
        )
    }

    /// The artifact: distinct for every variant, printable, and unique in the pack file.
    pub fn bytes(&self) -> Vec<u8> {
        format!(
            "artifact {}/{}[{}] for {}",
            self.shader,
            self.pass,
            self.text(),
            self.target
        )
        .into_bytes()
    }
}

/// The sample pack's bytes.
pub fn sample_pack() -> Vec<u8> {
    let mut w = PackWriter::new();
    w.add_target("spirv").unwrap();
    w.add_target("msl").unwrap();
    w.add_shader("Lit", ["FOG", "SKIN", "SHADOWS"], ["Forward", "Depth"])
        .unwrap();
    w.add_shader("Unlit", ["ALPHA"], ["Forward"]).unwrap();
    for s in SAMPLES {
        add_variant(&mut w, s, &s.digest(), &s.bytes());
    }
    w.to_bytes().unwrap()
}

/// The one call to `PackWriter::add_variant` (its parameters are changing).
fn add_variant(w: &mut PackWriter, s: &Sample, digest: &str, bytes: &[u8]) {
    w.add_variant(s.shader, s.pass, s.keywords, s.target, digest, bytes, b"")
        .unwrap();
}

/// A fresh, empty directory under cargo's per-target temporary directory (one per test
/// name, emptied by the next run, so runs do not pile up).
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes the sample pack into `dir` and returns its path.
pub fn write_sample_pack(dir: &Path) -> PathBuf {
    let path = dir.join("sample.kpack");
    std::fs::write(&path, sample_pack()).unwrap();
    path
}
