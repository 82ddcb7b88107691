//! kiln-incr against salsa 0.28 on the same five workloads, plus bytes per memo, in one process.
//!
//! These VMs have slow phases of up to 2x, so the two engines alternate rep by rep
//! (kiln, salsa, kiln, ...) and every figure is reported as the median and the min of
//! its reps. Neither engine has an event listener installed. Each rep asserts what
//! executed (through a counter in the query bodies), so a figure cannot come from an
//! engine that skipped or repeated work.
//!
//! `depth` runs each engine's chain in child processes, deeper and deeper on a 2 MiB
//! thread, and prints the deepest that built, was edited and re-verified.
//!
//! Run: `cargo bench -p kiln-incr --bench vs_salsa [workload...]`.
//! Profile one engine alone: `VS_SALSA_PROFILE=kiln` (or `salsa`) repeats only that
//! engine's reps of the selected workloads for a few seconds each and prints nothing,
//! e.g. under `perf record`.

#[path = "vs_salsa/counting_alloc.rs"]
mod counting_alloc;
#[path = "vs_salsa/kiln_side.rs"]
mod kiln_side;
#[path = "vs_salsa/salsa_side.rs"]
mod salsa_side;
#[path = "vs_salsa/shape.rs"]
mod shape;

use std::sync::Barrier;
use std::time::{Duration, Instant};

/// One workload on one engine, set up and ready to be timed again and again.
pub trait Rep {
    /// Runs one timed rep and returns its figure in nanoseconds (per unit where the
    /// workload has units, e.g. per fetch).
    fn rep(&mut self) -> f64;
}

