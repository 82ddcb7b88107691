//! Differential fuzzing of "never stale" (issue 8): random valid projects, random edit
//! sequences, and after every step kiln's incremental results compared byte for byte with a
//! clean build.
//!
//! Two modes run over two copies of the same project, every edit applied to both:
//! - build mode: `kiln build --json` in a new process after each step (`A/out`, `A/.kiln`);
//! - watch mode: one `kiln watch --json --report-batches --out OUT_B` per sequence, its
//!   output directory outside the project root (`OUT_B`); after each edit the harness writes
//!   a marker `B/.sync/N` and waits for the batch naming it. `KILN_FUZZ_WATCH_OUT=inside`
//!   puts it at `B/wout` instead, `outside` always outside; by default sequences with an even
//!   seed use `B/wout` (kiln then sees its own writes and removals there: spurious rebuilds).
//!
//! - serve mode: one `kiln serve --json --report-batches` per sequence on B, with its own
//!   store and no outputs, synchronised the same way; after each step every (variant,
//!   target) of the clean build is fetched and compared (bytes, or `422` for a failed pair),
//!   and its events checked (`differential/server.rs`). `KILN_FUZZ_SERVE=0` leaves it out.
//!
//! The oracle is `kiln build --out FRESH --cache-dir FRESH_CACHE` into new, empty directories.
//!
//! With glslang built in (the default feature `glslang`), about half the GLSL shaders compile their
//! GLSL passes with glslang (and reach MSL, HLSL, GLSL and WGSL through `compile::cross`),
//! the rest with naga; the summary says how many steps had one.
//!
//! With the Slang compiler library (`kiln::compile::slang::version()` succeeds: `pip install
//! slangpy`, or `KILN_SLANG_LIBRARY`), 60% of the shaders not drawn GLSL are Slang (about 45%
//! of first shaders, 33% of later ones; drawn only then, so that a seed replays as before
//! without the library, and GLSL as often as before). A Slang source
//! (`shaders/sN.slang`, `shaders/sN_alt.slang`; entries `fragMain`, `vertMain`, `compMain`)
//! imports `common_k`, maybe `detail_k`, and maybe `fog_k` under `#ifdef FOG`; it uses their
//! functions, its own constants and the keywords as the other languages do. The modules
//! (`model::SLANG_MODULES`) live in directories of `model::SLANG_DIRS`, spelled as imported or
//! with `-` for `_` (`mods/common-k.slang`); every Slang shader lists the model's
//! `include_dirs` (2 to 4 of those directories, in an order that the edits change). Slang
//! searches the importing file's directory (`shaders`) first, then `include_dirs` in order,
//! the written spelling before the hyphenated one; `Model::slang_resolve` follows that to
//! place shadows and to know when an import finds nothing (then failures are expected, and
//! the next step, `fix`, adds the module's directory to `include_dirs`). The `slang_*` edit
//! kinds change modules, shadows, directories and imports; the general ones (constants,
//! comments, whitespace, errors, passes, directories moved out, touch, revert) reach Slang
//! files too. Slang compiles a variant from its files as they are, not from a preprocessed
//! text, so a comment or a constant under `#ifdef FOG` in a Slang file recompiles every
//! variant reading it: such a step is not held to the "compiles nothing" or "FOG variants
//! only" counts (`Sequence::slang_touched`). Slang passes go through all the project's
//! targets. The summary says how many steps had a Slang shader.
//!
//! Running it:
//! - default (CI): 3 sequences x 25 steps, seeds 1..3;
//! - `KILN_FUZZ_SEED=123`: one sequence with that seed (re-running a failure);
//! - `KILN_FUZZ_STEPS=N`: N steps per mode in all; without `KILN_FUZZ_SEQUENCES`, split into
//!   sequences of 25 steps (with `KILN_FUZZ_SEED` alone: one sequence of N steps);
//! - `KILN_FUZZ_SEQUENCES=S`: S sequences (seeds SEED..SEED+S-1);
//! - `KILN_FUZZ_ONLY=kind,...`: only these edit kinds (see `KINDS`);
//! - `KILN_FUZZ_KEEP_GOING=1`: on a discrepancy, report it and go on with the next sequence
//!   (the test still fails at the end);
//! - `KILN_FUZZ_VERBOSE=1`: one line per step;
//! - `KILN_FUZZ_ALLOW_KEPT_FAILED=1`: accept the old contract (a variant that fails keeps its
//!   last good outputs, unmarked, in both modes), to look for other bugs before the new one
//!   lands.
//!
//! `cargo test -p kiln-cli --test differential -- --nocapture` shows the report.

#[path = "differential/model.rs"]
mod model;
#[path = "differential/rng.rs"]
mod rng;
#[path = "differential/server.rs"]
mod server;
#[path = "differential/tree.rs"]
mod tree;
#[path = "differential/watcher.rs"]
mod watcher;

use model::Model;
use rng::Rng;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tree::Tree;
use watcher::Watch;

