//! One end-to-end run of `kiln watch --json`: the first build, an edit, its incremental
//! rebuild, and a clean stop on SIGINT.

use kiln_test_support::TempProject;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const MANIFEST: &str = r#"
[project]
targets = ["spirv"]

[[shader]]
name = "Lit"
source = "lit.wgsl"
axes = [["_", "FOG"], ["_", "SKIN"]]

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"
"#;

const LIT: &str = r#"@fragment
fn fs_main() -> @location(0) vec4<f32> {
    var c = vec4<f32>(1.0);
#ifdef SKIN
    c = c * 0.5;
#endif
#ifdef FOG
    c = c * 0.25;
#endif
    return c;
}
"#;

/// `kiln watch --json` on `dir`, and a function that waits for its next report.
fn watch(dir: &TempProject) -> (std::process::Child, impl Fn() -> Value) {
    let mut child = dir
        .command(env!("CARGO_BIN_EXE_kiln"), "watch")
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = move || -> Value {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("no report from kiln watch");
        serde_json::from_str(&line).unwrap()
    };
    (child, next)
}

#[test]
fn watch_rebuilds_only_what_an_edit_touched_and_stops_cleanly() {
    let dir = TempProject::from_files([("kiln.toml", MANIFEST), ("lit.wgsl", LIT)]);
    let (mut child, next) = watch(&dir);

    let first = next();
    assert_eq!(first["variants"], 4, "{first}");
    assert_eq!(first["compiled"], 4, "{first}");

    let text = LIT.replace("c * 0.25", "c * 0.75");
    // Written atomically, as editors do, so the watcher never sees half a file.
    std::fs::write(dir.path("lit.wgsl.tmp"), text).unwrap();
    std::fs::rename(dir.path("lit.wgsl.tmp"), dir.path("lit.wgsl")).unwrap();
    let second = next();
    assert_eq!(second["files_changed"][0], "lit.wgsl", "{second}");
    assert_eq!(second["compiled"], 2, "{second}");
    let recompiled = second["recompiled"].as_array().unwrap();
    assert_eq!(recompiled.len(), 2);
    for r in recompiled {
        assert!(r["variant"].as_str().unwrap().contains("FOG"), "{r}");
        assert_eq!(r["reason"], "lit.wgsl changed");
        assert_eq!(r["digest"].as_str().unwrap().len(), 12);
    }
    // The variants without FOG skip the edited block: they are not even preprocessed again.
    assert_eq!(second["early_cutoff"], 0, "{second}");
    assert_eq!(second["cached"], 2, "{second}");
    assert_eq!(second["outputs_written"], 2, "{second}");
    assert!(second["event_to_outputs_ms"].as_f64().unwrap() > 0.0);

    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    // Nothing half written: only finished outputs and the index, no temporary files.
    let out = dir.path("out");
    let mut names: Vec<String> = std::fs::read_dir(out.join("Lit/Forward"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["FOG+SKIN.spv", "FOG.spv", "SKIN.spv", "_.spv"]);
    assert!(out.join("index.json").exists());
}

#[test]
fn watch_replaces_the_pack_after_each_rebuild_and_an_open_reader_keeps_the_old_bytes() {
    use kiln_runtime::Library;
    use std::os::unix::fs::MetadataExt;
    let manifest = MANIFEST.replace("[[shader]]", "[output]\nlayout = \"both\"\n\n[[shader]]");
    let dir = TempProject::from_files([("kiln.toml", manifest.as_str()), ("lit.wgsl", LIT)]);
    let (mut child, next) = watch(&dir);
    let first = next();
    assert_eq!(first["packs_written"], 1, "{first}");
    let pack = dir.path("out/spirv.kpack");
    let old = Library::open(&pack).unwrap();
    let old_fog = old
        .get("Lit", "Forward", &["FOG"], "spirv")
        .unwrap()
        .bytes
        .to_vec();
    let old_skin = old
        .get("Lit", "Forward", &["SKIN"], "spirv")
        .unwrap()
        .bytes
        .to_vec();
    let old_inode = std::fs::metadata(&pack).unwrap().ino();

    let text = LIT.replace("c * 0.25", "c * 0.75");
    std::fs::write(dir.path("lit.wgsl.tmp"), text).unwrap();
    std::fs::rename(dir.path("lit.wgsl.tmp"), dir.path("lit.wgsl")).unwrap();
    let second = next();
    assert_eq!(second["compiled"], 2, "{second}");
    assert_eq!(second["packs_written"], 1, "{second}");
    assert_ne!(
        std::fs::metadata(&pack).unwrap().ino(),
        old_inode,
        "replaced by a rename"
    );
    let new = Library::open(&pack).unwrap();
    new.verify_all().unwrap();
    let loose = std::fs::read(dir.path("out/Lit/Forward/FOG.spv")).unwrap();
    assert_eq!(
        new.get("Lit", "Forward", &["FOG"], "spirv").unwrap().bytes,
        &loose[..]
    );
    assert_ne!(loose, old_fog);
    assert_eq!(
        new.get("Lit", "Forward", &["SKIN"], "spirv").unwrap().bytes,
        &old_skin[..]
    );
    // The reader that mapped the old pack still reads the old bytes, whole.
    assert_eq!(
        old.get("Lit", "Forward", &["FOG"], "spirv").unwrap().bytes,
        &old_fog[..]
    );
    old.verify_all().unwrap();

    // A pack removed behind kiln's back is made again, with nothing compiled.
    let written = std::fs::read(&pack).unwrap();
    std::fs::remove_file(&pack).unwrap();
    let third = next();
    assert_eq!(third["compiled"], 0, "{third}");
    assert_eq!(third["packs_written"], 1, "{third}");
    assert_eq!(std::fs::read(&pack).unwrap(), written);

    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    assert!(child.wait().unwrap().success());
}

/// `kiln watch` without `--json`: stderr lines up to the one that contains `until`.
fn watch_lines(dir: &TempProject, args: &[&str]) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = dir
        .command(env!("CARGO_BIN_EXE_kiln"), "watch")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

fn lines_until(rx: &mpsc::Receiver<String>, end: &str) -> Vec<String> {
    let mut lines = Vec::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no `{end}` after {lines:?}"));
        let done = line.contains(end);
        lines.push(line);
        if done {
            return lines;
        }
    }
}

