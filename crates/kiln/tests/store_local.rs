//! The local disk store: layout, namespaces, corruption handling, atomic writes, recency.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use kiln::store::entry::{self, FORMAT_VERSION, HEADER_LEN, MAGIC};
use kiln::store::{
    ArtifactStore, ContentKey, CorruptReason, LocalStore, Lookup, Namespace, StoreError,
};
use proptest::prelude::*;

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

/// Every regular file under `dir`, sorted, as paths relative to it.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(items) = fs::read_dir(dir) else { return };
        for item in items {
            let path = item.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn set_mtime(path: &Path, time: SystemTime) {
    File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(time)
        .unwrap();
}

fn mtime(path: &Path) -> SystemTime {
    fs::metadata(path).unwrap().modified().unwrap()
}

#[test]
fn round_trip_writes_one_checksummed_file_at_the_documented_path() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path().join(".kiln"));
    let ns = spirv();
    let k = key(1);
    let bytes = payload(1, 1000);

    assert_eq!(store.load(&ns, &k).unwrap(), Lookup::Miss);
    store.save(&ns, &k, &bytes).unwrap();
    assert_eq!(store.load(&ns, &k).unwrap(), Lookup::Hit(bytes.clone()));

    let hex = k.to_hex();
    let expected = dir
        .path()
        .join(".kiln/v1")
        .join(ns.dir_name())
        .join(&hex[..2])
        .join(&hex);
    assert_eq!(store.entry_path(&ns, &k), expected);
    let on_disk = fs::read(&expected).unwrap();
    assert_eq!(on_disk.len(), HEADER_LEN + bytes.len());
    assert_eq!(on_disk[..8], MAGIC);
    assert_eq!(on_disk[8..12], FORMAT_VERSION.to_le_bytes());
    assert_eq!(on_disk[12..20], (bytes.len() as u64).to_le_bytes());
    assert_eq!(on_disk[20..52], *blake3::hash(&bytes).as_bytes());
    assert_eq!(on_disk[52..84], *k.as_bytes());
    assert_eq!(on_disk[HEADER_LEN..], bytes[..]);

    let ns_dir = PathBuf::from("v1").join(ns.dir_name());
    assert_eq!(
        files_under(&dir.path().join(".kiln")),
        vec![
            ns_dir.join(&hex[..2]).join(&hex),
            ns_dir.join("namespace.json"),
        ]
    );
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
    assert_eq!(
        fs::metadata(store.entry_path(&spirv(), &key(0)))
            .unwrap()
            .len(),
        HEADER_LEN as u64
    );
}

#[test]
fn loading_from_a_store_that_does_not_exist_is_a_miss_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("never-saved");
    let store = LocalStore::new(&root);
    assert_eq!(store.load(&spirv(), &key(7)).unwrap(), Lookup::Miss);
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
    let namespace_dirs = fs::read_dir(dir.path().join("v1")).unwrap().count();
    assert_eq!(namespace_dirs, others.len() + 1);
}

#[test]
fn namespace_json_is_written_once_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    let ns = spirv()
        .with_option("lang_version", "1.5")
        .with_capability("float64");
    store.save(&ns, &key(1), b"a").unwrap();
    let path = store.namespace_dir(&ns).join("namespace.json");
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"target\": \"spirv\""), "{text}");
    assert!(text.contains("\"lang_version\": \"1.5\""), "{text}");
    assert!(text.contains("float64"), "{text}");
    assert_eq!(Namespace::from_json(&text).unwrap(), ns);

    // A later save (even from a new instance) leaves it alone.
    let old = SystemTime::now() - Duration::from_secs(3600);
    set_mtime(&path, old);
    let before = mtime(&path);
    LocalStore::new(dir.path())
        .save(&ns, &key(2), b"b")
        .unwrap();
    store.save(&ns, &key(3), b"c").unwrap();
    assert_eq!(mtime(&path), before);
}