/// Edit kinds and their weights. `dir_back` and `fix` are not drawn: they follow `dir_out`
/// and `error` in the next step (also under `KILN_FUZZ_ONLY`).
const KINDS: &[(&str, u32)] = &[
    // A constant outside `#ifdef FOG` (sources, includes, nested includes).
    ("const", 10),
    // A constant under `#ifdef FOG` only: only FOG variants may be recompiled.
    ("const_fog", 6),
    // A `//` or `/* */` comment added or removed, or an inline comment's text: nothing may
    // be compiled.
    ("comment", 8),
    // Blank lines or trailing whitespace: nothing may be compiled.
    ("whitespace", 4),
    // The extra include created or deleted, included by common or not, directly or not.
    ("include_toggle", 4),
    ("include_rename", 3),
    // An include moved to another directory.
    ("include_move", 3),
    // A directory moved out of the project and back within one step.
    ("dir_out_back", 2),
    // A directory moved out; the next step (`dir_back`) moves it back, usually after an
    // edit of a file in it.
    ("dir_out", 2),
    // An axis added, removed, replaced, or axes or keywords reordered.
    ("axes", 5),
    ("shader_add", 2),
    ("shader_remove", 2),
    // A WGSL fragment pass switched between its two fragment entries.
    ("pass_entry", 3),
    // A pass switched to another stage (entry, or GLSL file).
    ("pass_stage", 3),
    // A pass pointed at another source file.
    ("pass_source", 3),
    // The sources of two passes swapped (usually of one shader).
    ("pass_swap", 3),
    ("targets", 3),
    // A shader's `defines = { Q = .. }` changed; code depends on `Q > 1`.
    ("defines", 4),
    // A syntax error, `#error` under `#ifdef FOG`, or (GLSL) a call MSL and HLSL cannot
    // write under `#ifdef FOG`, injected; fixed in the next step (`fix`).
    ("error", 3),
    // An output deleted, one byte flipped (same size), or edited (size changed), behind
    // kiln's back in each mode's own output directory.
    ("output_delete", 3),
    ("output_flip", 3),
    ("output_edit", 2),
    // About a third of the store entries truncated, sometimes with an output deleted.
    ("store_truncate", 2),
    // A file changed and written back within the same second.
    ("revert", 3),
    // Only the marker: watch must not rebuild.
    ("noop", 3),
    // Slang (none applies to a model without Slang shaders: the draw is then redone):
    // a constant of an imported module changed;
    ("slang_const", 6),
    // a file of an imported module added earlier on the search path (the sources'
    // directory, an earlier include dir, or `x_y.slang` before `x-y.slang`), or one removed;
    ("slang_shadow", 4),
    // a module moved to another directory, or renamed between `_` and `-`, with or without
    // `include_dirs` following it (an import that fails is fixed in the next step, `fix`);
    // or `include_dirs` reordered, shortened or lengthened;
    ("slang_move", 4),
    // `import fog_k;` under `#ifdef FOG`, or `import detail_k;`, added or removed;
    ("slang_import", 4),
    // a syntax error or `#error` under `#ifdef FOG` in a module; fixed in the next step.
    ("slang_error", 2),
    // A file rewritten with the same bytes.
    ("touch", 2),
];

struct Config {
    sequences: u64,
    steps: usize,
    seed: u64,
    only: Option<Vec<&'static str>>,
    keep_going: bool,
    verbose: bool,
    allow_kept_failed: bool,
    /// `Some(inside)`: where watch mode's output directory is, for every sequence.
    watch_out_inside: Option<bool>,
    /// Serve mode (`KILN_FUZZ_SERVE=0` leaves it out).
    serve: bool,
}

impl Config {
    fn from_env() -> Config {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let num = |name: &str| {
            var(name).map(|v| {
                v.parse::<u64>()
                    .unwrap_or_else(|_| panic!("{name}={v}: not a number"))
            })
        };
        let seed = num("KILN_FUZZ_SEED");
        let total = num("KILN_FUZZ_STEPS");
        let sequences = num("KILN_FUZZ_SEQUENCES").unwrap_or(match (seed, total) {
            (Some(_), _) => 1,
            (None, Some(n)) => n.div_ceil(25).max(1),
            (None, None) => 3,
        });
        let total = total.unwrap_or(25 * sequences);
        let only = var("KILN_FUZZ_ONLY").map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(|k| {
                    KINDS
                        .iter()
                        .map(|(name, _)| *name)
                        .find(|n| *n == k)
                        .unwrap_or_else(|| {
                            let names: Vec<&str> = KINDS.iter().map(|(n, _)| *n).collect();
                            panic!(
                                "KILN_FUZZ_ONLY: unknown edit kind {k:?}; kinds: {}",
                                names.join(",")
                            )
                        })
                })
                .collect()
        });
        Config {
            sequences: sequences.max(1),
            steps: total.div_ceil(sequences.max(1)) as usize,
            seed: seed.unwrap_or(1),
            only,
            keep_going: var("KILN_FUZZ_KEEP_GOING").is_some_and(|v| v != "0"),
            verbose: var("KILN_FUZZ_VERBOSE").is_some_and(|v| v != "0"),
            allow_kept_failed: var("KILN_FUZZ_ALLOW_KEPT_FAILED").is_some_and(|v| v != "0"),
            watch_out_inside: var("KILN_FUZZ_WATCH_OUT").map(|v| match v.as_str() {
                "inside" => true,
                "outside" => false,
                other => panic!("KILN_FUZZ_WATCH_OUT={other}: inside or outside"),
            }),
            serve: var("KILN_FUZZ_SERVE").is_none_or(|v| v != "0"),
        }
    }
}

/// What an edit may legitimately make kiln do, for the count checks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    /// Changes what is compiled, or kiln's outputs or store.
    Other,
    /// Comments or whitespace only: nothing may be compiled.
    Cosmetic,
    /// Code under `#ifdef FOG` only: only FOG variants may be compiled.
    FogOnly,
    /// Nothing but the marker: watch must not rebuild.
    MarkerOnly,
    /// A file rewritten with the same bytes: a rebuild would be spurious.
    Unchanged,
}

fn class_of(kind: &str) -> Class {
    match kind {
        "comment" | "whitespace" => Class::Cosmetic,
        "const_fog" => Class::FogOnly,
        "noop" => Class::MarkerOnly,
        "touch" => Class::Unchanged,
        _ => Class::Other,
    }
}

#[derive(Default)]
struct Totals {
    steps_per_mode: usize,
    build_discrepancies: usize,
    watch_discrepancies: usize,
    serve_discrepancies: usize,
    spurious_rebuilds: usize,
    tmp_warnings: usize,
    findings: Vec<String>,
    applied: BTreeMap<&'static str, usize>,
    spurious_at: Vec<String>,
    /// Steps whose project had a shader compiled by glslang (with the `glslang` feature).
    glslang_steps: usize,
    /// Steps whose project had a Slang shader (with the Slang library).
    slang_steps: usize,
}

/// The one line a run ends with.
fn summary_line(config: &Config, totals: &Totals) -> String {
    format!(
        "differential: sequences={} steps_per_mode={} build_discrepancies={} watch_discrepancies={} serve_discrepancies={} spurious_rebuilds={} seeds={}..{}",
        config.sequences,
        totals.steps_per_mode,
        totals.build_discrepancies,
        totals.watch_discrepancies,
        totals.serve_discrepancies,
        totals.spurious_rebuilds,
        config.seed,
        config.seed + config.sequences - 1
    )
}

