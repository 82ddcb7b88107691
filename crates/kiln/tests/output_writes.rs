//! What a build does to the output directory's files (issue 12): an output whose bytes did
//! not change is not touched (same inode, same modification time), a changed one is replaced
//! atomically by a rename (a new inode: a hot-reloading reader holding the old file never
//! sees it half-written), and nothing but the outputs, `index.json` and `.kiln-stat` is left
//! in the directory.

#![cfg(unix)]

use kiln::pipeline::{BuildOptions, Project};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const MANIFEST: &str = r#"
[project]
targets = ["spirv", "wgsl"]

[[shader]]
name = "Fill"
source = "fill.wgsl"
axes = [["_", "FOG"], ["_", "WIDE"]]
defines = { Q = 1 }

[shader.passes.Main]
stage = "compute"
entry = "main"
"#;

fn fill(fog_value: &str) -> String {
    format!(
        r#"@group(0) @binding(0) var<storage, read_write> data: array<f32>;

@compute @workgroup_size(1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {{
    var v: f32 = 1.0;
#ifdef FOG
    v = v + {fog_value};
#endif
#ifdef WIDE
    v = v * 4.0;
#endif
    data[id.x] = v;
}}
"#
    )
}

/// Inode, modification time (ns) and bytes of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    ino: u64,
    mtime_ns: i128,
    bytes: Vec<u8>,
}

/// Every file under `dir`, by relative path.
fn snapshot(dir: &Path) -> BTreeMap<String, Seen> {
    fn walk(root: &Path, dir: &Path, into: &mut BTreeMap<String, Seen>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                walk(root, &path, into);
                continue;
            }
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            into.insert(
                relative,
                Seen {
                    ino: meta.ino(),
                    mtime_ns: i128::from(meta.mtime()) * 1_000_000_000
                        + i128::from(meta.mtime_nsec()),
                    bytes: std::fs::read(&path).unwrap(),
                },
            );
        }
    }
    let mut files = BTreeMap::new();
    walk(dir, dir, &mut files);
    files
}

/// The outputs only (not `index.json`, not `.kiln-stat`).
fn outputs(files: &BTreeMap<String, Seen>) -> BTreeMap<String, Seen> {
    files
        .iter()
        .filter(|(path, _)| path.contains('/'))
        .map(|(p, s)| (p.clone(), s.clone()))
        .collect()
}

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kiln.toml"), MANIFEST).unwrap();
        std::fs::write(dir.path().join("fill.wgsl"), fill("0.5")).unwrap();
        Self { dir }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    fn open(&self) -> Project {
        Project::open(&BuildOptions {
            manifest: self.path("kiln.toml"),
            jobs: Some(2),
            ..BuildOptions::default()
        })
        .unwrap()
    }

    fn out(&self) -> PathBuf {
        self.path("out")
    }
}

fn build(project: &mut Project) -> kiln::pipeline::BuildReport {
    let report = project.build(&|_| {}).unwrap();
    assert_eq!(report.failed, 0, "{:?}", report.diagnostics);
    report
}

/// The directory holds the outputs, `index.json` and `.kiln-stat`, and nothing else (no
/// temporary file, no other file per output).
fn assert_only_outputs(files: &BTreeMap<String, Seen>, outputs_expected: usize) {
    let names: Vec<&String> = files.keys().collect();
    assert_eq!(files.len(), outputs_expected + 2, "{names:?}");
    assert!(files.contains_key("index.json"), "{names:?}");
    assert!(files.contains_key(".kiln-stat"), "{names:?}");
    assert!(
        files
            .keys()
            .all(|p| !p.contains(".kiln-tmp") && !p.contains(".tmp")),
        "{names:?}"
    );
}

#[test]
fn an_edit_replaces_exactly_the_changed_outputs_by_rename_and_touches_no_other() {
    let f = Fixture::new();
    let mut project = f.open();
    let first = build(&mut project);
    assert_eq!(first.outputs_written, 8);
    let before = snapshot(&f.out());
    assert_only_outputs(&before, 8);

    // Only the FOG variants' texts change.
    std::fs::write(f.path("fill.wgsl"), fill("0.75")).unwrap();
    project.refresh_files(&[f.path("fill.wgsl")]);
    let report = build(&mut project);
    assert_eq!(report.compiled, 2, "the two FOG variants");
    assert_eq!(report.outputs_written, 4, "their two targets each");
    let after = snapshot(&f.out());
    assert_only_outputs(&after, 8);

    for (path, old) in outputs(&before) {
        let new = &after[&path];
        if path.contains("FOG") {
            assert_ne!(new.bytes, old.bytes, "{path} has new bytes");
            assert_ne!(
                new.ino, old.ino,
                "{path} was replaced by a rename, not written in place"
            );
        } else {
            assert_eq!(*new, old, "{path} was not touched");
        }
    }
}

#[test]
fn a_new_revision_with_the_same_bytes_touches_no_output() {
    let f = Fixture::new();
    let mut project = f.open();
    build(&mut project);
    let before = snapshot(&f.out());

    // A define no conditional tests: a new source revision (every index entry's stamp
    // changes), the same bytes for every output.
    let manifest = std::fs::read_to_string(f.path("kiln.toml")).unwrap();
    std::fs::write(
        f.path("kiln.toml"),
        manifest.replace("defines = { Q = 1 }", "defines = { Q = 1, UNUSED = 7 }"),
    )
    .unwrap();
    assert!(project.reload_manifest().unwrap());
    let report = build(&mut project);
    assert_eq!(report.outputs_written, 0);
    let after = snapshot(&f.out());
    assert_only_outputs(&after, 8);
    assert_eq!(outputs(&after), outputs(&before), "no output touched");
    assert_ne!(
        after["index.json"].bytes, before["index.json"].bytes,
        "the index records the new revision"
    );
}

#[test]
fn a_new_process_without_recorded_stats_rehashes_and_rewrites_nothing() {
    let f = Fixture::new();
    build(&mut f.open());
    let before = snapshot(&f.out());
    // Without `.kiln-stat` nothing proves the files by their stat: each is read and hashed.
    std::fs::remove_file(f.out().join(".kiln-stat")).unwrap();
    let report = build(&mut f.open());
    assert_eq!(report.compiled, 0);
    assert_eq!(report.outputs_written, 0);
    let after = snapshot(&f.out());
    assert_only_outputs(&after, 8);
    assert_eq!(outputs(&after), outputs(&before), "no output touched");
}
