//! Benchmark of what `[output] layout = "both"` (one pack per target beside the loose
//! outputs, issue 27) costs a build, on the pipeline bench's generated project (10 WGSL
//! shaders x 100 keyword sets x 2 passes = 2,000 variants; targets spirv, msl, hlsl).
//!
//! Printed, each measured in this one run with the two layouts alternating rep by rep:
//! - `pack noop`: a no-op build (a fresh `Project`, as a new `kiln build` process has, over
//!   a filled store and up-to-date outputs) with packs against without (goal: <= 5 ms with
//!   packs, and the packs neither rewritten nor read: `packs_written=0` is checked);
//! - `pack cold`: a cold build (empty store and output directory) with packs against
//!   without: what making the packs from the loose outputs adds;
//! - `pack edit`: a build after an edit of one shader's source (20 variants recompiled), with
//!   packs (every pack rewritten whole) against without: what rewriting costs.
//!
//! Without `--bench` (as under `cargo test --benches`) it runs once on a small project.

#[path = "common/project.rs"]
#[allow(dead_code)]
mod project;
#[path = "common/stats.rs"]
#[allow(dead_code)]
mod stats;

use kiln::pipeline::{BuildOptions, BuildReport, Project};
use project::{Generated, Scale};
use stats::{ms, ratio, Stats};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    let full = std::env::args().any(|arg| arg == "--bench");
    match run(full) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("pack bench failed: {message}");
            ExitCode::FAILURE
        }
    }
}

/// One generated project per layout (same shaders, same targets), its store and output
/// directory.
struct Contender {
    project: Generated,
    out: PathBuf,
    cache: PathBuf,
    packs: bool,
}

fn run(full: bool) -> Result<(), String> {
    let scale = if full { Scale::BENCH } else { Scale::SMOKE };
    let reps = if full { 9 } else { 1 };
    let cold_reps = if full { 3 } else { 1 };
    let targets: Vec<String> = ["spirv", "msl", "hlsl"].map(String::from).to_vec();
    let temp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let options = project::Options {
        bench: "pack",
        targets: &targets,
        edit_points: true,
    };
    let mut contenders = Vec::new();
    for (name, packs) in [("loose", false), ("both", true)] {
        let root = temp.path().join(name);
        let project =
            project::generate(&root.join("project"), scale, &options).map_err(|e| e.to_string())?;
        if packs {
            let mut manifest =
                std::fs::read_to_string(&project.manifest).map_err(|e| e.to_string())?;
            manifest.push_str("\n[output]\nlayout = \"both\"\n");
            std::fs::write(&project.manifest, manifest).map_err(|e| e.to_string())?;
        }
        contenders.push(Contender {
            project,
            out: root.join("out"),
            cache: root.join("cache"),
            packs,
        });
    }
    let variants = contenders[0].project.variants.len();
    println!(
        "pack project variants={variants} targets={} outputs={}",
        targets.join(","),
        variants * targets.len()
    );

    // Cold builds, alternating; each rep into fresh directories, the last kept for the rest.
    let mut cold: [Vec<Duration>; 2] = Default::default();
    for rep in 0..cold_reps {
        for turn in 0..2 {
            let at = (rep + turn) % 2;
            let c = &mut contenders[at];
            let dir = c.out.with_file_name(format!("cold{rep}"));
            let (out, cache) = (dir.join("out"), dir.join("cache"));
            let (elapsed, report) = build(&c.project.manifest, &out, &cache)?;
            check(
                &report,
                variants,
                variants,
                c.packs.then_some(targets.len()),
            )?;
            cold[at].push(elapsed);
            (c.out, c.cache) = (out, cache);
        }
    }
    let sync = || {
        let _ = std::process::Command::new("sync").status();
    };
    sync();
    let pack_bytes: u64 = targets
        .iter()
        .filter_map(|t| std::fs::metadata(contenders[1].out.join(format!("{t}.kpack"))).ok())
        .map(|m| m.len())
        .sum();
    print_pair("cold", &cold, "");
    println!("pack cold pack_bytes={pack_bytes}");

    // No-op builds, alternating.
    let mut noop: [Vec<Duration>; 2] = Default::default();
    for rep in 0..reps {
        for turn in 0..2 {
            let at = (rep + turn) % 2;
            let c = &contenders[at];
            let (elapsed, report) = build(&c.project.manifest, &c.out, &c.cache)?;
            check(&report, variants, 0, c.packs.then_some(0))?;
            noop[at].push(elapsed);
        }
    }
    print_pair("noop", &noop, " goal_both_ms<=5");

    // An edit of one shader: its 20 (or 200) variants recompile; with packs, every pack is
    // rewritten whole.
    let mut edit: [Vec<Duration>; 2] = Default::default();
    let per_shader = variants / scale.shaders;
    for rep in 0..reps.min(5) {
        for turn in 0..2 {
            let at = (rep + turn) % 2;
            let c = &contenders[at];
            let source = c.project.root.join(&c.project.variants[0].source);
            let text = std::fs::read_to_string(&source).map_err(|e| e.to_string())?;
            let edited = format!("{text}\n// edit {rep}\nconst EDIT_{rep}: f32 = {rep}.0;\n");
            std::fs::write(&source, edited).map_err(|e| e.to_string())?;
            let (elapsed, report) = build(&c.project.manifest, &c.out, &c.cache)?;
            check(
                &report,
                variants,
                per_shader,
                c.packs.then_some(targets.len()),
            )?;
            edit[at].push(elapsed);
        }
    }
    print_pair("edit", &edit, "");
    Ok(())
}

fn print_pair(what: &str, times: &[Vec<Duration>; 2], extra: &str) {
    let (loose, both) = (Stats::of(&times[0]), Stats::of(&times[1]));
    println!(
        "pack {what} both_vs_loose ratio={:.3} both_ms={:.2} loose_ms={:.2} min_ratio={:.3} \
         both_min_ms={:.2} loose_min_ms={:.2} reps={}{extra}",
        ratio(both.median, loose.median),
        ms(both.median),
        ms(loose.median),
        ratio(both.min, loose.min),
        ms(both.min),
        ms(loose.min),
        times[0].len(),
    );
}

/// One `kiln build` in this process, as a new process runs it: open, build, drop.
fn build(manifest: &Path, out: &Path, cache: &Path) -> Result<(Duration, BuildReport), String> {
    let started = Instant::now();
    let mut project = Project::open(&BuildOptions {
        manifest: manifest.to_owned(),
        out_dir: Some(out.to_owned()),
        cache_dir: Some(cache.to_owned()),
        jobs: Some(1),
        ..BuildOptions::default()
    })
    .map_err(|e| e.to_string())?;
    let report = project.build(&|_| {}).map_err(|e| e.to_string())?;
    drop(project);
    Ok((started.elapsed(), report))
}

/// The build did what the bench times: every variant, `compiled` of them compiled, the
/// expected number of packs written (`None`: the loose layout, none).
fn check(
    report: &BuildReport,
    variants: usize,
    compiled: usize,
    packs: Option<usize>,
) -> Result<(), String> {
    let packs_written = packs.unwrap_or(0);
    if report.variants != variants
        || report.failed != 0
        || report.compiled != compiled
        || report.packs_written != packs_written
        || report.packs_failed != 0
    {
        return Err(format!(
            "unexpected build: variants={} failed={} compiled={} (expected {compiled}) \
             packs_written={} (expected {packs_written}) packs_failed={} {:?}",
            report.variants,
            report.failed,
            report.compiled,
            report.packs_written,
            report.packs_failed,
            report.diagnostics.first()
        ));
    }
    Ok(())
}
