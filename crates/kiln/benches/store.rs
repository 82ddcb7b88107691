//! The local store on disk: kiln's SQLite store against the file-per-entry store it replaced,
//! side by side in one run, single-threaded, on the disk the target directory is on (set
//! `KILN_BENCH_DIR` to measure elsewhere; a tmpfs hides what this measures).
//!
//! Printed from one run (medians of [`ROUNDS`] rounds, the two stores alternating which goes
//! first):
//! - `store save n=6000 files_ms= sqlite_ms= ratio=<files/sqlite>`: saving 6,000 entries of
//!   1-20 KB into an empty store, the way a build saves them: the file store one file per
//!   entry (header, temporary file, rename), SQLite in one `save_many` (batched
//!   transactions). `sqlite_single_ms` is SQLite with one transaction per `save`, for
//!   comparison.
//! - `store load n=6000 files_ms= sqlite_ms= ratio=<files/sqlite>`: loading (and verifying)
//!   all 6,000 from a new store instance, as a new process would; the files and pages are in
//!   the page cache for both.
//! - `store bytes files= sqlite= ratio=<files/sqlite>`: bytes on disk (allocated blocks, as
//!   `du` counts them, directories included) after the saves; SQLite's after its log is
//!   folded into the database (`sqlite_unfolded` before).
//!
//! Then criterion times one load hit and one batch of 100 saves per store.
//!
//! The file store lives only in this file ([`files`]), as it was in `store/local.rs` before
//! the move to SQLite: same header, same shard directories, same temporary file + rename.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use kiln::store::{ArtifactStore, ContentKey, LocalStore, Lookup, Namespace};

const N: usize = 6_000;
const ROUNDS: usize = 5;

/// The file-per-entry store, as kiln had it: `<root>/v1/<namespace>/<2 hex>/<64 hex>`, each
/// file an 84-byte header (magic, version, length, blake3, key) and the payload, written to
/// a temporary file and renamed into place; a load is open, fstat, read, verify.
mod files {
    use std::fs::{self, File};
    use std::io::{self, Read, Write};
    use std::path::{Path, PathBuf};

    use kiln::store::{ContentKey, Namespace};

    const MAGIC: [u8; 8] = *b"KILNSTOR";
    const HEADER_LEN: usize = 84;

    pub struct FileStore {
        root: PathBuf,
        prepared: std::collections::HashSet<PathBuf>,
    }

    impl FileStore {
        pub fn new(root: &Path) -> Self {
            FileStore {
                root: root.to_path_buf(),
                prepared: Default::default(),
            }
        }

        fn entry_path(&self, ns: &Namespace, key: &ContentKey) -> PathBuf {
            let hex = key.to_hex();
            self.root
                .join("v1")
                .join(ns.dir_name())
                .join(&hex[..2])
                .join(hex)
        }

        pub fn save(&mut self, ns: &Namespace, key: &ContentKey, bytes: &[u8]) -> io::Result<()> {
            let path = self.entry_path(ns, key);
            let shard = path.parent().ok_or_else(|| io::Error::other("no parent"))?;
            let ns_dir = shard
                .parent()
                .ok_or_else(|| io::Error::other("no parent"))?;
            if self.prepared.insert(ns_dir.to_path_buf()) {
                fs::create_dir_all(ns_dir)?;
                fs::write(ns_dir.join("namespace.json"), ns.to_json())?;
            }
            let mut temp = match tempfile::Builder::new().prefix(".tmp-").tempfile_in(shard) {
                Ok(temp) => temp,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    fs::create_dir_all(shard)?;
                    tempfile::Builder::new()
                        .prefix(".tmp-")
                        .tempfile_in(shard)?
                }
                Err(e) => return Err(e),
            };
            let mut header = [0u8; HEADER_LEN];
            header[..8].copy_from_slice(&MAGIC);
            header[8..12].copy_from_slice(&1u32.to_le_bytes());
            header[12..20].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
            header[20..52].copy_from_slice(blake3::hash(bytes).as_bytes());
            header[52..].copy_from_slice(key.as_bytes());
            temp.write_all(&header)?;
            temp.write_all(bytes)?;
            temp.persist(&path).map_err(|e| e.error)?;
            Ok(())
        }

        pub fn load(&self, ns: &Namespace, key: &ContentKey) -> io::Result<Option<Vec<u8>>> {
            let path = self.entry_path(ns, key);
            let mut file = match File::open(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
            let len = file.metadata()?.len() as usize;
            let mut bytes = vec![0u8; len];
            file.read_exact(&mut bytes)?;
            let ok = bytes.len() >= HEADER_LEN
                && bytes[..8] == MAGIC
                && bytes[52..84] == key.as_bytes()[..]
                && u64::from_le_bytes(bytes[12..20].try_into().unwrap_or_default())
                    == (len - HEADER_LEN) as u64
                && blake3::hash(&bytes[HEADER_LEN..]).as_bytes()[..] == bytes[20..52];
            if !ok {
                return Err(io::Error::other("corrupt entry"));
            }
            bytes.drain(..HEADER_LEN);
            Ok(Some(bytes))
        }
    }
}

