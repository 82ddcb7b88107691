//! Benchmark of `kiln serve` (the release `kiln` binary, as an engine would run it), on a
//! generated project: one WGSL shader with 6 two-way keyword axes (64 sets) x 2 passes x 3
//! targets (spirv, msl, hlsl) = 384 artifacts.
//!
//! Printed in one run:
//! - `serve hit p50_us p99_us` against `file p50_us p99_us`: a fetch over loopback of an
//!   artifact the server already served (kiln-client's keep-alive agent: request, headers,
//!   body read), against `std::fs::read` of the same artifact in `out/` (written by `kiln
//!   build`), the two alternating request by request over every artifact (goal: serve p50 <=
//!   100 us).
//! - `serve edit_to_event ms` beside `watch edit_to_outputs ms` and their ratio (goal <=
//!   1.05): a constant every variant reads gets a new value; serve: from the write to the
//!   last of the 384 `variant` events at a client that fetched every artifact; watch (on a
//!   copy of the project): from the write to its report line, printed once every output is
//!   written. Both from the same instant (the write), both through the same watcher and 30
//!   ms debounce; the two alternate rep by rep. Every rep checks the work: 384 events, 128
//!   variants recompiled.
//!
//! Without `--bench` (as under `cargo test --benches`) it runs once with few requests.

use kiln_client::{Client, Event};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const AXES: [&str; 6] = ["K0", "K1", "K2", "K3", "K4", "K5"];
const PASSES: [(&str, &str); 2] = [("Forward", "fs_main"), ("Shadow", "fs_shadow")];
const TARGETS: [&str; 3] = ["spirv", "msl", "hlsl"];

struct Settings {
    hit_rounds: usize,
    edit_reps: usize,
}

const FULL: Settings = Settings {
    hit_rounds: 40,
    edit_reps: 11,
};
const SMOKE: Settings = Settings {
    hit_rounds: 1,
    edit_reps: 1,
};

fn main() -> ExitCode {
    let full = std::env::args().any(|arg| arg == "--bench");
    match run(if full { FULL } else { SMOKE }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("serve bench failed: {message}");
            ExitCode::FAILURE
        }
    }
}

fn source(base: u32) -> String {
    let mut text = format!("const BASE: f32 = {base}.0;\n\nfn shade(c: vec4<f32>) -> vec4<f32> {{\n    var v = c * BASE;\n");
    for (i, k) in AXES.iter().enumerate() {
        text.push_str(&format!(
            "#ifdef {k}\n    v = v * {}.25 + vec4<f32>(0.{i});\n#endif\n",
            i + 1
        ));
    }
    text.push_str("    return v;\n}\n\n");
    for (_, entry) in PASSES {
        text.push_str(&format!(
            "@fragment\nfn {entry}() -> @location(0) vec4<f32> {{\n    return shade(vec4<f32>(1.0));\n}}\n\n"
        ));
    }
    text
}

fn manifest() -> String {
    let axes: Vec<String> = AXES.iter().map(|k| format!("[\"_\", \"{k}\"]")).collect();
    let mut text = format!(
        "[project]\ntargets = [{}]\n\n[[shader]]\nname = \"Surface\"\nsource = \"surface.wgsl\"\naxes = [{}]\n",
        TARGETS.map(|t| format!("\"{t}\"")).join(", "),
        axes.join(", ")
    );
    for (pass, entry) in PASSES {
        text.push_str(&format!(
            "\n[shader.passes.{pass}]\nstage = \"fragment\"\nentry = \"{entry}\"\n"
        ));
    }
    text
}

fn sets() -> Vec<Vec<&'static str>> {
    (0..1usize << AXES.len())
        .map(|mask| {
            AXES.iter()
                .enumerate()
                .filter(|(bit, _)| mask & (1 << bit) != 0)
                .map(|(_, k)| *k)
                .collect()
        })
        .collect()
}

fn extension(target: &str) -> &'static str {
    match target {
        "spirv" => "spv",
        "msl" => "metal",
        _ => "hlsl",
    }
}

