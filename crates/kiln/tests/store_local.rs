//! The local SQLite store: layout, namespaces, corruption handling, damaged databases,
//! batched recency, the old file-per-entry layout.
//!
//! Damage is done the way it happens: through a second SQLite connection (a row's bytes
//! changed behind kiln's back) or by writing the database file itself.

use std::fs;
use std::path::{Path, PathBuf};

use kiln::store::{
    ArtifactStore, ContentKey, CorruptReason, LocalStore, Lookup, Namespace, StoreError,
};
use rusqlite::Connection;

fn spirv() -> Namespace {
    Namespace::new("spirv", "naga 30.0.0")
}

fn key(i: u32) -> ContentKey {
    ContentKey::hash(format!("variant {i}").as_bytes())
}

/// Distinct, non-repeating bytes per index, so a mix-up between entries cannot pass.
fn payload(i: u32, len: usize) -> Vec<u8> {
    let seed = blake3::hash(&i.to_le_bytes());
    let mut out = vec![0u8; len];
    blake3::Hasher::new()
        .update(seed.as_bytes())
        .finalize_xof()
        .fill(&mut out);
    out
}

/// A second connection to the store's database, as another tool would open it.
fn sql(store: &LocalStore) -> Connection {
    Connection::open(store.database_path()).unwrap()
}

fn names_under(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn round_trip_writes_one_checksummed_row_in_one_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path().join(".kiln"));
    let ns = spirv();
    let k = key(1);
    let bytes = payload(1, 1000);

    assert_eq!(store.load(&ns, &k).unwrap(), Lookup::Miss);
    store.save(&ns, &k, &bytes).unwrap();
    assert_eq!(store.load(&ns, &k).unwrap(), Lookup::Hit(bytes.clone()));
    assert_eq!(
        store.database_path(),
        dir.path().join(".kiln").join("store.sqlite")
    );

    let (size, checksum, stored, description): (i64, Vec<u8>, Vec<u8>, String) = sql(&store)
        .query_row(
            "SELECT e.size, e.checksum, e.payload, n.description
             FROM entries e JOIN namespaces n ON n.id = e.namespace
             WHERE n.name = ?1 AND e.key = ?2",
            (ns.dir_name(), &k.as_bytes()[..]),
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(size, 1000);
    assert_eq!(checksum, blake3::hash(&bytes).as_bytes().to_vec());
    assert_eq!(stored, bytes);
    assert_eq!(Namespace::from_json(&description).unwrap(), ns);
    // One database (and SQLite's write-ahead log and its index while it is open); no file
    // per entry.
    let names = names_under(&dir.path().join(".kiln"));
    assert!(
        names.iter().all(|n| n.starts_with("store.sqlite")),
        "{names:?}"
    );
    let (mode, app, version): (String, i64, i64) = {
        let conn = sql(&store);
        (
            conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap(),
            conn.query_row("PRAGMA application_id", [], |r| r.get(0))
                .unwrap(),
            conn.query_row("PRAGMA user_version", [], |r| r.get(0))
                .unwrap(),
        )
    };
    assert_eq!(mode, "wal");
    assert_eq!(app, 0x4B49_4C4E);
    assert_eq!(version, 1);
}

#[test]
fn empty_payload_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    store.save(&spirv(), &key(0), &[]).unwrap();
    assert_eq!(
        store.load(&spirv(), &key(0)).unwrap(),
        Lookup::Hit(Vec::new())
    );
}

#[test]
fn loading_from_a_store_that_does_not_exist_is_a_miss_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("never-saved");
    let store = LocalStore::new(&root);
    assert_eq!(store.load(&spirv(), &key(7)).unwrap(), Lookup::Miss);
    store.flush().unwrap();
    drop(store);
    assert!(!root.exists());
}