#[test]
fn resaving_a_key_replaces_the_entry_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    store.save(&spirv(), &key(1), b"first").unwrap();
    store.save(&spirv(), &key(1), b"second").unwrap();
    assert_eq!(
        store.load(&spirv(), &key(1)).unwrap(),
        Lookup::Hit(b"second".to_vec())
    );
    assert_eq!(files_under(dir.path()).len(), 2);
}

#[test]
fn saves_leave_no_temporary_files_behind() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    let ns = spirv();
    for round in 0..2 {
        for i in 0..300 {
            store
                .save(&ns, &key(i), &payload(i, 64 + i as usize))
                .unwrap();
        }
        let files = files_under(dir.path());
        assert_eq!(
            files.len(),
            301,
            "round {round}: 300 entries + namespace.json"
        );
        let temps: Vec<_> = files
            .iter()
            .filter(|path| {
                let name = path.file_name().unwrap().to_string_lossy();
                name.starts_with(LocalStore::TEMP_PREFIX)
            })
            .collect();
        assert!(temps.is_empty(), "{temps:?}");
    }
    for i in 0..300 {
        assert_eq!(
            store.load(&ns, &key(i)).unwrap(),
            Lookup::Hit(payload(i, 64 + i as usize))
        );
    }
}

/// Saves an entry, damages it with `damage`, and checks the whole recovery: the load reports
/// `Corrupt` with the entry's path and the expected reason, the file is gone, the next load
/// is a miss, and a re-save loads fine.
fn check_corruption(damage: impl FnOnce(&LocalStore, &Path), expected: CorruptReason) {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    let ns = spirv();
    let k = key(1);
    let bytes = payload(1, 500);
    store.save(&ns, &k, &bytes).unwrap();
    let path = store.entry_path(&ns, &k);
    damage(&store, &path);

    assert_eq!(
        store.load(&ns, &k).unwrap(),
        Lookup::Corrupt {
            path: path.clone(),
            reason: expected
        }
    );
    assert!(!path.exists(), "the corrupt entry must be removed");
    assert_eq!(store.load(&ns, &k).unwrap(), Lookup::Miss);
    store.save(&ns, &k, &bytes).unwrap();
    assert_eq!(store.load(&ns, &k).unwrap(), Lookup::Hit(bytes));
}

fn edit(path: &Path, change: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = fs::read(path).unwrap();
    change(&mut bytes);
    fs::write(path, bytes).unwrap();
}

#[test]
fn flipped_payload_byte_is_a_checksum_mismatch() {
    check_corruption(
        |_, path| edit(path, |b| b[HEADER_LEN + 250] ^= 0x01),
        CorruptReason::ChecksumMismatch,
    );
}

#[test]
fn flipped_magic_byte_is_bad_magic() {
    check_corruption(
        |_, path| edit(path, |b| b[0] ^= 0x20),
        CorruptReason::BadMagic,
    );
}

#[test]
fn another_format_version_is_rejected() {
    check_corruption(
        |_, path| edit(path, |b| b[8..12].copy_from_slice(&2u32.to_le_bytes())),
        CorruptReason::UnsupportedVersion { found: 2 },
    );
}

#[test]
fn flipped_length_byte_is_a_length_mismatch() {
    check_corruption(
        |_, path| edit(path, |b| b[12] ^= 0x01),
        CorruptReason::LengthMismatch {
            declared: 501,
            actual: 500,
        },
    );
}

#[test]
fn huge_declared_length_is_a_length_mismatch_without_allocating_it() {
    check_corruption(
        |_, path| edit(path, |b| b[12..20].copy_from_slice(&u64::MAX.to_le_bytes())),
        CorruptReason::LengthMismatch {
            declared: u64::MAX,
            actual: 500,
        },
    );
}

#[test]
fn flipped_checksum_byte_is_a_checksum_mismatch() {
    check_corruption(
        |_, path| edit(path, |b| b[30] ^= 0x80),
        CorruptReason::ChecksumMismatch,
    );
}

