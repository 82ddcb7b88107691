//! Benchmarks of the variant key and cache. The summary lines at the end are printed from
//! measured samples (medians): criterion's, except for invalidation (see `invalidate`).
//!
//! - `variant_cache key_and_hit ns=<n>`: build a key from 4 keyword strings, then hit.
//! - `variant_cache invalidate index_ns=<n> scan_ns=<n> ratio=<scan/index>`: invalidate one
//!   shader among 1,000 shaders x 100 variants, by kiln's cache against a faithful port of
//!   the founding document's cache (string-record keys, linear scan over every key);
//!   `invalidate_vs_interned_scan` is the same against the fastest scan (kiln's interned
//!   keys in one map), for comparison.
//! - `variant_cache parallel_hits threads=2 speedup=<x>`: hit throughput on 2 threads over 1,
//!   in wall time; `parallel_hits_cpu` gives the same from each thread's CPU time per hit,
//!   and the `_bounded` lines are for a cache with a byte capacity, whose hits also stamp
//!   recency.
//!
//! Single-threaded figures are measured in the thread's CPU time, not wall time: the
//! machines this runs on are shared, and a thread waiting for a core is not the code's cost.
//! The load average is printed with the results.

use std::cell::RefCell;
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::Criterion;
use kiln::key::{Symbol, VariantKey};
use kiln::variant_cache::VariantCache;
use rustc_hash::FxHashMap;

type Artifact = Arc<[u8]>;

/// The calling thread's CPU time.
#[cfg(target_os = "linux")]
fn cpu_now() -> Duration {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, time: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut time = Timespec { sec: 0, nsec: 0 };
    // SAFETY: `time` is a valid, writable timespec (two i64 on 64-bit Linux).
    let status = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut time) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(time.sec as u64, time.nsec as u32)
}

/// Elsewhere, wall time since the first call.
#[cfg(not(target_os = "linux"))]
fn cpu_now() -> Duration {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

const SAMPLES: usize = 20;
const SHADERS: usize = 1_000;
const VARIANTS: usize = 100;
const AXES: [&str; 7] = [
    "FOG",
    "SKIN",
    "SHADOWS",
    "LIGHTS_4",
    "NORMAL_MAP",
    "ALPHA_TEST",
    "INSTANCED",
];

/// Per-iteration times (ns) of criterion's samples; the last `SAMPLES` are the measured
/// ones (the earlier ones are its warm-up).
#[derive(Default)]
struct Samples(RefCell<Vec<f64>>);

impl Samples {
    fn record(&self, total: Duration, iters: u64) -> Duration {
        self.0
            .borrow_mut()
            .push(total.as_nanos() as f64 / iters.max(1) as f64);
        total
    }

    fn median(&self) -> Option<f64> {
        let all = self.0.borrow();
        let measured: Vec<f64> = all[all.len().saturating_sub(SAMPLES)..].to_vec();
        (!measured.is_empty()).then(|| median(measured))
    }
}

fn compile(key: &VariantKey) -> Result<Artifact, std::fmt::Error> {
    Ok(Arc::from(key.digest().as_bytes()))
}

/// The `i`th keyword subset of `AXES` (distinct for `i < 128`).
fn keywords(i: usize) -> Vec<&'static str> {
    AXES.iter()
        .enumerate()
        .filter(|(bit, _)| i >> bit & 1 == 1)
        .map(|(_, name)| *name)
        .collect()
}

