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

use super::output::write_atomic;
use rustc_hash::FxHashMap;
use std::fs::Metadata;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// The name of the stat file in the output directory.
pub const STAT_FILE: &str = ".kiln-stat";

/// Modification times this close to the sealing of the set may hide a later write in the
/// same tick of the file system's clock (ext4 stamps files with a coarse clock).
const RACY_NS: i64 = 100_000_000;

/// The file's first bytes; the version after them changes with the layout.
const MAGIC: &[u8; 8] = b"KILNSTAT";
const VERSION: u32 = 2;
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

/// The record key of an index path: the first 8 bytes of its blake3 hash (stable across
/// processes and versions, unlike a hasher's).
fn key(path: &str) -> u64 {
    let hash = blake3::hash(path.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash.as_bytes()[..8]);
    u64::from_le_bytes(first)
}

/// The recorded stats of an output directory's files, by index path.
#[derive(Clone, Debug, Default)]
pub(crate) struct OutputStats {
    /// When the set was last sealed (end of a build): stats recorded before then, and not
    /// racy, prove their file's contents.
    sealed_ns: i64,
    files: FxHashMap<u64, FileStat>,
    /// Changed since read or sealed.
    changed: bool,
}

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
        let mut files = FxHashMap::default();
        files.reserve(count);
        for record in records.chunks_exact(RECORD_BYTES) {
            let stat = FileStat {
                len: u64_at(record, 8)?,
                mtime_ns: u64_at(record, 16)? as i64,
                ino: u64_at(record, 24)?,
            };
            files.insert(u64_at(record, 0)?, stat);
        }
        Some(Self {
            sealed_ns,
            files,
            changed: false,
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + self.files.len() * RECORD_BYTES);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.sealed_ns.to_le_bytes());
        out.extend_from_slice(&(self.files.len() as u64).to_le_bytes());
        for (key, stat) in &self.files {
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
        write_atomic(&dir.join(STAT_FILE), &self.encode())?;
        self.changed = false;
        Ok(())
    }

    /// Records the stat of a file whose contents kiln wrote or verified.
    pub(crate) fn record(&mut self, path: &str, stat: FileStat) {
        if self.files.insert(key(path), stat) != Some(stat) {
            self.changed = true;
        }
    }

    /// Makes room for `more` records at once (a cold build records one per output: growing
    /// by doubling would hold the old and the new table at its peak).
    pub(crate) fn reserve(&mut self, more: usize) {
        self.files.reserve(more);
    }

    /// Forgets a file (removed, or not to be trusted).
    pub(crate) fn forget(&mut self, path: &str) {
        self.changed |= self.files.remove(&key(path)).is_some();
    }

    /// Keeps only the records of `paths`.
    pub(crate) fn retain_only<'p>(&mut self, paths: impl Iterator<Item = &'p str>) {
        // In place, against the sorted keys: a second table would be the build's peak
        // (17 MB at 100,000 variants; the keys are 2.4 MB).
        let mut wanted: Vec<u64> = paths.map(key).collect();
        wanted.sort_unstable();
        let before = self.files.len();
        self.files
            .retain(|key, _| wanted.binary_search(key).is_ok());
        self.changed |= self.files.len() != before;
    }

    /// Whether the set must be written again: it changed, or a stat in it is still racy
    /// and sealing it now makes it proof.
    pub(crate) fn needs_write(&self) -> bool {
        self.changed
            || self
                .files
                .values()
                .any(|stat| stat.mtime_ns.saturating_add(RACY_NS) >= self.sealed_ns)
    }

    /// Whether the file at `path`, now stat'ed as `current`, certainly still holds the
    /// contents it held when recorded.
    pub(crate) fn trusts(&self, path: &str, current: &FileStat) -> bool {
        self.files.get(&key(path)).is_some_and(|recorded| {
            recorded == current && recorded.mtime_ns.saturating_add(RACY_NS) < self.sealed_ns
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert!(read.files.is_empty() && !read.trusts("Lit/Forward/_.spv", &a));
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
        assert!(stats.files.is_empty());
    }
}
