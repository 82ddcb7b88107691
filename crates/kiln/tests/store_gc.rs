//! Garbage collection (least recently used first, under a byte bound) and usage reports.

use std::time::{SystemTime, UNIX_EPOCH};

use kiln::store::{ArtifactStore, ContentKey, GcReport, LocalStore, Lookup, Namespace};
use rusqlite::Connection;

const PAYLOAD: usize = 1000;
const ENTRY: u64 = PAYLOAD as u64;

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

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn day_ago() -> i64 {
    now() - 24 * 3600
}

fn sql(store: &LocalStore) -> Connection {
    Connection::open(store.database_path()).unwrap()
}

/// Whether the entry's row exists, looked at without loading it (a load counts as a use).
fn present(store: &LocalStore, ns: &Namespace, k: &ContentKey) -> bool {
    sql(store)
        .query_row(
            "SELECT count(*) FROM entries e JOIN namespaces n ON n.id = e.namespace
             WHERE n.name = ?1 AND e.key = ?2",
            (ns.dir_name(), &k.as_bytes()[..]),
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
        == 1
}

/// Saves entries `0..n` in `ns` and ages them: entry `i` was last used `i` minutes after
/// `base`, so a higher index is more recent.
fn aged_store(store: &LocalStore, ns: &Namespace, n: u32, base: i64) {
    for i in 0..n {
        store.save(ns, &key(i), &payload(i)).unwrap();
    }
    let conn = sql(store);
    for i in 0..n {
        let changed = conn
            .execute(
                "UPDATE entries SET last_used = ?1 WHERE key = ?2
                 AND namespace = (SELECT id FROM namespaces WHERE name = ?3)",
                (
                    base + 60 * i64::from(i),
                    &key(i).as_bytes()[..],
                    ns.dir_name(),
                ),
            )
            .unwrap();
        assert_eq!(changed, 1);
    }
}

#[test]
fn gc_keeps_the_most_recently_used_entries_under_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    let ns = spirv();
    aged_store(&store, &ns, 10, day_ago());
    // Using the three oldest makes them the most recent (the hits are buffered; gc writes
    // them before ordering).
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
            database_bytes: store.database_bytes(),
        }
    );
    for i in 0..10 {
        let kept = matches!(i, 0..=2 | 8 | 9);
        assert_eq!(present(&store, &ns, &key(i)), kept, "entry {i}");
        let expected = if kept {
            Lookup::Hit(payload(i))
        } else {
            Lookup::Miss
        };
        assert_eq!(store.load(&ns, &key(i)).unwrap(), expected, "entry {i}");
    }
}

#[test]
fn hits_in_another_process_count_once_it_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let ns = spirv();
    let store = LocalStore::new(dir.path());
    aged_store(&store, &ns, 4, day_ago());
    {
        // Another process's build used entry 0, and ended (flush at the end of a build).
        let other = LocalStore::new(dir.path());
        assert_eq!(other.load(&ns, &key(0)).unwrap(), Lookup::Hit(payload(0)));
        other.flush().unwrap();
    }
    let report = store.gc(2 * ENTRY).unwrap();
    assert_eq!(report.removed, 2);
    assert!(present(&store, &ns, &key(0)));
    assert!(!present(&store, &ns, &key(1)));
    assert!(!present(&store, &ns, &key(2)));
    assert!(present(&store, &ns, &key(3)));
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
    assert!(!present(&store, &spirv(), &key(1)));
    assert!(present(&store, &spirv(), &key(2)));
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
            database_bytes: store.database_bytes(),
        }
    );
    for i in 0..6 {
        assert!(present(&store, &spirv(), &key(i)));
    }
}

