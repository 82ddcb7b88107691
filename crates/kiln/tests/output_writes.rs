//! What a build does to the output directory's files (issue 12): an output whose bytes did
//! not change is not touched (same inode, same modification time), a changed one is replaced
//! atomically by a rename or a swap (another inode: a hot-reloading reader holding the old
//! file never sees it half-written), nothing but the outputs, `index.json` and `.kiln-stat`
//! is left in the directory, and a variant whose text an edit did not change takes its
//! outputs' sizes and hashes from the store's record without loading their bytes.

#![cfg(unix)]

mod common;

use common::fill;
use kiln::pipeline::{BuildOptions, Project};
use kiln_test_support::TempProject;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

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

fn fixture() -> TempProject {
    TempProject::from_files([
        ("kiln.toml", MANIFEST.to_owned()),
        ("fill.wgsl", fill("0.5")),
    ])
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
    let f = fixture();
    let mut project = f.open();
    let first = build(&mut project);
    assert_eq!(first.outputs_written, 8);
    let before = snapshot(&f.out_dir());
    assert_only_outputs(&before, 8);

    // Only the FOG variants' texts change.
    std::fs::write(f.path("fill.wgsl"), fill("0.75")).unwrap();
    project.refresh_files(&[f.path("fill.wgsl")]);
    let report = build(&mut project);
    assert_eq!(report.compiled, 2, "the two FOG variants");
    assert_eq!(report.outputs_written, 4, "their two targets each");
    let after = snapshot(&f.out_dir());
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
    let f = fixture();
    let mut project = f.open();
    build(&mut project);
    let before = snapshot(&f.out_dir());

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
    let after = snapshot(&f.out_dir());
    assert_only_outputs(&after, 8);
    assert_eq!(outputs(&after), outputs(&before), "no output touched");
    assert_ne!(
        after["index.json"].bytes, before["index.json"].bytes,
        "the index records the new revision"
    );
}

#[test]
fn a_new_process_without_recorded_stats_rehashes_and_rewrites_nothing() {
    let f = fixture();
    build(&mut f.open());
    let before = snapshot(&f.out_dir());
    // Without `.kiln-stat` nothing proves the files by their stat: each is read and hashed.
    std::fs::remove_file(f.out_dir().join(".kiln-stat")).unwrap();
    let report = build(&mut f.open());
    assert_eq!(report.compiled, 0);
    assert_eq!(report.outputs_written, 0);
    let after = snapshot(&f.out_dir());
    assert_only_outputs(&after, 8);
    assert_eq!(outputs(&after), outputs(&before), "no output touched");
}

/// A local store that counts the artifacts it loads (bytes read and verified) and the
/// records it was asked for (size and hash only).
struct CountingStore {
    inner: kiln::store::LocalStore,
    loads: std::sync::atomic::AtomicUsize,
    records: std::sync::atomic::AtomicUsize,
}

impl kiln::store::ArtifactStore for CountingStore {
    fn load(
        &self,
        ns: &kiln::store::Namespace,
        key: &kiln::store::ContentKey,
    ) -> Result<kiln::store::Lookup, kiln::store::StoreError> {
        self.loads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.load(ns, key)
    }

    fn recorded(
        &self,
        ns: &kiln::store::Namespace,
        key: &kiln::store::ContentKey,
    ) -> Option<(u64, kiln::store::ContentKey)> {
        self.records
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.recorded(ns, key)
    }

    fn save(
        &self,
        ns: &kiln::store::Namespace,
        key: &kiln::store::ContentKey,
        bytes: &[u8],
    ) -> Result<(), kiln::store::StoreError> {
        self.inner.save(ns, key, bytes)
    }

