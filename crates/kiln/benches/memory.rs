//! Resident memory of a build, per variant: a generated project (WGSL shaders x 100 keyword
//! sets x 2 passes; 500 shaders = 100,000 variants with `--bench`, targets spirv, msl and
//! hlsl unless `KILN_BENCH_TARGETS` says otherwise) built cold in this process, then rebuilt
//! after edits under a memory bound, as `kiln watch --max-memory N` does.
//!
//! Printed (Linux; `/proc/self/status`):
//! - `memory cold_build variants=<n> peak_rss_mb=<VmHWM> baseline_mb=<VmRSS before>
//!   bytes_per_variant=<(peak - baseline) / variants>` (target: <= 250 MB at 100,000
//!   variants, 2.5 KB a variant). The peak is reset (`/proc/self/clear_refs`) after the
//!   project is generated, so the generator's own memory is not counted.
//! - `memory rebuilds max_memory_mb=<N> rss_mb=<after each rebuild> growth_mb=<last - first>`:
//!   the same `Project` (one engine, as under `kiln watch`) rebuilt after an edit of an
//!   include that changes a fifth of the variants each time; the growth across rebuilds must
//!   stay within N plus a constant.
//!
//! `KILN_BENCH_SHADERS=<n>` changes the project's size; `KILN_BENCH_DIR=/dev/shm` puts it
//! elsewhere. `KILN_BENCH_GENERATE=<dir>` only writes the project into `<dir>` (to profile
//! `kiln build` on it by hand, e.g. under heaptrack). Without `--bench` (as under `cargo test --benches`) it builds a small project.

#[path = "common/project.rs"]
#[allow(dead_code)]
mod project;

use std::process::ExitCode;
use std::time::Instant;

use kiln::pipeline::{BuildOptions, Project};
use project::{Scale, INCLUDE_DIR};

fn main() -> ExitCode {
    let full = std::env::args().any(|arg| arg == "--bench");
    match run(full) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("memory bench failed: {message}");
            ExitCode::FAILURE
        }
    }
}

/// A field of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`); 0 where there is none.
fn status_bytes(field: &str) -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Resets `VmHWM` to the current resident size (Linux 4.0+); false if it cannot.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn run(full: bool) -> Result<(), String> {
    let shaders = std::env::var("KILN_BENCH_SHADERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if full { 500 } else { 2 });
    let scale = Scale {
        shaders,
        lights: 5,
        tones: 5,
    };
    let target_names: Vec<String> = std::env::var("KILN_BENCH_TARGETS")
        .unwrap_or_else(|_| "spirv,msl,hlsl".to_owned())
        .split(',')
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    if let Some(dir) = std::env::var_os("KILN_BENCH_GENERATE") {
        let options = project::Options {
            bench: "memory",
            targets: &target_names,
            edit_points: true,
        };
        project::generate(std::path::Path::new(&dir), scale, &options)
            .map_err(|e| e.to_string())?;
        return Ok(());
    }
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let temp = match std::env::var_os("KILN_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir),
        None => tempfile::tempdir(),
    }
    .map_err(|e| e.to_string())?;
    let options = project::Options {
        bench: "memory",
        targets: &target_names,
        edit_points: true,
    };
    let generated = project::generate(&temp.path().join("project"), scale, &options)
        .map_err(|e| e.to_string())?;
    let variants = generated.variants.len();
    let manifest = generated.manifest.clone();
    let tonemap = generated.root.join(INCLUDE_DIR).join("tonemap.wgsl");
    drop(generated);

    let open = |max_memory: Option<u64>, name: &str| {
        Project::open(&BuildOptions {
            manifest: manifest.clone(),
            out_dir: Some(temp.path().join(name).join("out")),
            cache_dir: Some(temp.path().join(name).join("cache")),
            jobs: Some(jobs),
            max_memory,
            keep_failed_outputs: false,
            ..BuildOptions::default()
        })
        .map_err(|e| e.to_string())
    };

    // Cold build, default settings, as `kiln build` runs it.
    let baseline = status_bytes("VmRSS");
    let peak_reset = reset_peak();
    let started = Instant::now();
    let evicted;
    {
        let mut kiln = open(None, "cold")?;
        let report = kiln.build(&|_| {}).map_err(|e| e.to_string())?;
        evicted = report.evicted;
        if report.failed != 0 || report.compiled != variants {
            return Err(format!(
                "cold build: compiled {} of {variants}, failed {}: {:?}",
                report.compiled,
                report.failed,
                report.diagnostics.first()
            ));
        }
    }
    let elapsed = started.elapsed();
    let peak = status_bytes("VmHWM");
    println!(
        "memory cold_build variants={variants} targets={} jobs={jobs} peak_rss_mb={:.1} \
         baseline_mb={:.1} bytes_per_variant={:.0} build_s={:.1} evicted_memos={evicted}{}",
        target_names.join(","),
        mb(peak),
        mb(baseline),
        peak.saturating_sub(baseline) as f64 / variants as f64,
        elapsed.as_secs_f64(),
        if peak_reset {
            ""
        } else {
            " (peak not reset: includes the generator)"
        },
    );

    if std::env::var_os("KILN_BENCH_COLD_ONLY").is_some() {
        return Ok(());
    }
    // Rebuilds of one long-lived project under a bound, each after an edit that recompiles
    // the TONE_2 variants (a fifth of them) with a new constant.
    let bound: u64 = if full { 64 << 20 } else { 1 << 20 };
    let mut kiln = open(Some(bound), "watch")?;
    kiln.build(&|_| {}).map_err(|e| e.to_string())?;
    let mut after = Vec::new();
    for rep in 0..4 {
        std::fs::write(&tonemap, project::tonemap(scale.tones, Some(rep + 1)))
            .map_err(|e| e.to_string())?;
        kiln.refresh_files(std::slice::from_ref(&tonemap));
        let report = kiln.build(&|_| {}).map_err(|e| e.to_string())?;
        if report.failed != 0 || report.compiled == 0 {
            return Err(format!(
                "rebuild {rep}: compiled {}, failed {}",
                report.compiled, report.failed
            ));
        }
        after.push(status_bytes("VmRSS"));
    }
    let listed: Vec<String> = after.iter().map(|b| format!("{:.1}", mb(*b))).collect();
    println!(
        "memory rebuilds max_memory_mb={:.0} rss_mb={} growth_mb={:.1} (VmRSS after each \
         rebuild of one Project; growth = last - first)",
        mb(bound),
        listed.join(","),
        mb(after.last().copied().unwrap_or(0)) - mb(after.first().copied().unwrap_or(0)),
    );
    Ok(())
}