#[test]
fn gc_orders_by_recency_across_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    // msl entries are all older than every spirv entry.
    aged_store(&store, &msl(), 3, day_ago());
    aged_store(&store, &spirv(), 3, day_ago() + 3600);
    let report = store.gc(4 * ENTRY).unwrap();
    assert_eq!(report.removed, 2);
    assert!(!present(&store, &msl(), &key(0)));
    assert!(!present(&store, &msl(), &key(1)));
    assert!(present(&store, &msl(), &key(2)));
    for i in 0..3 {
        assert!(present(&store, &spirv(), &key(i)));
    }
}

#[test]
fn gc_to_zero_empties_every_namespace_but_keeps_their_descriptions() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    aged_store(&store, &msl(), 3, day_ago());
    aged_store(&store, &spirv(), 3, day_ago());
    let report = store.gc(0).unwrap();
    assert_eq!(report.removed, 6);
    assert_eq!(report.remaining_bytes, 0);
    let usage = store.usage().unwrap();
    assert_eq!(usage.entries(), 0);
    assert_eq!(usage.namespaces.len(), 2);
    assert!(usage.namespaces.iter().all(|ns| ns.namespace.is_some()));
}

/// The file really shrinks: freed pages go back to the file system and the log is emptied.
#[test]
fn gc_gives_the_space_back_to_the_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    let ns = spirv();
    let keys: Vec<ContentKey> = (0..2000).map(key).collect();
    let bytes: Vec<Vec<u8>> = (0..2000u32)
        .map(|i| {
            let mut b = vec![0u8; 4000];
            blake3::Hasher::new()
                .update(&i.to_le_bytes())
                .finalize_xof()
                .fill(&mut b);
            b
        })
        .collect();
    let entries: Vec<_> = keys
        .iter()
        .zip(&bytes)
        .map(|(k, b)| (&ns, k, &b[..]))
        .collect();
    store.save_many(&entries).unwrap();
    let full = store.gc(u64::MAX).unwrap().database_bytes;
    assert!(full >= 2000 * 4000, "{full}");
    let report = store.gc(100 * 4000).unwrap();
    assert_eq!(report.removed, 1900);
    assert!(
        report.database_bytes < full / 5,
        "{} of {full} bytes left",
        report.database_bytes
    );
    assert_eq!(report.database_bytes, store.database_bytes());
}

#[test]
fn gc_and_usage_of_a_store_that_does_not_exist_are_empty() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path().join("nothing"));
    assert_eq!(store.gc(0).unwrap(), GcReport::default());
    assert!(store.usage().unwrap().namespaces.is_empty());
    assert!(!dir.path().join("nothing").exists());
}

#[test]
fn usage_counts_entries_and_bytes_per_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    for i in 0..3 {
        store.save(&spirv(), &key(i), &payload(i)).unwrap();
    }
    store.save(&msl(), &key(0), b"tiny").unwrap();
    let usage = store.usage().unwrap();
    assert_eq!(usage.entries(), 4);
    assert_eq!(usage.bytes(), 3 * ENTRY + 4);
    let mut names: Vec<&str> = usage
        .namespaces
        .iter()
        .map(|ns| ns.dir_name.as_str())
        .collect();
    let mut expected = vec![spirv().dir_name().to_owned(), msl().dir_name().to_owned()];
    expected.sort();
    names.sort();
    assert_eq!(names, expected);
    let spirv_usage = usage
        .namespaces
        .iter()
        .find(|ns| ns.dir_name == spirv().dir_name())
        .unwrap();
    assert_eq!(spirv_usage.entries, 3);
    assert_eq!(spirv_usage.bytes, 3 * ENTRY);
    assert_eq!(spirv_usage.namespace.as_ref(), Some(&spirv()));
}

#[test]
fn usage_reports_a_namespace_with_an_unreadable_description() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    store.save(&spirv(), &key(0), b"x").unwrap();
    sql(&store)
        .execute("UPDATE namespaces SET description = '{ not json'", [])
        .unwrap();
    let usage = store.usage().unwrap();
    assert_eq!(usage.namespaces.len(), 1);
    assert_eq!(usage.namespaces[0].namespace, None);
    assert_eq!(usage.namespaces[0].entries, 1);
}
