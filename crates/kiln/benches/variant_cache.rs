//! Benchmarks of the variant key and cache, measured with criterion; the summary lines are
//! printed from the same measured samples:
//!
//! - `variant_cache key_and_hit ns=<n>`: build a key from 4 keyword strings, then hit.
//! - `variant_cache invalidate index_ns=<n> scan_ns=<n> ratio=<scan/index>`: invalidate one
//!   shader among 1,000 shaders x 100 variants, by the reverse index against the founding
//!   document's linear scan over every key.
//! - `variant_cache parallel_hits threads=2 speedup=<x>`: hit throughput on 2 threads over 1
//!   (unbounded cache; `parallel_hits_bounded` for a cache with a byte capacity, whose hits
//!   also stamp recency).

use std::cell::RefCell;
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::Criterion;
use kiln::key::{Symbol, VariantKey};
use kiln::variant_cache::VariantCache;
use rustc_hash::FxHashMap;

type Artifact = Arc<[u8]>;

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
        let mut measured: Vec<f64> = all[all.len().saturating_sub(SAMPLES)..].to_vec();
        if measured.is_empty() {
            return None;
        }
        measured.sort_by(f64::total_cmp);
        Some(measured[measured.len() / 2])
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
            let start = Instant::now();
            for i in 0..iters as usize {
                let slot = i % 16;
                let key = VariantKey::new(&shaders[slot], "Forward", &requests[slot], 1);
                let hit = key.map(|key| cache.get_or_compile(&key, |_| Err(std::fmt::Error)));
                black_box(hit.is_ok());
            }
            samples.record(start.elapsed(), iters)
        })
    });
    // The two halves alone, to see where the time goes.
    c.bench_function("variant_cache/key_only", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for i in 0..iters as usize {
                let slot = i % 16;
                let key = VariantKey::new(&shaders[slot], "Forward", &requests[slot], 1);
                black_box(key.is_ok());
            }
            start.elapsed()
        })
    });
    let keys: Vec<VariantKey> = shaders
        .iter()
        .zip(&requests)
        .filter_map(|(shader, set)| VariantKey::new(shader, "Forward", set, 1).ok())
        .collect();
    c.bench_function("variant_cache/hit_only", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for i in 0..iters as usize {
                let hit = cache.get_or_compile(&keys[i % 16], |_| Err(std::fmt::Error));
                black_box(hit.is_ok());
            }
            start.elapsed()
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

/// The founding document's cache: a dictionary and a linear scan over every key.
#[derive(Default)]
struct SeedCache {
    compiled: FxHashMap<VariantKey, Artifact>,
}

impl SeedCache {
    fn invalidate_shader(&mut self, shader: &str, current_revision: u64) -> usize {
        // Interned shader comparison: a faster scan than the seed's string comparison.
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

fn invalidate(c: &mut Criterion) -> (Option<f64>, Option<f64>) {
    let (names, keys) = invalidation_workload();
    let artifact: Artifact = Arc::from(&b"spirv"[..]);
    let cache = VariantCache::<Artifact>::new();
    let mut seed = SeedCache::default();
    for key in keys.iter().flatten() {
        let _ = cache.get_or_compile(key, |_| Ok::<_, std::fmt::Error>(artifact.clone()));
        seed.compiled.insert(*key, artifact.clone());
    }
    // Each iteration invalidates the next shader at a new revision (timed), then refills it
    // at that revision (not timed), so every iteration removes exactly 100 of 100,000.
    let mut revisions = vec![0u64; SHADERS];
    let mut next = 0usize;
    let mut step = |invalidate: &mut dyn FnMut(&str, u64) -> usize,
                    refill: &mut dyn FnMut(&VariantKey)|
     -> Duration {
        let shader = next % SHADERS;
        next += 1;
        revisions[shader] += 1;
        let revision = revisions[shader];
        let start = Instant::now();
        let removed = invalidate(&names[shader], revision);
        let elapsed = start.elapsed();
        assert_eq!(removed, VARIANTS);
        for key in &keys[shader] {
            refill(&key.at_revision(revision));
        }
        elapsed
    };
    let index = Samples::default();
    let scan = Samples::default();
    let mut group = c.benchmark_group("variant_cache/invalidate");
    group.measurement_time(Duration::from_secs(1));
    group.bench_function("index", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                total += step(
                    &mut |shader, revision| cache.invalidate_shader(shader, revision),
                    &mut |key| {
                        let _ = cache
                            .get_or_compile(key, |_| Ok::<_, std::fmt::Error>(artifact.clone()));
                    },
                );
            }
            index.record(total, iters)
        })
    });
    group.bench_function("scan", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let seed = RefCell::new(&mut seed);
                total += step(
                    &mut |shader, revision| seed.borrow_mut().invalidate_shader(shader, revision),
                    &mut |key| {
                        seed.borrow_mut().compiled.insert(*key, artifact.clone());
                    },
                );
            }
            scan.record(total, iters)
        })
    });
    group.finish();
    assert_eq!(cache.len(), SHADERS * VARIANTS);
    assert_eq!(seed.compiled.len(), SHADERS * VARIANTS);
    (index.median(), scan.median())
}

/// Wall time per hit round (one hit on each thread) with `threads` threads, each hitting its
/// own slice of `keys`.
fn hit_rounds(
    cache: &VariantCache<Artifact>,
    keys: &[VariantKey],
    threads: usize,
    iters: u64,
) -> Duration {
    let barrier = Barrier::new(threads);
    let slice = keys.len() / 2;
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let mine = &keys[t * slice..(t + 1) * slice];
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    for i in 0..iters as usize {
                        let hit =
                            cache.get_or_compile(&mine[i % mine.len()], |_| Err(std::fmt::Error));
                        black_box(hit.is_ok());
                    }
                    (start, Instant::now())
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let start = spans.iter().map(|s| s.0).min();
    let end = spans.iter().map(|s| s.1).max();
    match (start, end) {
        (Some(start), Some(end)) => end - start,
        _ => Duration::ZERO,
    }
}

fn parallel_hits(c: &mut Criterion, name: &str, cache: VariantCache<Artifact>) -> Option<f64> {
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
    let one = Samples::default();
    let two = Samples::default();
    let mut group = c.benchmark_group(format!("variant_cache/{name}"));
    group.bench_function("threads_1", |b| {
        b.iter_custom(|iters| one.record(hit_rounds(&cache, &keys, 1, iters), iters))
    });
    group.bench_function("threads_2", |b| {
        b.iter_custom(|iters| two.record(hit_rounds(&cache, &keys, 2, iters), iters))
    });
    group.finish();
    // A round on 2 threads is 2 hits.
    Some(2.0 * one.median()? / two.median()?)
}

fn main() {
    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(SAMPLES)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let key_hit = key_and_hit(&mut c);
    let (index, scan) = invalidate(&mut c);
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
    if let (Some(index), Some(scan)) = (index, scan) {
        println!(
            "variant_cache invalidate index_ns={index:.0} scan_ns={scan:.0} ratio={:.1}",
            scan / index
        );
    }
    if let Some(speedup) = unbounded {
        println!("variant_cache parallel_hits threads=2 speedup={speedup:.2}");
    }
    if let Some(speedup) = bounded {
        println!("variant_cache parallel_hits_bounded threads=2 speedup={speedup:.2}");
    }
}