fn key_and_hit(c: &mut Criterion) -> Option<f64> {
    let cache = VariantCache::<Artifact>::new();
    for shader in 0..100 {
        for variant in 0..VARIANTS {
            let key =
                VariantKey::new(&format!("S{shader}"), "Forward", keywords(variant), 1).ok()?;
            cache.get_or_compile(&key, compile).ok()?;
        }
    }
    // Four keyword strings per key, given in non-canonical order.
    let requests: Vec<[&str; 4]> = (0..16)
        .map(|i| {
            let mut set = [
                AXES[i % 7],
                AXES[(i + 2) % 7],
                AXES[(i + 3) % 7],
                AXES[(i + 5) % 7],
            ];
            set.reverse();
            set
        })
        .collect();
    let shaders: Vec<String> = (0..16).map(|i| format!("S{}", i * 6)).collect();
    for (shader, set) in shaders.iter().zip(&requests) {
        let key = VariantKey::new(shader, "Forward", set, 1).ok()?;
        cache.get_or_compile(&key, compile).ok()?;
    }
    let samples = Samples::default();
    c.bench_function("variant_cache/key_and_hit", |b| {
        b.iter_custom(|iters| {
            let start = cpu_now();
            for i in 0..iters as usize {
                let slot = i % 16;
                let key = VariantKey::new(&shaders[slot], "Forward", &requests[slot], 1);
                let hit = key.map(|key| cache.get_or_compile(&key, |_| Err(std::fmt::Error)));
                black_box(hit.is_ok());
            }
            samples.record(cpu_now() - start, iters)
        })
    });
    // The two halves alone, to see where the time goes.
    c.bench_function("variant_cache/key_only", |b| {
        b.iter_custom(|iters| {
            let start = cpu_now();
            for i in 0..iters as usize {
                let slot = i % 16;
                let key = VariantKey::new(&shaders[slot], "Forward", &requests[slot], 1);
                black_box(key.is_ok());
            }
            cpu_now() - start
        })
    });
    let keys: Vec<VariantKey> = shaders
        .iter()
        .zip(&requests)
        .filter_map(|(shader, set)| VariantKey::new(shader, "Forward", set, 1).ok())
        .collect();
    c.bench_function("variant_cache/hit_only", |b| {
        b.iter_custom(|iters| {
            let start = cpu_now();
            for i in 0..iters as usize {
                let hit = cache.get_or_compile(&keys[i % 16], |_| Err(std::fmt::Error));
                black_box(hit.is_ok());
            }
            cpu_now() - start
        })
    });
    let stats = cache.stats();
    assert_eq!(
        stats.compiles,
        stats.requests - stats.hits,
        "the hit loop compiled"
    );
    samples.median()
}

/// Something that can invalidate a shader and take back the entries it removed.
trait Invalidate {
    fn invalidate_shader(&mut self, shader: &str, current_revision: u64) -> usize;
    fn refill(&mut self, key: &VariantKey, artifact: &Artifact);
}

/// kiln's cache: the reverse index (entries grouped by shader).
impl Invalidate for &VariantCache<Artifact> {
    fn invalidate_shader(&mut self, shader: &str, current_revision: u64) -> usize {
        VariantCache::invalidate_shader(self, shader, current_revision)
    }
    fn refill(&mut self, key: &VariantKey, artifact: &Artifact) {
        let _ = self.get_or_compile(key, |_| Ok::<_, std::fmt::Error>(artifact.clone()));
    }
}