/// Runs `work(thread_index, state)` on one thread per state, all released together by a
/// barrier, and returns the wall time from the first thread's start to the last one's
/// end (measured by the workers, so a descheduled coordinator cannot shrink it) with
/// each thread's result.
pub fn run_threads<S: Send, T: Send>(
    states: Vec<S>,
    work: impl Fn(usize, S) -> T + Sync,
) -> (Duration, Vec<T>) {
    let barrier = Barrier::new(states.len());
    let (barrier, work) = (&barrier, &work);
    let timed: Vec<(Instant, Instant, T)> = std::thread::scope(|scope| {
        let workers: Vec<_> = states
            .into_iter()
            .enumerate()
            .map(|(index, state)| {
                scope.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    let result = work(index, state);
                    (start, Instant::now(), result)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("a vs_salsa worker thread panicked"))
            .collect()
    });
    let first_start = timed.iter().map(|(start, _, _)| *start).min();
    let last_end = timed.iter().map(|(_, end, _)| *end).max();
    let wall = match (first_start, last_end) {
        (Some(start), Some(end)) => end.duration_since(start),
        _ => Duration::ZERO,
    };
    (
        wall,
        timed.into_iter().map(|(_, _, result)| result).collect(),
    )
}

/// Timed reps per engine and workload (odd, so the median is one rep).
const REPS: usize = 21;

/// How long `VS_SALSA_PROFILE` repeats one engine's reps of a workload.
const PROFILE_SECONDS: u64 = 5;

/// Set in a child process of this bench to `<engine>:<levels>`: it runs that engine's
/// depth chain on a [`DEPTH_STACK`] thread and prints its times; a stack overflow kills it.
const DEPTH_CHILD_ENV: &str = "VS_SALSA_DEPTH_CHILD";

/// The stack of the thread the depth chains run on: rustc's and rayon's default for
/// spawned threads.
const DEPTH_STACK: usize = 2 << 20;

/// Chain depths tried, in order, until one fails; the goal is the last.
const DEPTH_LEVELS: [u32; 11] = [
    1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 125_000, 250_000, 500_000, 1_000_000,
];

fn main() {
    if let Ok(child) = std::env::var(DEPTH_CHILD_ENV) {
        depth_child(&child);
        return;
    }
    // `cargo bench` passes `--bench`; a filter argument picks workloads by name.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    let wanted = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    println!("vs_salsa features: {}", shape::SALSA_FEATURES);

    if wanted("hot_fetch") {
        compare(
            "hot_fetch",
            "ns per cached fetch",
            kiln_side::HotFetch::new(false),
            salsa_side::HotFetch::new(),
        );
    }
    // Context for `hot_fetch`: kiln through a `QueryHandle`, i.e. without looking up the
    // query's table on every call (salsa caches that lookup in a static per function).
    if wanted("hot_fetch_handle") {
        compare(
            "hot_fetch_handle",
            "ns per cached fetch, kiln via QueryHandle",
            kiln_side::HotFetch::new(true),
            salsa_side::HotFetch::new(),
        );
    }
    // The keys kiln itself uses (paths, composite variant ids); salsa interns each key
    // per fetch, as a caller holding a path must.
    if wanted("hot_fetch_path") {
        compare(
            "hot_fetch_path",
            "ns per cached fetch, PathBuf keys (salsa: intern + fetch)",
            kiln_side::KeyedHotFetch::<std::path::PathBuf>::new(false),
            salsa_side::KeyedHotFetch::<salsa_side::Paths, _>::on(salsa::DatabaseImpl::new()),
        );
    }
    if wanted("hot_fetch_variant") {
        compare(
            "hot_fetch_variant",
            "ns per cached fetch, variant-id keys (salsa: intern + fetch)",
            kiln_side::KeyedHotFetch::<kiln_side::VariantId>::new(false),
            salsa_side::KeyedHotFetch::<salsa_side::Variants, _>::on(salsa::DatabaseImpl::new()),
        );
    }
    // The configuration kiln ships: an event listener installed (both engines).
    if wanted("hot_fetch_listener") {
        compare(
            "hot_fetch_listener",
            "ns per cached fetch, event listener installed",
            kiln_side::HotFetch::with_listener(false, true),
            salsa_side::HotFetch::on(salsa_side::ListenedDb::new()),
        );
    }
    if wanted("hot_fetch_variant_listener") {
        compare(
            "hot_fetch_variant_listener",
            "ns per cached fetch, variant-id keys, event listener installed",
            kiln_side::KeyedHotFetch::<kiln_side::VariantId>::new(true),
            salsa_side::KeyedHotFetch::<salsa_side::Variants, _>::on(salsa_side::ListenedDb::new()),
        );
    }
    if wanted("deep_verify") {
        compare(
            "deep_verify",
            "ns per memo deep-verified",
            kiln_side::DeepVerify::new(),
            salsa_side::DeepVerify::new(),
        );
    }
    if wanted("deep_verify_path") {
        compare(
            "deep_verify_path",
            "ns per memo deep-verified, PathBuf keys (salsa: intern + fetch per root)",
            kiln_side::KeyedDeepVerify::<std::path::PathBuf>::new(false),
            salsa_side::KeyedDeepVerify::<salsa_side::Paths, _>::on(salsa::DatabaseImpl::new()),
        );
    }
    if wanted("deep_verify_variant") {
        compare(
            "deep_verify_variant",
            "ns per memo deep-verified, variant-id keys (salsa: intern + fetch per root)",
            kiln_side::KeyedDeepVerify::<kiln_side::VariantId>::new(false),
            salsa_side::KeyedDeepVerify::<salsa_side::Variants, _>::on(salsa::DatabaseImpl::new()),
        );
    }
    if wanted("deep_verify_listener") {
        compare(
            "deep_verify_listener",
            "ns per memo deep-verified, event listener installed",
            kiln_side::DeepVerify::with_listener(true),
            salsa_side::DeepVerify::on(salsa_side::ListenedDb::new()),
        );
    }
    if wanted("deep_verify_variant_listener") {
        compare(
            "deep_verify_variant_listener",
            "ns per memo deep-verified, variant-id keys, event listener installed",
            kiln_side::KeyedDeepVerify::<kiln_side::VariantId>::new(true),
            salsa_side::KeyedDeepVerify::<salsa_side::Variants, _>::on(
                salsa_side::ListenedDb::new(),
            ),
        );
    }
    if wanted("lru_seed") {
        compare(
            "lru_seed",
            "ns to re-read 100k outer queries",
            kiln_side::LruSeed::new(shape::seed_read_order(false)),
            salsa_side::LruSeed::new(&shape::seed_read_order(false)),
        );
    }
    // Context for `lru_seed`: the same re-read in a shuffled key order. In creation order
    // salsa walks its memo pages sequentially while a hashed key index does not; shuffled,
    // neither engine gets that locality.
    if wanted("lru_seed_shuffled") {
        compare(
            "lru_seed_shuffled",
            "ns to re-read 100k outer queries in shuffled order",
            kiln_side::LruSeed::new(shape::seed_read_order(true)),
            salsa_side::LruSeed::new(&shape::seed_read_order(true)),
        );
    }
    if wanted("fan_in") {
        compare(
            "fan_in",
            "ns to re-fetch a 100k-input sum after one change",
            kiln_side::FanIn::new(),
            salsa_side::FanIn::new(),
        );
    }
    if wanted("parallel_hits") {
        compare(
            "parallel_hits",
            "wall ns per hit, 2 threads",
            kiln_side::ParallelHits::new(shape::PARALLEL_THREADS),
            salsa_side::ParallelHits::new(shape::PARALLEL_THREADS),
        );
    }
    // Context for `parallel_hits`: the same LRU hits on one thread, to show whether a
    // second thread adds throughput or only contention.
    if wanted("single_thread_hits") {
        compare(
            "single_thread_hits",
            "wall ns per hit, 1 thread",
            kiln_side::ParallelHits::new(1),
            salsa_side::ParallelHits::new(1),
        );
    }
    // The same hits on a query without an LRU bound: salsa takes its LRU mutex on every
    // hit of an LRU query, so the lines above mostly measure that mutex.
    if wanted("parallel_hits_plain") {
        compare(
            "parallel_hits_plain",
            "wall ns per hit, 2 threads, no LRU",
            kiln_side::ParallelHits::with_lru(shape::PARALLEL_THREADS, false),
            salsa_side::ParallelHits::with_lru(shape::PARALLEL_THREADS, false),
        );
    }
    if wanted("single_thread_hits_plain") {
        compare(
            "single_thread_hits_plain",
            "wall ns per hit, 1 thread, no LRU",
            kiln_side::ParallelHits::with_lru(1, false),
            salsa_side::ParallelHits::with_lru(1, false),
        );
    }
    if wanted("depth") {
        let kiln = depth_probe("kiln");
        let salsa = depth_probe("salsa");
        println!(
            "vs_salsa depth kiln_max_levels={} salsa_max_levels={} kiln_first_failed={} \
             salsa_first_failed={} kiln_ms_at_max=\"{}\" salsa_ms_at_max=\"{}\" \
             thread_stack_kib={} unit=\"deepest chain that builds, is edited at the \
             bottom and re-verified; ms for build, edit + refetch, deep verify\"",
            kiln.deepest,
            salsa.deepest,
            kiln.failed.map_or("none".to_owned(), |l| l.to_string()),
            salsa.failed.map_or("none".to_owned(), |l| l.to_string()),
            kiln.times,
            salsa.times,
            DEPTH_STACK >> 10,
        );
    }
    if wanted("memo_bytes") {
        let (kiln, kiln_later) = kiln_side::memo_bytes();
        let (salsa, salsa_later) = salsa_side::memo_bytes();
        println!(
            "vs_salsa memo_bytes kiln={kiln:.1} salsa={salsa:.1} ratio={:.3} \
             kiln_after_boundary={kiln_later:.1} salsa_after_boundary={salsa_later:.1} \
             after_boundary_ratio={:.3} memos={} unit=\"requested heap bytes per memo\"",
            kiln / salsa,
            kiln_later / salsa_later,
            shape::MEMO_BYTES_KEYS,
        );
    }
    if wanted("memo_bytes_tree") {
        let (kiln, kiln_later) = kiln_side::memo_bytes_tree();
        let (salsa, salsa_later) = salsa_side::memo_bytes_tree();
        println!(
            "vs_salsa memo_bytes_tree kiln={kiln:.1} salsa={salsa:.1} ratio={:.3} \
             kiln_after_boundary={kiln_later:.1} salsa_after_boundary={salsa_later:.1} \
             after_boundary_ratio={:.3} memos={} unit=\"requested heap bytes per memo, \
             one key read by seven queries\"",
            kiln / salsa,
            kiln_later / salsa_later,
            shape::MEMO_TREE_ROOTS * shape::DEEP_TREE_MEMOS,
        );
    }
}

/// What probing one engine's depth limit found.
struct DepthProbe {
    deepest: u32,
    failed: Option<u32>,
    /// The child's times at `deepest`.
    times: String,
}

/// Runs the chain at each of [`DEPTH_LEVELS`] in a child process (an overflow aborts the
/// process that hits it) until one fails.
fn depth_probe(engine: &str) -> DepthProbe {
    let mut probe = DepthProbe {
        deepest: 0,
        failed: None,
        times: String::new(),
    };
    let exe = std::env::current_exe().expect("the bench knows its own path");
    for levels in DEPTH_LEVELS {
        let output = std::process::Command::new(&exe)
            .env(DEPTH_CHILD_ENV, format!("{engine}:{levels}"))
            .stderr(std::process::Stdio::null())
            .output()
            .expect("spawn a depth child");
        let stdout = String::from_utf8_lossy(&output.stdout);
        match stdout.lines().find_map(|l| l.strip_prefix("depth ok ")) {
            Some(times) if output.status.success() => {
                probe.deepest = levels;
                probe.times = times.to_owned();
            }
            _ => {
                probe.failed = Some(levels);
                break;
            }
        }
    }
    probe
}

/// The child side of [`depth_probe`].
fn depth_child(spec: &str) {
    let (engine, levels) = spec.split_once(':').expect("engine:levels");
    let levels: u32 = levels.parse().expect("levels");
    let engine = engine.to_owned();
    let times = std::thread::Builder::new()
        .stack_size(DEPTH_STACK)
        .spawn(move || match engine.as_str() {
            "salsa" => salsa_side::depth_chain(levels),
            _ => kiln_side::depth_chain(levels),
        })
        .expect("spawn the depth thread")
        .join()
        .expect("the depth chain panicked");
    println!("depth ok {:.1}/{:.1}/{:.1}", times[0], times[1], times[2]);
}

/// Alternates the two engines rep by rep after one untimed warm-up each, then prints
/// the workload's line: medians and their ratio, then the mins, and the median of the
/// per-pair ratios (each kiln rep against the salsa rep right after it, which share a
/// machine phase, so this ratio resists slow phases best).
fn compare(name: &str, unit: &str, mut kiln: impl Rep, mut salsa: impl Rep) {
    if let Ok(engine) = std::env::var("VS_SALSA_PROFILE") {
        let only: &mut dyn Rep = if engine == "salsa" {
            &mut salsa
        } else {
            &mut kiln
        };
        let start = Instant::now();
        while start.elapsed().as_secs() < PROFILE_SECONDS {
            only.rep();
        }
        return;
    }
    kiln.rep();
    salsa.rep();
    let mut kiln_ns = Vec::with_capacity(REPS);
    let mut salsa_ns = Vec::with_capacity(REPS);
    for _ in 0..REPS {
        kiln_ns.push(kiln.rep());
        salsa_ns.push(salsa.rep());
    }
    let mut pair_ratios: Vec<f64> = kiln_ns.iter().zip(&salsa_ns).map(|(k, s)| k / s).collect();
    let (pair_ratio, _) = median_and_min(&mut pair_ratios);
    let (kiln_median, kiln_min) = median_and_min(&mut kiln_ns);
    let (salsa_median, salsa_min) = median_and_min(&mut salsa_ns);
    println!(
        "vs_salsa {name} kiln_ns={kiln_median:.1} salsa_ns={salsa_median:.1} ratio={:.3} \
         kiln_min_ns={kiln_min:.1} salsa_min_ns={salsa_min:.1} min_ratio={:.3} \
         paired_ratio={pair_ratio:.3} reps={REPS} unit=\"{unit}\"",
        kiln_median / salsa_median,
        kiln_min / salsa_min,
    );
}

fn median_and_min(samples: &mut [f64]) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    (samples[samples.len() / 2], samples[0])
}
