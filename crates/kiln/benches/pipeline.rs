//! Benchmark of `kiln build` on a generated project (10 WGSL shaders x 100 keyword sets x 2
//! passes = 2,000 variants, targets spirv, msl and hlsl by default), against what users run
//! today: a plain single-threaded loop that, per variant, preprocesses the source (kiln's
//! preprocessor over the disk: naga has none), parses, validates and emits with naga for every
//! target, and writes each output file, as a Makefile calling naga would.
//!
//! Every keyword changes the preprocessed text, so the project has no duplicate variants (the
//! line `pipeline project` prints how many distinct compile inputs there are, and the bench
//! fails if any two variants share one): kiln compiles exactly what the loop compiles, and
//! the comparison measures kiln's overhead only.
//!
//! Printed, each measured in this one run with the contenders alternating rep by rep (these
//! VMs have slow phases), as the median of the reps and their minimum:
//! - `pipeline cold_vs_raw ratio=<kiln cold, jobs=1 / raw loop>` (target <= 1.10). A kiln
//!   cold build is `Project::open` + `build` + drop over an empty store and output directory.
//! - `pipeline warm_vs_cold ratio=<cold jobs=1 / warm>` (target >= 100): warm is a fresh
//!   `Project` (new engine, nothing in memory) over the filled store and outputs; the line
//!   `pipeline warm_vs_cold process` measures the same by spawning `target/release/kiln build`
//!   when that binary exists (build it with `cargo build --release -p kiln-cli`). Both run
//!   after an untimed `sync`, so that the kernel's writeback of the cold reps' files is not
//!   timed as part of them.
//! - `pipeline jobs2_vs_jobs1 speedup=<cold jobs=1 / cold jobs=2>` (target >= 1.8).
//! - `pipeline cold_vs_raw cpu_ratio=` / `pipeline warm_vs_cold cpu_ratio=`: the same from the
//!   process's CPU time (user + system), which other processes on a shared machine disturb far
//!   less than wall time.
//! - `pipeline warm_vs_make ratio=<kiln no-op / make no-op>` (target <= 1): both in new
//!   processes over the same up-to-date outputs (see `make_noop`).
//! - `pipeline cold_phase ...`: the raw loop's time per step, and the file writes kiln does
//!   beyond it (store saves, new outputs written atomically as kiln writes them) timed alone
//!   against the usual temporary-file-and-rename and against plain writes.
//! - `pipeline warm_phase ...`: a warm build's steps timed one by one (see `phases`).
//!
//! No cold rep's files are deleted before the last cold rep has run: this disk's ext4 has no
//! journal, and then it checks every candidate inode against those freed in the last minute
//! (`recently_deleted`, an inode-table lookup each) when it allocates a new one, which made
//! whichever contender ran right after a deletion pay up to a third of its time in the
//! kernel (seen with `perf`).
//!
//! `KILN_BENCH_GENERATE=<dir>` only writes the project into `<dir>` (to profile `kiln build`
//! on it by hand). `KILN_BENCH_TARGETS=spirv` (a comma list) changes the targets; `KILN_BENCH_DIR=/dev/shm`
//! generates the project there instead of the system's temporary directory (creating a file
//! costs ~0.8 ms of kernel time on these VMs' ext4 and ~0.02 ms on tmpfs, so the two separate
//! kiln's compile overhead from its file-creation overhead). Without `--bench` (as under
//! `cargo test --benches`) it runs once on a small project, as a smoke test.

#[path = "pipeline/phases.rs"]
mod phases;
#[path = "common/project.rs"]
mod project;
#[path = "common/stats.rs"]
mod stats;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use kiln::compile::{self, TargetConfig};
use kiln::pipeline::{output_path, BuildOptions, BuildReport, Index, Project};
use kiln::store::{ArtifactStore, ContentKey, LocalStore, Namespace};
use project::{Generated, Scale};
use stats::{median_by_key, ms, ratio, Stats};
use std::io::Write as _;

fn main() -> ExitCode {
    let full = std::env::args().any(|arg| arg == "--bench");
    match run(full) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("pipeline bench failed: {message}");
            ExitCode::FAILURE
        }
    }
}

