//! Benchmark of `kiln watch`'s rebuilds, through the library API the command uses: one
//! long-lived [`Project`] over a generated project (10 WGSL shaders x 100 keyword sets x 2
//! passes = 2,000 variants; targets spirv, msl and hlsl), edited on disk, refreshed and
//! rebuilt, after an untimed cold build.
//!
//! Printed, each over several reps as the median and the minimum:
//! - `watch edit_overhead ratio=<kiln / raw>` (target <= 1.10). kiln: from writing a shared
//!   include (a constant inside its `#ifdef TONE_2` block gets a new value every rep, so every
//!   rep truly recompiles and never hits the store) through `refresh_files` to `build`
//!   returning (outputs written and new artifacts saved to the store), with `jobs = 1`. raw: a plain
//!   single-threaded loop doing exactly the work of the variants kiln reported as recompiled:
//!   kiln's preprocessor over the disk, naga's parse, validate and emit for every target, and
//!   a write of each output file. The two alternate rep by rep (these VMs have slow phases).
//!   Where the time went: `watch edit_split` (CPU, kernel, blocked and run-queue time of both
//!   sides, from `/proc/self/task`), `watch edit_detail` (what the engine re-executed),
//!   `watch edit_cost` and `watch edit_io` (steps timed alone: preprocessing the unaffected
//!   variants, which kiln skips since their files' views are unchanged, the index, and
//!   disk-write patterns kiln avoids: kiln swaps a changed output with a spare file it
//!   overwrites in place). `watch edit_jobs2` is the
//!   same edit with `jobs = 2`. `KILN_BENCH_VERBOSE=1` prints every rep.
//! - `watch noop_event us=<n>` (target < 5,000): a source rewritten with identical bytes,
//!   `refresh_files`, and `build` only if the project is dirty.
//! - `watch comment_edit us=<n>`: a comment edited in an include every variant reads: every
//!   variant's text is re-derived and found equal, nothing recompiles (deep verification and
//!   early cutoff at the scale of the whole project).
//!
//! Every rep checks what kiln did (exactly the `TONE_2` variants recompiled, nothing for the
//! no-op and the comment), so a figure never comes from a build that did the wrong work.
//! Without `--bench` (as under `cargo test --benches`) it runs once on a small project.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln::compile::{self, TargetConfig};
use kiln::pipeline::{output_path, BuildOptions, BuildReport, Index, Project, VariantId};

#[path = "common/project.rs"]
mod project;
#[path = "common/stats.rs"]
mod stats;

use project::{Generated, Scale, Variant, INCLUDE_DIR, PASSES};
use stats::{median_by_key, ms, ratio, Stats};

const TARGETS: [&str; 3] = ["spirv", "msl", "hlsl"];

/// The keyword whose `#ifdef` block the edit changes.
const EDITED_KEYWORD: &str = "TONE_2";

/// How big a project to generate and how many reps to time.
#[derive(Clone, Copy)]
struct Settings {
    /// `tones` is 3 to 5, so that `TONE_2` exists and has an operator each.
    scale: Scale,
    edit_reps: usize,
    jobs2_reps: usize,
    event_reps: usize,
}

const FULL: Settings = Settings {
    scale: Scale::BENCH,
    edit_reps: 7,
    jobs2_reps: 5,
    event_reps: 21,
};
const SMOKE: Settings = Settings {
    scale: Scale {
        shaders: 2,
        lights: 2,
        tones: 3,
    },
    edit_reps: 1,
    jobs2_reps: 1,
    event_reps: 1,
};