#[test]
fn watch_says_one_line_per_cause_and_lists_variants_only_when_verbose() {
    let dir = TempProject::from_files([("kiln.toml", MANIFEST), ("lit.wgsl", LIT)]);
    let (mut child, rx) = watch_lines(&dir, &[]);
    // The first build: its summary, then the watching line.
    let first = lines_until(&rx, "watching");
    assert_eq!(first.len(), 2, "{first:?}");
    assert!(
        first[0].starts_with("4 variants: 4 recompiled"),
        "{first:?}"
    );
    std::fs::write(
        dir.path("lit.wgsl.tmp"),
        LIT.replace("c * 0.25", "c * 0.75"),
    )
    .unwrap();
    std::fs::rename(dir.path("lit.wgsl.tmp"), dir.path("lit.wgsl")).unwrap();
    let edit = lines_until(&rx, "variants:");
    assert_eq!(
        edit[..2],
        [
            "changed: lit.wgsl",
            "  lit.wgsl -> 2 recompiled, 2 unchanged"
        ],
        "{edit:?}"
    );
    assert_eq!(edit.len(), 3, "{edit:?}");
    // A manifest field is named as the cause, with the variants it reaches: a define the
    // code never reads changes no text, so all 4 come out unchanged.
    std::fs::write(
        dir.path("kiln.toml"),
        MANIFEST.replace("axes = [", "defines = { QUALITY = 2 }\naxes = ["),
    )
    .unwrap();
    let edit = lines_until(&rx, "variants:");
    assert_eq!(
        edit[..2],
        [
            "changed: kiln.toml",
            "  kiln.toml: shader `Lit`: defines -> 0 recompiled, 4 unchanged"
        ],
        "{edit:?}"
    );
    let _ = child.kill();
    let _ = child.wait();

    let (mut child, rx) = watch_lines(&dir, &["-v"]);
    lines_until(&rx, "watching");
    std::fs::write(
        dir.path("lit.wgsl.tmp"),
        LIT.replace("c * 0.5", "c * 0.125"),
    )
    .unwrap();
    std::fs::rename(dir.path("lit.wgsl.tmp"), dir.path("lit.wgsl")).unwrap();
    let edit = lines_until(&rx, "variants:");
    assert_eq!(
        edit[1], "  lit.wgsl -> 2 recompiled, 2 unchanged",
        "{edit:?}"
    );
    let listed: Vec<&String> = edit
        .iter()
        .filter(|l| l.starts_with("    Lit/Forward["))
        .collect();
    assert_eq!(listed.len(), 2, "{edit:?}");
    assert!(
        listed
            .iter()
            .all(|l| l.contains("SKIN") && l.ends_with("lit.wgsl changed")),
        "{edit:?}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn color_follows_the_flag() {
    let broken = LIT.replace("return c;", "return nothing;");
    let dir = TempProject::from_files([("kiln.toml", MANIFEST), ("lit.wgsl", broken.as_str())]);
    let run = |color: &str| {
        let output = dir
            .command(env!("CARGO_BIN_EXE_kiln"), "build")
            .args(["--color", color])
            .env_remove("NO_COLOR")
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    assert!(run("always").contains("\u{1b}["));
    let plain = run("never");
    assert!(
        plain.contains("error") && !plain.contains("\u{1b}["),
        "{plain}"
    );
}
