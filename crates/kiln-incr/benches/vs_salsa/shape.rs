//! The workload shapes both engines run: sizes, the values queries compute, and the execution counter.
//!
//! Keeping the arithmetic here means the two engine halves cannot drift apart: each
//! side's query bodies call these functions and each rep checks its result against them.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Distinct keys fetched round-robin by `hot_fetch`.
pub const HOT_KEYS: usize = 256;
/// Passes over `HOT_KEYS` per timed rep.
pub const HOT_PASSES: usize = 2_000;

/// Roots of `deep_verify`; each root owns a 7-query tree.
pub const DEEP_ROOTS: usize = 256;
/// Memos in one tree: root, two branches, four leaves.
pub const DEEP_TREE_MEMOS: usize = 7;
/// Unrelated-write-then-verify rounds summed into one rep.
pub const DEEP_ROUNDS: usize = 20;

/// Inputs (and outer queries) of the scaled seed scenario.
pub const SEED_INPUTS: usize = 100_000;
/// LRU capacity of the seed scenario's inner query.
pub const SEED_INNER_CAPACITY: usize = 1_000;

/// The order in which the seed scenario re-reads its outer queries: creation order, or a
/// fixed pseudo-random permutation (the same on both engines) that defeats any locality
/// between key order and memory layout.
pub fn seed_read_order(shuffled: bool) -> Vec<u32> {
    let mut order: Vec<u32> = (0..SEED_INPUTS as u32).collect();
    if shuffled {
        // Fisher-Yates driven by xorshift64: deterministic, no extra dependency.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for i in (1..order.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let j = (state % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
    }
    order
}

/// Inputs summed by the `fan_in` query.
pub const FAN_INPUTS: usize = 100_000;
/// The input `fan_in` changes before each timed re-fetch.
pub const FAN_CHANGED_INPUT: usize = FAN_INPUTS / 2;

/// Keys of the LRU-enabled query hit by `parallel_hits`.
pub const PARALLEL_KEYS: usize = 1_000;
/// LRU capacity of that query: larger than the key count, so every fetch is a hit.
pub const PARALLEL_CAPACITY: usize = 2_000;
/// Threads hitting the query at once (the single-thread figure is printed beside it).
pub const PARALLEL_THREADS: usize = 2;
/// Passes over all keys per thread per rep.
pub const PARALLEL_PASSES: usize = 200;

/// Memos created to measure bytes per memo.
pub const MEMO_BYTES_KEYS: usize = 100_000;

/// Query bodies of both engines bump this, so a rep can assert exactly what executed
/// without installing an event listener (which would tax the hit path being measured).
pub static EXECUTIONS: AtomicUsize = AtomicUsize::new(0);

/// Records one query execution.
#[inline]
pub fn count_execution() {
    EXECUTIONS.fetch_add(1, Ordering::Relaxed);
}

/// Query executions so far, across both engines.
pub fn executions() -> usize {
    EXECUTIONS.load(Ordering::Relaxed)
}

/// The value stored in input `index` before any edit.
pub fn initial_input(index: usize) -> u64 {
    index as u64
}

/// `hot_fetch`'s derived query over one input.
pub fn hot(input: u64) -> u64 {
    input.wrapping_mul(3).wrapping_add(1)
}

/// Leaf `which` (0..4) of a `deep_verify` tree.
pub fn leaf(input: u64, which: u64) -> u64 {
    input + which + 1
}

/// What a `deep_verify` root returns for its input.
pub fn tree_root(input: u64) -> u64 {
    4 * input + 10
}

/// The seed scenario's inner query.
pub fn seed_inner(input: u64) -> u64 {
    input.wrapping_mul(2)
}

/// The seed scenario's outer query, given the inner value.
pub fn seed_outer(inner: u64) -> u64 {
    inner.wrapping_add(1)
}

/// `parallel_hits`'s LRU-enabled query.
pub fn parallel_value(input: u64) -> u64 {
    input ^ 0x5555
}

/// The one-input function whose memos `memo_bytes` weighs.
pub fn memo_value(input: u64) -> u64 {
    input.wrapping_add(7)
}

/// The value `fan_in` writes into its changed input on rep number `round` (never the initial one).
pub fn fan_edit(round: u64) -> u64 {
    1_000_000 + round
}

/// Roots of the `memo_bytes_tree` shape: each owns the seven-query tree of `deep_verify`
/// (one key read by seven queries, as salsa's `query_fetch` tree).
pub const MEMO_TREE_ROOTS: usize = 20_000;

/// The path kiln would key a shader source by (`SourceFile`, `ClosureQ`).
pub fn path_key(index: usize) -> std::path::PathBuf {
    std::path::PathBuf::from(format!(
        "shaders/materials/lit/forward_variant_{index:05}.wgsl"
    ))
}

/// The parts of a composite variant id (kiln's `VariantId`: shader, pass, sorted
/// keywords), all shared strings.
pub type VariantParts = (
    std::sync::Arc<str>,
    std::sync::Arc<str>,
    std::sync::Arc<[std::sync::Arc<str>]>,
);

/// Variant id `index`: one of 16 shaders, 2 passes, a keyword set that spells its index.
pub fn variant_parts(index: usize) -> VariantParts {
    let shader: std::sync::Arc<str> = format!("materials/lit_{:02}", index % 16).into();
    let pass: std::sync::Arc<str> = if index.is_multiple_of(2) {
        "forward"
    } else {
        "shadow"
    }
    .into();
    let keywords: std::sync::Arc<[std::sync::Arc<str>]> = (0..4)
        .filter(|bit| (index >> (bit + 5)) & 1 == 1)
        .map(|bit| std::sync::Arc::<str>::from(format!("FEATURE_{bit}")))
        .chain(std::iter::once(std::sync::Arc::<str>::from(format!(
            "VARIANT_{}",
            index
        ))))
        .collect();
    (shader, pass, keywords)
}

/// Events both engines' listeners have seen (the listener configuration only).
pub static EVENTS: AtomicUsize = AtomicUsize::new(0);

/// What both listeners do per event: what kiln's pipeline listener does (classify, count).
#[inline]
pub fn count_event() {
    EVENTS.fetch_add(1, Ordering::Relaxed);
}

/// The salsa build this benchmark compares against, for the output.
pub const SALSA_FEATURES: &str = "salsa 0.28.5, default features (salsa_unstable, rayon, \
     macros, inventory, accumulator); not enabled: persistence, shuttle, detailed-trace; \
     DatabaseImpl with no event callback unless a line says 'listener'";
