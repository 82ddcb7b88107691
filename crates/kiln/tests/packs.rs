//! `[output] layout = "both"` (issue 27): a build writes one pack per target beside the
//! loose outputs; `kiln_runtime::Library` serves from it exactly the bytes of the loose
//! files; a build that changed nothing neither rewrites nor reads a pack; an edit replaces
//! it atomically (a reader holding the old mapping keeps the old bytes); a pack changed
//! behind kiln's back is rewritten; a pack no longer asked for is removed.

#![cfg(unix)]

mod common;

use common::fill;
use kiln::pipeline::{BuildOptions, Index, Project};
use kiln_runtime::{Library, LookupError};
use kiln_test_support::TempProject;
use std::os::unix::fs::MetadataExt;

const MANIFEST: &str = r#"
[project]
targets = ["spirv", "wgsl"]

[output]
layout = "both"

[[shader]]
name = "Fill"
source = "fill.wgsl"
axes = [["_", "FOG"], ["_", "WIDE"]]

[shader.passes.Main]
stage = "compute"
entry = "main"
"#;

fn fixture(manifest: &str) -> TempProject {
    TempProject::from_files([
        ("kiln.toml", manifest.to_owned()),
        ("fill.wgsl", fill("0.5")),
    ])
}

fn build(project: &mut Project) -> kiln::pipeline::BuildReport {
    let report = project.build(&|_| {}).unwrap();
    assert_eq!(report.failed, 0, "{:?}", report.diagnostics);
    assert_eq!(report.packs_failed, 0, "{:?}", report.diagnostics);
    report
}

/// Every loose output the index lists is served by its target's pack with the same bytes
/// and the index's digest.
fn assert_packs_match_loose_files(f: &TempProject) -> usize {
    let out = f.out_dir();
    let index = Index::read(&out);
    assert_eq!(
        index
            .packs
            .iter()
            .map(|p| p.target.as_str())
            .collect::<Vec<_>>(),
        ["spirv", "wgsl"]
    );
    let mut served = 0;
    for target in ["spirv", "wgsl"] {
        let library = Library::open(out.join(format!("{target}.kpack"))).unwrap();
        library.verify_all().unwrap();
        let entries: Vec<_> = index
            .entries
            .iter()
            .filter(|e| &*e.target == target)
            .collect();
        assert_eq!(library.len(), entries.len());
        for e in entries {
            let keywords: Vec<&str> = e.variant.keywords.iter().map(|k| &**k).collect();
            let v = library
                .get(&e.variant.shader, &e.variant.pass, &keywords, target)
                .unwrap();
            assert_eq!(
                v.bytes,
                std::fs::read(out.join(&*e.path)).unwrap(),
                "{}",
                e.path
            );
            assert_eq!(v.digest, &*e.variant.digest);
            served += 1;
        }
    }
    served
}

fn ino(path: &std::path::Path) -> (u64, i64, i64) {
    let m = std::fs::metadata(path).unwrap();
    (m.ino(), m.mtime(), m.mtime_nsec())
}

#[test]
fn packs_serve_the_loose_bytes_and_a_no_op_build_leaves_them_alone() {
    let f = fixture(MANIFEST);
    let mut project = f.open();
    let first = build(&mut project);
    assert_eq!(first.packs_written, 2);
    assert_eq!(assert_packs_match_loose_files(&f), 8);
    let spirv = f.out_dir().join("spirv.kpack");
    let before = ino(&spirv);

    // Keywords in any order, repeated: the same variant; unknown: an error naming the
    // declared ones.
    let library = Library::open(&spirv).unwrap();
    let a = library
        .get("Fill", "Main", &["WIDE", "FOG"], "spirv")
        .unwrap();
    let b = library
        .get("Fill", "Main", &["FOG", "WIDE", "FOG"], "spirv")
        .unwrap();
    assert_eq!(a.bytes.as_ptr(), b.bytes.as_ptr());
    match library.get("Fill", "Main", &["FOGG"], "spirv") {
        Err(LookupError::UnknownKeyword {
            keyword, declared, ..
        }) => {
            assert_eq!(keyword, "FOGG");
            assert_eq!(declared, ["FOG", "WIDE"]);
        }
        other => panic!("{other:?}"),
    }

    let again = build(&mut project);
    assert_eq!((again.compiled, again.packs_written), (0, 0));
    let reopened = build(&mut f.open());
    assert_eq!((reopened.compiled, reopened.packs_written), (0, 0));
    assert_eq!(
        ino(&spirv),
        before,
        "no build that changed nothing touched the pack"
    );
}

