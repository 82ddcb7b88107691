//! Garbage collection (least recently used first, under a byte bound) and usage reports.

use std::fs::{self, File};
use std::path::Path;
use std::time::{Duration, SystemTime};

use kiln::store::entry::HEADER_LEN;
use kiln::store::{ArtifactStore, ContentKey, GcReport, LocalStore, Lookup, Namespace};

const PAYLOAD: usize = 1000;
const ENTRY: u64 = (HEADER_LEN + PAYLOAD) as u64;

fn spirv() -> Namespace {
    Namespace::new("spirv", "naga 30.0.0")
}

fn msl() -> Namespace {
    Namespace::new("msl", "naga 30.0.0").with_option("lang_version", "2.4")
}

fn key(i: u32) -> ContentKey {
    ContentKey::hash(format!("gc variant {i}").as_bytes())
}

fn payload(i: u32) -> Vec<u8> {
    vec![i as u8; PAYLOAD]
}

fn set_mtime(path: &Path, time: SystemTime) {
    File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(time)
        .unwrap();
}

fn day_ago() -> SystemTime {
    SystemTime::now() - Duration::from_secs(24 * 3600)
}

/// Saves entries `0..n` in `ns` and ages them: entry `i` was last used `i` minutes after a
/// day ago, so a higher index is more recent.
fn aged_store(store: &LocalStore, ns: &Namespace, n: u32, base: SystemTime) {
    for i in 0..n {
        store.save(ns, &key(i), &payload(i)).unwrap();
        let path = store.entry_path(ns, &key(i));
        set_mtime(&path, base + Duration::from_secs(60 * u64::from(i)));
    }
}

#[test]
fn gc_keeps_the_most_recently_used_entries_under_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    let ns = spirv();
    aged_store(&store, &ns, 10, day_ago());
    // Using the three oldest makes them the most recent.
    for i in 0..3 {
        assert_eq!(store.load(&ns, &key(i)).unwrap(), Lookup::Hit(payload(i)));
    }

    let report = store.gc(5 * ENTRY).unwrap();
    assert_eq!(
        report,
        GcReport {
            scanned: 10,
            removed: 5,
            freed_bytes: 5 * ENTRY,
            remaining_bytes: 5 * ENTRY,
            temps_removed: 0,
        }
    );
    for i in 0..10 {
        let path = store.entry_path(&ns, &key(i));
        let kept = matches!(i, 0..=2 | 8 | 9);
        assert_eq!(path.exists(), kept, "entry {i}");
        if kept {
            assert_eq!(fs::metadata(&path).unwrap().len(), ENTRY);
            assert_eq!(store.load(&ns, &key(i)).unwrap(), Lookup::Hit(payload(i)));
        } else {
            assert_eq!(store.load(&ns, &key(i)).unwrap(), Lookup::Miss);
        }
    }
}

#[test]
fn gc_rounds_down_to_whole_entries() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    aged_store(&store, &spirv(), 4, day_ago());
    // Room for 2.5 entries keeps 2: the bound is never exceeded.
    let report = store.gc(5 * ENTRY / 2).unwrap();
    assert_eq!(report.removed, 2);
    assert_eq!(report.remaining_bytes, 2 * ENTRY);
    assert!(!store.entry_path(&spirv(), &key(1)).exists());
    assert!(store.entry_path(&spirv(), &key(2)).exists());
}

#[test]
fn gc_within_the_bound_removes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    aged_store(&store, &spirv(), 6, day_ago());
    let report = store.gc(6 * ENTRY).unwrap();
    assert_eq!(
        report,
        GcReport {
            scanned: 6,
            removed: 0,
            freed_bytes: 0,
            remaining_bytes: 6 * ENTRY,
            temps_removed: 0,
        }
    );
    for i in 0..6 {
        assert!(store.entry_path(&spirv(), &key(i)).exists());
    }
}

#[test]
fn gc_orders_by_recency_across_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    // msl entries are all older than every spirv entry.
    aged_store(&store, &msl(), 3, day_ago());
    aged_store(&store, &spirv(), 3, day_ago() + Duration::from_secs(3600));
    let report = store.gc(4 * ENTRY).unwrap();
    assert_eq!(report.removed, 2);
    assert!(!store.entry_path(&msl(), &key(0)).exists());
    assert!(!store.entry_path(&msl(), &key(1)).exists());
    assert!(store.entry_path(&msl(), &key(2)).exists());
    for i in 0..3 {
        assert!(store.entry_path(&spirv(), &key(i)).exists());
    }
}

