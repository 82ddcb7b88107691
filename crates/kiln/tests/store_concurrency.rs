//! Several threads and several processes sharing one local store: no lost or torn entry.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::thread;

use kiln::store::{ArtifactStore, ContentKey, LocalStore, Lookup, Namespace};

/// Set in a child process to the store root it should work on.
const CHILD_ROOT_ENV: &str = "KILN_STORE_TEST_CHILD_ROOT";

fn ns() -> Namespace {
    Namespace::new("spirv", "naga 30.0.0")
}

fn key(i: u32) -> ContentKey {
    ContentKey::hash(format!("shared variant {i}").as_bytes())
}

/// Sizes from a few bytes to ~96 KiB, so some rows span many overflow pages and give
/// readers the best chance to observe a partial entry if writes were not atomic.
fn payload(i: u32) -> Vec<u8> {
    let len = 16 + (i as usize * 7919) % (96 * 1024);
    let mut out = vec![0u8; len];
    blake3::Hasher::new()
        .update(&i.to_le_bytes())
        .finalize_xof()
        .fill(&mut out);
    out
}

#[derive(Debug, Default)]
struct Tally {
    hits: u64,
    saves: u64,
}

/// One worker's share: three rounds of load-or-save over every key, then an unconditional
/// save and load of each (racing overwrites). Panics on anything but valid content.
fn work(store: &dyn ArtifactStore, keys: u32, reverse: bool) -> Tally {
    let ns = ns();
    let mut tally = Tally::default();
    let order: Vec<u32> = if reverse {
        (0..keys).rev().collect()
    } else {
        (0..keys).collect()
    };
    for _round in 0..3 {
        for &i in &order {
            match store.load(&ns, &key(i)).unwrap() {
                Lookup::Hit(bytes) => {
                    assert!(bytes == payload(i), "key {i}: wrong bytes served");
                    tally.hits += 1;
                }
                Lookup::Miss => {
                    store.save(&ns, &key(i), &payload(i)).unwrap();
                    tally.saves += 1;
                }
                Lookup::Corrupt { entry, reason, .. } => {
                    panic!("key {i}: corrupt entry {entry} ({reason})")
                }
            }
        }
    }
    // Everything again in one batch: batched writers race with the others' transactions.
    let keys: Vec<ContentKey> = order.iter().map(|&i| key(i)).collect();
    let bytes: Vec<Vec<u8>> = order.iter().map(|&i| payload(i)).collect();
    let batch: Vec<_> = keys
        .iter()
        .zip(&bytes)
        .map(|(k, b)| (&ns, k, &b[..]))
        .collect();
    store.save_many(&batch).unwrap();
    for &i in &order {
        store.save(&ns, &key(i), &payload(i)).unwrap();
        tally.saves += 1;
        match store.load(&ns, &key(i)).unwrap() {
            Lookup::Hit(bytes) => assert!(bytes == payload(i), "key {i}: wrong bytes served"),
            other => panic!("key {i}: after own save got {other:?}"),
        }
        tally.hits += 1;
    }
    tally
}

/// The store holds exactly `keys` valid entries, and SQLite finds the database sound.
fn assert_store_complete(root: &Path, keys: u32) {
    let store = LocalStore::new(root);
    for i in 0..keys {
        assert_eq!(store.load(&ns(), &key(i)).unwrap(), Lookup::Hit(payload(i)));
    }
    let usage = store.usage().unwrap();
    assert_eq!(usage.entries(), u64::from(keys));
    let conn = rusqlite::Connection::open(store.database_path()).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

#[test]
fn eight_threads_save_and_load_the_same_keys() {
    const THREADS: usize = 8;
    const KEYS: u32 = 64;
    let dir = tempfile::tempdir().unwrap();
    let shared = Arc::new(LocalStore::new(dir.path()));
    let barrier = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let barrier = Arc::clone(&barrier);
            let shared = Arc::clone(&shared);
            let root = dir.path().to_path_buf();
            thread::spawn(move || {
                // Half the threads share one instance, half bring their own, like processes.
                let own;
                let store: &dyn ArtifactStore = if t % 2 == 0 {
                    &*shared
                } else {
                    own = LocalStore::new(root);
                    &own
                };
                barrier.wait();
                work(store, KEYS, t % 4 >= 2)
            })
        })
        .collect();
    let tallies: Vec<Tally> = workers.into_iter().map(|w| w.join().unwrap()).collect();

    let saves: u64 = tallies.iter().map(|t| t.saves).sum();
    let hits: u64 = tallies.iter().map(|t| t.hits).sum();
    // Every key was first saved by someone; every unconditional save happened.
    assert!(
        saves >= u64::from(KEYS) * (THREADS as u64 + 1),
        "{tallies:?}"
    );
    // Each thread made 4 loads per key that returned valid bytes or a miss it then filled.
    assert_eq!(
        hits + saves,
        u64::from(KEYS) * THREADS as u64 * 5,
        "{tallies:?}"
    );
    assert_store_complete(dir.path(), KEYS);
}

