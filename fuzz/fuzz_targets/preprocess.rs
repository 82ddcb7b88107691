//! The preprocessor: directives, `#if` expressions and macros over up to three files that
//! include each other. Any input is a text or a typed error, never a panic or a hang.
#![no_main]

use kiln::preprocess::{preprocess, Dialect, MemoryLoader, PreprocessBudget, PreprocessRequest};
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::path::PathBuf;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Files separated by NUL: main.wgsl, a.wgsl, dir/b.wgsl. The first byte picks the
    // preprocessor and the keywords.
    let mut parts = text.splitn(3, '\0');
    let main = parts.next().unwrap_or_default();
    let mut loader = MemoryLoader::new();
    let (selector, main) = match main.char_indices().nth(1) {
        Some((i, _)) => (main.as_bytes()[0], &main[i..]),
        None => (0, main),
    };
    loader.insert("main.wgsl", main);
    if let Some(a) = parts.next() {
        loader.insert("a.wgsl", a);
    }
    if let Some(b) = parts.next() {
        loader.insert("dir/b.wgsl", b);
    }
    // Bits 4-5 pick the preprocessor: kiln's WGSL one, or the C one of GLSL or HLSL.
    let language = match (selector >> 4) % 3 {
        0 => Dialect::Wgsl,
        1 => Dialect::Glsl,
        _ => Dialect::Hlsl,
    };
    // `dir` is an include directory: `#include "b.wgsl"` and `<b.wgsl>` find dir/b.wgsl.
    let include_dirs = [PathBuf::from("dir")];
    let all = ["FOG", "SKIN", "A"];
    let keywords: Vec<&str> = all
        .iter()
        .enumerate()
        .filter(|(i, _)| selector & (2 << i) != 0)
        .map(|(_, k)| *k)
        .collect();
    let request = PreprocessRequest {
        entry: Path::new("main.wgsl"),
        language,
        include_dirs: &include_dirs,
        keywords: &keywords,
        defines: &[("N", "3")],
        budget: PreprocessBudget::default(),
    };
    if let Ok(out) = preprocess(&request, &loader) {
        // Every output line maps back to a file that was read.
        let lines = out.text.lines().count();
        for line in 1..=lines {
            if let Some(origin) = out.origin(u32::try_from(line).unwrap_or(u32::MAX)) {
                assert!(out.files().iter().any(|f| f == origin.file));
            }
        }
    }
});