#[test]
fn namespaces_are_isolated_by_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    let base = spirv();
    let others = [
        Namespace::new("msl", "naga 30.0.0"),
        Namespace::new("spirv", "naga 31.0.0"),
        spirv().with_kiln_version("0.0.0-other"),
        spirv().with_option("lang_version", "1.5"),
        spirv().with_capability("float64"),
    ];
    let k = key(3);
    store.save(&base, &k, b"base artifact").unwrap();
    for other in &others {
        assert_ne!(other.dir_name(), base.dir_name(), "{other:?}");
        assert_eq!(store.load(other, &k).unwrap(), Lookup::Miss, "{other:?}");
    }
    for (i, other) in others.iter().enumerate() {
        store
            .save(other, &k, format!("artifact {i}").as_bytes())
            .unwrap();
    }
    assert_eq!(
        store.load(&base, &k).unwrap(),
        Lookup::Hit(b"base artifact".to_vec())
    );
    for (i, other) in others.iter().enumerate() {
        assert_eq!(
            store.load(other, &k).unwrap(),
            Lookup::Hit(format!("artifact {i}").into_bytes())
        );
    }
    let usage = store.usage().unwrap();
    assert_eq!(usage.namespaces.len(), others.len() + 1);
    assert!(usage.namespaces.iter().all(|ns| ns.entries == 1
        && ns.namespace.as_ref().map(Namespace::dir_name) == Some(&ns.dir_name)));
}

#[test]
fn resaving_a_key_replaces_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    store.save(&spirv(), &key(1), b"first").unwrap();
    store.save(&spirv(), &key(1), b"second, longer").unwrap();
    assert_eq!(
        store.load(&spirv(), &key(1)).unwrap(),
        Lookup::Hit(b"second, longer".to_vec())
    );
    assert_eq!(store.usage().unwrap().entries(), 1);
}

#[test]
fn save_many_writes_every_entry_in_few_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    let ns = spirv();
    let msl = Namespace::new("msl", "naga 30.0.0");
    // 3,000 entries of 4 KiB: more than one batch by count (2,048) and by bytes (8 MiB).
    let keys: Vec<ContentKey> = (0..3000).map(key).collect();
    let bytes: Vec<Vec<u8>> = (0..3000).map(|i| payload(i, 4096)).collect();
    let entries: Vec<_> = (0..3000)
        .map(|i| (if i % 2 == 0 { &ns } else { &msl }, &keys[i], &bytes[i][..]))
        .collect();
    let observer = {
        store
            .save(&ns, &key(99_999), b"create the database")
            .unwrap();
        sql(&store)
    };
    let version = |conn: &Connection| -> i64 {
        conn.query_row("PRAGMA data_version", [], |r| r.get(0))
            .unwrap()
    };
    let before = version(&observer);
    store.save_many(&entries).unwrap();
    let after = version(&observer);
    assert_ne!(before, after, "the observer saw the commits");
    for (i, (ns, k, b)) in entries.iter().enumerate() {
        assert_eq!(
            store.load(ns, k).unwrap(),
            Lookup::Hit(b.to_vec()),
            "entry {i}"
        );
    }
    assert_eq!(store.usage().unwrap().entries(), 3001);
}

