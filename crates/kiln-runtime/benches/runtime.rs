//! The runtime bench, in one run, on a 100,032-variant pack written to a temporary
//! directory (1,042 shaders x 2 passes x 16 keyword sets x 3 targets, artifacts of 1 to 4 KB,
//! a reflection blob per shader and pass):
//!
//! - (a) `Library::get` with a 4-keyword set given out of order and with a repeat, against
//!   the engine's alternative: a `HashMap<String, PathBuf>` built from kiln's `index.json`,
//!   looked up with a key built from the same unsorted input (sort, dedup, join).
//! - (b) `Library::open` + the first `get` (page cache warm: the pack was just written),
//!   against the goal of 5 ms.
//!
//! Criterion prints its own estimates (wall time); a summary follows, measured again in the
//! same process with the thread's CPU time beside wall time (on a shared machine the wall
//! time counts waiting for a core, the CPU time does not).
//!
//! `cargo bench -p kiln-runtime --bench runtime`

use std::collections::HashMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::Criterion;
use kiln_runtime::pack::PackWriter;
use kiln_runtime::Library;

const KEYWORDS: [&str; 4] = ["FOG", "INSTANCING", "SHADOWS", "SKIN"];
const PASSES: [&str; 2] = ["Depth", "Forward"];
const TARGETS: [&str; 3] = ["hlsl", "msl", "spirv"];
const SHADERS: usize = 1042;
/// The query: 4 distinct keywords, out of order, one repeated.
const QUERY: [&str; 5] = ["SKIN", "INSTANCING", "FOG", "SKIN", "SHADOWS"];
const GOAL_OPEN: Duration = Duration::from_millis(5);

struct Fixture {
    dir: PathBuf,
    pack: PathBuf,
    variants: usize,
    pack_bytes: u64,
    /// The engine's index: canonical key -> artifact path, as read from `index.json`.
    index: HashMap<String, PathBuf>,
}

fn shader_name(s: usize) -> String {
    format!("Shader{s:05}")
}

/// The engine's key for a variant: shader, pass, canonical keywords (`;`), target.
fn index_key(shader: &str, pass: &str, keywords: &[&str], target: &str) -> String {
    let mut sorted: Vec<&str> = keywords.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut key = String::with_capacity(64);
    key.push_str(shader);
    key.push('/');
    key.push_str(pass);
    key.push('/');
    key.push_str(&sorted.join(";"));
    key.push('/');
    key.push_str(target);
    key
}

impl Fixture {
    fn new() -> Fixture {
        let started = Instant::now();
        let dir = std::env::temp_dir().join(format!("kiln-runtime-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut writer = PackWriter::new();
        for target in TARGETS {
            writer.add_target(target).expect("target");
        }
        let mut index = HashMap::new();
        let mut artifact = Vec::new();
        for s in 0..SHADERS {
            let name = shader_name(s);
            writer.add_shader(&name, KEYWORDS, PASSES).expect("shader");
            for pass in PASSES {
                let reflection =
                    format!("{{\"shader\":\"{name}\",\"pass\":\"{pass}\",\"bindings\":[0,1,2,3]}}");
                for mask in 0..16usize {
                    let set: Vec<&str> = (0..4)
                        .filter(|b| mask & (1 << b) != 0)
                        .map(|b| KEYWORDS[b])
                        .collect();
                    for target in TARGETS {
                        // 1 to 4 KB, distinct per variant (no dedup flatters the pack).
                        let len = 1024 + (s * 31 + mask * 193) % 3072;
                        let seed = format!("{name}/{pass}/{mask}/{target}");
                        artifact.clear();
                        while artifact.len() < len {
                            artifact.extend_from_slice(seed.as_bytes());
                        }
                        artifact.truncate(len);
                        writer
                            .add_variant(
                                &name,
                                pass,
                                &set,
                                target,
                                "0123456789ab",
                                &artifact,
                                reflection.as_bytes(),
                            )
                            .expect("variant");
                        let path = dir.join(format!("{name}/{pass}/{}.{target}", set.join("+")));
                        index.insert(index_key(&name, pass, &set, target), path);
                    }
                }
            }
        }
        let variants = writer.len();
        let pack = dir.join(kiln_runtime::pack_file_name("all"));
        writer.write(&pack).expect("write pack");
        let pack_bytes = std::fs::metadata(&pack).expect("pack").len();
        println!(
            "fixture: {variants} variants, {:.1} MB pack, written in {:.1?}",
            pack_bytes as f64 / 1e6,
            started.elapsed()
        );
        Fixture {
            dir,
            pack,
            variants,
            pack_bytes,
            index,
        }
    }
}

/// The engine's lookup through `index.json`: the key built from the unsorted input.
fn baseline<'a>(
    index: &'a HashMap<String, PathBuf>,
    shader: &str,
    pass: &str,
    keywords: &[&str],
    target: &str,
) -> Option<&'a PathBuf> {
    index.get(&index_key(shader, pass, keywords, target))
}

fn open_and_first(pack: &Path, shader: &str) -> Library {
    let library = Library::open(pack).expect("open");
    let variant = library
        .get(shader, "Forward", &QUERY, "spirv")
        .expect("first get");
    black_box(variant.bytes.len());
    library
}