/// User and system CPU time of this whole process so far (all threads), from
/// `/proc/self/stat`: on a shared machine it is much less disturbed by other processes than
/// wall time. Zero where `/proc` is absent. Resolution: 10 ms (USER_HZ = 100).
#[derive(Clone, Copy, Default)]
struct Cpu {
    user: Duration,
    system: Duration,
}

impl Cpu {
    fn now() -> Cpu {
        let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
            return Cpu::default();
        };
        // Fields after the command name (which may hold spaces) start at field 3, `state`;
        // utime and stime are fields 14 and 15.
        let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .map_or(Duration::ZERO, |t| Duration::from_millis(t * 10))
        };
        Cpu {
            user: ticks(11),
            system: ticks(12),
        }
    }

    fn since(self, earlier: Cpu) -> Cpu {
        Cpu {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }

    fn total(self) -> Duration {
        self.user + self.system
    }
}

fn run(full: bool) -> Result<(), String> {
    let scale = if full { Scale::BENCH } else { Scale::SMOKE };
    let cold_reps = if full { 5 } else { 1 };
    let warm_reps = if full { 7 } else { 1 };
    let target_names: Vec<String> = std::env::var("KILN_BENCH_TARGETS")
        .unwrap_or_else(|_| "spirv,msl,hlsl".to_owned())
        .split(',')
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    let targets: Vec<TargetConfig> = target_names
        .iter()
        .map(|name| TargetConfig::parse(name, &Default::default()).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;

    // Profiling aid: write the project where asked and stop, to run `kiln build` on it by hand.
    if let Some(dir) = std::env::var_os("KILN_BENCH_GENERATE") {
        let options = project::Options {
            bench: "pipeline",
            targets: &target_names,
            edit_points: false,
        };
        project::generate(Path::new(&dir), scale, &options).map_err(|e| e.to_string())?;
        return Ok(());
    }
    let temp = match std::env::var_os("KILN_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir),
        None => tempfile::tempdir(),
    }
    .map_err(|e| e.to_string())?;
    let probe = temp.path().join("fs-probe");
    let create_cost = file_create_cost(&probe)?;
    let options = project::Options {
        bench: "pipeline",
        targets: &target_names,
        edit_points: false,
    };
    let project = project::generate(&temp.path().join("project"), scale, &options)
        .map_err(|e| e.to_string())?;
    let distinct = distinct_compile_inputs(&project)?;
    // The comparison is kiln's overhead only if kiln compiles exactly what the loop
    // compiles: a duplicate text would be compiled once by kiln and twice by the loop.
    if distinct != project.variants.len() {
        return Err(format!(
            "the generated project has {} variants but {distinct} distinct compile inputs: \
             duplicates would flatter kiln",
            project.variants.len()
        ));
    }
    println!(
        "pipeline project shaders={} keyword_sets={} passes={} variants={} targets={} \
         distinct_compile_inputs={} duplicates={} dir={} file_create_us={:.0}",
        scale.shaders,
        scale.keyword_sets(),
        project::PASSES.len(),
        project.variants.len(),
        target_names.join(","),
        distinct,
        project.variants.len() - distinct,
        temp.path().display(),
        create_cost.as_secs_f64() * 1e6,
    );

    // Cold builds: raw loop, kiln jobs=1, kiln jobs=2, in a rotating order.
    let mut raw_times = Vec::new();
    let mut raw_cpu = Vec::new();
    let mut jobs1_cpu = Vec::new();
    let mut raw_phases = Vec::new();
    let mut jobs1_times = Vec::new();
    let mut jobs2_times = Vec::new();
    let mut warm_dirs: Option<(PathBuf, PathBuf)> = None;
    for rep in 0..cold_reps {
        for turn in 0..3 {
            let dir = temp.path().join(format!("rep{rep}-{turn}"));
            match (rep + turn) % 3 {
                0 => {
                    let out = dir.join("raw-out");
                    let (started, cpu) = (Instant::now(), Cpu::now());
                    let phases = raw_build(&project, &out, &targets)?;
                    raw_times.push(started.elapsed());
                    raw_cpu.push(Cpu::now().since(cpu));
                    raw_phases.push(phases);
                }
                contender => {
                    let jobs = contender;
                    let (out, cache) = (dir.join("out"), dir.join("cache"));
                    let cpu = Cpu::now();
                    let (elapsed, report) = kiln_build(&project.manifest, &out, &cache, jobs)?;
                    let cpu = Cpu::now().since(cpu);
                    check_cold(&report, project.variants.len(), distinct)?;
                    if jobs == 1 {
                        jobs1_times.push(elapsed);
                        jobs1_cpu.push(cpu);
                        // The last jobs=1 build's store and outputs are the warm builds' input.
                        warm_dirs = Some((out, cache));
                    } else {
                        jobs2_times.push(elapsed);
                    }
                }
            }
        }
    }
    let raw = Stats::of(&raw_times);
    let jobs1 = Stats::of(&jobs1_times);
    let jobs2 = Stats::of(&jobs2_times);
    let variants = project.variants.len() as f64;
    println!(
        "pipeline cold_vs_raw ratio={:.3} kiln_ms={:.1} raw_ms={:.1} min_ratio={:.3} \
         kiln_min_ms={:.1} raw_min_ms={:.1} raw_us_per_variant={:.0} reps={cold_reps}",
        ratio(jobs1.median, raw.median),
        ms(jobs1.median),
        ms(raw.median),
        ratio(jobs1.min, raw.min),
        ms(jobs1.min),
        ms(raw.min),
        ms(raw.median) * 1000.0 / variants,
    );
    println!(
        "pipeline jobs2_vs_jobs1 speedup={:.2} jobs1_ms={:.1} jobs2_ms={:.1} min_speedup={:.2} \
         jobs1_min_ms={:.1} jobs2_min_ms={:.1} reps={cold_reps}",
        ratio(jobs1.median, jobs2.median),
        ms(jobs1.median),
        ms(jobs2.median),
        ratio(jobs1.min, jobs2.min),
        ms(jobs1.min),
        ms(jobs2.min),
    );

    let (raw_cpu, jobs1_cpu) = (
        median_by_key(&raw_cpu, |c| c.total()),
        median_by_key(&jobs1_cpu, |c| c.total()),
    );
    println!(
        "pipeline cold_vs_raw cpu_ratio={:.3} kiln_cpu_ms={:.0} (user {:.0} + sys {:.0}) \
         raw_cpu_ms={:.0} (user {:.0} + sys {:.0}) (process CPU time, jobs=1, median)",
        ratio(jobs1_cpu.total(), raw_cpu.total()),
        ms(jobs1_cpu.total()),
        ms(jobs1_cpu.user),
        ms(jobs1_cpu.system),
        ms(raw_cpu.total()),
        ms(raw_cpu.user),
        ms(raw_cpu.system),
    );
    if let Some(phases) = raw_phases
        .iter()
        .zip(&raw_times)
        .min_by_key(|(_, t)| **t)
        .map(|(p, _)| *p)
    {
        println!(
            "pipeline cold_phase raw preprocess_ms={:.1} parse_validate_ms={:.1} emit_ms={:.1} \
             write_ms={:.1} (fastest raw rep)",
            ms(phases.preprocess),
            ms(phases.parse_validate),
            ms(phases.emit),
            ms(phases.write),
        );
    }

    // Warm builds over the last jobs=1 build's store and outputs: a fresh Project in this
    // process, alternating with the real binary in a new process when it exists.
    let (out, cache) = warm_dirs.ok_or("no cold jobs=1 build ran")?;
    // The cold reps left about 800 MB of files that the kernel writes back over the next
    // half minute, on these same two cores: flushed here, untimed, so that the warm builds
    // do not pay for the cold ones' deferred writes (neither contender's clock included them).
    if let Err(error) = Command::new("sync").status() {
        eprintln!("pipeline bench: cannot run sync ({error}); warm figures may include writeback");
    }
    let binary = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/kiln");
    let binary = (full && binary.is_file()).then_some(binary);
    let mut warm_times = Vec::new();
    let mut warm_cpu = Vec::new();
    let mut process_times = Vec::new();
    let mut process_reported = Vec::new();
    for _ in 0..warm_reps {
        let cpu = Cpu::now();
        let (elapsed, report) = kiln_build(&project.manifest, &out, &cache, 1)?;
        warm_cpu.push(Cpu::now().since(cpu));
        check_warm(&report, project.variants.len())?;
        warm_times.push(elapsed);
        if let Some(binary) = &binary {
            let (wall, reported) = spawn_build(binary, &project.manifest, &out, &cache)?;
            process_times.push(wall);
            process_reported.push(reported);
        }
    }
    let warm = Stats::of(&warm_times);
    println!(
        "pipeline warm_vs_cold ratio={:.1} cold_ms={:.1} warm_ms={:.2} min_ratio={:.1} \
         warm_min_ms={:.2} reps={warm_reps} (fresh Project in this process, jobs=1)",
        ratio(jobs1.median, warm.median),
        ms(jobs1.median),
        ms(warm.median),
        ratio(jobs1.min, warm.min),
        ms(warm.min),
    );
    let warm_cpu = median_by_key(&warm_cpu, |c| c.total());
    println!(
        "pipeline warm_vs_cold cpu_ratio={:.1} warm_cpu_ms={:.0} (user {:.0} + sys {:.0})",
        ratio(jobs1_cpu.total(), warm_cpu.total()),
        ms(warm_cpu.total()),
        ms(warm_cpu.user),
        ms(warm_cpu.system),
    );
    match &binary {
        Some(binary) => {
            let wall = Stats::of(&process_times);
            let reported = Stats::of(&process_reported);
            println!(
                "pipeline warm_vs_cold process ratio={:.1} warm_wall_ms={:.2} warm_wall_min_ms={:.2} \
                 reported_elapsed_ms={:.2} reps={warm_reps} ({} build --jobs 1 --json, new process)",
                ratio(jobs1.median, wall.median),
                ms(wall.median),
                ms(wall.min),
                ms(reported.median),
                binary.display(),
            );
        }
        None if full => println!(
            "pipeline warm_vs_cold process skipped: no target/release/kiln \
             (cargo build --release -p kiln-cli)"
        ),
        None => {}
    }
    if let Some(binary) = &binary {
        match make_noop(&project, &out, &cache, binary, warm_reps, temp.path())? {
            Some((kiln, make)) => println!(
                "pipeline warm_vs_make ratio={:.3} kiln_ms={:.2} make_ms={:.2} min_ratio={:.3} \
                 kiln_min_ms={:.2} make_min_ms={:.2} reps={warm_reps} (no-op, new processes \
                 alternating: kiln build --jobs 1 against make -rR over a Makefile naming every \
                 output with its source, includes and manifest as prerequisites)",
                ratio(kiln.median, make.median),
                ms(kiln.median),
                ms(make.median),
                ratio(kiln.min, make.min),
                ms(kiln.min),
                ms(make.min),
            ),
            None => println!("pipeline warm_vs_make skipped: no `make` on PATH"),
        }
    }

    let scratch = temp.path().join("write-costs");
    let costs = write_costs(&out, &scratch)?;
    remove(&scratch);
    println!(
        "pipeline cold_phase kiln_extra_writes store_saves_ms={:.1} kiln_new_output_writes_ms={:.1} \
         rename_output_writes_ms={:.1} plain_output_writes_ms={:.1} files={} (single-threaded, \
         same bytes; kiln's: an unnamed file linked in place)",
        ms(costs.saves),
        ms(costs.kiln),
        ms(costs.rename),
        ms(costs.plain),
        project.variants.len() * targets.len(),
    );

    // Each phase's best of three runs.
    let mut phases = phases::measure(&project, &out, &cache)?;
    for _ in 1..3 {
        let again = phases::measure(&project, &out, &cache)?;
        for ((_, best), (_, time)) in phases.times.iter_mut().zip(again.times) {
            *best = (*best).min(time);
        }
    }
    let sum: Duration = phases.times.iter().map(|(_, t)| *t).sum();
    let listed: Vec<String> = phases
        .times
        .iter()
        .map(|(name, t)| format!("{name}_ms={:.2}", ms(*t)))
        .collect();
    println!("pipeline warm_phase {}", listed.join(" "));
    println!(
        "pipeline warm_phase sum_ms={:.2} warm_ms={:.2} rest_ms={:.2} store_hits={}/{} \
         outputs_current={}/{} (phases single-threaded, best of 3; rest = engine, key digests, index build)",
        ms(sum),
        ms(warm.median),
        ms(warm.median.saturating_sub(sum)),
        phases.store_hits,
        phases.store_loads,
        phases.outputs_current,
        project.variants.len() * targets.len(),
    );
    Ok(())
}

/// How many distinct (stage, entry, preprocessed text) the project has: kiln compiles each
/// once, the raw loop compiles every variant.
fn distinct_compile_inputs(project: &Generated) -> Result<usize, String> {
    let loader = project::PlainLoader::new(&project.root);
    let mut seen = HashSet::new();
    for variant in &project.variants {
        let text = variant.preprocess(project.language, &loader)?;
        seen.insert((
            variant.stage,
            variant.entry,
            ContentKey::hash(text.as_bytes()),
        ));
    }
    Ok(seen.len())
}

/// Where the raw loop's time went.
#[derive(Clone, Copy, Default)]
struct RawPhases {
    preprocess: Duration,
    parse_validate: Duration,
    emit: Duration,
    write: Duration,
}

/// What a Makefile calling naga once per variant does, in one thread: preprocess, parse,
/// validate, emit every target, write every output.
fn raw_build(
    project: &Generated,
    out: &Path,
    targets: &[TargetConfig],
) -> Result<RawPhases, String> {
    let loader = project::PlainLoader::new(&project.root);
    let mut made = HashSet::new();
    let mut phases = RawPhases::default();
    for variant in &project.variants {
        let started = Instant::now();
        let text = variant.preprocess(project.language, &loader)?;
        let parsed = Instant::now();
        phases.preprocess += parsed - started;
        let module = compile::parse_and_validate(
            project.language,
            &text,
            variant.stage,
            variant.entry,
            compile::common_capabilities(targets),
        )
        .map_err(|e| format!("{}/{}: {e}", variant.shader, variant.pass))?;
        phases.parse_validate += parsed.elapsed();
        for target in targets {
            let emitting = Instant::now();
            let bytes = compile::emit(&module, target).map_err(|e| e.to_string())?;
            let writing = Instant::now();
            phases.emit += writing - emitting;
            let path = out.join(output_path(
                &variant.shader,
                variant.pass,
                &variant.keywords,
                target.target().extension(),
            ));
            if let Some(dir) = path.parent() {
                if made.insert(dir.to_owned()) {
                    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
                }
            }
            std::fs::write(&path, bytes).map_err(|e| e.to_string())?;
            phases.write += writing.elapsed();
        }
    }
    Ok(phases)
}

/// The file writes a cold kiln build does beyond the raw loop's plain writes, timed alone
/// (single-threaded) with the outputs in `out`: every artifact saved to a fresh store (one
/// batched `save_many`, as a build does), and every output written new as a build writes
/// it, by temporary file and rename, and in place, each into an empty directory tree.
fn write_costs(out: &Path, scratch: &Path) -> Result<WriteCosts, String> {
    let index = Index::read(out);
    let mut files = Vec::with_capacity(index.entries.len());
    for entry in &index.entries {
        let bytes = std::fs::read(out.join(&*entry.path)).map_err(|e| e.to_string())?;
        files.push((entry.target.clone(), entry.path.clone(), bytes));
    }
    let store = LocalStore::new(scratch.join("store"));
    let keyed: Vec<(Namespace, ContentKey, &[u8])> = files
        .iter()
        .map(|(target, path, bytes)| {
            (
                Namespace::new(&**target, compile::NAGA_VERSION),
                ContentKey::hash(path.as_bytes()),
                &bytes[..],
            )
        })
        .collect();
    let entries: Vec<_> = keyed
        .iter()
        .map(|(ns, key, bytes)| (ns, key, *bytes))
        .collect();
    // One batch, as a build saves its artifacts at its end.
    let started = Instant::now();
    store.save_many(&entries).map_err(|e| e.to_string())?;
    let saves = started.elapsed();

    let write_all = |dir: &Path, how: Write| -> Result<Duration, String> {
        let mut made = HashSet::new();
        let started = Instant::now();
        for (_, path, bytes) in &files {
            let path = dir.join(&**path);
            let parent = path.parent().ok_or("output without a directory")?;
            match how {
                // Makes its directories itself, as in a build.
                Write::Kiln => {
                    kiln::pipeline::write_new_output(&path, bytes).map_err(|e| e.to_string())?;
                    continue;
                }
                Write::Rename | Write::Plain => {
                    if made.insert(parent.to_owned()) {
                        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
                    }
                }
            }
            if how == Write::Rename {
                let mut temp =
                    tempfile::NamedTempFile::new_in(parent).map_err(|e| e.to_string())?;
                temp.write_all(bytes).map_err(|e| e.to_string())?;
                temp.persist(&path).map_err(|e| e.to_string())?;
            } else {
                std::fs::write(&path, bytes).map_err(|e| e.to_string())?;
            }
        }
        Ok(started.elapsed())
    };
    let kiln = write_all(&scratch.join("kiln"), Write::Kiln)?;
    let rename = write_all(&scratch.join("rename"), Write::Rename)?;
    let plain = write_all(&scratch.join("plain"), Write::Plain)?;
    Ok(WriteCosts {
        saves,
        kiln,
        rename,
        plain,
    })
}

/// How [`write_costs`] writes a new output file.
#[derive(Clone, Copy, PartialEq)]
enum Write {
    /// As a kiln build does (`kiln::pipeline::write_new_output`).
    Kiln,
    /// A temporary file renamed into place: the usual atomic write.
    Rename,
    /// `std::fs::write`, as the raw loop does: not atomic.
    Plain,
}

struct WriteCosts {
    saves: Duration,
    kiln: Duration,
    rename: Duration,
    plain: Duration,
}

/// A no-op `kiln build` in a new process against a no-op `make` over the same outputs and
/// inputs, alternating: a Makefile with one rule per output (prerequisites: the shader's
/// source, every include, the manifest), as a generated build system would have. Both find
/// everything up to date; `None` when `make` is missing.
fn make_noop(
    project: &Generated,
    out: &Path,
    cache: &Path,
    binary: &Path,
    reps: usize,
    scratch: &Path,
) -> Result<Option<(Stats, Stats)>, String> {
    let make = Path::new("/usr/bin/make");
    if !make.is_file() {
        return Ok(None);
    }
    let mut includes: Vec<PathBuf> = std::fs::read_dir(project.root.join(project::INCLUDE_DIR))
        .map_err(|e| e.to_string())?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    includes.sort();
    let includes: Vec<String> = includes.iter().map(|p| p.display().to_string()).collect();
    let sources: std::collections::HashMap<&str, PathBuf> = project
        .variants
        .iter()
        .map(|v| (v.shader.as_str(), project.root.join(&v.source)))
        .collect();
    let index = Index::read(out);
    let mut makefile = String::from("all:");
    for entry in &index.entries {
        makefile.push_str(&format!(" {}", out.join(&*entry.path).display()));
    }
    makefile.push('\n');
    for entry in &index.entries {
        let source = sources
            .get(&*entry.variant.shader)
            .ok_or("an index entry of an unknown shader")?;
        makefile.push_str(&format!(
            "{}: {} {} {}\n\t{} build --manifest {}\n",
            out.join(&*entry.path).display(),
            source.display(),
            includes.join(" "),
            project.manifest.display(),
            binary.display(),
            project.manifest.display(),
        ));
    }
    let makefile_path = scratch.join("Makefile");
    std::fs::write(&makefile_path, makefile).map_err(|e| e.to_string())?;
    let (mut kiln_times, mut make_times) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        kiln_times.push(spawn_build(binary, &project.manifest, out, cache)?.0);
        let started = Instant::now();
        let ran = Command::new(make)
            .arg("-rR")
            .arg("-f")
            .arg(&makefile_path)
            .output()
            .map_err(|e| e.to_string())?;
        make_times.push(started.elapsed());
        let said = String::from_utf8_lossy(&ran.stdout);
        if !ran.status.success() || !said.contains("Nothing to be done") {
            return Err(format!("make was not a no-op: {said}"));
        }
    }
    Ok(Some((Stats::of(&kiln_times), Stats::of(&make_times))))
}

