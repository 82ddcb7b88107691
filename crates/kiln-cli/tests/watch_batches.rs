//! `kiln watch` against file-event batches, synchronised on marker files through the hidden
//! `--report-batches` flag: edits that arrive with a broken manifest are kept, the broken
//! manifest is reported once, kiln's own writes trigger nothing, and outputs outside the
//! project are restored (issue 8, issue 9 item 7).

use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

const MANIFEST: &str = r#"
[project]
targets = ["wgsl"]

[[shader]]
name = "Fill"
source = "fill.wgsl"
axes = [["_", "FOG"]]

[shader.passes.Main]
stage = "compute"
entry = "main"
"#;

const FILL: &str = r#"#include "inc/k.wgsl"
@group(0) @binding(0) var<storage, read_write> data: array<f32>;
@compute @workgroup_size(1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    data[id.x] = K;
}
"#;

struct Watch {
    dir: tempfile::TempDir,
    out: PathBuf,
    child: Child,
    lines: Receiver<Value>,
    markers: usize,
}

impl Watch {
    fn start(out_outside: bool) -> (Self, Option<tempfile::TempDir>) {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("kiln.toml"), MANIFEST);
        write(&dir.path().join("fill.wgsl"), FILL);
        write(&dir.path().join("inc/k.wgsl"), "const K: f32 = 1.0;\n");
        // Before watching starts: a file made at once in a new directory can beat the
        // watcher's watch on that directory.
        std::fs::create_dir_all(dir.path().join(".sync")).unwrap();
        let outside = out_outside.then(|| tempfile::tempdir().unwrap());
        let out = match &outside {
            Some(o) => o.path().join("out"),
            None => dir.path().join("out"),
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(["watch", "--json", "--report-batches", "--manifest"])
            .arg(dir.path().join("kiln.toml"))
            .arg("--out")
            .arg(&out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if std::env::var_os("WATCH_TEST_DEBUG").is_some() {
                    eprintln!("{line}");
                }
                let Ok(value) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        let watch = Watch {
            dir,
            out,
            child,
            lines,
            markers: 0,
        };
        let first = watch.next();
        assert_eq!(first["failed"], 0, "{first}");
        (watch, outside)
    }

    fn next(&self) -> Value {
        self.lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| {
                panic!(
                    "kiln watch said nothing ({e}) in {}",
                    self.dir.path().display()
                )
            })
    }

    /// Writes a marker and returns the rebuild reports printed before its batch was handled.
    fn sync(&mut self) -> Vec<Value> {
        self.markers += 1;
        let name = format!("marker-{}", self.markers);
        write(&self.dir.path().join(".sync").join(&name), "");
        let mut reports = Vec::new();
        loop {
            let line = self.next();
            match line.get("batch").and_then(Value::as_array) {
                Some(paths) if paths.iter().any(|p| p.as_str().unwrap().ends_with(&name)) => {
                    return reports
                }
                Some(_) => {}
                None => reports.push(line),
            }
        }
    }

    fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status:?}");
        let mut stderr = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        stderr
    }
}

impl Drop for Watch {
    /// A failed test must not leave its watcher running.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // Atomically, as editors do.
    let temp = path.with_extension("kiln-test-tmp");
    std::fs::write(&temp, text).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

#[test]
fn an_edit_in_the_batch_of_a_broken_manifest_is_built_once_it_is_fixed() {
    let (mut w, _) = Watch::start(false);
    let output = w.out.join("Fill/Main/_.wgsl");
    let before = std::fs::read_to_string(&output).unwrap();
    assert!(before.contains("K: f32 = 1f"), "{before}");
    // The manifest breaks, and the include changes (in its batch or the next).
    write(&w.dir.path().join("kiln.toml"), "[project\n");
    write(&w.dir.path().join("inc/k.wgsl"), "const K: f32 = 3.0;\n");
    assert!(w.sync().is_empty(), "no build while the manifest is broken");
    // More events while it is broken: the error is not repeated.
    for _ in 0..3 {
        write(&w.dir.path().join("fill.wgsl"), FILL);
        assert!(w.sync().is_empty());
    }
    write(&w.dir.path().join("kiln.toml"), MANIFEST);
    let reports = w.sync();
    assert_eq!(reports.len(), 1, "{reports:?}");
    // The two variants share a text (no FOG code): one compile, one deduplicated.
    assert_eq!(reports[0]["compiled"], 1, "{}", reports[0]);
    assert_eq!(reports[0]["deduplicated"], 1, "{}", reports[0]);
    assert_eq!(
        reports[0]["files_changed"][0], "inc/k.wgsl",
        "{}",
        reports[0]
    );
    let after = std::fs::read_to_string(&output).unwrap();
    assert!(after.contains("K: f32 = 3f"), "{after}");
    let stderr = w.stop();
    let errors = stderr.matches("error").count();
    assert_eq!(errors, 1, "the broken manifest is reported once: {stderr}");
}

#[test]
fn kilns_own_writes_trigger_no_rebuild() {
    let (mut w, _) = Watch::start(false);
    // A rebuild that writes and removes outputs: an axis dropped.
    write(
        &w.dir.path().join("kiln.toml"),
        &MANIFEST.replace("[\"_\", \"FOG\"]", "[\"_\"]"),
    );
    let reports = w.sync();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0]["outputs_removed"], 1, "{}", reports[0]);
    // The events of that rebuild's own writes and removals come later: nothing to do.
    std::thread::sleep(Duration::from_millis(200));
    assert!(w.sync().is_empty(), "a spurious rebuild");
    w.stop();
}

#[test]
fn outputs_outside_the_project_changed_behind_kilns_back_are_restored() {
    let (mut w, outside) = Watch::start(true);
    assert!(outside.is_some());
    let output = w.out.join("Fill/Main/FOG.wgsl");
    let good = std::fs::read(&output).unwrap();
    std::fs::remove_file(&output).unwrap();
    // The deletion happens outside the project: wait for its event, then sync.
    std::thread::sleep(Duration::from_millis(200));
    let reports = w.sync();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0]["compiled"], 0, "{}", reports[0]);
    assert_eq!(std::fs::read(&output).unwrap(), good);
    // Same size, other bytes.
    let mut bad = good.clone();
    bad[0] ^= 0x20;
    std::fs::write(&output, &bad).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let reports = w.sync();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(std::fs::read(&output).unwrap(), good);
    w.stop();
}