#[test]
fn saves_are_folded_into_the_database_file_while_the_store_is_open() {
    // SQLite alone would keep these 4 MiB in the write-ahead log until the store closed
    // (its automatic checkpoint waits for 64 MiB of log), and the close would sync them.
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    let ns = spirv();
    let keys: Vec<ContentKey> = (0..512).map(key).collect();
    let bytes: Vec<Vec<u8>> = (0..512).map(|i| payload(i, 8192)).collect();
    let entries: Vec<_> = (0..512).map(|i| (&ns, &keys[i], &bytes[i][..])).collect();
    store.save_many(&entries).unwrap();
    let saved: u64 = bytes.iter().map(|b| b.len() as u64).sum();
    let database_len = || fs::metadata(store.database_path()).map_or(0, |m| m.len());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while database_len() < saved {
        assert!(
            std::time::Instant::now() < deadline,
            "after 30 s the database file holds {} bytes of the {saved} saved",
            database_len()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for (i, (ns, k, b)) in entries.iter().enumerate() {
        assert_eq!(
            store.load(ns, k).unwrap(),
            Lookup::Hit(b.to_vec()),
            "entry {i}"
        );
    }
    drop(store);
    let reopened = LocalStore::new(dir.path());
    for (i, (ns, k, b)) in entries.iter().enumerate() {
        assert_eq!(
            reopened.load(ns, k).unwrap(),
            Lookup::Hit(b.to_vec()),
            "entry {i} after reopening"
        );
    }
}

#[test]
fn save_many_hashed_records_the_callers_hashes_as_checksums() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    let ns = spirv();
    let (one, two) = (payload(1, 300), payload(2, 300));
    // The second hash is not that of its bytes: the store took it as given, so the entry
    // fails verification when read, is reported once and is gone.
    store
        .save_many_hashed(
            &[(&ns, &key(1), &one[..]), (&ns, &key(2), &two[..])],
            &[ContentKey::hash(&one), ContentKey::hash(&one)],
        )
        .unwrap();
    assert_eq!(store.load(&ns, &key(1)).unwrap(), Lookup::Hit(one.clone()));
    match store.load(&ns, &key(2)).unwrap() {
        Lookup::Corrupt { reason, .. } => assert_eq!(reason, CorruptReason::ChecksumMismatch),
        other => panic!("a wrong hash was not caught: {other:?}"),
    }
    assert_eq!(store.load(&ns, &key(2)).unwrap(), Lookup::Miss);
    // With as many hashes as entries only: otherwise the store hashes the bytes itself.
    store
        .save_many_hashed(&[(&ns, &key(2), &two[..])], &[])
        .unwrap();
    assert_eq!(store.load(&ns, &key(2)).unwrap(), Lookup::Hit(two));
}

/// Saves `n` entries, applies `damage` to entry 0's row through a second connection, and
/// checks that the damage is reported once with `expected`, the row is gone, and a rebuild
/// takes its place. Entry 1 is untouched throughout.
fn check_corruption(damage: &str, expected: CorruptReason) {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    let ns = spirv();
    store.save(&ns, &key(0), &payload(0, 2000)).unwrap();
    store.save(&ns, &key(1), &payload(1, 2000)).unwrap();
    let changed = sql(&store)
        .execute(damage, [&key(0).as_bytes()[..]])
        .unwrap();
    assert_eq!(changed, 1, "{damage}");

    match store.load(&ns, &key(0)).unwrap() {
        Lookup::Corrupt {
            path,
            entry,
            reason,
        } => {
            assert_eq!(path, store.database_path());
            assert_eq!(entry, format!("{}/{}", ns.dir_name(), key(0).to_hex()));
            assert_eq!(reason, expected);
        }
        other => panic!("expected corrupt, got {other:?}"),
    }
    // Reported once: the row was dropped.
    assert_eq!(store.load(&ns, &key(0)).unwrap(), Lookup::Miss);
    let rows: i64 = sql(&store)
        .query_row(
            "SELECT count(*) FROM entries WHERE key = ?1",
            [&key(0).as_bytes()[..]],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows, 0);
    assert_eq!(
        store.load(&ns, &key(1)).unwrap(),
        Lookup::Hit(payload(1, 2000))
    );
    store.save(&ns, &key(0), &payload(0, 2000)).unwrap();
    assert_eq!(
        store.load(&ns, &key(0)).unwrap(),
        Lookup::Hit(payload(0, 2000))
    );
}

#[test]
fn a_flipped_payload_byte_is_a_checksum_mismatch() {
    // SQLite has no byte-level blob update; rebuild the blob with its byte 1000 changed.
    check_corruption(
        "UPDATE entries SET payload = CAST(substr(payload, 1, 1000)
             || (CASE WHEN substr(payload, 1001, 1) = x'00' THEN x'01' ELSE x'00' END)
             || substr(payload, 1002) AS BLOB)
         WHERE key = ?1",
        CorruptReason::ChecksumMismatch,
    );
}

#[test]
fn a_truncated_payload_is_a_length_mismatch() {
    check_corruption(
        "UPDATE entries SET payload = substr(payload, 1, 1500) WHERE key = ?1",
        CorruptReason::LengthMismatch {
            declared: 2000,
            actual: 1500,
        },
    );
}

#[test]
fn a_changed_size_is_a_length_mismatch() {
    check_corruption(
        "UPDATE entries SET size = 1999 WHERE key = ?1",
        CorruptReason::LengthMismatch {
            declared: 1999,
            actual: 2000,
        },
    );
}