/// Two processes of this test binary share one store directory. A start barrier over pipes
/// (each child says `ready`, then waits for `go`) makes their work overlap.
#[test]
fn two_processes_share_one_store() {
    const KEYS: u32 = 128;
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "child_process_worker",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ROOT_ENV, dir.path())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect();

    let mut outputs = Vec::new();
    for child in &mut children {
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = lines
            .by_ref()
            .map(Result::unwrap)
            // The harness prints "test child_process_worker ... " on the same line first.
            .any(|line| line.ends_with("child ready"));
        assert!(ready, "child exited before getting ready");
        outputs.push(lines);
    }
    for child in &mut children {
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    }
    let mut child_saves = 0;
    for (child, lines) in children.iter_mut().zip(outputs) {
        let done: Vec<String> = lines
            .map(Result::unwrap)
            .filter(|line| line.contains("child done"))
            .collect();
        assert!(child.wait().unwrap().success(), "a child process failed");
        assert_eq!(done.len(), 1, "{done:?}");
        let saves: u64 = done[0]
            .split_whitespace()
            .find_map(|field| field.strip_prefix("saves="))
            .unwrap()
            .parse()
            .unwrap();
        child_saves += saves;
    }
    // Each child saves every key at least once at the end, and someone saved it first.
    assert!(child_saves >= u64::from(KEYS) * 3, "saves={child_saves}");
    assert_store_complete(dir.path(), KEYS);
}

/// The body of `two_processes_share_one_store`'s child processes; a no-op in a normal run.
#[test]
fn child_process_worker() {
    let Some(root) = std::env::var_os(CHILD_ROOT_ENV) else {
        return;
    };
    println!("child ready");
    std::io::stdout().flush().unwrap();
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    assert_eq!(go.trim(), "go");
    let store = LocalStore::new(root);
    // Both children walk the keys in the same order, so they race on the same key at the
    // same moment (a non-atomic save fails this test reliably).
    let tally = work(&store, 128, false);
    println!("child done saves={} hits={}", tally.saves, tally.hits);
}

/// Several stores opening one brand-new database at the same moment, each saving and
/// loading at once: the one that switches it to WAL must not make another's first query
/// fail with "database is locked" (SQLite skips the busy handler for that upgrade; once seen
/// under load in a CI dry run of `two_processes_share_one_store`).
#[test]
fn stores_opening_a_new_database_at_once_all_succeed() {
    const OPENERS: usize = 6;
    for round in 0..40 {
        let dir = tempfile::tempdir().unwrap();
        let barrier = std::sync::Barrier::new(OPENERS);
        std::thread::scope(|scope| {
            for opener in 0..OPENERS {
                let (dir, barrier) = (dir.path(), &barrier);
                scope.spawn(move || {
                    let store = LocalStore::new(dir);
                    let i = opener as u32;
                    barrier.wait();
                    if opener % 2 == 0 {
                        store
                            .save(&ns(), &key(i), &payload(i))
                            .unwrap_or_else(|e| panic!("round {round} opener {opener}: {e}"));
                    }
                    store
                        .load(&ns(), &key(i))
                        .unwrap_or_else(|e| panic!("round {round} opener {opener}: {e}"));
                });
            }
        });
    }
}
