//! What kiln knows of the output files it wrote or verified: size, modification time (ns) and
//! inode, the way git's index knows the work tree. An output is trusted without reading it
//! only when all three still match; otherwise it is re-hashed, and rewritten if it differs.
//!
//! Kept beside `index.json` in `.kiln-stat` (not in the index, which must be the same bytes
//! whoever built it). A missing or unreadable file only costs re-hashing the outputs.
//!
//! Like git, kiln treats a file modified in the same clock tick as its recording as "racy":
//! a stat recorded less than [`RACY_NS`] before the set was sealed does not prove the
//! contents, so the file is re-hashed once and recorded again.
//!
//! A build of 100,000 variants records 300,000 files, so a record is 32 bytes: the path is
//! kept as a 64-bit hash, not as text. Two paths with one hash share a record, which costs
//! a re-hash and never trust: a record proves a file only if size, modification time and
//! inode all match, and two files have two inodes. The file is binary for the same reason
//! (a warm build in a new process reads it first): `KILNSTAT`, a version, the sealing time,
//! the count, then the records, little-endian.

use super::write_atomic;
use rustc_hash::FxHashMap;
use std::fs::Metadata;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

pub use crate::base::STAT_FILE;

/// Modification times this close to the sealing of the set may hide a later write in the
/// same tick of the file system's clock (ext4 stamps files with a coarse clock).
const RACY_NS: i64 = 100_000_000;

/// The file's first bytes; the version after them changes with the layout.
const MAGIC: &[u8; 8] = b"KILNSTAT";
const VERSION: u32 = 3;
const HEADER_BYTES: usize = 8 + 4 + 8 + 8;
const RECORD_BYTES: usize = 8 + 8 + 8 + 8;

/// Size, modification time (ns since the epoch; 1677 to 2262) and inode of one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileStat {
    len: u64,
    mtime_ns: i64,
    ino: u64,
}

impl FileStat {
    /// No file's stat (its modification time is before 1678): marks a forgotten record.
    const FORGOTTEN: Self = Self {
        len: u64::MAX,
        mtime_ns: i64::MIN,
        ino: u64::MAX,
    };

    pub(crate) fn of(meta: &Metadata) -> Self {
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        Self {
            len: meta.len(),
            mtime_ns,
            ino: inode(meta),
        }
    }

    /// The same as [`FileStat::of`], from `stat(2)`'s fields.
    #[cfg(unix)]
    // The fields are narrower on some platforms (a 32-bit `time_t`, `ino_t`).
    #[allow(clippy::useless_conversion)]
    fn of_raw(stat: &libc::stat) -> Self {
        let mtime_ns = if stat.st_mtime < 0 {
            0
        } else {
            i64::from(stat.st_mtime)
                .checked_mul(1_000_000_000)
                .and_then(|ns| ns.checked_add(i64::from(stat.st_mtime_nsec)))
                .unwrap_or(i64::MAX)
        };
        Self {
            len: u64::try_from(stat.st_size).unwrap_or(0),
            mtime_ns,
            ino: u64::from(stat.st_ino),
        }
    }
}

/// Stats the files under one directory by their relative paths, each through a handle on its
/// parent directory opened once: the kernel then resolves one name per file instead of
/// walking every component of its path again (walking was half of the stat time of a warm
/// build of 6,000 outputs). At most [`MAX_OPEN_PARENTS`] are held open, so that a project
/// of many shaders cannot run the build out of file descriptors; files under the others, or
/// under a parent that cannot be opened, are stat'ed by their whole path.
pub(crate) struct DirStats<'a> {
    root: &'a Path,
    #[cfg(unix)]
    parents: FxHashMap<&'a str, Option<std::os::fd::OwnedFd>>,
}

impl<'a> DirStats<'a> {
    /// Opens the parents of `relatives` (paths with `/` separators) under `root`.
    pub(crate) fn open(root: &'a Path, relatives: impl Iterator<Item = &'a str>) -> Self {
        #[cfg(unix)]
        {
            let mut parents = FxHashMap::default();
            for relative in relatives {
                let parent = relative.rsplit_once('/').map_or("", |(parent, _)| parent);
                if parents.len() == MAX_OPEN_PARENTS && !parents.contains_key(parent) {
                    continue;
                }
                parents
                    .entry(parent)
                    .or_insert_with(|| open_directory(&root.join(parent)));
            }
            Self { root, parents }
        }
        #[cfg(not(unix))]
        {
            let _ = relatives;
            Self { root }
        }
    }