#[test]
fn differential_never_stale() {
    let config = Config::from_env();
    let started = Instant::now();
    let mut totals = Totals::default();
    let last_seed = config.seed + config.sequences - 1;
    for seed in config.seed..=last_seed {
        let mut seq = Sequence::new(seed, &config);
        let clean = seq.run(&config, &mut totals);
        if !clean && !config.keep_going {
            break;
        }
    }
    println!("{}", summary_line(&config, &totals));
    println!(
        "differential: elapsed {:.1}s, {} warning(s) about temporary files left in output directories",
        started.elapsed().as_secs_f64(),
        totals.tmp_warnings
    );
    let applied: Vec<String> = totals
        .applied
        .iter()
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    println!("differential: edits applied: {}", applied.join(" "));
    println!(
        "differential: steps with a glslang shader: {} (glslang linked: {})",
        totals.glslang_steps,
        kiln::compile::glslang::AVAILABLE
    );
    println!(
        "differential: steps with a Slang shader: {} (Slang library: {})",
        totals.slang_steps,
        match kiln::compile::slang::version() {
            Ok(v) => v,
            Err(e) => format!("none: {e}"),
        }
    );
    for s in totals.spurious_at.iter().take(20) {
        println!("spurious rebuild: {s}");
    }
    for f in &totals.findings {
        println!("finding: {f}");
    }
    assert!(
        totals.build_discrepancies == 0
            && totals.watch_discrepancies == 0
            && totals.serve_discrepancies == 0,
        "kiln served something a clean build would not (see above)"
    );
}

/// One problem found at a step, in one mode.
struct Problem {
    mode: &'static str,
    what: String,
    details: Vec<String>,
}

struct Sequence {
    seed: u64,
    rng: Rng,
    model: Model,
    _work: tempfile::TempDir,
    work: PathBuf,
    a: PathBuf,
    b: PathBuf,
    out_b: PathBuf,
    /// What the model's files are on disk, in both copies.
    disk: BTreeMap<String, String>,
    /// A directory moved out of both projects: (relative dir, where A's is, where B's is).
    parked: Option<(String, PathBuf, PathBuf)>,
    history: Vec<String>,
    watch: Option<Watch>,
    /// `kiln serve` on B, beside watch (see `differential/server.rs`).
    serve: Option<server::Serve>,
    /// The last clean build, and the project files it was built from.
    fresh_memo: Option<(BTreeMap<String, String>, Tree, Option<Value>)>,
    store_damaged: bool,
    temp_counter: u64,
    /// Watch's latest build report (its first build's, until it rebuilds).
    watch_last_report: Option<Value>,
    /// The step's edit changed a Slang file (see `run`).
    slang_touched: bool,
}

impl Sequence {
    fn new(seed: u64, config: &Config) -> Sequence {
        let mut rng = Rng::new(seed);
        let model = Model::generate(&mut rng);
        let dir = tempfile::Builder::new()
            .prefix("kiln-fuzz-")
            .tempdir()
            .unwrap();
        let work = dir.path().to_owned();
        let (a, b) = (work.join("A"), work.join("B"));
        let out_b = if config.watch_out_inside.unwrap_or(seed.is_multiple_of(2)) {
            b.join("wout")
        } else {
            work.join("out_B")
        };
        for d in [&a, &b, &work.join("park_a"), &work.join("park_b")] {
            std::fs::create_dir_all(d).unwrap();
        }
        Sequence {
            seed,
            rng,
            model,
            _work: dir,
            work,
            a,
            b,
            out_b,
            disk: BTreeMap::new(),
            parked: None,
            history: Vec::new(),
            watch: None,
            serve: None,
            fresh_memo: None,
            store_damaged: false,
            temp_counter: 0,
            watch_last_report: None,
            slang_touched: false,
        }
    }

    /// Runs the sequence; returns whether no discrepancy was found.
    fn run(&mut self, config: &Config, totals: &mut Totals) -> bool {
        let files = self.model.render();
        self.write_disk(&files);
        if config.verbose {
            println!("seed {}: kiln.toml\n{}", self.seed, files["kiln.toml"]);
        }
        self.history.push(format!(
            "step 0: generated {} shaders, {} variants, targets {:?}; watch output in {}",
            self.model.shaders.len(),
            self.model.variant_count(),
            self.model
                .targets
                .iter()
                .map(|t| model::TARGETS[*t])
                .collect::<Vec<_>>(),
            if self.out_b.starts_with(&self.b) {
                "B/wout (inside the project)"
            } else {
                "OUT_B (outside the project)"
            }
        ));
        match Watch::start(
            &self.b.join("kiln.toml"),
            &self.out_b,
            &self.work.join("watch-stderr.log"),
        ) {
            Ok((watch, first)) => {
                self.watch = Some(watch);
                self.watch_last_report = Some(first);
            }
            Err(e) => {
                return self.fail(
                    0,
                    "start",
                    vec![Problem {
                        mode: "watch",
                        what: "kiln watch did not start".into(),
                        details: vec![e],
                    }],
                    config,
                    totals,
                )
            }
        }
        if config.serve {
            match server::Serve::start(&self.b.join("kiln.toml"), &self.work) {
                Ok(serve) => self.serve = Some(serve),
                Err(e) => {
                    return self.fail(
                        0,
                        "start",
                        vec![Problem {
                            mode: "serve",
                            what: "kiln serve did not start".into(),
                            details: vec![e],
                        }],
                        config,
                        totals,
                    )
                }
            }
        }
        if !self.check_step(0, "start", config, totals) {
            return false;
        }
        for step in 1..=config.steps {
            let before = self.disk.clone();
            let (kind, desc) = self.choose_and_apply(config);
            // Slang compiles each variant from its files as they are (`compile::slang::bundle`),
            // not from a preprocessed text: a comment, blank line or code under `#ifdef FOG` in
            // a Slang file recompiles every variant that reads it. The count checks of
            // `Class::Cosmetic` and `Class::FogOnly` do not apply to such a step.
            self.slang_touched = self
                .disk
                .iter()
                .filter(|(p, t)| before.get(*p) != Some(*t))
                .map(|(p, _)| p)
                .chain(before.keys().filter(|p| !self.disk.contains_key(*p)))
                .any(|p| p.ends_with(".slang"));
            self.history.push(format!("step {step}: [{kind}] {desc}"));
            *totals.applied.entry(kind).or_default() += 1;
            if config.verbose {
                println!("seed {} step {step}: [{kind}] {desc}", self.seed);
            }
            if !self.check_step(step, kind, config, totals) {
                return false;
            }
        }
        true
    }