#[test]
fn flipped_key_byte_is_a_wrong_key() {
    let mut found = *key(1).as_bytes();
    found[0] ^= 0x01;
    check_corruption(
        |_, path| edit(path, |b| b[52] ^= 0x01),
        CorruptReason::WrongKey {
            found: ContentKey::from_bytes(found),
        },
    );
}

#[test]
fn truncated_payload_is_a_length_mismatch() {
    check_corruption(
        |_, path| edit(path, |b| b.truncate(HEADER_LEN + 490)),
        CorruptReason::LengthMismatch {
            declared: 500,
            actual: 490,
        },
    );
}

#[test]
fn extended_payload_is_a_length_mismatch() {
    check_corruption(
        |_, path| edit(path, |b| b.extend_from_slice(b"trailing")),
        CorruptReason::LengthMismatch {
            declared: 500,
            actual: 508,
        },
    );
}

#[test]
fn file_truncated_inside_the_header_is_truncated() {
    check_corruption(
        |_, path| edit(path, |b| b.truncate(40)),
        CorruptReason::TruncatedHeader { len: 40 },
    );
}

#[test]
fn empty_file_is_truncated() {
    check_corruption(
        |_, path| fs::write(path, b"").unwrap(),
        CorruptReason::TruncatedHeader { len: 0 },
    );
}

#[test]
fn another_keys_entry_under_this_name_is_a_wrong_key() {
    check_corruption(
        |store, path| {
            store.save(&spirv(), &key(2), b"other").unwrap();
            fs::copy(store.entry_path(&spirv(), &key(2)), path).unwrap();
        },
        CorruptReason::WrongKey { found: key(2) },
    );
}

#[test]
fn every_single_bit_flip_anywhere_in_the_file_is_detected_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    let ns = spirv();
    let k = key(9);
    let bytes = payload(9, 40);
    store.save(&ns, &k, &bytes).unwrap();
    let path = store.entry_path(&ns, &k);
    let good = fs::read(&path).unwrap();
    let mut detected = 0;
    for offset in 0..good.len() {
        for bit in [0x01u8, 0x80] {
            let mut bad = good.clone();
            bad[offset] ^= bit;
            fs::write(&path, &bad).unwrap();
            match store.load(&ns, &k).unwrap() {
                Lookup::Corrupt { path: reported, .. } => assert_eq!(reported, path),
                other => panic!("flip of bit {bit:#x} at {offset} gave {other:?}"),
            }
            assert!(!path.exists());
            detected += 1;
        }
    }
    assert_eq!(detected, 2 * (HEADER_LEN + 40));
    fs::write(&path, &good).unwrap();
    assert_eq!(store.load(&ns, &k).unwrap(), Lookup::Hit(bytes));
}

#[test]
fn a_hit_refreshes_an_old_modification_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    store.save(&spirv(), &key(1), b"x").unwrap();
    let path = store.entry_path(&spirv(), &key(1));
    let day_ago = SystemTime::now() - Duration::from_secs(24 * 3600);
    set_mtime(&path, day_ago);
    assert!(mtime(&path) < SystemTime::now() - Duration::from_secs(23 * 3600));

    assert!(matches!(
        store.load(&spirv(), &key(1)).unwrap(),
        Lookup::Hit(_)
    ));
    let age = SystemTime::now()
        .duration_since(mtime(&path))
        .unwrap_or_default();
    assert!(
        age < Duration::from_secs(3600),
        "mtime not refreshed: {age:?} old"
    );
}

#[test]
fn a_hit_leaves_a_recent_modification_time_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    store.save(&spirv(), &key(1), b"x").unwrap();
    let path = store.entry_path(&spirv(), &key(1));
    // Recent (inside TOUCH_INTERVAL) but distinguishable from "now".
    set_mtime(&path, SystemTime::now() - LocalStore::TOUCH_INTERVAL / 2);
    let before = mtime(&path);
    assert!(matches!(
        store.load(&spirv(), &key(1)).unwrap(),
        Lookup::Hit(_)
    ));
    assert_eq!(mtime(&path), before);
}