    /// The stat of the regular file at `relative`, not following a link in its place;
    /// `None` if it is missing or anything but a regular file.
    pub(crate) fn file_stat(&self, relative: &str) -> Option<FileStat> {
        #[cfg(unix)]
        {
            let (parent, name) = relative.rsplit_once('/').unwrap_or(("", relative));
            let Some(Some(dir)) = self.parents.get(parent) else {
                return self.file_stat_by_path(relative);
            };
            // Names of outputs are short: terminated on the stack, not in an allocation.
            let mut buffer = [0u8; 256];
            let owned;
            let name: &std::ffi::CStr = match buffer.get_mut(..=name.len()) {
                Some(terminated) => {
                    terminated[..name.len()].copy_from_slice(name.as_bytes());
                    std::ffi::CStr::from_bytes_with_nul(terminated).ok()?
                }
                None => {
                    owned = std::ffi::CString::new(name).ok()?;
                    &owned
                }
            };
            let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
            // SAFETY: an open directory descriptor, a NUL-terminated name that outlives the
            // call, and a buffer of the size `fstatat` fills.
            let done = unsafe {
                libc::fstatat(
                    std::os::fd::AsRawFd::as_raw_fd(dir),
                    name.as_ptr(),
                    stat.as_mut_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            };
            if done != 0 {
                return None;
            }
            // SAFETY: `fstatat` succeeded, so it filled the buffer.
            let stat = unsafe { stat.assume_init() };
            (stat.st_mode & libc::S_IFMT == libc::S_IFREG).then(|| FileStat::of_raw(&stat))
        }
        #[cfg(not(unix))]
        self.file_stat_by_path(relative)
    }

    fn file_stat_by_path(&self, relative: &str) -> Option<FileStat> {
        std::fs::symlink_metadata(self.root.join(relative))
            .ok()
            .filter(Metadata::is_file)
            .map(|meta| FileStat::of(&meta))
    }
}

/// A quarter of the usual limit of 1,024 open files.
#[cfg(unix)]
const MAX_OPEN_PARENTS: usize = 256;

#[cfg(unix)]
fn open_directory(path: &Path) -> Option<std::os::fd::OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
        .ok()
        .map(std::os::fd::OwnedFd::from)
}

#[cfg(unix)]
fn inode(meta: &Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(meta)
}