    // ---------------------------------------------------------------- files

    fn write_disk(&mut self, files: &BTreeMap<String, String>) {
        let roots = [self.a.clone(), self.b.clone()];
        for (path, text) in files {
            if self.disk.get(path) != Some(text) {
                for root in &roots {
                    self.write_atomic(&root.join(path), text.as_bytes());
                }
            }
        }
        for path in self.disk.keys() {
            if !files.contains_key(path) {
                for root in &roots {
                    let _ = std::fs::remove_file(root.join(path));
                }
            }
        }
        self.disk = files.clone();
    }

    /// Written as editors do: a temporary file beside it, then a rename.
    fn write_atomic(&mut self, path: &Path, bytes: &[u8]) {
        let dir = path.parent().unwrap();
        std::fs::create_dir_all(dir).unwrap();
        self.temp_counter += 1;
        let temp = dir.join(format!(".fuzz-write-{}", self.temp_counter));
        std::fs::write(&temp, bytes).unwrap();
        std::fs::rename(&temp, path).unwrap();
    }

    /// The model's files, less a directory moved out of the project.
    fn visible(&self, mut files: BTreeMap<String, String>) -> BTreeMap<String, String> {
        if let Some((dir, _, _)) = &self.parked {
            let prefix = format!("{dir}/");
            files.retain(|p, _| !p.starts_with(&prefix));
        }
        files
    }

    // ---------------------------------------------------------------- edits

