//! The remote cache on a real `redis-server` (started here on a loopback port), on two
//! generated projects. Printed from one run, reps alternated (medians and minimums):
//! - `remote build cold_ms= warm_remote_ms= warm_local_ms= cold_over_warm_remote=
//!   warm_remote_over_warm_local=`, on the 2,000-variant WGSL project (10 shaders x 100
//!   keyword sets x 2 passes; targets spirv, msl, hlsl) that naga compiles at about 1 ms a
//!   variant: a cold build (empty local store, no remote); a build with an empty local store
//!   from a filled remote (it fills the local store); a build from that filled local store
//!   with no remote. Each starts a new `Project` (as a new process would) and writes every
//!   output into an empty output directory. Goal: warm-from-remote at most 2x slower than
//!   warm-from-local. `cold_over_warm_local` shows the floor of `cold_over_warm_remote`: both
//!   warm builds write all 6,000 outputs into an empty directory, which bounds the ratio
//!   when compiles are this cheap (the 20x goal for that ratio is the glslang line's).
//! - `remote shard_balance n= max_over_mean=`: the partition of the WGSL project's distinct
//!   compile jobs over N shards by the compile times a cold build recorded in the remote
//!   (what `kiln build --shard I/N` reads), as the largest shard's recorded cost over the
//!   mean shard's. Goal: at most 1.10.
//! - `remote glslang_build variants= ms_per_compile= cold_ms= warm_remote_ms= warm_local_ms=
//!   cold_over_warm_remote=`: the same three builds on a workload whose compiles cost what
//!   production shaders cost: 256 forward PBR HLSL fragment variants (4 shaders x 64 keyword
//!   sets, see `common/hlsl_project.rs`; target spirv only, one output per variant) compiled
//!   by glslang with `[shader.glslang] optimization = "performance"` (SPIRV-Tools' HLSL
//!   legalization and performance passes). `ms_per_compile` is the mean compile time the
//!   fill build recorded per variant in the remote (median and maximum beside it), on a
//!   build thread sharing the cores with the others. Goal: cold at least 20x slower than
//!   warm-from-remote. On the server's database 1, so the shard balance reads the WGSL
//!   project's costs alone. Skipped with a message without the `glslang` feature.
//!
//! - `remote build_packs ...` and `remote glslang_build_packs ...`: each line again with
//!   `[output] layout = "both"` (a pack per target beside the loose outputs, issue 27), same
//!   remote, same protocol, its reps alternated with the loose line's: what writing packs
//!   adds to each build.
//!
//! `cargo bench -p kiln --bench remote` (`KILN_BENCH_REPS=N` to change the 3 reps); without
//! `--bench` (e.g. under `cargo test -p kiln --bench remote`) small projects (64 WGSL and 8
//! HLSL variants) and one rep. Skips with a message without `redis-server`.

#[path = "common/hlsl_project.rs"]
mod hlsl_project;
#[path = "common/project.rs"]
#[allow(dead_code)]
mod project;
#[path = "common/stats.rs"]
#[allow(dead_code)]
mod stats;

use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Duration;

use kiln::pipeline::{BuildOptions, BuildReport, Project};
use kiln::store::ContentKey;
use project::Scale;
use stats::{ms, ratio, Stats};