#[test]
fn a_damaged_checksum_field_is_reported() {
    check_corruption(
        "UPDATE entries SET checksum = x'0102' WHERE key = ?1",
        CorruptReason::BadChecksumField,
    );
    check_corruption(
        "UPDATE entries SET checksum = randomblob(32) WHERE key = ?1",
        CorruptReason::ChecksumMismatch,
    );
}

#[test]
fn a_payload_of_another_type_is_reported() {
    check_corruption(
        "UPDATE entries SET payload = 'some text' WHERE key = ?1",
        CorruptReason::NotABlob { found: "text" },
    );
    check_corruption(
        "UPDATE entries SET payload = 42 WHERE key = ?1",
        CorruptReason::NotABlob {
            found: "an integer",
        },
    );
}

#[test]
fn a_row_moved_to_another_key_is_a_miss_for_both() {
    // The key is the row's index, not something the row echoes: a row whose key column
    // changed simply answers for the other key, and its checksum still vouches for it.
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    store.save(&spirv(), &key(0), &payload(0, 100)).unwrap();
    sql(&store)
        .execute("UPDATE entries SET key = ?1", [&key(5).as_bytes()[..]])
        .unwrap();
    assert_eq!(store.load(&spirv(), &key(0)).unwrap(), Lookup::Miss);
}

/// A database file full of garbage (or of zeros) is removed with a warning and the store
/// starts empty: never a panic, never an error on every build.
#[test]
fn a_garbage_database_file_is_replaced_by_an_empty_store() {
    for garbage in [
        b"this is not a database, it is a text file that happens to be here".repeat(100),
        vec![0u8; 8192],
        payload(3, 10_000),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        fs::write(store.database_path(), &garbage).unwrap();
        assert_eq!(store.load(&spirv(), &key(1)).unwrap(), Lookup::Miss);
        store.save(&spirv(), &key(1), b"rebuilt").unwrap();
        assert_eq!(
            store.load(&spirv(), &key(1)).unwrap(),
            Lookup::Hit(b"rebuilt".to_vec())
        );
        // A new instance (a new process) finds a sound database.
        let again = LocalStore::new(dir.path());
        assert_eq!(
            again.load(&spirv(), &key(1)).unwrap(),
            Lookup::Hit(b"rebuilt".to_vec())
        );
    }
}

/// Truncating the database file (a full disk, a copy cut short) loses entries; every load
/// still answers a verified hit, a miss, or a typed error, and the store recovers.
#[test]
fn a_truncated_database_file_never_serves_bad_bytes_and_recovers() {
    const N: u32 = 300;
    for keep in [0.9, 0.5, 0.1, 0.01] {
        let dir = tempfile::tempdir().unwrap();
        let path = {
            let store = LocalStore::new(dir.path());
            for chunk in (0..N).collect::<Vec<_>>().chunks(50) {
                let keys: Vec<ContentKey> = chunk.iter().map(|&i| key(i)).collect();
                let bytes: Vec<Vec<u8>> = chunk.iter().map(|&i| payload(i, 3000)).collect();
                let ns = spirv();
                let entries: Vec<_> = keys
                    .iter()
                    .zip(&bytes)
                    .map(|(k, b)| (&ns, k, &b[..]))
                    .collect();
                store.save_many(&entries).unwrap();
            }
            store.gc(u64::MAX).unwrap(); // folds the log into the file
            store.database_path().to_path_buf()
        };
        let len = fs::metadata(&path).unwrap().len();
        let cut = (len as f64 * keep) as u64;
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(cut)
            .unwrap();

        let store = LocalStore::new(dir.path());
        let mut hits = 0;
        for i in 0..N {
            match store.load(&spirv(), &key(i)) {
                Ok(Lookup::Hit(bytes)) => {
                    assert!(bytes == payload(i, 3000), "entry {i}: wrong bytes");
                    hits += 1;
                }
                Ok(Lookup::Miss | Lookup::Corrupt { .. }) => {}
                Err(err) => {
                    // Typed, and naming the database.
                    assert!(err.to_string().contains("store.sqlite"), "{err}");
                }
            }
        }
        assert!(
            hits < N,
            "keep {keep}: cut at {cut} of {len} bytes lost nothing"
        );
        // Writable again, and sound.
        store.save(&spirv(), &key(0), b"after").unwrap();
        assert_eq!(
            store.load(&spirv(), &key(0)).unwrap(),
            Lookup::Hit(b"after".to_vec())
        );
        let check: String = sql(&store)
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok", "keep {keep}");
    }
}

