//! The preprocessor with includes over a small virtual file system, under a small budget:
//! any input is a text or a typed error, never a panic or a hang; a run never spends more
//! than its budget (includes entered, bytes read), its text is within the output budget,
//! and the memory it holds at its peak is bounded by its input and budget.
#![no_main]

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use kiln::preprocess::{
    preprocess_spent, Dialect, MemoryLoader, PreprocessBudget, PreprocessRequest,
};
use libfuzzer_sys::fuzz_target;

/// Counts the bytes held, and the most held since the last reset.
struct Tracking;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only counters are added.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is forwarded.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            let held = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(held, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is forwarded.
        unsafe { System.dealloc(ptr, layout) };
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract is forwarded.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            HELD.fetch_sub(layout.size(), Ordering::Relaxed);
            let held = HELD.fetch_add(new_size, Ordering::Relaxed) + new_size;
            PEAK.fetch_max(held, Ordering::Relaxed);
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Tracking = Tracking;

/// The virtual files, in input order after the selector byte; NUL separates them.
const FILES: [&str; 5] = ["main.glsl", "a.h", "b.h", "lib/c.h", "dir/d.h"];

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (selector, text) = match text.char_indices().nth(1) {
        Some((i, _)) => (data[0], &text[i..]),
        None => (0, text),
    };
    let mut loader = MemoryLoader::new();
    for (name, part) in FILES.iter().zip(text.split('\0')) {
        loader.insert(*name, part);
    }
    // Bits 0-1: the preprocessor; bits 2-3: the file cap the budget derives from (4 to 32
    // KiB: outputs of 32 to 256 KiB, 1,024 includes); bits 4-6: keywords.
    let language = match selector % 3 {
        0 => Dialect::Wgsl,
        1 => Dialect::Glsl,
        _ => Dialect::Hlsl,
    };
    let budget = PreprocessBudget::for_max_source_bytes(4096 << ((selector >> 2) & 3));
    let keywords: Vec<&str> = ["A", "B", "GUARD"]
        .iter()
        .enumerate()
        .filter(|(i, _)| selector & (16 << i) != 0)
        .map(|(_, k)| *k)
        .collect();
    // `dir` is an include directory: `#include "d.h"` (and `<d.h>` in GLSL, HLSL) find it.
    let include_dirs = [PathBuf::from("dir")];
    let request = PreprocessRequest {
        entry: Path::new("main.glsl"),
        language,
        include_dirs: &include_dirs,
        keywords: &keywords,
        defines: &[("N", "3")],
        budget,
    };
    let before = HELD.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let (result, spent) = preprocess_spent(&request, &loader);
    let peak = PEAK.load(Ordering::Relaxed) - before;
    assert!(spent.includes <= budget.max_includes, "{spent:?}");
    assert!(spent.bytes_read <= budget.max_bytes_read, "{spent:?}");
    if let Ok(out) = &result {
        assert!(out.text.len() as u64 <= budget.max_output_bytes);
    }
    // Lexed files, tokens (at most one per output byte), the text: a few dozen bytes per
    // input and output byte. Unbounded growth would pass this at once.
    let bound = 256 * (data.len() + budget.max_output_bytes as usize) + (8 << 20);
    assert!(peak <= bound, "peak {peak} bytes over {bound}");
    drop(result);
});