/// The founding document's cache, faithfully: a dictionary keyed by a record of strings
/// (`readonly record struct VariantKey(string Shader, string Pass, string Keywords, int
/// SourceRevision)`), and `InvalidateShader` as a scan over every key comparing the shader
/// name ordinally, collecting the stale keys, then removing them.
#[derive(Default)]
struct SeedCache {
    compiled: FxHashMap<SeedKey, Artifact>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct SeedKey {
    shader: String,
    pass: String,
    keywords: String,
    source_revision: u64,
}

impl SeedKey {
    fn new(key: &VariantKey) -> SeedKey {
        SeedKey {
            shader: key.shader().to_owned(),
            pass: key.pass().to_owned(),
            keywords: key.keyword_text().to_owned(),
            source_revision: key.revision(),
        }
    }
}

impl Invalidate for SeedCache {
    fn invalidate_shader(&mut self, shader: &str, current_revision: u64) -> usize {
        let stale: Vec<SeedKey> = self
            .compiled
            .keys()
            .filter(|k| k.shader == shader && k.source_revision != current_revision)
            .cloned()
            .collect();
        for key in &stale {
            self.compiled.remove(key);
        }
        stale.len()
    }
    fn refill(&mut self, key: &VariantKey, artifact: &Artifact) {
        self.compiled.insert(SeedKey::new(key), artifact.clone());
    }
}

/// The seed's scan made as fast as a scan gets: kiln's interned keys in one map, the
/// shader compared as an integer. Not the seed; printed for comparison only.
#[derive(Default)]
struct InternedScan {
    compiled: FxHashMap<VariantKey, Artifact>,
}

impl Invalidate for InternedScan {
    fn invalidate_shader(&mut self, shader: &str, current_revision: u64) -> usize {
        let shader = Symbol::intern(shader);
        let stale: Vec<VariantKey> = self
            .compiled
            .keys()
            .filter(|k| k.shader_symbol() == shader && k.revision() != current_revision)
            .copied()
            .collect();
        for key in &stale {
            self.compiled.remove(key);
        }
        stale.len()
    }
    fn refill(&mut self, key: &VariantKey, artifact: &Artifact) {
        self.compiled.insert(*key, artifact.clone());
    }
}

/// Every shader's keys at revision 0, and their names.
fn invalidation_workload() -> (Vec<String>, Vec<Vec<VariantKey>>) {
    let names: Vec<String> = (0..SHADERS).map(|s| format!("Inv{s}")).collect();
    let keys = names
        .iter()
        .map(|name| {
            (0..VARIANTS)
                .filter_map(|v| VariantKey::new(name, "Forward", keywords(v), 0).ok())
                .collect()
        })
        .collect();
    (names, keys)
}

/// Median CPU time (ns) of one invalidation: by kiln's index, by the seed's scan, and by
/// the interned scan.
///
/// Measured in alternating reps by this loop rather than by criterion: every invalidation
/// must be followed by an untimed refill of the 100 removed entries, which costs far more
/// than the timed part and would make criterion's iteration counts run for minutes.
fn invalidate() -> [f64; 3] {
    const REPS: usize = 15;
    let (names, keys) = invalidation_workload();
    let artifact: Artifact = Arc::from(&b"spirv"[..]);
    let cache = VariantCache::<Artifact>::new();
    let mut index = &cache;
    let mut seed = SeedCache::default();
    let mut interned = InternedScan::default();
    {
        let mut contenders: [(&mut dyn Invalidate, usize); 3] =
            [(&mut index, 40), (&mut seed, 4), (&mut interned, 4)];
        for (contender, _) in contenders.iter_mut() {
            for key in keys.iter().flatten() {
                contender.refill(key, &artifact);
            }
        }
        // Each step invalidates the next shader at a new revision (timed), then refills it
        // at that revision (not timed), so every step removes exactly 100 of 100,000.
        let mut revisions = vec![0u64; SHADERS];
        let mut next = 0usize;
        let mut times: [Vec<f64>; 3] = Default::default();
        for _ in 0..REPS {
            for ((contender, steps), times) in contenders.iter_mut().zip(&mut times) {
                let mut total = Duration::ZERO;
                for _ in 0..*steps {
                    let shader = next % SHADERS;
                    next += 1;
                    revisions[shader] += 1;
                    let revision = revisions[shader];
                    let start = cpu_now();
                    let removed = contender.invalidate_shader(&names[shader], revision);
                    total += cpu_now() - start;
                    assert_eq!(removed, VARIANTS);
                    for key in &keys[shader] {
                        contender.refill(&key.at_revision(revision), &artifact);
                    }
                }
                times.push(total.as_nanos() as f64 / *steps as f64);
            }
        }
        assert_eq!(cache.len(), SHADERS * VARIANTS);
        times.map(median)
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// One run of `iters` hits on each of `threads` threads, each hitting its own slice of
/// `keys`: the wall time from the first thread's start to the last one's end, and the
/// threads' mean CPU time.
fn hit_rounds(
    cache: &VariantCache<Artifact>,
    keys: &[VariantKey],
    threads: usize,
    iters: u64,
) -> (Duration, Duration) {
    let barrier = Barrier::new(threads);
    let slice = keys.len() / 2;
    let runs: Vec<(Instant, Instant, Duration)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let mine = &keys[t * slice..(t + 1) * slice];
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    let (start, cpu_start) = (Instant::now(), cpu_now());
                    for i in 0..iters as usize {
                        let hit =
                            cache.get_or_compile(&mine[i % mine.len()], |_| Err(std::fmt::Error));
                        black_box(hit.is_ok());
                    }
                    (start, Instant::now(), cpu_now() - cpu_start)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let start = runs.iter().map(|r| r.0).min();
    let end = runs.iter().map(|r| r.1).max();
    let wall = match (start, end) {
        (Some(start), Some(end)) => end - start,
        _ => Duration::ZERO,
    };
    let cpu = runs.iter().map(|r| r.2).sum::<Duration>() / threads as u32;
    (wall, cpu)
}

/// Hit throughput on 2 threads over 1: from wall time, and from per-thread CPU time.
fn parallel_hits(
    c: &mut Criterion,
    name: &str,
    cache: VariantCache<Artifact>,
) -> Option<(f64, f64)> {
    let keys: Vec<VariantKey> = (0..100)
        .flat_map(|shader| {
            (0..VARIANTS).filter_map(move |v| {
                VariantKey::new(&format!("P{shader}"), "Forward", keywords(v), 1).ok()
            })
        })
        .collect();
    for key in &keys {
        cache.get_or_compile(key, compile).ok()?;
    }
    let [wall_1, cpu_1, wall_2, cpu_2] = [(); 4].map(|()| Samples::default());
    let mut group = c.benchmark_group(format!("variant_cache/{name}"));
    group.bench_function("threads_1", |b| {
        b.iter_custom(|iters| {
            let (wall, cpu) = hit_rounds(&cache, &keys, 1, iters);
            cpu_1.record(cpu, iters);
            wall_1.record(wall, iters)
        })
    });
    group.bench_function("threads_2", |b| {
        b.iter_custom(|iters| {
            let (wall, cpu) = hit_rounds(&cache, &keys, 2, iters);
            cpu_2.record(cpu, iters);
            wall_2.record(wall, iters)
        })
    });
    group.finish();
    // A round on 2 threads is 2 hits.
    Some((
        2.0 * wall_1.median()? / wall_2.median()?,
        2.0 * cpu_1.median()? / cpu_2.median()?,
    ))
}

fn main() {
    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(SAMPLES)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(1));
    let key_hit = key_and_hit(&mut c);
    let [index, scan, interned_scan] = invalidate();
    let unbounded = parallel_hits(&mut c, "parallel_hits", VariantCache::new());
    let bounded = parallel_hits(
        &mut c,
        "parallel_hits_bounded",
        VariantCache::with_capacity(1 << 30),
    );
    c.final_summary();
    if let Some(ns) = key_hit {
        println!("variant_cache key_and_hit ns={ns:.1}");
    }
    println!(
        "variant_cache invalidate index_ns={index:.0} scan_ns={scan:.0} ratio={:.1}",
        scan / index
    );
    println!(
        "variant_cache invalidate_vs_interned_scan index_ns={index:.0} scan_ns={interned_scan:.0} ratio={:.1}",
        interned_scan / index
    );
    for (name, speedups) in [
        ("parallel_hits", unbounded),
        ("parallel_hits_bounded", bounded),
    ] {
        if let Some((wall, cpu)) = speedups {
            println!("variant_cache {name} threads=2 speedup={wall:.2}");
            println!("variant_cache {name}_cpu threads=2 speedup={cpu:.2}");
        }
    }
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        let load: Vec<&str> = load.split_whitespace().take(3).collect();
        println!(
            "variant_cache machine cores={} loadavg={}",
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            load.join(",")
        );
    }
}
