//! Scale check of the pack (the bench is `benches/runtime.rs`): writes a pack of N variants (default
//! 100,000: 1,000 shaders x 2 passes x 16 keyword sets x 3 targets ~ 96,000), then times
//! open + first lookup and steady-state lookups with a 4-keyword set.
//!
//! `cargo run --release -p kiln-runtime --example pack_scale [shaders]`

use std::time::Instant;

use kiln_runtime::pack::PackWriter;
use kiln_runtime::Library;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let shaders: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(1000);
    let keywords = ["FOG", "SKIN", "SHADOWS", "INSTANCING"];
    let mut writer = PackWriter::new();
    for target in ["spirv", "msl", "hlsl"] {
        writer.add_target(target)?;
    }
    let started = Instant::now();
    for s in 0..shaders {
        let name = format!("Shader{s:05}");
        writer.add_shader(&name, keywords, ["Forward", "Depth"])?;
        for pass in ["Forward", "Depth"] {
            for mask in 0..16u32 {
                let set: Vec<&str> = (0..4)
                    .filter(|b| mask & (1 << b) != 0)
                    .map(|b| keywords[b])
                    .collect();
                for target in ["spirv", "msl", "hlsl"] {
                    let bytes = format!("{name}/{pass}/{mask}/{target}").repeat(64);
                    writer.add_variant(
                        &name,
                        pass,
                        &set,
                        target,
                        "0123456789ab",
                        bytes.as_bytes(),
                        format!("{{\"shader\":\"{name}\",\"pass\":\"{pass}\"}}").as_bytes(),
                    )?;
                }
            }
        }
    }
    let path = std::env::temp_dir().join(format!("kiln-pack-scale-{}.kpack", std::process::id()));
    writer.write(&path)?;
    let size = std::fs::metadata(&path)?.len();
    let built = started.elapsed();

    let open_cpu_before = cpu_ns();
    let started = Instant::now();
    let library = Library::open(&path)?;
    let opened = started.elapsed();
    let first = library.get("Shader00000", "Forward", &["SKIN", "FOG"], "msl")?;
    let first_len = first.bytes.len();
    let open_and_first = started.elapsed();
    let open_cpu = open_cpu_before
        .zip(cpu_ns())
        .map(|(before, after)| format!(" ({:.2} ms of CPU)", (after - before) as f64 / 1e6))
        .unwrap_or_default();

    let query = ["SKIN", "INSTANCING", "FOG", "SHADOWS"];
    let name = format!("Shader{:05}", shaders / 2);
    library.get(&name, "Depth", &query, "spirv")?;
    let rounds = 1_000_000u32;
    let cpu_before = cpu_ns();
    let started = Instant::now();
    let mut total = 0usize;
    for _ in 0..rounds {
        total += std::hint::black_box(library.get(
            std::hint::black_box(&name),
            "Depth",
            std::hint::black_box(&query),
            "spirv",
        )?)
        .bytes
        .len();
    }
    let per_get = started.elapsed() / rounds;
    // On a loaded machine wall time counts waiting for a core; the thread's own CPU time
    // does not.
    let cpu_per_get = cpu_before
        .zip(cpu_ns())
        .map(|(before, after)| format!(", {} ns of CPU", (after - before) / u64::from(rounds)))
        .unwrap_or_default();
    std::fs::remove_file(&path)?;
    println!(
        "{} variants, {size} bytes, written in {built:.2?}; open {opened:.2?}, open + first lookup \
         {open_and_first:.2?}{open_cpu} ({first_len} bytes); get with 4 keywords {per_get:?}{cpu_per_get} ({total})",
        library.len()
    );
    Ok(())
}

/// This thread's CPU time in nanoseconds (Linux: `CLOCK_THREAD_CPUTIME_ID`; schedstat is
/// only updated at scheduling events, too coarse for an open).
fn cpu_ns() -> Option<u64> {
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
        ok.then(|| t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64)
    }
    #[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
    None
}
