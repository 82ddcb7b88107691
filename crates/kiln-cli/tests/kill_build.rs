//! kill -9 during `kiln build`: 20 times a build is killed at a random point (while it
//! compiles, saves to the store or writes outputs), then a build runs to the end over the
//! same output directory and store. Every such rebuild must equal a clean build of the
//! same sources in fresh directories, file for file and byte for byte (only `.kiln-stat`,
//! which records inode numbers and times, may differ), with no file a killed writer left.
//!
//! `KILN_KILL_SEED` changes the kill points.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROUNDS: u32 = 20;

/// 4 x 2 x 2 keyword sets x 2 passes = 32 variants, three targets: 96 outputs.
const MANIFEST: &str = r#"
[project]
targets = ["spirv", "msl", "hlsl"]

[[shader]]
name = "Lit"
source = "shaders/lit.wgsl"
axes = [["L1", "L2", "L3", "L4"], ["_", "FOG"], ["_", "SKIN"]]

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"

[shader.passes.Depth]
stage = "vertex"
entry = "vs_main"
"#;

/// `ROUND` is replaced by the round number, so that every round compiles every variant
/// again and a kill lands among fresh compiles, saves and output replacements.
const LIT: &str = r#"
struct VsOut {
    @builtin(position) position: vec4<f32>,
    @location(0) uv: vec2<f32>,
};

@vertex
fn vs_main(@location(0) position: vec3<f32>) -> VsOut {
    var out: VsOut;
    var p = position * ROUND.0;
#ifdef SKIN
    p = p * 1.5;
#endif
    out.position = vec4<f32>(p, 1.0);
    out.uv = p.xy;
    return out;
}

@fragment
fn fs_main(in: VsOut) -> @location(0) vec4<f32> {
    var color = vec4<f32>(in.uv, ROUND.0, 1.0);
#ifdef L2
    color = color * 2.0;
#endif
#ifdef L3
    color = color * 3.0;
#endif
#ifdef L4
    color = color * 4.0;
#endif
#ifdef FOG
    color = mix(color, vec4<f32>(0.5, 0.5, 0.5, 1.0), 0.25);
#endif
    return color;
}
"#;

/// A small deterministic generator (64-bit LCG, high bits), so a failure names its seed.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound.max(1)
    }
}

fn write_sources(root: &Path, round: u32) {
    std::fs::create_dir_all(root.join("shaders")).unwrap();
    std::fs::write(root.join("kiln.toml"), MANIFEST).unwrap();
    std::fs::write(
        root.join("shaders/lit.wgsl"),
        LIT.replace("ROUND", &(round + 1).to_string()),
    )
    .unwrap();
}

fn kiln_build(root: &Path, out: &Path, cache: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kiln"));
    command
        .arg("build")
        .arg("--manifest")
        .arg(root.join("kiln.toml"))
        .arg("--out")
        .arg(out)
        .arg("--cache-dir")
        .arg(cache)
        .arg("--no-remote")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Runs a build to the end; panics with its stderr if it fails.
fn build_to_end(root: &Path, out: &Path, cache: &Path, what: &str) -> Duration {
    let started = Instant::now();
    let output = kiln_build(root, out, cache).output().unwrap();
    assert!(
        output.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    started.elapsed()
}

/// Every file under `dir` by relative path, with its bytes (`.kiln-stat` excepted).
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                pending.push(path);
            } else if entry.file_name() != ".kiln-stat" {
                let relative = path.strip_prefix(dir).unwrap().to_owned();
                files.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

#[test]
fn a_build_killed_at_random_points_20_times_always_rebuilds_to_a_clean_build() {
    let seed = std::env::var("KILN_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_204_u64);
    let mut random = Lcg(seed);
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("project");
    let (out, cache) = (temp.path().join("out"), temp.path().join("cache"));

    // An uninterrupted rebuild like the killed ones (every variant compiles again, every
    // output is replaced) says how long they last here. Not the first build: a cold build
    // creates every output and lasts longer, and kill points drawn from its length landed
    // after a rebuild's end too often.
    write_sources(&root, 0);
    build_to_end(&root, &out, &cache, "the first build");
    write_sources(&root, ROUNDS + 1);
    let full = build_to_end(&root, &out, &cache, "the calibrating rebuild");
    let mut killed_running = 0;
    for round in 1..=ROUNDS {
        write_sources(&root, round);
        // Kill points spread over the whole build, and a little past its usual end.
        let delay = Duration::from_micros(random.below(full.as_micros() as u64 * 6 / 5));
        let mut child = kiln_build(&root, &out, &cache).spawn().unwrap();
        std::thread::sleep(delay);
        if child.try_wait().unwrap().is_none() {
            killed_running += 1;
        }
        // SIGKILL: no destructor, no signal handler runs.
        let _ = child.kill();
        let _ = child.wait();

        build_to_end(
            &root,
            &out,
            &cache,
            &format!("the rebuild of round {round}"),
        );
        let clean_out = temp.path().join(format!("clean-out-{round}"));
        let clean_cache = temp.path().join(format!("clean-cache-{round}"));
        build_to_end(&root, &clean_out, &clean_cache, "the clean build");

        let (rebuilt, clean) = (tree(&out), tree(&clean_out));
        let only_rebuilt: Vec<_> = rebuilt.keys().filter(|p| !clean.contains_key(*p)).collect();
        let only_clean: Vec<_> = clean.keys().filter(|p| !rebuilt.contains_key(*p)).collect();
        assert!(
            only_rebuilt.is_empty() && only_clean.is_empty(),
            "seed {seed} round {round} (killed after {delay:?}): files only in the rebuild \
             {only_rebuilt:?}, only in the clean build {only_clean:?}"
        );
        for (path, bytes) in &rebuilt {
            assert!(
                clean[path] == *bytes,
                "seed {seed} round {round} (killed after {delay:?}): {} differs from a clean \
                 build",
                path.display()
            );
        }
        std::fs::remove_dir_all(&clean_out).unwrap();
        std::fs::remove_dir_all(&clean_cache).unwrap();
    }
    eprintln!("kill_build: {killed_running} of {ROUNDS} kills found the build running");
    // Most kills must land in a running build, or the test tests nothing.
    assert!(
        killed_running >= ROUNDS / 2,
        "only {killed_running} of {ROUNDS} kills found the build still running"
    );
}