fn main() -> ExitCode {
    let full = std::env::args().any(|arg| arg == "--bench");
    match run(if full { FULL } else { SMOKE }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("watch bench failed: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Where one timed span's wall time went, for this process's live threads (Linux
/// `/proc/self/task/*/{schedstat,stat}`; zeros elsewhere): on a CPU, of which in the kernel
/// (file system calls), waiting for a CPU other processes held, and the rest, blocked
/// (mostly on the disk).
#[derive(Clone, Copy, Default)]
struct Span {
    wall: Duration,
    on_cpu: Duration,
    kernel: Duration,
    runqueue: Duration,
}

impl Span {
    fn blocked(&self) -> Duration {
        self.wall.saturating_sub(self.on_cpu + self.runqueue)
    }
}

/// This process's threads' summed time on a CPU, in the kernel (10 ms ticks), and waiting
/// on the run queue.
#[derive(Clone, Copy, Default)]
struct SchedulerTimes {
    on_cpu: Duration,
    kernel: Duration,
    runqueue: Duration,
}

fn scheduler_times() -> SchedulerTimes {
    let mut on_cpu = 0u64;
    let mut runqueue = 0u64;
    let mut kernel_ticks = 0u64;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) {
                let mut fields = text
                    .split_whitespace()
                    .map(|f| f.parse::<u64>().unwrap_or(0));
                on_cpu += fields.next().unwrap_or(0);
                runqueue += fields.next().unwrap_or(0);
            }
            if let Ok(text) = std::fs::read_to_string(task.path().join("stat")) {
                // Fields after the parenthesized name: state is the first, stime the 13th.
                let after_name = text.rsplit_once(')').map_or("", |(_, rest)| rest);
                kernel_ticks += after_name
                    .split_whitespace()
                    .nth(12)
                    .and_then(|f| f.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    SchedulerTimes {
        on_cpu: Duration::from_nanos(on_cpu),
        // USER_HZ is 100 on every Linux architecture kiln builds for.
        kernel: Duration::from_millis(kernel_ticks * 10),
        runqueue: Duration::from_nanos(runqueue),
    }
}

/// Runs `f`, and says where its wall time went.
fn timed<T>(f: impl FnOnce() -> T) -> (Span, T) {
    let before = scheduler_times();
    let started = Instant::now();
    let value = f();
    let wall = started.elapsed();
    let after = scheduler_times();
    let span = Span {
        wall,
        on_cpu: after.on_cpu.saturating_sub(before.on_cpu),
        kernel: after.kernel.saturating_sub(before.kernel),
        runqueue: after.runqueue.saturating_sub(before.runqueue),
    };
    (span, value)
}

/// `KILN_BENCH_VERBOSE=1` prints every rep's figures to stderr.
fn verbose() -> bool {
    std::env::var_os("KILN_BENCH_VERBOSE").is_some()
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The generated project (its includes with the edit points), its variants keyed as kiln's
/// reports name them.
struct WatchProject {
    generated: Generated,
    variants: HashMap<VariantId, Variant>,
    /// The variants whose keyword set holds [`EDITED_KEYWORD`].
    edited: Vec<VariantId>,
    tones: usize,
}

impl WatchProject {
    fn generate(root: &Path, scale: Scale) -> std::io::Result<WatchProject> {
        let targets: Vec<String> = TARGETS.iter().map(|t| t.to_string()).collect();
        let options = project::Options {
            bench: "watch",
            targets: &targets,
            edit_points: true,
        };
        let generated = project::generate(root, scale, &options)?;
        let mut variants = HashMap::new();
        let mut edited = Vec::new();
        for variant in &generated.variants {
            let id = VariantId {
                shader: Arc::from(variant.shader.as_str()),
                pass: Arc::from(variant.pass),
                keywords: variant
                    .keywords
                    .iter()
                    .map(|k| Arc::from(k.as_str()))
                    .collect(),
            };
            if variant.keywords.iter().any(|k| k == EDITED_KEYWORD) {
                edited.push(id.clone());
            }
            variants.insert(id, variant.clone());
        }
        Ok(WatchProject {
            generated,
            variants,
            edited,
            tones: scale.tones,
        })
    }

    fn tonemap_path(&self) -> PathBuf {
        self.generated.root.join(INCLUDE_DIR).join("tonemap.wgsl")
    }

    fn common_path(&self) -> PathBuf {
        self.generated.root.join(INCLUDE_DIR).join("common.wgsl")
    }
}

fn run(settings: Settings) -> Result<(), String> {
    let scale = settings.scale;
    let targets: Vec<TargetConfig> = TARGETS
        .iter()
        .map(|name| TargetConfig::parse(name, &Default::default()).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let temp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let project =
        WatchProject::generate(&temp.path().join("project"), scale).map_err(|e| e.to_string())?;
    let total = project.variants.len();
    let out = temp.path().join("out");
    let cache = temp.path().join("cache");
    let raw_out = temp.path().join("raw-out");
    println!(
        "watch project shaders={} keyword_sets={} passes={} variants={total} targets={} \
         edited_keyword={EDITED_KEYWORD} edited_variants={}",
        scale.shaders,
        scale.keyword_sets(),
        PASSES.len(),
        TARGETS.join(","),
        project.edited.len(),
    );

    let mut kiln = open(&project, &out, &cache, 1)?;
    let cold = kiln.build(&|_| {}).map_err(|e| e.to_string())?;
    check(
        &cold,
        total,
        |r| r.compiled == total,
        "cold build compiles every variant",
    )?;
    println!(
        "watch cold_build ms={:.1} compiled={} (untimed setup, jobs=1)",
        ms(cold.elapsed),
        cold.compiled
    );
    // The raw loop's output directories exist before it is timed, as kiln's do.
    raw_loop(&project, &project.edited, &raw_out, &targets)?;

    // Edits: kiln then raw, alternating, each rep a new constant.
    let mut rep_value = 0;
    let mut kiln_spans = Vec::new();
    let mut raw_spans = Vec::new();
    let mut refresh_times = Vec::new();
    let mut reports = Vec::new();
    for _ in 0..settings.edit_reps {
        rep_value += 1;
        let (kiln_span, refresh, report) = edit_tonemap(&mut kiln, &project, rep_value)?;
        let affected: Vec<VariantId> = report
            .recompiled
            .iter()
            .map(|r| r.variant.clone())
            .collect();
        let (raw_span, raw) = timed(|| raw_loop(&project, &affected, &raw_out, &targets));
        raw?;
        if verbose() {
            eprintln!(
                "watch rep kiln_ms={:.1} (cpu {:.1}, kernel {:.0}, blocked {:.1}) raw_ms={:.1} \
                 (cpu {:.1}, kernel {:.0}, blocked {:.1})",
                ms(kiln_span.wall),
                ms(kiln_span.on_cpu),
                ms(kiln_span.kernel),
                ms(kiln_span.blocked()),
                ms(raw_span.wall),
                ms(raw_span.on_cpu),
                ms(raw_span.kernel),
                ms(raw_span.blocked()),
            );
        }
        kiln_spans.push(kiln_span);
        raw_spans.push(raw_span);
        refresh_times.push(refresh);
        reports.push(report);
    }
    let field = |spans: &[Span], f: fn(&Span) -> Duration| -> Stats {
        Stats::of(&spans.iter().map(f).collect::<Vec<_>>())
    };
    let kiln_edit = field(&kiln_spans, |s| s.wall);
    let raw = field(&raw_spans, |s| s.wall);
    let affected = reports.last().map_or(0, |r| r.recompiled.len());
    println!(
        "watch edit_overhead ratio={:.3} min_ratio={:.3} kiln_ms={:.2} kiln_min_ms={:.2} \
         raw_ms={:.2} raw_min_ms={:.2} affected={affected} total={total} reps={} (jobs=1)",
        ratio(kiln_edit.median, raw.median),
        ratio(kiln_edit.min, raw.min),
        ms(kiln_edit.median),
        ms(kiln_edit.min),
        ms(raw.median),
        ms(raw.min),
        settings.edit_reps,
    );
    let (kiln_cpu, raw_cpu) = (
        field(&kiln_spans, |s| s.on_cpu),
        field(&raw_spans, |s| s.on_cpu),
    );
    let (kiln_blocked, raw_blocked) = (
        field(&kiln_spans, |s| s.blocked()),
        field(&raw_spans, |s| s.blocked()),
    );
    let (kiln_queue, raw_queue) = (
        field(&kiln_spans, |s| s.runqueue),
        field(&raw_spans, |s| s.runqueue),
    );
    let (kiln_kernel, raw_kernel) = (
        field(&kiln_spans, |s| s.kernel),
        field(&raw_spans, |s| s.kernel),
    );
    println!(
        "watch edit_split cpu_ratio={:.3} min_cpu_ratio={:.3} kiln_cpu_ms={:.2} raw_cpu_ms={:.2} \
         kiln_kernel_ms={:.0} raw_kernel_ms={:.0} kiln_blocked_ms={:.2} raw_blocked_ms={:.2} \
         kiln_runqueue_ms={:.2} raw_runqueue_ms={:.2} (medians; on a CPU, of which in the \
         kernel / blocked, mostly on the disk / waiting for a CPU other processes held)",
        ratio(kiln_cpu.median, raw_cpu.median),
        ratio(kiln_cpu.min, raw_cpu.min),
        ms(kiln_cpu.median),
        ms(raw_cpu.median),
        ms(kiln_kernel.median),
        ms(raw_kernel.median),
        ms(kiln_blocked.median),
        ms(raw_blocked.median),
        ms(kiln_queue.median),
        ms(raw_queue.median),
    );
    let build_times: Vec<Duration> = reports.iter().map(|r| r.elapsed).collect();
    let counts = |f: fn(&BuildReport) -> usize| -> usize {
        median_by_key(&reports.iter().map(f).collect::<Vec<_>>(), |n| *n)
    };
    println!(
        "watch edit_detail write_refresh_us={:.0} outputs_ready_ms={:.2} build_ms={:.2} \
         artifacts_reexecuted={} \
         recompiled={} cached={} early_cutoff={} verified={} outputs_written={} \
         (medians; the timed edit ends at build_ms, which includes saving new artifacts to \
         the store after the outputs; artifacts_reexecuted = variants whose artifacts query ran)",
        us(Stats::of(&refresh_times).median),
        ms(Stats::of(&reports.iter().map(|r| r.outputs_ready).collect::<Vec<_>>()).median),
        ms(Stats::of(&build_times).median),
        counts(|r| r.outcomes.len()),
        counts(|r| r.compiled),
        counts(|r| r.cached),
        counts(|r| r.early_cutoff),
        counts(|r| r.verified),
        counts(|r| r.outputs_written),
    );

    // Where the rest goes, each part timed alone and single-threaded: re-preprocessing the
    // variants the edit did not affect (which kiln skips), writing the index, and write
    // patterns (raw: a plain overwrite; the others for comparison).
    let unaffected: Vec<VariantId> = project
        .variants
        .keys()
        .filter(|v| !v.keywords.iter().any(|k| &**k == EDITED_KEYWORD))
        .cloned()
        .collect();
    let (unaffected_preprocess, done) = timed(|| preprocess_only(&project, &unaffected));
    done?;
    let index = Index::read(&out);
    let index_dir = temp.path().join("index-probe");
    std::fs::create_dir_all(&index_dir).map_err(|e| e.to_string())?;
    let (index_write, done) = timed(|| index.write(&index_dir));
    done.map_err(|e| e.to_string())?;
    println!(
        "watch edit_cost preprocess_unaffected_ms={:.2} (cpu {:.2}; plain loop over the {} \
         variants the edit did not affect: what kiln skips when their file views are unchanged, \
         edit_detail early_cutoff=0) index_write_ms={:.2} (cpu {:.2}; {} entries)",
        ms(unaffected_preprocess.wall),
        ms(unaffected_preprocess.on_cpu),
        unaffected.len(),
        ms(index_write.wall),
        ms(index_write.on_cpu),
        index.entries.len(),
    );
    let probe = io_probe(&project, &raw_out, &temp.path().join("io-probe"), &targets)?;
    println!(
        "watch edit_io files={} plain_overwrite_ms={:.1} (kernel {:.0}) \
         atomic_replace_ms={:.1} (kernel {:.0}) atomic_new_ms={:.1} (kernel {:.0}) \
         (medians of {} reps, one thread; the raw loop does the first; atomic_replace is a \
         temporary file renamed over the output, kiln's way only where it cannot swap a spare \
         file (pipeline/recycle.rs); atomic_new is a new file per output, what a store of one \
         file per entry would do)",
        probe.files,
        ms(probe.plain.wall),
        ms(probe.plain.kernel),
        ms(probe.replace.wall),
        ms(probe.replace.kernel),
        ms(probe.new.wall),
        ms(probe.new.kernel),
        IO_PROBE_REPS,
    );

    // A file touched without a change.
    let mut noop_times = Vec::new();
    let mut noop_builds = 0;
    for _ in 0..settings.event_reps {
        let path = project.tonemap_path();
        let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
        let started = Instant::now();
        std::fs::write(&path, &bytes).map_err(|e| e.to_string())?;
        let changed = kiln.refresh_files(std::slice::from_ref(&path));
        if kiln.is_dirty() {
            let report = kiln.build(&|_| {}).map_err(|e| e.to_string())?;
            check(
                &report,
                total,
                |r| r.compiled == 0,
                "no-op compiles nothing",
            )?;
            noop_builds += 1;
        }
        noop_times.push(started.elapsed());
        if !changed.is_empty() {
            return Err(format!(
                "rewriting identical bytes reported changes: {changed:?}"
            ));
        }
    }
    let noop = Stats::of(&noop_times);
    println!(
        "watch noop_event us={:.0} min_us={:.0} builds={noop_builds} reps={}",
        us(noop.median),
        us(noop.min),
        settings.event_reps,
    );

    // A comment edited in an include every variant reads.
    let mut comment_times = Vec::new();
    let mut comment_reports = Vec::new();
    for rep in 0..settings.event_reps {
        let path = project.common_path();
        let (span, result) = timed(|| {
            std::fs::write(&path, project::common(Some(rep + 1))).map_err(|e| e.to_string())?;
            let changed = kiln.refresh_files(std::slice::from_ref(&path));
            let report = kiln.build(&|_| {}).map_err(|e| e.to_string())?;
            Ok::<_, String>((changed, report))
        });
        let (changed, report) = result?;
        comment_times.push(span);
        if changed.len() != 1 {
            return Err(format!("a comment edit changed {changed:?}"));
        }
        check(
            &report,
            total,
            |r| r.compiled == 0,
            "a comment edit compiles nothing",
        )?;
        comment_reports.push(report);
    }
    let comment = field(&comment_times, |s| s.wall);
    let comment_cpu = field(&comment_times, |s| s.on_cpu);
    let comment_counts = |f: fn(&BuildReport) -> usize| -> usize {
        median_by_key(&comment_reports.iter().map(f).collect::<Vec<_>>(), |n| *n)
    };
    println!(
        "watch comment_edit us={:.0} min_us={:.0} cpu_us={:.0} kernel_us={:.0} artifacts_reexecuted={} \
         early_cutoff={} verified={} outputs_written={} reps={}",
        us(comment.median),
        us(comment.min),
        us(comment_cpu.median),
        us(field(&comment_times, |s| s.kernel).median),
        comment_counts(|r| r.outcomes.len()),
        comment_counts(|r| r.early_cutoff),
        comment_counts(|r| r.verified),
        comment_counts(|r| r.outputs_written),
        settings.event_reps,
    );
    drop(kiln);

    // The same edit with two workers: a new watch over the same store and outputs.
    let mut kiln = open(&project, &out, &cache, 2)?;
    let warm = kiln.build(&|_| {}).map_err(|e| e.to_string())?;
    check(&warm, total, |r| r.compiled == 0, "a new watch starts warm")?;
    let mut jobs2_times = Vec::new();
    for _ in 0..settings.jobs2_reps {
        rep_value += 1;
        let (span, _, _) = edit_tonemap(&mut kiln, &project, rep_value)?;
        jobs2_times.push(span.wall);
    }
    let jobs2 = Stats::of(&jobs2_times);
    println!(
        "watch edit_jobs2 kiln_ms={:.2} kiln_min_ms={:.2} speedup_vs_jobs1={:.2} \
         ratio_vs_raw_1thread={:.3} reps={}",
        ms(jobs2.median),
        ms(jobs2.min),
        ratio(kiln_edit.median, jobs2.median),
        ratio(jobs2.median, raw.median),
        settings.jobs2_reps,
    );
    Ok(())
}

fn open(project: &WatchProject, out: &Path, cache: &Path, jobs: usize) -> Result<Project, String> {
    Project::open(&BuildOptions {
        manifest: project.generated.manifest.clone(),
        out_dir: Some(out.to_owned()),
        cache_dir: Some(cache.to_owned()),
        jobs: Some(jobs),
        max_memory: None,
        keep_failed_outputs: false,
        ..BuildOptions::default()
    })
    .map_err(|e| e.to_string())
}

/// Gives the constant in tonemap's `#ifdef TONE_2` block the value of `rep` and rebuilds;
/// returns the span from the write to `build` returning, the time of the write and
/// refresh alone, and the report, checked to have recompiled exactly the `TONE_2` variants.
fn edit_tonemap(
    kiln: &mut Project,
    project: &WatchProject,
    rep: usize,
) -> Result<(Span, Duration, BuildReport), String> {
    let path = project.tonemap_path();
    let text = project::tonemap(project.tones, Some(rep));
    let (span, result) = timed(|| {
        let started = Instant::now();
        std::fs::write(&path, text).map_err(|e| e.to_string())?;
        let changed = kiln.refresh_files(std::slice::from_ref(&path));
        let refreshed = started.elapsed();
        let report = kiln.build(&|_| {}).map_err(|e| e.to_string())?;
        Ok::<_, String>((changed, refreshed, report))
    });
    let (changed, refreshed, report) = result?;
    if changed.len() != 1 {
        return Err(format!("the tonemap edit changed {changed:?}"));
    }
    let mut recompiled: Vec<&VariantId> = report.recompiled.iter().map(|r| &r.variant).collect();
    recompiled.sort();
    let mut expected: Vec<&VariantId> = project.edited.iter().collect();
    expected.sort();
    if recompiled != expected {
        return Err(format!(
            "the {EDITED_KEYWORD} edit recompiled {} variants, expected the {} {EDITED_KEYWORD} \
             variants",
            recompiled.len(),
            expected.len()
        ));
    }
    check(
        &report,
        project.variants.len(),
        |r| r.outputs_written == r.compiled * TARGETS.len(),
        "every recompiled variant's outputs are rewritten, nothing else",
    )?;
    // The span ends when `build` returns: new artifacts reach the store after the outputs
    // are written, still inside `build`, and they are part of the edit's cost.
    Ok((span, refreshed, report))
}

const IO_PROBE_REPS: usize = 3;

/// The disk writes of one edit, each pattern timed alone over the edited variants' outputs.
struct IoProbe {
    files: usize,
    plain: Span,
    replace: Span,
    new: Span,
}

/// Writes the raw loop's outputs of the edited variants again, three ways, rotating:
/// overwritten in place (the raw loop), atomically replaced through a temporary file and a
/// rename (kiln's fallback where it cannot swap spare files), and as new files through a
/// temporary file and a rename (a store of one file per entry).
fn io_probe(
    project: &WatchProject,
    raw_out: &Path,
    scratch: &Path,
    targets: &[TargetConfig],
) -> Result<IoProbe, String> {
    use std::io::Write as _;
    let mut files = Vec::new();
    for id in &project.edited {
        let variant = project.variants.get(id).ok_or("unknown variant")?;
        for target in targets {
            let path = raw_out.join(output_path(
                &id.shader,
                &id.pass,
                &variant.keywords,
                target.target().extension(),
            ));
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            files.push((path, bytes));
        }
    }
    let atomic = |dir: &Path, to: &Path, bytes: &[u8]| -> std::io::Result<()> {
        let mut temp = tempfile::NamedTempFile::new_in(dir)?;
        temp.write_all(bytes)?;
        temp.persist(to).map_err(|e| e.error)?;
        Ok(())
    };
    let mut spans: [Vec<Span>; 3] = Default::default();
    for rep in 0..IO_PROBE_REPS {
        for turn in 0..3 {
            let pattern = (rep + turn) % 3;
            let fresh = scratch.join(format!("rep{rep}"));
            std::fs::create_dir_all(&fresh).map_err(|e| e.to_string())?;
            let (span, result) = timed(|| -> std::io::Result<()> {
                for (n, (path, bytes)) in files.iter().enumerate() {
                    let dir = path.parent().unwrap_or(raw_out);
                    match pattern {
                        0 => std::fs::write(path, bytes)?,
                        1 => atomic(dir, path, bytes)?,
                        _ => atomic(&fresh, &fresh.join(format!("{n}")), bytes)?,
                    }
                }
                Ok(())
            });
            result.map_err(|e| e.to_string())?;
            spans[pattern].push(span);
        }
    }
    let median = |spans: &[Span]| median_by_key(spans, |s| s.wall);
    Ok(IoProbe {
        files: files.len(),
        plain: median(&spans[0]),
        replace: median(&spans[1]),
        new: median(&spans[2]),
    })
}

fn check(
    report: &BuildReport,
    total: usize,
    expect: impl Fn(&BuildReport) -> bool,
    what: &str,
) -> Result<(), String> {
    if report.failed == 0 && report.variants == total && expect(report) {
        return Ok(());
    }
    let first: Vec<String> = report
        .diagnostics
        .iter()
        .take(3)
        .map(|d| format!("{d:?}"))
        .collect();
    Err(format!(
        "expected: {what}; got variants={} compiled={} cached={} failed={} outputs_written={}\n{}",
        report.variants,
        report.compiled,
        report.cached,
        report.failed,
        report.outputs_written,
        first.join("\n")
    ))
}

/// What a Makefile rule per variant does for `variants`, in one thread: preprocess, parse,
/// validate, emit every target, write every output.
fn raw_loop(
    project: &WatchProject,
    variants: &[VariantId],
    out: &Path,
    targets: &[TargetConfig],
) -> Result<(), String> {
    let loader = project::PlainLoader::new(&project.generated.root);
    for id in variants {
        let variant = project
            .variants
            .get(id)
            .ok_or_else(|| format!("kiln built {id}, which the project does not have"))?;
        let language = project.generated.language;
        let text = variant.preprocess(language, &loader)?;
        let module = compile::parse_and_validate(
            language,
            &text,
            variant.stage,
            variant.entry,
            compile::common_capabilities(targets),
        )
        .map_err(|e| format!("{id}: {e}"))?;
        for target in targets {
            let bytes = compile::emit(&module, target).map_err(|e| format!("{id}: {e}"))?;
            let path = out.join(output_path(
                &id.shader,
                &id.pass,
                &variant.keywords,
                target.target().extension(),
            ));
            if let Err(e) = std::fs::write(&path, &bytes) {
                let dir = path.parent().ok_or("output path without a parent")?;
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(format!("{}: {e}", path.display()));
                }
                std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
                std::fs::write(&path, &bytes).map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(())
}

/// Preprocesses `variants` only, in one thread.
fn preprocess_only(project: &WatchProject, variants: &[VariantId]) -> Result<(), String> {
    let loader = project::PlainLoader::new(&project.generated.root);
    for id in variants {
        let variant = project.variants.get(id).ok_or("unknown variant")?;
        variant.preprocess(project.generated.language, &loader)?;
    }
    Ok(())
}