/// 6,000 artifacts of 1 to 20 KB (uniformly spread, like the SPIR-V and MSL outputs of the
/// pipeline bench's project), in two namespaces, with distinct pseudo-random bytes.
struct Corpus {
    namespaces: [Namespace; 2],
    keys: Vec<ContentKey>,
    payloads: Vec<Vec<u8>>,
}

impl Corpus {
    fn new() -> Self {
        let keys: Vec<ContentKey> = (0..N)
            .map(|i| ContentKey::hash(format!("store bench {i}").as_bytes()))
            .collect();
        let payloads = keys
            .iter()
            .map(|k| {
                let b = k.as_bytes();
                let len = 1024 + (usize::from(b[0]) << 8 | usize::from(b[1])) % (19 * 1024);
                let mut out = vec![0u8; len];
                blake3::Hasher::new()
                    .update(b)
                    .finalize_xof()
                    .fill(&mut out);
                out
            })
            .collect();
        Corpus {
            namespaces: [
                Namespace::new("spirv", "naga 30.0.0"),
                Namespace::new("msl", "naga 30.0.0").with_option("lang_version", "2.4"),
            ],
            keys,
            payloads,
        }
    }

    fn ns(&self, i: usize) -> &Namespace {
        &self.namespaces[i % 2]
    }

    fn payload_bytes(&self) -> u64 {
        self.payloads.iter().map(|p| p.len() as u64).sum()
    }
}

/// Allocated bytes of every file and directory under `dir` (what `du` counts).
fn disk_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        total += meta.blocks() * 512;
        if meta.is_dir() {
            total += disk_bytes(&entry.path());
        }
    }
    total
}

fn bench_dir() -> PathBuf {
    std::env::var_os("KILN_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-store"))
}

struct Round {
    files_save: Duration,
    sqlite_save: Duration,
    sqlite_single_save: Duration,
    files_load: Duration,
    sqlite_load: Duration,
    files_bytes: u64,
    sqlite_bytes: u64,
    sqlite_unfolded: u64,
}

fn files_round(corpus: &Corpus, dir: &Path) -> (Duration, Duration, u64) {
    let root = dir.join("files");
    let mut store = files::FileStore::new(&root);
    let started = Instant::now();
    for (i, (key, bytes)) in corpus.keys.iter().zip(&corpus.payloads).enumerate() {
        store
            .save(corpus.ns(i), key, bytes)
            .expect("file store save");
    }
    let save = started.elapsed();
    let bytes = disk_bytes(&root);
    let store = files::FileStore::new(&root);
    let started = Instant::now();
    for (i, key) in corpus.keys.iter().enumerate() {
        let found = store.load(corpus.ns(i), key).expect("file store load");
        assert!(found.is_some_and(|b| b.len() == corpus.payloads[i].len()));
    }
    (save, started.elapsed(), bytes)
}

fn sqlite_round(corpus: &Corpus, dir: &Path) -> (Duration, Duration, u64, u64, Duration) {
    let root = dir.join("sqlite");
    let entries: Vec<_> = corpus
        .keys
        .iter()
        .zip(&corpus.payloads)
        .enumerate()
        .map(|(i, (k, b))| (corpus.ns(i), k, &b[..]))
        .collect();
    let started = Instant::now();
    {
        let store = LocalStore::new(&root);
        store.save_many(&entries).expect("sqlite save_many");
    }
    let save = started.elapsed();
    let unfolded = disk_bytes(&root);
    let store = LocalStore::new(&root);
    // Folds the write-ahead log into the database, as SQLite's automatic checkpoints do.
    store.gc(u64::MAX).expect("checkpoint");
    let bytes = disk_bytes(&root);
    drop(store);
    let started = Instant::now();
    {
        let store = LocalStore::new(&root);
        for (i, key) in corpus.keys.iter().enumerate() {
            match store.load(corpus.ns(i), key).expect("sqlite load") {
                Lookup::Hit(b) => assert_eq!(b.len(), corpus.payloads[i].len()),
                other => panic!("entry {i}: {other:?}"),
            }
        }
    }
    let load = started.elapsed();

    let single_root = dir.join("sqlite-single");
    let store = LocalStore::new(&single_root);
    let started = Instant::now();
    for (ns, key, bytes) in &entries {
        store.save(ns, key, bytes).expect("sqlite save");
    }
    let single = started.elapsed();
    (save, load, bytes, unfolded, single)
}