#[cfg(not(unix))]
fn inode(_: &Metadata) -> u64 {
    0
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// The record key of an index path: its xxh3 hash (stable across processes and versions,
/// unlike a hasher's; a tenth of blake3's cost on a path, and a warm build looks up every
/// output). Two paths sharing a key could not make either file trusted: a record proves a
/// file only with the same inode.
fn key(path: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(path.as_bytes())
}

/// The recorded stats of an output directory's files, by index path.
///
/// Held as one sorted vector (32 bytes a record; a hash map of 300,000 records is 17 MB,
/// twice that) and a small map of the records made since it was last merged into it, so a
/// build recording a file per output neither searches a vector per record nor grows a hash
/// table to every output. A forgotten record is a tombstone until the next merge.
#[derive(Clone, Debug, Default)]
pub(crate) struct OutputStats {
    /// When the set was last sealed (end of a build): stats recorded before then, and not
    /// racy, prove their file's contents.
    sealed_ns: i64,
    /// By key, each key once; [`FileStat::FORGOTTEN`] is a forgotten record.
    sorted: Vec<(u64, FileStat)>,
    /// Records newer than `sorted`'s, by key.
    recent: FxHashMap<u64, FileStat>,
    /// Changed since read or sealed.
    changed: bool,
}

/// `recent` is merged into `sorted` once it holds this many records, or a sixteenth of
/// `sorted`: a few dozen merges over a cold build, and a small map between them.
const RECENT_MIN: usize = 4096;

impl OutputStats {
    /// Reads `dir/.kiln-stat`; missing or unreadable is empty.
    pub(crate) fn read(dir: &Path) -> Self {
        std::fs::read(dir.join(STAT_FILE))
            .ok()
            .and_then(|bytes| Self::decode(&bytes))
            .unwrap_or_default()
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let (header, records) = bytes.split_at_checked(HEADER_BYTES)?;
        let u64_at = |b: &[u8], at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
        };
        if &header[..8] != MAGIC || header[8..12] != VERSION.to_le_bytes() {
            return None;
        }
        let sealed_ns = u64_at(header, 12)? as i64;
        let count = usize::try_from(u64_at(header, 20)?).ok()?;
        if records.len() != count.checked_mul(RECORD_BYTES)? {
            return None;
        }
        let mut sorted = Vec::with_capacity(count);
        for record in records.chunks_exact(RECORD_BYTES) {
            let stat = FileStat {
                len: u64_at(record, 8)?,
                mtime_ns: u64_at(record, 16)? as i64,
                ino: u64_at(record, 24)?,
            };
            sorted.push((u64_at(record, 0)?, stat));
        }
        // Written sorted; a file that is not (an older kiln's) is sorted here, the last
        // record of a key winning as it did when the file was a map.
        if !sorted.is_sorted_by(|a, b| a.0 < b.0) {
            sorted.reverse();
            sorted.sort_by_key(|record| record.0);
            sorted.dedup_by_key(|record| record.0);
        }
        Some(Self {
            sealed_ns,
            sorted,
            recent: FxHashMap::default(),
            changed: false,
        })
    }

    fn encode(&mut self) -> Vec<u8> {
        self.merge();
        let live = self
            .sorted
            .iter()
            .filter(|(_, stat)| *stat != FileStat::FORGOTTEN);
        let count = live.clone().count();
        let mut out = Vec::with_capacity(HEADER_BYTES + count * RECORD_BYTES);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.sealed_ns.to_le_bytes());
        out.extend_from_slice(&(count as u64).to_le_bytes());
        for (key, stat) in live {
            out.extend_from_slice(&key.to_le_bytes());
            out.extend_from_slice(&stat.len.to_le_bytes());
            out.extend_from_slice(&stat.mtime_ns.to_le_bytes());
            out.extend_from_slice(&stat.ino.to_le_bytes());
        }
        out
    }

    /// Seals the set (see [`OutputStats::trusts`]) and writes it atomically.
    pub(crate) fn seal_and_write(&mut self, dir: &Path) -> std::io::Result<()> {
        self.sealed_ns = now_ns();
        let bytes = self.encode();
        write_atomic(&dir.join(STAT_FILE), &bytes)?;
        self.changed = false;
        Ok(())
    }

    /// The current record of `key`.
    fn get(&self, key: u64) -> Option<FileStat> {
        let stat = match self.recent.get(&key) {
            Some(recent) => *recent,
            None => {
                let at = self
                    .sorted
                    .binary_search_by_key(&key, |record| record.0)
                    .ok()?;
                self.sorted[at].1
            }
        };
        (stat != FileStat::FORGOTTEN).then_some(stat)
    }

    /// Sets (or, with [`FileStat::FORGOTTEN`], forgets) the record of `key`.
    fn set(&mut self, key: u64, stat: FileStat) {
        if self.get(key).unwrap_or(FileStat::FORGOTTEN) == stat {
            return;
        }
        self.changed = true;
        self.recent.insert(key, stat);
        if self.recent.len() >= RECENT_MIN.max(self.sorted.len() / 16) {
            self.merge();
        }
    }

    /// Moves `recent` into `sorted`, dropping tombstones: records of keys already there are
    /// overwritten in place, new keys are merged in from the back (no second vector).
    fn merge(&mut self) {
        let mut new = Vec::new();
        for (key, stat) in self.recent.drain() {
            match self.sorted.binary_search_by_key(&key, |record| record.0) {
                Ok(at) => self.sorted[at].1 = stat,
                Err(_) => new.push((key, stat)),
            }
        }
        new.sort_unstable_by_key(|record| record.0);
        let old_len = self.sorted.len();
        self.sorted.reserve_exact(new.len());
        self.sorted
            .resize(old_len + new.len(), (0, FileStat::FORGOTTEN));
        // Fill from the back: the largest of what is left of both goes last.
        let (mut old, mut fresh, mut to) = (old_len, new.len(), old_len + new.len());
        while fresh > 0 {
            to -= 1;
            if old > 0 && self.sorted[old - 1].0 > new[fresh - 1].0 {
                old -= 1;
                self.sorted[to] = self.sorted[old];
            } else {
                fresh -= 1;
                self.sorted[to] = new[fresh];
            }
        }
        self.sorted.retain(|record| record.1 != FileStat::FORGOTTEN);
        self.recent.shrink_to(RECENT_MIN);
    }

    /// Records the stat of a file whose contents kiln wrote or verified.
    pub(crate) fn record(&mut self, path: &str, stat: FileStat) {
        self.set(key(path), stat);
    }

    /// Makes room for `more` records at once (a cold build records one per output: growing
    /// by doubling would hold twice what it needs at its peak).
    pub(crate) fn reserve(&mut self, more: usize) {
        self.sorted.reserve_exact(more);
    }

    /// Forgets a file (removed, or not to be trusted).
    pub(crate) fn forget(&mut self, path: &str) {
        self.set(key(path), FileStat::FORGOTTEN);
    }

    /// Keeps only the records of `paths`.
    pub(crate) fn retain_only<'p>(&mut self, paths: impl Iterator<Item = &'p str>) {
        self.merge();
        let mut wanted: Vec<u64> = paths.map(key).collect();
        wanted.sort_unstable();
        let before = self.sorted.len();
        self.sorted
            .retain(|(key, _)| wanted.binary_search(key).is_ok());
        self.changed |= self.sorted.len() != before;
    }

    /// Whether the set must be written again: it changed, or a stat in it is still racy
    /// and sealing it now makes it proof.
    pub(crate) fn needs_write(&self) -> bool {
        self.changed
            || self
                .sorted
                .iter()
                .map(|record| &record.1)
                .chain(self.recent.values())
                .filter(|stat| **stat != FileStat::FORGOTTEN)
                .any(|stat| stat.mtime_ns.saturating_add(RACY_NS) >= self.sealed_ns)
    }

    /// Whether the file at `path`, now stat'ed as `current`, certainly still holds the
    /// contents it held when recorded.
    pub(crate) fn trusts(&self, path: &str, current: &FileStat) -> bool {
        self.get(key(path)).is_some_and(|recorded| {
            &recorded == current && recorded.mtime_ns.saturating_add(RACY_NS) < self.sealed_ns
        })
    }

    /// The number of files recorded.
    #[cfg(test)]
    fn len(&mut self) -> usize {
        self.merge();
        self.sorted.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_stats_agree_with_a_stat_by_path_and_see_only_regular_files() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        // More parents than are held open, so both ways of looking are used.
        let mut relatives: Vec<String> = (0..300).map(|n| format!("s{n}/p/v.spv")).collect();
        relatives.push("top.spv".to_owned());
        // The longest name a file may have, which just fits the stack buffer.
        relatives.push(format!("s3/p/{}.spv", "k".repeat(251)));
        for relative in &relatives {
            let path = root.join(relative);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, relative.as_bytes()).expect("write");
        }
        std::fs::create_dir(root.join("s0/p/dir.spv")).expect("mkdir");
        #[cfg(unix)]
        std::os::unix::fs::symlink(root.join("top.spv"), root.join("s1/p/link.spv"))
            .expect("symlink");
        let too_long = format!("s3/p/{}.spv", "k".repeat(300));
        let extra = [
            "s0/p/dir.spv",
            "s1/p/link.spv",
            "s2/p/missing.spv",
            "gone/x.spv",
            // Longer than any name may be, and holding a NUL: never found.
            &too_long,
            "s4/p/nul\0.spv",
        ];
        let stats = DirStats::open(root, relatives.iter().map(String::as_str).chain(extra));
        for relative in &relatives {
            let by_path =
                FileStat::of(&std::fs::symlink_metadata(root.join(relative)).expect("stat"));
            assert_eq!(stats.file_stat(relative), Some(by_path), "{relative}");
        }
        for relative in extra {
            assert_eq!(stats.file_stat(relative), None, "{relative}");
        }
        // A file rewritten after the parents were opened is seen as it is now.
        std::fs::write(root.join("s5/p/v.spv"), b"longer than before").expect("write");
        assert_eq!(stats.file_stat("s5/p/v.spv").map(|s| s.len), Some(18));
    }

    #[test]
    fn a_same_size_rewrite_is_not_trusted() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("a.spv");
        std::fs::write(&path, b"1f").expect("write");
        let mut stats = OutputStats::default();
        let first = FileStat::of(&std::fs::metadata(&path).expect("stat"));
        stats.record("a.spv", first);
        // Sealed long after the write: not racy.
        stats.sealed_ns = first.mtime_ns + 10 * RACY_NS;
        assert!(stats.trusts("a.spv", &first));
        // Rewritten in place with the same size: another mtime (or, in the same tick, the
        // racy rule) stops the trust.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, b"9f").expect("write");
        let second = FileStat::of(&std::fs::metadata(&path).expect("stat"));
        assert_eq!(second.len, first.len);
        assert!(!stats.trusts("a.spv", &second));
    }

    #[test]
    fn a_stat_recorded_just_before_sealing_is_racy() {
        let mut stats = OutputStats::default();
        let stat = FileStat {
            len: 2,
            mtime_ns: now_ns(),
            ino: 7,
        };
        stats.record("a.spv", stat);
        stats.sealed_ns = stat.mtime_ns + RACY_NS / 2;
        assert!(!stats.trusts("a.spv", &stat));
        stats.sealed_ns = stat.mtime_ns + 2 * RACY_NS;
        assert!(stats.trusts("a.spv", &stat));
        assert!(!stats.trusts("b.spv", &stat));
    }

    #[test]
    fn the_file_round_trips_and_anything_else_reads_as_empty() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut stats = OutputStats::default();
        let a = FileStat {
            len: 3,
            mtime_ns: 1_700_000_000_000_000_000,
            ino: 42,
        };
        stats.record("Lit/Forward/_.spv", a);
        stats.record("index.json", FileStat { ino: 7, ..a });
        stats.seal_and_write(dir.path()).expect("write");
        let read = OutputStats::read(dir.path());
        assert_eq!(read.sealed_ns, stats.sealed_ns);
        assert!(read.trusts("Lit/Forward/_.spv", &a));
        assert!(!read.trusts("Lit/Forward/_.spv", &FileStat { ino: 7, ..a }));
        assert!(read.trusts("index.json", &FileStat { ino: 7, ..a }));
        assert!(!read.trusts("Lit/Forward/FOG.spv", &a));

        let bytes = std::fs::read(dir.path().join(STAT_FILE)).expect("read");
        for broken in [
            &bytes[..bytes.len() - 1],
            &bytes[..HEADER_BYTES - 1],
            b"{\"sealed_ns\":0,\"files\":{}}".as_slice(),
        ] {
            std::fs::write(dir.path().join(STAT_FILE), broken).expect("write");
            let read = OutputStats::read(dir.path());
            assert!(read.sorted.is_empty() && !read.trusts("Lit/Forward/_.spv", &a));
        }
    }

    #[test]
    fn retain_only_keeps_the_named_records() {
        let mut stats = OutputStats::default();
        let a = FileStat {
            len: 1,
            mtime_ns: 5,
            ino: 1,
        };
        stats.record("a.spv", a);
        stats.record("b.spv", a);
        stats.sealed_ns = 10 * RACY_NS;
        stats.changed = false;
        stats.retain_only(["b.spv", "c.spv"].into_iter());
        assert!(stats.changed);
        assert!(!stats.trusts("a.spv", &a));
        assert!(stats.trusts("b.spv", &a));
        stats.forget("b.spv");
        assert_eq!(stats.len(), 0);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// Records, forgets and filters against a map, across merges and a write and read
        /// of the file.
        #[test]
        fn the_records_behave_as_a_map(
            steps in proptest::collection::vec((0u8..4, 0u16..6000, 0u64..3), 1..12_000),
        ) {
            let dir = tempfile::tempdir().expect("temp dir");
            let mut stats = OutputStats::default();
            let mut oracle: std::collections::HashMap<String, FileStat> = Default::default();
            let stat = |n: u64| FileStat { len: n, mtime_ns: 7, ino: n };
            for (i, (op, file, n)) in steps.iter().enumerate() {
                let path = format!("S/P/{file}.spv");
                match op {
                    0 | 1 => {
                        stats.record(&path, stat(*n));
                        oracle.insert(path, stat(*n));
                    }
                    2 => {
                        stats.forget(&path);
                        oracle.remove(&path);
                    }
                    _ if i % 997 == 0 => {
                        let keep: Vec<String> =
                            (0..6000).filter(|f| f % 3 != 0).map(|f| format!("S/P/{f}.spv")).collect();
                        stats.retain_only(keep.iter().map(String::as_str));
                        oracle.retain(|path, _| keep.contains(path));
                    }
                    _ => {}
                }
            }
            stats.seal_and_write(dir.path()).expect("write");
            let read = OutputStats::read(dir.path());
            for file in 0..6000u16 {
                let path = format!("S/P/{file}.spv");
                for n in 0..3 {
                    let expected = oracle.get(&path) == Some(&stat(n));
                    proptest::prop_assert_eq!(stats.trusts(&path, &stat(n)), expected);
                    proptest::prop_assert_eq!(read.trusts(&path, &stat(n)), expected);
                }
            }
            proptest::prop_assert_eq!(stats.len(), oracle.len());
        }
    }
}