/// The glslang line's HLSL project: 4 shaders x 64 keyword sets (256 compiles), and in the
/// smoke mode 1 shader x 8.
const HLSL_FULL: hlsl_project::Scale = hlsl_project::Scale {
    shaders: 4,
    lights: 4,
    tones: 2,
};
const HLSL_SMOKE: hlsl_project::Scale = hlsl_project::Scale {
    shaders: 1,
    lights: 1,
    tones: 1,
};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() -> ExitCode {
    let full = std::env::args().any(|arg| arg == "--bench");
    match run(full) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("remote bench failed: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Every build writes into an output directory of its own, and none is deleted before the
/// bench ends: this disk's ext4 has no journal, and then every new inode is checked against
/// the inodes freed in the last minute, one inode-table lookup each, so files created right
/// after thousands were deleted cost up to 10x more (seen with `perf`: `recently_deleted`).
fn build(manifest: &Path, cache: &Path, remote: Option<&str>) -> Result<BuildReport, String> {
    static BUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = manifest.with_file_name(format!("out-{n}"));
    let options = BuildOptions {
        manifest: manifest.to_owned(),
        out_dir: Some(out),
        cache_dir: Some(cache.to_owned()),
        remote: remote.map(str::to_owned),
        no_remote: remote.is_none(),
        // Read-write, as the builds that fill and read a CI cache are.
        remote_push: remote.is_some(),
        ..BuildOptions::default()
    };
    let mut project = Project::open(&options).map_err(|e| e.to_string())?;
    let report = project.build(&|_| {}).map_err(|e| e.to_string())?;
    if report.failed > 0
        || report
            .diagnostics
            .iter()
            .any(|d| d.severity == kiln::pipeline::Severity::Warning)
    {
        return Err(format!(
            "build had problems: {:?}",
            report.diagnostics.first()
        ));
    }
    Ok(report)
}

fn run(full: bool) -> Result<(), String> {
    let installed = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        println!("remote skipped: redis-server is not installed");
        return Ok(());
    }
    let scale = if full { Scale::BENCH } else { Scale::SMOKE };
    // KILN_BENCH_REPS: fewer reps on a busy machine (each rep is a cold build).
    let reps = std::env::var("KILN_BENCH_REPS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(if full { 3 } else { 1 });
    let temp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let _server = Server(
        Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(temp.path())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?,
    );
    let url = format!("redis://127.0.0.1:{port}/0");
    let client = redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
    let mut con = (0..200)
        .find_map(|_| {
            std::thread::sleep(Duration::from_millis(25));
            client.get_connection().ok()
        })
        .ok_or("redis-server did not start")?;

    let targets: Vec<String> = ["spirv", "msl", "hlsl"].map(String::from).to_vec();
    let options = project::Options {
        bench: "remote",
        targets: &targets,
        edit_points: false,
    };
    let generated = project::generate(&temp.path().join("project"), scale, &options)
        .map_err(|e| e.to_string())?;
    let manifest = generated.manifest;
    println!(
        "remote project variants={} targets={} redis=127.0.0.1 (loopback)",
        scale.variants(),
        targets.len()
    );
    let packs = with_packs(&manifest)?;
    let (loose_dir, packs_dir) = (temp.path().join("wgsl"), temp.path().join("wgsl-packs"));
    let contenders = [
        Contender {
            manifest: &manifest,
            caches: &loose_dir,
            prefix: "",
        },
        Contender {
            manifest: &packs,
            caches: &packs_dir,
            prefix: "packs_",
        },
    ];
    let lines = measure(&contenders, &url, scale.variants(), reps)?;
    println!("remote build reps={reps} {}", lines[0].fields());
    println!("remote build_packs reps={reps} {}", lines[1].fields());

    // Shard balance by the compile times the fill build recorded.
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("kiln:v2:cost:*")
        .query(&mut con)
        .map_err(|e| e.to_string())?;
    let mut jobs: Vec<(ContentKey, u64)> = Vec::new();
    for key in keys {
        let micros: u64 = redis::cmd("GET")
            .arg(&key)
            .query(&mut con)
            .map_err(|e| e.to_string())?;
        let hex = key.rsplit(':').next().unwrap_or_default();
        jobs.push((
            hex.parse()
                .map_err(|e: kiln::store::ParseContentKeyError| e.to_string())?,
            micros,
        ));
    }
    let costs: Vec<u64> = jobs.iter().map(|j| j.1).collect();
    for n in [2, 4, 8] {
        let assigned = kiln::shard::partition(&jobs, n);
        println!(
            "remote shard_balance n={n} jobs={} max_over_mean={:.4}",
            jobs.len(),
            kiln::shard::imbalance(&costs, &assigned, n)
        );
    }

    glslang_line(full, temp.path(), port, reps)
}

/// The glslang line: the same protocol on the generated HLSL project, whose compiles
/// (glslang, SPIRV-Tools' performance passes) cost what production shaders cost. On the
/// server's database 1, so that the shard balance above reads the WGSL project's costs only.
fn glslang_line(full: bool, temp: &Path, port: u16, reps: usize) -> Result<(), String> {
    if !cfg!(feature = "glslang") {
        println!("remote glslang_build skipped: kiln was built without the `glslang` feature");
        return Ok(());
    }
    let scale = if full { HLSL_FULL } else { HLSL_SMOKE };
    let url = format!("redis://127.0.0.1:{port}/1");
    let generated = hlsl_project::generate(&temp.join("hlsl-project"), scale, "remote")
        .map_err(|e| e.to_string())?;
    println!(
        "remote glslang_project variants={} shaders={} targets=1 optimization=performance",
        generated.variants, scale.shaders
    );
    let packs = with_packs(&generated.manifest)?;
    let (loose_dir, packs_dir) = (temp.join("hlsl"), temp.join("hlsl-packs"));
    let contenders = [
        Contender {
            manifest: &generated.manifest,
            caches: &loose_dir,
            prefix: "glslang_",
        },
        Contender {
            manifest: &packs,
            caches: &packs_dir,
            prefix: "glslang_packs_",
        },
    ];
    let lines = measure(&contenders, &url, generated.variants, reps)?;
    // What one compile cost (glslang, legalization, the performance passes, validation), as
    // the fill build recorded it in the remote for `--shard`: the mean over every job.
    let client = redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
    let mut con = client.get_connection().map_err(|e| e.to_string())?;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("kiln:v2:cost:*")
        .query(&mut con)
        .map_err(|e| e.to_string())?;
    let mut micros = Vec::with_capacity(keys.len());
    for key in keys {
        let cost: u64 = redis::cmd("GET")
            .arg(&key)
            .query(&mut con)
            .map_err(|e| e.to_string())?;
        micros.push(Duration::from_micros(cost));
    }
    let mean = micros.iter().sum::<Duration>() / u32::try_from(micros.len().max(1)).unwrap_or(1);
    let per_compile = Stats::of(&micros);
    println!(
        "remote glslang_build reps={reps} variants={} ms_per_compile={:.1} (median {:.1}, max {:.1}) {}",
        generated.variants,
        ms(mean),
        ms(per_compile.median),
        ms(micros.iter().max().copied().unwrap_or_default()),
        lines[0].fields(),
    );
    println!(
        "remote glslang_build_packs reps={reps} {}",
        lines[1].fields()
    );
    Ok(())
}

/// A second manifest beside `manifest` (same shaders, same artifacts: the layout is not part
/// of any identity) that also asks for a pack per target.
fn with_packs(manifest: &Path) -> Result<std::path::PathBuf, String> {
    let text = std::fs::read_to_string(manifest).map_err(|e| e.to_string())?;
    let packs = manifest.with_file_name("kiln-packs.toml");
    std::fs::write(&packs, format!("{text}\n[output]\nlayout = \"both\"\n"))
        .map_err(|e| e.to_string())?;
    Ok(packs)
}

/// One line's builds, reps alternated.
struct Line {
    cold: Stats,
    warm_remote: Stats,
    warm_local: Stats,
}

impl Line {
    /// The printed figures: each build's median and minimum, and the ratios.
    fn fields(&self) -> String {
        format!(
            "cold_ms={:.1} (min {:.1}) warm_remote_ms={:.1} (min {:.1}) warm_local_ms={:.1} \
             (min {:.1}) cold_over_warm_remote={:.1}x (min over min {:.1}x) \
             warm_remote_over_warm_local={:.2}x cold_over_warm_local={:.1}x",
            ms(self.cold.median),
            ms(self.cold.min),
            ms(self.warm_remote.median),
            ms(self.warm_remote.min),
            ms(self.warm_local.median),
            ms(self.warm_local.min),
            ratio(self.cold.median, self.warm_remote.median),
            ratio(self.cold.min, self.warm_remote.min),
            ratio(self.warm_remote.median, self.warm_local.median),
            ratio(self.cold.median, self.warm_local.median),
        )
    }
}

/// One contender of a line: its manifest, the directory of its local stores, and the prefix
/// of its printed lines.
struct Contender<'a> {
    manifest: &'a Path,
    caches: &'a Path,
    prefix: &'a str,
}

/// Fills the remote at `url` from each contender's manifest once, then per rep and per
/// contender (their order rotating rep by rep, so that a slow phase of the machine hits each
/// alike) a cold build (empty local store, no remote), a build with an empty local store
/// from the filled remote and one from the local store that filled (no remote), the cold
/// one first on odd reps and last on even ones. One [`Line`] per contender.
fn measure(
    contenders: &[Contender<'_>],
    url: &str,
    variants: usize,
    reps: usize,
) -> Result<Vec<Line>, String> {
    for c in contenders {
        // Fill the remote (and record compile times) once.
        let fill = build(c.manifest, &c.caches.join("fill"), Some(url))?;
        println!(
            "remote {}fill compiled={} deduplicated={} uploaded={:?}",
            c.prefix,
            fill.compiled,
            fill.deduplicated,
            fill.remote.as_ref().map(|r| r.uploaded)
        );
    }
    let mut samples: Vec<[Vec<Duration>; 3]> =
        contenders.iter().map(|_| Default::default()).collect();
    for rep in 0..reps {
        for turn in 0..contenders.len() {
            let at = (rep + turn) % contenders.len();
            one_rep(&contenders[at], url, variants, rep, &mut samples[at])?;
        }
    }
    Ok(samples
        .iter()
        .map(|[cold, warm_remote, warm_local]| Line {
            cold: Stats::of(cold),
            warm_remote: Stats::of(warm_remote),
            warm_local: Stats::of(warm_local),
        })
        .collect())
}

/// One rep of one contender: cold, warm from the remote, warm from the local store.
fn one_rep(
    c: &Contender<'_>,
    url: &str,
    variants: usize,
    rep: usize,
    [cold, warm_remote, warm_local]: &mut [Vec<Duration>; 3],
) -> Result<(), String> {
    let (manifest, prefix) = (c.manifest, c.prefix);
    let run_cold = |cold: &mut Vec<Duration>| -> Result<(), String> {
        let dir = c.caches.join(format!("cold{rep}"));
        let report = build(manifest, &dir, None)?;
        assert_eq!(report.compiled + report.deduplicated, variants);
        cold.push(report.elapsed);
        Ok(())
    };
    if rep % 2 == 1 {
        run_cold(cold)?;
    }
    let dir = c.caches.join(format!("warm{rep}"));
    let report = build(manifest, &dir, Some(url))?;
    if report.compiled != 0 {
        return Err(format!(
            "{prefix}warm-from-remote compiled {}",
            report.compiled
        ));
    }
    warm_remote.push(report.elapsed);
    if let Some(remote) = &report.remote {
        println!(
            "remote {prefix}warm rep={rep} fetched={} round_trips={} ms={:.1}",
            remote.fetched,
            remote.round_trips,
            ms(report.elapsed)
        );
    }
    let report = build(manifest, &dir, None)?;
    if report.compiled != 0 {
        return Err(format!(
            "{prefix}warm-from-local compiled {}",
            report.compiled
        ));
    }
    warm_local.push(report.elapsed);
    if rep.is_multiple_of(2) {
        run_cold(cold)?;
    }
    Ok(())
}