/// This thread's CPU time (Linux: `CLOCK_THREAD_CPUTIME_ID`), if the platform says it.
fn thread_cpu() -> Option<Duration> {
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    {
        #[repr(C)]
        struct Timespec {
            tv_sec: i64,
            tv_nsec: i64,
        }
        extern "C" {
            fn clock_gettime(clock: i32, out: *mut Timespec) -> i32;
        }
        const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
        let mut t = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `clock_gettime` writes one timespec (two 64-bit fields on 64-bit Linux)
        // to a valid pointer.
        let ok = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0;
        ok.then(|| Duration::new(t.tv_sec as u64, t.tv_nsec as u32))
    }
    #[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
    None
}

/// (wall, CPU) per call of `f`, the median of `reps` reps of `n` calls each.
fn measure(reps: usize, n: u32, mut f: impl FnMut()) -> (Duration, Option<Duration>) {
    let mut walls = Vec::with_capacity(reps);
    let mut cpus = Vec::with_capacity(reps);
    for _ in 0..reps {
        let cpu = thread_cpu();
        let wall = Instant::now();
        for _ in 0..n {
            f();
        }
        walls.push(wall.elapsed() / n);
        if let (Some(before), Some(after)) = (cpu, thread_cpu()) {
            cpus.push((after - before) / n);
        }
    }
    walls.sort();
    cpus.sort();
    (walls[reps / 2], cpus.get(cpus.len() / 2).copied())
}

fn show(d: Option<Duration>) -> String {
    d.map_or("n/a".to_owned(), |d| format!("{d:.2?}"))
}

fn ratio(a: Option<Duration>, b: Option<Duration>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{:.2}", a.as_secs_f64() / b.as_secs_f64()),
        _ => "n/a".to_owned(),
    }
}

fn main() {
    let fixture = Fixture::new();
    let library = Library::open(&fixture.pack).expect("open");
    let shader = shader_name(SHADERS / 2);
    // Both sides find the same variant before anything is timed.
    let want = baseline(&fixture.index, &shader, "Forward", &QUERY, "spirv").expect("indexed");
    let got = library
        .get(&shader, "Forward", &QUERY, "spirv")
        .expect("get");
    assert_eq!(got.keywords.text(), "FOG;INSTANCING;SHADOWS;SKIN");
    assert!(want.ends_with("FOG+INSTANCING+SHADOWS+SKIN.spirv"));

    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    {
        let mut group = c.benchmark_group("lookup, 4 keywords out of order with a repeat");
        group.bench_function("Library::get", |b| {
            b.iter(|| {
                black_box(library.get(
                    black_box(&shader),
                    black_box("Forward"),
                    black_box(&QUERY),
                    black_box("spirv"),
                ))
                .map(|v| v.bytes.len())
            })
        });
        group.bench_function("HashMap<String, PathBuf> (key built from the input)", |b| {
            b.iter(|| {
                black_box(baseline(
                    &fixture.index,
                    black_box(&shader),
                    black_box("Forward"),
                    black_box(&QUERY),
                    black_box("spirv"),
                ))
            })
        });
        group.finish();
    }
    {
        let mut group = c.benchmark_group("open");
        group.sample_size(20);
        group.bench_function("Library::open + first get, 100,032 variants", |b| {
            b.iter_with_large_drop(|| open_and_first(&fixture.pack, &shader))
        });
        group.finish();
    }
    c.final_summary();

    // The summary, measured again here: median of reps, wall and this thread's CPU time.
    let (get_wall, get_cpu) = measure(21, 100_000, || {
        let _ = black_box(library.get(black_box(&shader), "Forward", black_box(&QUERY), "spirv"));
    });
    let (map_wall, map_cpu) = measure(21, 100_000, || {
        black_box(baseline(
            &fixture.index,
            black_box(&shader),
            "Forward",
            black_box(&QUERY),
            "spirv",
        ));
    });
    let (open_wall, open_cpu) = measure(21, 20, || {
        drop(open_and_first(&fixture.pack, black_box(&shader)));
    });
    println!();
    println!(
        "summary ({} variants, {:.1} MB pack; page cache warm; shared machine, so CPU time is \
         the steadier figure):",
        fixture.variants,
        fixture.pack_bytes as f64 / 1e6
    );
    println!(
        "  get, 4 keywords out of order + repeat: {get_wall:.1?} wall, {} CPU   | HashMap<String, \
         PathBuf>: {map_wall:.1?} wall, {} CPU   | ratio get/HashMap: {:.2} wall, {} CPU   | goal 100 ns",
        show(get_cpu),
        show(map_cpu),
        get_wall.as_secs_f64() / map_wall.as_secs_f64(),
        ratio(get_cpu, map_cpu),
    );
    println!(
        "  open + first get (drop included): {open_wall:.2?} wall, {} CPU   | goal 5 ms: {:.3} \
         of it (wall), {} (CPU)",
        show(open_cpu),
        open_wall.as_secs_f64() / GOAL_OPEN.as_secs_f64(),
        ratio(open_cpu, Some(GOAL_OPEN)),
    );
    drop(library);
    std::fs::remove_dir_all(&fixture.dir).expect("remove temp dir");
}