/// One `kiln build` in this process: open, build, drop (a process would exit there).
fn kiln_build(
    manifest: &Path,
    out: &Path,
    cache: &Path,
    jobs: usize,
) -> Result<(Duration, BuildReport), String> {
    let started = Instant::now();
    let mut project = Project::open(&BuildOptions {
        manifest: manifest.to_owned(),
        out_dir: Some(out.to_owned()),
        cache_dir: Some(cache.to_owned()),
        jobs: Some(jobs),
        max_memory: None,
        keep_failed_outputs: false,
        ..BuildOptions::default()
    })
    .map_err(|e| e.to_string())?;
    let report = project.build(&|_| {}).map_err(|e| e.to_string())?;
    drop(project);
    Ok((started.elapsed(), report))
}

/// `kiln build --json` in a new process: its wall time and the elapsed time it reports.
fn spawn_build(
    binary: &Path,
    manifest: &Path,
    out: &Path,
    cache: &Path,
) -> Result<(Duration, Duration), String> {
    let started = Instant::now();
    let output = Command::new(binary)
        .arg("build")
        .arg("--manifest")
        .arg(manifest)
        .arg("--out")
        .arg(out)
        .arg("--cache-dir")
        .arg(cache)
        .args(["--jobs", "1", "--json"])
        .output()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    let wall = started.elapsed();
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).map_err(|e| {
        format!(
            "{} printed no JSON ({e}): {}",
            binary.display(),
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    let compiled = json["compiled"].as_u64().unwrap_or(u64::MAX);
    if !output.status.success() || compiled != 0 {
        return Err(format!(
            "warm `kiln build` in a new process compiled {compiled} (stale binary?): {json}"
        ));
    }
    let reported = json["elapsed_ms"].as_f64().unwrap_or(0.0) / 1000.0;
    Ok((wall, Duration::from_secs_f64(reported)))
}

fn check_cold(report: &BuildReport, variants: usize, distinct: usize) -> Result<(), String> {
    if report.failed > 0 {
        let first: Vec<String> = report
            .diagnostics
            .iter()
            .take(3)
            .map(|d| format!("{d:?}"))
            .collect();
        return Err(format!(
            "{} variants failed: {}",
            report.failed,
            first.join("\n")
        ));
    }
    if report.variants != variants || report.compiled != distinct || report.cached != 0 {
        return Err(format!(
            "cold build: variants={} compiled={} cached={} deduplicated={}, expected {variants} \
             variants, {distinct} compiled",
            report.variants, report.compiled, report.cached, report.deduplicated
        ));
    }
    Ok(())
}

fn check_warm(report: &BuildReport, variants: usize) -> Result<(), String> {
    if report.variants != variants
        || report.compiled != 0
        || report.failed != 0
        || report.outputs_written != 0
    {
        return Err(format!(
            "warm build: variants={} compiled={} failed={} outputs_written={}, expected \
             {variants} variants and no work",
            report.variants, report.compiled, report.failed, report.outputs_written
        ));
    }
    Ok(())
}

/// What creating (and writing 4 KiB to) one new file costs in `dir`, the median of 500: on
/// these VMs' ext4 it varies from ~30 us to ~800 us of kernel time, and dominates both the raw
/// loop and kiln there.
fn file_create_cost(dir: &Path) -> Result<Duration, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let bytes = vec![7u8; 4096];
    let mut times = Vec::with_capacity(500);
    for i in 0..500 {
        let started = Instant::now();
        std::fs::write(dir.join(format!("f{i}")), &bytes).map_err(|e| e.to_string())?;
        times.push(started.elapsed());
    }
    Ok(Stats::of(&times).median)
}

/// Removes a finished rep's directory (outside the timings).
fn remove(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}
