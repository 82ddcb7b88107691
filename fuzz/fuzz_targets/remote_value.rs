//! The remote cache's reply reader and value decoder: any bytes a server sends are replies or
//! an error, never a panic; no value read is longer than the cap, a round trip holds no more
//! than its budget, and no allocation made while reading is larger than the cap, whatever
//! lengths the replies' headers declare.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The value cap and round-trip budget given to the reader (kiln's defaults are 64 MiB
/// each; small here so that inputs reach them).
const CAP: usize = 16 << 10;
const BUDGET: usize = 32 << 10;
/// A `CLUSTER SLOTS` reply allocates its slot table (16,384 two-byte entries) and holds
/// strings of at most 4 KiB.
const SLOTS_LIMIT: usize = 16384 * 2;
/// Status and error lines are cut at 4 KiB (+ CRLF), which may double once while growing.
const LINE: usize = 4096 + 2;

struct Watched;

static ARMED: AtomicBool = AtomicBool::new(false);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

fn note(size: usize) {
    if ARMED.load(Ordering::Relaxed) {
        LARGEST.fetch_max(size, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; only sizes are noted.
unsafe impl GlobalAlloc for Watched {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Watched = Watched;

fuzz_target!(|data: &[u8]| {
    LARGEST.store(0, Ordering::Relaxed);
    ARMED.store(true, Ordering::Relaxed);
    let findings = kiln::store::remote::fuzz_reply(data, CAP, BUDGET);
    ARMED.store(false, Ordering::Relaxed);
    let largest = LARGEST.load(Ordering::Relaxed);
    let slots = data.first().is_some_and(|mode| mode % 2 == 1);
    if slots {
        assert!(largest <= SLOTS_LIMIT, "an allocation of {largest} bytes");
    } else {
        assert!(findings.longest <= CAP, "{findings:?}");
        // The first value may use the whole cap; after it, the budget bounds the rest.
        assert!(findings.total <= CAP.max(BUDGET), "{findings:?}");
        assert!(
            largest <= CAP.max(2 * LINE),
            "an allocation of {largest} bytes, {findings:?}"
        );
    }
});