#[test]
fn a_foreign_sqlite_database_is_a_clear_error_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    {
        let conn = Connection::open(store.database_path()).unwrap();
        conn.execute_batch("CREATE TABLE photos (name TEXT); INSERT INTO photos VALUES ('cat');")
            .unwrap();
    }
    let err = store.save(&spirv(), &key(1), b"x").unwrap_err();
    assert!(matches!(err, StoreError::Incompatible { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("store.sqlite"), "{text}");
    assert!(text.contains("another application"), "{text}");
    assert!(store.load(&spirv(), &key(1)).is_err());
    let cats: i64 = sql(&store)
        .query_row("SELECT count(*) FROM photos", [], |r| r.get(0))
        .unwrap();
    assert_eq!(cats, 1, "the user's database is untouched");
}

/// Issue 25, item 2: kiln warned "holds tables of another application" but had already
/// switched the file to WAL (header bytes 18-19). Byte for byte untouched now, whether the
/// database is in the store's place or a link there leads to it.
#[test]
fn a_foreign_database_is_not_modified_by_a_single_byte() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("photos.db");
    {
        let conn = Connection::open(&foreign).unwrap();
        conn.execute_batch("CREATE TABLE photos (name TEXT); INSERT INTO photos VALUES ('cat');")
            .unwrap();
    }
    let before = fs::read(&foreign).unwrap();
    assert_eq!(
        &before[18..20],
        &[1, 1],
        "a rollback-journal database to begin with"
    );

    let placed = dir.path().join("placed");
    fs::create_dir(&placed).unwrap();
    fs::copy(&foreign, placed.join("store.sqlite")).unwrap();
    let store = LocalStore::new(&placed);
    assert!(store.database_path().ends_with("store.sqlite"));
    let err = store.save(&spirv(), &key(1), b"x").unwrap_err();
    assert!(err.to_string().contains("another application"), "{err}");
    assert!(
        fs::read(store.database_path()).unwrap() == before,
        "the database was modified"
    );

    let linked = dir.path().join("linked");
    fs::create_dir(&linked).unwrap();
    std::os::unix::fs::symlink(&foreign, linked.join("store.sqlite")).unwrap();
    let store = LocalStore::new(&linked);
    assert!(store.save(&spirv(), &key(1), b"x").is_err());
    assert!(store.load(&spirv(), &key(1)).is_err());
    drop(store);
    assert!(
        fs::read(&foreign).unwrap() == before,
        "the linked database was modified"
    );
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut side = foreign.clone().into_os_string();
        side.push(suffix);
        assert!(!PathBuf::from(side).exists(), "{suffix} made beside it");
    }
}

#[test]
fn another_schema_version_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    store.save(&spirv(), &key(1), b"x").unwrap();
    sql(&store)
        .execute_batch("PRAGMA user_version = 7")
        .unwrap();
    let fresh = LocalStore::new(dir.path());
    let err = fresh.load(&spirv(), &key(1)).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("schema version 7"), "{text}");
    assert!(text.contains("reads version 1"), "{text}");
}