#[test]
fn an_edit_replaces_the_pack_and_an_open_library_keeps_its_bytes() {
    let f = fixture(MANIFEST);
    let mut project = f.open();
    build(&mut project);
    let out = f.out_dir();
    let old = Library::open(out.join("wgsl.kpack")).unwrap();
    let old_fog = old
        .get("Fill", "Main", &["FOG"], "wgsl")
        .unwrap()
        .bytes
        .to_vec();

    std::fs::write(f.path("fill.wgsl"), fill("0.75")).unwrap();
    project.refresh_files(&[f.path("fill.wgsl")]);
    let report = build(&mut project);
    assert_eq!(report.compiled, 2);
    assert_eq!(report.packs_written, 2);
    assert_eq!(assert_packs_match_loose_files(&f), 8);

    let new = Library::open(out.join("wgsl.kpack")).unwrap();
    let new_fog = new.get("Fill", "Main", &["FOG"], "wgsl").unwrap().bytes;
    assert_ne!(new_fog, &old_fog[..]);
    assert!(String::from_utf8_lossy(new_fog).contains("0.75"));
    // The old mapping still reads the old file's bytes.
    assert_eq!(
        old.get("Fill", "Main", &["FOG"], "wgsl").unwrap().bytes,
        &old_fog[..]
    );
    old.verify_all().unwrap();
}

#[test]
fn a_pack_changed_behind_kilns_back_is_rewritten_and_a_clean_build_writes_the_same_bytes() {
    let f = fixture(MANIFEST);
    let mut project = f.open();
    build(&mut project);
    let spirv = f.out_dir().join("spirv.kpack");
    let good = std::fs::read(&spirv).unwrap();
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    std::fs::write(&spirv, &bad).unwrap();
    let report = build(&mut f.open());
    assert_eq!((report.compiled, report.packs_written), (0, 1));
    assert_eq!(std::fs::read(&spirv).unwrap(), good);

    // Deterministic: a clean build elsewhere writes the same pack.
    let other = tempfile::tempdir().unwrap();
    let options = BuildOptions {
        out_dir: Some(other.path().join("out")),
        ..f.options().clone()
    };
    let mut clean = Project::open(&options).unwrap();
    build(&mut clean);
    assert_eq!(
        std::fs::read(other.path().join("out/spirv.kpack")).unwrap(),
        good
    );
}

#[test]
fn a_layout_without_packs_removes_them() {
    let f = fixture(MANIFEST);
    let mut project = f.open();
    build(&mut project);
    assert!(f.out_dir().join("spirv.kpack").exists());
    std::fs::write(
        f.path("kiln.toml"),
        MANIFEST.replace("layout = \"both\"", "layout = \"loose\""),
    )
    .unwrap();
    assert!(project.reload_manifest().unwrap());
    let report = build(&mut project);
    assert_eq!((report.compiled, report.packs_written), (0, 0));
    assert_eq!(report.outputs_removed, 2, "the two packs");
    assert!(!f.out_dir().join("spirv.kpack").exists());
    assert!(!f.out_dir().join("wgsl.kpack").exists());
    assert!(Index::read(&f.out_dir()).packs.is_empty());
}

#[test]
fn a_pack_record_forged_in_index_json_never_reaches_outside_the_output_directory() {
    let f = fixture(MANIFEST);
    build(&mut f.open());
    // A file outside the output directory, and an index that claims it as a pack no longer
    // asked for (its hash is right: whoever forged the index could read the file).
    let victim = f.path("keep.me");
    std::fs::write(&victim, b"precious").unwrap();
    let index_path = f.out_dir().join("index.json");
    let mut index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&index_path).unwrap()).unwrap();
    index["packs"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "target": "msl",
            "path": "../keep.me",
            "bytes": 8,
            "content_hash": blake3::hash(b"precious").to_hex().to_string(),
        }));
    std::fs::write(&index_path, serde_json::to_vec(&index).unwrap()).unwrap();
    let report = build(&mut f.open());
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious", "left alone");
    assert!(
        report
            .diagnostics
            .iter()
            .any(|d| d.message.contains("ignored the pack")),
        "{:?}",
        report.diagnostics
    );
    assert_eq!(assert_packs_match_loose_files(&f), 8);
}