/// A project directory in the system's temporary directory, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Result<Self, String> {
        let path =
            std::env::temp_dir().join(format!("kiln-serve-bench-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(|e| e.to_string())?;
        std::fs::write(path.join("kiln.toml"), manifest()).map_err(|e| e.to_string())?;
        std::fs::write(path.join("surface.wgsl"), source(1)).map_err(|e| e.to_string())?;
        Ok(Dir(path))
    }

    fn edit(&self, base: u32) -> Result<Instant, String> {
        let temp = self.0.join("surface.wgsl.tmp");
        std::fs::write(&temp, source(base)).map_err(|e| e.to_string())?;
        let now = Instant::now();
        std::fs::rename(&temp, self.0.join("surface.wgsl")).map_err(|e| e.to_string())?;
        Ok(now)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `kiln` child process and its stdout lines.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Running {
    fn start(dir: &Path, args: &[&str]) -> Result<Self, String> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(args)
            .arg("--manifest")
            .arg(dir.join("kiln.toml"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Running { child, lines })
    }

    fn next(&self) -> Result<Value, String> {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(120))
            .map_err(|_| "no report".to_string())?;
        serde_json::from_str(&line).map_err(|e| format!("{e}: {line}"))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at].as_secs_f64() * 1e6
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn run(settings: Settings) -> Result<(), String> {
    let served = Dir::new("serve")?;
    let built = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .arg("build")
        .arg("--manifest")
        .arg(served.0.join("kiln.toml"))
        .output()
        .map_err(|e| e.to_string())?;
    if !built.status.success() {
        return Err(format!("kiln build failed: {built:?}"));
    }
    let server = Running::start(&served.0, &["serve", "--json", "--listen", "127.0.0.1:0"])?;
    let address = server.next()?["listening"]
        .as_str()
        .ok_or("no address")?
        .to_owned();
    server.next()?;
    let client = Client::new(&format!("http://{address}"));
    let mut keys = Vec::new();
    for set in sets() {
        for (pass, _) in PASSES {
            for target in TARGETS {
                let file = served.0.join("out/Surface").join(pass).join(format!(
                    "{}.{}",
                    file_name(&set),
                    extension(target)
                ));
                let artifact = client
                    .get("Surface", pass, &set, target)
                    .map_err(|e| e.to_string())?;
                let on_disk =
                    std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
                if on_disk != artifact.bytes {
                    return Err(format!(
                        "{} differs from the served artifact",
                        file.display()
                    ));
                }
                keys.push((set.clone(), pass, target, file));
            }
        }
    }

    // Hits over loopback against reads of the same files, alternating.
    let (mut hits, mut reads, mut floor) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..settings.hit_rounds {
        for (set, pass, target, file) in &keys {
            let started = Instant::now();
            let artifact = client
                .get("Surface", pass, set, target)
                .map_err(|e| e.to_string())?;
            hits.push(started.elapsed());
            std::hint::black_box(artifact);
            let started = Instant::now();
            let bytes = std::fs::read(file).map_err(|e| e.to_string())?;
            reads.push(started.elapsed());
            std::hint::black_box(bytes);
            let started = Instant::now();
            let status = client.status().map_err(|e| e.to_string())?;
            floor.push(started.elapsed());
            std::hint::black_box(status);
        }
    }
    hits.sort();
    reads.sort();
    floor.sort();
    println!(
        "serve hit p50_us={:.1} p99_us={:.1} | file p50_us={:.1} p99_us={:.1} | http_floor p50_us={:.1} p99_us={:.1} | n={} (goal: serve p50 <= 100 us)",
        percentile(&hits, 0.5),
        percentile(&hits, 0.99),
        percentile(&reads, 0.5),
        percentile(&reads, 0.99),
        percentile(&floor, 0.5),
        percentile(&floor, 0.99),
        hits.len()
    );

    // Edit -> event (serve) beside edit -> outputs written (watch), alternating.
    let events = client.events().map_err(|e| e.to_string())?;
    let (tx, event_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for event in events.map_while(Result::ok) {
            if tx.send((Instant::now(), event)).is_err() {
                break;
            }
        }
    });
    match event_rx.recv_timeout(Duration::from_secs(10)) {
        Ok((_, Event::Hello)) => {}
        other => return Err(format!("no hello: {other:?}")),
    }
    let watched = Dir::new("watch")?;
    let watch = Running::start(&watched.0, &["watch", "--json"])?;
    watch.next()?;
    let expected_events = keys.len();
    let (mut serve_ms, mut watch_ms, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut serve_own, mut watch_own) = (Vec::new(), Vec::new());
    for rep in 0..settings.edit_reps {
        let base = 2 + rep as u32;
        let written = served.edit(base)?;
        let mut last = written;
        for _ in 0..expected_events {
            match event_rx.recv_timeout(Duration::from_secs(120)) {
                Ok((at, Event::Variant(_))) => last = at,
                other => {
                    return Err(format!(
                        "rep {rep}: expected a variant event, got {other:?}"
                    ))
                }
            }
        }
        let report = server.next()?;
        if report["events"] != expected_events {
            return Err(format!("rep {rep}: serve reported {report}"));
        }
        serve_own.push(report["event_ms"].as_f64().unwrap_or(0.0));
        let serve = (last - written).as_secs_f64() * 1000.0;

        let written = watched.edit(base)?;
        let report = watch.next()?;
        let watch_done = Instant::now();
        if report["compiled"] != 128 {
            return Err(format!("rep {rep}: watch reported {report}"));
        }
        watch_own.push(report["event_to_outputs_ms"].as_f64().unwrap_or(0.0));
        let watched_ms = (watch_done - written).as_secs_f64() * 1000.0;
        if std::env::var_os("KILN_BENCH_VERBOSE").is_some() {
            println!("rep {rep}: serve {serve:.1} ms, watch {watched_ms:.1} ms");
        }
        ratios.push(serve / watched_ms);
        serve_ms.push(serve);
        watch_ms.push(watched_ms);
    }
    println!(
        "serve edit_to_event ms={:.1} | watch edit_to_outputs ms={:.1} | ratio={:.3} (median of {} alternating reps; goal <= 1.05) | as each measures itself from the file event: serve {:.1} ms, watch {:.1} ms",
        median(&mut serve_ms),
        median(&mut watch_ms),
        median(&mut ratios),
        settings.edit_reps,
        median(&mut serve_own),
        median(&mut watch_own),
    );
    Ok(())
}

fn file_name(set: &[&str]) -> String {
    if set.is_empty() {
        "_".into()
    } else {
        set.join("+")
    }
}