    fn save_many(
        &self,
        entries: &[kiln::store::SaveEntry<'_>],
    ) -> Result<(), kiln::store::SaveManyError> {
        self.inner.save_many(entries)
    }

    fn flush(&self) -> Result<(), kiln::store::StoreError> {
        self.inner.flush()
    }
}

/// With no room for artifacts in memory (as in a large project, where the variant cache
/// holds a small share of them), so that every artifact comes from the store.
fn open_counting(f: &TempProject) -> (Project, std::sync::Arc<CountingStore>) {
    let options = BuildOptions {
        manifest: f.path("kiln.toml"),
        jobs: Some(2),
        max_memory: Some(1),
        ..BuildOptions::default()
    };
    let cache = f.path(".kiln");
    let store = std::sync::Arc::new(CountingStore {
        inner: kiln::store::LocalStore::new(&cache),
        loads: Default::default(),
        records: Default::default(),
    });
    let manifest = kiln::manifest::Manifest::load(&options.manifest).unwrap();
    let project = Project::with_store(manifest, &options, store.clone(), cache).unwrap();
    (project, store)
}

fn counts(store: &CountingStore) -> (usize, usize) {
    use std::sync::atomic::Ordering::Relaxed;
    (store.loads.swap(0, Relaxed), store.records.swap(0, Relaxed))
}

#[test]
fn variants_an_edit_left_unchanged_take_the_stores_record_and_load_no_bytes() {
    let f = fixture();
    let (mut project, store) = open_counting(&f);
    build(&mut project);
    let before = outputs(&snapshot(&f.out_dir()));
    assert_eq!(before.len(), 8);
    let index_before = kiln::pipeline::Index::read(&f.out_dir());
    counts(&store);

    // A comment: a new source revision for every variant, the same text for naga. The
    // texts are derived again and found equal, so the artifacts are not looked up at all:
    // no record read, no bytes loaded; the index names the new revision.
    let source = f.path("fill.wgsl");
    std::fs::write(&source, format!("// edited\n{}", fill("0.5"))).unwrap();
    project.refresh_files(std::slice::from_ref(&source));
    let report = build(&mut project);
    assert_eq!(report.compiled, 0, "{report:?}");
    assert_eq!(report.outputs_written, 0);
    assert_eq!(report.early_cutoff, 4, "{report:?}");
    assert_eq!(counts(&store), (0, 0), "no record read, no bytes loaded");
    assert_eq!(
        outputs(&snapshot(&f.out_dir())),
        before,
        "outputs untouched"
    );
    let index = kiln::pipeline::Index::read(&f.out_dir());
    assert_eq!(index.entries.len(), 8);
    for (entry, old) in index.entries.iter().zip(&index_before.entries) {
        assert_eq!(entry.path, old.path);
        assert_ne!(
            entry.variant.revision, old.variant.revision,
            "{}",
            entry.path
        );
        assert_ne!(entry.variant.inputs, old.variant.inputs, "{}", entry.path);
        assert_ne!(entry.variant.digest, old.variant.digest, "{}", entry.path);
    }
    for entry in &index.entries {
        let seen = &before[&*entry.path];
        assert_eq!(entry.bytes, seen.bytes.len() as u64);
        assert_eq!(
            entry.content_hash,
            kiln::store::ContentKey::hash(&seen.bytes)
        );
    }

    // An output deleted behind kiln's back, seen by a new process: its bytes are loaded
    // from the store (verified), not compiled, and are the same bytes.
    drop(project);
    let gone = index.entries[0].path.to_string();
    std::fs::remove_file(f.out_dir().join(&gone)).unwrap();
    let (mut project, store) = open_counting(&f);
    let report = build(&mut project);
    assert_eq!(report.compiled, 0, "{report:?}");
    assert_eq!(report.outputs_written, 1);
    let (loads, _) = counts(&store);
    assert!(
        (1..=2).contains(&loads),
        "only the deleted output's variant loads: {loads}"
    );
    assert_eq!(
        outputs(&snapshot(&f.out_dir()))[&gone].bytes,
        before[&gone].bytes
    );
}

#[test]
fn a_new_process_trusts_each_output_by_its_own_stat_across_many_variants() {
    // 40 variants, more than one thread's share of the stats taken ahead (freshness.rs): a
    // stat filed under another output would distrust outputs that did not change (work)
    // or, were it ever trusted, serve one that did.
    let f = fixture();
    let levels: Vec<String> = (0..10).map(|i| format!("\"L{i}\"")).collect();
    let manifest = MANIFEST.replace(
        r#"axes = [["_", "FOG"], ["_", "WIDE"]]"#,
        &format!(
            r#"axes = [["_", "FOG"], ["_", "WIDE"], [{}]]"#,
            levels.join(", ")
        ),
    );
    std::fs::write(f.path("kiln.toml"), manifest).unwrap();
    let (mut first, _) = open_counting(&f);
    assert_eq!(build(&mut first).variants, 40);
    drop(first);
    let before = outputs(&snapshot(&f.out_dir()));
    assert_eq!(before.len(), 80);
    // A stat sealed less than 0.1 s after its file was written proves nothing (stat.rs,
    // `RACY_NS`): a build later than that seals these for good.
    std::thread::sleep(std::time::Duration::from_millis(150));
    let (mut sealing, _) = open_counting(&f);
    assert_eq!(build(&mut sealing).outputs_written, 0);
    drop(sealing);

    let (mut fresh, store) = open_counting(&f);
    let report = build(&mut fresh);
    assert_eq!(report.outputs_written, 0);
    assert_eq!(counts(&store), (0, 0), "every output current by its stat");
    drop(fresh);

    // One output of a variant far from the first changed behind kiln's back.
    let (last, _) = before.iter().next_back().unwrap();
    std::fs::write(f.out_dir().join(last), b"not what kiln wrote").unwrap();
    let (mut fresh, store) = open_counting(&f);
    let report = build(&mut fresh);
    assert_eq!(report.outputs_written, 1);
    let (loads, records) = counts(&store);
    assert!(
        loads + records <= 4,
        "only the changed output's variant is looked up: {loads} loads, {records} records"
    );
    let after = outputs(&snapshot(&f.out_dir()));
    assert_eq!(after[last].bytes, before[last].bytes);
    for (path, seen) in &before {
        if path != last {
            assert_eq!(&after[path], seen, "{path} was touched");
        }
    }
}
