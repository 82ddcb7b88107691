//! Builds under a memory bound too small to keep any artifact in memory (issue 12): every
//! variant is still compiled exactly once, identical texts still compile once, every output
//! is written with the bytes of a clean build, and nothing is reloaded or recompiled
//! because the variant cache let go of it. Artifact bytes need not stay resident once
//! written: the outputs and the store hold them.

mod common;

use common::fill;
use kiln::pipeline::{BuildOptions, BuildReport, Outcome, Project};
use kiln_test_support::{tree, TempProject};
use std::collections::BTreeMap;
use std::path::Path;

/// Four keyword sets per pass; `SAME` changes no text, so half the variants are twins of
/// the other half.
const MANIFEST: &str = r#"
[project]
targets = ["spirv", "wgsl"]

[[shader]]
name = "Fill"
source = "fill.wgsl"
axes = [["_", "FOG"], ["_", "WIDE"], ["_", "SAME"]]

[shader.passes.Main]
stage = "compute"
entry = "main"
"#;

/// The outputs under `dir`: not the index, not the stat records.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = tree(dir);
    files.retain(|path, _| !path.ends_with(".json") && !path.ends_with(".kiln-stat"));
    files
}

fn open(root: &Path, name: &str, max_memory: Option<u64>, jobs: usize) -> Project {
    Project::open(&BuildOptions {
        manifest: root.join("kiln.toml"),
        out_dir: Some(root.join(name).join("out")),
        cache_dir: Some(root.join(name).join("cache")),
        jobs: Some(jobs),
        max_memory,
        keep_failed_outputs: false,
        ..BuildOptions::default()
    })
    .unwrap()
}

fn build(project: &mut Project) -> BuildReport {
    let report = project.build(&|_| {}).unwrap();
    assert_eq!(report.failed, 0, "{:?}", report.diagnostics);
    report
}

fn store_entries(cache: &Path) -> i64 {
    let db = rusqlite::Connection::open(cache.join("store.sqlite")).unwrap();
    db.query_row("SELECT count(*) FROM entries", [], |row| row.get(0))
        .unwrap()
}

#[test]
fn a_bound_that_holds_no_artifact_still_compiles_each_text_once_and_writes_every_output() {
    let p = TempProject::from_files([
        ("kiln.toml", MANIFEST.to_owned()),
        ("fill.wgsl", fill("0.5")),
    ]);
    let root = p.root();

    for jobs in [1, 2] {
        let name = format!("tiny{jobs}");
        // One byte: the variant cache keeps nothing, deferred saves are written at once.
        let mut tiny = open(root, &name, Some(1), jobs);
        let report = build(&mut tiny);
        assert_eq!(report.variants, 8);
        assert_eq!(
            report.compiled, 4,
            "one compile per distinct text (jobs={jobs})"
        );
        assert_eq!(report.deduplicated, 4, "the SAME twins (jobs={jobs})");
        assert_eq!(report.outputs_written, 16);
        assert!(tiny.cache_stats().evicted >= 4, "nothing stays in memory");
        assert_eq!(store_entries(&root.join(&name).join("cache")), 8);

        let mut clean = open(root, "clean", None, 1);
        build(&mut clean);
        let clean_files = files(&root.join("clean").join("out"));
        assert_eq!(files(&root.join(&name).join("out")), clean_files);

        // Nothing changed: nothing is compiled or written again.
        let again = build(&mut tiny);
        assert_eq!((again.compiled, again.outputs_written), (0, 0));

        // An edit of the FOG block: its two distinct texts compile, their twins follow.
        std::fs::write(root.join("fill.wgsl"), fill("0.75")).unwrap();
        tiny.refresh_files(&[root.join("fill.wgsl")]);
        let edit = build(&mut tiny);
        assert_eq!(edit.compiled, 2, "{:?}", edit.recompiled);
        assert_eq!(edit.deduplicated, 2);
        assert_eq!(edit.outputs_written, 8);
        std::fs::remove_dir_all(root.join("clean")).unwrap();
        let mut clean = open(root, "clean", None, 1);
        build(&mut clean);
        assert_eq!(
            files(&root.join(&name).join("out")),
            files(&root.join("clean").join("out"))
        );
        std::fs::remove_dir_all(root.join("clean")).unwrap();
        std::fs::write(root.join("fill.wgsl"), fill("0.5")).unwrap();
    }
}

/// Eleven axes, of which only `FOG` changes the text: 2,048 variants, two distinct texts.
/// A build works through variants a chunk (1,024) at a time and keeps of a finished job only
/// its outcome: twins in later chunks must still be counted as deduplicated, not compiled,
/// not cached, with every output written, with and without room for artifacts in memory.
#[test]
fn twins_in_later_chunks_of_a_build_are_deduplicated_against_settled_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let axes: Vec<String> = ["FOG", "A", "B", "C", "D", "E", "F", "G", "H", "I", "J"]
        .iter()
        .map(|k| format!(r#"["_", "{k}"]"#))
        .collect();
    std::fs::write(
        root.join("kiln.toml"),
        format!(
            r#"
[project]
targets = ["spirv"]

[[shader]]
name = "Fill"
source = "fill.wgsl"
axes = [{}]

[shader.passes.Main]
stage = "compute"
entry = "main"
"#,
            axes.join(", ")
        ),
    )
    .unwrap();
    std::fs::write(root.join("fill.wgsl"), fill("0.5")).unwrap();
    for max_memory in [None, Some(1)] {
        let name = format!("m{max_memory:?}");
        let mut project = open(root, &name, max_memory, 2);
        let report = build(&mut project);
        assert_eq!(report.variants, 2048);
        assert_eq!(
            (report.compiled, report.deduplicated, report.cached),
            (2, 2046, 0),
            "{max_memory:?}"
        );
        assert_eq!(report.outputs_written, 2048);
        assert_eq!(store_entries(&root.join(&name).join("cache")), 2);
        // Every variant's outcome, under its own name, across both chunks.
        let named: std::collections::BTreeSet<String> =
            report.outcomes.keys().map(|v| v.to_string()).collect();
        assert_eq!((report.outcomes.len(), named.len()), (2048, 2048));
        let compiled: Vec<bool> = report
            .outcomes
            .iter()
            .filter(|(_, outcome)| **outcome == Outcome::Compiled)
            .map(|(v, _)| v.keywords.iter().any(|k| &**k == "FOG"))
            .collect();
        assert_eq!(compiled.len(), 2);
        assert_ne!(
            compiled[0], compiled[1],
            "one compile per text: with FOG and without"
        );

        std::fs::write(root.join("fill.wgsl"), fill("0.75")).unwrap();
        project.refresh_files(&[root.join("fill.wgsl")]);
        let edit = build(&mut project);
        assert_eq!(
            (edit.compiled, edit.deduplicated, edit.outputs_written),
            (1, 1023, 1024),
            "{max_memory:?}: the FOG half changed text; the other half's is cut off early"
        );
        std::fs::write(root.join("fill.wgsl"), fill("0.5")).unwrap();
    }
}