#[test]
fn errors_name_the_path_that_failed() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("file");
    fs::write(&not_a_dir, b"not a directory").unwrap();
    let store = LocalStore::new(&not_a_dir);
    let err = store.save(&spirv(), &key(1), b"x").unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(&*not_a_dir.to_string_lossy()),
        "error does not name the path: {message}"
    );
    let err = store.load(&spirv(), &key(1)).unwrap_err();
    assert!(err.to_string().contains(&*not_a_dir.to_string_lossy()));
}

#[test]
fn sync_writes_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path()).with_sync_writes(true);
    store.save(&spirv(), &key(1), b"durable").unwrap();
    assert_eq!(
        store.load(&spirv(), &key(1)).unwrap(),
        Lookup::Hit(b"durable".to_vec())
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Arbitrary bytes at an entry's path never panic and never come back as a hit.
    #[test]
    fn arbitrary_bytes_on_disk_are_corrupt(garbage in proptest::collection::vec(any::<u8>(), 0..400)) {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        let path = store.entry_path(&spirv(), &key(1));
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, &garbage).unwrap();
        let corrupt = matches!(store.load(&spirv(), &key(1)).unwrap(), Lookup::Corrupt { .. });
        prop_assert!(corrupt);
        prop_assert!(!path.exists());
    }

    /// A well-formed header for this key followed by anything but its payload is corrupt.
    #[test]
    fn valid_header_with_wrong_payload_is_corrupt(
        payload in proptest::collection::vec(any::<u8>(), 0..200),
        tail in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        prop_assume!(tail != payload);
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        let path = store.entry_path(&spirv(), &key(1));
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut bytes = entry::encode_header(&key(1), &payload).to_vec();
        bytes.extend_from_slice(&tail);
        fs::write(&path, &bytes).unwrap();
        let corrupt = matches!(store.load(&spirv(), &key(1)).unwrap(), Lookup::Corrupt { .. });
        prop_assert!(corrupt);
        prop_assert_eq!(entry::decode(&bytes, &key(1)).is_err(), true);
    }
}

#[test]
fn a_store_deleted_under_a_running_instance_is_recreated_on_save() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join(".kiln");
    let store = LocalStore::new(&root);
    store.save(&spirv(), &key(1), b"one").unwrap();
    fs::remove_dir_all(&root).unwrap();
    assert_eq!(store.load(&spirv(), &key(1)).unwrap(), Lookup::Miss);
    store.save(&spirv(), &key(2), b"two").unwrap();
    assert_eq!(
        store.load(&spirv(), &key(2)).unwrap(),
        Lookup::Hit(b"two".to_vec())
    );
    assert!(store
        .namespace_dir(&spirv())
        .join("namespace.json")
        .is_file());
}

#[test]
fn a_save_that_cannot_land_reports_the_entry_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    let path = store.entry_path(&spirv(), &key(1));
    // A non-empty directory squatting on the entry's name makes the rename fail.
    fs::create_dir_all(path.join("squatter")).unwrap();
    match store.save(&spirv(), &key(1), b"bytes") {
        Err(StoreError::Write { path: reported, .. }) => assert_eq!(reported, path),
        other => panic!("expected a write error, got {other:?}"),
    }
    let shard = path.parent().unwrap();
    let names: Vec<_> = fs::read_dir(shard)
        .unwrap()
        .map(|item| item.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![path.file_name().unwrap().to_owned()]);
    // Loading it is an error naming the path, not a panic and not a hit.
    let err = store.load(&spirv(), &key(1)).unwrap_err();
    assert!(err.to_string().contains(&*path.to_string_lossy()));
}