/// A hit never writes: recency is buffered and written by `flush` (or the next save, or
/// drop), once per entry per [`LocalStore::TOUCH_INTERVAL`].
#[test]
fn hits_write_nothing_until_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    let ns = spirv();
    for i in 0..100 {
        store.save(&ns, &key(i), &payload(i, 100)).unwrap();
    }
    let observer = sql(&store);
    let last_used = |i: u32| -> i64 {
        observer
            .query_row(
                "SELECT last_used FROM entries WHERE key = ?1",
                [&key(i).as_bytes()[..]],
                |r| r.get(0),
            )
            .unwrap()
    };
    let version = || -> i64 {
        observer
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .unwrap()
    };
    // Fresh entries: hits have nothing to refresh.
    let before = version();
    for i in 0..100 {
        assert!(matches!(store.load(&ns, &key(i)).unwrap(), Lookup::Hit(_)));
    }
    store.flush().unwrap();
    assert_eq!(version(), before, "fresh hits wrote something");

    // Entries last used a day ago: hits queue a refresh, written by one flush.
    observer
        .execute("UPDATE entries SET last_used = last_used - 86400", [])
        .unwrap();
    let day_ago = last_used(5);
    let before = version();
    for _ in 0..3 {
        for i in 0..100 {
            assert!(matches!(store.load(&ns, &key(i)).unwrap(), Lookup::Hit(_)));
        }
    }
    assert_eq!(version(), before, "a hit wrote to the database");
    assert_eq!(last_used(5), day_ago);
    store.flush().unwrap();
    assert_ne!(version(), before);
    assert!(last_used(5) >= day_ago + 86400);
    let untouched: i64 = observer
        .query_row(
            "SELECT count(*) FROM entries WHERE last_used < ?1",
            [day_ago + 86400],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(untouched, 0);

    // Drop flushes too.
    observer
        .execute("UPDATE entries SET last_used = last_used - 86400", [])
        .unwrap();
    // Not `day_ago`: the flush above may have run a second after the saves.
    let unused = last_used(7);
    assert!(matches!(store.load(&ns, &key(5)).unwrap(), Lookup::Hit(_)));
    assert!(matches!(store.load(&ns, &key(6)).unwrap(), Lookup::Hit(_)));
    drop(store);
    assert!(last_used(5) > unused);
    assert!(last_used(6) > unused);
    assert_eq!(last_used(7), unused);
}

#[test]
fn the_file_per_entry_store_of_older_kilns_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let old: PathBuf = dir.path().join("v1/spirv-0123456789abcdef/ab");
    fs::create_dir_all(&old).unwrap();
    fs::write(old.join("ab".repeat(32)), b"KILNSTOR old entry").unwrap();
    fs::write(dir.path().join("user-notes.txt"), b"mine").unwrap();
    let store = LocalStore::new(dir.path());
    assert_eq!(store.load(&spirv(), &key(1)).unwrap(), Lookup::Miss);
    assert!(!dir.path().join("v1").exists());
    assert!(dir.path().join("user-notes.txt").exists());
    store.save(&spirv(), &key(1), b"new").unwrap();
    assert_eq!(
        store.load(&spirv(), &key(1)).unwrap(),
        Lookup::Hit(b"new".to_vec())
    );
}

#[test]
fn a_v1_directory_that_is_not_an_old_store_is_left_alone() {
    // `--cache-dir` may point at a directory with a user's own `v1/`.
    for (inside, is_dir) in [
        ("notes.txt", false),
        ("msl-0123456789abcdef", false),
        ("photos", true),
        ("spirv-0123", true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let v1 = dir.path().join("v1");
        fs::create_dir_all(v1.join("spirv-0123456789abcdef")).unwrap();
        if is_dir {
            fs::create_dir_all(v1.join(inside)).unwrap();
        } else {
            fs::write(v1.join(inside), b"mine").unwrap();
        }
        let store = LocalStore::new(dir.path());
        store.save(&spirv(), &key(1), b"new").unwrap();
        assert!(v1.join(inside).exists(), "{inside}");
    }
    // An empty `v1` is not a store either.
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("v1")).unwrap();
    LocalStore::new(dir.path())
        .save(&spirv(), &key(1), b"new")
        .unwrap();
    assert!(dir.path().join("v1").exists());
}

#[test]
fn a_database_deleted_while_in_use_is_recreated_by_the_next_save() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path().join(".kiln"));
    store.save(&spirv(), &key(1), b"one").unwrap();
    fs::remove_dir_all(dir.path().join(".kiln")).unwrap();
    // Pooled connections may still read the unlinked file: verified bytes, or a miss.
    assert!(matches!(
        store.load(&spirv(), &key(1)).unwrap(),
        Lookup::Miss | Lookup::Hit(_)
    ));
    store.save(&spirv(), &key(2), b"two").unwrap();
    // A new process sees what was saved after the deletion.
    let other = LocalStore::new(dir.path().join(".kiln"));
    assert_eq!(
        other.load(&spirv(), &key(2)).unwrap(),
        Lookup::Hit(b"two".to_vec())
    );
}
