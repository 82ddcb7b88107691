//! kill -9 while saving: a child process saves batches in a loop and is killed at random
//! points, 20 times. After each kill the store opens, SQLite finds it sound, every entry the
//! child reported committed is there, and every entry the store returns verifies.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kiln::store::{ArtifactStore, ContentKey, LocalStore, Lookup, Namespace};

/// Set in the child to the store root; the round number is in [`ROUND_ENV`].
const CHILD_ROOT_ENV: &str = "KILN_STORE_CRASH_CHILD_ROOT";
const ROUND_ENV: &str = "KILN_STORE_CRASH_ROUND";
const KILLS: u64 = 20;

fn ns(i: u64) -> Namespace {
    if i.is_multiple_of(3) {
        Namespace::new("msl", "naga 30.0.0")
    } else {
        Namespace::new("spirv", "naga 30.0.0")
    }
}

fn key(round: u64, i: u64) -> ContentKey {
    ContentKey::hash(format!("crash round {round} entry {i}").as_bytes())
}

/// 1 to 20 KB, like SPIR-V and MSL artifacts, and distinct per entry.
fn payload(round: u64, i: u64) -> Vec<u8> {
    let k = key(round, i);
    let len = 1000 + (u64::from(k.as_bytes()[0]) * 256 + u64::from(k.as_bytes()[1])) % 19_000;
    let mut out = vec![0u8; len as usize];
    blake3::Hasher::new()
        .update(k.as_bytes())
        .finalize_xof()
        .fill(&mut out);
    out
}

/// A small xorshift generator: the kill points differ per run, and the seed is printed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Checks every entry of `round` up to `committed` (the child said so) is there, and that
/// entries after it are whole or missing. Returns how many were found.
fn check_round(root: &Path, round: u64, committed: i64) -> u64 {
    let store = LocalStore::new(root);
    let conn = rusqlite::Connection::open(store.database_path()).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok", "round {round}");
    let mut found = 0;
    for i in 0..(committed + 300).max(0) as u64 {
        match store.load(&ns(i), &key(round, i)).unwrap() {
            Lookup::Hit(bytes) => {
                assert!(
                    bytes == payload(round, i),
                    "round {round} entry {i}: wrong bytes"
                );
                found += 1;
            }
            Lookup::Miss => assert!(
                i as i64 > committed,
                "round {round} entry {i}: committed (up to {committed}) but missing"
            ),
            Lookup::Corrupt { entry, reason, .. } => {
                panic!("round {round}: corrupt entry {entry} ({reason})")
            }
        }
    }
    found
}

#[test]
fn a_store_killed_while_saving_keeps_every_committed_entry_and_nothing_torn() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    println!("kill points seed {seed}");
    let mut rng = Rng(seed);
    let mut total_found = 0;
    for round in 0..KILLS {
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
            .env(CHILD_ROOT_ENV, dir.path())
            .env(ROUND_ENV, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let committed = Arc::new(AtomicI64::new(-1));
        let started = Arc::new(AtomicI64::new(0));
        let reader = {
            let committed = Arc::clone(&committed);
            let started = Arc::clone(&started);
            let stdout = child.stdout.take().unwrap();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if line.contains("child started") {
                        started.store(1, Ordering::SeqCst);
                    }
                    if let Some(n) = line
                        .split_whitespace()
                        .find_map(|w| w.strip_prefix("committed="))
                    {
                        committed.store(n.parse().unwrap(), Ordering::SeqCst);
                    }
                }
            })
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while started.load(Ordering::SeqCst) == 0 {
            assert!(Instant::now() < deadline, "child never started");
            std::thread::sleep(Duration::from_millis(1));
        }
        // Anywhere from the first transaction to a few hundred batches in.
        std::thread::sleep(Duration::from_millis(rng.next() % 400));
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        reader.join().unwrap();
        let committed = committed.load(Ordering::SeqCst);
        total_found += check_round(dir.path(), round, committed);
    }
    assert!(total_found > 0, "the children never committed anything");
}

/// The body of the child processes; a no-op in a normal run.
#[test]
fn crash_child() {
    let Some(root) = std::env::var_os(CHILD_ROOT_ENV) else {
        return;
    };
    let round: u64 = std::env::var(ROUND_ENV).unwrap().parse().unwrap();
    let store = LocalStore::new(root);
    println!("child started");
    let mut next = 0u64;
    loop {
        // Batches of 1 to 64 entries; between them, loads of earlier entries (and their
        // buffered recency, written by the next batch).
        let n = 1 + (blake3::hash(&next.to_le_bytes()).as_bytes()[0] % 64) as u64;
        let keys: Vec<(Namespace, ContentKey, Vec<u8>)> = (next..next + n)
            .map(|i| (ns(i), key(round, i), payload(round, i)))
            .collect();
        let batch: Vec<_> = keys.iter().map(|(ns, k, b)| (ns, k, &b[..])).collect();
        store.save_many(&batch).unwrap();
        next += n;
        println!("committed={}", next - 1);
        if next > 3 {
            let i = next / 2;
            assert!(matches!(
                store.load(&ns(i), &key(round, i)).unwrap(),
                Lookup::Hit(_)
            ));
        }
    }
}