    fn choose_and_apply(&mut self, config: &Config) -> (&'static str, String) {
        if self.parked.is_some() {
            return ("dir_back", self.dir_back());
        }
        if self.model.has_errors() {
            let desc = self.model.fix_errors();
            self.sync_model();
            return ("fix", desc);
        }
        let kinds: Vec<(&'static str, u32)> = KINDS
            .iter()
            .filter(|(k, _)| config.only.as_ref().is_none_or(|only| only.contains(k)))
            .copied()
            .collect();
        let total: u32 = kinds.iter().map(|(_, w)| w).sum();
        for _ in 0..100 {
            let mut r = (self.rng.next_u64() % u64::from(total)) as u32;
            let kind = kinds
                .iter()
                .find(|(_, w)| {
                    if r < *w {
                        true
                    } else {
                        r -= w;
                        false
                    }
                })
                .unwrap()
                .0;
            if let Some(desc) = self.apply(kind) {
                return (kind, desc);
            }
        }
        ("noop", "nothing applicable: marker only".to_owned())
    }

    fn sync_model(&mut self) {
        let files = self.visible(self.model.render());
        self.write_disk(&files);
    }

    fn apply(&mut self, kind: &'static str) -> Option<String> {
        let rng = &mut self.rng;
        let model = &mut self.model;
        let desc = match kind {
            "const" => model.edit_const(rng, false),
            "const_fog" => model.edit_const(rng, true),
            "comment" => model.edit_comment(rng),
            "whitespace" => model.edit_whitespace(rng),
            "include_toggle" => model.edit_include_toggle(rng),
            "include_rename" => model.edit_include_rename(rng),
            "include_move" => model.edit_include_move(rng),
            "axes" => model.edit_axes(rng),
            "shader_add" => model.edit_shader_add(rng),
            "shader_remove" => model.edit_shader_remove(rng),
            "pass_entry" => model.edit_pass_entry(rng),
            "pass_stage" => model.edit_pass_stage(rng),
            "pass_source" => model.edit_pass_source(rng),
            "pass_swap" => model.edit_pass_swap(rng),
            "targets" => model.edit_targets(rng),
            "defines" => model.edit_defines(rng),
            "error" => model.edit_error(rng),
            "slang_const" => model.edit_slang_const(rng),
            "slang_shadow" => model.edit_slang_shadow(rng),
            "slang_move" => model.edit_slang_move(rng),
            "slang_import" => model.edit_slang_import(rng),
            "slang_error" => model.edit_slang_error(rng),
            // Edits of the file system, not of the model.
            "dir_out_back" => return self.dir_out(true),
            "dir_out" => return self.dir_out(false),
            "output_delete" | "output_flip" | "output_edit" => return self.edit_output(kind),
            "store_truncate" => return self.store_truncate(),
            "revert" => return self.revert(),
            "touch" => return self.touch(),
            "noop" => return Some("marker only".to_owned()),
            other => panic!("unknown edit kind {other}"),
        }?;
        self.sync_model();
        Some(desc)
    }

    fn dir_out(&mut self, and_back: bool) -> Option<String> {
        let mut dirs: Vec<String> = self
            .disk
            .keys()
            .flat_map(|p| {
                let parts: Vec<&str> = p.split('/').collect();
                (1..parts.len())
                    .map(|n| parts[..n].join("/"))
                    .collect::<Vec<_>>()
            })
            .collect();
        dirs.sort();
        dirs.dedup();
        if dirs.is_empty() {
            return None;
        }
        let dir = self.rng.pick(&dirs).clone();
        let flat = dir.replace('/', "_");
        let park_a = self.work.join("park_a").join(&flat);
        let park_b = self.work.join("park_b").join(&flat);
        std::fs::rename(self.a.join(&dir), &park_a).unwrap();
        std::fs::rename(self.b.join(&dir), &park_b).unwrap();
        if and_back {
            let pause = self.rng.below(3) as u64 * 40;
            std::thread::sleep(Duration::from_millis(pause));
            std::fs::rename(&park_a, self.a.join(&dir)).unwrap();
            std::fs::rename(&park_b, self.b.join(&dir)).unwrap();
            return Some(format!(
                "directory {dir} moved out of the project and back ({pause} ms apart)"
            ));
        }
        self.parked = Some((dir.clone(), park_a, park_b));
        let prefix = format!("{dir}/");
        self.disk.retain(|p, _| !p.starts_with(&prefix));
        Some(format!("directory {dir} moved out of the project"))
    }

    /// Moves a parked directory back; usually a file in it was edited while it was away (as
    /// a checkout elsewhere would), so that a watcher that does not re-read it serves stale
    /// outputs.
    fn dir_back(&mut self) -> String {
        let (dir, park_a, park_b) = self.parked.take().unwrap();
        let prefix = format!("{dir}/");
        let mut edited = String::new();
        if self.rng.chance(75) {
            let before = self.model.render();
            for _ in 0..20 {
                let mut other = self.model.clone();
                let Some(desc) = other.edit_const(&mut self.rng, false) else {
                    continue;
                };
                let after = other.render();
                let changed: Vec<&String> = after
                    .iter()
                    .filter(|(p, t)| before.get(*p) != Some(*t))
                    .map(|(p, _)| p)
                    .collect();
                if changed.is_empty() || !changed.iter().all(|p| p.starts_with(&prefix)) {
                    continue;
                }
                for path in changed {
                    let inner = &path[prefix.len()..];
                    for park in [&park_a, &park_b] {
                        std::fs::write(park.join(inner), &after[path]).unwrap();
                    }
                }
                self.model = other;
                edited = format!(", after an edit while away ({desc})");
                break;
            }
        }
        std::fs::rename(&park_a, self.a.join(&dir)).unwrap();
        std::fs::rename(&park_b, self.b.join(&dir)).unwrap();
        self.disk = self.model.render();
        format!("directory {dir} moved back into the project{edited}")
    }

    /// An output changed behind kiln's back, in each mode's own output directory.
    fn edit_output(&mut self, kind: &str) -> Option<String> {
        let outputs: Vec<String> = self
            .fresh_memo
            .as_ref()
            .map(|(_, tree, _)| tree.files.keys().cloned().collect())
            .unwrap_or_default();
        if outputs.is_empty() {
            return None;
        }
        let path = self.rng.pick(&outputs).clone();
        let r = self.rng.next_u64();
        let mut done = Vec::new();
        for dir in [self.a.join("out"), self.out_b.clone()] {
            let file = dir.join(&path);
            let Ok(mut bytes) = std::fs::read(&file) else {
                continue;
            };
            match kind {
                "output_delete" => std::fs::remove_file(&file).unwrap(),
                "output_flip" => {
                    if bytes.is_empty() {
                        continue;
                    }
                    let at = (r % bytes.len() as u64) as usize;
                    bytes[at] ^= 0x20;
                    std::fs::write(&file, &bytes).unwrap();
                }
                _ => {
                    if r.is_multiple_of(2) {
                        bytes.extend_from_slice(b"\n// edited behind kiln's back\n");
                    } else {
                        bytes.truncate(bytes.len() / 2);
                    }
                    std::fs::write(&file, &bytes).unwrap();
                }
            }
            done.push(dir.file_name().unwrap().to_string_lossy().into_owned());
        }
        let what = match kind {
            "output_delete" => "deleted",
            "output_flip" => "one byte flipped (same size)",
            _ => "edited (size changed)",
        };
        Some(format!("output {path} {what} in {}", done.join(", ")))
    }

    /// Store entries truncated (about a third of them), and sometimes an output deleted so
    /// that kiln has to go back to the store. The rows are changed through a second SQLite
    /// connection, as another tool (or a bad disk that SQLite's pages do not notice) would:
    /// kiln must detect each by its checksum, never serve it. B's watch may hold the database
    /// open meanwhile; SQLite's locks keep both sides sound.
    fn store_truncate(&mut self) -> Option<String> {
        let mut truncated = 0;
        for store in [self.a.join(".kiln"), self.b.join(".kiln")] {
            let database = store.join("store.sqlite");
            if !database.exists() {
                continue;
            }
            let conn = rusqlite::Connection::open(&database).unwrap();
            conn.busy_timeout(std::time::Duration::from_secs(30))
                .unwrap();
            let ids: Vec<i64> = conn
                .prepare("SELECT id FROM entries ORDER BY id")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            for id in ids {
                if self.rng.below(3) == 0 {
                    truncated += conn
                        .execute(
                            "UPDATE entries SET payload = substr(payload, 1, length(payload) / 2)
                             WHERE id = ?1 AND length(payload) > 0",
                            [id],
                        )
                        .unwrap();
                }
            }
        }
        if truncated == 0 {
            return None;
        }
        self.store_damaged = true;
        let also = if self.rng.chance(50) {
            self.edit_output("output_delete")
                .map(|d| format!("; {d}"))
                .unwrap_or_default()
        } else {
            String::new()
        };
        Some(format!(
            "{truncated} store entries truncated (A and B){also}"
        ))
    }

    /// A file changed and written back within the same second (in place, as some tools
    /// do): nothing changed in the end.
    fn revert(&mut self) -> Option<String> {
        let mut other = self.model.clone();
        let mut rng = Rng::new(self.rng.next_u64());
        let edited = match rng.below(3) {
            0 => other.edit_defines(&mut rng),
            _ => other.edit_const(&mut rng, false),
        }?;
        let files = self.visible(other.render());
        let changed: Vec<(String, String)> = files
            .into_iter()
            .filter(|(p, t)| self.disk.get(p).is_some_and(|old| old != t))
            .collect();
        let (path, text) = changed.first()?.clone();
        let original = self.disk[&path].clone();
        for root in [&self.a, &self.b] {
            std::fs::write(root.join(&path), &text).unwrap();
            std::fs::write(root.join(&path), &original).unwrap();
        }
        Some(format!("{path} edited ({edited}) and reverted at once"))
    }

    /// A file rewritten with identical bytes.
    fn touch(&mut self) -> Option<String> {
        let read = self.model.read_files();
        let path = self.rng.pick(&read).clone();
        let text = self.disk.get(&path)?.clone();
        for root in [self.a.clone(), self.b.clone()] {
            self.write_atomic(&root.join(&path), text.as_bytes());
        }
        Some(format!("{path} rewritten with the same bytes"))
    }

    // ---------------------------------------------------------------- checks

    /// Runs both modes and the clean build after the step; returns whether all agreed.
    fn check_step(
        &mut self,
        step: usize,
        kind: &'static str,
        config: &Config,
        totals: &mut Totals,
    ) -> bool {
        let class = match class_of(kind) {
            Class::Cosmetic | Class::FogOnly if self.slang_touched => Class::Other,
            class => class,
        };
        let mut problems = Vec::new();

        // Build mode: a new process.
        let build = kiln_build(&self.a.join("kiln.toml"), &[]);

        // Watch mode: the marker, then a second one to catch what kiln's own writes set off.
        let watch = self.watch.as_mut().unwrap();
        let mut watch_dead = false;
        let reports = match watch.sync(&step.to_string()) {
            Ok(r) => r,
            Err(e) => {
                problems.push(Problem {
                    mode: "watch",
                    what: "no marker from kiln watch".into(),
                    details: vec![e],
                });
                watch_dead = true;
                Vec::new()
            }
        };
        let settle = if watch_dead {
            Vec::new()
        } else {
            match watch.sync(&format!("{step}.settle")) {
                Ok(r) => r,
                Err(e) => {
                    problems.push(Problem {
                        mode: "watch",
                        what: "no settle marker from kiln watch".into(),
                        details: vec![e],
                    });
                    watch_dead = true;
                    Vec::new()
                }
            }
        };
        totals.spurious_rebuilds += settle.len();
        if !settle.is_empty() {
            totals.spurious_at.push(format!(
                "seed={} step={step} kind={kind}: {} rebuild(s) after the step's marker, set off by nothing the harness did ({})",
                self.seed,
                settle.len(),
                settle.iter().map(Value::to_string).collect::<Vec<_>>().join(" ").chars().take(300).collect::<String>()
            ));
        }
        if !settle.is_empty() && config.verbose {
            println!(
                "  {} spurious rebuild(s) after the step's marker",
                settle.len()
            );
        }

        // The oracle.
        let files = self.visible(self.model.render());
        let (fresh, fresh_report) = self.clean_build(&files);
        let expect_clean = self.parked.is_none() && !self.model.has_errors();
        let fresh_failed = fresh_report
            .as_ref()
            .and_then(|r| r["failed"].as_u64())
            .unwrap_or(u64::MAX);
        if expect_clean && fresh_failed != 0 {
            panic!(
                "fuzzer bug: the generated project does not build cleanly (seed {}, step {step})\nhistory:\n  {}\nreport: {}\nfiles:\n{}",
                self.seed,
                self.history.join("\n  "),
                fresh_report.map(|r| r.to_string()).unwrap_or_default(),
                files
                    .iter()
                    .map(|(p, t)| format!("--- {p}\n{t}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }

        let failed_in_clean_build: Vec<String> = fresh_report
            .as_ref()
            .and_then(|r| r["diagnostics"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter(|d| d["severity"] == "error")
            .filter_map(|d| d["variant"].as_str().map(str::to_owned))
            .collect();
        let lenient = |tree: &mut Tree| {
            config.allow_kept_failed && tree::drop_outputs_of_failed(tree, &failed_in_clean_build)
        };

        // Build mode against the oracle.
        match &build {
            Err(e) => problems.push(Problem {
                mode: "build",
                what: "kiln build did not report".into(),
                details: vec![e.clone()],
            }),
            Ok(report) => {
                let mut got = Tree::read(&self.a.join("out"));
                totals.tmp_warnings += warn_leftovers("build", &got, self.seed, step);
                let dropped = lenient(&mut got);
                let diff = tree::diff(&got, &fresh, !dropped);
                if !diff.is_empty() {
                    problems.push(Problem {
                        mode: "build",
                        what: "outputs differ from a clean build".into(),
                        details: diff,
                    });
                }
                if let Some(p) = failed_count_differs("build", report, fresh_report.as_ref()) {
                    problems.push(p);
                }
                if let Some(p) = self.check_build_counts(class, report) {
                    problems.push(p);
                }
            }
        }

        // Watch mode against the oracle.
        if !watch_dead {
            let mut got = Tree::read(&self.out_b);
            totals.tmp_warnings += warn_leftovers("watch", &got, self.seed, step);
            tree::drop_stale_entries(&mut got);
            let _ = lenient(&mut got);
            let diff = tree::diff(&got, &fresh, false);
            if !diff.is_empty() {
                problems.push(Problem {
                    mode: "watch",
                    what: "outputs differ from a clean build (stale entries dropped)".into(),
                    details: diff,
                });
            }
            // The latest rebuild, of this step or an earlier one, says what watch believes
            // now (a step without a rebuild changed nothing it knows of).
            if let Some(last) = settle.last().or(reports.last()) {
                self.watch_last_report = Some(last.clone());
            }
            if let Some(last) = &self.watch_last_report {
                if let Some(p) = failed_count_differs("watch", last, fresh_report.as_ref()) {
                    problems.push(p);
                }
            }
            if let Some(p) = self.check_watch_counts(class, &reports) {
                problems.push(p);
            }
            if class == Class::MarkerOnly && !reports.is_empty() {
                totals.spurious_rebuilds += reports.len();
                problems.push(Problem {
                    mode: "watch",
                    what: "rebuild after a marker-only step".into(),
                    details: reports.iter().map(Value::to_string).collect(),
                });
            }
            if class == Class::Unchanged && !reports.is_empty() {
                totals.spurious_rebuilds += reports.len();
                totals.spurious_at.push(format!(
                    "seed={} step={step} kind={kind}: {} rebuild(s) for a file rewritten with the same bytes",
                    self.seed,
                    reports.len()
                ));
            }
        }

        // Serve mode against the oracle: what it serves and what it told.
        let mut serve_dead = false;
        if let Some(serve) = &mut self.serve {
            let quiet = matches!(
                class,
                Class::Cosmetic | Class::MarkerOnly | Class::Unchanged
            );
            match serve.check(step, &fresh, quiet) {
                Ok(details) if details.is_empty() => {}
                Ok(details) => problems.push(Problem {
                    mode: "serve",
                    what: "served artifacts or events differ from a clean build".into(),
                    details,
                }),
                Err(e) => {
                    serve_dead = true;
                    problems.push(Problem {
                        mode: "serve",
                        what: "kiln serve did not answer".into(),
                        details: vec![e],
                    });
                }
            }
        }

        if step > 0 {
            totals.steps_per_mode += 1;
            totals.glslang_steps += usize::from(self.model.shaders.iter().any(|s| s.glslang));
            totals.slang_steps += usize::from(self.model.has_slang_shader());
        }
        if problems.is_empty() && !watch_dead && !serve_dead {
            return true;
        }
        self.fail(step, kind, problems, config, totals)
    }

    fn check_build_counts(&self, class: Class, report: &Value) -> Option<Problem> {
        if self.store_damaged {
            return None;
        }
        let compiled = report["compiled"].as_u64().unwrap_or(0);
        match class {
            Class::Cosmetic if compiled != 0 => Some(Problem {
                mode: "build",
                what: format!("a comment or whitespace edit compiled {compiled} variant(s)"),
                details: vec![report.to_string()],
            }),
            Class::FogOnly if compiled as usize > self.model.fog_variants() => Some(Problem {
                mode: "build",
                what: format!(
                    "an edit under #ifdef FOG compiled {compiled} variants, more than the {} FOG variants",
                    self.model.fog_variants()
                ),
                details: vec![report.to_string()],
            }),
            _ => None,
        }
    }

    fn check_watch_counts(&self, class: Class, reports: &[Value]) -> Option<Problem> {
        if self.store_damaged {
            return None;
        }
        let compiled: u64 = reports
            .iter()
            .map(|r| r["compiled"].as_u64().unwrap_or(0))
            .sum();
        match class {
            Class::Cosmetic if compiled != 0 => Some(Problem {
                mode: "watch",
                what: format!("a comment or whitespace edit recompiled {compiled} variant(s)"),
                details: reports.iter().map(Value::to_string).collect(),
            }),
            Class::FogOnly => {
                let bad: Vec<String> = reports
                    .iter()
                    .flat_map(|r| r["recompiled"].as_array().cloned().unwrap_or_default())
                    .filter_map(|r| r["variant"].as_str().map(str::to_owned))
                    .filter(|v| !variant_keywords(v).contains(&"FOG"))
                    .collect();
                (!bad.is_empty()).then(|| Problem {
                    mode: "watch",
                    what: "an edit under #ifdef FOG recompiled variants without FOG".into(),
                    details: bad,
                })
            }
            _ => None,
        }
    }

    /// A clean build into new, empty directories (reused while the project files are the
    /// same as at the last one).
    fn clean_build(&mut self, files: &BTreeMap<String, String>) -> (Tree, Option<Value>) {
        if let Some((memo_files, tree, report)) = &self.fresh_memo {
            if memo_files == files {
                return (tree.clone(), report.clone());
            }
        }
        let out = self.work.join("fresh_out");
        let cache = self.work.join("fresh_cache");
        let _ = std::fs::remove_dir_all(&out);
        let _ = std::fs::remove_dir_all(&cache);
        let mut args: Vec<&std::ffi::OsStr> = vec!["--out".as_ref(), out.as_os_str()];
        args.extend(["--cache-dir".as_ref(), cache.as_os_str()]);
        let report = kiln_build(&self.a.join("kiln.toml"), &args).ok();
        let tree = Tree::read(&out);
        let _ = std::fs::remove_dir_all(&out);
        let _ = std::fs::remove_dir_all(&cache);
        self.fresh_memo = Some((files.clone(), tree.clone(), report.clone()));
        (tree, report)
    }

    /// Prints the discrepancy; returns false (the sequence stops), or panics unless
    /// `KILN_FUZZ_KEEP_GOING` is set.
    fn fail(
        &mut self,
        step: usize,
        kind: &str,
        problems: Vec<Problem>,
        config: &Config,
        totals: &mut Totals,
    ) -> bool {
        // The settings that change what a seed does, for the re-run line.
        let mut settings = String::new();
        for name in [
            "KILN_FUZZ_ONLY",
            "KILN_FUZZ_ALLOW_KEPT_FAILED",
            "KILN_FUZZ_WATCH_OUT",
        ] {
            if let Ok(value) = std::env::var(name) {
                settings.push_str(&format!("{name}={value} "));
            }
        }
        let mut text = format!(
            "\n=== differential: discrepancy at seed {} step {step} (edit kind: {kind})\nre-run: {settings}KILN_FUZZ_SEED={} KILN_FUZZ_STEPS={step} cargo test -p kiln-cli --test differential -- --nocapture\nhistory:\n  {}\n",
            self.seed,
            self.seed,
            self.history.join("\n  ")
        );
        let mut modes = Vec::new();
        for p in &problems {
            text.push_str(&format!("[{} mode] {}\n", p.mode, p.what));
            for d in p.details.iter().take(30) {
                text.push_str(&format!("    {d}\n"));
            }
            if p.details.len() > 30 {
                text.push_str(&format!("    ... and {} more\n", p.details.len() - 30));
            }
            totals.findings.push(format!(
                "seed={} step={step} kind={kind} mode={} what={} ({} difference(s); first: {})",
                self.seed,
                p.mode,
                p.what,
                p.details.len(),
                p.details.first().map(String::as_str).unwrap_or("-")
            ));
            if !modes.contains(&p.mode) {
                modes.push(p.mode);
            }
        }
        if let Some(watch) = &self.watch {
            text.push_str(&format!(
                "kiln watch stderr (last lines):\n{}\n",
                watch.stderr_tail()
            ));
        }
        if let Some(serve) = &self.serve {
            text.push_str(&format!(
                "kiln serve stderr (last lines):\n{}\n",
                serve.stderr_tail()
            ));
        }
        for mode in modes {
            match mode {
                "build" => totals.build_discrepancies += 1,
                "serve" => totals.serve_discrepancies += 1,
                _ => totals.watch_discrepancies += 1,
            }
        }
        println!("{text}");
        if !config.keep_going {
            println!("{}", summary_line(config, totals));
            panic!(
                "differential: discrepancy at seed {} step {step} ({kind}); see above",
                self.seed
            );
        }
        false
    }
}

impl Drop for Sequence {
    /// Stops `kiln watch` and `kiln serve` before their directories are removed.
    fn drop(&mut self) {
        self.watch.take();
        self.serve.take();
    }
}

/// `kiln build --json --manifest M ARGS`: its report (exit 0 or 1), or why there is none.
fn kiln_build(manifest: &Path, args: &[&std::ffi::OsStr]) -> Result<Value, String> {
    let output = Command::new(kiln_bin())
        .args(["build", "--json", "--manifest"])
        .arg(manifest)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run kiln build: {e}"))?;
    let code = output.status.code();
    if !matches!(code, Some(0) | Some(1)) {
        return Err(format!(
            "kiln build exited with {:?}: {}",
            code,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| {
        format!(
            "kiln build printed no JSON report ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// A mode's report must fail exactly the variants a clean build fails: one that fails more
/// has not read the current sources (its kept outputs would hide that until a later step).
fn failed_count_differs(
    mode: &'static str,
    report: &Value,
    fresh_report: Option<&Value>,
) -> Option<Problem> {
    let failed = report["failed"].as_u64()?;
    let fresh = fresh_report?["failed"].as_u64()?;
    if failed == fresh {
        return None;
    }
    let diagnostics: Vec<String> = report["diagnostics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["severity"] == "error")
        .take(5)
        .map(|d| format!("{}: {}", d["variant"], d["message"]))
        .collect();
    Some(Problem {
        mode,
        what: format!("reports {failed} failed variant(s), a clean build {fresh}"),
        details: diagnostics,
    })
}

/// The keywords of a variant named `Shader/Pass[A;B]` (possibly followed by more).
fn variant_keywords(name: &str) -> Vec<&str> {
    name.split_once('[')
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(k, _)| k.split(';').filter(|k| !k.is_empty()).collect())
        .unwrap_or_default()
}

fn warn_leftovers(mode: &str, tree: &Tree, seed: u64, step: usize) -> usize {
    if tree.tmp_leftovers.is_empty() {
        return 0;
    }
    println!(
        "warning: {mode} mode, seed {seed} step {step}: temporary files left in the output directory: {:?}",
        tree.tmp_leftovers
    );
    1
}

/// The harness's own helpers, so that a wrong parse cannot hide a discrepancy.
#[test]
fn differential_harness_helpers() {
    assert_eq!(variant_keywords("S0/P0[FOG;SKIN]"), ["FOG", "SKIN"]);
    assert_eq!(
        variant_keywords("S0/P0[FOG]@0123abcd (c19499fc0cfd)"),
        ["FOG"]
    );
    assert!(variant_keywords("S0/P0[]").is_empty());
    assert_eq!(
        model::relative("shaders/w0.wgsl", "inc/common.wgsl"),
        "../inc/common.wgsl"
    );
    assert_eq!(
        model::relative("inc/common.wgsl", "inc/more/extra.wgsl"),
        "more/extra.wgsl"
    );
    assert_eq!(
        model::relative("lib/deep/er/common.glsl", "lib/extra.glsl"),
        "../../extra.glsl"
    );
    assert_eq!(
        model::slang_module_path("mods", 0, true),
        "mods/common-k.slang"
    );
    assert_eq!(
        model::slang_module_path("shaders", 2, false),
        "shaders/fog_k.slang"
    );

    // Stale entries (watch mode) and their files are dropped; a clean build has none.
    let entry = |path: &str, stale: Option<bool>| {
        let mut e = serde_json::json!({
            "shader": "S0", "pass": "P0", "keywords": ["FOG"], "revision": "r",
            "digest": "d", "target": "spirv", "path": path, "bytes": 1,
            "content_hash": "h", "inputs": "i",
        });
        if let Some(stale) = stale {
            e["stale"] = stale.into();
        }
        e
    };
    let tree_of = |entries: Vec<Value>| {
        let mut t = Tree::default();
        for e in &entries {
            t.files
                .insert(e["path"].as_str().unwrap().to_owned(), vec![1]);
        }
        t.index_bytes = Some(
            serde_json::to_vec(&serde_json::json!({"kiln_version": "0", "entries": entries}))
                .unwrap(),
        );
        t
    };
    let want = tree_of(vec![entry("S0/P0/FOG.spv", None)]);
    let mut got = tree_of(vec![
        entry("S0/P0/FOG.spv", Some(false)),
        entry("S0/P0/_.spv", Some(true)),
    ]);
    assert!(!tree::diff(&got, &want, false).is_empty());
    assert!(tree::drop_stale_entries(&mut got));
    assert_eq!(tree::diff(&got, &want, false), Vec::<String>::new());

    // Any difference in bytes is one.
    let mut flipped = want.clone();
    flipped.files.insert("S0/P0/FOG.spv".into(), vec![0]);
    assert_eq!(tree::diff(&flipped, &want, true).len(), 1);

    // The old contract's leniency drops a failed variant's kept outputs, nothing else.
    let mut kept = tree_of(vec![entry("S0/P0/FOG.spv", None), {
        let mut e = entry("S0/P1/FOG.spv", None);
        e["pass"] = "P1".into();
        e
    }]);
    assert!(tree::drop_outputs_of_failed(
        &mut kept,
        &["S0/P1[FOG]@0123 (abcd)".to_owned()]
    ));
    assert_eq!(tree::diff(&kept, &want, false), Vec::<String>::new());
}

/// The `kiln` under test: this build's, or `KILN_FUZZ_BIN` (a long run keeps its own copy
/// while the tree is rebuilt).
fn kiln_bin() -> std::path::PathBuf {
    std::env::var_os("KILN_FUZZ_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_kiln").into())
}