fn side_by_side(corpus: &Corpus) {
    let base = bench_dir();
    std::fs::create_dir_all(&base).expect("bench directory");
    let mut rounds = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let dir = tempfile::tempdir_in(&base).expect("bench round directory");
        let (files, sqlite) = if round % 2 == 0 {
            let files = files_round(corpus, dir.path());
            (files, sqlite_round(corpus, dir.path()))
        } else {
            let sqlite = sqlite_round(corpus, dir.path());
            (files_round(corpus, dir.path()), sqlite)
        };
        rounds.push(Round {
            files_save: files.0,
            files_load: files.1,
            files_bytes: files.2,
            sqlite_save: sqlite.0,
            sqlite_load: sqlite.1,
            sqlite_bytes: sqlite.2,
            sqlite_unfolded: sqlite.3,
            sqlite_single_save: sqlite.4,
        });
    }
    let median = |f: &dyn Fn(&Round) -> Duration| {
        let mut v: Vec<Duration> = rounds.iter().map(f).collect();
        v.sort();
        v[v.len() / 2]
    };
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    let (fs, ss, single) = (
        median(&|r| r.files_save),
        median(&|r| r.sqlite_save),
        median(&|r| r.sqlite_single_save),
    );
    let (fl, sl) = (median(&|r| r.files_load), median(&|r| r.sqlite_load));
    let last = &rounds[rounds.len() - 1];
    println!(
        "store dir={} payload_bytes={} rounds={ROUNDS} load_average={}",
        base.display(),
        corpus.payload_bytes(),
        std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(","))
            .unwrap_or_default()
    );
    println!(
        "store save n={N} files_ms={:.0} sqlite_ms={:.0} ratio={:.2} sqlite_single_ms={:.0}",
        ms(fs),
        ms(ss),
        ratio(fs, ss),
        ms(single)
    );
    println!(
        "store load n={N} files_ms={:.0} sqlite_ms={:.0} ratio={:.2}",
        ms(fl),
        ms(sl),
        ratio(fl, sl)
    );
    println!(
        "store bytes files={} sqlite={} ratio={:.3} sqlite_unfolded={}",
        last.files_bytes,
        last.sqlite_bytes,
        last.files_bytes as f64 / last.sqlite_bytes as f64,
        last.sqlite_unfolded
    );
    for (i, r) in rounds.iter().enumerate() {
        println!(
            "store round {i}: save files_ms={:.0} sqlite_ms={:.0} single_ms={:.0}; load files_ms={:.0} sqlite_ms={:.0}",
            ms(r.files_save),
            ms(r.sqlite_save),
            ms(r.sqlite_single_save),
            ms(r.files_load),
            ms(r.sqlite_load)
        );
    }
}

fn criterion_benches(c: &mut Criterion, corpus: &Corpus) {
    let base = bench_dir();
    let dir = tempfile::tempdir_in(&base).expect("bench directory");
    let mut file_store = files::FileStore::new(&dir.path().join("files"));
    let sqlite = LocalStore::new(dir.path().join("sqlite"));
    let entries: Vec<_> = corpus
        .keys
        .iter()
        .zip(&corpus.payloads)
        .enumerate()
        .map(|(i, (k, b))| (corpus.ns(i), k, &b[..]))
        .collect();
    for (ns, key, bytes) in &entries {
        file_store.save(ns, key, bytes).expect("file store save");
    }
    sqlite.save_many(&entries).expect("sqlite save_many");

    let mut group = c.benchmark_group("store_load_hit");
    let mut i = 0;
    group.bench_function(BenchmarkId::from_parameter("files"), |b| {
        b.iter(|| {
            i = (i + 7919) % N;
            black_box(
                file_store
                    .load(corpus.ns(i), &corpus.keys[i])
                    .expect("load"),
            )
        })
    });
    group.bench_function(BenchmarkId::from_parameter("sqlite"), |b| {
        b.iter(|| {
            i = (i + 7919) % N;
            black_box(sqlite.load(corpus.ns(i), &corpus.keys[i]).expect("load"))
        })
    });
    group.finish();

    // Batches of 100 new entries (fresh keys every iteration, so every save is an insert).
    let mut group = c.benchmark_group("store_save_100");
    group.sample_size(20);
    let mut batch = 0u64;
    let fresh = |batch: &mut u64| -> Vec<ContentKey> {
        *batch += 1;
        (0..100)
            .map(|j| ContentKey::hash(format!("fresh {batch} {j}").as_bytes()))
            .collect()
    };
    group.bench_function(BenchmarkId::from_parameter("files"), |b| {
        b.iter_batched(
            || fresh(&mut batch),
            |keys| {
                for (j, key) in keys.iter().enumerate() {
                    file_store
                        .save(corpus.ns(j), key, &corpus.payloads[j])
                        .expect("save");
                }
            },
            criterion::BatchSize::PerIteration,
        )
    });
    group.bench_function(BenchmarkId::from_parameter("sqlite"), |b| {
        b.iter_batched(
            || fresh(&mut batch),
            |keys| {
                let entries: Vec<_> = keys
                    .iter()
                    .enumerate()
                    .map(|(j, k)| (corpus.ns(j), k, &corpus.payloads[j][..]))
                    .collect();
                sqlite.save_many(&entries).expect("save_many");
            },
            criterion::BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn main() {
    let corpus = Corpus::new();
    side_by_side(&corpus);
    let mut c = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    criterion_benches(&mut c, &corpus);
    c.final_summary();
}