#[test]
fn gc_to_zero_empties_every_namespace_but_keeps_their_descriptions() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    aged_store(&store, &spirv(), 3, day_ago());
    aged_store(&store, &msl(), 2, day_ago());
    let report = store.gc(0).unwrap();
    assert_eq!(report.removed, 5);
    assert_eq!(report.freed_bytes, 5 * ENTRY);
    assert_eq!(report.remaining_bytes, 0);
    assert_eq!(store.usage().unwrap().entries(), 0);
    assert!(store
        .namespace_dir(&spirv())
        .join("namespace.json")
        .exists());
    assert!(store.namespace_dir(&msl()).join("namespace.json").exists());
    // The store still works afterwards.
    store.save(&spirv(), &key(0), &payload(0)).unwrap();
    assert_eq!(
        store.load(&spirv(), &key(0)).unwrap(),
        Lookup::Hit(payload(0))
    );
}

#[test]
fn gc_removes_stale_temporary_files_and_leaves_live_ones_and_strangers() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    store.save(&spirv(), &key(0), &payload(0)).unwrap();
    let shard = store
        .entry_path(&spirv(), &key(0))
        .parent()
        .unwrap()
        .to_path_buf();
    let dead = shard.join(".tmp-dead01");
    let live = shard.join(".tmp-live01");
    let stranger = shard.join("README");
    fs::write(&dead, vec![0u8; 300]).unwrap();
    fs::write(&live, vec![0u8; 200]).unwrap();
    fs::write(&stranger, b"not ours").unwrap();
    set_mtime(
        &dead,
        SystemTime::now() - LocalStore::TEMP_MAX_AGE - Duration::from_secs(60),
    );

    let report = store.gc(u64::MAX).unwrap();
    assert_eq!(
        report,
        GcReport {
            scanned: 1,
            removed: 0,
            freed_bytes: 300,
            remaining_bytes: ENTRY,
            temps_removed: 1,
        }
    );
    assert!(!dead.exists());
    assert!(live.exists());
    assert!(stranger.exists());
    assert!(store.entry_path(&spirv(), &key(0)).exists());
}

#[test]
fn gc_and_usage_of_a_store_that_does_not_exist_are_empty() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path().join("missing"));
    assert_eq!(store.gc(0).unwrap(), GcReport::default());
    assert!(store.usage().unwrap().namespaces.is_empty());
    assert!(!dir.path().join("missing").exists());
}

#[test]
fn usage_counts_entries_and_bytes_per_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    for i in 0..3 {
        store.save(&spirv(), &key(i), &payload(i)).unwrap();
    }
    store.save(&msl(), &key(0), b"tiny").unwrap();
    store.save(&msl(), &key(1), &[]).unwrap();

    let usage = store.usage().unwrap();
    assert_eq!(usage.entries(), 5);
    assert_eq!(
        usage.bytes(),
        3 * ENTRY + (HEADER_LEN as u64 + 4) + HEADER_LEN as u64
    );
    let by_dir = |ns: &Namespace| {
        usage
            .namespaces
            .iter()
            .find(|u| u.dir_name == ns.dir_name())
            .unwrap()
            .clone()
    };
    let spirv_usage = by_dir(&spirv());
    assert_eq!((spirv_usage.entries, spirv_usage.bytes), (3, 3 * ENTRY));
    assert_eq!(spirv_usage.namespace, Some(spirv()));
    let msl_usage = by_dir(&msl());
    assert_eq!(
        (msl_usage.entries, msl_usage.bytes),
        (2, 2 * HEADER_LEN as u64 + 4)
    );
    assert_eq!(msl_usage.namespace, Some(msl()));
    // Sorted by directory name.
    let names: Vec<_> = usage
        .namespaces
        .iter()
        .map(|u| u.dir_name.clone())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
}

#[test]
fn usage_reports_a_namespace_without_description() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    store.save(&spirv(), &key(0), &payload(0)).unwrap();
    fs::remove_file(store.namespace_dir(&spirv()).join("namespace.json")).unwrap();
    let usage = store.usage().unwrap();
    assert_eq!(usage.namespaces.len(), 1);
    assert_eq!(usage.namespaces[0].namespace, None);
    assert_eq!(usage.namespaces[0].entries, 1);
}
